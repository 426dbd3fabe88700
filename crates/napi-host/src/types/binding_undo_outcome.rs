//! `BindingUndoOutcome`: the outcome of undoing a restore (files only).

use super::BindingFailedPath;
use napi_derive::napi;

/// The outcome of undoing a restore (files only).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingUndoOutcome {
    /// `ok` or `partial`.
    #[napi(ts_type = "'ok' | 'partial'")]
    pub kind: String,
    /// Paths written back.
    pub restored: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths that failed.
    pub failed: Vec<BindingFailedPath>,
    /// Paths changed since the rewind that the undo left as they are, as asked.
    pub kept: Vec<String>,
}

/// How an undo treats the restored paths that changed since the rewind: `take` gets
/// the pre-rewind state all the same, `keep` leaves the newer content.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct BindingUndoChoices {
    /// Paths to give their pre-rewind state although they changed since.
    pub take: Option<Vec<String>>,
    /// Paths to leave as they are now.
    pub keep: Option<Vec<String>>,
}
