//! Snapshot auto-cleanup: the policy and the age-based sweep that keeps the
//! snapshot store from growing forever.
//!
//! * **Policy** ([`Policy`]): `enabled` (off by default) and an idle-day
//!   cutoff ([`DEFAULT_MAX_AGE_DAYS`]). It is read and written through a
//!   [`PolicyPort`] the host implements over its settings. Without a backend
//!   ([`NoBackend`]) the policy fails closed: [`policy_status`] reports
//!   "unavailable" and every sweep refuses with [`SweepError::Policy`],
//!   deleting nothing.
//! * **Sweep** ([`Cleaner::sweep`]): removes whole session directories of the
//!   snapshot store (`<store root>/sessions/<session>`) whose newest
//!   modification time is older than the cutoff. Never an active session,
//!   never a pinned one (caller [`Pins`], or an open restore journal found in
//!   the session's `journals/`), never anything that is not a session
//!   directory (symlinks and unknown entries are left alone). A dry run
//!   (the default) lists what would go and how many bytes.
//! * **Size quota** ([`Cleaner::quota_sweep`]): on by default
//!   ([`DEFAULT_MAX_SIZE_BYTES`]) and independent of the age rule's switch;
//!   the oldest idle sessions go until the store fits a byte budget, with the
//!   same keep rules (the caller pins what an undo in the rewind history
//!   needs); sizes come from the store's inventory, blobs shared with
//!   remaining sessions are not counted as freed. A run that removed sessions
//!   is recorded in `<dsh home>/snapshot-cleanup-last-quota.json`
//!   ([`Cleaner::record_quota_run`]).
//! * **Automatic sweep** ([`Cleaner::auto_sweep`]): at most once a day,
//!   recorded in `<dsh home>/snapshot-cleanup-last-sweep.json`.
//!
//! ```
//! use rewind_cleanup::{Cleaner, MemoryPolicy, Policy, Scope, SweepRequest};
//!
//! let home = tempfile::tempdir()?;
//! let cleaner = Cleaner::open(home.path())?;
//! let policy = MemoryPolicy::new(Policy { enabled: true, max_age_days: 30 });
//! let report = cleaner.sweep(&policy, &SweepRequest::dry_run(Scope::Idle).with_active(["live-session"]))?;
//! assert!(!report.applied);
//! assert!(report.items.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Removed directories are moved into the store's `trash/` in one rename and
//! then deleted, under the store's exclusive lock. Content blobs shared
//! through the store's `blobs/` are not touched: the store's garbage
//! collection frees those no session references any more.

mod layout;
mod policy;
mod quota;
mod record;
mod sweep;

pub use layout::{
    JournalPin, KNOWN_JOURNAL_VERSION, KNOWN_STORE_VERSION, SESSIONS_DIR, STORE_LOCK, STORE_MARKER,
    TRASH_DIR, decode_session_dir, encode_session_dir,
};
pub use policy::{
    DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_SIZE_BYTES, MAX_MAX_AGE_DAYS, MIN_MAX_AGE_DAYS, MemoryPolicy, NoBackend, Policy,
    PolicyError, PolicyPort, PolicyStatus, load_policy, policy_status, set_enabled,
    set_max_age_days,
};
pub use quota::{QuotaItem, QuotaReport};
pub use record::{
    LAST_QUOTA_FILE, LAST_SWEEP_FILE, LastQuota, LastSweep, QUOTA_RECORD_VERSION, QuotaRecord,
    RECORD_VERSION, RecordError, Trigger,
};
pub use sweep::{
    AutoSweep, Cleaner, CleanupStep, Clock, CrashSeam, DAY_MS, Failed, KeepReason, Kept,
    MAX_SCAN_DEPTH, OpenError, Pins, SNAPSHOT_DIR, Scope, SweepError, SweepItem, SweepReport,
    SweepRequest, system_clock,
};
