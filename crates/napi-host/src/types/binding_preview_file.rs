//! `BindingPreviewFile`: one planned restore action.

use napi_derive::napi;

/// One planned restore action.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingPreviewFile {
    /// Workspace-relative path.
    pub path: String,
    /// `write` (replace content), `create` (recreate a missing file) or `delete`.
    pub action: String,
}
