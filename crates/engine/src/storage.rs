//! How much the snapshot store takes, in all and for one workspace: the figures the plugin's
//! `storage` RPC shows, computed once here from the store's inventory.

use std::collections::HashMap;
use std::path::Path;

use crate::engine::Engine;
use crate::error::EngineError;

/// One session's storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStorage {
    /// The session id.
    pub session_id: String,
    /// Its records plus every blob it references (blobs shared with others counted in full).
    pub bytes: u64,
    /// Its records plus the blobs nothing else references: what removing it frees.
    pub own_bytes: u64,
    /// Newest activity in its snapshot directory, ms since the Unix epoch.
    pub last_activity_ms: u64,
    /// Whether it belongs to the workspace asked about.
    pub in_workspace: bool,
}

/// The storage of the snapshot store, with the share of one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// Bytes of the whole store: every session's records, every workspace index, every blob
    /// counted once.
    pub total_bytes: u64,
    /// Of which blobs nothing references (garbage collection frees them).
    pub unreferenced_bytes: u64,
    /// Sessions in the store.
    pub sessions: usize,
    /// Bytes of the workspace: its sessions' records, its scan index and the blobs only it
    /// references.
    pub workspace_bytes: u64,
    /// Bytes of the blobs the workspace references that other workspaces reference too
    /// (counted in `total_bytes` only).
    pub workspace_shared_bytes: u64,
    /// Sessions of the workspace in the store.
    pub workspace_sessions: usize,
    /// The biggest sessions (by `bytes`, then id), at most the number asked for.
    pub biggest: Vec<SessionStorage>,
    /// Records that could not be read: the figures are then lower bounds.
    pub problems: usize,
    /// What the whole store holds uncompressed (`total_bytes` with each packed blob at its
    /// own length).
    pub logical_bytes: u64,
    /// What the whole store takes on disk: every file's allocated blocks.
    pub disk_bytes: u64,
    /// The workspace's share uncompressed (its records, its scan index, the blobs only it
    /// references, at their own lengths).
    pub workspace_logical_bytes: u64,
    /// The workspace's share on disk (the same, each loose blob rounded up to a 4 KiB block,
    /// each packed one at its part of its pack).
    pub workspace_disk_bytes: u64,
    /// Blobs held in packs only.
    pub packed_blobs: usize,
}

impl Storage {
    /// `disk_bytes / logical_bytes` (0 for an empty store): below 1 once blobs are packed.
    pub fn ratio(&self) -> f64 {
        if self.logical_bytes == 0 {
            0.0
        } else {
            self.disk_bytes as f64 / self.logical_bytes as f64
        }
    }
}

/// The figures of `inv` for the workspace made of the sessions `members` and the scan states
/// `scan_keys`, with the `top` biggest sessions.
pub fn storage_of(
    inv: &snapshot_store::Inventory,
    members: &[String],
    scan_keys: &[String],
    top: usize,
) -> Storage {
    let member = |id: &str| members.iter().any(|m| m == id);
    let scanned = |key: &str| scan_keys.iter().any(|k| k == key);
    // Per blob: (size, referenced from the workspace, referenced from elsewhere).
    let mut blobs: HashMap<&str, (u64, bool, bool)> = HashMap::new();
    let mut workspace_bytes = 0u64;
    let mut workspace_sessions = 0usize;
    // The workspace's records and scan index (counted alike, logical and on disk).
    let mut workspace_files = 0u64;
    for s in &inv.sessions {
        let inside = member(&s.session_id);
        if inside {
            workspace_sessions += 1;
            workspace_bytes += s.record_bytes;
            workspace_files += s.record_bytes;
        }
        for (sha, size) in &s.referenced {
            let e = blobs.entry(sha.as_str()).or_insert((*size, false, false));
            if inside {
                e.1 = true;
            } else {
                e.2 = true;
            }
        }
    }
    for w in &inv.workspaces {
        let inside = scanned(&w.key);
        if inside {
            workspace_bytes += w.index_bytes;
            workspace_files += w.index_bytes;
        }
        for (sha, size) in &w.referenced {
            let e = blobs.entry(sha.as_str()).or_insert((*size, false, false));
            if inside {
                e.1 = true;
            } else {
                e.2 = true;
            }
        }
    }
    let mut shared = 0u64;
    let (mut workspace_logical, mut workspace_disk) = (workspace_files, workspace_files);
    for (sha, (size, inside, outside)) in &blobs {
        match (inside, outside) {
            (true, false) => {
                workspace_bytes += size;
                workspace_logical += inv.logical_of(sha, *size);
                workspace_disk += if inv.packed_share.contains_key(*sha) {
                    *size
                } else {
                    size.div_ceil(4096) * 4096
                };
            }
            (true, true) => shared += size,
            _ => {}
        }
    }
    let mut biggest: Vec<SessionStorage> = inv
        .sessions
        .iter()
        .map(|s| SessionStorage {
            session_id: s.session_id.clone(),
            bytes: s.record_bytes + s.blob_bytes,
            own_bytes: s.record_bytes + s.exclusive_blob_bytes,
            last_activity_ms: s.last_activity_ms,
            in_workspace: member(&s.session_id),
        })
        .collect();
    biggest.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    biggest.truncate(top);
    Storage {
        total_bytes: inv.total_bytes(),
        unreferenced_bytes: inv.unreferenced_bytes,
        sessions: inv.sessions.len(),
        workspace_bytes,
        workspace_shared_bytes: shared,
        workspace_sessions,
        biggest,
        problems: inv.problems.len(),
        logical_bytes: inv.logical_bytes(),
        disk_bytes: inv.disk_bytes,
        workspace_logical_bytes: workspace_logical,
        workspace_disk_bytes: workspace_disk,
        packed_blobs: inv.packed_blobs,
    }
}

impl Engine {
    /// The store's storage figures ([`storage_of`]) for the workspace made of the sessions
    /// `members` working in `cwds`: the figures of the files on disk, commits the open session
    /// handles still hold included.
    pub fn storage(
        &self,
        members: &[String],
        cwds: &[&Path],
        top: usize,
    ) -> Result<Storage, EngineError> {
        let scan_keys: Vec<String> = cwds
            .iter()
            .filter_map(|c| std::fs::canonicalize(c).ok())
            .map(|c| snapshot_store::workspace_key(&c))
            .collect();
        self.flush_all();
        let inv = self.with_store(|store| store.inventory())??;
        Ok(storage_of(&inv, members, &scan_keys, top))
    }
}
