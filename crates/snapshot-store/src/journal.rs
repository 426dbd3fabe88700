//! Journaled restore: rescue bytes and an intent journal before the first
//! mutation; one atomic action at a time; continue, rollback, undo.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::blob::{
    CopyFail, Stored, copy_blob_to, is_prefix_of_blob, read_blob_verified, store_file,
};
use crate::error::{CorruptFile, Fault, FsFailure, JournalError, ReconcileError, RestoreError};
use crate::format::{RECORD_VERSION, parse_record, to_json};
use crate::fsio::{DiskMeta, FileKind, Walk};
use crate::path::{RelPath, encode_id};
use crate::plan::{Action, Current, RestorePlan, SkippedPath, UncoveredPath};
use crate::seam::CrashPoint;
use crate::session::Session;
use crate::store::is_hidden;

/// Files up to this size that exist are restored in place in `ProcessCrash` mode
/// (their blob is held in memory while written).
const IN_PLACE_MAX: u64 = 1 << 20;

/// Errors of opening a file for writing in place after which it is replaced through
/// a temporary file instead (no write permission, a read-only bind, a running
/// executable).
const IN_PLACE_REFUSED: [i32; 4] = [
    rustix::io::Errno::ACCESS.raw_os_error(),
    rustix::io::Errno::PERM.raw_os_error(),
    rustix::io::Errno::ROFS.raw_os_error(),
    rustix::io::Errno::TXTBSY.raw_os_error(),
];

/// A state a path is put into (a restore target or a rescue state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Desired {
    /// No file at the path.
    Absent,
    /// A regular file with these bytes and mode.
    File {
        /// SHA-256 (names the blob).
        sha256: String,
        /// Length.
        size: u64,
        /// Permission bits.
        mode: u32,
    },
}

/// One journaled action.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JournalAction {
    pub path: RelPath,
    pub target: Desired,
    /// The pre-restore state (`None` when it could not be saved: the action is pre-failed).
    pub rescue: Option<Desired>,
    /// `lstat` metadata at rescue time (`None` when absent).
    pub rescue_meta: Option<DiskMeta>,
    /// Directories this action may create (outermost first); removed again if empty on rollback/undo.
    pub create_dirs: Vec<RelPath>,
    /// Set when the action was refused before any mutation.
    pub prefailed: Option<String>,
}

/// `sessions/<id>/journals/<op>.json`: written once, before the first mutation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JournalIntent {
    pub v: u32,
    pub op_id: String,
    pub session_id: String,
    pub target_seq: u64,
    pub order: u64,
    pub actions: Vec<JournalAction>,
}

impl JournalIntent {
    pub(crate) fn blob_refs(&self) -> impl Iterator<Item = &str> {
        self.actions.iter().flat_map(|a| {
            let t = match &a.target {
                Desired::File { sha256, .. } => Some(sha256.as_str()),
                Desired::Absent => None,
            };
            let r = match &a.rescue {
                Some(Desired::File { sha256, .. }) => Some(sha256.as_str()),
                _ => None,
            };
            t.into_iter().chain(r)
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Phase {
    Apply,
    Rollback,
    Undo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Status {
    Done,
    Failed,
    Completed,
    RolledBack,
    Undone,
}

/// One line of `sessions/<id>/journals/<op>.log` (append-only progress).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LogLine {
    p: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    i: Option<usize>,
    s: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<String>,
}

/// The state of a restore operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalState {
    /// Interrupted, or finished with failures: can be continued or rolled back.
    Open,
    /// Every action applied: can be undone.
    Completed,
    /// Returned to the exact pre-restore state.
    RolledBack,
    /// A completed restore that was undone.
    Undone,
}

impl fmt::Display for JournalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JournalState::Open => "open",
            JournalState::Completed => "completed",
            JournalState::RolledBack => "rolled-back",
            JournalState::Undone => "undone",
        })
    }
}

pub(crate) fn list_paths(paths: &[RelPath]) -> String {
    paths
        .iter()
        .map(|p| p.display())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A per-path failure inside a pass (the pass continued).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathFailure {
    /// Workspace-relative path.
    pub path: RelPath,
    /// Lossy text of the path.
    pub display: String,
    /// What went wrong (names the filesystem call or the integrity problem).
    pub error: String,
}

/// Result of [`Session::restore`], [`Session::continue_restore`],
/// [`Session::rollback_restore`] and [`Session::undo_restore`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreOutcome {
    /// Operation id.
    pub op_id: String,
    /// Journal state after the pass.
    pub state: JournalState,
    /// Files written (bytes replaced or recreated).
    pub written: Vec<RelPath>,
    /// Files deleted.
    pub deleted: Vec<RelPath>,
    /// Paths that were already in the wanted state.
    pub unchanged: Vec<RelPath>,
    /// Per-path failures.
    pub failed: Vec<PathFailure>,
    /// Paths the plan could not restore (restore only).
    pub skipped: Vec<SkippedPath>,
    /// Paths over the cap (restore only).
    pub uncovered: Vec<UncoveredPath>,
    /// Paths changed since the restore that an undo left as they are, as asked
    /// (undo only).
    pub kept: Vec<RelPath>,
}

impl RestoreOutcome {
    /// The outcome of a pass that has done nothing yet (state `open`).
    pub fn new(op_id: &str) -> Self {
        RestoreOutcome {
            op_id: op_id.to_string(),
            state: JournalState::Open,
            written: Vec::new(),
            deleted: Vec::new(),
            unchanged: Vec::new(),
            failed: Vec::new(),
            skipped: Vec::new(),
            uncovered: Vec::new(),
            kept: Vec::new(),
        }
    }
}

/// Status of one journal, as reported by [`Session::reconcile_restores`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreStatus {
    /// Operation id.
    pub op_id: String,
    /// Target anchor of the restore.
    pub target_seq: u64,
    /// State.
    pub state: JournalState,
    /// Number of actions.
    pub actions: usize,
    /// Actions applied.
    pub done: usize,
    /// Actions whose last attempt failed.
    pub failed: usize,
    /// Actions never attempted (the interruption point).
    pub pending: usize,
    /// Whether a rollback was started.
    pub rollback_started: bool,
}

struct Loaded {
    intent: JournalIntent,
    apply: Vec<Option<Result<(), String>>>,
    rollback: Vec<Option<Result<(), String>>>,
    undo: Vec<Option<Result<(), String>>>,
    state: JournalState,
    rollback_started: bool,
}

/// The progress log of one journal, kept open during a pass.
struct LogWriter {
    path: PathBuf,
    file: Option<cap_std::fs::File>,
}

impl LogWriter {
    fn new(path: PathBuf) -> Self {
        LogWriter { path, file: None }
    }
}

/// Why a rescue copy could not be made.
enum RescueFail {
    /// The path is not what the plan saw: the action is refused, nothing else is affected.
    Changed(String),
    /// A filesystem call failed: the whole restore gives up before any mutation.
    Io(FsFailure),
}

impl From<FsFailure> for RescueFail {
    fn from(e: FsFailure) -> Self {
        RescueFail::Io(e)
    }
}

fn changed(text: &str) -> RescueFail {
    RescueFail::Changed(text.to_string())
}

/// What a single apply did.
enum Applied {
    Written,
    Deleted,
    Already,
}

/// How a mutation checks that the path is still what it expects.
enum Guard<'a> {
    /// Current `lstat` must equal this (`None` = absent): the first pass.
    Meta(Option<&'a DiskMeta>),
    /// Current content must be one of these states (or already the target).
    Content(Vec<&'a Desired>),
}

impl Session {
    fn journal_paths(&self, enc_op: &str) -> (PathBuf, PathBuf) {
        let d = self.dir.join("journals");
        (
            d.join(format!("{enc_op}.json")),
            d.join(format!("{enc_op}.log")),
        )
    }

    /// Ends an apply pass that had no failure: the durable `completed` line.
    fn complete(&self, log: &mut LogWriter, out: &mut RestoreOutcome) -> Result<(), FsFailure> {
        self.store
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

    fn log(&self, log: &mut LogWriter, line: LogLine) -> Result<(), FsFailure> {
        let fs = &self.store.inner.fs;
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

    fn load_journal(&self, op_id: &str) -> Result<Loaded, JournalError> {
        let enc = encode_id(op_id).map_err(|reason| JournalError::InvalidOpId {
            id: op_id.into(),
            reason,
        })?;
        let (ipath, lpath) = self.journal_paths(&enc);
        let fs = &self.store.inner.fs;
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
        };
        let bytes = self.store.inner.fs.read_opt(lpath)?.unwrap_or_default();
        let complete_len = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(0);
        // A torn final line (crash mid-append) has no newline: it is ignored.
        for raw in bytes[..complete_len]
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

    /// Applies `desired` at `rel`, checking `guard` first. Never follows a symlink.
    /// In `ProcessCrash` mode a small file that exists is rewritten in place (the
    /// blob read and verified first, then the file cut and written; `partial` is the
    /// crash point between its two halves); otherwise the bytes go to a temporary file
    /// (verified against the blob's SHA-256 while written) renamed over the path.
    fn apply_state(
        &self,
        rel: &RelPath,
        desired: &Desired,
        create: bool,
        guard: Guard<'_>,
        partial: Option<CrashPoint>,
    ) -> Result<Applied, String> {
        let mut created = Vec::new();
        let want_create = create && matches!(desired, Desired::File { .. });
        let walk = self
            .ws
            .walk_parent(rel, want_create, &mut created)
            .map_err(|e| e.to_string())?;
        let dir = match walk {
            Walk::Blocked(true) => return Err("a parent directory is a symbolic link".into()),
            Walk::Blocked(false) => return Err("a parent component is not a directory".into()),
            Walk::Missing(_) => {
                // Parent missing: the path is absent.
                return match (desired, &guard) {
                    (Desired::Absent, _) => Ok(Applied::Already),
                    _ => Err("parent directory is missing".into()),
                };
            }
            Walk::Parent(d) => d,
        };
        let (_, name) = rel.split_last();
        let cur = self.ws.lstat(&dir, name, rel).map_err(|e| e.to_string())?;
        match &guard {
            Guard::Meta(expected) => {
                if cur.as_ref() != *expected {
                    return Err("changed since the restore began; left as it is".into());
                }
            }
            Guard::Content(allowed) => {
                let now = self
                    .content_state(rel, cur.as_ref())
                    .map_err(|e| e.to_string())?;
                match now {
                    None => return Err("is no longer a regular file; left as it is".into()),
                    Some(now) if &now == desired => return Ok(Applied::Already),
                    Some(now) if allowed.iter().any(|a| **a == now) => {}
                    Some(_) => {
                        // An in-place write of one of these states, interrupted.
                        let states = allowed.iter().copied().chain(std::iter::once(desired));
                        if !self.torn_write(rel, states).map_err(|e| e.to_string())? {
                            return Err("changed since the restore began; left as it is".into());
                        }
                    }
                }
            }
        }
        match desired {
            Desired::Absent => match cur {
                None => Ok(Applied::Already),
                Some(m) if m.kind == FileKind::File => {
                    self.ws.unlink(&dir, name, rel).map_err(|e| e.to_string())?;
                    Ok(Applied::Deleted)
                }
                Some(_) => Err("is not a regular file; not deleted".into()),
            },
            Desired::File { sha256, size, mode } => {
                if let Some(m) = &cur {
                    if m.kind != FileKind::File {
                        return Err("is not a regular file; not replaced".into());
                    }
                    if !self.ws.io.durable && *size <= IN_PLACE_MAX && m.nlink == 1 {
                        let wrote = self
                            .write_in_place(&dir, name, rel, (sha256, *size, *mode), m, partial)
                            .map_err(|e| e.to_string())?;
                        if wrote {
                            return Ok(Applied::Written);
                        }
                    }
                }
                let (tmp, mut f) = self
                    .ws
                    .create_tmp(&dir, name, rel)
                    .map_err(|e| e.to_string())?;
                let r = (|| -> Result<(), CopyFail> {
                    copy_blob_to(&self.store.inner.fs, &self.ws, sha256, *size, &mut f, rel)?;
                    self.ws.set_mode(&f, rel, *mode)?;
                    self.ws.sync_file(&f, rel)?;
                    Ok(())
                })();
                drop(f);
                if let Err(e) = r {
                    self.ws.discard_tmp(&dir, &tmp);
                    return Err(e.to_string());
                }
                if let Err(e) = self.ws.rename(&dir, &tmp, name, rel) {
                    self.ws.discard_tmp(&dir, &tmp);
                    return Err(e.to_string());
                }
                Ok(Applied::Written)
            }
        }
    }

    /// Writes blob `sha256` (`size` bytes, `mode`) over the existing file `name` in
    /// `dir`, keeping its inode: the blob is read and verified first, then the file
    /// (the one `seen` describes: same inode, one link) is cut to zero and written
    /// from the start, and its mode set. An interruption leaves a prefix of the new
    /// bytes, which continue and rollback recognise ([`Session::torn_write`]) because
    /// the intent journal names the blob before the first write. `Ok(false)`, having
    /// changed nothing, when the file cannot be opened for writing (no write
    /// permission, a running executable): the caller replaces it instead.
    fn write_in_place(
        &self,
        dir: &impl rustix::fd::AsFd,
        name: &[u8],
        rel: &RelPath,
        (sha256, size, mode): (&str, u64, u32),
        seen: &DiskMeta,
        partial: Option<CrashPoint>,
    ) -> Result<bool, CopyFail> {
        let bytes = read_blob_verified(&self.store.inner.fs, sha256, size)?;
        let (mut f, now) = match self.ws.open_write(dir, name, rel) {
            Ok(o) => o,
            Err(e)
                if e.raw_os_error()
                    .is_some_and(|c| IN_PLACE_REFUSED.contains(&c)) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        if now.kind != FileKind::File
            || now.ino != seen.ino
            || now.dev != seen.dev
            || now.nlink != 1
        {
            return Err(CopyFail::Changed);
        }
        self.ws.truncate(&f, rel, 0)?;
        let partial = partial.filter(|_| self.ws.io.seam.wants_partial_writes());
        let half = if partial.is_some() {
            bytes.len() / 2
        } else {
            0
        };
        if let Some(p) = partial.filter(|_| half > 0) {
            self.ws.write_all(&mut f, rel, &bytes[..half])?;
            self.store.inner.fs.io.crash(p);
        }
        self.ws.write_all(&mut f, rel, &bytes[half..])?;
        if now.mode & 0o7777 != mode & 0o7777 {
            self.ws.set_mode(&f, rel, mode)?;
        }
        Ok(true)
    }

    /// Whether `rel` holds what an interrupted in-place write of one of `states`
    /// leaves: a regular file whose bytes are the first bytes of that state's blob
    /// (its mode not yet set).
    fn torn_write<'s>(
        &self,
        rel: &RelPath,
        states: impl Iterator<Item = &'s Desired>,
    ) -> Result<bool, FsFailure> {
        let mut created = Vec::new();
        let Walk::Parent(dir) = self.ws.walk_parent(rel, false, &mut created)? else {
            return Ok(false);
        };
        let (_, name) = rel.split_last();
        for state in states {
            let Desired::File { sha256, size, .. } = state else {
                continue;
            };
            let opened = match self.ws.open_read(&dir, name, rel) {
                Ok(o) => o,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            let Some((mut f, meta)) = opened else {
                return Ok(false);
            };
            if meta.kind != FileKind::File || meta.nlink != 1 {
                return Ok(false);
            }
            if is_prefix_of_blob(
                &self.store.inner.fs,
                &self.ws,
                &mut f,
                rel,
                meta.size,
                sha256,
                *size,
            )? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The content state of `rel` (`None` when something other than a regular file or absence).
    fn content_state(
        &self,
        rel: &RelPath,
        meta: Option<&DiskMeta>,
    ) -> Result<Option<Desired>, FsFailure> {
        match meta {
            None => Ok(Some(Desired::Absent)),
            Some(m) if m.kind != FileKind::File => Ok(None),
            Some(_) => Ok(self
                .hash_current(rel)?
                .map(|(sha256, size, m)| Desired::File {
                    sha256,
                    size,
                    mode: m.mode,
                })),
        }
    }

    fn current_content(&self, rel: &RelPath) -> Result<Option<Desired>, FsFailure> {
        match self.observe(rel)? {
            crate::plan::Observed::Absent(_) => Ok(Some(Desired::Absent)),
            crate::plan::Observed::Blocked(_) => Ok(None),
            crate::plan::Observed::File { meta } => self.content_state(rel, Some(&meta)),
        }
    }

    /// When the plan hashed this file, its content is already in the store, and nothing
    /// in its metadata changed since, the stored blob is the rescue copy (no re-read).
    fn planned_blob(
        &self,
        current: &Current,
        now: &DiskMeta,
    ) -> Result<Option<Desired>, FsFailure> {
        if let Current::File {
            sha256: Some(sha),
            meta,
            ..
        } = current
        {
            if meta == now && self.store.inner.fs.blob_size(sha)? == Some(now.size) {
                return Ok(Some(Desired::File {
                    sha256: sha.clone(),
                    size: now.size,
                    mode: now.mode,
                }));
            }
        }
        Ok(None)
    }

    /// Saves the current bytes of `rel` as a rescue blob; checks them against the plan.
    fn rescue(
        &self,
        rel: &RelPath,
        current: &Current,
    ) -> Result<(Desired, Option<DiskMeta>), RescueFail> {
        let mut created = Vec::new();
        let walk = self.ws.walk_parent(rel, false, &mut created)?;
        let (_, name) = rel.split_last();
        let (state, meta) = match walk {
            Walk::Blocked(..) => {
                return Err(changed(
                    "a parent changed since the plan (now a symlink or not a directory)",
                ));
            }
            Walk::Missing(_) => (Desired::Absent, None),
            Walk::Parent(dir) => match self.ws.lstat(&dir, name, rel)? {
                None => (Desired::Absent, None),
                Some(m) if m.kind != FileKind::File || m.nlink > 1 => {
                    return Err(changed(
                        "changed since the plan (no longer a plain regular file)",
                    ));
                }
                Some(m) => match self.planned_blob(current, &m)? {
                    Some(state) => (state, Some(m)),
                    None => {
                        let opened = match self.ws.open_read(&dir, name, rel) {
                            Ok(o) => o,
                            Err(e)
                                if e.raw_os_error()
                                    == Some(rustix::io::Errno::LOOP.raw_os_error()) =>
                            {
                                return Err(changed(
                                    "changed since the plan (now a symbolic link)",
                                ));
                            }
                            Err(e) => return Err(e.into()),
                        };
                        let Some((mut f, fm)) = opened else {
                            return Err(changed("changed since the plan (vanished)"));
                        };
                        if fm.kind != FileKind::File || fm.nlink > 1 {
                            return Err(changed(
                                "changed since the plan (no longer a plain regular file)",
                            ));
                        }
                        match store_file(&self.store.inner.fs, &self.ws, &mut f, rel, fm.size, 0)? {
                            Stored::Blob { sha256, size, .. } => (
                                Desired::File {
                                    sha256,
                                    size,
                                    mode: fm.mode,
                                },
                                Some(fm),
                            ),
                            Stored::OverCap { size } => {
                                return Err(changed(&format!(
                                    "rescue copy of {size} bytes refused"
                                )));
                            }
                        }
                    }
                },
            },
        };
        let matches = match (current, &state, &meta) {
            (Current::Absent, Desired::Absent, _) => true,
            (
                Current::File {
                    meta: pm,
                    sha256: psha,
                    ..
                },
                Desired::File { sha256, .. },
                Some(m),
            ) => {
                pm.size == m.size
                    && pm.ino == m.ino
                    && pm.mtime_s == m.mtime_s
                    && pm.mtime_ns == m.mtime_ns
                    && pm.mode == m.mode
                    && psha.as_ref().map(|p| p == sha256).unwrap_or(true)
            }
            _ => false,
        };
        if !matches {
            return Err(changed("changed since the plan; left as it is"));
        }
        Ok((state, meta))
    }

    /// Runs a plan as journaled operation `op_id`.
    ///
    /// Before the first mutation, saves the current bytes of every planned path
    /// (rescue) and writes the intent journal. Then applies one action at a time,
    /// each an atomic replace or an unlink; a per-path failure is recorded and the
    /// pass goes on. Without failures the journal ends `completed`; otherwise it
    /// stays open for [`Session::continue_restore`] or [`Session::rollback_restore`].
    ///
    /// A path that changed since the plan is refused before any mutation and
    /// reported in `failed`; it does not keep the journal open.
    ///
    /// Restored states are deliberately not marked as known to the tracked cache:
    /// the next [`Session::recheck_tracked`] records them (deduplicated) together with
    /// the state before them at the previous boundary, so later rewinds stay exact.
    pub fn restore(&self, plan: &RestorePlan, op_id: &str) -> Result<RestoreOutcome, RestoreError> {
        let enc = encode_id(op_id).map_err(|reason| RestoreError::InvalidOpId {
            id: op_id.into(),
            reason,
        })?;
        if plan.session_id != self.id {
            return Err(RestoreError::WrongSession {
                plan_session: plan.session_id.clone(),
                session: self.id.clone(),
            });
        }
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.lock_shared()?;
        let fs = &self.store.inner.fs;
        let (ipath, lpath) = self.journal_paths(&enc);
        if fs.exists(&ipath)? {
            return Err(RestoreError::DuplicateOp {
                op_id: op_id.into(),
                path: ipath.to_string_lossy().into_owned(),
            });
        }
        fs.remove_file(&lpath)?; // an orphan log from a pruned journal of the same id
        let mut actions = Vec::with_capacity(plan.actions.len());
        for a in &plan.actions {
            let (target, create_dirs) = match &a.action {
                Action::Write { sha256, size, mode } => (
                    Desired::File {
                        sha256: sha256.clone(),
                        size: *size,
                        mode: *mode,
                    },
                    Vec::new(),
                ),
                Action::Recreate {
                    sha256,
                    size,
                    mode,
                    missing_dirs,
                } => (
                    Desired::File {
                        sha256: sha256.clone(),
                        size: *size,
                        mode: *mode,
                    },
                    missing_dirs.clone(),
                ),
                Action::Delete => (Desired::Absent, Vec::new()),
            };
            let (rescue, rescue_meta, prefailed) = match self.rescue(&a.path, &a.current) {
                Ok((r, m)) => (Some(r), m, None),
                Err(RescueFail::Changed(e)) => (None, None, Some(e)),
                // Nothing has been changed yet: give up cleanly.
                Err(RescueFail::Io(source)) => {
                    return Err(RestoreError::Rescue {
                        path: a.path.display(),
                        source,
                    });
                }
            };
            actions.push(JournalAction {
                path: a.path.clone(),
                target,
                rescue,
                rescue_meta,
                create_dirs,
                prefailed,
            });
        }
        fs.io.crash(CrashPoint::RestoreRescued);
        let intent = JournalIntent {
            v: RECORD_VERSION,
            op_id: op_id.to_string(),
            session_id: self.id.clone(),
            target_seq: plan.target_seq,
            order: self.store.next_order(),
            actions,
        };
        fs.write_atomic(&ipath, &to_json(&intent))?;
        fs.io.crash(CrashPoint::RestoreJournalWritten);
        let mut lpath = LogWriter::new(lpath);
        let mut out = RestoreOutcome::new(op_id);
        let mut hard_failures = 0usize;
        out.skipped = plan.skipped.clone();
        out.uncovered = plan.uncovered.clone();
        for (i, a) in intent.actions.iter().enumerate() {
            let result = match &a.prefailed {
                Some(e) => Err(e.clone()),
                None => self.apply_state(
                    &a.path,
                    &a.target,
                    true,
                    Guard::Meta(a.rescue_meta.as_ref()),
                    Some(CrashPoint::RestoreActionPartial(i)),
                ),
            };
            if a.prefailed.is_none() {
                fs.io.crash(CrashPoint::RestoreActionApplied(i));
            }
            if !self.record(&mut lpath, Phase::Apply, i, &a.path, result, &mut out)?
                && a.prefailed.is_none()
            {
                hard_failures += 1;
            }
            fs.io.crash(CrashPoint::RestoreActionLogged(i));
        }
        self.remove_emptied_dirs(&plan.remove_dirs, &mut out);
        self.sync_touched(&out)?;
        if hard_failures == 0 {
            self.complete(&mut lpath, &mut out)?;
        }
        Ok(out)
    }

    fn record(
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

    /// Durable mode: `fsync` every directory a pass wrote into or deleted from (and
    /// their ancestors), once, before a terminal line claims the pass is complete.
    fn sync_touched(&self, out: &RestoreOutcome) -> Result<(), FsFailure> {
        if !self.ws.io.durable {
            return Ok(());
        }
        let mut dirs: std::collections::BTreeSet<Vec<u8>> = std::collections::BTreeSet::new();
        for p in out.written.iter().chain(&out.deleted) {
            let (parents, _) = p.split_last();
            for n in 0..=parents.len() {
                dirs.insert(parents[..n].join(&b'/'));
            }
        }
        for d in dirs {
            // A child name under `d` whose parent chain is exactly `d`.
            let mut child = d.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.push(b'_');
            let Ok(probe) = RelPath::from_bytes(&child) else {
                continue;
            };
            let mut created = Vec::new();
            if let Walk::Parent(dir) = self.ws.walk_parent(&probe, false, &mut created)? {
                self.ws.sync_dir(&dir, &probe)?;
            }
        }
        Ok(())
    }

    /// Finishes an open (interrupted or partly failed) restore: retries every action
    /// not yet applied. A path changed since the restore began is left alone (failure).
    pub fn continue_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.lock_shared()?;
        let l = self.load_journal(op_id)?;
        if l.state != JournalState::Open {
            return Err(wrong_state(op_id, l.state, "continue", "open"));
        }
        let enc = encode_id(op_id).map_err(|reason| JournalError::InvalidOpId {
            id: op_id.into(),
            reason,
        })?;
        let (_, lpath) = self.journal_paths(&enc);
        let mut lpath = LogWriter::new(lpath);
        let mut out = RestoreOutcome::new(op_id);
        for (i, a) in l.intent.actions.iter().enumerate() {
            // Refused before any mutation (changed since the plan): settled. Everything
            // else is re-applied (a no-op when already in the target state), since a
            // partial rollback may have reverted actions logged as done.
            if a.prefailed.is_some() {
                continue;
            }
            let result = match &a.rescue {
                None => Err("no rescue copy".into()),
                Some(rescue) => self.apply_state(
                    &a.path,
                    &a.target,
                    true,
                    Guard::Content(vec![rescue]),
                    Some(CrashPoint::RestoreActionPartial(i)),
                ),
            };
            self.store
                .inner
                .fs
                .io
                .crash(CrashPoint::RestoreActionApplied(i));
            self.record(&mut lpath, Phase::Apply, i, &a.path, result, &mut out)?;
            self.store
                .inner
                .fs
                .io
                .crash(CrashPoint::RestoreActionLogged(i));
        }
        self.sync_touched(&out)?;
        if out.failed.is_empty() {
            self.complete(&mut lpath, &mut out)?;
        }
        Ok(out)
    }

    /// Returns an open restore to the exact pre-restore state: every path gets its
    /// rescue bytes back (or is deleted if it was absent), and directories the
    /// restore created are removed when empty.
    pub fn rollback_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.lock_shared()?;
        let l = self.load_journal(op_id)?;
        if l.state != JournalState::Open {
            return Err(wrong_state(op_id, l.state, "rollback", "open"));
        }
        let all: Vec<usize> = (0..l.intent.actions.len()).collect();
        self.revert(op_id, &l, &all, Phase::Rollback)
    }

    /// Undoes a completed restore (the user-facing "restore to before this rewind").
    /// Refused as stale, listing the paths, when any restored path changed since.
    pub fn undo_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.undo_restore_with(op_id, &[], &[])
    }

    /// The paths a completed restore changed that changed again since (an undo must
    /// be told whether to keep or replace each). Changes nothing.
    pub fn undo_changed_paths(&self, op_id: &str) -> Result<Vec<RelPath>, JournalError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.lock_shared()?;
        let l = self.load_journal(op_id)?;
        if l.state != JournalState::Completed {
            return Err(wrong_state(op_id, l.state, "undo", "completed"));
        }
        Ok(self
            .changed_since(&l)?
            .into_iter()
            .map(|(i, _)| l.intent.actions[i].path.clone())
            .collect())
    }

    /// The applied actions of a completed restore whose path changed since (the disk
    /// holds neither the restored nor the pre-restore state), with what it holds now
    /// (`None`: no longer a file or absence — a directory, a symlink).
    fn changed_since(&self, l: &Loaded) -> Result<Vec<(usize, Option<Desired>)>, JournalError> {
        let mut changed = Vec::new();
        for (i, a) in l.intent.actions.iter().enumerate() {
            if !matches!(l.apply[i], Some(Ok(()))) {
                continue;
            }
            let now = self.current_content(&a.path).map_err(JournalError::Fs)?;
            let same = now
                .as_ref()
                .is_some_and(|now| *now == a.target || Some(now) == a.rescue.as_ref());
            // An interrupted undo's in-place write of the pre-restore bytes is the undo's.
            let torn = !same
                && now.is_some()
                && self
                    .torn_write(&a.path, a.rescue.iter())
                    .map_err(JournalError::Fs)?;
            if !same && !torn {
                changed.push((i, now));
            }
        }
        Ok(changed)
    }

    /// Plans doing again what the undone restore `op_id` did (a redo): per path its
    /// undo put back, the state the restore had written, compared with the disk now.
    /// A path changed since the undo (the disk holds neither what the undo left nor
    /// that state) must be decided: in `keep` it is left out of the plan, in `take`
    /// it is planned all the same; while any is in neither list the plan is refused
    /// as stale, naming them. The plan runs as a restore of its own (its own journal,
    /// so it can be undone in turn). Changes nothing.
    pub fn plan_redo(
        &self,
        op_id: &str,
        take: &[RelPath],
        keep: &[RelPath],
    ) -> Result<crate::plan::RestorePlan, JournalError> {
        let l = {
            let mut st = self.lock_state();
            self.prepare(&mut st)?;
            let _g = self.lock_shared()?;
            self.load_journal(op_id)?
        };
        if l.state != JournalState::Undone {
            return Err(wrong_state(op_id, l.state, "redo", "undone"));
        }
        let mut stale = Vec::new();
        let mut picks = Vec::new();
        for (i, a) in l.intent.actions.iter().enumerate() {
            if !matches!(l.undo[i], Some(Ok(()))) {
                continue;
            }
            let Some(rescue) = &a.rescue else { continue };
            let now = self.current_content(&a.path).map_err(JournalError::Fs)?;
            let as_undone = now
                .as_ref()
                .is_some_and(|now| now == rescue || *now == a.target);
            if !as_undone {
                if keep.contains(&a.path) {
                    continue;
                }
                if !take.contains(&a.path) || now.is_none() {
                    stale.push(a.path.clone());
                    continue;
                }
            }
            let before = match &a.target {
                Desired::Absent => crate::format::BeforeState::Absent,
                Desired::File { sha256, size, mode } => crate::format::BeforeState::File {
                    sha256: sha256.clone(),
                    size: *size,
                    mode: *mode,
                },
            };
            picks.push((a.path.clone(), l.intent.target_seq, before));
        }
        if !stale.is_empty() {
            return Err(JournalError::Stale {
                op_id: op_id.into(),
                paths: stale,
            });
        }
        self.plan_picks(l.intent.target_seq, picks)
            .map_err(|e| match e {
                crate::error::PlanError::Fs(f) => JournalError::Fs(f),
                crate::error::PlanError::Corrupt(c) => JournalError::Corrupt(c),
                crate::error::PlanError::NewerStore(n) => JournalError::NewerStore(n),
                crate::error::PlanError::Observe { source, .. } => JournalError::Fs(source),
            })
    }

    /// Undoes a completed restore, deciding per path about the restored paths that
    /// changed since: a path in `keep` is left as it is now (listed in `kept`), a
    /// path in `take` gets its pre-restore state all the same (the newer content is
    /// replaced). Refused as stale, listing them, while any changed path is in
    /// neither list; nothing is changed then. Planned against the disk as it is
    /// now, so later restores of the same paths are never overwritten blindly.
    pub fn undo_restore_with(
        &self,
        op_id: &str,
        take: &[RelPath],
        keep: &[RelPath],
    ) -> Result<RestoreOutcome, JournalError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.lock_shared()?;
        let l = self.load_journal(op_id)?;
        if l.state != JournalState::Completed {
            return Err(wrong_state(op_id, l.state, "undo", "completed"));
        }
        let done: Vec<usize> = (0..l.intent.actions.len())
            .filter(|i| matches!(l.apply[*i], Some(Ok(()))))
            .collect();
        let mut stale = Vec::new();
        let mut kept = Vec::new();
        let mut forced: Vec<(usize, Desired)> = Vec::new();
        for (i, now) in self.changed_since(&l)? {
            let a = &l.intent.actions[i];
            if keep.contains(&a.path) {
                kept.push(i);
            } else if let (true, Some(now)) = (take.contains(&a.path), now) {
                forced.push((i, now));
            } else {
                // Undecided, or asked to take a path that is no longer a file or absent
                // (a directory or a symlink now): never replaced blindly.
                stale.push(a.path.clone());
            }
        }
        if !stale.is_empty() {
            return Err(JournalError::Stale {
                op_id: op_id.into(),
                paths: stale,
            });
        }
        let which: Vec<usize> = done.into_iter().filter(|i| !kept.contains(i)).collect();
        let mut out = self.revert_with(op_id, &l, &which, Phase::Undo, &forced)?;
        out.kept = kept
            .into_iter()
            .map(|i| l.intent.actions[i].path.clone())
            .collect();
        Ok(out)
    }

    fn revert(
        &self,
        op_id: &str,
        l: &Loaded,
        which: &[usize],
        phase: Phase,
    ) -> Result<RestoreOutcome, JournalError> {
        self.revert_with(op_id, l, which, phase, &[])
    }

    /// Puts the `which` actions back to their pre-restore state; `forced` names the
    /// actions whose current (changed) content the caller chose to replace.
    fn revert_with(
        &self,
        op_id: &str,
        l: &Loaded,
        which: &[usize],
        phase: Phase,
        forced: &[(usize, Desired)],
    ) -> Result<RestoreOutcome, JournalError> {
        let enc = encode_id(op_id).map_err(|reason| JournalError::InvalidOpId {
            id: op_id.into(),
            reason,
        })?;
        let (_, lpath) = self.journal_paths(&enc);
        let mut lpath = LogWriter::new(lpath);
        let mut out = RestoreOutcome::new(op_id);
        let fs = &self.store.inner.fs;
        for &i in which.iter().rev() {
            let a = &l.intent.actions[i];
            let Some(rescue) = &a.rescue else { continue };
            if a.prefailed.is_some() {
                continue;
            }
            let guard = match forced.iter().find(|(j, _)| *j == i) {
                Some((_, now)) => Guard::Content(vec![now, &a.target, rescue]),
                None => Guard::Content(vec![&a.target, rescue]),
            };
            let partial = Some(CrashPoint::RollbackActionPartial(i));
            let result = self.apply_state(&a.path, rescue, true, guard, partial);
            if phase == Phase::Rollback {
                fs.io.crash(CrashPoint::RollbackActionApplied(i));
            }
            self.record(&mut lpath, phase, i, &a.path, result, &mut out)?;
        }
        // Directories the restore created, innermost first, only when empty.
        for &i in which.iter().rev() {
            let a = &l.intent.actions[i];
            for d in a.create_dirs.iter().rev() {
                let mut created = Vec::new();
                if let Ok(Walk::Parent(parent)) = self.ws.walk_parent(d, false, &mut created) {
                    let (_, name) = d.split_last();
                    if let Err(e) = self.ws.rmdir_if_empty(&parent, name, d) {
                        out.failed.push(PathFailure {
                            path: d.clone(),
                            display: d.display(),
                            error: e.to_string(),
                        });
                    }
                }
            }
        }
        self.sync_touched(&out)?;
        if out.failed.is_empty() {
            if phase == Phase::Rollback {
                fs.io.crash(CrashPoint::RollbackBeforeComplete);
            }
            let s = if phase == Phase::Undo {
                Status::Undone
            } else {
                Status::RolledBack
            };
            self.log(
                &mut lpath,
                LogLine {
                    p: phase,
                    i: None,
                    s,
                    e: None,
                },
            )?;
            out.state = if phase == Phase::Undo {
                JournalState::Undone
            } else {
                JournalState::RolledBack
            };
        } else {
            out.state = l.state;
        }
        Ok(out)
    }

    /// Status of every open restore journal of this session (to report after a restart).
    pub fn reconcile_restores(&self) -> Result<Vec<RestoreStatus>, ReconcileError> {
        Ok(self
            .restore_statuses()?
            .into_iter()
            .filter(|s| s.state == JournalState::Open)
            .collect())
    }

    /// Status of one restore operation.
    pub fn restore_status(&self, op_id: &str) -> Result<RestoreStatus, JournalError> {
        let l = self.load_journal(op_id)?;
        Ok(status_of(&l))
    }

    /// Status of every journal of this session, oldest first.
    pub fn restore_statuses(&self) -> Result<Vec<RestoreStatus>, ReconcileError> {
        let mut all = self.all_journals()?;
        all.sort_by_key(|(o, _, _)| *o);
        Ok(all.into_iter().map(|(_, _, s)| s).collect())
    }

    /// Like [`Session::restore_statuses`], but a journal that cannot be read does not hide
    /// the others: the readable ones come first (oldest first), then each unreadable one
    /// by its op id (decoded from the file name) with why.
    pub fn restore_statuses_each(
        &self,
    ) -> Result<(Vec<RestoreStatus>, Vec<(String, String)>), ReconcileError> {
        let fs = &self.store.inner.fs;
        let jdir = self.dir.join("journals");
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
                Ok::<_, Fault>(Some((l.intent.order, status_of(&l))))
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
        let fs = &self.store.inner.fs;
        let jdir = self.dir.join("journals");
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
            out.push((l.intent.order, stem, status_of(&l)));
        }
        Ok(out)
    }

    /// Removes finished journals beyond the newest `keep`; returns how many.
    pub(crate) fn prune_journals(&self, keep: usize) -> Result<usize, Fault> {
        let fs = &self.store.inner.fs;
        let jdir = self.dir.join("journals");
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

fn status_of(l: &Loaded) -> RestoreStatus {
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

fn wrong_state(
    op_id: &str,
    state: JournalState,
    operation: &'static str,
    needed: &'static str,
) -> JournalError {
    JournalError::WrongState {
        op_id: op_id.into(),
        state,
        operation,
        needed,
    }
}
