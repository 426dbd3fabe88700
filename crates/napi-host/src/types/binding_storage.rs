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
    /// What the whole store holds uncompressed (`total_bytes` with each packed backup at its
    /// own length).
    pub logical_bytes: f64,
    /// What the whole store takes on disk: every file's allocated blocks.
    pub disk_bytes: f64,
    /// `disk_bytes / logical_bytes` (0 for an empty store): below 1 once backups are packed.
    pub ratio: f64,
    /// The workspace's share uncompressed (its records, its scan index, the backups only it
    /// references, at their own lengths).
    pub workspace_logical_bytes: f64,
    /// The workspace's share on disk (the same, each loose backup rounded up to a 4 KiB block,
    /// each packed one at its part of its pack).
    pub workspace_disk_bytes: f64,
    /// Backups held in packs only.
    pub packed_blobs: u32,
}

/// What a compaction did.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingCompact {
    /// Loose backups now packed.
    pub blobs_packed: f64,
    /// Their bytes, uncompressed.
    pub bytes_packed: f64,
    /// Packs written.
    pub packs_written: u32,
    /// Their bytes on disk.
    pub pack_bytes: f64,
}
