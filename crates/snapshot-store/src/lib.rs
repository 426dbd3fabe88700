//! A host-independent checkpoint store for rewinding a workspace.
//!
//! The store records the *before-state* of every file a coding agent changes,
//! grouped by the user message ("anchor", a session-log seq) the change belongs
//! to, and restores a workspace to any earlier anchor exactly — or leaves it
//! exactly as it was when anything goes wrong.
//!
//! * **Content-addressed blobs** (SHA-256): identical before-states are stored once,
//!   read whole up to 1 MiB (content the store has writes nothing) and streamed above
//!   (never held in memory twice), verified on every restore.
//! * **Capability handles**: the store root and each session cwd are opened once
//!   ([`Store::open`], [`Store::session`]); every other access is relative to those
//!   handles, one path component at a time without following symlinks.
//! * **Journaled restore**: rescue bytes and an intent journal are persisted before
//!   the first mutation; interrupted restores can be continued or rolled back
//!   ([`Session::reconcile_restores`], [`Session::continue_restore`],
//!   [`Session::rollback_restore`]); a completed one can be undone
//!   ([`Session::undo_restore`]) unless a restored path changed since.
//! * **Versioned formats**: a store or record written by a newer build fails closed.
//! * **One seam** ([`FaultSeam`]) sees every filesystem call, for fault injection and crash points.
//!
//! ```
//! use snapshot_store::{Store, StoreOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tmp = tempfile::tempdir()?;
//! let (root, cwd) = (tmp.path().join("store"), tmp.path().join("ws"));
//! std::fs::create_dir_all(&cwd)?;
//! std::fs::write(cwd.join("a.txt"), b"v1")?;
//!
//! let store = Store::open(&root, StoreOptions::default())?;
//! let session = store.session("session-1", &cwd)?;
//! // Message 10: a tool call rewrites a.txt.
//! session.recheck_tracked(10)?;
//! session.capture_before("call-1", "a.txt".as_ref())?;
//! std::fs::write(cwd.join("a.txt"), b"v2")?;
//! session.commit("call-1", 10, true)?;
//!
//! // Rewind to message 10: preview, then restore.
//! let plan = session.plan_restore(10)?;
//! assert_eq!(plan.actions.len(), 1);
//! let outcome = session.restore(&plan, "op-1")?;
//! assert_eq!(outcome.written.len(), 1);
//! assert_eq!(std::fs::read(cwd.join("a.txt"))?, b"v1");
//! // And undo it.
//! session.undo_restore("op-1")?;
//! assert_eq!(std::fs::read(cwd.join("a.txt"))?, b"v2");
//! # Ok(()) }
//! ```
//!
//! The on-disk format and the durability guarantee are documented in
//! `docs/format.md` of the repository.

mod blob;
mod capture;
mod chain;
mod codec;
mod commit;
mod diff_view;
mod error;
mod format;
mod fsio;
mod gc;
mod git_record;
mod journal;
mod log;
mod offline;
mod outcome;
mod pack;
mod path;
mod plan;
mod prune;
mod recheck;
mod records;
mod scan;
mod scan_record;
mod seam;
mod session;
mod store;
pub mod usage;

pub use capture::CaptureOutcome;
pub use chain::{ChainLink, ChainPlanError};
pub use commit::CommitOutcome;
pub use diff_view::{
    ChangeOrigin, DiffLimits, FileDiff, SelectionError, SelectionFault, SideState, choose,
    diff_texts, path_matches,
};
pub use error::{
    CaptureError, ClearError, CommitError, CompactError, CorruptFile, DiffError, FsFailure,
    JournalError, NewerVersion, OpenError, PlanError, PruneError, QueryError, RecheckError,
    ReconcileError, RestoreError, SessionError,
};
pub use format::{BeforeState, EntrySource, RECORD_VERSION, STORE_VERSION, SkipReason};
pub use fsio::{DiskMeta, FileKind};
pub use gc::GcReport;
pub use git_record::{GIT_POINT_VERSION, GitBlobKind, GitPointRecord};
pub use journal::{Desired, PreparedRestore, RestoreOutcome, RestoreStatus};
pub use log::LOG_VERSION;
pub use offline::{
    BlobRead, HOLDS_DIR, Inventory, LOST_NOTE, Problem, Progress, QUARANTINE_DIR, QuarantineReport,
    RecordsLost, SessionHold, SessionUsage, VerifyReport, Warning, WorkspaceUsage,
};
pub use outcome::{JournalState, PathFailure};
pub use pack::{CHUNK_TARGET, CompactReport, PACK_DEAD_PERCENT, PACK_MEMBER_MAX, PACK_TARGET};
pub use path::{HEX_SPELLING, IdError, MAX_ID_LEN, RelPath, RelPathError, decode_id, encode_id};
pub use plan::{Action, Current, PlannedAction, RestorePlan, SkippedPath, UncoveredPath};
pub use prune::{FormatOutcome, PruneOptions, PruneReport};
pub use recheck::{RecheckOutcome, RecordedChange};
pub use scan::{
    DEFAULT_MAX_BASELINE_BYTES, DEFAULT_MAX_FILES, NotCovered, SCAN_BUDGET_CODE, ScanError,
    ScanMode, ScanPhase, ScanRefusal, ScanReport, ScanRequest, WATCH_ENV, WORKSPACE_UNUSED_GRACE,
    workspace_key,
};
pub use seam::{Area, CrashPoint, FaultSeam, FsOp, NoFaults};
pub use session::{LOOK_LATER_AFTER, Session};
pub use store::{
    DEFAULT_COMPACT_MIN_BYTES, DEFAULT_KEEP_IN_LOG_BYTES, DEFAULT_MAX_FILE_BYTES, Durability,
    Store, StoreOptions,
};

/// The number of CPUs this process may use, looked up once: `available_parallelism`
/// reads the cgroup's files (about a dozen calls) every time it is asked, and scans
/// and re-checks ask at every message and around every shell call.
pub(crate) fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}
