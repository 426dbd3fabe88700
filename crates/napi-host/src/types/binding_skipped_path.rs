//! `BindingSkippedPath`: a path left alone, with why.

use napi_derive::napi;

/// A path left alone, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSkippedPath {
    /// Workspace-relative path, spelled exactly (`hex:` and its bytes for a name that is not
    /// valid UTF-8).
    pub path: String,
    /// Why it was left alone.
    pub reason: String,
}
