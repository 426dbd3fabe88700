//! `BindingRestoreOutcome`: the outcome of a journaled restore.

use super::BindingFailedPath;
use super::BindingNotCovered;
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
    /// Paths changed only outside the agent since the target: left as they are.
    pub outside: Vec<String>,
    /// Workspace paths whose content the store does not hold (budgets, unreadable, ...).
    pub not_covered: Vec<BindingNotCovered>,
    /// Planned paths the selection left as they are (`keep`, or not in `only`).
    pub kept: Vec<String>,
}
