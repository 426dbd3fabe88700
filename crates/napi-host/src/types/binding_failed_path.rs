//! `BindingFailedPath`: a path that failed, with why.

use napi_derive::napi;

/// A path that failed, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingFailedPath {
    /// Workspace-relative path.
    pub path: String,
    /// What went wrong.
    pub message: String,
}
