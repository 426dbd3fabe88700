//! `BindingSweepItem`: one session directory a sweep removes (or would remove).

use napi_derive::napi;

/// One session directory a sweep removes (or, in a dry run, would remove).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSweepItem {
    /// The session id.
    pub session_id: String,
    /// Bytes in the directory.
    pub bytes: f64,
    /// Files in the directory.
    pub files: f64,
    /// Newest modification time inside (epoch ms).
    pub last_activity: f64,
}
