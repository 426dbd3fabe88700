//! `BindingScanReport`: what a workspace scan found and recorded.

use super::{BindingNotCovered, BindingScanRefusal};
use napi_derive::napi;

/// What a workspace scan found and recorded.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingScanReport {
    /// The phase scanned.
    #[napi(ts_type = "'before' | 'after' | 'boundary'")]
    pub phase: String,
    /// In-scope entries.
    pub files: f64,
    /// Entries recorded (restorable before-states and outside notes).
    pub recorded: f64,
    /// Paths created (restorable).
    pub created: Vec<String>,
    /// Paths whose content changed (restorable).
    pub modified: Vec<String>,
    /// Paths deleted (restorable).
    pub deleted: Vec<String>,
    /// Paths whose permission bits changed (restorable).
    pub mode_changed: Vec<String>,
    /// Paths changed outside the agent (noted, never restored).
    pub outside: Vec<String>,
    /// Paths changed, as this scan or an earlier one found, since a tool call of another
    /// session of the workspace started that is still running (it may have made them).
    pub in_flight: Vec<String>,
    /// Workspace paths whose content the store does not hold.
    pub not_covered: Vec<BindingNotCovered>,
    /// Set when the scan refused to run to the end (nothing was recorded).
    pub refused: Option<BindingScanRefusal>,
    /// Every in-scope file has been read once (the baseline is done).
    pub baseline_complete: bool,
    /// How the scan looked at the workspace: `full` (a walk of the whole workspace) or
    /// `watched` (only the paths the change watcher reported).
    #[napi(ts_type = "'full' | 'watched'")]
    pub mode: String,
    /// Why the scan walked in full (with mode `full`).
    pub full_reason: Option<String>,
    /// Wall time of the scan in milliseconds.
    pub elapsed_ms: f64,
}
