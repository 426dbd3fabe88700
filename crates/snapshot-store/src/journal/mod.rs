//! Journaled restore: rescue bytes and an intent journal before the first
//! mutation; one atomic action at a time; continue, rollback, undo.
//!
//! - this module: the journal's records and the outcomes callers see;
//! - `file`: a journal on disk — its intent, its progress log, the statuses of all;
//! - `apply`: putting one path into one state, guarded, in place or by rename;
//! - `restore`: rescue copies, the first pass of a restore, continue;
//! - `revert`: rollback, undo (with keep / take), planning a redo.

mod apply;
mod file;
mod restore;
mod revert;

pub use restore::PreparedRestore;

use apply::{Applied, Guard};
use file::{Loaded, LogWriter};

use serde::{Deserialize, Serialize};

use crate::fsio::DiskMeta;
use crate::outcome::{JournalState, PathFailure};
use crate::path::RelPath;
use crate::plan::{SkippedPath, UncoveredPath};
use crate::session::Session;

/// Files up to this size that exist are restored in place (their blob is held in
/// memory while written).
const IN_PLACE_MAX: u64 = 1 << 20;

/// Whether `PowerLoss` mode restores files in place too. It relies on the rescue
/// blobs being on disk before the first write, which one `syncfs` of the store's
/// filesystem ensures, and that call is Linux's: elsewhere that mode writes every
/// file through a temporary name, `fsync` and a rename.
const IN_PLACE_DURABLE: bool = cfg!(target_os = "linux");

/// Errors of opening a file for writing in place after which it is replaced through
/// a temporary file instead (no write permission, a read-only bind, a running
/// executable).
const IN_PLACE_REFUSED: [i32; 4] = [
    rustix::io::Errno::ACCESS.raw_os_error(),
    rustix::io::Errno::PERM.raw_os_error(),
    rustix::io::Errno::ROFS.raw_os_error(),
    rustix::io::Errno::TXTBSY.raw_os_error(),
];

/// A state a path is put into (a restore target or a rescue state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Desired {
    /// No file at the path.
    Absent,
    /// A regular file with these bytes and mode.
    File {
        /// SHA-256 (names the blob).
        sha256: String,
        /// Length.
        size: u64,
        /// Permission bits.
        mode: u32,
    },
}

/// One journaled action.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JournalAction {
    pub path: RelPath,
    pub target: Desired,
    /// The pre-restore state (`None` when it could not be saved: the action is pre-failed).
    pub rescue: Option<Desired>,
    /// `lstat` metadata at rescue time (`None` when absent).
    pub rescue_meta: Option<DiskMeta>,
    /// Directories this action may create (outermost first); removed again if empty on rollback/undo.
    pub create_dirs: Vec<RelPath>,
    /// Set when the action was refused before any mutation.
    pub prefailed: Option<String>,
    /// The path is a directory that the restore's earlier actions empty: it is removed,
    /// once it holds nothing but empty directories, before the target is written (its
    /// rescue state is then the path's absence).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaces_dir: bool,
}

/// `sessions/<id>/journals/<op>.json`: written once, before the first mutation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JournalIntent {
    pub v: u32,
    pub op_id: String,
    pub session_id: String,
    pub target_seq: u64,
    pub order: u64,
    pub actions: Vec<JournalAction>,
}

/// The session's restore journals: a journaled restore and its continue, rollback,
/// undo and redo, and the state of every journal.
#[derive(Clone, Copy)]
pub(crate) struct Journal<'s> {
    pub(crate) s: &'s Session,
}

impl Session {
    /// The session's restore journals.
    pub(crate) fn journal(&self) -> Journal<'_> {
        Journal { s: self }
    }
}

impl JournalIntent {
    pub(crate) fn blob_refs(&self) -> impl Iterator<Item = &str> {
        self.actions.iter().flat_map(|a| {
            let t = match &a.target {
                Desired::File { sha256, .. } => Some(sha256.as_str()),
                Desired::Absent => None,
            };
            let r = match &a.rescue {
                Some(Desired::File { sha256, .. }) => Some(sha256.as_str()),
                _ => None,
            };
            t.into_iter().chain(r)
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Phase {
    Apply,
    Rollback,
    Undo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Status {
    Done,
    Failed,
    Completed,
    RolledBack,
    Undone,
}

/// One line of `sessions/<id>/journals/<op>.log` (append-only progress).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LogLine {
    p: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    i: Option<usize>,
    s: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<String>,
}

/// Result of [`Session::restore`], [`Session::continue_restore`],
/// [`Session::rollback_restore`] and [`Session::undo_restore`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreOutcome {
    /// Operation id.
    pub op_id: String,
    /// Journal state after the pass.
    pub state: JournalState,
    /// Files written (bytes replaced or recreated).
    pub written: Vec<RelPath>,
    /// Files deleted.
    pub deleted: Vec<RelPath>,
    /// Paths that were already in the wanted state.
    pub unchanged: Vec<RelPath>,
    /// Per-path failures.
    pub failed: Vec<PathFailure>,
    /// Paths the plan could not restore (restore only).
    pub skipped: Vec<SkippedPath>,
    /// Paths over the cap (restore only).
    pub uncovered: Vec<UncoveredPath>,
    /// Paths changed since the restore that an undo left as they are, as asked
    /// (undo only).
    pub kept: Vec<RelPath>,
}

impl RestoreOutcome {
    /// The outcome of a pass that has done nothing yet (state `open`).
    pub fn new(op_id: &str) -> Self {
        RestoreOutcome {
            op_id: op_id.to_string(),
            state: JournalState::Open,
            written: Vec::new(),
            deleted: Vec::new(),
            unchanged: Vec::new(),
            failed: Vec::new(),
            skipped: Vec::new(),
            uncovered: Vec::new(),
            kept: Vec::new(),
        }
    }
}

/// Status of one journal, as reported by [`Session::reconcile_restores`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreStatus {
    /// Operation id.
    pub op_id: String,
    /// Target anchor of the restore.
    pub target_seq: u64,
    /// State.
    pub state: JournalState,
    /// Number of actions.
    pub actions: usize,
    /// Actions applied.
    pub done: usize,
    /// Actions whose last attempt failed.
    pub failed: usize,
    /// Actions never attempted (the interruption point).
    pub pending: usize,
    /// Whether a rollback was started.
    pub rollback_started: bool,
}
