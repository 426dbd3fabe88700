//! A rewind's file half: the history entry `started` before anything changes, the journaled
//! restore (planned through the fork chain, narrowed to a selection), and the entry finished
//! with what happened — the first and last steps of the crash order; the host appends the
//! marker (or creates the fork's child) in between.

use rewind_history::{Entry, Outcome, Paths};
use snapshot_store::{
    ChainLink, NotCovered, PathFailure, PreparedRestore, RelPath, RestoreOutcome, RestorePlan,
};

use crate::error::EngineError;
use crate::session::{EngineSession, history_paths};

/// The history entry a rewind starts with.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// The rewind's op id (also its restore journal's).
    pub op_id: String,
    /// The seq of the message rewound to.
    pub target_seq: u64,
    /// The text of that message (an excerpt is kept).
    pub target_text: Option<String>,
    /// The id of the marker the host is about to append (in-place rewind).
    pub marker_id: Option<String>,
    /// The child session the host is about to create (fork rewind).
    pub fork_child: Option<String>,
}

/// A rewind's restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreRequest {
    /// The seq of the message rewound to.
    pub target_seq: u64,
    /// The rewind's op id.
    pub op_id: String,
    /// The fork chain of the session (empty for a session that is not a fork).
    pub ancestors: Vec<ChainLink>,
    /// With any: only these paths (or directories) are restored.
    pub only: Vec<String>,
    /// These paths (or directories) are left as they are.
    pub keep: Vec<String>,
    /// Paths the host knows the scan does not cover (a refused scan's scope), for the record.
    pub not_covered: Vec<(String, String)>,
    /// Leave the workspace's git repository as it is (HEAD, index, branches): the files
    /// alone are restored. A fork's rewind to a message from before the fork always does
    /// ([`crate::git::rewinds_before_fork`]).
    pub keep_git: bool,
}

/// What a rewind's restore did.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The store's outcome.
    pub outcome: RestoreOutcome,
    /// Files changed only outside the agent since the target: left as they are.
    pub outside: Vec<RelPath>,
    /// Workspace paths whose content the store does not hold.
    pub not_covered: Vec<NotCovered>,
    /// Planned paths the selection left as they are.
    pub kept: Vec<String>,
    /// Why the history entry could not be finished, if so (the next reconcile settles it).
    pub not_recorded: Option<EngineError>,
    /// What the rewind did to the workspace's git repository: its git step's report, git kept
    /// at the user's choice, or left as it is for a fork's rewind to before the fork; `None`
    /// when git did not change.
    pub git: Option<crate::GitReport>,
}

impl RestoreRequest {
    /// Whether this rewind leaves the workspace's git repository as it is: kept at the user's
    /// choice, or a fork's rewind to a message from before the fork (its git states there are
    /// its parent's).
    pub fn leaves_git(&self) -> bool {
        self.keep_git || crate::git::rewinds_before_fork(self.target_seq, &self.ancestors)
    }
}

/// What [`EngineSession::prepare_restore`] found: the restore can run.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Paths refused already (changed since the plan, unreadable), with why.
    pub refused: Vec<PathFailure>,
    /// How many actions the restore runs (refused ones included).
    pub actions: usize,
}

/// A prepared restore held for its rewind's op id until it runs.
#[derive(Debug)]
pub(crate) struct PreparedFiles {
    pub(crate) prepared: PreparedRestore,
    pub(crate) outside: Vec<RelPath>,
    pub(crate) not_covered: Vec<NotCovered>,
    pub(crate) kept: Vec<String>,
}

/// Why a rewind restored no file: a stable code (`rewind/...` for a failure; `no-cwd` for a
/// session without a working directory) and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRestored {
    /// The code.
    pub code: String,
    /// The message.
    pub message: String,
}

/// The history outcome of a rewind's file half.
pub fn rewind_outcome(
    outcome: Option<&RestoreOutcome>,
    not_restored: Option<&NotRestored>,
) -> Outcome {
    if let Some(n) = not_restored.filter(|n| n.code != "no-cwd") {
        return if n.code.starts_with("rewind/") {
            Outcome::Failed
        } else {
            Outcome::Done
        };
    }
    let Some(o) = outcome else {
        return Outcome::Done;
    };
    let total = o.written.len() + o.deleted.len() + o.failed.len();
    if o.failed.is_empty() {
        Outcome::Done
    } else if o.failed.len() == total {
        Outcome::Failed
    } else {
        Outcome::Partial
    }
}

impl EngineSession {
    /// Crash order, first step: the entry `started`, durable before the rewind changes
    /// anything (marker, child session, files). A history that cannot be written refuses the
    /// rewind here, with nothing changed.
    pub fn begin(&self, start: &Start, limit: usize) -> Result<Entry, EngineError> {
        let mut entry = Entry::new(
            start.op_id.clone(),
            self.id.clone(),
            &self.key,
            start.target_seq,
            self.engine.now(),
            Outcome::Started,
            Paths::default(),
        );
        entry.marker_id = start.marker_id.clone();
        entry.fork = start
            .fork_child
            .clone()
            .map(|child_session_id| rewind_history::ForkInfo { child_session_id });
        entry.target_text = start
            .target_text
            .as_deref()
            .map(rewind_history::target_excerpt);
        entry.workspace_name = self
            .cwd
            .as_deref()
            .and_then(|c| c.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        self.history(Some(limit))?
            .append(&self.key, entry.clone())?;
        Ok(entry)
    }

    /// The first half of a rewind's restore, run before the host changes anything of its own
    /// (the marker, the child session): the plan (through the fork chain, narrowed to the
    /// selection), its checks and the rescue copy of every planned path, nothing changed in
    /// the workspace. An error here means the file half cannot run at all — the store cannot
    /// serve this rewind (a damaged record log, a store that cannot keep the copies), or a
    /// selection matching no planned file ([`crate::ErrorCode::BadSelection`]) — and the host
    /// refuses the whole rewind. A path that cannot be read for its copy is refused alone
    /// ([`Prepared::refused`]). [`EngineSession::restore_files`] with the same op id (on
    /// this handle or a clone) runs what was prepared.
    pub fn prepare_restore(&self, req: &RestoreRequest) -> Result<Prepared, EngineError> {
        if let Some(why) = self.engine.files_unavailable() {
            return Err(why);
        }
        // The git half first: an operation in progress refuses the rewind before any copy.
        self.prepare_git(&req.op_id, req.target_seq, req.leaves_git())?;
        let (plan, kept) = self.selected_plan(req)?;
        let prepared = self
            .files_of(&self.id)?
            .prepare_restore(&plan, &req.op_id)?;
        let summary = Prepared {
            refused: prepared.refused(),
            actions: prepared.actions(),
        };
        *self.prepared.lock().unwrap_or_else(|p| p.into_inner()) = Some(PreparedFiles {
            prepared,
            outside: plan.outside,
            not_covered: plan.not_covered,
            kept,
        });
        Ok(summary)
    }

    /// Forgets what [`EngineSession::prepare_restore`] prepared for `op_id` (the host gave the
    /// rewind up before its restore ran). Its rescue copies are left to the next sweep.
    pub fn discard_prepared(&self, op_id: &str) {
        let mut slot = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        slot.take_if(|p| p.prepared.op_id() == op_id);
    }

    fn selected_plan(
        &self,
        req: &RestoreRequest,
    ) -> Result<(RestorePlan, Vec<String>), EngineError> {
        let mut plan = self.plan(req.target_seq, &req.ancestors)?;
        let kept = crate::preview::select(&mut plan, &req.only, &req.keep)?;
        Ok((plan, kept))
    }

    /// The journaled restore of a rewind, then its entry finished (`done`, `partial` or
    /// `failed`, with the paths): what [`EngineSession::prepare_restore`] prepared for this
    /// op id, else planned and run here. A selection that matches no planned file is refused
    /// ([`crate::ErrorCode::BadSelection`]) before anything changes. A restore that fails as a whole
    /// is returned as the error; the entry is then finished by
    /// [`EngineSession::finish_not_restored`].
    pub fn restore_files(&self, req: &RestoreRequest) -> Result<Restored, EngineError> {
        if let Some(why) = self.engine.files_unavailable() {
            return Err(why);
        }
        let prepared = self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_if(|p| p.prepared.op_id() == req.op_id);
        let (outcome, outside, mut not_covered, kept) = match prepared {
            Some(p) => (
                self.files_of(&self.id)?.run_prepared(p.prepared)?,
                p.outside,
                p.not_covered,
                p.kept,
            ),
            None => {
                let (plan, kept) = self.selected_plan(req)?;
                let outcome = self.files_of(&self.id)?.restore(&plan, &req.op_id)?;
                (outcome, plan.outside, plan.not_covered, kept)
            }
        };
        for (path, reason) in &req.not_covered {
            if let Ok(path) = RelPath::from_spelling(path) {
                if !not_covered.iter().any(|n| n.path == path) {
                    not_covered.push(NotCovered {
                        path,
                        reason: reason.clone(),
                    });
                }
            }
        }
        // After the files, in the same crash order: the git step has its own journal.
        self.run_git(&req.op_id, req.target_seq, req.leaves_git());
        let git = if crate::git::rewinds_before_fork(req.target_seq, &req.ancestors) {
            Some(crate::GitReport::before_fork())
        } else if req.keep_git {
            Some(crate::GitReport::kept_by_choice())
        } else {
            self.git_report(&self.id, &req.op_id)
        };
        let paths = history_paths(&outcome, &outside, &not_covered, &kept);
        let not_recorded = self
            .settle(
                &req.op_id,
                rewind_outcome(Some(&outcome), None),
                Some(&paths),
            )
            .err();
        Ok(Restored {
            outcome,
            outside,
            not_covered,
            kept,
            not_recorded,
            git,
        })
    }

    /// Finishes the entry of a rewind whose files were not restored (the reason decides the
    /// outcome: a `rewind/...` failure is `failed`; a session without a working directory or a
    /// rewind that needed no file is `done`).
    pub fn finish_not_restored(
        &self,
        op_id: &str,
        why: &NotRestored,
    ) -> Result<Entry, EngineError> {
        self.settle(
            op_id,
            rewind_outcome(None, Some(why)),
            Some(&Paths::default()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(written: usize, failed: usize) -> RestoreOutcome {
        let p = |i: usize| RelPath::from_bytes(format!("f{i}").as_bytes()).expect("path");
        RestoreOutcome {
            op_id: "op".into(),
            state: snapshot_store::JournalState::Completed,
            written: (0..written).map(p).collect(),
            deleted: Vec::new(),
            unchanged: Vec::new(),
            failed: (0..failed)
                .map(|i| snapshot_store::PathFailure {
                    path: p(100 + i),
                    display: format!("f{}", 100 + i),
                    error: "x".into(),
                })
                .collect(),
            skipped: Vec::new(),
            uncovered: Vec::new(),
            kept: Vec::new(),
        }
    }

    #[test]
    fn outcomes_follow_the_files() {
        assert_eq!(rewind_outcome(Some(&outcome(2, 0)), None), Outcome::Done);
        assert_eq!(rewind_outcome(Some(&outcome(2, 1)), None), Outcome::Partial);
        assert_eq!(rewind_outcome(Some(&outcome(0, 2)), None), Outcome::Failed);
        assert_eq!(rewind_outcome(Some(&outcome(0, 0)), None), Outcome::Done);
        let why = |code: &str| NotRestored {
            code: code.into(),
            message: String::new(),
        };
        assert_eq!(
            rewind_outcome(None, Some(&why("rewind/flush-failed"))),
            Outcome::Failed
        );
        assert_eq!(rewind_outcome(None, Some(&why("no-cwd"))), Outcome::Done);
        assert_eq!(
            rewind_outcome(None, Some(&why("pending-only"))),
            Outcome::Done
        );
    }
}
