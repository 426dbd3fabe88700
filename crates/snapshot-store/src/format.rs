//! Durable record types (documented field by field in `docs/format.md`).

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{CorruptFile, Fault, NewerVersion};
use crate::fsio::DiskMeta;
use crate::path::RelPath;

/// Version of the store layout written to `store.json`.
pub const STORE_VERSION: u32 = 2;
/// Version of every JSON record (field `v`) this build writes and understands.
pub const RECORD_VERSION: u32 = 1;

/// Why a path was not captured (or cannot be restored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SkipReason {
    /// The final component is a symbolic link.
    Symlink,
    /// The file has more than one hard link (restoring one name would not restore the others).
    HardLink {
        /// The link count seen.
        nlink: u64,
    },
    /// The path names a directory.
    Directory,
    /// A FIFO, socket or device.
    Special,
    /// A parent directory is a symbolic link.
    SymlinkedParent,
    /// A parent component exists but is not a directory.
    ParentNotDirectory,
    /// The path is outside the session cwd (absolute elsewhere, or uses `..`).
    OutsideWorkspace,
    /// The path is not a usable name (empty, NUL byte).
    InvalidPath {
        /// What is wrong.
        detail: String,
    },
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Symlink => f.write_str("is a symbolic link"),
            SkipReason::HardLink { nlink } => write!(f, "has {nlink} hard links"),
            SkipReason::Directory => f.write_str("is a directory"),
            SkipReason::Special => f.write_str("is a special file"),
            SkipReason::SymlinkedParent => f.write_str("a parent directory is a symbolic link"),
            SkipReason::ParentNotDirectory => f.write_str("a parent component is not a directory"),
            SkipReason::OutsideWorkspace => f.write_str("is outside the workspace"),
            SkipReason::InvalidPath { detail } => write!(f, "invalid path: {detail}"),
        }
    }
}

/// The recorded state of a path before a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BeforeState {
    /// The path did not exist.
    Absent,
    /// A regular file whose bytes are the blob `sha256`.
    File {
        /// Lowercase hex SHA-256 of the content (names the blob).
        sha256: String,
        /// Content length in bytes.
        size: u64,
        /// Permission bits.
        mode: u32,
    },
    /// A regular file over the per-file cap: known, not backed up.
    Uncovered {
        /// Its size in bytes.
        size: u64,
    },
    /// Present but not capturable (symlink, hard link, directory, special file).
    Skipped {
        /// Why.
        reason: SkipReason,
    },
}

/// One recorded before-state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub path: RelPath,
    /// Capture order within the store (monotonic nanosecond clock, strictly increasing).
    pub order: u64,
    pub before: BeforeState,
}

/// One line of `sessions/<id>/pending.log`: a staged capture, or a call settled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PendingLine {
    pub v: u32,
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<Entry>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settled: bool,
}

/// Parses a line log: complete lines only (a torn final line is ignored).
pub(crate) fn parse_lines<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<Vec<T>, Fault> {
    let complete = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    bytes[..complete]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| parse_record(path, l))
        .collect()
}

/// Where a group entry came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EntrySource {
    /// A tool call's capture, committed after the call succeeded.
    Tool {
        /// The host's call id.
        call_id: String,
    },
    /// A change found by the message-boundary re-check.
    Recheck,
    /// A change found by a workspace scan: after call `call_id`, or (`None`) between
    /// calls of the turn. Restorable like a tool capture.
    Scan {
        /// The host's call id (`None`: found before a call, made between calls).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A change made outside the agent to a path no tool touched: a note that a
    /// plan lists ("changed outside the agent, left as is"), never restored.
    Outside,
}

/// `sessions/<id>/groups/<anchor>/<call>.json` and `.../~recheck-<order>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GroupRecord {
    pub v: u32,
    pub anchor_seq: u64,
    pub source: EntrySource,
    pub entries: Vec<Entry>,
}

/// `sessions/<id>/session.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SessionMarker {
    pub v: u32,
    pub session_id: String,
    #[serde(default)]
    pub session_format: Option<String>,
}

/// `store.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoreMarker {
    pub store_version: u32,
}

/// What the store last knew about a tracked path's disk state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum Known {
    /// Nothing trustworthy: the next recheck records the path's state.
    Unknown,
    /// Absent.
    Absent,
    /// Present with this `lstat` metadata; content hash when known; `recorded` when the
    /// store holds (or needs no record of) this exact state.
    Present {
        meta: DiskMeta,
        sha256: Option<String>,
        #[serde(default)]
        recorded: bool,
    },
}

/// One path of `tracked.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TrackedPath {
    pub path: RelPath,
    pub known: Known,
    /// The anchor at which `known` is recorded as a before-state (by a recheck), if any.
    #[serde(default)]
    pub since: Option<u64>,
}

/// `sessions/<id>/boundary.json`: the anchor of the last recheck.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BoundaryRecord {
    pub v: u32,
    pub anchor_seq: u64,
}

/// `sessions/<id>/tracked.json` (a cache: losing it costs redundant records, never correctness).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TrackedRecord {
    pub v: u32,
    pub paths: Vec<TrackedPath>,
}

#[derive(Deserialize)]
struct VersionProbe {
    v: u32,
}

/// Parses a versioned JSON record; newer → [`NewerVersion`], malformed → [`CorruptFile`].
pub(crate) fn parse_record<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, Fault> {
    let shown = path.to_string_lossy().into_owned();
    let probe: VersionProbe = serde_json::from_slice(bytes).map_err(|e| CorruptFile {
        path: shown.clone(),
        detail: format!("no version field: {e}"),
    })?;
    if probe.v > RECORD_VERSION {
        return Err(NewerVersion {
            path: shown,
            found: probe.v,
            supported: RECORD_VERSION,
        }
        .into());
    }
    if probe.v == 0 {
        return Err(CorruptFile {
            path: shown,
            detail: "version 0".into(),
        }
        .into());
    }
    serde_json::from_slice(bytes).map_err(|e| {
        CorruptFile {
            path: shown,
            detail: e.to_string(),
        }
        .into()
    })
}

/// Serializes a record (never fails for these types).
pub(crate) fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value)
        .unwrap_or_else(|e| format!("{{\"serialize-error\":\"{e}\"}}").into_bytes())
}
