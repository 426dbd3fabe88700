//! `BindingRestoreStatus`: where a restore journal stands.

use napi_derive::napi;

/// Where a restore journal stands (an `open` one was interrupted and can be continued or rolled back).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRestoreStatus {
    /// The op id (shared with the history entry).
    pub op_id: String,
    /// The target seq of the rewind.
    pub target_seq: f64,
    /// `open`, `completed`, `rolled-back`, `undone`, or `unreadable` for a journal that
    /// cannot be read (its counts are 0 and `error` says why).
    pub state: super::JournalState,
    /// Planned actions.
    pub actions: u32,
    /// Actions applied.
    pub done: u32,
    /// Actions that failed.
    pub failed: u32,
    /// Actions not yet attempted.
    pub pending: u32,
    /// Whether a rollback was started.
    pub rollback_started: bool,
    /// Why the journal cannot be read (state `unreadable` only).
    pub error: Option<String>,
}
