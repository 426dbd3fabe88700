//! The first pass of a restore (rescue copies, the intent, one action at a time)
//! and the continue of an open one.

use super::*;

use std::collections::HashMap;

use cap_std::fs::Dir;

use crate::blob::{Stored, store_file};
use crate::error::{FsFailure, JournalError, RestoreError};
use crate::format::{RECORD_VERSION, to_json};
use crate::fsio::{DiskMeta, FileKind, Walk};
use crate::path::{RelPath, encode_id};
use crate::plan::{Action, Current, RestorePlan};
use crate::seam::{Area, CrashPoint};
use crate::session::Session;

/// A restore whose checks and rescue copies are done and whose actions are decided, not
/// yet run ([`Session::prepare_restore`], [`Session::run_prepared`]).
#[derive(Debug, Clone)]
pub struct PreparedRestore {
    op_id: String,
    session_id: String,
    target_seq: u64,
    actions: Vec<JournalAction>,
    under: Vec<Option<RelPath>>,
    skipped: Vec<crate::plan::SkippedPath>,
    uncovered: Vec<crate::plan::UncoveredPath>,
    remove_dirs: Vec<RelPath>,
}

impl PreparedRestore {
    /// The restore's op id.
    pub fn op_id(&self) -> &str {
        &self.op_id
    }

    /// The paths refused already, before any mutation, with why (changed since the
    /// plan, unreadable): the restore will report them as failed.
    pub fn refused(&self) -> Vec<PathFailure> {
        self.actions
            .iter()
            .filter_map(|a| {
                a.prefailed.as_ref().map(|e| PathFailure {
                    path: a.path.clone(),
                    display: a.path.display(),
                    error: e.clone(),
                })
            })
            .collect()
    }

    /// How many actions the restore runs (refused ones included).
    pub fn actions(&self) -> usize {
        self.actions.len()
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

impl Session {
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
        self.journal().restore(plan, op_id)
    }

    /// The first half of [`Session::restore`], for a caller that must know before it
    /// changes anything of its own that the restore can run: the checks (a valid, unused
    /// op id; the plan's session) and the rescue copy of every planned path, the store
    /// itself unchanged but for those copies, the workspace untouched. A path that cannot
    /// be read for its copy (a refused open or read) is refused as that path's failure, as
    /// a path changed since the plan is; a store that cannot keep the copies is the
    /// error ([`RestoreError::Rescue`]). [`Session::run_prepared`] runs it.
    pub fn prepare_restore(
        &self,
        plan: &RestorePlan,
        op_id: &str,
    ) -> Result<PreparedRestore, RestoreError> {
        self.journal().prepare(plan, op_id)
    }

    /// The planned paths that cannot be read for the restore's copy of them, with why: files
    /// that cannot be opened for reading (a refused open), and paths in a directory that
    /// cannot be searched or listed (the workspace itself included), whose state the plan
    /// could not look at. The restore refuses them alone. What a preview warns about before
    /// anything runs; changes nothing.
    pub fn unreadable(&self, plan: &RestorePlan) -> Vec<PathFailure> {
        let ws = &self.ws;
        let failure = |a: &crate::plan::PlannedAction, e: &FsFailure| PathFailure {
            path: a.path.clone(),
            display: a.path.display(),
            error: format!(
                "cannot be read to keep a copy of it before the restore ({}: {}); it will be left as it is",
                e.op, e.source
            ),
        };
        let refused = |e: &FsFailure| {
            e.area == Area::Workspace
                && e.raw_os_error() != Some(rustix::io::Errno::LOOP.raw_os_error())
        };
        plan.actions
            .iter()
            .filter(|a| a.current != Current::Directory)
            .filter_map(|a| {
                let mut created = Vec::new();
                let dir = match ws.walk_parent(&a.path, false, &mut created) {
                    Ok(Walk::Parent(dir)) => dir,
                    Err(e) if refused(&e) => return Some(failure(a, &e)),
                    _ => return None,
                };
                let (_, name) = a.path.split_last();
                match &a.current {
                    Current::File { .. } => match ws.open_read(&dir, name, &a.path) {
                        Err(e) if refused(&e) => Some(failure(a, &e)),
                        _ => None,
                    },
                    _ => match ws.lstat(&dir, name, &a.path) {
                        Err(e) if refused(&e) => Some(failure(a, &e)),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    /// The planned files whose before-state is a git blob of the workspace's repository
    /// that the repository no longer holds (pruned after the commit that held it was
    /// dropped), with why: a restore of `plan` would be refused
    /// (`rewind/git-object-gone`) unless they are left out. What a preview warns about before
    /// anything runs; changes nothing. A store whose references cannot be read is the error.
    pub fn git_objects_gone(&self, plan: &RestorePlan) -> Result<Vec<PathFailure>, FsFailure> {
        Ok(
            crate::plan::git_gone::gone_in_plan(&self.store.inner.fs, plan, false)?
                .into_iter()
                .map(|(a, r)| PathFailure {
                    path: a.path.clone(),
                    display: a.display.clone(),
                    error: format!(
                        "its earlier content is git object {} of the repository at {}, which no longer has it; the rewind is refused unless this file is left out (rewind/git-object-gone)",
                        r.oid,
                        r.work_tree.display()
                    ),
                })
                .collect(),
        )
    }

    /// The second half: the intent journal, then the actions, as [`Session::restore`]
    /// runs them. A rescue copy that left the store in between (a sweep) refuses its
    /// action before any mutation; a path changed since its copy is refused by the
    /// action's own guard.
    pub fn run_prepared(&self, prepared: PreparedRestore) -> Result<RestoreOutcome, RestoreError> {
        self.journal().run(prepared)
    }

    /// Finishes an open (interrupted or partly failed) restore: retries every action
    /// not yet applied. A path changed since the restore began is left alone (failure).
    pub fn continue_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.journal().continue_restore(op_id)
    }
}

impl Journal<'_> {
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
            if meta == now && self.s.store.inner.fs.blob_size(sha)? == Some(now.size) {
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
    /// `under_deleted`: the path's parent is a file an earlier action of the restore deletes
    /// (the plan's [`crate::plan`] recreation under a deleted file), so a parent that is not a
    /// directory is the path's absence.
    fn rescue(
        &self,
        rel: &RelPath,
        current: &Current,
        under_deleted: bool,
    ) -> Result<(Desired, Option<DiskMeta>), RescueFail> {
        let mut created = Vec::new();
        let walk = self.s.ws.walk_parent(rel, false, &mut created)?;
        let (_, name) = rel.split_last();
        let (state, meta) = match walk {
            Walk::Blocked(false) if under_deleted => (Desired::Absent, None),
            Walk::Blocked(..) => {
                return Err(changed(
                    "a parent changed since the plan (now a symlink or not a directory)",
                ));
            }
            Walk::Missing(_) => (Desired::Absent, None),
            Walk::Parent(dir) => match self.s.ws.lstat(&dir, name, rel)? {
                None => (Desired::Absent, None),
                Some(m) if m.kind != FileKind::File || m.nlink > 1 => {
                    return Err(changed(
                        "changed since the plan (no longer a plain regular file)",
                    ));
                }
                Some(m) => match self.planned_blob(current, &m)? {
                    Some(state) => (state, Some(m)),
                    None => {
                        let opened = match self.s.ws.open_read(&dir, name, rel) {
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
                        match store_file(
                            &self.s.store.inner.fs,
                            &self.s.ws,
                            &mut f,
                            rel,
                            fm.size,
                            0,
                            None,
                        )? {
                            // (Nothing is kept in the log without a sink.)
                            Stored::Blob { sha256, size, .. }
                            | Stored::Kept { sha256, size, .. } => (
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

    /// The rescue state of a directory the restore empties before it writes a file in
    /// its place ([`Current::Directory`]): the path's absence, once the directory still
    /// holds nothing but paths the restore deletes (and directories).
    fn rescue_emptied_dir(
        &self,
        rel: &RelPath,
        deleted: &std::collections::HashSet<RelPath>,
    ) -> Result<(Desired, Option<DiskMeta>), RescueFail> {
        if !self.s.planner().holds_only(rel, deleted)? {
            return Err(changed(
                "changed since the plan (no longer a directory of deleted files only)",
            ));
        }
        Ok((Desired::Absent, None))
    }

    /// For an action that replaces a directory (`replaces_dir`), removes that directory
    /// once it holds nothing but empty directories (the restore's earlier actions
    /// deleted its files); a directory still holding anything else is left and the
    /// action fails. Nothing to do for any other action, or once the path is not a
    /// directory.
    fn clear_emptied_dir(&self, a: &JournalAction) -> Result<(), String> {
        if !a.replaces_dir {
            return Ok(());
        }
        let mut created = Vec::new();
        let Ok(Walk::Parent(parent)) = self.s.ws.walk_parent(&a.path, false, &mut created) else {
            return Ok(());
        };
        let (_, name) = a.path.split_last();
        match self.remove_empty_tree(&parent, name, &a.path) {
            Ok(false) => Ok(()),
            Ok(true) => Err("is a directory that still holds files; left as it is".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub(crate) fn restore(
        &self,
        plan: &RestorePlan,
        op_id: &str,
    ) -> Result<RestoreOutcome, RestoreError> {
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let _g = self.s.lock_shared()?;
        let prepared = self.prepare_locked(plan, op_id)?;
        self.run_locked(prepared, false)
    }

    /// The first half of [`Journal::restore`] as a call of its own: checks and rescue
    /// copies, nothing changed in the workspace (see [`Session::prepare_restore`]).
    pub(crate) fn prepare(
        &self,
        plan: &RestorePlan,
        op_id: &str,
    ) -> Result<PreparedRestore, RestoreError> {
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let _g = self.s.lock_shared()?;
        self.prepare_locked(plan, op_id)
    }

    /// The second half (see [`Session::run_prepared`]).
    pub(crate) fn run(&self, prepared: PreparedRestore) -> Result<RestoreOutcome, RestoreError> {
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let _g = self.s.lock_shared()?;
        self.run_locked(prepared, true)
    }

    fn check_new_op(&self, op_id: &str) -> Result<String, RestoreError> {
        let enc = encode_id(op_id).map_err(|reason| RestoreError::InvalidOpId {
            id: op_id.into(),
            reason,
        })?;
        let (ipath, _) = self.journal_paths(&enc);
        if self.s.store.inner.fs.exists(&ipath)? {
            return Err(RestoreError::DuplicateOp {
                op_id: op_id.into(),
                path: ipath.to_string_lossy().into_owned(),
            });
        }
        Ok(enc)
    }

    /// Checks and rescue copies (under the session's locks): every planned path's current
    /// bytes saved, each action decided or refused. Changes nothing in the workspace.
    fn prepare_locked(
        &self,
        plan: &RestorePlan,
        op_id: &str,
    ) -> Result<PreparedRestore, RestoreError> {
        self.check_new_op(op_id)?;
        if plan.session_id != self.s.id {
            return Err(RestoreError::WrongSession {
                plan_session: plan.session_id.clone(),
                session: self.s.id.clone(),
            });
        }
        // A before-state that is a git blob the repository no longer holds: refused, named,
        // before anything is saved or changed.
        crate::plan::git_gone::check_plan(&self.s.store.inner.fs, plan)?;
        let mut actions = Vec::with_capacity(plan.actions.len());
        // The paths the plan deletes, when an action depends on one of them (only then).
        let depends = plan.actions.iter().any(|a| match &a.action {
            Action::Recreate { missing_dirs, .. } => {
                !missing_dirs.is_empty() || a.current == Current::Directory
            }
            _ => false,
        });
        let deleted = match depends {
            true => crate::plan::deleted_paths(&plan.actions),
            false => std::collections::HashSet::new(),
        };
        // Per action, the file it is recreated under, which an earlier action deletes.
        let mut under: Vec<Option<RelPath>> = Vec::with_capacity(plan.actions.len());
        for a in &plan.actions {
            let blocker = match &a.action {
                Action::Recreate { missing_dirs, .. } => missing_dirs
                    .first()
                    .filter(|d| deleted.contains(*d))
                    .cloned(),
                _ => None,
            };
            let under_deleted = blocker.is_some();
            under.push(blocker);
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
            let replaces_dir = a.current == Current::Directory;
            let rescued = match replaces_dir {
                true => self.rescue_emptied_dir(&a.path, &deleted),
                false => self.rescue(&a.path, &a.current, under_deleted),
            };
            let (rescue, rescue_meta, prefailed) = match rescued {
                Ok((r, m)) => (Some(r), m, None),
                Err(RescueFail::Changed(e)) => (None, None, Some(e)),
                // The path itself cannot be read (a refused open or read): that path's
                // failure, as a path changed since the plan; the others are restored.
                Err(RescueFail::Io(source)) if source.area == Area::Workspace => (
                    None,
                    None,
                    Some(format!(
                        "cannot be read to keep a copy of it before the restore ({}: {}); left as it is",
                        source.op, source.source
                    )),
                ),
                // The store cannot keep the copy: nothing has been changed; give up cleanly.
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
                replaces_dir,
            });
        }
        // An action that needs a deletion refused here (a path changed since the plan, or
        // unreadable) is refused with it, before any mutation: it could never run.
        let refused: HashMap<RelPath, String> = actions
            .iter()
            .filter(|a| a.target == Desired::Absent)
            .filter_map(|a| a.prefailed.as_ref().map(|e| (a.path.clone(), e.clone())))
            .collect();
        if !refused.is_empty() {
            for (i, a) in actions.iter_mut().enumerate() {
                if a.prefailed.is_some() {
                    continue;
                }
                let why = match a.replaces_dir {
                    true => refused
                        .iter()
                        .find(|(p, _)| a.path.is_ancestor_of(p))
                        .map(|(p, e)| {
                            format!(
                                "not written: `{}` in the directory in its place is not deleted: {e}",
                                p.display()
                            )
                        }),
                    false => under[i].as_ref().and_then(|b| {
                        refused.get(b).map(|e| {
                            format!(
                                "not recreated: `{}` in the place of its directory is not deleted: {e}",
                                b.display()
                            )
                        })
                    }),
                };
                if let Some(why) = why {
                    a.prefailed = Some(why);
                    a.rescue = None;
                    a.rescue_meta = None;
                }
            }
        }
        Ok(PreparedRestore {
            op_id: op_id.to_string(),
            session_id: self.s.id.clone(),
            target_seq: plan.target_seq,
            actions,
            under,
            skipped: plan.skipped.clone(),
            uncovered: plan.uncovered.clone(),
            remove_dirs: plan.remove_dirs.clone(),
        })
    }

    /// Runs a prepared restore (under the session's locks). With `recheck`, the rescue
    /// copies are looked for first: one no longer in the store (a sweep between the two
    /// halves) refuses its action before any mutation.
    fn run_locked(
        &self,
        prepared: PreparedRestore,
        recheck: bool,
    ) -> Result<RestoreOutcome, RestoreError> {
        let PreparedRestore {
            op_id,
            session_id,
            target_seq,
            mut actions,
            under,
            skipped,
            uncovered,
            remove_dirs,
        } = prepared;
        if session_id != self.s.id {
            return Err(RestoreError::WrongSession {
                plan_session: session_id,
                session: self.s.id.clone(),
            });
        }
        let op_id = op_id.as_str();
        let enc = self.check_new_op(op_id)?;
        let fs = &self.s.store.inner.fs;
        let (ipath, lpath) = self.journal_paths(&enc);
        if recheck {
            for a in &mut actions {
                if let Some(Desired::File { sha256, size, .. }) = &a.rescue {
                    if fs.blob_size(sha256)? != Some(*size) {
                        a.rescue = None;
                        a.rescue_meta = None;
                        a.prefailed = Some(
                            "its copy from before the restore is no longer in the store; left as it is"
                                .into(),
                        );
                    }
                }
            }
        }
        fs.remove_file(&lpath)?; // an orphan log from a pruned journal of the same id
        fs.io.crash(CrashPoint::RestoreRescued);
        if IN_PLACE_DURABLE {
            // The in-place writes that follow destroy the bytes the rescues keep.
            fs.sync_filesystem()?;
        }
        let intent = JournalIntent {
            v: RECORD_VERSION,
            op_id: op_id.to_string(),
            session_id: self.s.id.clone(),
            target_seq,
            order: self.s.store.next_order(),
            actions,
        };
        fs.write_atomic(&ipath, &to_json(&intent))?;
        fs.io.crash(CrashPoint::RestoreJournalWritten);
        let mut lpath = LogWriter::new(lpath);
        let mut out = RestoreOutcome::new(op_id);
        let mut hard_failures = 0usize;
        out.skipped = skipped;
        out.uncovered = uncovered;
        let mut not_deleted: HashMap<&RelPath, String> = HashMap::new();
        for (i, a) in intent.actions.iter().enumerate() {
            // A deletion this action needed first that failed: the action fails with it.
            let blocked = match a.replaces_dir {
                true => not_deleted
                    .iter()
                    .find(|(p, _)| a.path.is_ancestor_of(p))
                    .map(|(p, e)| {
                        format!(
                            "not written: `{}` in the directory in its place was not deleted: {e}",
                            p.display()
                        )
                    }),
                false => under[i].as_ref().and_then(|b| {
                    not_deleted.get(b).map(|e| {
                        format!(
                            "not recreated: `{}` in the place of its directory was not deleted: {e}",
                            b.display()
                        )
                    })
                }),
            };
            let result = match (&a.prefailed, blocked) {
                (Some(e), _) => Err(e.clone()),
                (None, Some(e)) => Err(e),
                (None, None) => self.clear_emptied_dir(a).and_then(|()| {
                    self.apply_state(
                        &a.path,
                        &a.target,
                        true,
                        Guard::Meta(a.rescue_meta.as_ref()),
                        Some(CrashPoint::RestoreActionPartial(i)),
                    )
                }),
            };
            if let (Desired::Absent, Err(e)) = (&a.target, &result) {
                not_deleted.insert(&a.path, e.clone());
            }
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
        self.remove_emptied_dirs(&remove_dirs, &mut out);
        self.sync_touched(&out)?;
        self.note_known(&out, intent.actions.iter().map(|a| (&a.path, &a.target)));
        if hard_failures == 0 {
            self.complete(&mut lpath, &mut out)?;
        }
        Ok(out)
    }

    pub(crate) fn continue_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.with_journal(op_id, "continue", JournalState::Open, |l| {
            self.continue_pass(op_id, &l)
        })
    }

    fn continue_pass(&self, op_id: &str, l: &Loaded) -> Result<RestoreOutcome, JournalError> {
        let mut lpath = l.progress_log();
        let mut out = RestoreOutcome::new(op_id);
        let shape = super::apply::Shape::of(&l.intent);
        for (i, a) in l.intent.actions.iter().enumerate() {
            // Refused before any mutation (changed since the plan): settled. Everything
            // else is re-applied (a no-op when already in the target state), since a
            // partial rollback may have reverted actions logged as done.
            if a.prefailed.is_some() {
                continue;
            }
            let result = match &a.rescue {
                None => Err("no rescue copy".into()),
                // A file deleted to make the directory of files recreated under it: done.
                Some(_)
                    if a.target == Desired::Absent
                        && self.made_dir(&shape, &a.path).map_err(JournalError::Fs)? =>
                {
                    Ok(Applied::Already)
                }
                Some(rescue) => self.clear_emptied_dir(a).and_then(|()| {
                    self.apply_state(
                        &a.path,
                        &a.target,
                        true,
                        Guard::Content(vec![rescue]),
                        Some(CrashPoint::RestoreActionPartial(i)),
                    )
                }),
            };
            self.s
                .store
                .inner
                .fs
                .io
                .crash(CrashPoint::RestoreActionApplied(i));
            self.record(&mut lpath, Phase::Apply, i, &a.path, result, &mut out)?;
            self.s
                .store
                .inner
                .fs
                .io
                .crash(CrashPoint::RestoreActionLogged(i));
        }
        self.sync_touched(&out)?;
        self.note_known(&out, l.intent.actions.iter().map(|a| (&a.path, &a.target)));
        if out.failed.is_empty() {
            self.complete(&mut lpath, &mut out)?;
        }
        Ok(out)
    }
}

impl Journal<'_> {
    /// Removes the directories of `dirs` (deepest first) that hold nothing now but
    /// empty directories (those go too: they were made after the target as well).
    /// A directory still holding anything else is left; a failure is reported in `out`.
    pub(crate) fn remove_emptied_dirs(&self, dirs: &[RelPath], out: &mut RestoreOutcome) {
        for d in dirs {
            let mut created = Vec::new();
            if let Ok(Walk::Parent(parent)) = self.s.ws.walk_parent(d, false, &mut created) {
                let (_, name) = d.split_last();
                if let Err(e) = self.remove_empty_tree(&parent, name, d) {
                    out.failed.push(PathFailure {
                        path: d.clone(),
                        display: d.display(),
                        error: e.to_string(),
                    });
                }
            }
        }
    }

    /// Removes the directory `name` in `parent` (`rel`) when it holds nothing but empty
    /// directories, those included; `true` when a directory is still there (one holding
    /// anything else), `false` when none is (removed, absent, or not a directory).
    fn remove_empty_tree(
        &self,
        parent: &impl std::os::fd::AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<bool, FsFailure> {
        if self.s.ws.rmdir_if_empty(parent, name, rel)? {
            return Ok(false);
        }
        let Some(dir) = crate::fsio::open_sub(parent, name) else {
            return Ok(false);
        };
        Ok(!(self.only_empty_dirs(&dir, rel)? && self.s.ws.rmdir_if_empty(parent, name, rel)?))
    }

    /// Removes the empty-directory tree inside `dir`; `true` when `dir` is empty then.
    fn only_empty_dirs(&self, dir: &Dir, rel: &RelPath) -> Result<bool, FsFailure> {
        let ws = &self.s.ws;
        ws.walk_tree(dir, rel, &mut |_| false, &mut |parent, name, child| {
            ws.rmdir_if_empty(parent, name, child)
        })
    }
}
