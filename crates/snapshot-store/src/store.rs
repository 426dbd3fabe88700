//! The store root: version marker, locks, the list of sessions. A session handle is
//! opened by `Store::session` (in `crate::session`); the blob sweep is `crate::gc`.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::{Dir, OpenOptions};
use rustix::fs::FlockOperation;

use crate::error::{CorruptFile, Fault, FsFailure, NewerVersion, OpenError, QueryError};
use crate::format::{STORE_VERSION, StoreMarker, to_json};
use crate::fsio::{FileId, Io, StoreFs, unique_suffix};
use crate::path::{decode_id, valid_sha};
use crate::records::migrate_session;
use crate::seam::CrashPoint;
use crate::seam::{Area, FaultSeam, FsOp, NoFaults};

/// Default per-file cap: files larger than this are recorded as uncovered.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// How much a crash may cost. See `docs/format.md` ("Durability").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives a crash of the process (kill -9): every store file is written to a
    /// temporary name and atomically renamed; no `fsync`. After a power loss the
    /// store may miss recent records, and a torn blob is detected by its SHA-256
    /// and reported, never restored.
    #[default]
    ProcessCrash,
    /// Also survives power loss: file data is `fsync`ed before each rename and the
    /// directory after it; journal lines are `fsync`ed as they are appended.
    PowerLoss,
}

/// Options of [`Store::open`].
#[derive(Clone)]
pub struct StoreOptions {
    /// Per-file cap in bytes ([`DEFAULT_MAX_FILE_BYTES`]); `0` disables the cap.
    pub max_file_bytes: u64,
    /// Durability mode.
    pub durability: Durability,
    /// The fault/crash seam ([`NoFaults`] in production).
    pub seam: Arc<dyn FaultSeam>,
    /// A session's record log is compacted (at prune, or at a handle's first write)
    /// once it is larger than this and more than half of it is dead; default
    /// [`DEFAULT_COMPACT_MIN_BYTES`].
    pub compact_min_bytes: u64,
    /// A file of at most this many bytes that a capture or a message's re-check reads,
    /// and that no blob file holds yet, is kept in the session's record log (in the
    /// write that names it) instead of a blob file of its own; `0`: always a blob file.
    /// Default [`DEFAULT_KEEP_IN_LOG_BYTES`] (see `docs/format.md`, "Blobs kept in the
    /// log").
    pub keep_in_log_bytes: u64,
}

/// Default of [`StoreOptions::keep_in_log_bytes`].
pub const DEFAULT_KEEP_IN_LOG_BYTES: u64 = crate::blob::KEEP_IN_LOG as u64;

/// Default of [`StoreOptions::compact_min_bytes`].
pub const DEFAULT_COMPACT_MIN_BYTES: u64 = 256 * 1024;

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            durability: Durability::default(),
            seam: Arc::new(NoFaults),
            compact_min_bytes: DEFAULT_COMPACT_MIN_BYTES,
            keep_in_log_bytes: DEFAULT_KEEP_IN_LOG_BYTES,
        }
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("max_file_bytes", &self.max_file_bytes)
            .field("durability", &self.durability)
            .field("compact_min_bytes", &self.compact_min_bytes)
            .field("keep_in_log_bytes", &self.keep_in_log_bytes)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub fs: StoreFs,
    pub max_file_bytes: u64,
    pub compact_min_bytes: u64,
    pub keep_in_log_bytes: u64,
    /// What `store.json` said when last read, and its identity then.
    pub marker: Mutex<MarkerSeen>,
    pub order: AtomicU64,
}

/// The version guard: re-read when `store.json`'s identity (inode, size, times) changes.
pub(crate) struct MarkerSeen {
    pub id: Option<FileId>,
    pub newer: Option<NewerVersion>,
}

const MARKER: &str = crate::usage::STORE_MARKER;

/// Parses `store.json`: `Some(newer)` when written by a newer build.
fn parse_marker(bytes: &[u8]) -> Result<(u32, Option<NewerVersion>), Fault> {
    let m: StoreMarker = serde_json::from_slice(bytes).map_err(|e| CorruptFile {
        path: MARKER.into(),
        detail: e.to_string(),
    })?;
    if m.store_version == 0 {
        return Err(CorruptFile {
            path: MARKER.into(),
            detail: "store_version 0".into(),
        }
        .into());
    }
    let newer = (m.store_version > STORE_VERSION).then(|| NewerVersion {
        path: MARKER.into(),
        found: m.store_version,
        supported: STORE_VERSION,
    });
    Ok((m.store_version, newer))
}

/// A checkpoint store rooted at one directory (`<dsh home>/rewind-snapshots`).
///
/// Cheap to clone (shared handle); safe to use from several threads.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

/// The only place where ambient filesystem authority is used: opening (creating if
/// needed) a directory named by an absolute or process-relative path.
pub(crate) mod ambient {
    use super::*;

    pub(crate) fn open_dir(path: &Path, create: bool) -> io::Result<Dir> {
        if create {
            Dir::create_ambient_dir_all(path, cap_std::ambient_authority())?;
        }
        Dir::open_ambient_dir(path, cap_std::ambient_authority())
    }
}

/// A held store lock (shared or exclusive); released on drop, unlocked explicitly so that
/// a child process forked by another thread (a copy of the descriptor until it execs) does
/// not keep it held.
pub(crate) struct LockGuard {
    file: cap_std::fs::File,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.file, FlockOperation::Unlock);
    }
}

impl Store {
    /// Opens (creating if needed) the store at `store_root`.
    ///
    /// A store whose `store.json` carries a newer version opens in a refusing
    /// mode: [`Store::newer_version`] is `Some`, and capture, commit, restore,
    /// clear and prune fail with `NewerStore`. A malformed marker is an error.
    pub fn open(store_root: &Path, options: StoreOptions) -> Result<Store, OpenError> {
        let dir = ambient::open_dir(store_root, true).map_err(|source| OpenError::Root {
            path: store_root.to_string_lossy().into_owned(),
            source,
        })?;
        let io = Io {
            seam: options.seam.clone(),
            durable: options.durability == Durability::PowerLoss,
        };
        let mut fs = StoreFs {
            dir,
            io,
            blobs: None,
            packs: Default::default(),
        };
        let marker = Path::new(MARKER);
        let found = match fs.read_opt(marker)? {
            Some(bytes) => Some(parse_marker(&bytes)?),
            None => None,
        };
        let newer = found.as_ref().and_then(|(_, n)| n.clone());
        let layout1 = matches!(found, Some((1, _)));
        if found.is_none() || layout1 {
            // A new store, or a layout-1 store to migrate: the marker goes first, so an
            // older build sees a newer store (and refuses) from here on.
            fs.write_atomic(
                marker,
                &to_json(&StoreMarker {
                    store_version: STORE_VERSION,
                }),
            )?;
            if layout1 {
                fs.io.crash(CrashPoint::MigrateMarkerWritten);
            }
        }
        if newer.is_none() {
            fs.create_dir_all(Path::new("blobs"))?;
        }
        fs.blobs = fs.dir.open_dir("blobs").ok();
        let id = fs.stat_id(marker)?;
        let store = Store {
            inner: Arc::new(Inner {
                fs,
                max_file_bytes: options.max_file_bytes,
                compact_min_bytes: options.compact_min_bytes,
                keep_in_log_bytes: options.keep_in_log_bytes,
                marker: Mutex::new(MarkerSeen { id, newer }),
                order: AtomicU64::new(0),
            }),
        };
        if store.newer_seen().is_none() {
            for d in ["blobs", "tmp", "sessions", "trash"] {
                store.inner.fs.create_dir_all(Path::new(d))?;
            }
            // Leftovers of interrupted writes, and layout-1 sessions: only when no other
            // user holds the lock (otherwise each session migrates when first used).
            if let Some(_g) = store.try_lock_exclusive()? {
                for name in store.inner.fs.list(Path::new("tmp"))? {
                    store.inner.fs.remove_file(&Path::new("tmp").join(name))?;
                }
                for name in store.inner.fs.list(Path::new("trash"))? {
                    store
                        .inner
                        .fs
                        .remove_dir_all(&Path::new("trash").join(name))?;
                }
                if layout1 {
                    store.migrate_all_locked();
                }
            }
        }
        Ok(store)
    }

    /// Migrates every layout-1 session directory (exclusive lock held). A session
    /// that cannot be migrated (corrupt or newer record) is left as it is: using it
    /// retries and reports the error, and blob sweeps refuse while it remains.
    fn migrate_all_locked(&self) {
        let fs = &self.inner.fs;
        let Ok(names) = fs.list(Path::new("sessions")) else {
            return;
        };
        for name in names {
            let Some(id) = name.to_str().and_then(decode_id) else {
                continue;
            };
            let sdir = Path::new("sessions").join(&name);
            let _ = migrate_session(fs, &sdir, &id, |p| self.remove_tree(p));
        }
    }

    /// The newer version recorded at the last check, without re-checking.
    fn newer_seen(&self) -> Option<NewerVersion> {
        self.inner
            .marker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .newer
            .clone()
    }

    /// Re-reads `store.json` when its identity changed since it was last read (a
    /// build sharing the store rewrote it). One `stat` when nothing changed.
    fn recheck_marker(&self) -> Result<Option<NewerVersion>, Fault> {
        let fs = &self.inner.fs;
        let marker = Path::new(MARKER);
        let id = fs.stat_id(marker)?;
        let mut seen = self.inner.marker.lock().unwrap_or_else(|p| p.into_inner());
        if id != seen.id {
            let Some(bytes) = fs.read_opt(marker)? else {
                return Err(CorruptFile {
                    path: MARKER.into(),
                    detail: "the store-version marker is missing".into(),
                }
                .into());
            };
            let (version, newer) = parse_marker(&bytes)?;
            if version < STORE_VERSION {
                return Err(CorruptFile {
                    path: MARKER.into(),
                    detail: format!("store_version {version} written over layout {STORE_VERSION}"),
                }
                .into());
            }
            // Identity taken before the read: a change during the read is seen next time.
            seen.id = id;
            seen.newer = newer;
        }
        Ok(seen.newer.clone())
    }

    /// `Some` when the store was written by a newer build (everything that writes
    /// refuses). Re-checks `store.json` when it changed since it was last read; a
    /// marker that became unreadable counts as newer (fails closed).
    pub fn newer_version(&self) -> Option<NewerVersion> {
        match self.recheck_marker() {
            Ok(n) => n,
            Err(_) => Some(self.newer_seen().unwrap_or(NewerVersion {
                path: MARKER.into(),
                found: 0,
                supported: STORE_VERSION,
            })),
        }
    }

    /// The per-file cap in effect (`0` = none).
    pub fn max_file_bytes(&self) -> u64 {
        self.inner.max_file_bytes
    }

    /// Refuses when the store is newer than this build; re-checks `store.json` when
    /// its identity changed (a newer build sharing the store is noticed without restart).
    pub(crate) fn guard_writable(&self) -> Result<(), Fault> {
        match self.recheck_marker()? {
            Some(n) => Err(n.into()),
            None => Ok(()),
        }
    }

    /// A strictly increasing capture-order value (nanoseconds since the epoch, bumped on ties).
    pub(crate) fn next_order(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut prev = self.inner.order.load(Ordering::Relaxed);
        loop {
            let next = now.max(prev + 1);
            match self.inner.order.compare_exchange_weak(
                prev,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(p) => prev = p,
            }
        }
    }

    fn lock(&self, op: FlockOperation) -> Result<Option<LockGuard>, FsFailure> {
        let path = Path::new("lock");
        let fs = &self.inner.fs;
        fs.io.check(FsOp::Lock, Area::Store, path)?;
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true);
        let fail = |source: io::Error| FsFailure {
            op: FsOp::Lock,
            area: Area::Store,
            path: "lock".into(),
            source,
        };
        let file = fs.dir.open_with(path, &o).map_err(fail)?;
        match rustix::fs::flock(&file, op) {
            Ok(()) => Ok(Some(LockGuard { file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(fail(e.into())),
        }
    }

    /// Exclusive lock: held while unreferenced blobs are swept.
    pub(crate) fn lock_exclusive(&self) -> Result<LockGuard, FsFailure> {
        self.lock(FlockOperation::LockExclusive)?
            .ok_or_else(would_block)
    }

    /// Shared lock: held while a compaction packs blobs (captures go on; a blob sweep,
    /// which takes it exclusively, waits).
    pub(crate) fn lock_shared(&self) -> Result<LockGuard, FsFailure> {
        self.lock(FlockOperation::LockShared)?
            .ok_or_else(would_block)
    }

    /// Opens the lock file (for a session handle that keeps it).
    pub(crate) fn open_lock_file(&self) -> Result<cap_std::fs::File, FsFailure> {
        let path = Path::new("lock");
        let fs = &self.inner.fs;
        fs.io.check(FsOp::Open, Area::Store, path)?;
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true);
        fs.dir.open_with(path, &o).map_err(|source| FsFailure {
            op: FsOp::Lock,
            area: Area::Store,
            path: "lock".into(),
            source,
        })
    }

    fn try_lock_exclusive(&self) -> Result<Option<LockGuard>, FsFailure> {
        self.lock(FlockOperation::NonBlockingLockExclusive)
    }

    /// Ids of the sessions that have a directory in the store (names that do not
    /// decode are left out).
    pub fn list_sessions(&self) -> Result<Vec<String>, QueryError> {
        let names = self.inner.fs.list(Path::new("sessions"))?;
        Ok(names
            .iter()
            .filter_map(|n| n.to_str().and_then(decode_id))
            .collect())
    }

    /// Moves a store directory to the trash atomically, then deletes it.
    pub(crate) fn remove_tree(&self, path: &Path) -> Result<bool, FsFailure> {
        let fs = &self.inner.fs;
        if !fs.exists(path)? {
            return Ok(false);
        }
        let trash = Path::new("trash").join(format!("t-{}", unique_suffix()));
        fs.create_dir_all(Path::new("trash"))?;
        fs.rename(path, &trash)?;
        fs.sync_dir(path.parent().unwrap_or(Path::new("")))?;
        fs.remove_dir_all(&trash)?;
        Ok(true)
    }

    /// True when blob `sha` is present in the store.
    pub fn has_blob(&self, sha256: &str) -> bool {
        valid_sha(sha256) && matches!(self.inner.fs.blob_size(sha256), Ok(Some(_)))
    }
}

fn would_block() -> FsFailure {
    FsFailure {
        op: FsOp::Lock,
        area: Area::Store,
        path: "lock".into(),
        source: io::ErrorKind::WouldBlock.into(),
    }
}
