//! Before-states of the files a write tool is about to change: resolve, capture.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::FlockOperation;
use serde::Serialize;

use crate::blob::{Stored, store_file};
use crate::codec::{Record, TrackedUpdate};
use crate::error::{CaptureError, FsFailure};
use crate::format::{BeforeState, Entry, EntrySource, Known, SkipReason};
use crate::fsio::{Beneath, DiskMeta, Walk, WsDir};
use crate::path::{RelPath, RelPathError, encode_id};
use crate::seam::CrashPoint;

use crate::session::{Quick, Session, SharedLock, State, differs, map_read, not_capturable};

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
    /// The path's state at the call's anchor is already recorded (a group at that
    /// anchor has an entry for it: an earlier call of the same turn, the message's
    /// re-check, a scan), so nothing was read or staged: a rewind to that anchor or
    /// earlier restores that state or an earlier one, never one recorded there later.
    /// The path's after-state is recorded when the call commits.
    AlreadyRecorded {
        /// Workspace-relative path.
        path: RelPath,
    },
}

/// The session's write-tool calls: the before-state captured ahead of a call, staged
/// under its call id, then committed into its anchor group or dropped.
#[derive(Clone, Copy)]
pub(crate) struct Staging<'s> {
    pub(crate) s: &'s Session,
    /// Small files read are kept in the log instead of blob files (a boundary's reads).
    sink: Option<&'s crate::blob::LogSink<'s>>,
    /// Where a write-tool capture may find the file's content without reading it.
    prior: Option<&'s Prior<'s>>,
}

/// What a write-tool capture knows of a path from the workspace scan's index (the baseline and
/// every scan since hashed the workspace's files into the store), looked up once per capture,
/// and the content this session's log keeps.
///
/// The entry stands for the file, which is then not read, when the file's `fstat` equals the
/// entry's metadata in every field (type, permission bits, link count, size, inode, device,
/// mtime and ctime to the nanosecond) and the entry changed well before the scan that wrote the
/// index started (its ctime over [`RACY_NS`] before): the rule by which a scan itself leaves
/// such a file unread. A write after the scan read the file gives it a later ctime, so the same
/// metadata means the same content. When the file no longer matches the entry, the entry is the
/// state the scan saw before a change no scan saw ([`Prior::unseen`]). Either way the content
/// must still be in the store ([`Prior::holds`]). No index, an index being written by a scan
/// (it holds the index's lock), no entry: the file is read as before. A path with no entry that
/// this handle's last scan found absent and that is now there was created since
/// ([`Prior::created`]).
///
/// [`RACY_NS`]: crate::scan::diff::RACY_NS
pub(crate) struct Prior<'a> {
    /// The index's entry for the path, and the `scanned_at` of that index (the start of the
    /// scan that wrote it).
    scanned: Option<(crate::scan::index::IdxEntry, u64)>,
    /// The `scanned_at` of the index when it has no entry for the path.
    missing: Option<u64>,
    /// The content this session's log keeps, when the capture holds the log's lock.
    kept: Option<&'a crate::records::Kept>,
    /// This handle's last scan of the workspace.
    seen: Option<&'a crate::session::ScanSeen>,
}

impl<'a> Prior<'a> {
    /// The index's view of `rel` for a capture by `s`; `kept`: see [`Prior::kept`]; `seen`:
    /// the handle's last scan ([`State::scan_seen`]).
    fn of(
        s: &Session,
        rel: &RelPath,
        kept: Option<&'a crate::records::Kept>,
        seen: Option<&'a crate::session::ScanSeen>,
    ) -> Self {
        let mut missing = None;
        let scanned = s.workspace_index().and_then(|(_, slot)| {
            let cached = slot.try_lock().ok()?;
            let ix = cached.index.as_ref()?;
            match ix.entries().get(rel.as_bytes()) {
                Some(entry) => Some((entry.clone(), ix.scanned_at)),
                None => {
                    missing = Some(ix.scanned_at);
                    None
                }
            }
        });
        Prior {
            scanned,
            missing,
            kept,
            seen,
        }
    }

    /// Whether the store holds content `sha` of `size` bytes: kept in this session's log (looked
    /// at only under the log's lock: no compaction can drop it before the capture's record
    /// names it), or in a blob file of that size (the store's shared lock, held by the capture
    /// until its record is written, keeps a sweep from removing it).
    fn holds(&self, s: &Session, sha: &str, size: u64) -> bool {
        self.kept.is_some_and(|k| k.contains_key(sha))
            || matches!(s.store.inner.fs.blob_size(sha), Ok(Some(n)) if n == size)
    }

    /// The SHA-256 (hex) of the content of the file whose `fstat` is `meta`, when the index's
    /// entry stands for it and the store holds that content (see [`Prior`]).
    fn content_of(&self, s: &Session, meta: &DiskMeta, cap: u64) -> Option<String> {
        if meta.kind != crate::fsio::FileKind::File || (cap != 0 && meta.size > cap) {
            return None;
        }
        let (entry, scanned_at) = self.scanned.as_ref()?;
        if entry.stat != crate::scan::index::Stat::from_disk(meta)
            || entry.stat.ctime_total() >= scanned_at.saturating_sub(crate::scan::diff::RACY_NS)
        {
            return None;
        }
        let sha = entry.sha_hex()?;
        self.holds(s, &sha, meta.size).then_some(sha)
    }

    /// The state the scan saw of `rel`, a regular file that no longer matches it (`now`: what
    /// the capture found), when the store holds its content, or a path the scan's walk found
    /// absent that is now a regular file: its before-state, and the `scanned_at` of the index
    /// that holds that state.
    fn unseen(&self, s: &Session, rel: &RelPath, now: &Known) -> Option<(BeforeState, u64)> {
        let Some((entry, scanned_at)) = self.scanned.as_ref() else {
            return self
                .created(s, rel, now)
                .map(|at| (BeforeState::Absent, at));
        };
        let changed = match now {
            Known::Absent => true,
            Known::Present { meta, sha256, .. } => {
                let stat = crate::scan::index::Stat::from_disk(meta);
                // Written again with the same bytes and permissions (an editor's save of an
                // unchanged buffer, a formatter that changed nothing): nothing to record, as
                // the scan itself finds when it reads such a file. (The content is compared
                // only when the metadata differs: most captures stop at the first test.)
                stat != entry.stat
                    && !(sha256.is_some()
                        && stat.kind() == entry.stat.kind()
                        && stat.perm() == entry.stat.perm()
                        && *sha256 == entry.sha_hex())
            }
            Known::Unknown => false,
        };
        if !changed || entry.stat.kind() != crate::fsio::FileKind::File {
            return None;
        }
        let sha = entry.sha_hex()?;
        self.holds(s, &sha, entry.stat.size).then(|| {
            let before = BeforeState::File {
                sha256: sha,
                size: entry.stat.size,
                mode: entry.stat.perm(),
            };
            (before, *scanned_at)
        })
    }

    /// The `scanned_at` of the index that has no entry for `rel`, when `now` finds a regular
    /// file there and the walk of this handle's scan that left that index found no entry of
    /// that name where it would be ([`crate::scan::Absence`]): the path was created since.
    /// Not when the file is one the index knows under another path (the same inode: moved or
    /// linked there since, e.g. its directory renamed), nor when the name the walk did not
    /// find is not spelled as the directory now lists it (a filesystem that folds case or
    /// normalizes names finds a path under another spelling). A file whose inode number an
    /// entry holds is still taken for created when the filesystem shows it born after that
    /// entry's file last changed: a new file given the number of one deleted since the scan
    /// (by a rewind's restore, by a tool, by hand), not that file (see [`Prior::reborn`]).
    fn created(&self, s: &Session, rel: &RelPath, now: &Known) -> Option<u64> {
        let at = self.missing?;
        let Known::Present { meta, .. } = now else {
            return None;
        };
        if meta.kind != crate::fsio::FileKind::File {
            return None;
        }
        let absence = self.seen.filter(|v| v.index_at == at)?.absence.as_ref()?;
        let (_, slot) = s.workspace_index()?;
        let mut cached = slot.try_lock().ok()?;
        let ix = cached.index.as_mut().filter(|ix| ix.scanned_at == at)?;
        let bytes = rel.as_bytes();
        let n = absence.absent(bytes, |q| ix.entries().contains_key(q))?;
        let known = ix
            .knows_inode(meta.dev, meta.ino)
            .then(|| ix.inode_changed_last(meta.dev, meta.ino))
            .flatten();
        drop(cached);
        if let Some(changed) = known {
            if !Self::reborn(s, rel, meta, changed) {
                return None;
            }
        }
        // The directory is walked to as the capture walks (no symlink followed, nothing
        // outside the workspace listed); any failure leaves the path not taken for created.
        let first = RelPath::from_bytes(&bytes[..n]).ok()?;
        let Ok(crate::fsio::Walk::Parent(dir)) = s.ws.walk_parent(&first, false, &mut Vec::new())
        else {
            return None;
        };
        let (_, name) = first.split_last();
        s.ws.lists(dir, name, &first).ok()?.then_some(at)
    }

    /// Whether the file at `rel`, whose `fstat` was `meta`, was born after `changed` (ns), the
    /// latest status change of the files the index saw with its inode: then it is not one of
    /// them. A file keeps its birth time when it is renamed or linked, and is never born
    /// after its own status changes, so only a file created once that inode was freed passes.
    /// The birth time is read where the capture found the file (walked to as the capture
    /// walks, no symlink followed), and only counts for the same inode. A filesystem that
    /// keeps no birth time, a birth in the same clock tick, or any failure: not reborn (the
    /// file is taken for one the index knows, as before).
    fn reborn(s: &Session, rel: &RelPath, meta: &DiskMeta, changed: u64) -> bool {
        let Ok(crate::fsio::Walk::Parent(dir)) = s.ws.walk_parent(rel, false, &mut Vec::new())
        else {
            return false;
        };
        let (_, name) = rel.split_last();
        matches!(
            s.ws.born(&dir, name, rel),
            Ok(Some(b)) if b.dev == meta.dev && b.ino == meta.ino && b.ns > changed
        )
    }
}

impl Session {
    /// The session's write-tool captures.
    pub(crate) fn staging(&self) -> Staging<'_> {
        Staging {
            s: self,
            sink: None,
            prior: None,
        }
    }

    /// [`Session::staging`] keeping the small files it reads in `sink`.
    pub(crate) fn staging_into<'a>(&'a self, sink: &'a crate::blob::LogSink<'a>) -> Staging<'a> {
        Staging {
            s: self,
            sink: Some(sink),
            prior: None,
        }
    }

    /// Maps a host path (absolute inside the cwd, or cwd-relative) to a workspace path.
    pub fn resolve(&self, input: &Path) -> Result<RelPath, SkipReason> {
        self.staging().resolve(input)
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
        self.staging().capture_before(call_id, path, None)
    }

    /// [`Session::capture_before`] naming the anchor the call's commit will join
    /// (the anchor the host passes to [`Session::commit`]). The staged record then
    /// carries it: if the call's commit never reaches the log (the process ends
    /// first), the call counts as committed there when the log is next opened. In the
    /// default durability mode this lets [`Session::commit`] at that anchor leave its
    /// write to the next append (see [`Session::flush`]).
    pub fn capture_before_at(
        &self,
        call_id: &str,
        path: &Path,
        anchor_seq: u64,
    ) -> Result<CaptureOutcome, CaptureError> {
        self.staging()
            .capture_before(call_id, path, Some(anchor_seq))
    }

    /// [`Session::capture_before`] for a caller that must not wait (a host's event
    /// loop): `None`, having done nothing, when the call could wait or take long —
    /// another thread is using this handle, another handle or process holds the store
    /// or log lock, the handle has not written yet (its first write may compact the
    /// log), or `path` is a regular file over `max_bytes` that the capture would read (not
    /// one over the store's per-file cap, nor one the workspace scan's index stands for:
    /// their captures read none of their bytes). The caller then makes the
    /// blocking call (on another thread). Takes both locks up front, and the log's
    /// only once for the whole call.
    pub fn try_capture_before(
        &self,
        call_id: &str,
        path: &Path,
        max_bytes: u64,
    ) -> Option<Result<CaptureOutcome, CaptureError>> {
        self.staging()
            .try_capture_before(call_id, path, None, max_bytes)
    }

    /// Takes the locks a burst of calls that must not wait keeps (see
    /// [`Session::keep_locks_between_calls`]) ahead of the burst, for a caller that knows a
    /// write-tool call is coming (a host whose model has just named one): that call then
    /// finds them held and takes none itself. They are kept as after such a call, released
    /// by [`Session::release_idle_locks`] once idle or by any call that may wait. Never
    /// waits: `false`, having done nothing, when the handle does not keep its locks, another
    /// thread is using it, another handle or process holds a lock, the log was replaced, or
    /// the handle has not written yet.
    pub fn take_locks_ahead(&self) -> bool {
        if !self.keep_locks.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        // Dropped at once: with the handle keeping its locks, the call's locks become the
        // handle's lease, as at the end of a capture.
        self.staging().quick_state(true).is_some()
    }

    /// [`Session::try_capture_before`] naming the anchor of the call's commit, as
    /// [`Session::capture_before_at`].
    pub fn try_capture_before_at(
        &self,
        call_id: &str,
        path: &Path,
        anchor_seq: u64,
        max_bytes: u64,
    ) -> Option<Result<CaptureOutcome, CaptureError>> {
        self.staging()
            .try_capture_before(call_id, path, Some(anchor_seq), max_bytes)
    }
}

/// What a `stat` of a path, made by the same call just before, showed (see
/// [`Staging::capture_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// No such `stat`, or it showed something else than the two below.
    Unknown,
    /// A regular file.
    Regular,
    /// Nothing there (`ENOENT`).
    Absent,
}

/// A capture's path as the caller gave it and as resolved against the workspace (once per
/// capture).
pub(crate) struct Target<'p> {
    input: &'p Path,
    rel: Result<RelPath, SkipReason>,
}

impl<'p> Target<'p> {
    fn of(staging: &Staging<'_>, input: &'p Path) -> Self {
        Target {
            input,
            rel: staging.resolve(input),
        }
    }
}

impl<'s> Staging<'s> {
    pub(crate) fn resolve(&self, input: &Path) -> Result<RelPath, SkipReason> {
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
            self.s
                .roots
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
            RelPathError::BadHex => SkipReason::InvalidPath {
                detail: e.to_string(),
            },
        })
    }

    pub(crate) fn cap(&self) -> u64 {
        self.s.store.inner.max_file_bytes
    }

    /// Reads a path's current state into the store (blob for a regular file).
    /// Returns the before-state, what the store now knows, and whether it was a dedup hit.
    /// `seen`: what a `stat` of the path made by this call just showed (see
    /// [`Staging::capture_in`]).
    pub(crate) fn capture_path(
        &self,
        rel: &RelPath,
        mut seen: Seen,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        // A path in a directory, looked at just before: one open of it beneath the
        // workspace stands for the walk of its parents and its own open (Linux).
        let beneath = cfg!(any(target_os = "linux", target_os = "android"));
        if beneath && seen != Seen::Unknown && !rel.split_last().0.is_empty() {
            match self.s.ws.open_beneath(rel, seen == Seen::Absent)? {
                Beneath::Missing => return Ok((BeforeState::Absent, Known::Absent, false)),
                Beneath::Opened(file, fmeta) => return self.capture_unlooked(file, fmeta, rel),
                // Something there now where nothing was: looked at afresh.
                Beneath::Other if seen == Seen::Absent => seen = Seen::Unknown,
                Beneath::Other => {}
            }
        }
        let mut created = Vec::new();
        match self.s.ws.walk_parent(rel, false, &mut created)? {
            // A parent missing, or a file (a directory replaced by one): nothing can be there.
            Walk::Missing(_) | Walk::Blocked(false) => {
                Ok((BeforeState::Absent, Known::Absent, false))
            }
            Walk::Blocked(true) => Ok((
                BeforeState::Skipped {
                    reason: SkipReason::SymlinkedParent,
                },
                Known::Unknown,
                false,
            )),
            Walk::Parent(dir) => self.capture_in(&dir, rel, seen),
        }
    }

    /// [`Staging::capture_path`] in the walked-to parent `dir`.
    ///
    /// The path is looked at with `lstat` before it is opened, so that only what showed as a
    /// regular file is opened: never a device, a FIFO or a socket. With `regular`
    /// (a `stat` made by this call just showed a regular file), the `lstat` is left out: the
    /// file is opened directly (`O_NOFOLLOW`, `O_NONBLOCK`) and its `fstat` stands for the
    /// `lstat` — the same inode, so the same metadata, and the same outcomes below (skipped,
    /// over the cap, captured). An absent file is absent either way; any other failure of
    /// that open (a symlink put in its place: `ELOOP`, a socket: `ENXIO`, …) takes the full
    /// path from its `lstat`, so each such outcome is the one that path gives. (A file
    /// replaced between the `stat` and the open is the race the `lstat` and the open always
    /// had, over a slightly longer window.) With [`Seen::Absent`] (that `stat` found nothing
    /// there, and the walk to `dir` just found every parent a directory) the path is absent,
    /// with no `lstat` again.
    pub(crate) fn capture_in(
        &self,
        dir: &WsDir<'_>,
        rel: &RelPath,
        seen: Seen,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        let (_, name) = rel.split_last();
        if seen == Seen::Absent {
            return Ok((BeforeState::Absent, Known::Absent, false));
        }
        if seen == Seen::Regular {
            match self.s.ws.open_read(dir, name, rel) {
                Ok(None) => return Ok((BeforeState::Absent, Known::Absent, false)),
                Ok(Some((file, fmeta))) => return self.capture_unlooked(file, fmeta, rel),
                Err(_) => {}
            }
        }
        let Some(meta) = self.s.ws.lstat(dir, name, rel)? else {
            return Ok((BeforeState::Absent, Known::Absent, false));
        };
        if let Some(before) = self.unreadable(&meta) {
            return Ok(not_read(before, meta));
        }
        let opened = match self.s.ws.open_read(dir, name, rel) {
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
        let Some((file, fmeta)) = opened else {
            return Ok((BeforeState::Absent, Known::Absent, false));
        };
        self.capture_opened(file, fmeta, rel)
    }

    /// What a file with metadata `meta` is recorded as without reading it: skipped when it
    /// is not capturable, uncovered when it is over the per-file cap.
    fn unreadable(&self, meta: &DiskMeta) -> Option<BeforeState> {
        if let Some(before) = not_capturable(meta) {
            return Some(before);
        }
        let cap = self.cap();
        (cap != 0 && meta.size > cap).then_some(BeforeState::Uncovered { size: meta.size })
    }

    /// A file opened without an `lstat` first: its `fstat` (`fmeta`) decides whether it
    /// is read (see [`Staging::capture_in`]).
    fn capture_unlooked(
        &self,
        file: cap_std::fs::File,
        fmeta: DiskMeta,
        rel: &RelPath,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        if let Some(before) = self.unreadable(&fmeta) {
            return Ok(not_read(before, fmeta));
        }
        self.capture_opened(file, fmeta, rel)
    }

    /// The end of [`Staging::capture_in`]: the file is open, `fmeta` its `fstat`.
    fn capture_opened(
        &self,
        mut file: cap_std::fs::File,
        fmeta: DiskMeta,
        rel: &RelPath,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        if let Some(before) = not_capturable(&fmeta) {
            return Ok(not_read(before, fmeta));
        }
        if let Some(sha) = self
            .prior
            .and_then(|p| p.content_of(self.s, &fmeta, self.cap()))
        {
            return Ok((
                BeforeState::File {
                    sha256: sha.clone(),
                    size: fmeta.size,
                    mode: fmeta.mode,
                },
                Known::Present {
                    meta: fmeta,
                    sha256: Some(sha),
                    recorded: true,
                },
                true,
            ));
        }
        match store_file(
            &self.s.store.inner.fs,
            &self.s.ws,
            &mut file,
            rel,
            fmeta.size,
            self.cap(),
            self.sink,
        )? {
            Stored::OverCap { size } => Ok(not_read(BeforeState::Uncovered { size }, fmeta)),
            Stored::Blob {
                sha256,
                size,
                dedup,
            }
            | Stored::Kept {
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
        match self.s.ws.walk_parent(rel, false, &mut created)? {
            Walk::Missing(_) | Walk::Blocked(false) => Ok(Known::Absent),
            Walk::Blocked(true) => Ok(Known::Unknown),
            Walk::Parent(dir) => {
                let (_, name) = rel.split_last();
                Ok(match self.s.ws.lstat(&dir, name, rel)? {
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

    pub(crate) fn capture_before(
        &self,
        call_id: &str,
        path: &Path,
        anchor: Option<u64>,
    ) -> Result<CaptureOutcome, CaptureError> {
        encode_id(call_id).map_err(|reason| CaptureError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        self.capture_with(
            &mut self.s.lock_state(),
            call_id,
            Target::of(self, path),
            anchor,
            None,
            Seen::Unknown,
        )
    }

    pub(crate) fn try_capture_before(
        &self,
        call_id: &str,
        path: &Path,
        anchor: Option<u64>,
        max_bytes: u64,
    ) -> Option<Result<CaptureOutcome, CaptureError>> {
        if let Err(reason) = encode_id(call_id) {
            return Some(Err(CaptureError::InvalidCallId {
                id: call_id.into(),
                reason,
            }));
        }
        let target = Target::of(self, path);
        let (mut q, held) = self.quick_state(true)?;
        // What this `stat` showed: a regular file (of at most `max_bytes`), which the capture
        // then opens without an `lstat` first, or nothing there (see [`Staging::capture_in`]).
        // A path whose state at the call's anchor is recorded already is not looked at.
        let mut seen = Seen::Unknown;
        if let Ok(rel) = &target.rel {
            if !matches!(
                self.recorded_anchor(&mut q.st, call_id, rel, anchor),
                Ok(Some(_))
            ) {
                // Relative to the workspace handle: no walk of the cwd's own path.
                let m = rustix::fs::statat(
                    &self.s.ws.root,
                    std::ffi::OsStr::from_bytes(rel.as_bytes()),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                );
                match m {
                    Ok(m) if m.st_mode & 0o170000 == 0o100000 => {
                        let size = u64::try_from(m.st_size).unwrap_or(0);
                        if size > max_bytes && !self.reads_nothing(&q.st, rel, &m) {
                            return None;
                        }
                        seen = Seen::Regular;
                    }
                    Err(rustix::io::Errno::NOENT) => seen = Seen::Absent,
                    _ => {}
                }
            }
        }
        Some(self.capture_with(&mut q.st, call_id, target, anchor, held, seen))
    }

    /// Whether a capture of `rel`, a regular file whose `lstat` is `m`, would read none of its
    /// bytes: a file over the per-file cap (recorded as not backed up), or one the workspace
    /// scan's index stands for (see [`Prior`]). Such a file runs on the calling thread
    /// whatever its size.
    fn reads_nothing(&self, st: &State, rel: &RelPath, m: &rustix::fs::Stat) -> bool {
        let meta = DiskMeta::from_stat(m);
        let cap = self.s.store.max_file_bytes();
        (cap != 0 && meta.size > cap)
            || Prior::of(self.s, rel, st.log_held.then_some(&st.idx.inline), None)
                .content_of(self.s, &meta, cap)
                .is_some()
    }

    /// The state of this handle, the shared store lock (with `store_lock`) and the
    /// log's lock, taken without waiting, with the index brought up to date under the
    /// log's lock; `None` (nothing held) when any would wait, when the log was
    /// replaced, or before the handle's first write (see
    /// [`Session::try_capture_before`]). The log's lock is released when the returned
    /// state is dropped.
    pub(crate) fn quick_state(
        &self,
        store_lock: bool,
    ) -> Option<(Quick<'s>, Option<SharedLock<'s>>)> {
        let mut st = match self.s.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        self.look_after(&mut st);
        if !(st.legacy_checked && st.prepared && st.compact_checked) || st.log.is_none() {
            return None;
        }
        let log_id = st.log.as_ref()?.id;
        let fs = &self.s.store.inner.fs;
        let keep = self.s.keep_locks.load(std::sync::atomic::Ordering::Relaxed);
        let leased_store = st.lease.as_ref().map(|l| l.store);
        // The usual order: the store lock, then the log's. (A lease holding the log's lock
        // without the store's, from a commit, takes the store's now: a shared lock never
        // waits behind the log's.) Taken as a guard that releases it until the call is sure
        // to go on; one the lease holds is left to the lease.
        let mut held = if store_lock {
            let file = self.s.lock_file.get()?;
            if leased_store != Some(true)
                && !matches!(
                    fs.flock(
                        file,
                        Path::new("lock"),
                        FlockOperation::NonBlockingLockShared
                    ),
                    Ok(true)
                )
            {
                return None;
            }
            Some(SharedLock {
                file,
                fs,
                keep: leased_store == Some(true),
            })
        } else {
            None
        };
        // Whether the call owns the store lock (released, or kept as a lease, when it ends:
        // see [`Quick`]), and whether its guard leaves the lock to it.
        let (store, owned) = if let Some(lease) = st.lease.take() {
            // Held since the handle's last call: no other writer appended to the log or
            // replaced it, and the index is current. The call now owns what the lease held.
            (lease.store || held.is_some(), true)
        } else {
            let path = self.s.log_path();
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
                    d.size == h.len + h.torn || self.s.fold_tail(idx, h).is_ok()
                }
                _ => false,
            };
            if !current {
                let _ = fs.flock(&h.file, &path, FlockOperation::Unlock);
                return None;
            }
            (keep && held.is_some(), keep)
        };
        if let Some(g) = held.as_mut() {
            g.keep = owned;
        }
        st.log_held = true;
        Some((
            Quick {
                session: self.s,
                st,
                store,
                log_id,
            },
            held,
        ))
    }

    pub(crate) fn capture_with(
        &self,
        st: &mut State,
        call_id: &str,
        target: Target<'_>,
        anchor: Option<u64>,
        held: Option<SharedLock<'_>>,
        seen: Seen,
    ) -> Result<CaptureOutcome, CaptureError> {
        self.s.prepare(st)?;
        let rel = match target.rel {
            Ok(r) => r,
            Err(reason) => {
                return Ok(CaptureOutcome::Skipped {
                    path: target.input.to_string_lossy().into_owned(),
                    reason,
                });
            }
        };
        let _g = match held {
            Some(g) => g,
            None => self.s.lock_shared()?,
        };
        let staged = st.idx.pending.get(call_id).is_some_and(|p| p.stages(&rel));
        if staged {
            return Ok(CaptureOutcome::AlreadyStaged { path: rel });
        }
        // A call keeps the anchor its first capture named: every staged record of the
        // call names the same one.
        let call_anchor = self.call_anchor(st, call_id, anchor);
        if let Some(at) = self
            .recorded_anchor(st, call_id, &rel, anchor)
            .map_err(|d| self.s.damaged(d))?
        {
            // Nothing to read: a later state at that anchor is never restored. The
            // commit records the path's after-state.
            st.recorded
                .entry(call_id.to_string())
                .or_insert_with(|| (at, Default::default()))
                .1
                .insert(rel.clone());
            return Ok(CaptureOutcome::AlreadyRecorded { path: rel });
        }
        let back_order = self.s.store.next_order();
        let order = self.s.store.next_order();
        // A small file's content is kept in the log, in the write that stages it, rather
        // than in a blob file of its own (see `docs/format.md`, "Blobs kept in the log").
        let sink = self.s.log_sink(st);
        let prior = Prior::of(
            self.s,
            &rel,
            st.log_held.then_some(&st.idx.inline),
            st.scan_seen.as_ref(),
        );
        let read = Staging {
            s: self.s,
            sink: Some(&sink),
            prior: Some(&prior),
        }
        .capture_path(&rel, seen);
        let mut recs = sink.records();
        let (before, now, dedup) = read.map_err(|e| map_read(e, &rel))?;
        // Changed since this turn's workspace scan saw it, and no scan saw the change (an
        // editor, a job, between this turn's calls): the state that scan saw is recorded
        // ahead of this capture, as a scan before the call would have.
        let unseen = call_anchor.zip(prior.unseen(self.s, &rel, &now));
        if let Some((at, (seen_before, index))) = unseen {
            if let Some(e) = self.unseen_change(st, &rel, seen_before, (at, index), back_order) {
                self.s.append_group(
                    st,
                    at,
                    EntrySource::Scan { call_id: None },
                    vec![e],
                    Vec::new(),
                )?;
            }
        }
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
                if let Some(e) = self.s.recheck().backdated_entry(
                    &rel,
                    &known,
                    since,
                    prev,
                    back_order,
                    &st.idx.inline,
                ) {
                    let upd = Record::Tracked {
                        paths: vec![TrackedUpdate {
                            path: rel.clone(),
                            known,
                            since: Some(prev),
                        }],
                    };
                    self.s
                        .append_group(st, prev, EntrySource::Recheck, vec![e], vec![upd])?;
                }
            }
        }
        let entry = Entry {
            path: rel.clone(),
            order,
            before: before.clone(),
        };
        let anchor = call_anchor;
        recs.push(Record::Staged {
            call_id: call_id.to_string(),
            entry,
            anchor,
        });
        self.s.append(st, recs)?;
        if st.idx.pending_at.contains_key(call_id) {
            st.inflight.insert(call_id.to_string());
        }
        self.s.store.inner.fs.io.crash(CrashPoint::CaptureStaged);
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
}

impl Staging<'_> {
    /// The entry recording `before`, the state of `rel` this turn's workspace scan saw before
    /// a change no scan saw ([`Prior::unseen`]), ahead of a capture at anchor `at`: only for a
    /// path this session does not track (the boundary's re-check and the capture below cover
    /// those), when this session's last scan of the workspace was at `at` (the turn's own: a
    /// change before it would be the scan's to note as made outside the agent), and when the
    /// index holding `before` (its `scanned_at`: `index`) is the one this handle's last scan
    /// left, not one another session's scan moved on since (that scan may have seen a change
    /// made after `at`, and its state is not the one at `at`).
    fn unseen_change(
        &self,
        st: &mut State,
        rel: &RelPath,
        before: BeforeState,
        (at, index): (u64, u64),
        order: u64,
    ) -> Option<Entry> {
        if !st.scan_seen.as_ref().is_some_and(|v| v.is((at, index))) {
            return None;
        }
        st.idx.merge_group_paths().ok()?;
        if st.idx.tracked.contains_key(rel) {
            return None;
        }
        let (key, _) = self.s.workspace_index()?;
        let last = self.s.workspace_scan().scan_state().ok()??;
        (last.workspace == key && last.anchor_seq == at).then(|| Entry {
            path: rel.clone(),
            order,
            before,
        })
    }

    /// The anchor a capture of `call_id` names: the one the call's first capture named
    /// (its staged records name it), else `anchor`.
    fn call_anchor(&self, st: &State, call_id: &str, anchor: Option<u64>) -> Option<u64> {
        if st.idx.pending.contains_key(call_id) {
            st.idx.pending_at.get(call_id).copied()
        } else if let Some((at, _)) = st.recorded.get(call_id) {
            Some(*at)
        } else {
            anchor
        }
    }

    /// The anchor of a capture of `rel` by `call_id` when the path's state there is
    /// recorded already (see [`CaptureOutcome::AlreadyRecorded`]): the capture then
    /// reads nothing. Only for a capture that names its anchor (the call's commit is
    /// expected there).
    pub(crate) fn recorded_anchor(
        &self,
        st: &mut State,
        call_id: &str,
        rel: &RelPath,
        anchor: Option<u64>,
    ) -> Result<Option<u64>, String> {
        let Some(at) = self.call_anchor(st, call_id, anchor) else {
            return Ok(None);
        };
        if st
            .recorded
            .get(call_id)
            .is_some_and(|(_, p)| p.contains(rel))
        {
            return Ok(Some(at));
        }
        Ok(st.idx.recorded_at(at, rel)?.then_some(at))
    }
}

/// A before-state recorded without reading the file (skipped, uncovered): the store knows
/// the file's metadata, not its content.
fn not_read(before: BeforeState, meta: DiskMeta) -> (BeforeState, Known, bool) {
    (
        before,
        Known::Present {
            meta,
            sha256: None,
            recorded: true,
        },
        false,
    )
}
