//! `BindingNotCovered`: a workspace path whose content the store does not hold.

use napi_derive::napi;

/// A workspace path whose content the store does not hold, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingNotCovered {
    /// Workspace-relative path (a directory for an unreadable directory), spelled exactly
    /// (`hex:…` for a name that is not valid UTF-8).
    pub path: String,
    /// Why (over a budget, unreadable, changing while read, a symlink, ...).
    pub reason: String,
}
