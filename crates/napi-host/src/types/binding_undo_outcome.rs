//! `BindingUndoOutcome`: the outcome of undoing a restore (files only).

use super::BindingFailedPath;
use napi_derive::napi;

/// The outcome of undoing a restore (files only).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingUndoOutcome {
    /// `ok` or `partial`.
    pub kind: String,
    /// Paths written back.
    pub restored: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths that failed.
    pub failed: Vec<BindingFailedPath>,
}
