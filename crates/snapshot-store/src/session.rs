//! A session's workspace handle: capture, commit, discard, recheck, prune, clear.

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
struct Quick<'a> {
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

    /// Refuses when the store (re-checked when `store.json` changed) or this session's
    /// log is newer than this build, or the log is corrupt; brings the index up to
    /// date; creates the session directories once.
    pub(crate) fn prepare(&self, st: &mut State) -> Result<(), Fault> {
        self.store.guard_writable()?;
        self.sync(st)?;
        if st.prepared {
            return Ok(());
        }
        self.store.inner.fs.create_dir_all(&self.p("journals"))?;
        st.prepared = true;
        Ok(())
    }

    /// Brings the index up to date with the session's log (read-only). Migrates a
    /// layout-1 session directory first.
    pub(crate) fn sync(&self, st: &mut State) -> Result<(), Fault> {
        if st.log_held {
            return Ok(()); // folded under the lock this call holds
        }
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        if !st.legacy_checked {
            // Layout-1 files: a session not migrated yet, or leftovers of a migration
            // interrupted after its log was in place.
            if has_legacy(fs, &self.dir)? {
                self.migrate()?;
            }
            st.legacy_checked = true;
        }
        let Some(disk) = fs.stat_id(&path)? else {
            st.idx = Index::default();
            st.log = None;
            return Ok(());
        };
        if let Some(h) = st.log.as_mut() {
            if h.id.same_file(&disk) && disk.size >= h.len && h.len > 0 {
                if disk.size != h.len + h.torn {
                    self.fold_tail(&mut st.idx, h)?;
                }
                return Ok(());
            }
        }
        let file = match fs.open_log(&path) {
            Ok(f) => f,
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => {
                st.idx = Index::default();
                st.log = None;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let id = fs.fstat_id(&file, &path)?;
        let mut h = LogHandle {
            file,
            id,
            len: 0,
            torn: 0,
        };
        st.idx = self.fold_all(&mut h)?;
        st.log = Some(h);
        Ok(())
    }

    /// Folds the whole log of `h` into a fresh index.
    fn fold_all(&self, h: &mut LogHandle) -> Result<Index, Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        let bytes = fs.read_from(&h.file, &path, 0)?;
        let (idx, valid, torn) = fold_log(&path, bytes)?;
        if let Some(named) = &idx.session_id {
            if *named != self.id {
                return Err(CorruptFile {
                    path: path.to_string_lossy().into_owned(),
                    detail: format!("log names session `{named}`"),
                }
                .into());
            }
        }
        h.len = valid;
        h.torn = torn;
        Ok(idx)
    }

    /// Folds the frames appended after `h.len` (by another handle) into `idx`.
    fn fold_tail(&self, idx: &mut Index, h: &mut LogHandle) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        let tail = fs.read_from(&h.file, &path, h.len)?;
        let (valid, torn) = fold_frames(idx, &path, &std::sync::Arc::new(tail), 0)?;
        h.len += valid;
        h.torn = torn;
        Ok(())
    }

    /// Migrates this session's layout-1 directory under the exclusive store lock.
    fn migrate(&self) -> Result<(), Fault> {
        let _g = self.store.lock_exclusive()?;
        migrate_session(&self.store.inner.fs, &self.dir, &self.id, |p| {
            self.store.remove_tree(p)
        })?;
        Ok(())
    }

    /// Runs `f` holding the log's exclusive lock, the index up to date and any torn
    /// tail cut off (no other writer is mid-append while the lock is held). Opens
    /// (creating) the log first; follows a log replaced by another handle's compaction.
    fn with_log_lock<R>(
        &self,
        st: &mut State,
        f: impl FnOnce(&Self, &mut State) -> Result<R, Fault>,
    ) -> Result<R, Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        if st.log_held {
            let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
            if h.torn > 0 {
                fs.truncate(&h.file, &path, h.len)?;
                h.torn = 0;
            }
            return f(self, st);
        }
        let mut f = Some(f);
        for _ in 0..16 {
            if st.log.is_none() {
                fs.create_dir_all(&self.dir)?;
                let file = fs.open_log(&path)?;
                let id = fs.fstat_id(&file, &path)?;
                st.log = Some(LogHandle {
                    file,
                    id,
                    len: 0,
                    torn: 0,
                });
                fs.sync_dir(&self.dir)?;
            }
            let Some(h) = st.log.as_ref() else {
                continue;
            };
            fs.flock(&h.file, &path, FlockOperation::LockExclusive)?;
            let r = (|| -> Result<Option<R>, Fault> {
                let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
                // The path still names our file (not replaced by a compaction, not
                // removed by a clear); its size shows appends by other handles.
                let size = match fs.stat_id(&path)? {
                    Some(d) if d.same_file(&h.id) => d.size,
                    _ => return Ok(None),
                };
                if h.len == 0 || size < h.len {
                    st.idx = self.fold_all(h)?;
                } else if size != h.len + h.torn {
                    self.fold_tail(&mut st.idx, h)?;
                }
                if h.torn > 0 {
                    fs.truncate(&h.file, &path, h.len)?;
                    h.torn = 0;
                }
                match f.take() {
                    Some(f) => f(self, st).map(Some),
                    None => Ok(None),
                }
            })();
            if let Some(h) = st.log.as_ref() {
                let _ = fs.flock(&h.file, &path, FlockOperation::Unlock);
            }
            match r {
                Ok(Some(v)) => return Ok(v),
                // Replaced or removed by another handle: reopen.
                Ok(None) => st.log = None,
                Err(e) => return Err(e),
            }
        }
        Err(lost_log(&path))
    }

    /// Appends `recs` to the session's log in one write and folds them into the index.
    pub(crate) fn append(&self, st: &mut State, recs: Vec<Record>) -> Result<(), Fault> {
        self.with_log_lock(st, |s, st| {
            s.write_locked(st, recs)?;
            if !st.compact_checked {
                st.compact_checked = true;
                if s.wants_compaction(st) {
                    s.compact_locked(st)?;
                }
            }
            Ok(())
        })
    }

    /// Every group of before-states (a committed tool call, a re-check, …) is recorded
    /// here: one `group` record at `anchor_seq` with its source, followed in the same
    /// write by `also` (tracked-cache updates, a boundary).
    pub(crate) fn append_group(
        &self,
        st: &mut State,
        anchor_seq: u64,
        source: EntrySource,
        entries: Vec<Entry>,
        also: Vec<Record>,
    ) -> Result<(), Fault> {
        let mut recs = Vec::with_capacity(1 + also.len());
        recs.push(Record::Group {
            anchor_seq,
            source,
            entries,
        });
        recs.extend(also);
        self.append(st, recs)
    }

    fn write_locked(&self, st: &mut State, recs: Vec<Record>) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
        let mut buf = Vec::with_capacity(256 * recs.len() + 64);
        let mut sizes = Vec::with_capacity(recs.len() + 1);
        let mut all = Vec::with_capacity(recs.len() + 1);
        if h.len == 0 {
            buf.extend_from_slice(&crate::log::header());
            all.push(Record::Session {
                session_id: self.id.clone(),
            });
        }
        all.extend(recs);
        for r in &all {
            let n = encode_into(r, &mut buf);
            if n - FRAME_HEAD > MAX_PAYLOAD as usize {
                return Err(CorruptFile {
                    path: path.to_string_lossy().into_owned(),
                    detail: format!("a record of {n} bytes is over the frame limit; not written"),
                }
                .into());
            }
            sizes.push(n as u64);
        }
        if let Err(e) = fs.append_bytes(&mut h.file, &path, &buf) {
            // A short write leaves part of a frame: cut it (we hold the lock).
            let _ = h.file.set_len(h.len);
            return Err(e.into());
        }
        h.len += buf.len() as u64;
        for (r, n) in all.into_iter().zip(sizes) {
            st.idx.apply(r, n).map_err(|detail| CorruptFile {
                path: path.to_string_lossy().into_owned(),
                detail,
            })?;
        }
        Ok(())
    }

    fn wants_compaction(&self, st: &State) -> bool {
        st.log
            .as_ref()
            .is_some_and(|h| h.len > self.store.inner.compact_min_bytes && st.idx.dead * 2 > h.len)
    }

    /// Rewrites the log as a snapshot of the index: written to a temporary name and
    /// renamed over the log (a crash leaves either log whole). Holds the log lock.
    fn compact_locked(&self, st: &mut State) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        st.idx.merge_group_paths().map_err(|d| self.damaged(d))?;
        let bytes = encode_log(&st.idx.snapshot(&self.id));
        let (tmp, mut f) = fs.create_tmp_beside(&path)?;
        let r = (|| {
            fs.write_all(&mut f, &tmp, &bytes)?;
            fs.sync_file(&f, &tmp)?;
            drop(f);
            fs.io.crash(CrashPoint::CompactWritten);
            fs.rename(&tmp, &path)
        })();
        if r.is_err() {
            let _ = fs.remove_file(&tmp);
        }
        r?;
        fs.sync_dir(&self.dir)?;
        fs.io.crash(CrashPoint::CompactReplaced);
        // Follow the new log; the old descriptor (and its lock) is closed.
        let file = fs.open_log(&path)?;
        let id = fs.fstat_id(&file, &path)?;
        let mut h = LogHandle {
            file,
            id,
            len: 0,
            torn: 0,
        };
        let idx = self.fold_all(&mut h)?;
        if let Some(old) = st.log.replace(h) {
            let _ = fs.flock(&old.file, &path, FlockOperation::Unlock);
        }
        st.idx = idx;
        Ok(())
    }

    /// Compacts the log now when it outgrew its live content (at prune).
    fn compact_if_due(&self, st: &mut State) -> Result<bool, Fault> {
        if !self.wants_compaction(st) {
            return Ok(false);
        }
        self.with_log_lock(st, |s, st| {
            if s.wants_compaction(st) {
                s.compact_locked(st)?;
                Ok(true)
            } else {
                Ok(false)
            }
        })
    }

    /// A damaged record of this session's log.
    pub(crate) fn damaged(&self, detail: String) -> Fault {
        CorruptFile {
            path: self.log_path().to_string_lossy().into_owned(),
            detail,
        }
        .into()
    }

    /// Loads the session's index (read-only checks of plans and previews): a corrupt
    /// or newer log fails here.
    pub(crate) fn load(&self) -> Result<(), Fault> {
        let mut st = self.lock_state();
        self.sync(&mut st)
    }

    /// Maps a host path (absolute inside the cwd, or cwd-relative) to a workspace path.
    pub fn resolve(&self, input: &Path) -> Result<RelPath, SkipReason> {
        let bytes = input.as_os_str().as_bytes();
        if bytes.is_empty() {
            return Err(SkipReason::InvalidPath {
                detail: "empty path".into(),
            });
        }
        if bytes.contains(&0) {
            return Err(SkipReason::InvalidPath {
                detail: "contains a NUL byte".into(),
            });
        }
        let rel: &Path = if input.is_absolute() {
            self.roots
                .iter()
                .find_map(|r| input.strip_prefix(r).ok())
                .ok_or(SkipReason::OutsideWorkspace)?
        } else {
            input
        };
        RelPath::from_path(rel).map_err(|e| match e {
            RelPathError::Empty => SkipReason::Directory,
            RelPathError::BadComponent | RelPathError::Absolute => SkipReason::OutsideWorkspace,
            RelPathError::Nul => SkipReason::InvalidPath {
                detail: "contains a NUL byte".into(),
            },
        })
    }

    fn cap(&self) -> u64 {
        self.store.inner.max_file_bytes
    }

    /// Reads a path's current state into the store (blob for a regular file).
    /// Returns the before-state, what the store now knows, and whether it was a dedup hit.
    pub(crate) fn capture_path(
        &self,
        rel: &RelPath,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        let mut created = Vec::new();
        match self.ws.walk_parent(rel, false, &mut created)? {
            Walk::Missing(_) => Ok((BeforeState::Absent, Known::Absent, false)),
            Walk::Blocked(link) => Ok((
                BeforeState::Skipped {
                    reason: if link {
                        SkipReason::SymlinkedParent
                    } else {
                        SkipReason::ParentNotDirectory
                    },
                },
                Known::Unknown,
                false,
            )),
            Walk::Parent(dir) => self.capture_in(&dir, rel),
        }
    }

    pub(crate) fn capture_in(
        &self,
        dir: &WsDir<'_>,
        rel: &RelPath,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        let (_, name) = rel.split_last();
        let Some(meta) = self.ws.lstat(dir, name, rel)? else {
            return Ok((BeforeState::Absent, Known::Absent, false));
        };
        if let Some(reason) = not_capturable(&meta) {
            return Ok((
                BeforeState::Skipped { reason },
                Known::Present {
                    meta,
                    sha256: None,
                    recorded: true,
                },
                false,
            ));
        }
        let cap = self.cap();
        if cap != 0 && meta.size > cap {
            return Ok((
                BeforeState::Uncovered { size: meta.size },
                Known::Present {
                    meta,
                    sha256: None,
                    recorded: true,
                },
                false,
            ));
        }
        let opened = match self.ws.open_read(dir, name, rel) {
            Ok(o) => o,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok((
                    BeforeState::Skipped {
                        reason: SkipReason::Symlink,
                    },
                    Known::Unknown,
                    false,
                ));
            }
            Err(e) => return Err(e),
        };
        let Some((mut file, fmeta)) = opened else {
            return Ok((BeforeState::Absent, Known::Absent, false));
        };
        if let Some(reason) = not_capturable(&fmeta) {
            return Ok((
                BeforeState::Skipped { reason },
                Known::Present {
                    meta: fmeta,
                    sha256: None,
                    recorded: true,
                },
                false,
            ));
        }
        match store_file(
            &self.store.inner.fs,
            &self.ws,
            &mut file,
            rel,
            fmeta.size,
            cap,
        )? {
            Stored::OverCap { size } => Ok((
                BeforeState::Uncovered { size },
                Known::Present {
                    meta: fmeta,
                    sha256: None,
                    recorded: true,
                },
                false,
            )),
            Stored::Blob {
                sha256,
                size,
                dedup,
            } => Ok((
                BeforeState::File {
                    sha256: sha256.clone(),
                    size,
                    mode: fmeta.mode,
                },
                Known::Present {
                    meta: fmeta,
                    sha256: Some(sha256),
                    recorded: true,
                },
                dedup,
            )),
        }
    }

    /// `lstat`-level observation (no content read).
    pub(crate) fn observe_meta(&self, rel: &RelPath) -> Result<Known, FsFailure> {
        let mut created = Vec::new();
        match self.ws.walk_parent(rel, false, &mut created)? {
            Walk::Missing(_) => Ok(Known::Absent),
            Walk::Blocked(..) => Ok(Known::Unknown),
            Walk::Parent(dir) => {
                let (_, name) = rel.split_last();
                Ok(match self.ws.lstat(&dir, name, rel)? {
                    None => Known::Absent,
                    Some(meta) => Known::Present {
                        meta,
                        sha256: None,
                        recorded: false,
                    },
                })
            }
        }
    }

    /// Records the before-state of `path` for tool call `call_id`, before the tool writes.
    ///
    /// `path` is absolute (inside the session cwd) or cwd-relative. When this returns
    /// `Ok`, the staged record survives a kill -9 of the process (see `docs/format.md`).
    pub fn capture_before(
        &self,
        call_id: &str,
        path: &Path,
    ) -> Result<CaptureOutcome, CaptureError> {
        encode_id(call_id).map_err(|reason| CaptureError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        self.capture_with(&mut self.lock_state(), call_id, path, None)
    }

    /// [`Session::capture_before`] for a caller that must not wait (a host's event
    /// loop): `None`, having done nothing, when the call could wait or take long —
    /// another thread is using this handle, another handle or process holds the store
    /// or log lock, the handle has not written yet (its first write may compact the
    /// log), or `path` is a regular file over `max_bytes`. The caller then makes the
    /// blocking call (on another thread). Takes both locks up front, and the log's
    /// only once for the whole call.
    pub fn try_capture_before(
        &self,
        call_id: &str,
        path: &Path,
        max_bytes: u64,
    ) -> Option<Result<CaptureOutcome, CaptureError>> {
        if let Err(reason) = encode_id(call_id) {
            return Some(Err(CaptureError::InvalidCallId {
                id: call_id.into(),
                reason,
            }));
        }
        if let Ok(rel) = self.resolve(path) {
            // Relative to the workspace handle: no walk of the cwd's own path.
            let m = rustix::fs::statat(
                &self.ws.root,
                std::ffi::OsStr::from_bytes(rel.as_bytes()),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            );
            if m.is_ok_and(|m| {
                m.st_mode & 0o170000 == 0o100000
                    && u64::try_from(m.st_size).unwrap_or(0) > max_bytes
            }) {
                return None;
            }
        }
        let (mut q, held) = self.quick_state(true)?;
        Some(self.capture_with(&mut q.st, call_id, path, held))
    }

    /// The state of this handle, the shared store lock (with `store_lock`) and the
    /// log's lock, taken without waiting, with the index brought up to date under the
    /// log's lock; `None` (nothing held) when any would wait, when the log was
    /// replaced, or before the handle's first write (see
    /// [`Session::try_capture_before`]). The log's lock is released when the returned
    /// state is dropped.
    fn quick_state(&self, store_lock: bool) -> Option<(Quick<'_>, Option<SharedLock<'_>>)> {
        let mut st = match self.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        if !(st.legacy_checked && st.prepared && st.compact_checked) || st.log.is_none() {
            return None;
        }
        let fs = &self.store.inner.fs;
        // The usual order: the store lock, then the log's.
        let held = if store_lock {
            let file = self.lock_file.get()?;
            if !matches!(
                fs.flock(
                    file,
                    Path::new("lock"),
                    FlockOperation::NonBlockingLockShared
                ),
                Ok(true)
            ) {
                return None;
            }
            Some(SharedLock { file, fs })
        } else {
            None
        };
        let path = self.log_path();
        let State { idx, log, .. } = &mut *st;
        let h = log.as_mut()?;
        if !matches!(
            fs.flock(&h.file, &path, FlockOperation::NonBlockingLockExclusive),
            Ok(true)
        ) {
            return None;
        }
        let current = match fs.stat_id(&path) {
            Ok(Some(d)) if d.same_file(&h.id) && d.size >= h.len && h.len > 0 => {
                d.size == h.len + h.torn || self.fold_tail(idx, h).is_ok()
            }
            _ => false,
        };
        if !current {
            let _ = fs.flock(&h.file, &path, FlockOperation::Unlock);
            return None;
        }
        st.log_held = true;
        Some((Quick { session: self, st }, held))
    }

    /// Releases the log's lock taken by [`Session::quick_state`].
    fn release_log(&self, st: &mut State) {
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

    fn capture_with(
        &self,
        st: &mut State,
        call_id: &str,
        path: &Path,
        held: Option<SharedLock<'_>>,
    ) -> Result<CaptureOutcome, CaptureError> {
        self.prepare(st)?;
        let rel = match self.resolve(path) {
            Ok(r) => r,
            Err(reason) => {
                return Ok(CaptureOutcome::Skipped {
                    path: path.to_string_lossy().into_owned(),
                    reason,
                });
            }
        };
        let _g = match held {
            Some(g) => g,
            None => self.lock_shared()?,
        };
        let staged = st
            .idx
            .pending
            .get(call_id)
            .is_some_and(|(v, _)| v.iter().any(|e| e.path == rel));
        if staged {
            return Ok(CaptureOutcome::AlreadyStaged { path: rel });
        }
        let back_order = self.store.next_order();
        let order = self.store.next_order();
        let (before, now, dedup) = self.capture_path(&rel).map_err(|e| map_read(e, &rel))?;
        // Changed since the last boundary without the store seeing it (an external edit
        // in this turn): record the state that boundary saw, ahead of this capture.
        if let Some(prev) = st.idx.boundary {
            let (known, since) = st
                .idx
                .tracked
                .get(&rel)
                .map(|t| (t.known.clone(), t.since))
                .unwrap_or((Known::Unknown, None));
            if differs(&known, &now) {
                if let Some(e) = self.backdated_entry(&rel, &known, since, prev, back_order) {
                    let upd = Record::Tracked {
                        paths: vec![TrackedUpdate {
                            path: rel.clone(),
                            known,
                            since: Some(prev),
                        }],
                    };
                    self.append_group(st, prev, EntrySource::Recheck, vec![e], vec![upd])?;
                }
            }
        }
        let entry = Entry {
            path: rel.clone(),
            order,
            before: before.clone(),
        };
        self.append(
            st,
            vec![Record::Staged {
                call_id: call_id.to_string(),
                entry,
            }],
        )?;
        self.store.inner.fs.io.crash(CrashPoint::CaptureStaged);
        Ok(match before {
            BeforeState::Absent => CaptureOutcome::Absent { path: rel },
            BeforeState::File { sha256, size, .. } => CaptureOutcome::Captured {
                path: rel,
                sha256,
                size,
                deduplicated: dedup,
            },
            BeforeState::Uncovered { size } => CaptureOutcome::Uncovered { path: rel, size },
            BeforeState::Skipped { reason } => CaptureOutcome::Skipped {
                path: rel.display(),
                reason,
            },
        })
    }

    /// Settles tool call `call_id`: a failed call (`ok == false`) drops its staged
    /// captures; a successful one joins anchor group `anchor_seq` (the seq of the
    /// user message the call belongs to). Idempotent after a crash.
    pub fn commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        self.commit_with(&mut self.lock_state(), call_id, anchor_seq, ok)
    }

    /// [`Session::commit`] for a caller that must not wait: `None`, having done
    /// nothing, in the cases of [`Session::try_capture_before`] (no store lock is
    /// involved) or when the call staged more than `max_paths` paths.
    pub fn try_commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
        max_paths: usize,
    ) -> Option<Result<CommitOutcome, CommitError>> {
        if let Err(reason) = encode_id(call_id) {
            return Some(Err(CommitError::InvalidCallId {
                id: call_id.into(),
                reason,
            }));
        }
        let (mut q, _) = self.quick_state(false)?;
        let many =
            q.st.idx
                .pending
                .get(call_id)
                .is_some_and(|(e, _)| e.len() > max_paths);
        (!many).then(|| self.commit_with(&mut q.st, call_id, anchor_seq, ok))
    }

    fn commit_with(
        &self,
        st: &mut State,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        self.prepare(st)?;
        let staged = st.idx.pending.get(call_id).map(|(e, _)| e.clone());
        let Some(entries) = staged else {
            if ok {
                let done = st.idx.groups.get(&anchor_seq).and_then(|gs| {
                    gs.iter().find(
                        |g| matches!(&g.source, EntrySource::Tool { call_id: c } if c == call_id),
                    )
                });
                if let Some(g) = done {
                    return Ok(CommitOutcome::Committed {
                        anchor_seq,
                        entries: g.len(),
                    });
                }
            }
            return Ok(CommitOutcome::NothingStaged);
        };
        let n = entries.len();
        if !ok {
            self.append(
                st,
                vec![Record::Dropped {
                    call_id: call_id.to_string(),
                }],
            )?;
            return Ok(CommitOutcome::Dropped { entries: n });
        }
        // The tool has written: remember the after-state metadata (content unknown).
        let mut updates = Vec::with_capacity(n);
        for e in &entries {
            let known = self.observe_meta(&e.path).unwrap_or(Known::Unknown);
            updates.push(TrackedUpdate {
                path: e.path.clone(),
                known,
                since: None,
            });
        }
        self.append_group(
            st,
            anchor_seq,
            EntrySource::Tool {
                call_id: call_id.to_string(),
            },
            entries,
            tracked_records(updates),
        )?;
        let fs = &self.store.inner.fs;
        // One record settles the call: both points follow the same write.
        fs.io.crash(CrashPoint::CommitEntryWritten);
        fs.io.crash(CrashPoint::CommitPendingRemoved);
        Ok(CommitOutcome::Committed {
            anchor_seq,
            entries: n,
        })
    }

    /// Drops whatever call `call_id` staged (the host's safety net when a call's
    /// post-execution step never ran). Returns whether anything was staged.
    pub fn discard(&self, call_id: &str) -> Result<bool, CommitError> {
        encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        if !st.idx.pending.contains_key(call_id) {
            return Ok(false);
        }
        self.append(
            &mut st,
            vec![Record::Dropped {
                call_id: call_id.to_string(),
            }],
        )?;
        Ok(true)
    }

    /// Every group record with anchor ≥ `min_anchor`, in (anchor, append) order.
    pub(crate) fn load_groups(&self, min_anchor: u64) -> Result<Vec<(u64, GroupRecord)>, Fault> {
        let mut st = self.lock_state();
        self.sync(&mut st)?;
        let mut out = Vec::new();
        for (seq, gs) in st.idx.groups.range(min_anchor..) {
            for g in gs {
                let entries = g.entries().map_err(|d| self.damaged(d))?.into_owned();
                out.push((
                    *seq,
                    GroupRecord {
                        v: RECORD_VERSION,
                        anchor_seq: *seq,
                        source: g.source.clone(),
                        entries,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// At a user-message boundary (`anchor_seq` = that message's seq): checks every
    /// tracked path and records the current state of each whose disk state changed
    /// since the store last knew it. Unchanged paths (same size, mtime, ctime, inode,
    /// mode, type) are not read.
    pub fn recheck_tracked(&self, anchor_seq: u64) -> Result<RecheckOutcome, RecheckError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.lock_shared()?;
        st.idx.merge_group_paths().map_err(|d| self.damaged(d))?;
        let paths: Vec<(RelPath, (Known, Option<u64>))> = st
            .idx
            .tracked
            .iter()
            .map(|(p, t)| (p.clone(), (t.known.clone(), t.since)))
            .collect();
        let prev_boundary = st.idx.boundary.filter(|b| *b < anchor_seq);
        let mut backdated = Vec::new();
        let mut outcome = RecheckOutcome {
            checked: paths.len(),
            recorded: Vec::new(),
            failed: Vec::new(),
        };
        let mut entries = Vec::new();
        // The state of files tools wrote since the last boundary, recorded here once: kept
        // apart from the changes made outside the agent (a scan-found, in-turn source), so
        // the plan can tell who made the newest change of each path.
        let mut tool_written = Vec::new();
        let mut updates = Vec::new();
        let mut cached: Option<(Vec<u8>, Option<WsDir<'_>>)> = None;
        for (rel, (known, since)) in paths {
            let (parents, name) = rel.split_last();
            let key = parents.join(&b'/');
            let r = (|| -> Result<Option<(BeforeState, Known, u64, bool)>, FsFailure> {
                if cached.as_ref().map(|(k, _)| k != &key).unwrap_or(true) {
                    let mut created = Vec::new();
                    cached = None;
                    let d = match self.ws.walk_parent(&rel, false, &mut created)? {
                        Walk::Parent(d) => Some(d),
                        _ => None,
                    };
                    cached = Some((key.clone(), d));
                }
                let dir = cached.as_ref().and_then(|(_, d)| d.as_ref());
                let now = match dir {
                    Some(d) => match self.ws.lstat(d, name, &rel)? {
                        None => Known::Absent,
                        Some(meta) => Known::Present {
                            meta,
                            sha256: None,
                            recorded: false,
                        },
                    },
                    // Parent missing or blocked: find out which through the full path.
                    None => self.observe_meta(&rel)?,
                };
                // Unchanged = same metadata and content already known. A file a tool wrote
                // since (content unknown) is recorded once, so every boundary's state is exact.
                let same = match (&known, &now) {
                    (Known::Absent, Known::Absent) => true,
                    (
                        Known::Present {
                            meta: a, recorded, ..
                        },
                        Known::Present { meta: b, .. },
                    ) => a == b && *recorded,
                    _ => false,
                };
                if same {
                    return Ok(None);
                }
                // The content a tool wrote, untouched since (same metadata), recorded once:
                // not a change made outside the agent.
                let tool_content = matches!(
                    (&known, &now),
                    (Known::Present { meta: a, recorded: false, .. }, Known::Present { meta: b, .. }) if a == b
                );
                let order = self.store.next_order();
                let (before, new_known, _) = match dir {
                    Some(d) => self.capture_in(d, &rel)?,
                    None => self.capture_path(&rel)?,
                };
                Ok(Some((before, new_known, order, tool_content)))
            })();
            let (before, new_known, order, tool_content) = match r {
                Ok(None) => continue,
                Ok(Some(x)) => x,
                Err(e) if e.area == Area::Workspace => {
                    // Per-path failure: reported; the path stays as last known and is retried next time.
                    cached = None;
                    outcome.failed.push(PathFailure {
                        path: rel.clone(),
                        display: rel.display(),
                        error: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // Same content as last known (e.g. only touched): record nothing, refresh metadata.
            if let (
                Known::Present {
                    sha256: Some(old), ..
                },
                BeforeState::File { sha256: new, .. },
            ) = (&known, &before)
            {
                if old == new {
                    updates.push((rel.clone(), new_known, since));
                    continue;
                }
            }
            // The change happened after the previous boundary, which saw the last known
            // state: record that state there too (unless already recorded there or later),
            // so a rewind to the previous boundary is exact.
            if let Some(prev) = prev_boundary {
                if let Some(e) =
                    self.backdated_entry(&rel, &known, since, prev, self.store.next_order())
                {
                    backdated.push(e);
                }
            }
            let entry = Entry {
                path: rel.clone(),
                order,
                before: before.clone(),
            };
            if tool_content {
                tool_written.push(entry);
            } else {
                entries.push(entry);
            }
            outcome.recorded.push(RecordedChange {
                path: rel.clone(),
                before,
            });
            updates.push((rel, new_known, Some(anchor_seq)));
        }
        drop(cached);
        if let (Some(prev), false) = (prev_boundary, backdated.is_empty()) {
            self.append_group(&mut st, prev, EntrySource::Recheck, backdated, Vec::new())?;
        }
        let mut also = Vec::new();
        if !tool_written.is_empty() {
            also.push(Record::Group {
                anchor_seq,
                source: EntrySource::Scan { call_id: None },
                entries: tool_written,
            });
        }
        also.extend(tracked_records(
            updates
                .into_iter()
                .map(|(path, known, since)| TrackedUpdate { path, known, since })
                .collect(),
        ));
        if st.idx.boundary.is_none_or(|b| b < anchor_seq) {
            also.push(Record::Boundary { anchor_seq });
        }
        if !entries.is_empty() {
            self.append_group(&mut st, anchor_seq, EntrySource::Recheck, entries, also)?;
        } else if !also.is_empty() {
            self.append(&mut st, also)?;
        }
        Ok(outcome)
    }

    /// The entry recording `known` (the state last seen) at boundary `prev`, when the
    /// path changed after `prev` and that state is not already recorded at `prev` or later.
    fn backdated_entry(
        &self,
        rel: &RelPath,
        known: &Known,
        since: Option<u64>,
        prev: u64,
        order: u64,
    ) -> Option<Entry> {
        if since.is_some_and(|s| s >= prev) {
            return None;
        }
        let before = match known {
            Known::Absent => BeforeState::Absent,
            Known::Present {
                meta,
                sha256: Some(sha),
                recorded: true,
            } if meta.kind == FileKind::File && self.store.has_blob(sha) => BeforeState::File {
                sha256: sha.clone(),
                size: meta.size,
                mode: meta.mode,
            },
            _ => return None,
        };
        Some(Entry {
            path: rel.clone(),
            order,
            before,
        })
    }

    /// The tracked paths (every path with a recorded before-state, plus the cache).
    pub fn tracked_paths(&self) -> Result<Vec<RelPath>, RecheckError> {
        let mut st = self.lock_state();
        self.sync(&mut st)?;
        st.idx.merge_group_paths().map_err(|d| self.damaged(d))?;
        Ok(st.idx.tracked.keys().cloned().collect())
    }

    /// The anchors that have a group, ascending.
    pub fn anchors(&self) -> Result<Vec<u64>, RecheckError> {
        let mut st = self.lock_state();
        self.sync(&mut st)?;
        Ok(st.idx.groups.keys().copied().collect())
    }

    /// Keeps the newest `keep_groups` anchor groups and `keep_journals` finished
    /// journals; open journals are always kept. Compacts the record log when it
    /// outgrew its live content. When that removed anything, it then removes every
    /// blob nothing references (store-wide).
    pub fn prune(&self, opts: PruneOptions) -> Result<PruneReport, PruneError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.store.lock_exclusive()?;
        let mut report = PruneReport::default();
        let anchors: Vec<u64> = st.idx.groups.keys().copied().collect();
        if anchors.len() > opts.keep_groups {
            let drop = anchors[..anchors.len() - opts.keep_groups].to_vec();
            report.groups_removed = drop.len();
            self.append(&mut st, vec![Record::Pruned { anchors: drop }])?;
            self.store.inner.fs.io.crash(CrashPoint::PruneGroupDetached);
        }
        self.compact_if_due(&mut st)?;
        report.journals_removed = self.prune_journals(opts.keep_journals)?;
        self.sweep_temporaries()?;
        self.store.inner.fs.io.crash(CrashPoint::PruneBeforeSweep);
        // The blob sweep reads every record of every session: worth it only when this prune
        // dropped references. Blobs left by dropped captures wait for the next sweep that runs
        // (a prune that removes something, `Store::collect_garbage`, `clear_session`).
        if report.groups_removed > 0 || report.journals_removed > 0 {
            report.gc = self.store.collect_garbage_locked()?;
        }
        Ok(report)
    }

    /// Removes temporary files (`.name.tmp-…`) left in the session by a crash in the
    /// middle of an atomic write or a compaction. Called under the exclusive store
    /// lock and the session's state lock.
    fn sweep_temporaries(&self) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        for d in [self.dir.clone(), self.p("journals")] {
            for name in fs.list(&d)? {
                if is_hidden(&name) {
                    fs.remove_file(&d.join(name))?;
                }
            }
        }
        Ok(())
    }

    /// Removes this session's snapshot directory (record log, journals), then sweeps
    /// unreferenced blobs. Refused on a newer store.
    pub fn clear_session(&self) -> Result<GcReport, ClearError> {
        let mut st = self.lock_state();
        self.store.guard_writable()?;
        let _g = self.store.lock_exclusive()?;
        self.store.remove_tree(&self.dir)?;
        st.idx = Index::default();
        st.log = None;
        st.prepared = false;
        st.legacy_checked = true;
        Ok(self.store.collect_garbage_locked()?)
    }

    /// Records the host's session-log format `format`; when a different format was
    /// recorded, the session's snapshots are cleared first (anchors are log seqs, so
    /// they are not re-mapped across formats).
    pub fn reconcile_format(&self, format: &str) -> Result<FormatOutcome, ClearError> {
        self.store.guard_writable()?;
        let mut st = self.lock_state();
        self.sync(&mut st)?;
        let previous = st.idx.format.clone();
        let outcome = if previous.as_deref() == Some(format) {
            return Ok(FormatOutcome::Unchanged);
        } else if previous.is_none() && st.idx.groups.is_empty() && !self.has_journals()? {
            FormatOutcome::Initialized
        } else {
            drop(st);
            self.clear_session()?;
            st = self.lock_state();
            FormatOutcome::Cleared { previous }
        };
        self.prepare(&mut st)?;
        self.append(
            &mut st,
            vec![Record::Format {
                format: Some(format.to_string()),
            }],
        )?;
        Ok(outcome)
    }

    fn has_journals(&self) -> Result<bool, Fault> {
        Ok(!self.store.inner.fs.list(&self.p("journals"))?.is_empty())
    }

    /// The recorded session-log format, if any.
    pub fn format(&self) -> Result<Option<String>, RecheckError> {
        let mut st = self.lock_state();
        self.sync(&mut st)?;
        Ok(st.idx.format.clone())
    }
}

fn lost_log(path: &Path) -> Fault {
    FsFailure {
        op: FsOp::Lock,
        area: Area::Store,
        path: path.to_string_lossy().into_owned(),
        source: std::io::Error::other("the record log kept being replaced while locking it"),
    }
    .into()
}

/// Whether the disk state `now` differs from the last known state (unknown never differs).
fn differs(known: &Known, now: &Known) -> bool {
    match (known, now) {
        (Known::Unknown, _) | (_, Known::Unknown) => false,
        (Known::Absent, Known::Absent) => false,
        (Known::Present { meta: a, .. }, Known::Present { meta: b, .. }) => a != b,
        _ => true,
    }
}

fn not_capturable(meta: &DiskMeta) -> Option<SkipReason> {
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

fn map_read(e: FsFailure, rel: &RelPath) -> CaptureError {
    if e.area == Area::Workspace {
        CaptureError::Read {
            path: rel.display(),
            source: e,
        }
    } else {
        CaptureError::Fs(e)
    }
}
