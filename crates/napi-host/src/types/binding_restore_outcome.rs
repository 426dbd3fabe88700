//! `BindingRestoreOutcome`: the outcome of a journaled restore.

use super::BindingFailedPath;
use super::BindingSkippedPath;
use napi_derive::napi;

/// The outcome of a journaled restore.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRestoreOutcome {
    /// Paths written (content replaced or recreated).
    pub written: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths left alone, with the reason (uncovered ones included).
    pub skipped: Vec<BindingSkippedPath>,
    /// Paths that failed.
    pub failed: Vec<BindingFailedPath>,
    /// Whether the journal ended `completed`.
    pub completed: bool,
}
