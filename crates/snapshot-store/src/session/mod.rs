//! A session's workspace handle. The type and its state are here; its work is split by
//! concern: `log_io` (the record log and the index), `capture`, `commit`, `recheck`,
//! `prune` (and `crate::journal` for restores, `crate::plan` / `crate::chain` for plans).

mod capture;
mod commit;
mod log_io;
mod prune;
mod recheck;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use cap_std::fs::Dir;
use rustix::fs::FlockOperation;
use serde::Serialize;

use crate::blob::{Stored, store_file};
use crate::error::{
    CaptureError, ClearError, CommitError, CorruptFile, Fault, FsFailure, PruneError, RecheckError,
};
use crate::format::{
    BeforeState, Entry, EntrySource, GroupRecord, Known, RECORD_VERSION, SkipReason,
};
use crate::fsio::{DiskMeta, FileId, FileKind, Io, Walk, WsDir, WsFs};
use crate::journal::PathFailure;
use crate::log::{FRAME_HEAD, MAX_PAYLOAD, Record, TrackedUpdate, encode_into};
use crate::path::{RelPath, RelPathError, encode_id};
use crate::records::{
    Index, LOG_NAME, encode_log, fold_frames, fold_log, has_legacy, migrate_session,
    tracked_records,
};
use crate::seam::{Area, CrashPoint, FsOp};
use crate::store::{GcReport, Store, is_hidden};

/// What [`Session::capture_before`] recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CaptureOutcome {
    /// The file's bytes are staged (stored once per distinct content).
    Captured {
        /// Workspace-relative path.
        path: RelPath,
        /// SHA-256 of the content.
        sha256: String,
        /// Size in bytes.
        size: u64,
        /// The content was already in the store; nothing new was written.
        deduplicated: bool,
    },
    /// The path did not exist; "absent" is staged (a restore deletes what the call creates).
    Absent {
        /// Workspace-relative path.
        path: RelPath,
    },
    /// A regular file over the per-file cap: staged as known but not backed up.
    Uncovered {
        /// Workspace-relative path.
        path: RelPath,
        /// Its size.
        size: u64,
    },
    /// Not capturable; when the path is inside the workspace the skip is staged too,
    /// so a later preview can say the path cannot be restored.
    Skipped {
        /// The path as given (lossy text).
        path: String,
        /// Why.
        reason: SkipReason,
    },
    /// The same call already staged this path (first touch wins).
    AlreadyStaged {
        /// Workspace-relative path.
        path: RelPath,
    },
}

/// What [`Session::commit`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CommitOutcome {
    /// The staged before-states joined the anchor group.
    Committed {
        /// The anchor (user-message seq).
        anchor_seq: u64,
        /// Number of paths.
        entries: usize,
    },
    /// The call failed: its staged captures were dropped.
    Dropped {
        /// Number of paths dropped.
        entries: usize,
    },
    /// The call staged nothing.
    NothingStaged,
}

/// One change recorded by [`Session::recheck_tracked`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedChange {
    /// Workspace-relative path.
    pub path: RelPath,
    /// The state recorded (the current disk state at the boundary).
    pub before: BeforeState,
}

/// What [`Session::recheck_tracked`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RecheckOutcome {
    /// Tracked paths examined.
    pub checked: usize,
    /// Paths whose disk state changed since the store last knew it.
    pub recorded: Vec<RecordedChange>,
    /// Paths that could not be examined (the pass went on; they are retried next time).
    pub failed: Vec<PathFailure>,
}

/// Options of [`Session::prune`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Anchor groups to keep (newest first); default 100.
    pub keep_groups: usize,
    /// Finished restore journals to keep (newest first); default 10. Open journals are always kept.
    pub keep_journals: usize,
}

impl Default for PruneOptions {
    fn default() -> Self {
        Self {
            keep_groups: 100,
            keep_journals: 10,
        }
    }
}

/// What [`Session::prune`] removed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PruneReport {
    /// Anchor groups removed.
    pub groups_removed: usize,
    /// Finished journals removed.
    pub journals_removed: usize,
    /// Blob sweep result.
    pub gc: GcReport,
}

/// What [`Session::reconcile_format`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FormatOutcome {
    /// The session had no recorded format; it is now recorded.
    Initialized,
    /// The recorded format matches.
    Unchanged,
    /// The format differed: the session's snapshots were cleared.
    Cleared {
        /// The format that was recorded before.
        previous: Option<String>,
    },
}

/// The open record log of a session handle.
pub(crate) struct LogHandle {
    file: cap_std::fs::File,
    id: FileId,
    /// End of the frames folded into the index.
    len: u64,
    /// Bytes after `len` that are not (yet) a complete frame.
    torn: u64,
}

pub(crate) struct State {
    /// The index folded from the record log.
    pub idx: Index,
    /// The record log, once opened.
    pub log: Option<LogHandle>,
    /// The layout-1 check ran for this handle.
    legacy_checked: bool,
    /// The session directories exist.
    pub prepared: bool,
    /// The first write of this handle checked whether the log wants compaction.
    compact_checked: bool,
    /// The current call holds the log's lock and folded the log under it (a call that
    /// must not wait took the lock up front: see [`Session::try_capture_before`]).
    log_held: bool,
}

/// One session's view of the store and its workspace (the session cwd).
pub struct Session {
    pub(crate) store: Store,
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
    pub(crate) ws: WsFs,
    roots: Vec<PathBuf>,
    pub(crate) state: Mutex<State>,
    /// The store's lock file, opened once per handle.
    lock_file: OnceLock<cap_std::fs::File>,
}

/// A handle's state locked by a call that must not wait, holding the log's lock
/// (released on drop).
pub(crate) struct Quick<'a> {
    session: &'a Session,
    st: MutexGuard<'a, State>,
}

impl Drop for Quick<'_> {
    fn drop(&mut self) {
        self.session.release_log(&mut self.st);
    }
}

/// A shared store lock held on the session's lock descriptor; released on drop.
pub(crate) struct SharedLock<'a> {
    file: &'a cap_std::fs::File,
    fs: &'a crate::fsio::StoreFs,
}

impl Drop for SharedLock<'_> {
    fn drop(&mut self) {
        let _ = self
            .fs
            .flock(self.file, Path::new("lock"), FlockOperation::Unlock);
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
            }),
            lock_file: OnceLock::new(),
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

    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn p(&self, rest: &str) -> PathBuf {
        self.dir.join(rest)
    }

    fn log_path(&self) -> PathBuf {
        self.p(LOG_NAME)
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
        Ok(SharedLock { file, fs })
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

pub(crate) fn not_capturable(meta: &DiskMeta) -> Option<SkipReason> {
    match meta.kind {
        FileKind::Symlink => Some(SkipReason::Symlink),
        FileKind::Dir => Some(SkipReason::Directory),
        FileKind::Other => Some(SkipReason::Special),
        FileKind::File if meta.nlink > 1 => Some(SkipReason::HardLink { nlink: meta.nlink }),
        FileKind::File => None,
    }
}

pub(crate) fn parse_anchor(gdir: &Path, name: &std::ffi::OsStr) -> Result<u64, Fault> {
    name.to_str()
        .filter(|s| s.len() == 20)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| {
            CorruptFile {
                path: gdir.join(name).to_string_lossy().into_owned(),
                detail: "not an anchor group directory name".into(),
            }
            .into()
        })
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
