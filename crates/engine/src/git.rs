//! The git half of a rewind, of its undo and of its redo: the workspace repository's HEAD,
//! index and the branches the agent moved, restored after the files in the same crash
//! order (see `docs/git.md`).
//!
//! Each rewind that changes git has a journal, `git/ops/<op>.json` in the store session
//! that was rewound: the plan, written before the first change, then what was applied
//! (`applied`), undone (`undone`) or applied again by a redo. Every step of
//! [`git_state::apply`] is idempotent, so a step interrupted by a crash is finished by
//! running it again (a continue, the undo's restart).

use std::path::Path;

use git_state::{
    Applied, Found, GitPlan, GitState, Handles, agent_moves, apply, plan_git_restore, target_point,
};
use serde::{Deserialize, Serialize};
use snapshot_store::{GitBlobKind, ScanPhase, ScanRequest, Session};

use crate::error::{EngineError, ErrorCode};
use crate::session::EngineSession;

/// The version of a git journal.
pub const GIT_OP_VERSION: u32 = 1;

/// Where a rewind's git step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GitOpState {
    /// Planned; the changes may have begun (a crash here: run it again).
    Planned,
    /// Applied.
    Applied,
    /// The undo began.
    Undoing,
    /// Undone.
    Undone,
}

/// The journal of a rewind's git step (`git/ops/<op>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitOp {
    /// [`GIT_OP_VERSION`].
    pub v: u32,
    /// The rewind's op id.
    pub op_id: String,
    /// Where it stands.
    pub state: GitOpState,
    /// The plan.
    pub plan: GitPlan,
    /// What the rewind applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
    /// What the undo applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone: Option<Applied>,
    /// Why the last step stopped, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl GitOp {
    /// A journal of `plan`, not applied yet, for the rewind (or redo) `op_id`.
    fn planned(op_id: &str, plan: GitPlan) -> Self {
        GitOp {
            v: GIT_OP_VERSION,
            op_id: op_id.to_owned(),
            state: GitOpState::Planned,
            plan,
            applied: None,
            undone: None,
            error: None,
        }
    }
}

/// What the git half of a rewind will do (its preview) or did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitReport {
    /// One line: `HEAD: detached at v2.40.0 → agent-work @ 3fce3b5; …`.
    pub summary: String,
    /// Why the repository is left alone (not tracked, nothing recorded), if so.
    pub untracked: Option<String>,
    /// Why the rewind would be refused (an operation in progress), if so.
    pub refusal: Option<String>,
    /// Kept as it is at the user's choice (`--keep-git`).
    pub kept: bool,
    /// Whether anything of git changes (or changed).
    pub changes: bool,
    /// What was left as it is, one line each.
    pub flagged: Vec<String>,
    /// The keep-refs written (full names).
    pub keep_refs: Vec<String>,
    /// Why applying stopped, if it failed.
    pub error: Option<String>,
}

/// A planned git half (or why there is none).
#[derive(Debug, Clone)]
struct Prepared {
    plan: Option<GitPlan>,
    untracked: Option<String>,
}

fn stored_lookup(files: &Session) -> impl Fn(&str) -> Option<Vec<u8>> + '_ {
    // Index ids and stash-list ids are digests of different bytes: one lookup serves both.
    move |id: &str| {
        files
            .git_blob(GitBlobKind::Index, id)
            .or_else(|| files.git_blob(GitBlobKind::Stash, id))
    }
}

/// Whether a rewind to `target_seq` of a session whose fork chain is `ancestors` (nearest parent
/// first) goes back to a message from before the fork: the session's git states before the
/// fork are its parent's, which it does not read, so git is left as it is. A rewind to one of
/// the fork's own messages restores git from the fork's own states, as any rewind does.
pub fn rewinds_before_fork(target_seq: u64, ancestors: &[snapshot_store::ChainLink]) -> bool {
    ancestors
        .first()
        .is_some_and(|parent| target_seq <= parent.max_anchor)
}

impl GitReport {
    /// A rewind of a fork to a message from before the fork leaves git as it is
    /// ([`rewinds_before_fork`]); the files alone come back. The preview, the dialog and the
    /// report say so with this.
    pub fn before_fork() -> Self {
        let why = "left as it is: that message is from before this session was forked, and the \
                   git states before the fork are its parent's"
            .to_owned();
        GitReport {
            summary: why.clone(),
            flagged: vec![why],
            ..GitReport::default()
        }
    }

    /// Git kept as it is at the user's choice (`--keep-git` / `keepGit`).
    pub fn kept_by_choice() -> Self {
        GitReport {
            kept: true,
            ..GitReport::default()
        }
    }
}

fn report_of(plan: &GitPlan) -> GitReport {
    GitReport {
        summary: plan.summary(),
        refusal: plan.refusal.as_ref().map(|r| r.message()),
        changes: !plan.is_empty(),
        flagged: plan.flagged.iter().map(|f| f.message()).collect(),
        ..GitReport::default()
    }
}

impl EngineSession {
    /// Plans the git half of a rewind of this session to `target_seq`, changing nothing in
    /// the repository (the bytes of its index now are stored, for the undo).
    fn plan_git(&self, files: &Session, cwd: &Path, target_seq: u64) -> Prepared {
        let none = |why: Option<String>| Prepared {
            plan: None,
            untracked: why,
        };
        let read = match GitState::read(cwd) {
            Ok(Found::None) => return none(None),
            Ok(Found::Untracked(u)) => return none(Some(u.message())),
            Ok(Found::State(r)) => r,
            Err(e) => return none(Some(format!("the repository cannot be read: {e}"))),
        };
        let points = match files.git_known_points() {
            Ok(p) => p,
            Err(e) => return none(Some(format!("its recorded git states cannot be read: {e}"))),
        };
        let Some(t) = target_point(&points, target_seq) else {
            return none(Some("no git state was recorded since that message".into()));
        };
        if let (Some(i), Some(b)) = (&read.state.index, &read.index_bytes) {
            if let Err(e) = files.put_git_blob(GitBlobKind::Index, &i.id, b) {
                return none(Some(format!("the index cannot be kept for an undo: {e}")));
            }
        }
        if let (Some(l), Some(b)) = (&read.state.stash, &read.stash_bytes) {
            if let Err(e) = files.put_git_blob(GitBlobKind::Stash, &l.id, b) {
                return none(Some(format!(
                    "the stash list cannot be kept for an undo: {e}"
                )));
            }
        }
        let target = &points[t].state;
        let stored = target
            .index
            .as_ref()
            .is_some_and(|i| files.git_blob(GitBlobKind::Index, &i.id).is_some());
        let mut plan = plan_git_restore(&read.state, target, &agent_moves(&points, t), stored);
        // A stash list to write back that is not stored, or that names a commit git has
        // pruned since, is left as it is (never written back naming what may not be there).
        let stash_left = plan
            .stash
            .as_ref()
            .and_then(|s| s.to.as_ref())
            .and_then(|l| {
                if files.git_blob(GitBlobKind::Stash, &l.id).is_none() {
                    return Some(git_state::Flag::StashNotStored);
                }
                let count = l.commits_gone(&read.common_dir);
                (count > 0).then_some(git_state::Flag::StashCommitsGone { count })
            });
        if let Some(flag) = stash_left {
            plan.stash = None;
            plan.keep.retain(|(k, _)| !k.starts_with("stash/"));
            plan.flagged.push(flag);
        }
        Prepared {
            plan: Some(plan),
            untracked: None,
        }
    }

    /// What the git half of a rewind to `target_seq` would do, changing nothing (for the
    /// preview); `keep_git`: the user keeps git as it is. `ancestors`: the session's fork
    /// chain, as for its restore — a rewind of a fork to a message from before the fork leaves
    /// git as it is ([`GitReport::before_fork`]).
    pub fn git_preview(
        &self,
        target_seq: u64,
        keep_git: bool,
        ancestors: &[snapshot_store::ChainLink],
    ) -> GitReport {
        if rewinds_before_fork(target_seq, ancestors) {
            return GitReport::before_fork();
        }
        let (Ok(cwd), Ok(files)) = (self.files_usable(), self.files_of(&self.id)) else {
            return GitReport::default();
        };
        let p = self.plan_git(&files, cwd, target_seq);
        let mut r = p.plan.as_ref().map(report_of).unwrap_or_default();
        r.untracked = p.untracked;
        if keep_git && r.changes {
            r.kept = true;
            r.changes = false;
            r.refusal = None;
        }
        r
    }

    /// The git half of [`EngineSession::prepare_restore`]: plans it and writes its journal
    /// (`planned`) for `op_id`, nothing changed in the repository; an operation in progress
    /// refuses the rewind here, before anything changed ([`ErrorCode::GitInProgress`]).
    /// `keep_git` (also set for a fork's rewind to before the fork): git is left as it is, no journal.
    pub(crate) fn prepare_git(
        &self,
        op_id: &str,
        target_seq: u64,
        keep_git: bool,
    ) -> Result<(), EngineError> {
        let (Ok(cwd), Ok(files)) = (self.files_usable(), self.files_of(&self.id)) else {
            return Ok(());
        };
        if keep_git {
            return Ok(());
        }
        let p = self.plan_git(&files, cwd, target_seq);
        let Some(plan) = p.plan.filter(worth_a_journal) else {
            return Ok(());
        };
        if let Some(r) = &plan.refusal {
            return Err(EngineError::new(ErrorCode::GitInProgress, r.message()));
        }
        let op = GitOp::planned(op_id, plan);
        write_op(&files, &op).map_err(|()| {
            EngineError::new(
                ErrorCode::RestoreFailed,
                "the git step's journal cannot be written; nothing was changed",
            )
        })
    }

    /// The git half of [`EngineSession::restore_files`], after the files: the plan the
    /// prepare step journaled (planned here when the rewind was not prepared) applied, then
    /// the journal updated. What happened is read back with [`EngineSession::git_report`].
    /// Never fails the rewind: a step that cannot be done is recorded in the journal
    /// (`error`) and reported.
    pub(crate) fn run_git(&self, op_id: &str, target_seq: u64, keep_git: bool) {
        if keep_git {
            return;
        }
        let (Ok(cwd), Ok(files)) = (self.files_usable(), self.files_of(&self.id)) else {
            return;
        };
        let mut op = match read_op(&files, op_id) {
            Some(op) if op.state == GitOpState::Planned => op,
            Some(_) => return,
            None => {
                let p = self.plan_git(&files, cwd, target_seq);
                let Some(plan) = p.plan.filter(|p| worth_a_journal(p) && p.refusal.is_none())
                else {
                    return;
                };
                let op = GitOp::planned(op_id, plan);
                if write_op(&files, &op).is_err() {
                    return;
                }
                op
            }
        };
        self.engine.crash("rewind:git-planned");
        self.apply_op(&files, cwd, &mut op, false);
        self.engine.crash("rewind:git-done");
    }

    fn apply_op(&self, files: &Session, cwd: &Path, op: &mut GitOp, undo: bool) {
        let call = format!("dsh-rewind:{}{}", op.op_id, if undo { ":undo" } else { "" });
        mark(files, ScanPhase::Before, &call);
        let result = match Handles::find(cwd) {
            Ok(Some(Ok(h))) => {
                let (plan, tag, msg) = if undo {
                    (
                        op.plan.reversed(),
                        format!("{}-undo", op.op_id),
                        "dsh-rewind: undo of a rewind",
                    )
                } else {
                    (op.plan.clone(), op.op_id.clone(), "dsh-rewind: rewind")
                };
                let lookup = stored_lookup(files);
                apply(&h, &plan, &tag, &lookup, msg).map_err(|e| e.to_string())
            }
            Ok(Some(Err(u))) => Err(u.message()),
            Ok(None) => Err("the workspace is no longer a git repository".into()),
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(a) => {
                op.error = None;
                if undo {
                    op.undone = Some(a);
                    op.state = GitOpState::Undone;
                } else {
                    op.applied = Some(a);
                    op.state = GitOpState::Applied;
                }
            }
            Err(e) => op.error = Some(e),
        }
        mark(files, ScanPhase::After, &call);
        let _ = write_op(files, op);
    }

    /// The git journal of rewind `op_id` of session `owner`, if it has one.
    pub fn git_op(&self, owner: &str, op_id: &str) -> Option<GitOp> {
        let files = self.files_of(owner).ok()?;
        read_op(&files, op_id)
    }

    /// What the git step of rewind `op_id` did, for a report.
    pub fn git_report(&self, owner: &str, op_id: &str) -> Option<GitReport> {
        let op = self.git_op(owner, op_id)?;
        // An undone rewind is reported as what its undo did: the plan reversed.
        let mut r = if op.state == GitOpState::Undone {
            report_of(&op.plan.reversed())
        } else {
            report_of(&op.plan)
        };
        let done = if op.state == GitOpState::Undone {
            &op.undone
        } else {
            &op.applied
        };
        if let Some(a) = done {
            r.flagged.extend(a.flagged.iter().map(|f| f.message()));
            r.keep_refs = a.kept.clone();
        }
        r.error = op.error.clone();
        Some(r)
    }

    /// Finishes the git step of rewind `op_id` when its files were continued: a journaled
    /// plan not yet applied (or applied in part) is applied, idempotently.
    pub fn continue_git(&self, op_id: &str) {
        let (Ok(cwd), Ok(files)) = (self.files_usable(), self.files_of(&self.id)) else {
            return;
        };
        if let Some(mut op) = read_op(&files, op_id).filter(|o| o.state == GitOpState::Planned) {
            self.apply_op(&files, cwd, &mut op, false);
        }
    }

    /// The git half of an undo (or of a roll back) of rewind `op_id` of session `owner`:
    /// what the rewind applied, reversed with the same care (a ref, HEAD or the index that
    /// changed since the rewind is left and flagged). Idempotent; nothing without a journal.
    pub fn undo_git(&self, owner: &str, op_id: &str) {
        let (Ok(cwd), Ok(files)) = (self.files_usable(), self.files_of(owner)) else {
            return;
        };
        let Some(mut op) = read_op(&files, op_id) else {
            return;
        };
        if matches!(op.state, GitOpState::Undone) {
            return;
        }
        op.state = GitOpState::Undoing;
        if write_op(&files, &op).is_err() {
            return;
        }
        self.engine.crash("undo:git-planned");
        self.apply_op(&files, cwd, &mut op, true);
    }

    /// The git half of a redo of the undone rewind `op_id` (journal of `owner`), as the new
    /// rewind `new_op`: the same plan applied again, with its own journal.
    pub fn redo_git(&self, owner: &str, op_id: &str, new_op: &str) {
        let (Ok(cwd), Ok(files)) = (self.files_usable(), self.files_of(owner)) else {
            return;
        };
        let Some(old) = read_op(&files, op_id).filter(|o| o.state == GitOpState::Undone) else {
            return;
        };
        let mut op = GitOp::planned(new_op, old.plan);
        if write_op(&files, &op).is_err() {
            return;
        }
        self.apply_op(&files, cwd, &mut op, false);
    }
}

/// Records a git point around a git step as around a call of the session's own (`call`:
/// `dsh-rewind:<op>`), so what the step sets — a branch back, the stash list back — counts as the
/// session's change and a later rewind of the session moves it again, while a change made by
/// hand before the step stays outside the agent. Anchored at the newest point's message: never
/// the first point of an earlier message. Best effort: a point that cannot be recorded costs
/// only that attribution.
fn mark(files: &Session, phase: ScanPhase, call: &str) {
    let anchor = files.git_newest_anchor().ok().flatten().unwrap_or(0);
    let mut req = ScanRequest::new(phase, anchor);
    req.call_id = Some(call.to_owned());
    let _ = files.record_git(&req);
}

/// Whether a planned git step is journaled: it changes something, or it leaves something the
/// rewind would have moved (flagged), which the report read back from the journal then names —
/// a stash list left because its commits were pruned, a branch moved by hand.
fn worth_a_journal(plan: &GitPlan) -> bool {
    !plan.is_empty() || !plan.flagged.is_empty()
}

fn write_op(files: &Session, op: &GitOp) -> Result<(), ()> {
    let json = serde_json::to_vec_pretty(op).map_err(|_| ())?;
    files.write_git_op(&op.op_id, &json).map_err(|_| ())
}

fn read_op(files: &Session, op_id: &str) -> Option<GitOp> {
    let bytes = files.read_git_op(op_id).ok()??;
    let op: GitOp = serde_json::from_slice(&bytes).ok()?;
    (op.v <= GIT_OP_VERSION).then_some(op)
}
