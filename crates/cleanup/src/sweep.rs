//! The age-based sweep over the snapshot store's session directories.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use snapshot_store::usage::{self, MarkerError, SessionsError};

use crate::layout::{JournalPin, KNOWN_STORE_VERSION, SESSIONS_DIR, STORE_LOCK, TRASH_DIR};
use crate::policy::{Policy, PolicyError, PolicyPort, load_policy};
use crate::record::{
    self, LastQuota, LastSweep, QuotaRecord, RECORD_VERSION, RecordError, Trigger,
};

/// Name of the snapshot store directory inside the DSH home.
pub const SNAPSHOT_DIR: &str = "rewind-snapshots";
/// One day in milliseconds: the automatic sweep runs at most once per this.
pub const DAY_MS: u64 = 86_400_000;
/// Deepest directory level scanned inside a session directory; a deeper tree
/// keeps the session (it is not something the store writes).
pub const MAX_SCAN_DEPTH: usize = usage::MAX_SESSION_DEPTH;

/// A step of an applied sweep, in order; the crash seam is called after each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CleanupStep {
    /// A session directory was renamed into the store's `trash/`.
    SessionMovedToTrash,
    /// That directory was deleted from `trash/`.
    SessionDeleted,
    /// Half of the new last-sweep record is in its temp file.
    RecordHalfWritten,
    /// The record's temp file is complete and synced.
    RecordSynced,
    /// The temp file was renamed over the record.
    RecordRenamed,
}

impl CleanupStep {
    /// Every step, in order.
    pub const ALL: [CleanupStep; 5] = [
        Self::SessionMovedToTrash,
        Self::SessionDeleted,
        Self::RecordHalfWritten,
        Self::RecordSynced,
        Self::RecordRenamed,
    ];

    /// The step's kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SessionMovedToTrash => "session-moved-to-trash",
            Self::SessionDeleted => "session-deleted",
            Self::RecordHalfWritten => "record-half-written",
            Self::RecordSynced => "record-synced",
            Self::RecordRenamed => "record-renamed",
        }
    }

    /// The step with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A hook called after each [`CleanupStep`] (tests use it to kill the sweeper there).
pub type CrashSeam = rewind_durable::CrashSeam<CleanupStep>;
pub use rewind_durable::{Clock, system_clock};

/// Sessions the caller knows to be pinned (e.g. by an open restore journal
/// the host tracks); a pinned session is never swept. Journals in the store's
/// own files are detected as well.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pins(BTreeSet<String>);

impl Pins {
    /// No pins.
    pub fn none() -> Self {
        Self::default()
    }
    /// Pins a session id.
    pub fn insert(&mut self, session_id: impl Into<String>) {
        self.0.insert(session_id.into());
    }
    /// Whether a session id is pinned.
    pub fn contains(&self, session_id: &str) -> bool {
        self.0.contains(session_id)
    }
    /// The pinned session ids, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter()
    }
}

impl<S: Into<String>> FromIterator<S> for Pins {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        Self(iter.into_iter().map(Into::into).collect())
    }
}

/// Which session directories a sweep considers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every session idle longer than the policy's cutoff.
    Idle,
    /// Only this session, whatever its age (`run --current`). The `active`
    /// list and pins are still honored.
    OnlySession(String),
}

/// A sweep request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepRequest {
    /// Which sessions to consider.
    pub scope: Scope,
    /// Sessions that are live (never swept).
    pub active: BTreeSet<String>,
    /// Sessions pinned by the caller (never swept).
    pub pins: Pins,
    /// `false` (the default): a dry run that only lists; `true`: delete.
    pub apply: bool,
}

impl SweepRequest {
    /// A dry run of `scope` with no active sessions and no pins.
    pub fn dry_run(scope: Scope) -> Self {
        Self {
            scope,
            active: BTreeSet::new(),
            pins: Pins::none(),
            apply: false,
        }
    }
    /// Marks sessions as active.
    pub fn with_active<S: Into<String>>(mut self, active: impl IntoIterator<Item = S>) -> Self {
        self.active.extend(active.into_iter().map(Into::into));
        self
    }
    /// Adds caller pins.
    pub fn with_pins(mut self, pins: Pins) -> Self {
        self.pins.0.extend(pins.0);
        self
    }
    /// Turns the dry run into a deleting sweep.
    pub fn applied(mut self) -> Self {
        self.apply = true;
        self
    }
}

/// A session directory removed (or, in a dry run, that would be removed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepItem {
    /// The session id.
    pub session_id: String,
    /// The directory name under `sessions/`.
    pub dir_name: String,
    /// Bytes of the regular files inside it.
    pub bytes: u64,
    /// Number of regular files inside it.
    pub files: u64,
    /// Newest modification time inside it, ms since the Unix epoch.
    pub last_activity: u64,
}

/// Why a session directory was kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeepReason {
    /// The session is live.
    Active,
    /// The caller pinned it.
    Pinned,
    /// One of its restore journals is still open.
    OpenJournal {
        /// The journal's encoded op id.
        op: String,
    },
    /// A journal could not be judged (fail closed).
    UnreadableJournal {
        /// What went wrong.
        detail: String,
    },
    /// It was active within the cutoff.
    Recent {
        /// Newest modification time inside it, ms since the Unix epoch.
        last_activity: u64,
    },
    /// Its contents could not be scanned (fail closed).
    Unreadable {
        /// What went wrong.
        detail: String,
    },
}

/// A session directory kept, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// The session id.
    pub session_id: String,
    /// Why it was kept.
    pub reason: KeepReason,
}

/// A removal that failed (the directory is still in place).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The session id.
    pub session_id: String,
    /// What went wrong.
    pub detail: String,
}

/// What a sweep did or would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepReport {
    /// Whether anything was deleted (`false` for a dry run).
    pub applied: bool,
    /// The cutoff used (`None` for [`Scope::OnlySession`]).
    pub max_age_days: Option<u32>,
    /// The clock reading the sweep used, ms since the Unix epoch.
    pub now: u64,
    /// Removed (or to-be-removed) session directories.
    pub items: Vec<SweepItem>,
    /// Total bytes of `items`.
    pub bytes: u64,
    /// Session directories kept, with reasons.
    pub kept: Vec<Kept>,
    /// Removals that failed.
    pub failed: Vec<Failed>,
    /// Entries under `sessions/` left alone because they are not session
    /// directories the store writes (files, symlinks, foreign names).
    pub ignored: Vec<String>,
}

/// Result of [`Cleaner::auto_sweep`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AutoSweep {
    /// The policy is off; nothing ran.
    Disabled,
    /// The last sweep ran less than a day ago.
    NotDue {
        /// When it ran, ms since the Unix epoch.
        last: u64,
    },
    /// The sweep ran (and deleted).
    Ran {
        /// The sweep's report.
        report: SweepReport,
        /// A corrupt last-sweep record found on the way was renamed to this name.
        quarantined: Option<String>,
    },
}

/// Opening the cleaner failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A directory could not be created or opened.
    #[error("cannot open {path}: {source}")]
    Io {
        /// The ambient path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl OpenError {
    /// The stable error code (`rewind/failed`).
    pub fn code(&self) -> &'static str {
        "rewind/failed"
    }
}

/// A sweep failed as a whole; nothing was deleted unless the report of a
/// partial run says so (removals are per directory and never half-done).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The policy is unavailable or invalid: fail closed, nothing deleted.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The store was written by a newer build; its layout is not known.
    #[error("snapshot store version {found} is newer than {KNOWN_STORE_VERSION}; nothing swept")]
    NewerStore {
        /// The version found.
        found: u64,
    },
    /// `store.json` is unreadable; nothing swept.
    #[error("snapshot store marker is corrupt: {detail}; nothing swept")]
    CorruptStore {
        /// What is wrong.
        detail: String,
    },
    /// A store directory is not a plain directory (e.g. a symlink); nothing swept.
    #[error("{path} is not a directory; nothing swept")]
    NotADirectory {
        /// The path, relative to the store root.
        path: PathBuf,
    },
    /// A store file is not a regular file (e.g. a symlink); nothing swept.
    #[error("{path} is not a regular file; nothing swept")]
    NotAFile {
        /// The path, relative to the store root.
        path: PathBuf,
    },
    /// A disk error before anything was deleted.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path, relative to the store root or the DSH home.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The last-sweep record could not be read or written.
    #[error(transparent)]
    Record(#[from] RecordError),
}

impl SweepError {
    /// The stable error code (`rewind/bad-request` for an invalid policy value, `rewind/failed` otherwise).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Policy(e) => e.code(),
            _ => "rewind/failed",
        }
    }
}

/// Sweeps the snapshot store's session directories and keeps the last-sweep
/// record.
///
/// Ambient paths enter only in [`Cleaner::open`] / [`Cleaner::open_with`];
/// everything else goes through capability handles on the DSH home and the
/// store root. Symlinks are never followed.
pub struct Cleaner {
    home: Dir,
    store: Dir,
    clock: Clock,
    crash: Option<CrashSeam>,
}

impl std::fmt::Debug for Cleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleaner").finish_non_exhaustive()
    }
}

fn open_dir(path: &Path) -> Result<Dir, OpenError> {
    let io = |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(path).map_err(io)?;
    Dir::open_ambient_dir(path, ambient_authority()).map_err(io)
}

impl Cleaner {
    /// Opens the cleaner over `<dsh_home>/rewind-snapshots` (creating the
    /// directories if missing).
    pub fn open(dsh_home: impl AsRef<Path>) -> Result<Self, OpenError> {
        let home = dsh_home.as_ref();
        Self::open_with(home, home.join(SNAPSHOT_DIR))
    }

    /// Opens the cleaner with an explicit snapshot store root; the last-sweep
    /// record lives in `dsh_home`.
    pub fn open_with(
        dsh_home: impl AsRef<Path>,
        store_root: impl AsRef<Path>,
    ) -> Result<Self, OpenError> {
        Ok(Self {
            home: open_dir(dsh_home.as_ref())?,
            store: open_dir(store_root.as_ref())?,
            clock: system_clock(),
            crash: None,
        })
    }

    /// Installs a hook called after every [`CleanupStep`].
    pub fn with_crash_seam(mut self, seam: CrashSeam) -> Self {
        self.crash = Some(seam);
        self
    }

    fn step(&self, step: CleanupStep) {
        if let Some(seam) = &self.crash {
            seam(step);
        }
    }

    /// Replaces the clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The last applied sweep, if any was recorded.
    pub fn last_sweep(&self) -> Result<Option<LastSweep>, RecordError> {
        record::read(&self.home)
    }

    /// The last run of the size quota that removed sessions, if any was recorded.
    pub fn last_quota(&self) -> Result<Option<LastQuota>, RecordError> {
        record::read_quota(&self.home)
    }

    /// Records a run of the size quota that removed sessions (written atomically over
    /// the previous one, under the store's lock).
    pub fn record_quota_run(&self, run: &LastQuota) -> Result<(), RecordError> {
        let _lock = self.lock_store().map_err(|e| RecordError::Io {
            op: "lock",
            source: io::Error::other(e.to_string()),
        })?;
        record::write_quota(&self.home, run, &|s| self.step(s))
    }

    /// Adds what the size quota did to the last-sweep record (the automatic sweep
    /// enforces the quota right after its age rule). Nothing is written when no
    /// sweep was recorded.
    pub fn record_quota(&self, quota: QuotaRecord) -> Result<(), RecordError> {
        let Some(mut last) = record::read(&self.home)? else {
            return Ok(());
        };
        last.quota = Some(quota);
        record::write(&self.home, &last, &|s| self.step(s))
    }

    /// Runs a sweep. The policy is read first; without it nothing is swept
    /// ([`SweepError::Policy`]). The `enabled` flag governs only the
    /// automatic sweep; a manual run uses the cutoff either way.
    pub fn sweep(
        &self,
        port: &dyn PolicyPort,
        req: &SweepRequest,
    ) -> Result<SweepReport, SweepError> {
        let policy = load_policy(port)?;
        self.check_store()?;
        let _lock = if req.apply {
            Some(self.lock_store()?)
        } else {
            None
        };
        let report = self.sweep_locked(&policy, req)?;
        if req.apply && req.scope == Scope::Idle {
            self.write_record(&report, Trigger::Manual)?;
        }
        Ok(report)
    }

    /// The automatic sweep: runs (deleting) when the policy is enabled and
    /// the last recorded sweep is a day old or older (or in the future, after
    /// a clock change), then records it. Serialized across processes by the
    /// store's lock.
    pub fn auto_sweep(
        &self,
        port: &dyn PolicyPort,
        active: &[String],
        pins: &Pins,
    ) -> Result<AutoSweep, SweepError> {
        let policy = load_policy(port)?;
        if !policy.enabled {
            return Ok(AutoSweep::Disabled);
        }
        self.check_store()?;
        let _lock = self.lock_store()?;
        let now = (self.clock)();
        let mut quarantined = None;
        match record::read(&self.home) {
            Ok(Some(last)) if last.at <= now && now - last.at < DAY_MS => {
                return Ok(AutoSweep::NotDue { last: last.at });
            }
            Ok(_) => {}
            Err(RecordError::Corrupt { .. }) => {
                quarantined = Some(record::quarantine(&self.home, now)?)
            }
            Err(e) => return Err(e.into()),
        }
        let req = SweepRequest::dry_run(Scope::Idle)
            .with_active(active.iter().cloned())
            .with_pins(pins.clone())
            .applied();
        let report = self.sweep_locked(&policy, &req)?;
        self.write_record(&report, Trigger::Auto)?;
        Ok(AutoSweep::Ran {
            report,
            quarantined,
        })
    }

    fn write_record(&self, report: &SweepReport, trigger: Trigger) -> Result<(), SweepError> {
        let rec = LastSweep {
            version: RECORD_VERSION,
            at: report.now,
            trigger,
            max_age_days: report.max_age_days,
            removed: report.items.len() as u64,
            bytes: report.bytes,
            quota: None,
        };
        match record::write(&self.home, &rec, &|s| self.step(s)) {
            Ok(()) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn check_store(&self) -> Result<(), SweepError> {
        match usage::store_marker_version(&self.store) {
            Ok(Some(version)) if version > KNOWN_STORE_VERSION => {
                Err(SweepError::NewerStore { found: version })
            }
            Ok(_) => Ok(()),
            Err(MarkerError::Io(source)) => Err(SweepError::Io {
                op: "read",
                path: usage::STORE_MARKER.into(),
                source,
            }),
            Err(MarkerError::Corrupt(detail)) => Err(SweepError::CorruptStore { detail }),
        }
    }

    /// Takes the store's lock exclusively (the store takes it shared while it
    /// adds references), so no capture or restore runs while directories go.
    fn lock_store(&self) -> Result<rewind_durable::FileLock, SweepError> {
        rewind_durable::lock_exclusive(&self.store, STORE_LOCK).map_err(|e| match e {
            rewind_durable::LockError::NotAFile => SweepError::NotAFile {
                path: STORE_LOCK.into(),
            },
            e => SweepError::Io {
                op: e.op(),
                path: STORE_LOCK.into(),
                source: e.into_io(),
            },
        })
    }

    fn sweep_locked(&self, policy: &Policy, req: &SweepRequest) -> Result<SweepReport, SweepError> {
        let now = (self.clock)();
        let max_age_days = match req.scope {
            Scope::Idle => Some(policy.max_age_days),
            Scope::OnlySession(_) => None,
        };
        let mut report = SweepReport {
            applied: req.apply,
            max_age_days,
            now,
            items: Vec::new(),
            bytes: 0,
            kept: Vec::new(),
            failed: Vec::new(),
            ignored: Vec::new(),
        };
        let listing = match usage::session_dirs(&self.store) {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(report),
            Err(SessionsError::NotADirectory) => {
                return Err(SweepError::NotADirectory {
                    path: SESSIONS_DIR.into(),
                });
            }
            Err(SessionsError::Io { op, source }) => {
                return Err(SweepError::Io {
                    op,
                    path: SESSIONS_DIR.into(),
                    source,
                });
            }
        };
        let sessions = listing.dir();
        let cutoff_ms = u64::from(policy.max_age_days).saturating_mul(DAY_MS);
        let mut trash_ready = false;
        for entry in listing.entries() {
            let name = entry.name.clone();
            let Some(session_id) = entry.session_id.clone() else {
                report.ignored.push(name);
                continue;
            };
            if let Scope::OnlySession(only) = &req.scope {
                if *only != session_id {
                    continue;
                }
            }
            let keep = |report: &mut SweepReport, reason| {
                report.kept.push(Kept {
                    session_id: session_id.clone(),
                    reason,
                })
            };
            if req.active.contains(&session_id) {
                keep(&mut report, KeepReason::Active);
                continue;
            }
            if req.pins.contains(&session_id) {
                keep(&mut report, KeepReason::Pinned);
                continue;
            }
            let opened = sessions
                .open_dir(&name)
                .and_then(|dir| usage::session_activity(&dir).map(|acc| (dir, acc)));
            let (dir, acc) = match opened {
                Ok(both) => both,
                Err(e) => {
                    keep(
                        &mut report,
                        KeepReason::Unreadable {
                            detail: e.to_string(),
                        },
                    );
                    continue;
                }
            };
            if req.scope == Scope::Idle && acc.last_activity_ms.saturating_add(cutoff_ms) > now {
                keep(
                    &mut report,
                    KeepReason::Recent {
                        last_activity: acc.last_activity_ms,
                    },
                );
                continue;
            }
            // Journals are read only for sessions that would go.
            match usage::journal_pin(&dir) {
                Some(JournalPin::Open { op }) => {
                    keep(&mut report, KeepReason::OpenJournal { op });
                    continue;
                }
                Some(JournalPin::Unreadable { detail }) => {
                    keep(&mut report, KeepReason::UnreadableJournal { detail });
                    continue;
                }
                None => {}
            }
            drop(dir);
            let item = SweepItem {
                session_id: session_id.clone(),
                dir_name: name.clone(),
                bytes: acc.bytes,
                files: acc.files,
                last_activity: acc.last_activity_ms,
            };
            if req.apply {
                if !trash_ready {
                    match self.store.create_dir(TRASH_DIR) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => {
                            report.failed.push(Failed {
                                session_id,
                                detail: format!("create {TRASH_DIR}: {e}"),
                            });
                            continue;
                        }
                    }
                    if !self
                        .store
                        .symlink_metadata(TRASH_DIR)
                        .map(|m| m.is_dir())
                        .unwrap_or(false)
                    {
                        report.failed.push(Failed {
                            session_id,
                            detail: format!("{TRASH_DIR} is not a directory"),
                        });
                        continue;
                    }
                    trash_ready = true;
                }
                // Move the directory out of `sessions/` in one rename, then
                // delete it: a crash between the two leaves it in `trash/`,
                // which the store empties when it opens, never half a session.
                let trash_name = format!(
                    "t-cleanup-{now}-{}-{}",
                    std::process::id(),
                    report.items.len()
                );
                let trash = Path::new(TRASH_DIR).join(&trash_name);
                if let Err(e) = sessions.rename(&name, &self.store, &trash) {
                    report.failed.push(Failed {
                        session_id,
                        detail: format!("move to {TRASH_DIR}: {e}"),
                    });
                    continue;
                }
                self.step(CleanupStep::SessionMovedToTrash);
                // Already out of the store's view; a leftover is emptied by the store.
                let _ = self.store.remove_dir_all(&trash);
                self.step(CleanupStep::SessionDeleted);
            }
            report.bytes += item.bytes;
            report.items.push(item);
        }
        Ok(report)
    }
}
