//! The engine's states and outcomes as generated TypeScript types: string enums and the
//! objects the `BindingEngineSession` sequences resolve with.

use napi_derive::napi;

use super::{BindingHistoryEntry, BindingRestoreOutcome, BindingRestoreStatus, BindingUndoOutcome};

/// The state of a restore journal (one spelling in every layer).
#[napi(string_enum = "kebab-case")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalState {
    /// Interrupted, or finished with failures: can be continued or rolled back.
    Open,
    /// Every action applied: can be undone.
    Completed,
    /// Returned to the exact pre-restore state.
    RolledBack,
    /// A completed restore that was undone.
    Undone,
    /// No journal (never written, pruned, or files not usable here).
    Missing,
    /// The journal cannot be read.
    Unreadable,
}

impl From<rewind_engine::JournalState> for JournalState {
    fn from(s: rewind_engine::JournalState) -> Self {
        use rewind_engine::JournalState as S;
        match s {
            S::Open => Self::Open,
            S::Completed => Self::Completed,
            S::RolledBack => Self::RolledBack,
            S::Undone => Self::Undone,
            S::Missing => Self::Missing,
            S::Unreadable => Self::Unreadable,
        }
    }
}

/// What was interrupted.
#[napi(string_enum = "kebab-case")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptedKind {
    /// An in-place rewind.
    Rewind,
    /// A fork rewind.
    Fork,
    /// An undo of a finished rewind.
    Undo,
}

impl From<rewind_engine::InterruptedKind> for InterruptedKind {
    fn from(k: rewind_engine::InterruptedKind) -> Self {
        match k {
            rewind_engine::InterruptedKind::Rewind => Self::Rewind,
            rewind_engine::InterruptedKind::Fork => Self::Fork,
            rewind_engine::InterruptedKind::Undo => Self::Undo,
        }
    }
}

/// What the reconcile pass decided about an interrupted entry.
#[napi(string_enum = "kebab-case")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// Settled on its own (`outcome` says how).
    Settled,
    /// An interrupted undo the host finishes (creates its session, then `undoFinishInterrupted`).
    FinishUndo,
    /// Left for the user to continue or roll back.
    Open,
}

/// A failure reported as data (the step it ended is not undone).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingFault {
    /// Stable code.
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

impl From<rewind_engine::EngineError> for BindingFault {
    fn from(e: rewind_engine::EngineError) -> Self {
        Self {
            code: e.code.as_str().to_owned(),
            message: e.message,
        }
    }
}

/// An undo may run (`undoCheck`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingUndoCheck {
    /// The entry to undo.
    pub entry: BindingHistoryEntry,
    /// The session whose journal holds the files (a fork's parent, else the entry's session).
    pub owner: String,
    /// Whether files come back (the journal is completed).
    pub files: bool,
}

/// What an undo's file step did (`undoFiles`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingUndoDone {
    /// The files.
    pub files: BindingUndoOutcome,
    /// Why `undoneAt` could not be recorded, if so (the next reconcile finishes it).
    pub not_recorded: Option<BindingFault>,
}

/// What a redo did.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRedoDone {
    /// The redo's own op id.
    pub op_id: String,
    /// The target seq of the redone rewind.
    pub target_seq: f64,
    /// The session the redone rewind belongs to (the conversation after it).
    pub owner: String,
    /// The files.
    pub outcome: BindingRestoreOutcome,
    /// Why the redo's entry could not be finished, if so.
    pub not_recorded: Option<BindingFault>,
}

/// What the reconcile pass found about one interrupted entry.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingJudged {
    /// What it decided.
    pub judgement: Judgement,
    /// The outcome written when `settled` (`abandoned`, `rolled-back`, `done`).
    #[napi(ts_type = "'abandoned' | 'rolled-back' | 'done'")]
    pub outcome: Option<String>,
    /// What was interrupted.
    pub kind: InterruptedKind,
    /// The state of its restore journal.
    pub journal: JournalState,
    /// Where its restore stands, when it has a journal.
    pub restore: Option<BindingRestoreStatus>,
}

/// What an interrupted entry — or a rewind that is over but left its journal open
/// (`partial`) — left, as the engine describes it (`describe`, `partials`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingInterruptedState {
    /// The entry's op id.
    pub op_id: String,
    /// What was interrupted.
    pub kind: InterruptedKind,
    /// The state of its restore journal.
    pub journal: JournalState,
    /// Where its restore stands, when it has a journal.
    pub restore: Option<BindingRestoreStatus>,
    /// A rewind that ran to its end but could not restore some files.
    pub partial: bool,
}

/// What continuing or rolling back an interrupted rewind did.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingResolved {
    /// What was interrupted.
    pub kind: InterruptedKind,
    /// The files.
    pub outcome: BindingRestoreOutcome,
    /// The history outcome written: `done`, `partial`, `rolled-back`, `undone` or `continued`;
    /// empty when the history entry could not be updated.
    #[napi(ts_type = "'done' | 'partial' | 'rolled-back' | 'undone' | 'continued' | ''")]
    pub entry_outcome: String,
    /// Leftover restore temp files removed.
    pub temps_removed: Vec<String>,
}

/// The history entry a rewind starts with (`begin`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRewindStart {
    /// The rewind's op id.
    pub op_id: String,
    /// The seq of the message rewound to.
    pub target_seq: f64,
    /// The text of that message.
    pub target_text: Option<String>,
    /// The id of the marker about to be appended (in-place rewind).
    pub marker_id: Option<String>,
    /// The child session about to be created (fork rewind).
    pub fork_child_session_id: Option<String>,
}

/// A rewind's restore (`restoreFiles`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRewindRestore {
    /// The seq of the message rewound to.
    pub target_seq: f64,
    /// The rewind's op id.
    pub op_id: String,
    /// The fork chain of the session.
    pub ancestors: Option<Vec<super::BindingChainLink>>,
    /// Which planned files to take.
    pub selection: Option<super::BindingRestoreSelection>,
    /// Paths the host knows the scan does not cover, for the record.
    pub not_covered: Option<Vec<super::BindingNotCovered>>,
    /// Leave the workspace's git repository as it is (the files alone are restored).
    pub keep_git: Option<bool>,
}

/// What the git half of a rewind will do (`gitPreview`) or did (`gitReport`, `restoreFiles`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingGitReport {
    /// One line: `HEAD: detached at v2.40.0 → agent-work @ 3fce3b5; …`.
    pub summary: String,
    /// Why the repository is left alone (not tracked, nothing recorded), if so.
    pub untracked: Option<String>,
    /// Why the rewind would be refused (an operation in progress), if so.
    pub refusal: Option<String>,
    /// Kept as it is at the user's choice.
    pub kept: bool,
    /// Whether anything of git changes (or changed).
    pub changes: bool,
    /// What is (was) left as it is, one line each.
    pub flagged: Vec<String>,
    /// The keep-refs written (full names).
    pub keep_refs: Vec<String>,
    /// Why applying stopped, if it failed.
    pub error: Option<String>,
}

impl From<rewind_engine::GitReport> for BindingGitReport {
    fn from(r: rewind_engine::GitReport) -> Self {
        BindingGitReport {
            summary: r.summary,
            untracked: r.untracked,
            refusal: r.refusal,
            kept: r.kept,
            changes: r.changes,
            flagged: r.flagged,
            keep_refs: r.keep_refs,
            error: r.error,
        }
    }
}

/// What preparing a rewind's restore found (`prepareRestore`): the restore can run.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingPrepared {
    /// Paths refused already (changed since the plan, unreadable), with why: the restore
    /// reports them as failed.
    pub refused: Vec<super::BindingFailedPath>,
    /// How many actions the restore runs (refused ones included).
    pub actions: f64,
}

/// What a rewind's restore did (`restoreFiles`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRewindFiles {
    /// The files.
    pub outcome: BindingRestoreOutcome,
    /// Why the history entry could not be finished, if so (the next reconcile settles it).
    pub not_recorded: Option<BindingFault>,
    /// What the rewind did to the workspace's git repository (its git step, git kept at the
    /// user's choice, or left as it is for a fork); absent when git did not change.
    pub git: Option<BindingGitReport>,
}

/// What this session may do with one history entry now (`entryActions`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingEntryActions {
    /// The entry's op id.
    pub op_id: String,
    /// "Undo this rewind" is offered.
    pub undoable: bool,
    /// "Redo this rewind" is offered.
    pub redoable: bool,
}

/// An expected refusal of an engine step, returned as data (a fault rejects the promise
/// instead): `refused` is always `true`, `code` is the stable code, `details` its data.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRefusal {
    /// Always `true`: tells a refusal from a step's result.
    pub refused: bool,
    /// Stable code, e.g. `rewind/stale-undo`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Machine-readable details (a JSON object).
    pub details: serde_json::Value,
}
