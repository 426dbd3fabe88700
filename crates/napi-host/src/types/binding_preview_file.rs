//! `BindingPreviewFile`: one planned restore action.

use napi_derive::napi;

/// One planned restore action, with what it changes inside the file and who made the
/// change it undoes.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingPreviewFile {
    /// Workspace-relative path, spelled exactly (`hex:` and its bytes for a name that is not
    /// valid UTF-8).
    pub path: String,
    /// `write` (replace content), `create` (recreate a missing file) or `delete`.
    #[napi(ts_type = "'write' | 'create' | 'delete'")]
    pub action: String,
    /// Lines the restore adds, when both sides are text within the diff bounds.
    pub added: Option<f64>,
    /// Lines the restore removes, when both sides are text within the diff bounds.
    pub removed: Option<f64>,
    /// Who made the newest change since the target: this session's agent, someone
    /// outside it (the user between turns, another program), or another session of the
    /// same workspace (`originSession`).
    #[napi(ts_type = "'agent' | 'outside' | 'other-session'")]
    pub origin: String,
    /// The other session, when `origin` is `other-session`.
    pub origin_session: Option<String>,
}
