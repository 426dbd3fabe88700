//! `BindingStorage`: how much the snapshot store takes, in all and for one workspace.

use napi_derive::napi;

/// One session's storage.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingStorageSession {
    /// The session id.
    pub session_id: String,
    /// Its records plus every blob it references (blobs shared with others counted in full).
    pub bytes: f64,
    /// Its records plus the blobs nothing else references: what removing it frees.
    pub own_bytes: f64,
    /// Newest activity in its snapshot directory, ms since the Unix epoch.
    pub last_activity: f64,
    /// Whether it belongs to the workspace asked about.
    pub in_workspace: bool,
}

/// The storage of the snapshot store.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingStorage {
    /// Bytes of the whole store: every session's records, every workspace index, every blob
    /// counted once.
    pub total_bytes: f64,
    /// Of which blobs nothing references (garbage collection frees them).
    pub unreferenced_bytes: f64,
    /// Sessions in the store.
    pub sessions: u32,
    /// Bytes of the workspace asked about: its sessions' records, its scan index and the blobs
    /// only it references.
    pub workspace_bytes: f64,
    /// Bytes of the blobs the workspace references that other workspaces reference too (counted
    /// in `total_bytes` only).
    pub workspace_shared_bytes: f64,
    /// Sessions of the workspace in the store.
    pub workspace_sessions: u32,
    /// The biggest sessions (by `bytes`), at most the number asked for.
    pub biggest: Vec<BindingStorageSession>,
    /// Records that could not be read: the figures are then lower bounds.
    pub problems: u32,
}
