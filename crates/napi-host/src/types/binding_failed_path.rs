//! `BindingFailedPath`: a path that failed, with why.

use napi_derive::napi;

/// A path that failed, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingFailedPath {
    /// Workspace-relative path, spelled exactly (`hex:` and its bytes for a name that is not
    /// valid UTF-8).
    pub path: String,
    /// What went wrong.
    pub message: String,
}
