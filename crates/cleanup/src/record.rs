//! `snapshot-cleanup-last-sweep.json`: when the last sweep ran.

use std::io;

use cap_std::fs::Dir;
use rewind_durable::{AtomicOp, Step};
use serde::{Deserialize, Serialize};

use crate::sweep::CleanupStep;

/// File name of the last-sweep record, in the DSH home.
pub const LAST_SWEEP_FILE: &str = "snapshot-cleanup-last-sweep.json";
/// The newest last-sweep record version this build reads and writes.
pub const RECORD_VERSION: u32 = 1;

/// What started a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The automatic, at-most-daily sweep.
    Auto,
    /// A user's `run --apply`.
    Manual,
}

/// The last applied sweep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastSweep {
    /// The record format version.
    pub version: u32,
    /// When the sweep ran, milliseconds since the Unix epoch.
    pub at: u64,
    /// What started it.
    pub trigger: Trigger,
    /// The idle-day cutoff it used (absent for a current-session sweep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_days: Option<u32>,
    /// Session directories removed.
    pub removed: u64,
    /// Bytes those directories held.
    pub bytes: u64,
    /// The size quota the sweep enforced after the age rule (absent when none ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaRecord>,
}

/// What the size quota of a recorded sweep did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaRecord {
    /// The budget in bytes.
    pub max_bytes: u64,
    /// Sessions the quota removed.
    pub removed: u64,
    /// Bytes their removal freed.
    pub freed: u64,
    /// The store's size afterwards.
    pub bytes_after: u64,
}

/// File name of the size quota's record, in the DSH home: the last run of the quota that
/// removed anything (when, which sessions, what it freed).
pub const LAST_QUOTA_FILE: &str = "snapshot-cleanup-last-quota.json";
/// The newest last-quota record version this build reads and writes.
pub const QUOTA_RECORD_VERSION: u32 = 1;

/// The last run of the size quota that removed sessions (automatic or by hand).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastQuota {
    /// The record format version.
    pub version: u32,
    /// When the quota removed them, milliseconds since the Unix epoch.
    pub at: u64,
    /// What started it.
    pub trigger: Trigger,
    /// The budget in bytes.
    pub max_bytes: u64,
    /// The sessions removed, oldest activity first.
    pub sessions: Vec<String>,
    /// Bytes their removal freed.
    pub freed: u64,
    /// The store's size afterwards.
    pub bytes_after: u64,
}

/// The last-sweep record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A disk error.
    #[error("{op} {LAST_SWEEP_FILE}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The record is not valid JSON of a known shape (the next recorded sweep
    /// renames it aside).
    #[error("{LAST_SWEEP_FILE} is corrupt: {detail}")]
    Corrupt {
        /// What is wrong.
        detail: String,
    },
    /// The record was written by a newer build.
    #[error("{LAST_SWEEP_FILE} has version {found}; this build understands up to {RECORD_VERSION}")]
    NewerVersion {
        /// The version found.
        found: u64,
    },
}

impl RecordError {
    /// The stable error code (`rewind/failed`).
    pub fn code(&self) -> &'static str {
        "rewind/failed"
    }
}

pub(crate) fn read(home: &Dir) -> Result<Option<LastSweep>, RecordError> {
    read_versioned(home, LAST_SWEEP_FILE, RECORD_VERSION)
}

/// Reads the size quota's record; `None` when there is none.
pub(crate) fn read_quota(home: &Dir) -> Result<Option<LastQuota>, RecordError> {
    read_versioned(home, LAST_QUOTA_FILE, QUOTA_RECORD_VERSION)
}

fn read_versioned<T: serde::de::DeserializeOwned>(
    home: &Dir,
    file: &str,
    known: u32,
) -> Result<Option<T>, RecordError> {
    let bytes = match home.read(file) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RecordError::Io { op: "read", source }),
    };
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| RecordError::Corrupt {
            detail: e.to_string(),
        })?;
    let version = value
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| RecordError::Corrupt {
            detail: "missing or non-numeric \"version\"".into(),
        })?;
    if version > u64::from(known) {
        return Err(RecordError::NewerVersion { found: version });
    }
    if version == 0 {
        return Err(RecordError::Corrupt {
            detail: "version 0".into(),
        });
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| RecordError::Corrupt {
            detail: e.to_string(),
        })
}

/// Renames a corrupt record aside (kept for the user); returns the new name.
pub(crate) fn quarantine(home: &Dir, now: u64) -> Result<String, RecordError> {
    rewind_durable::rename_aside(home, LAST_SWEEP_FILE, now).map_err(|source| RecordError::Io {
        op: "rename aside",
        source,
    })
}

const TMP_PREFIX: &str = ".snapshot-cleanup-last-sweep.json.tmp-";

/// Writes the record atomically: temp file, sync, rename, directory sync.
/// Called under the store's exclusive lock, so a temp file left by a killed
/// writer is removed first.
pub(crate) fn write(
    home: &Dir,
    record: &LastSweep,
    step: &dyn Fn(CleanupStep),
) -> Result<(), RecordError> {
    write_file(home, LAST_SWEEP_FILE, TMP_PREFIX, record, step)
}

const QUOTA_TMP_PREFIX: &str = ".snapshot-cleanup-last-quota.json.tmp-";

/// Writes the size quota's record atomically, as [`write`] does the last-sweep record.
pub(crate) fn write_quota(
    home: &Dir,
    record: &LastQuota,
    step: &dyn Fn(CleanupStep),
) -> Result<(), RecordError> {
    write_file(home, LAST_QUOTA_FILE, QUOTA_TMP_PREFIX, record, step)
}

fn write_file<T: Serialize>(
    home: &Dir,
    file: &str,
    tmp_prefix: &str,
    record: &T,
    step: &dyn Fn(CleanupStep),
) -> Result<(), RecordError> {
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| RecordError::Corrupt {
        detail: e.to_string(),
    })?;
    rewind_durable::remove_temps(home, tmp_prefix);
    rewind_durable::write_atomic(home, file, tmp_prefix, &bytes, &mut |s| match s {
        Step::TempHalfWritten => step(CleanupStep::RecordHalfWritten),
        Step::TempSynced => step(CleanupStep::RecordSynced),
        Step::Renamed => step(CleanupStep::RecordRenamed),
        Step::TempCreated | Step::TempWritten | Step::DirSynced => {}
    })
    .map_err(|e| RecordError::Io {
        op: match e.op {
            AtomicOp::SyncDir => "sync dir",
            op => op.name(),
        },
        source: e.source,
    })
}
