//! The workspace scan: every change to an in-scope file comes back, whatever made it.
//!
//! A per-workspace index (`workspaces/<key>/index.bin`, with the entries changed since it
//! was written in `index.delta`) holds the `lstat` metadata and the content hash of every
//! in-scope regular file; the content itself is in the store's `blobs/` from the first
//! scan on (the baseline). Around every tool call
//! that the fs-intent capture does not cover, and at every message boundary, the
//! host calls [`Session::scan`](crate::Session::scan): a parallel stat walk compares
//! the workspace with the index, reads only what changed, and records the changes
//! (see `docs/tracking-boundary.md`, section "Scan").
//!
//! Files by concern: `index` (the binary format), `walk` (the stat walk and its
//! ignore rules), `hash` (reading changed files into the store), `workspace`
//! (key, locks, the cached index), `diff` (one scan: compare, read, update). What a
//! session records from a scan is in `crate::scan_record`; the planner's and the
//! restore's share in `crate::plan::scanned`. This module knows no session.

mod absence;
pub(crate) mod delta;
pub(crate) mod diff;
pub(crate) mod git_baseline;
mod hash;
pub(crate) mod index;
pub(crate) mod pin;
mod walk;
pub(crate) mod watch;
pub(crate) mod workspace;

use std::collections::HashSet;
use std::path::Path;

use crate::error::Fault;
use crate::path::{RelPath, is_hidden};
use crate::store::Store;
use index::Coverage;

use diff::referenced;
use workspace::{WORKSPACES, dir_files, index_path_of, read_for_gc, read_index};

pub(crate) use absence::Absence;
pub use watch::{ScanMode, WATCH_ENV};
pub use workspace::{UNUSED_GRACE as WORKSPACE_UNUSED_GRACE, workspace_key};

/// The stable code of a scan that stopped at the file-count limit.
pub const SCAN_BUDGET_CODE: &str = "rewind/scan-budget";

/// When the scan runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanPhase {
    /// Before a tool call that the fs-intent capture does not cover.
    Before,
    /// After that call (successful or not).
    After,
    /// At a new human message.
    Boundary,
}

impl ScanPhase {
    /// `before`, `after` or `boundary`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanPhase::Before => "before",
            ScanPhase::After => "after",
            ScanPhase::Boundary => "boundary",
        }
    }

    /// Parses [`ScanPhase::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "before" => Some(ScanPhase::Before),
            "after" => Some(ScanPhase::After),
            "boundary" => Some(ScanPhase::Boundary),
            _ => None,
        }
    }
}

/// A scan request.
#[derive(Debug, Clone)]
pub struct ScanRequest {
    /// When the scan runs.
    pub phase: ScanPhase,
    /// The tool call (phases `before` / `after`).
    pub call_id: Option<String>,
    /// The anchor: the seq of the human message the turn belongs to.
    pub anchor_seq: u64,
    /// Whether the call succeeded (phase `after`; a failed call's changes are recorded too).
    pub ok: bool,
    /// The workspace's baseline byte budget: total bytes of file content the store
    /// keeps for the workspace's current state.
    pub max_baseline_bytes: u64,
    /// The file-count limit: more files (or directories) in scope refuse the scan.
    pub max_files: u64,
    /// A baseline saves its progress every this many files (resumable when interrupted).
    pub progress_batch: usize,
    /// Threads of the walk and of hashing (0 = the number of CPUs).
    pub threads: usize,
    /// Use the workspace's change watcher when it can vouch for what changed (`false`: walk
    /// in full, as with `DSH_REWIND_WATCH=0`).
    pub watch: bool,
}

impl ScanRequest {
    /// A request with the default budgets (2 GiB baseline, 1,000,000 files).
    pub fn new(phase: ScanPhase, anchor_seq: u64) -> Self {
        ScanRequest {
            phase,
            call_id: None,
            anchor_seq,
            ok: true,
            max_baseline_bytes: DEFAULT_MAX_BASELINE_BYTES,
            max_files: DEFAULT_MAX_FILES,
            progress_batch: 8192,
            threads: 0,
            watch: true,
        }
    }
}

/// Default baseline byte budget per workspace.
pub const DEFAULT_MAX_BASELINE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Default file-count limit.
pub const DEFAULT_MAX_FILES: u64 = 1_000_000;

/// A path the store does not hold the content of, with why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NotCovered {
    /// Workspace-relative path (a directory for an unreadable directory).
    pub path: RelPath,
    /// Why, as text.
    pub reason: String,
}

/// A scan that refused to run to the end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScanRefusal {
    /// Stable code ([`SCAN_BUDGET_CODE`]).
    pub code: &'static str,
    /// What happened and what to do.
    pub message: String,
}

/// What [`Session::scan`](crate::Session::scan) found and recorded.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ScanReport {
    /// In-scope entries (regular files, symlinks, special files).
    pub files: u64,
    /// Entries recorded into the session's groups (restorable before-states and outside notes).
    pub recorded: usize,
    /// Created since the previous scan.
    pub created: Vec<RelPath>,
    /// Content changed.
    pub modified: Vec<RelPath>,
    /// Deleted.
    pub deleted: Vec<RelPath>,
    /// Only the permission bits changed.
    pub mode_changed: Vec<RelPath>,
    /// Changed outside the agent (recorded as notes, never restored).
    pub outside: Vec<RelPath>,
    /// The paths changed, as this scan or an earlier one found, since a tool call of another
    /// session of the workspace started that still runs in this process (that call may have
    /// made them; its own scan after it records them as its call's), sorted.
    pub in_flight: Vec<RelPath>,
    /// Paths whose content the store does not hold.
    pub not_covered: Vec<NotCovered>,
    /// Set when the scan stopped at the file-count limit (nothing was recorded).
    pub refused: Option<ScanRefusal>,
    /// Every in-scope file has been read once (the baseline is done).
    pub baseline_complete: bool,
    /// This scan had no index to compare with (it built the baseline; lists are empty).
    pub baseline: bool,
    /// Set when the index was torn or corrupt and rebuilt by this scan.
    pub index_rebuilt: Option<String>,
    /// How the scan looked at the workspace: a full walk, or only the paths the change
    /// watcher reported.
    pub mode: ScanMode,
    /// Why the scan walked the workspace in full (set with [`ScanMode::Full`]).
    pub full_reason: Option<String>,
    /// Wall time of the scan, milliseconds.
    pub elapsed_ms: f64,
}

pub use crate::error::ScanError;

/// Adds every blob a workspace index references to `live`. A corrupt index is
/// skipped (the next scan rebuilds it and stores what it needs again); a newer one
/// fails the sweep (closed: nothing is removed).
pub(crate) fn mark_live(store: &Store, live: &mut HashSet<String>) -> Result<(), Fault> {
    for name in store.inner.fs.list(Path::new(WORKSPACES))? {
        if is_hidden(&name) {
            continue;
        }
        if let Some(ix) = read_for_gc(store, &name)? {
            live.extend(referenced(&ix));
        }
    }
    Ok(())
}

/// The content one workspace index names, for [`Store::verify`]: its store-relative path,
/// the blob files its [`Coverage::Hashed`] entries name, and the session whose log keeps
/// the content of its [`Coverage::Kept`] entries, with that content.
pub(crate) struct IndexContent {
    pub path: String,
    pub hashed: Vec<String>,
    pub keeper: Option<String>,
    pub kept: Vec<String>,
}

/// Every workspace index of the store, read for [`Store::verify`]: its content, or why it
/// cannot be read (corrupt, newer than this build, an I/O error). A workspace
/// directory with no index yet is left out. `Err` only when the store's `workspaces`
/// directory cannot be listed.
pub(crate) fn index_contents(store: &Store) -> Result<Vec<Result<IndexContent, Fault>>, Fault> {
    let mut out = Vec::new();
    for name in store.inner.fs.list(Path::new(WORKSPACES))? {
        if is_hidden(&name) {
            continue;
        }
        let ix = match read_index(store, &name) {
            Ok(Some(ix)) => ix,
            Ok(None) => continue,
            Err(e) => {
                out.push(Err(e));
                continue;
            }
        };
        let mut hashed = Vec::new();
        let mut kept = Vec::new();
        for e in ix.entries().values() {
            match &e.cov {
                Coverage::Hashed(sha) => hashed.push(hex::encode(sha)),
                Coverage::Kept(sha) => kept.push(hex::encode(sha)),
                Coverage::Pending | Coverage::Not(_) | Coverage::Git(_) => {}
            }
        }
        out.push(Ok(IndexContent {
            path: index_path_of(&name).to_string_lossy().into_owned(),
            hashed,
            keeper: ix.keeper,
            kept,
        }));
    }
    Ok(out)
}

/// One workspace directory of the store, for [`Store::inventory`](crate::Store::inventory).
pub(crate) struct WorkspaceRefs {
    pub key: String,
    /// Bytes of its own files.
    pub bytes: u64,
    /// The blobs its index references.
    pub refs: Vec<String>,
    /// Its files' newest modification time, ms since the Unix epoch.
    pub last_write_ms: u64,
}

/// Every workspace directory of the store: its key, the bytes of its own files
/// (the index, the lock) and the blobs its index references. A corrupt or missing
/// index references nothing (the next scan rebuilds it).
pub(crate) fn workspace_refs(store: &Store) -> Result<Vec<WorkspaceRefs>, Fault> {
    let mut out = Vec::new();
    for name in store.inner.fs.list(Path::new(WORKSPACES))? {
        if is_hidden(&name) {
            continue;
        }
        let Some(key) = name.to_str() else { continue };
        // Unreadable: counted as empty and unwritten (the inventory goes on).
        let (bytes, last_write_ns) =
            dir_files(store, &Path::new(WORKSPACES).join(&name)).unwrap_or((0, 0));
        let refs = match read_for_gc(store, &name)? {
            Some(ix) => referenced(&ix).collect(),
            None => Vec::new(),
        };
        out.push(WorkspaceRefs {
            key: key.to_string(),
            bytes,
            refs,
            last_write_ms: u64::try_from(last_write_ns / 1_000_000).unwrap_or(0),
        });
    }
    Ok(out)
}
