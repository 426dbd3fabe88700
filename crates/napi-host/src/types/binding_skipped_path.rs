//! `BindingSkippedPath`: a path left alone, with why.

use napi_derive::napi;

/// A path left alone, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSkippedPath {
    /// Workspace-relative path.
    pub path: String,
    /// Why it was left alone.
    pub reason: String,
}
