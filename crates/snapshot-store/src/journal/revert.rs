//! Putting a restore's paths back: rollback of an open restore, undo of a
//! completed one (with keep / take per changed path), and planning its redo.

use super::*;

use crate::error::{FsFailure, JournalError};
use crate::fsio::Walk;
use crate::path::RelPath;
use crate::seam::CrashPoint;
use crate::session::Session;

impl Session {
    /// Returns an open restore to the exact pre-restore state: every path gets its
    /// rescue bytes back (or is deleted if it was absent), and directories the
    /// restore created are removed when empty.
    pub fn rollback_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.journal().rollback_restore(op_id)
    }

    /// Undoes a completed restore (the user-facing "restore to before this rewind").
    /// Refused as stale, listing the paths, when any restored path changed since.
    pub fn undo_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.journal().undo_restore(op_id)
    }

    /// The paths a completed restore changed that changed again since (an undo must
    /// be told whether to keep or replace each). Changes nothing.
    pub fn undo_changed_paths(&self, op_id: &str) -> Result<Vec<RelPath>, JournalError> {
        self.journal().undo_changed_paths(op_id)
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
        self.journal().plan_redo(op_id, take, keep)
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
        self.journal().undo_restore_with(op_id, take, keep)
    }

    /// Undoes a completed restore, leaving every restored path that changed since as it
    /// is (listed in `kept`): what finishing an interrupted undo needs, where nobody is
    /// there to decide. One read of the journal and the disk.
    pub fn undo_restore_keeping_changed(
        &self,
        op_id: &str,
    ) -> Result<RestoreOutcome, JournalError> {
        self.journal().undo_restore_keeping_changed(op_id)
    }
}

impl Journal<'_> {
    pub(crate) fn rollback_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.with_journal(op_id, "rollback", JournalState::Open, |l| {
            let all: Vec<usize> = (0..l.intent.actions.len()).collect();
            self.revert(op_id, &l, &all, Phase::Rollback)
        })
    }

    pub(crate) fn undo_restore(&self, op_id: &str) -> Result<RestoreOutcome, JournalError> {
        self.undo_restore_with(op_id, &[], &[])
    }

    pub(crate) fn undo_changed_paths(&self, op_id: &str) -> Result<Vec<RelPath>, JournalError> {
        self.with_journal(op_id, "undo", JournalState::Completed, |l| {
            Ok(self
                .changed_since(&l)?
                .into_iter()
                .map(|(i, _)| l.intent.actions[i].path.clone())
                .collect())
        })
    }

    /// The applied actions of a completed restore whose path changed since (the disk
    /// holds neither the restored nor the pre-restore state), with what it holds now
    /// (`None`: no longer a file or absence — a directory, a symlink).
    fn changed_since(&self, l: &Loaded) -> Result<Vec<(usize, Option<Desired>)>, JournalError> {
        let mut changed = Vec::new();
        let shape = super::apply::Shape::of(&l.intent);
        for (i, a) in l.intent.actions.iter().enumerate() {
            if !matches!(l.apply[i], Some(Ok(()))) {
                continue;
            }
            let now = self.now_of(&shape, a).map_err(JournalError::Fs)?;
            let same = now
                .as_ref()
                .is_some_and(|now| *now == a.target || Some(now) == a.rescue.as_ref());
            // An interrupted undo's in-place write of the pre-restore bytes is the undo's.
            let torn = !same
                && now.is_some()
                && self
                    .torn_write(&a.path, a.rescue.iter(), &[&a.target])
                    .map_err(JournalError::Fs)?;
            if !same && !torn {
                changed.push((i, now));
            }
        }
        Ok(changed)
    }

    /// What the path of action `a` holds now, as [`Journal::current_content`]; where a file
    /// and a directory of the same name took each other's place in the restore, the
    /// path's absence: a directory in the place of a file the restore deleted or wrote
    /// (one it made, [`super::apply::Shape::made`], or one it emptied, `replaces_dir`), or
    /// a path under a file that is one of the restore's own paths (`shape`). Any other
    /// directory, or path under a file, is `None` (neither a file nor an absence).
    fn now_of(
        &self,
        shape: &super::apply::Shape<'_>,
        a: &JournalAction,
    ) -> Result<Option<Desired>, FsFailure> {
        let now = self.current_content(&a.path)?;
        if now.is_some() {
            return Ok(now);
        }
        if (a.replaces_dir || shape.made.contains(&a.path)) && self.is_dir_now(&a.path)? {
            return Ok(Some(Desired::Absent));
        }
        let n = a.path.components().count();
        for i in 1..n {
            let Some(up) = a.path.prefix(i) else { continue };
            if shape.paths.contains(&up)
                && matches!(
                    self.s.planner().observe(&up)?,
                    crate::plan::Observed::File { .. }
                )
            {
                return Ok(Some(Desired::Absent));
            }
        }
        Ok(None)
    }

    pub(crate) fn plan_redo(
        &self,
        op_id: &str,
        take: &[RelPath],
        keep: &[RelPath],
    ) -> Result<crate::plan::RestorePlan, JournalError> {
        let l = self.with_journal(op_id, "redo", JournalState::Undone, Ok)?;
        let shape = super::apply::Shape::of(&l.intent);
        let mut stale = Vec::new();
        let mut picks = Vec::new();
        for (i, a) in l.intent.actions.iter().enumerate() {
            if !matches!(l.undo[i], Some(Ok(()))) {
                continue;
            }
            let Some(rescue) = &a.rescue else { continue };
            let now = self.now_of(&shape, a).map_err(JournalError::Fs)?;
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
                redo: true,
            });
        }
        self.s
            .planner()
            .plan_picks(l.intent.target_seq, picks)
            .map_err(|e| match e {
                crate::error::PlanError::Fs(f) => JournalError::Fs(f),
                crate::error::PlanError::Corrupt(c) => JournalError::Corrupt(c),
                crate::error::PlanError::NewerStore(n) => JournalError::NewerStore(n),
                crate::error::PlanError::Observe { source, .. } => JournalError::Fs(source),
            })
    }

    pub(crate) fn undo_restore_with(
        &self,
        op_id: &str,
        take: &[RelPath],
        keep: &[RelPath],
    ) -> Result<RestoreOutcome, JournalError> {
        self.with_journal(op_id, "undo", JournalState::Completed, |l| {
            self.undo_pass(op_id, &l, take, keep, false)
        })
    }

    pub(crate) fn undo_restore_keeping_changed(
        &self,
        op_id: &str,
    ) -> Result<RestoreOutcome, JournalError> {
        self.with_journal(op_id, "undo", JournalState::Completed, |l| {
            self.undo_pass(op_id, &l, &[], &[], true)
        })
    }

    /// The undo's pass; with `keep_undecided`, a changed path in neither list is kept
    /// instead of refusing the undo as stale.
    fn undo_pass(
        &self,
        op_id: &str,
        l: &Loaded,
        take: &[RelPath],
        keep: &[RelPath],
        keep_undecided: bool,
    ) -> Result<RestoreOutcome, JournalError> {
        let done: Vec<usize> = (0..l.intent.actions.len())
            .filter(|i| matches!(l.apply[*i], Some(Ok(()))))
            .collect();
        let mut stale = Vec::new();
        let mut kept = Vec::new();
        let mut forced: Vec<(usize, Desired)> = Vec::new();
        for (i, now) in self.changed_since(l)? {
            let a = &l.intent.actions[i];
            if keep.contains(&a.path) || (keep_undecided && !take.contains(&a.path)) {
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
                redo: false,
            });
        }
        let which: Vec<usize> = done.into_iter().filter(|i| !kept.contains(i)).collect();
        let mut out = self.revert_with(op_id, l, &which, Phase::Undo, &forced)?;
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
        let mut lpath = l.progress_log();
        let mut out = RestoreOutcome::new(op_id);
        let fs = &self.s.store.inner.fs;
        // The directories action `i` created, innermost first, only when empty.
        let remove_made = |i: usize, out: &mut RestoreOutcome| {
            for d in l.intent.actions[i].create_dirs.iter().rev() {
                if out.failed.iter().any(|f| f.path == *d) {
                    continue;
                }
                let mut created = Vec::new();
                if let Ok(Walk::Parent(parent)) = self.s.ws.walk_parent(d, false, &mut created) {
                    let (_, name) = d.split_last();
                    if let Err(e) = self.s.ws.rmdir_if_empty(&parent, name, d) {
                        out.failed.push(PathFailure {
                            path: d.clone(),
                            display: d.display(),
                            error: e.to_string(),
                        });
                    }
                }
            }
        };
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
            let result = if a.replaces_dir && self.is_dir_now(&a.path).map_err(JournalError::Fs)? {
                // The directory the restore had to empty is still there: as before it.
                Ok(Applied::Already)
            } else {
                self.apply_state(&a.path, rescue, true, guard, partial)
            };
            if phase == Phase::Rollback {
                fs.io.crash(CrashPoint::RollbackActionApplied(i));
            }
            self.record(&mut lpath, phase, i, &a.path, result, &mut out)?;
            // Before the actions reverted after this one: one of them may put a file back
            // in the place of such a directory (a restore that deleted a file to recreate
            // files under a directory of that name). Every action that wrote into such a
            // directory names it (it was missing for each at the plan): the last of them
            // taken back removes it.
            remove_made(i, &mut out);
        }
        self.sync_touched(&out)?;
        let rescued = which.iter().map(|&i| &l.intent.actions[i]);
        self.note_known(
            &out,
            rescued.filter_map(|a| Some((&a.path, a.rescue.as_ref()?))),
        );
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
}
