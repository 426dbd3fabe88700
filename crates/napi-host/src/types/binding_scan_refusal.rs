//! `BindingScanRefusal`: why a workspace scan stopped early.

use napi_derive::napi;

/// Why a workspace scan stopped early.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingScanRefusal {
    /// Stable code, e.g. `rewind/scan-budget`.
    pub code: String,
    /// What happened and what to do.
    pub message: String,
}
