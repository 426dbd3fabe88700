//! `BindingCaptureOutcome`: the outcome of a before-state capture.

use napi_derive::napi;

/// The outcome of a before-state capture.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingCaptureOutcome {
    /// `captured`, `absent`, `uncovered`, `skipped`, `already-staged` or
    /// `already-recorded`.
    #[napi(ts_type = "'captured' | 'absent' | 'uncovered' | 'skipped' | 'already-staged' | 'already-recorded'")]
    pub kind: String,
    /// The path (workspace-relative when resolved).
    pub path: String,
    /// For `skipped`: why.
    pub reason: Option<String>,
}
