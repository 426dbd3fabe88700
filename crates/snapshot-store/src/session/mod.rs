//! A session's workspace handle. The type and its state are here; its work is split by
//! concern: `log_io` (the record log and the index), `capture`, `commit`, `recheck`,
//! `prune` (and `crate::journal` for restores, `crate::plan` / `crate::chain` for plans).

mod log_io;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use rustix::fs::FlockOperation;

use crate::codec::Record;
use crate::error::{CaptureError, CorruptFile, Fault, FsFailure, SessionError};
use crate::format::{BeforeState, Entry, EntrySource, Known, SkipReason};
use crate::fsio::{DiskMeta, FileId, FileKind, Io, WsFs};
use crate::log::{FRAME_HEAD, MAX_PAYLOAD, encode_into};
use crate::path::{RelPath, encode_id};
use crate::records::{
    Index, LOG_NAME, encode_log, fold_frames, fold_log, has_legacy, migrate_session,
};
use crate::seam::{Area, CrashPoint, FsOp};
use crate::store::{Store, ambient};

/// The pause after which a commit on the calling thread leaves its after-states to the
/// handle's next call (see [`Session::look_later_after`]): as long as a quiet burst's
/// flush waits (the plugin's `FLUSH_AFTER_MS`).
pub const LOOK_LATER_AFTER: Duration = Duration::from_millis(50);

/// The open record log of a session handle.
pub(crate) struct LogHandle {
    pub(crate) file: cap_std::fs::File,
    pub(crate) id: FileId,
    /// End of the frames folded into the index.
    pub(crate) len: u64,
    /// Bytes after `len` that are not (yet) a complete frame.
    pub(crate) torn: u64,
    /// The log version its header names (a log of an older version is rewritten in this
    /// build's before this handle first writes to it).
    pub(crate) version: u32,
}

/// A commit settled in the index but not yet in the log: its frames join the next
/// append of this handle (see [`Session::flush`]).
pub(crate) struct DeferredCommit {
    /// The call and its anchor, when `settles` (otherwise unused: after-states looked at
    /// later, see `Staging::look_after`, carry none).
    pub(crate) call_id: String,
    pub(crate) anchor: u64,
    /// The call staged captures, which the commit's group settles (otherwise the commit
    /// carries only after-states: see [`State::recorded`]).
    pub(crate) settles: bool,
    /// The encoded frames (the call's group, its paths' after-states).
    pub(crate) bytes: Vec<u8>,
    /// The same records with their frame lengths (folded again after a reload).
    pub(crate) recs: Vec<(Record, u64)>,
}

pub(crate) struct State {
    /// The index folded from the record log.
    pub idx: Index,
    /// The record log, once opened.
    pub log: Option<LogHandle>,
    /// The layout-1 check ran for this handle.
    pub(crate) legacy_checked: bool,
    /// The session directories exist.
    pub prepared: bool,
    /// The first write of this handle checked whether the log wants compaction.
    pub(crate) compact_checked: bool,
    /// The current call holds the log's lock and folded the log under it (a call that
    /// must not wait took the lock up front: see [`Session::try_capture_before`]).
    pub(crate) log_held: bool,
    /// Locks the last call that must not wait kept after it ended (see
    /// [`Session::keep_locks_between_calls`]).
    pub(crate) lease: Option<Lease>,
    /// Calls this handle staged with an anchor and has not settled yet.
    pub(crate) inflight: std::collections::HashSet<String>,
    /// Calls this handle captured without staging anything for some of their paths, whose
    /// state at the call's anchor an earlier change there already recorded: that anchor
    /// and those paths (their after-states are recorded when the call commits). A set:
    /// a call naming many paths looks each up in `log n`, not by a scan of the others.
    pub(crate) recorded:
        std::collections::HashMap<String, (u64, std::collections::BTreeSet<RelPath>)>,
    /// Commits not yet in the log, oldest first.
    pub(crate) deferred: Vec<DeferredCommit>,
    /// The paths of commits settled on the host's thread whose after-states are not looked
    /// at yet, oldest first, each with whether its state is to be looked at (`false`: left
    /// unknown). The handle's next call of any kind, its flush included, looks at them and
    /// makes their records before anything reads the index (see `Staging::look_after`).
    pub(crate) unlooked: Vec<(RelPath, bool)>,
    /// When this handle's last commit on the calling thread settled (see
    /// [`Session::look_later_after`]).
    pub(crate) last_quick_commit: Option<Instant>,
    /// This handle's last workspace scan (see [`ScanSeen`]).
    pub(crate) scan_seen: Option<ScanSeen>,
    /// The lock file of the workspace (by key) this handle last scanned, kept open and
    /// unlocked for its next scan (see `scan::workspace::Locked::into_kept`).
    pub(crate) ws_lock: Option<(String, cap_std::fs::File)>,
    /// The change watcher of the workspace this handle last scanned: alive while a handle
    /// keeps it (see `scan::watch`).
    pub(crate) ws_watch: Option<std::sync::Arc<crate::scan::watch::Watcher>>,
}

/// A session handle's last workspace scan: while the index it left is still the one in
/// memory (no other session's scan moved it on), the index's entries are the states at its
/// anchor of the paths no change recorded since, and its walk tells which paths were absent.
pub(crate) struct ScanSeen {
    /// The scan's anchor.
    pub(crate) anchor: u64,
    /// The `scanned_at` of the index the scan left in memory.
    pub(crate) index_at: u64,
    /// The paths the walk found no entry for (`None`: the walk stopped early).
    pub(crate) absence: Option<crate::scan::Absence>,
}

impl ScanSeen {
    /// Whether this scan was at `anchor` and left the index whose `scanned_at` is `index_at`.
    pub(crate) fn is(&self, (anchor, index_at): (u64, u64)) -> bool {
        self.anchor == anchor && self.index_at == index_at
    }
}

/// Locks kept by a handle between its calls that must not wait: the log's exclusive lock,
/// and the store's shared lock when `store`.
pub(crate) struct Lease {
    pub(crate) store: bool,
    /// When the last call that used them ended.
    pub(crate) since: Instant,
}

impl State {
    /// Whether this handle owns the settlement of `call_id` (staged by it and not yet
    /// settled, or committed and not yet written): not an orphan for it.
    pub(crate) fn owns(&self, call_id: &str) -> bool {
        self.inflight.contains(call_id)
            || self
                .deferred
                .iter()
                .any(|d| d.settles && d.call_id == call_id)
    }
}

/// One session's view of the store and its workspace (the session cwd).
pub struct Session {
    pub(crate) store: Store,
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
    pub(crate) ws: WsFs,
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) state: Mutex<State>,
    /// The store's lock file, opened once per handle.
    pub(crate) lock_file: OnceLock<cap_std::fs::File>,
    /// Calls that must not wait keep their locks for the next such call (see
    /// [`Session::keep_locks_between_calls`]).
    pub(crate) keep_locks: AtomicBool,
    /// See [`Session::wake_when_keeping`].
    lease_waker: OnceLock<std::thread::Thread>,
    /// See [`Session::look_later_after`] (ns).
    pub(crate) look_later: std::sync::atomic::AtomicU64,
    /// The in-memory copy of the workspace scan's index, shared with the scans of this
    /// process (looked up once per handle; `None` without a workspace).
    ws_index: OnceLock<
        Option<(
            String,
            std::sync::Arc<Mutex<crate::scan::workspace::Cached>>,
        )>,
    >,
}

/// A handle's state locked by a call that must not wait, holding the log's lock
/// (released on drop, or kept as the handle's lease: see
/// [`Session::keep_locks_between_calls`]).
pub(crate) struct Quick<'a> {
    pub(crate) session: &'a Session,
    pub(crate) st: MutexGuard<'a, State>,
    /// The call owns the store's shared lock too (its guard leaves it to this).
    pub(crate) store: bool,
    /// The log whose lock the call holds.
    pub(crate) log_id: FileId,
}

impl Drop for Quick<'_> {
    fn drop(&mut self) {
        // Kept only on the log the call locked (a log replaced during the call, which no
        // such call does today, is not locked).
        let same_log = self
            .st
            .log
            .as_ref()
            .is_some_and(|h| h.id.same_file(&self.log_id));
        if self.session.keep_locks.load(Ordering::Relaxed) && self.st.log_held && same_log {
            self.st.log_held = false;
            self.st.lease = Some(Lease {
                store: self.store,
                since: Instant::now(),
            });
            if let Some(t) = self.session.lease_waker.get() {
                t.unpark();
            }
            return;
        }
        self.session.release_log(&mut self.st);
        if self.store {
            self.session.unlock_store();
        }
    }
}

/// A shared store lock held on the session's lock descriptor; released on drop unless
/// `keep` (the handle's lease holds it beyond the call).
pub(crate) struct SharedLock<'a> {
    pub(crate) file: &'a cap_std::fs::File,
    pub(crate) fs: &'a crate::fsio::StoreFs,
    pub(crate) keep: bool,
}

impl Drop for SharedLock<'_> {
    fn drop(&mut self) {
        if !self.keep {
            let _ = self
                .fs
                .flock(self.file, Path::new("lock"), FlockOperation::Unlock);
        }
    }
}

impl Store {
    /// Opens the workspace of session `session_id` whose cwd is `cwd`.
    ///
    /// The id is encoded into one safe file-name component (see [`crate::encode_id`]);
    /// `cwd` is opened once as a directory handle, and every later workspace access is
    /// relative to that handle.
    pub fn session(&self, session_id: &str, cwd: &Path) -> Result<Session, SessionError> {
        let enc = encode_id(session_id).map_err(|reason| SessionError::InvalidSessionId {
            id: session_id.to_string(),
            reason,
        })?;
        let root = ambient::open_dir(cwd, false).map_err(|source| SessionError::Workspace {
            path: cwd.to_string_lossy().into_owned(),
            source,
        })?;
        let mut roots = vec![cwd.to_path_buf()];
        if let Ok(c) = std::fs::canonicalize(cwd) {
            if c != cwd {
                roots.push(c);
            }
        }
        Ok(Session::new(
            self.clone(),
            session_id.to_string(),
            PathBuf::from("sessions").join(enc),
            root,
            roots,
        ))
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        store: Store,
        id: String,
        dir: PathBuf,
        root: Dir,
        roots: Vec<PathBuf>,
    ) -> Self {
        let io = Io {
            seam: store.inner.fs.io.seam.clone(),
            durable: store.inner.fs.io.durable,
        };
        Session {
            store,
            id,
            dir,
            ws: WsFs { root, io },
            roots,
            state: Mutex::new(State {
                idx: Index::default(),
                log: None,
                legacy_checked: false,
                prepared: false,
                compact_checked: false,
                log_held: false,
                lease: None,
                inflight: Default::default(),
                recorded: Default::default(),
                deferred: Vec::new(),
                unlooked: Vec::new(),
                last_quick_commit: None,
                scan_seen: None,
                ws_lock: None,
                ws_watch: None,
            }),
            lock_file: OnceLock::new(),
            keep_locks: AtomicBool::new(false),
            lease_waker: OnceLock::new(),
            look_later: std::sync::atomic::AtomicU64::new(LOOK_LATER_AFTER.as_nanos() as u64),
            ws_index: OnceLock::new(),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The workspace directory as given to [`Store::session`] (`None` for an ancestor view).
    pub(crate) fn workspace_root(&self) -> Option<&Path> {
        self.roots.first().map(PathBuf::as_path)
    }

    /// The workspace's key and the slot of its index in this process (the one
    /// [`Session::scan`] keeps current), looked up on the first call that asks.
    pub(crate) fn workspace_index(&self) -> Option<(&str, &Mutex<crate::scan::workspace::Cached>)> {
        self.ws_index
            .get_or_init(|| {
                let canonical = std::fs::canonicalize(self.workspace_root()?).ok()?;
                let key = crate::scan::workspace_key(&canonical);
                let slot = crate::scan::workspace::slot(&self.store, &key);
                Some((key, slot))
            })
            .as_ref()
            .map(|(key, slot)| (key.as_str(), &**slot))
    }

    /// The handle's state, for a call that may wait: the locks a lease kept are released
    /// first, so that such a call never waits, on a lock, for its own handle.
    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.end_lease(&mut st);
        self.staging().look_after(&mut st);
        st
    }

    /// Releases the locks the handle's lease kept, if any.
    pub(crate) fn end_lease(&self, st: &mut State) {
        let Some(lease) = st.lease.take() else {
            return;
        };
        let fs = &self.store.inner.fs;
        if let Some(h) = &st.log {
            let _ = fs.flock(&h.file, &self.log_path(), FlockOperation::Unlock);
        }
        if lease.store {
            self.unlock_store();
        }
    }

    /// Releases the store's shared lock held on the handle's lock descriptor.
    fn unlock_store(&self) {
        if let Some(file) = self.lock_file.get() {
            let _ = self
                .store
                .inner
                .fs
                .flock(file, Path::new("lock"), FlockOperation::Unlock);
        }
    }

    /// Lets the calls that must not wait (`try_capture_before`, `try_commit`) keep the
    /// log's lock and the store's shared lock after they end, for the next such call: in a
    /// burst of tool calls the locks are taken once, not per call, and the log is not
    /// looked at again (no other writer can append to it or replace it, no sweep can run,
    /// while they are held). Any other call of the handle releases them first. Whoever
    /// keeps them must call [`Session::release_idle_locks`] regularly: until then, other
    /// handles and processes wait for them (the rewind engine runs a thread for its
    /// handles). Off by default; turning it off releases them.
    pub fn keep_locks_between_calls(&self, keep: bool) {
        self.keep_locks.store(keep, Ordering::Relaxed);
        if !keep {
            drop(self.lock_state());
        }
    }

    /// Names the thread that releases this handle's kept locks (see
    /// [`Session::keep_locks_between_calls`]): it is unparked whenever a call keeps them
    /// after it ends, so it can park while no handle keeps any, rather than look again and
    /// again. Set once; later calls are ignored.
    pub fn wake_when_keeping(&self, thread: std::thread::Thread) {
        let _ = self.lease_waker.set(thread);
    }

    /// Whether this handle keeps locks after its last call (see
    /// [`Session::keep_locks_between_calls`]), or a call is using it now (it may keep them
    /// when it ends). Never waits.
    pub fn keeps_locks(&self) -> bool {
        match self.state.try_lock() {
            Ok(st) => st.lease.is_some(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().lease.is_some(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }

    /// A commit on the calling thread (`try_commit`) that comes at least `quiet` after this
    /// handle's previous one, such as a turn's first call after the model's reply, leaves the
    /// `lstat` of its paths' after-states to the handle's next call (on the thread pool when
    /// that is the flush of a quiet burst): after a pause, that `lstat` of a file just written
    /// and `fsync`ed is the commit's costliest part. A commit within a burst looks at them at
    /// once, while the file is cheapest to look at. Default [`LOOK_LATER_AFTER`];
    /// `Duration::ZERO`: every such commit leaves them.
    pub fn look_later_after(&self, quiet: Duration) {
        self.look_later.store(
            quiet.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// Whether a commit on the calling thread now leaves its after-states to the handle's
    /// next call (see [`Session::look_later_after`]); notes the commit.
    pub(crate) fn looks_later(&self, st: &mut State) -> bool {
        let quiet = Duration::from_nanos(self.look_later.load(Ordering::Relaxed));
        let now = Instant::now();
        let later = st
            .last_quick_commit
            .is_none_or(|t| now.saturating_duration_since(t) >= quiet);
        st.last_quick_commit = Some(now);
        later
    }

    /// Releases the locks kept since the last call that must not wait (see
    /// [`Session::keep_locks_between_calls`]) when that call ended at least `idle` ago;
    /// never waits (`false`, nothing done, when a call is using the handle). Returns
    /// whether it released them.
    pub fn release_idle_locks(&self, idle: Duration) -> bool {
        let mut st = match self.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        match &st.lease {
            Some(l) if l.since.elapsed() >= idle => {
                self.end_lease(&mut st);
                true
            }
            _ => false,
        }
    }

    pub(crate) fn p(&self, rest: &str) -> PathBuf {
        self.dir.join(rest)
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.p(LOG_NAME)
    }

    /// Releases the log's lock taken by `Staging::quick_state`.
    pub(crate) fn release_log(&self, st: &mut State) {
        if std::mem::take(&mut st.log_held) {
            if let Some(h) = &st.log {
                let _ =
                    self.store
                        .inner
                        .fs
                        .flock(&h.file, &self.log_path(), FlockOperation::Unlock);
            }
        }
    }

    /// Shared store lock (held by anything that adds blob references), taken on a
    /// descriptor opened once per session handle.
    pub(crate) fn lock_shared(&self) -> Result<SharedLock<'_>, FsFailure> {
        let fs = &self.store.inner.fs;
        let file = match self.lock_file.get() {
            Some(f) => f,
            None => {
                let f = self.store.open_lock_file()?;
                self.lock_file.get_or_init(|| f)
            }
        };
        fs.flock(file, Path::new("lock"), FlockOperation::LockShared)?;
        Ok(SharedLock {
            file,
            fs,
            keep: false,
        })
    }
}

pub(crate) fn lost_log(path: &Path) -> Fault {
    FsFailure {
        op: FsOp::Lock,
        area: Area::Store,
        path: path.to_string_lossy().into_owned(),
        source: std::io::Error::other("the record log kept being replaced while locking it"),
    }
    .into()
}

/// Whether the disk state `now` differs from the last known state (unknown never differs).
pub(crate) fn differs(known: &Known, now: &Known) -> bool {
    match (known, now) {
        (Known::Unknown, _) | (_, Known::Unknown) => false,
        (Known::Absent, Known::Absent) => false,
        (Known::Present { meta: a, .. }, Known::Present { meta: b, .. }) => a != b,
        _ => true,
    }
}

/// What a path with metadata `meta` is recorded as by its kind alone, when it is not a
/// file to read: skipped (a symlink, a special file, a hard-linked file), or absent for a
/// directory (as a file, the path is absent; the files in the directory are paths of
/// their own).
pub(crate) fn not_capturable(meta: &DiskMeta) -> Option<BeforeState> {
    let reason = match meta.kind {
        FileKind::Symlink => SkipReason::Symlink,
        FileKind::Dir => return Some(BeforeState::Absent),
        FileKind::Other => SkipReason::Special,
        FileKind::File if meta.nlink > 1 => SkipReason::HardLink { nlink: meta.nlink },
        FileKind::File => return None,
    };
    Some(BeforeState::Skipped { reason })
}

pub(crate) fn map_read(e: FsFailure, rel: &RelPath) -> CaptureError {
    if e.area == Area::Workspace {
        CaptureError::Read {
            path: rel.display(),
            source: e,
        }
    } else {
        CaptureError::Fs(e)
    }
}
