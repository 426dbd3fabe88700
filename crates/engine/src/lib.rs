//! The rewind engine of dsh-prompt-rewind: the sequences that use the core crates — undo
//! and redo of a rewind's file half with their history records, the judgement and the
//! continue / roll back of an interrupted rewind after a crash, the state of a restore
//! journal — behind one object surface and one table of error codes.
//!
//! It sits between a host adapter (the napi addon of the DSH plugin, or a command-line tool)
//! and the core crates (`rewind-plan`, `snapshot-store`, `rewind-history`,
//! `rewind-cleanup`). It knows neither napi nor DSH: what only the host knows (whether a
//! marker reached the session log, a new session's id) is passed in.
//!
//! ```
//! use rewind_engine::{Engine, EngineOptions, JournalState};
//! use rewind_engine::WorkspaceKey;
//!
//! let home = tempfile::tempdir()?;
//! let workspace = tempfile::tempdir()?;
//! let engine = Engine::open(home.path(), EngineOptions::default());
//! let key = WorkspaceKey::for_workspace("w1")?;
//! let session = engine.session("session-a", Some(workspace.path()), key);
//! assert_eq!(session.journal_state("session-a", "op-1"), JournalState::Missing);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Engine::open`] is the one place a DSH home's paths enter; session handles of the
//! snapshot store are cached there, one per session and working directory.

extern crate cleanup as rewind_cleanup;
extern crate history as rewind_history;

mod cleanup;
mod codes;
mod engine;
mod error;
mod git;
mod preview;
mod recover;
mod rewind;
mod session;
mod storage;
mod undo;

pub use cleanup::{AutoSwept, Swept, undo_pins_of};
pub use codes::ErrorCode;
pub use engine::{
    Clock, CrashSeam, Engine, EngineOptions, HISTORY_DIR, LOCKS_KEPT_FOR, SNAPSHOTS_DIR,
};
pub use error::EngineError;
pub use git::{GIT_OP_VERSION, GitOp, GitOpState, GitReport, rewinds_before_fork};
pub use preview::{
    Origin, PREVIEW_COUNT_BUDGET, PREVIEW_COUNT_FILES, Preview, PreviewFile, action_name, diff_of,
    plan_of, planned_under, preview_of, select,
};
pub use recover::{
    Interrupted, InterruptedKind, Judgement, Resolution, Resolved, continued_paths, is_interrupted,
};
pub use rewind::{NotRestored, Prepared, RestoreRequest, Restored, Start, rewind_outcome};
pub use rewind_history::{Entry, Outcome, Paths, WorkspaceKey};
pub use session::{EngineSession, history_paths, rel_paths};
pub use storage::{SessionStorage, Storage, storage_of};
pub use snapshot_store::ChainLink;
pub use undo::{
    Choices, EntryActions, FilesDone, Pick, RedoDone, UndoCheck, UndoDone, standing_redo,
    touched_files,
};

/// The state of a restore journal, one type for every layer above the store: the store's
/// four states, plus [`JournalState::Missing`] (no journal) and
/// [`JournalState::Unreadable`]. Spelled in kebab-case everywhere (`rolled-back`).
pub use rewind_history::JournalState;

/// The engine's [`JournalState`] of a journal the store read.
pub fn journal_state(state: snapshot_store::JournalState) -> JournalState {
    match state {
        snapshot_store::JournalState::Open => JournalState::Open,
        snapshot_store::JournalState::Completed => JournalState::Completed,
        snapshot_store::JournalState::RolledBack => JournalState::RolledBack,
        snapshot_store::JournalState::Undone => JournalState::Undone,
    }
}

/// The README's example, run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
