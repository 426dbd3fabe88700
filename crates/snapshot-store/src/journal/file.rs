//! A journal on disk: `journals/<op>.json` (the intent, written once) and
//! `journals/<op>.log` (progress lines, appended), folded into one view.

use super::*;
use std::path::{Path, PathBuf};

use crate::error::{CorruptFile, Fault, FsFailure, JournalError, ReconcileError};
use crate::format::{parse_record, to_json};
use crate::path::is_hidden;
use crate::path::{RelPath, encode_id};
use crate::seam::CrashPoint;
use crate::session::Session;

pub(super) struct Loaded {
    pub(super) intent: JournalIntent,
    pub(super) apply: Vec<Option<Result<(), String>>>,
    pub(super) rollback: Vec<Option<Result<(), String>>>,
    pub(super) undo: Vec<Option<Result<(), String>>>,
    pub(super) state: JournalState,
    pub(super) rollback_started: bool,
    /// Where its progress log is (`journals/<op>.log`).
    pub(super) log: PathBuf,
}

/// The progress log of one journal, kept open during a pass.
pub(super) struct LogWriter {
    path: PathBuf,
    file: Option<cap_std::fs::File>,
}

impl LogWriter {
    pub(super) fn new(path: PathBuf) -> Self {
        LogWriter { path, file: None }
    }
}

/// The readable journals' statuses (oldest first) and each unreadable one's op id
/// with why it cannot be read.
pub type ReadStatuses = (Vec<RestoreStatus>, Vec<(String, String)>);

impl Loaded {
    /// A writer appending to its progress log.
    pub(super) fn progress_log(&self) -> LogWriter {
        LogWriter::new(self.log.clone())
    }

    /// What [`Session::restore_status`] reports of this journal.
    fn status(&self) -> RestoreStatus {
        let l = self;
        let mut s = RestoreStatus {
            op_id: l.intent.op_id.clone(),
            target_seq: l.intent.target_seq,
            state: l.state,
            actions: l.intent.actions.len(),
            done: 0,
            failed: 0,
            pending: 0,
            rollback_started: l.rollback_started,
        };
        for r in &l.apply {
            match r {
                Some(Ok(())) => s.done += 1,
                Some(Err(_)) => s.failed += 1,
                None => s.pending += 1,
            }
        }
        s
    }
}

impl Session {
    /// Status of every open restore journal of this session (to report after a restart).
    pub fn reconcile_restores(&self) -> Result<Vec<RestoreStatus>, ReconcileError> {
        self.journal().reconcile_restores()
    }

    /// Status of one restore operation.
    pub fn restore_status(&self, op_id: &str) -> Result<RestoreStatus, JournalError> {
        self.journal().restore_status(op_id)
    }

    /// The state of restore `op_id` as the end of its progress log says it — its last
    /// `completed`, `rolled-back` or `undone` line, else `open` — without reading its intent
    /// (every planned action) or checking the lines before that one: for an intact journal,
    /// the state [`Session::restore_status`] reports, at a cost that does not grow with the
    /// journal's actions once it is over. A journal damaged before its last state line reads as
    /// that line says; [`Session::restore_status`] (which every pass reads) names the damage.
    /// [`JournalError::UnknownOp`] when the journal has no intent file.
    pub fn restore_state(&self, op_id: &str) -> Result<JournalState, JournalError> {
        self.journal().restore_state(op_id)
    }

    /// Status of every journal of this session, oldest first.
    pub fn restore_statuses(&self) -> Result<Vec<RestoreStatus>, ReconcileError> {
        self.journal().restore_statuses()
    }

    /// Like [`Session::restore_statuses`], but a journal that cannot be read does not hide
    /// the others: the readable ones come first (oldest first), then each unreadable one
    /// by its op id (decoded from the file name) with why.
    pub fn restore_statuses_each(&self) -> Result<ReadStatuses, ReconcileError> {
        self.journal().restore_statuses_each()
    }
}

impl Journal<'_> {
    /// The journal and progress-log paths of `op_id` (encoded; an id that cannot be is refused).
    fn op_journal_paths(&self, op_id: &str) -> Result<(PathBuf, PathBuf), JournalError> {
        let enc = encode_id(op_id).map_err(|reason| JournalError::InvalidOpId {
            id: op_id.into(),
            reason,
        })?;
        Ok(self.journal_paths(&enc))
    }

    pub(super) fn journal_paths(&self, enc_op: &str) -> (PathBuf, PathBuf) {
        let d = self.s.dir.join("journals");
        (
            d.join(format!("{enc_op}.json")),
            d.join(format!("{enc_op}.log")),
        )
    }

    /// Ends an apply pass that had no failure: the durable `completed` line.
    pub(super) fn complete(
        &self,
        log: &mut LogWriter,
        out: &mut RestoreOutcome,
    ) -> Result<(), FsFailure> {
        self.s
            .store
            .inner
            .fs
            .io
            .crash(CrashPoint::RestoreBeforeComplete);
        self.log(
            log,
            LogLine {
                p: Phase::Apply,
                i: None,
                s: Status::Completed,
                e: None,
            },
        )?;
        out.state = JournalState::Completed;
        Ok(())
    }

    pub(super) fn log(&self, log: &mut LogWriter, line: LogLine) -> Result<(), FsFailure> {
        let fs = &self.s.store.inner.fs;
        if log.file.is_none() {
            log.file = Some(fs.open_append(&log.path)?);
        }
        match log.file.as_mut() {
            // Progress lines may lag the workspace after a power loss (every action is
            // idempotent under continue/rollback); terminal lines are made durable.
            Some(f) => fs.append_to(f, &log.path, &to_json(&line), line.i.is_none()),
            None => Ok(()),
        }
    }

    pub(super) fn record(
        &self,
        lpath: &mut LogWriter,
        phase: Phase,
        i: usize,
        path: &RelPath,
        result: Result<Applied, String>,
        out: &mut RestoreOutcome,
    ) -> Result<bool, FsFailure> {
        match result {
            Ok(applied) => {
                self.log(
                    lpath,
                    LogLine {
                        p: phase,
                        i: Some(i),
                        s: Status::Done,
                        e: None,
                    },
                )?;
                match applied {
                    Applied::Written => out.written.push(path.clone()),
                    Applied::Deleted => out.deleted.push(path.clone()),
                    Applied::Already => out.unchanged.push(path.clone()),
                }
                Ok(true)
            }
            Err(e) => {
                self.log(
                    lpath,
                    LogLine {
                        p: phase,
                        i: Some(i),
                        s: Status::Failed,
                        e: Some(e.clone()),
                    },
                )?;
                out.failed.push(PathFailure {
                    path: path.clone(),
                    display: path.display(),
                    error: e,
                });
                Ok(false)
            }
        }
    }

    /// Runs `pass` on journal `op_id` with the session's locks held, once the journal is
    /// found in state `needed` (else [`JournalError::WrongState`] naming `operation`).
    pub(super) fn with_journal<R>(
        &self,
        op_id: &str,
        operation: &'static str,
        needed: JournalState,
        pass: impl FnOnce(Loaded) -> Result<R, JournalError>,
    ) -> Result<R, JournalError> {
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let _g = self.s.lock_shared()?;
        let l = self.load_journal(op_id)?;
        if l.state != needed {
            return Err(JournalError::WrongState {
                op_id: op_id.into(),
                state: l.state,
                operation,
                needed: needed.name(),
            });
        }
        pass(l)
    }

    pub(super) fn load_journal(&self, op_id: &str) -> Result<Loaded, JournalError> {
        let (ipath, lpath) = self.op_journal_paths(op_id)?;
        let fs = &self.s.store.inner.fs;
        let Some(bytes) = fs.read_opt(&ipath)? else {
            return Err(JournalError::UnknownOp {
                op_id: op_id.into(),
                path: ipath.to_string_lossy().into_owned(),
            });
        };
        let intent: JournalIntent = parse_record(&ipath, &bytes)?;
        Ok(self.fold_log(intent, &lpath)?)
    }

    fn fold_log(&self, intent: JournalIntent, lpath: &Path) -> Result<Loaded, Fault> {
        let n = intent.actions.len();
        let mut l = Loaded {
            intent,
            apply: vec![None; n],
            rollback: vec![None; n],
            undo: vec![None; n],
            state: JournalState::Open,
            rollback_started: false,
            log: lpath.to_path_buf(),
        };
        let bytes = self.s.store.inner.fs.read_opt(lpath)?.unwrap_or_default();
        for raw in complete_lines(&bytes)
            .split(|b| *b == b'\n')
            .filter(|r| !r.is_empty())
        {
            let line: LogLine = serde_json::from_slice(raw).map_err(|e| CorruptFile {
                path: lpath.to_string_lossy().into_owned(),
                detail: format!("bad progress line: {e}"),
            })?;
            let slot = |v: &mut Vec<Option<Result<(), String>>>,
                        i: Option<usize>,
                        r: Result<(), String>|
             -> Result<(), Fault> {
                match i {
                    Some(i) if i < n => {
                        v[i] = Some(r);
                        Ok(())
                    }
                    _ => Err(CorruptFile {
                        path: lpath.to_string_lossy().into_owned(),
                        detail: format!("progress line names action {i:?} of {n}"),
                    }
                    .into()),
                }
            };
            let r = |s: Status, e: Option<String>| {
                if s == Status::Done {
                    Ok(())
                } else {
                    Err(e.unwrap_or_default())
                }
            };
            match (line.p, line.s) {
                (_, Status::Completed) => l.state = JournalState::Completed,
                (_, Status::RolledBack) => l.state = JournalState::RolledBack,
                (_, Status::Undone) => l.state = JournalState::Undone,
                (Phase::Apply, s) => slot(&mut l.apply, line.i, r(s, line.e))?,
                (Phase::Rollback, s) => {
                    l.rollback_started = true;
                    slot(&mut l.rollback, line.i, r(s, line.e))?
                }
                (Phase::Undo, s) => slot(&mut l.undo, line.i, r(s, line.e))?,
            }
        }
        Ok(l)
    }

    pub(crate) fn reconcile_restores(&self) -> Result<Vec<RestoreStatus>, ReconcileError> {
        Ok(self
            .restore_statuses()?
            .into_iter()
            .filter(|s| s.state == JournalState::Open)
            .collect())
    }

    pub(crate) fn restore_state(&self, op_id: &str) -> Result<JournalState, JournalError> {
        let (ipath, lpath) = self.op_journal_paths(op_id)?;
        let fs = &self.s.store.inner.fs;
        if !fs.exists(&ipath).map_err(Fault::from)? {
            return Err(JournalError::UnknownOp {
                op_id: op_id.into(),
                path: ipath.to_string_lossy().into_owned(),
            });
        }
        let bytes = fs
            .read_opt(&lpath)
            .map_err(Fault::from)?
            .unwrap_or_default();
        // The fold's state is the last state line's: read from the end, the first one found.
        for raw in complete_lines(&bytes)
            .rsplit(|b| *b == b'\n')
            .filter(|r| !r.is_empty())
        {
            let line: LogLine = serde_json::from_slice(raw).map_err(|e| {
                Fault::from(CorruptFile {
                    path: lpath.to_string_lossy().into_owned(),
                    detail: format!("bad progress line: {e}"),
                })
            })?;
            match line.s {
                Status::Completed => return Ok(JournalState::Completed),
                Status::RolledBack => return Ok(JournalState::RolledBack),
                Status::Undone => return Ok(JournalState::Undone),
                _ => {}
            }
        }
        Ok(JournalState::Open)
    }

    pub(crate) fn restore_status(&self, op_id: &str) -> Result<RestoreStatus, JournalError> {
        let l = self.load_journal(op_id)?;
        Ok(l.status())
    }

    pub(crate) fn restore_statuses(&self) -> Result<Vec<RestoreStatus>, ReconcileError> {
        let mut all = self.all_journals()?;
        all.sort_by_key(|(o, _, _)| *o);
        Ok(all.into_iter().map(|(_, _, s)| s).collect())
    }

    pub(crate) fn restore_statuses_each(&self) -> Result<ReadStatuses, ReconcileError> {
        let fs = &self.s.store.inner.fs;
        let jdir = self.s.dir.join("journals");
        let mut good = Vec::new();
        let mut bad = Vec::new();
        for name in fs.list(&jdir).map_err(Fault::from)? {
            let s = name.to_string_lossy().into_owned();
            if is_hidden(&name) || !s.ends_with(".json") {
                continue;
            }
            let stem = s.trim_end_matches(".json").to_string();
            let one = (|| {
                let ipath = jdir.join(&name);
                let Some(bytes) = fs.read_opt(&ipath)? else {
                    return Ok(None);
                };
                let intent: JournalIntent = parse_record(&ipath, &bytes)?;
                let l = self.fold_log(intent, &jdir.join(format!("{stem}.log")))?;
                Ok::<_, Fault>(Some((l.intent.order, l.status())))
            })();
            match one {
                Ok(Some(x)) => good.push(x),
                Ok(None) => {}
                Err(e) => bad.push((crate::path::decode_id(&stem).unwrap_or(stem), e.to_string())),
            }
        }
        good.sort_by_key(|(o, _)| *o);
        bad.sort();
        Ok((good.into_iter().map(|(_, s)| s).collect(), bad))
    }

    fn all_journals(&self) -> Result<Vec<(u64, String, RestoreStatus)>, Fault> {
        let fs = &self.s.store.inner.fs;
        let jdir = self.s.dir.join("journals");
        let mut out = Vec::new();
        for name in fs.list(&jdir)? {
            let s = name.to_string_lossy().into_owned();
            if is_hidden(&name) || !s.ends_with(".json") {
                continue;
            }
            let ipath = jdir.join(&name);
            let Some(bytes) = fs.read_opt(&ipath)? else {
                continue;
            };
            let intent: JournalIntent = parse_record(&ipath, &bytes)?;
            let stem = s.trim_end_matches(".json").to_string();
            let l = self.fold_log(intent, &jdir.join(format!("{stem}.log")))?;
            out.push((l.intent.order, stem, l.status()));
        }
        Ok(out)
    }

    /// Removes finished journals beyond the newest `keep`; returns how many.
    pub(crate) fn prune_journals(&self, keep: usize) -> Result<usize, Fault> {
        let fs = &self.s.store.inner.fs;
        let jdir = self.s.dir.join("journals");
        let mut finished: Vec<(u64, String)> = self
            .all_journals()?
            .into_iter()
            .filter(|(_, _, s)| s.state != JournalState::Open)
            .map(|(o, stem, _)| (o, stem))
            .collect();
        finished.sort();
        let n = finished.len().saturating_sub(keep);
        for (_, stem) in &finished[..n] {
            // Intent first: a log without its intent is ignored; the reverse would look open.
            fs.remove_file(&jdir.join(format!("{stem}.json")))?;
            fs.remove_file(&jdir.join(format!("{stem}.log")))?;
        }
        Ok(n)
    }
}

/// A progress log's complete lines: a torn final line (a crash mid-append) has no newline and
/// is left out.
fn complete_lines(bytes: &[u8]) -> &[u8] {
    let complete_len = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    &bytes[..complete_len]
}
