//! [`Engine`]: the one place a DSH home's paths enter, the snapshot store's session handles,
//! and the sessions the sequences run on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rewind_history::{HistoryStore, WorkspaceKey};
use snapshot_store::{Session, SessionHold, Store, StoreOptions};

use crate::error::{EngineError, ErrorCode};
use crate::session::EngineSession;

/// Where the engine keeps the file store, under the DSH home.
pub const SNAPSHOTS_DIR: &str = "rewind-snapshots";
/// Where the engine keeps the rewind history, under the DSH home.
pub const HISTORY_DIR: &str = "rewind-history";

/// Milliseconds since the epoch (the clock of every history record).
pub use rewind_durable::Clock;

/// A test seam called at each step of a sequence's crash order with the step's name
/// (`undo:files`, `redo:started`, ...). The host's crash tests install one that kills the
/// process at a named step; production passes none.
pub type CrashSeam = rewind_durable::CrashSeam<&'static str>;

/// How an [`Engine`] is opened.
#[derive(Clone)]
pub struct EngineOptions {
    /// The store's per-file cap in bytes (`0`: no cap).
    pub max_file_bytes: u64,
    /// Options of the snapshot store other than the cap.
    pub store: StoreOptions,
    /// The clock of history records.
    pub clock: Clock,
    /// The crash seam (see [`CrashSeam`]).
    pub crash: Option<CrashSeam>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: snapshot_store::DEFAULT_MAX_FILE_BYTES,
            store: StoreOptions::default(),
            clock: rewind_durable::system_clock(),
            crash: None,
        }
    }
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("max_file_bytes", &self.max_file_bytes)
            .field("crash", &self.crash.is_some())
            .finish_non_exhaustive()
    }
}

struct Files {
    cap: u64,
    /// The store, or why it cannot open: the history half works without it.
    store: Result<Store, EngineError>,
    /// Open handles by session id, then working directory (looked up without allocating).
    sessions: HashMap<String, HashMap<PathBuf, Arc<Session>>>,
    /// Shared holds of the sessions this process opened: an offline tool refuses to change
    /// a held session. Kept until [`Engine::forget`] or the process ends.
    holds: HashMap<String, SessionHold>,
}

/// The rewind engine over one DSH home: the snapshot store (`rewind-snapshots/`) and the
/// rewind history (`rewind-history/`).
///
/// Every path below the home is derived here; the sequences work on the handles it holds.
/// One `Engine` per process and home: session handles are cached (one per session and
/// working directory), so every caller shares the store's per-handle locks.
pub struct Engine {
    snapshots_root: PathBuf,
    history_root: PathBuf,
    options: EngineOptions,
    files: Mutex<Files>,
    /// Every session handle this engine opened whose calls that must not wait keep their
    /// locks (see `Session::keep_locks_between_calls`): the thread that releases idle
    /// ones goes through them. Its own lock is never held across a filesystem call.
    keeping: Mutex<Vec<Weak<Session>>>,
    /// That thread runs: only then do handles keep their locks.
    releases_locks: std::sync::atomic::AtomicBool,
    /// That thread, unparked by a handle that keeps its locks and when the engine ends.
    releaser: std::sync::OnceLock<std::thread::Thread>,
    /// How many times that thread has looked at the handles (see [`Engine::lock_checks`]).
    lock_checks: std::sync::atomic::AtomicU64,
}

/// A handle's locks are released once its last call that must not wait ended this long ago.
pub const LOCKS_KEPT_FOR: Duration = Duration::from_millis(50);
/// How often the engine's thread looks for idle locks.
const LOOK_FOR_IDLE_LOCKS: Duration = Duration::from_millis(20);

/// The thread that releases the locks the engine's session handles keep between calls
/// (after [`LOCKS_KEPT_FOR`] without such a call): another handle or process waits at most
/// about that long plus [`LOOK_FOR_IDLE_LOCKS`] behind a burst of tool calls. It takes each
/// handle's state only when free (`Session::release_idle_locks` never waits), so it can
/// never wait on a call that waits for it. While no handle keeps a lock it parks, until a
/// handle keeps one again (`Session::wake_when_keeping`): an idle host is not woken. Ends
/// with the engine.
fn release_idle_locks(engine: Weak<Engine>) -> Option<std::thread::Thread> {
    let handle = std::thread::Builder::new()
        .name("rewind-locks".into())
        .spawn(move || {
            loop {
                let Some(e) = engine.upgrade() else {
                    return;
                };
                e.lock_checks
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let handles: Vec<Arc<Session>> = {
                    let mut keeping = e.keeping.lock().unwrap_or_else(|p| p.into_inner());
                    keeping.retain(|w| w.strong_count() > 0);
                    keeping.iter().filter_map(Weak::upgrade).collect()
                };
                drop(e);
                let mut kept = false;
                for s in handles {
                    s.release_idle_locks(LOCKS_KEPT_FOR);
                    kept |= s.keeps_locks();
                }
                // No handle is held while parked (a handle keeping locks unparks this thread
                // after it took them; an unpark that came first makes the park return at once).
                if kept {
                    std::thread::sleep(LOOK_FOR_IDLE_LOCKS);
                } else {
                    std::thread::park();
                }
            }
        })
        .ok()?;
    Some(handle.thread().clone())
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Its thread ends on its next look.
        if let Some(t) = self.releaser.get() {
            t.unpark();
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("snapshots_root", &self.snapshots_root)
            .field("history_root", &self.history_root)
            .finish_non_exhaustive()
    }
}

fn open_store(root: &Path, cap: u64, options: &StoreOptions) -> Result<Store, EngineError> {
    Ok(Store::open(
        root,
        StoreOptions {
            max_file_bytes: cap,
            ..options.clone()
        },
    )?)
}

impl Engine {
    /// Opens the engine over the DSH home `dsh_home`. A snapshot store that cannot open
    /// does not fail the engine: the history half works, and every file operation reports
    /// why the store is unavailable ([`Engine::files_unavailable`]).
    pub fn open(dsh_home: impl AsRef<Path>, options: EngineOptions) -> Arc<Self> {
        let home = dsh_home.as_ref();
        Self::open_at(home.join(SNAPSHOTS_DIR), home.join(HISTORY_DIR), options)
    }

    /// [`Engine::open`] with the store and the history at roots of the caller's choosing.
    pub fn open_at(
        snapshots_root: PathBuf,
        history_root: PathBuf,
        options: EngineOptions,
    ) -> Arc<Self> {
        let cap = options.max_file_bytes;
        let store = open_store(&snapshots_root, cap, &options.store);
        let engine = Arc::new(Self {
            snapshots_root,
            history_root,
            files: Mutex::new(Files {
                cap,
                store,
                sessions: HashMap::new(),
                holds: HashMap::new(),
            }),
            options,
            keeping: Mutex::new(Vec::new()),
            releases_locks: std::sync::atomic::AtomicBool::new(false),
            releaser: std::sync::OnceLock::new(),
            lock_checks: std::sync::atomic::AtomicU64::new(0),
        });
        if let Some(t) = release_idle_locks(Arc::downgrade(&engine)) {
            let _ = engine.releaser.set(t);
            engine
                .releases_locks
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        engine
    }

    /// How many times the thread that releases the handles' idle locks has looked at them:
    /// a diagnostic (it looks every [`LOCKS_KEPT_FOR`]-ish while a handle keeps locks, and
    /// not at all while none does).
    pub fn lock_checks(&self) -> u64 {
        self.lock_checks.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The snapshot store's root (`<home>/rewind-snapshots`).
    pub fn snapshots_root(&self) -> &Path {
        &self.snapshots_root
    }

    /// The history's root (`<home>/rewind-history`).
    pub fn history_root(&self) -> &Path {
        &self.history_root
    }

    /// The DSH home (where the auto-cleanup keeps its last-sweep record): the store root's
    /// parent.
    pub fn home(&self) -> &Path {
        self.snapshots_root.parent().unwrap_or(&self.snapshots_root)
    }

    /// Runs `f` on the store (`Err` when it cannot open), without holding the engine's lock
    /// meanwhile (a store handle is shared and safe across threads).
    pub fn with_store<T>(&self, f: impl FnOnce(&Store) -> T) -> Result<T, EngineError> {
        let store = self.lock().store.clone()?;
        Ok(f(&store))
    }

    /// Why the snapshot store could not open, if it could not.
    pub fn store_error(&self) -> Option<EngineError> {
        self.lock().store.as_ref().err().cloned()
    }

    /// Why this build refuses to write the store (it was written by a newer build), if so.
    pub fn newer_version(&self) -> Option<String> {
        let files = self.lock();
        files
            .store
            .as_ref()
            .ok()?
            .newer_version()
            .map(|n| n.to_string())
    }

    fn lock(&self) -> MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `None` when the file store can be written; otherwise why not (the store cannot open,
    /// or it was written by a newer build: [`ErrorCode::StoreNewer`]).
    pub fn files_unavailable(&self) -> Option<EngineError> {
        let files = self.lock();
        match &files.store {
            Err(e) => Some(e.clone()),
            Ok(store) => store
                .newer_version()
                .map(|n| EngineError::new(ErrorCode::StoreNewer, n.to_string())),
        }
    }

    /// The history store, for records (`limit`: the newest entries kept per workspace).
    pub fn history(&self, limit: Option<usize>) -> Result<HistoryStore, EngineError> {
        let store = HistoryStore::open(&self.history_root)?;
        Ok(match limit {
            Some(limit) => store.with_limit(limit),
            None => store,
        })
    }

    /// The store's handle of session `session_id` working in `cwd`, opened once and cached.
    /// With `cap`, a cap other than the current one reopens the store with it (the host's
    /// live setting).
    pub fn files(
        &self,
        session_id: &str,
        cwd: &Path,
        cap: Option<u64>,
    ) -> Result<Arc<Session>, EngineError> {
        let mut files = self.lock();
        if let Some(cap) = cap {
            if cap != files.cap {
                files.store = open_store(&self.snapshots_root, cap, &self.options.store);
                files.cap = cap;
                files.sessions.clear();
            }
        }
        if let Some(session) = files.sessions.get(session_id).and_then(|m| m.get(cwd)) {
            return Ok(Arc::clone(session));
        }
        let store = files.store.as_ref().map_err(Clone::clone)?;
        let session = Arc::new(store.session(session_id, cwd)?);
        if self
            .releases_locks
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // A burst of tool calls takes the store's and the log's locks once.
            session.keep_locks_between_calls(true);
            if let Some(t) = self.releaser.get() {
                session.wake_when_keeping(t.clone());
            }
            self.keeping
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Arc::downgrade(&session));
        }
        let hold = if files.holds.contains_key(session_id) {
            None
        } else {
            // Best effort: a hold that cannot be taken only weakens the offline tool's check.
            store.hold_session(session_id).ok().flatten()
        };
        if let Some(hold) = hold {
            files.holds.insert(session_id.to_owned(), hold);
        }
        files
            .sessions
            .entry(session_id.to_owned())
            .or_default()
            .insert(cwd.to_path_buf(), Arc::clone(&session));
        Ok(session)
    }

    /// The cached handle, when one is open with this cap and nobody is opening or replacing
    /// handles right now (never waits): for the small captures run on a caller's own thread.
    pub fn cached_files(
        &self,
        session_id: &str,
        cwd: &Path,
        cap: Option<u64>,
    ) -> Option<Arc<Session>> {
        let files = self.files.try_lock().ok()?;
        if cap.is_some_and(|c| c != files.cap) {
            return None;
        }
        files.sessions.get(session_id)?.get(cwd).cloned()
    }

    /// Writes the commits every open session handle keeps for its next write (see
    /// `Session::flush`), so that what is on disk is the whole record. A handle that
    /// fails to write keeps them (they count as committed on disk either way).
    pub fn flush_all(&self) {
        let open: Vec<Arc<Session>> = self
            .lock()
            .sessions
            .values()
            .flat_map(|m| m.values().cloned())
            .collect();
        for s in open {
            let _ = s.flush();
        }
    }

    /// Drops the cached handles and the hold of a session (after its snapshot directory was
    /// swept away), so the next call starts from what is on disk.
    pub fn forget(&self, session_id: &str) {
        let mut files = self.lock();
        files.sessions.remove(session_id);
        files.holds.remove(session_id);
    }

    /// A session to run sequences on: `session_id`, working in `cwd` (`None`: a session
    /// without a working directory, whose rewinds never touch files), whose history lives in
    /// the workspace partition `key`.
    pub fn session(
        self: &Arc<Self>,
        session_id: &str,
        cwd: Option<&Path>,
        key: WorkspaceKey,
    ) -> EngineSession {
        EngineSession::new(
            Arc::clone(self),
            session_id.to_owned(),
            cwd.map(Path::to_path_buf),
            key,
        )
    }

    pub(crate) fn now(&self) -> u64 {
        (self.options.clock)()
    }

    pub(crate) fn crash(&self, step: &'static str) {
        if let Some(seam) = &self.options.crash {
            seam(step);
        }
    }
}
