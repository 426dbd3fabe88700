//! One workspace's shared state in the store: `workspaces/<key>/` (the index and a
//! lock file), the per-workspace lock (in-process mutex + `flock` across processes)
//! and the in-memory copy of the index.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cap_std::fs::OpenOptions;
use rustix::fs::FlockOperation;
use sha2::{Digest, Sha256};

use crate::error::{Fault, FsFailure};
use crate::seam::{Area, FsOp};
use crate::store::Store;

use super::delta;
use super::index::{Index, decode, encode};

/// The store directory of workspace indexes.
pub(crate) const WORKSPACES: &str = "workspaces";

/// The key of a workspace: the first 32 hex digits of SHA-256 of its canonical path.
pub fn workspace_key(canonical: &Path) -> String {
    let d = Sha256::digest(canonical.as_os_str().as_bytes());
    hex::encode(&d[..16])
}

/// Identity of the index file the cached copy was read from / written to: inode, size,
/// mtime and the file's last 32 bytes (see `file_id`).
type FileId = (u64, u64, i64, i64, [u8; 32]);

/// The `scanned_at` of the index a scan left, and the directories that scan could not list
/// with the files under them, each with why (see [`Cached::unreadable`]).
pub(crate) type UnreadableSeen = (u64, Vec<(Box<[u8]>, String)>);

/// The delta file (`index.delta`) as the cached copy knows it: its identity (`None`: no
/// file) and the bytes and frames of it that apply to the base (0: the next frame starts
/// a new file).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct DeltaAt {
    id: Option<FileId>,
    len: u64,
    frames: u64,
}

#[derive(Default)]
pub(crate) struct Cached {
    pub index: Option<Index>,
    file: Option<FileId>,
    delta: DeltaAt,
    /// The last scan's directories it could not list and the files the index holds under
    /// them, with why (`diff::unreadable_dirs`), stamped with the `scanned_at` of the index
    /// that scan left: the planner lists them while that index is the one in place. Kept in
    /// memory only (a scan in another process, or after a restart, finds them again).
    pub unreadable: Option<UnreadableSeen>,
    /// The before-states of the calls in flight in this process, kept from other sessions'
    /// scans and from restores (see `super::pin`).
    pub pins: super::pin::Pins,
    /// Counts every index this process put in `index` from disk or saved (see
    /// `super::watch`: a watcher trusts its dirty set only against the index its last scan
    /// left, untouched since).
    pub edits: u64,
    /// The workspace's change watcher while a session handle keeps it (see `super::watch`).
    pub watch: std::sync::Weak<super::watch::Watcher>,
}

type Registry = Mutex<HashMap<(u64, u64, String), Arc<Mutex<Cached>>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A locked workspace: the in-process mutex and the cross-process `flock` are held
/// until this is dropped, or until [`Locked::into_kept`].
pub(crate) struct Locked<'a> {
    pub store: &'a Store,
    pub dir: PathBuf,
    pub cached: MutexGuard<'a, Cached>,
    flock: cap_std::fs::File,
}

impl Locked<'_> {
    /// Releases the locks and returns the lock file, still open, for the next [`lock`] of
    /// the workspace by the same session handle: that one takes the lock with one `flock`
    /// and checks the file is still the directory's with two `stat`s, instead of making
    /// sure of the directory and opening the file again. `None` when the file could not
    /// be unlocked (it is closed then, which releases it).
    pub fn into_kept(self) -> Option<cap_std::fs::File> {
        let Locked { flock, cached, .. } = self;
        let unlocked = rustix::fs::flock(&flock, FlockOperation::Unlock).is_ok();
        drop(cached);
        unlocked.then_some(flock)
    }
}

fn store_identity(store: &Store) -> (u64, u64) {
    rustix::fs::fstat(&store.inner.fs.dir)
        .map(|s| {
            #[allow(clippy::unnecessary_cast)]
            (s.st_dev as u64, s.st_ino as u64)
        })
        .unwrap_or((0, 0))
}

/// The shared slot of workspace `key` of `store` (keep the `Arc` alive while locked).
pub(crate) fn slot(store: &Store, key: &str) -> Arc<Mutex<Cached>> {
    let (dev, ino) = store_identity(store);
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    Arc::clone(r.entry((dev, ino, key.to_string())).or_default())
}

fn fail(op: FsOp, path: &Path, source: std::io::Error) -> FsFailure {
    FsFailure {
        op,
        area: Area::Store,
        path: path.to_string_lossy().into_owned(),
        source,
    }
}

/// Locks workspace `key` (blocking): in-process first, then across processes. `kept`:
/// the lock file a [`Locked::into_kept`] of this workspace returned, tried first.
pub(crate) fn lock<'a>(
    store: &'a Store,
    key: &str,
    slot: &'a Mutex<Cached>,
    kept: Option<cap_std::fs::File>,
) -> Result<Locked<'a>, Fault> {
    let cached = slot.lock().unwrap_or_else(|p| p.into_inner());
    let fs = &store.inner.fs;
    let dir = Path::new(WORKSPACES).join(key);
    let lpath = dir.join("lock");
    // The blob sweep removes the directory of a workspace no session uses any more (see
    // [`drop_unused`]) under this lock, taken on a descriptor of its own: a lock taken on a
    // file that is no longer the directory's (a kept one, or one opened before the sweep
    // removed it) is taken again, on the directory made anew.
    let mut held = match kept {
        Some(file) => {
            fs.io.check(FsOp::Lock, Area::Store, &lpath)?;
            lock_in_place(store, file, &lpath)?
        }
        None => None,
    };
    let mut tries = 0;
    let file = loop {
        if let Some(file) = held.take() {
            break file;
        }
        if tries == 3 {
            let why = "the workspace's directory was removed three times while locking it";
            return Err(fail(FsOp::Lock, &lpath, std::io::Error::other(why)).into());
        }
        tries += 1;
        fs.create_dir_all(&dir)?;
        fs.io.check(FsOp::Lock, Area::Store, &lpath)?;
        let file = open_lock(store, &lpath, true)?
            .ok_or_else(|| fail(FsOp::Lock, &lpath, std::io::ErrorKind::NotFound.into()))?;
        held = lock_in_place(store, file, &lpath)?;
    };
    Ok(Locked {
        store,
        dir,
        cached,
        flock: file,
    })
}

/// Takes the lock on `file` (waiting for it): the file, locked, when it is still the one
/// at `lpath`; `None` (the file closed, which releases it) when the sweep removed it.
fn lock_in_place(
    store: &Store,
    file: cap_std::fs::File,
    lpath: &Path,
) -> Result<Option<cap_std::fs::File>, FsFailure> {
    rustix::fs::flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| fail(FsOp::Lock, lpath, e.into()))?;
    Ok(still_in_place(store, &file, lpath)?.then_some(file))
}

/// Opens (with `create`: creating) the lock file `lpath`; `None` when it (or its
/// directory) does not exist and `create` is not set.
fn open_lock(
    store: &Store,
    lpath: &Path,
    create: bool,
) -> Result<Option<cap_std::fs::File>, FsFailure> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(create);
    match store.inner.fs.dir.open_with(lpath, &o) {
        Ok(f) => Ok(Some(f)),
        Err(e) if !create && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail(FsOp::Lock, lpath, e)),
    }
}

/// Whether `lpath` still names the open lock file `file`.
fn still_in_place(
    store: &Store,
    file: &cap_std::fs::File,
    lpath: &Path,
) -> Result<bool, FsFailure> {
    let fs = &store.inner.fs;
    let held = fs.fstat_id(file, lpath)?;
    Ok(fs.stat_id(lpath)?.is_some_and(|now| now.same_file(&held)))
}

/// How long a workspace's directory must have gone unwritten before the blob sweep may
/// remove it, once no session names it (see `Store::collect_garbage`). A scan writes the
/// index and its session's `scan.json` under the workspace's lock, which the sweep takes
/// too; the hour is a margin on top of it, for a workspace just used.
pub const UNUSED_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the directory of every workspace (`workspaces/<key>/`: its index, the
/// baseline's references) that no session of the store names (`named`: the keys the
/// sessions' `scan.json` name; `None` when one of them could not be read, and then
/// nothing is removed), whose files were last written over [`UNUSED_GRACE`] ago, that
/// no scan is using (its lock is free) and whose index this build can read (a newer
/// one stays). Each goes in one rename to `trash/`, under its lock. Called by the blob
/// sweep under the exclusive store lock, before it marks what indexes reference: the
/// baseline's blobs no session references go with it. The next scan of that workspace
/// stores a new baseline. Returns how many were removed.
pub(crate) fn drop_unused(
    store: &Store,
    named: Option<&std::collections::HashSet<String>>,
    now: std::time::SystemTime,
) -> Result<usize, Fault> {
    let Some(named) = named else {
        return Ok(0);
    };
    let fs = &store.inner.fs;
    let mut removed = 0;
    for name in fs.list(Path::new(WORKSPACES))? {
        let Some(key) = name.to_str() else { continue };
        if crate::path::is_hidden(&name)
            || key.len() != 32
            || !key
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            || named.contains(key)
        {
            continue;
        }
        let dir = Path::new(WORKSPACES).join(key);
        let lpath = dir.join("lock");
        let lock = open_lock(store, &lpath, false)?;
        if let Some(f) = &lock {
            if !fs.flock(f, &lpath, FlockOperation::NonBlockingLockExclusive)? {
                continue;
            }
        }
        if !idle_since(store, &dir, now)? {
            continue;
        }
        // A newer build's index is left alone; a damaged one goes with its directory. Only
        // the file's head tells them apart: the rest is not read.
        match read_head(store, &name) {
            Err(Fault::Newer(_)) => continue,
            Err(Fault::Corrupt(_)) | Ok(()) => {}
            Err(e) => return Err(e),
        }
        // One rename out of `workspaces/` (a crash leaves it in `trash/`, emptied when the
        // store opens), with the lock still held.
        if store.remove_tree(&dir)? {
            removed += 1;
        }
        drop(lock);
    }
    Ok(removed)
}

/// Makes every workspace index name only content something still holds, for the blob
/// sweep, under the exclusive store lock (after [`drop_unused`], before the sweep marks what
/// indexes reference). An entry the index names as kept in its keeper session's log
/// ([`Coverage::Kept`](super::index::Coverage::Kept)) whose content that log no longer keeps
/// (`keeps(keeper, sha)` false: the session was removed, or its log no longer has it) is
/// named by the blob file holding the content when there is one (which the sweep then
/// keeps), else marked to be read again from the workspace by the next scan
/// ([`Coverage::Pending`](super::index::Coverage::Pending)), as that scan's take-over would
/// do. An index a scan is using (its lock taken), or that cannot be read, is left as it is.
/// Returns how many indexes were rewritten.
pub(crate) fn settle_kept(
    store: &Store,
    keeps: &dyn Fn(&str, &str) -> bool,
) -> Result<usize, Fault> {
    use super::index::Coverage;
    let fs = &store.inner.fs;
    let mut rewritten = 0;
    for name in fs.list(Path::new(WORKSPACES))? {
        let Some(key) = name.to_str() else { continue };
        if crate::path::is_hidden(&name) {
            continue;
        }
        let slot = slot(store, key);
        let mut cached = slot.lock().unwrap_or_else(|p| p.into_inner());
        let dir = Path::new(WORKSPACES).join(key);
        let lpath = dir.join("lock");
        let lock = open_lock(store, &lpath, false)?;
        if let Some(f) = &lock {
            if !fs.flock(f, &lpath, FlockOperation::NonBlockingLockExclusive)? {
                continue;
            }
        }
        let mut ix = match read_index(store, &name) {
            Ok(Some(ix)) => ix,
            Ok(None) | Err(Fault::Corrupt(_)) | Err(Fault::Newer(_)) => continue,
            Err(e) => return Err(e),
        };
        let keeper = ix.keeper.clone().unwrap_or_default();
        let mut changed = false;
        for (stat, cov) in ix.coverages_mut() {
            let Coverage::Kept(sha) = *cov else {
                continue;
            };
            let hex_name = hex::encode(sha);
            if keeps(&keeper, &hex_name) {
                continue;
            }
            *cov = if fs.blob_size(&hex_name)? == Some(stat.size) {
                Coverage::Hashed(sha)
            } else {
                Coverage::Pending
            };
            changed = true;
        }
        if changed {
            fs.write_replacing(&index_path_of(&name), &encode(&ix))?;
            // The delta named the base just replaced: ignored from now on, removed.
            fs.remove_file(&delta_path_of(&name))?;
            // A process's copy is told changed by the file's identity; this one's is dropped.
            cached.index = None;
            cached.file = None;
            cached.delta = DeltaAt::default();
            rewritten += 1;
        }
        drop(lock);
    }
    Ok(rewritten)
}

/// Whether every file of workspace directory `dir` was last written over [`UNUSED_GRACE`]
/// before `now` (a scan writes its index over a spare and swaps the two; a new baseline
/// creates them); a time in the future counts as recent.
fn idle_since(store: &Store, dir: &Path, now: std::time::SystemTime) -> Result<bool, FsFailure> {
    let cutoff = now
        .checked_sub(UNUSED_GRACE)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    Ok(dir_files(store, dir)?.1 <= cutoff)
}

/// The bytes of the files of workspace directory `dir` and their newest modification time,
/// in nanoseconds since the Unix epoch (0 when it has none): what the inventory reports of
/// the workspace, and what the blob sweep's grace is counted from.
pub(crate) fn dir_files(store: &Store, dir: &Path) -> Result<(u64, i128), FsFailure> {
    let fs = &store.inner.fs;
    let (mut bytes, mut newest) = (0, 0);
    for name in fs.list(dir)? {
        if let Some(id) = fs.stat_id(&dir.join(&name))? {
            bytes += id.size;
            newest = newest.max(i128::from(id.mtime.0) * 1_000_000_000 + i128::from(id.mtime.1));
        }
    }
    Ok((bytes, newest))
}

fn file_id(store: &Store, path: &Path) -> Result<Option<FileId>, FsFailure> {
    use cap_std::fs::MetadataExt;
    use std::os::unix::fs::FileExt;
    let f = match store.inner.fs.dir.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(FsOp::Stat, path, e)),
    };
    let m = f.metadata().map_err(|e| fail(FsOp::Stat, path, e))?;
    // The file's last 32 bytes: the checksum of all the others in a whole index. The file is
    // written over a spare and swapped (`StoreFs::write_replacing`), so the same inode comes
    // back every other write, possibly with the same size and mtime (a coarse clock): what
    // tells two contents apart is the content.
    let mut tail = [0u8; 32];
    if let Some(at) = m.size().checked_sub(32) {
        let f = f.into_std();
        let mut got = 0;
        while got < tail.len() {
            match f.read_at(&mut tail[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(FsOp::Read, path, e)),
            }
        }
    }
    Ok(Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec(), tail)))
}

/// Whether the delta `cached` knows is past [`delta::fold_at`] of its base.
pub(crate) fn fold_due_of(cached: &Cached) -> bool {
    cached
        .file
        .is_some_and(|base| cached.delta.len > delta::fold_at(base.1))
}

/// What loading found.
pub(crate) enum Loaded {
    /// No index yet: this scan is the baseline.
    Missing,
    /// An index (possibly with an incomplete baseline).
    Present,
    /// The file was torn or corrupt: dropped, rebuilt by this scan.
    Rebuilt(String),
}

impl Locked<'_> {
    pub fn index_path(&self) -> PathBuf {
        self.dir.join("index.bin")
    }

    /// The path of the index's delta file.
    pub fn delta_path(&self) -> PathBuf {
        self.dir.join(delta::FILE_NAME)
    }

    /// Makes `cached.index` the index on disk, its base file with the valid frames of its
    /// delta applied (re-read only when either file changed).
    pub fn load(&mut self) -> Result<Loaded, Fault> {
        let path = self.index_path();
        let dpath = self.delta_path();
        let id = file_id(self.store, &path)?;
        let did = file_id(self.store, &dpath)?;
        if id.is_some()
            && id == self.cached.file
            && did == self.cached.delta.id
            && self.cached.index.is_some()
        {
            return Ok(Loaded::Present);
        }
        self.cached.index = None;
        self.cached.file = None;
        self.cached.delta = DeltaAt::default();
        let Some(bytes) = self.store.inner.fs.read_opt(&path)? else {
            return Ok(Loaded::Missing);
        };
        match decode(&path, &bytes).and_then(|ix| with_delta(self.store, &dpath, &bytes, ix)) {
            Ok((ix, applied)) => {
                self.cached.index = Some(ix);
                self.cached.file = id;
                self.cached.delta = DeltaAt {
                    id: did,
                    len: applied.len,
                    frames: applied.frames,
                };
                self.cached.edits += 1;
                Ok(Loaded::Present)
            }
            Err(Fault::Corrupt(c)) => Ok(Loaded::Rebuilt(c.detail)),
            Err(e) => Err(e),
        }
    }

    /// Saves `ix` and keeps it as the cached copy. An index read from the base on disk (the
    /// one the cached copy knows) with some entries changed appends one frame with them to
    /// the delta file, `fsync`ed as the whole index is, while the delta stays under
    /// [`delta::fold_cap`] of the base (past [`delta::fold_at`] it is due to be folded, by
    /// [`Locked::fold`], off the scan's path); otherwise the whole index is written
    /// atomically (over the spare kept beside the file, see
    /// [`StoreFs::write_replacing`](crate::fsio::StoreFs::write_replacing)) and the delta,
    /// which named the old base, is removed.
    pub fn save(&mut self, mut ix: Index) -> Result<(), Fault> {
        let touched = ix.take_touched();
        if let (Some(t), Some(base)) = (touched, self.cached.file) {
            let mut paths: Vec<Box<[u8]>> = t.paths.into_iter().collect();
            paths.sort_unstable();
            let frame = delta::frame(self.cached.delta.frames + 1, &ix, &paths);
            let at = self.cached.delta.len;
            let end = at.max(delta::HEAD as u64) + frame.len() as u64;
            if end <= delta::fold_cap(base.1) {
                return self.append_frame(ix, base.4, frame);
            }
        }
        self.write_whole(ix)
    }

    /// Whether the delta the cached copy knows is past [`delta::fold_at`] of its base: due
    /// to be folded by [`Locked::fold`].
    pub fn fold_due(&self) -> bool {
        fold_due_of(&self.cached)
    }

    /// Folds the delta into a whole index when it is due ([`Locked::fold_due`], after making
    /// the cached copy the index on disk): the new base is written atomically first, then
    /// the delta removed. A crash between leaves the new base, which holds every change,
    /// beside a delta that names the old base's checksum and so is ignored (and removed by
    /// the next save that writes a whole index, or replaced by the next frame's new file).
    /// Returns whether it folded.
    pub fn fold(&mut self) -> Result<bool, Fault> {
        if !matches!(self.load()?, Loaded::Present) || !self.fold_due() {
            return Ok(false);
        }
        let Some(ix) = self.cached.index.take() else {
            return Ok(false);
        };
        // The same index, written anew: not an edit (the change watcher's next scan still
        // trusts what it reported since the last scan, see `super::watch`).
        let edits = self.cached.edits;
        self.write_whole(ix)?;
        self.cached.edits = edits;
        Ok(true)
    }

    /// Writes `ix` as the whole index (the new base), then removes the delta, which named
    /// the base just replaced; keeps `ix` as the cached copy.
    fn write_whole(&mut self, mut ix: Index) -> Result<(), Fault> {
        let path = self.index_path();
        let bytes = encode(&ix);
        let written = self.store.inner.fs.write_replacing(&path, &bytes)?;
        if self.cached.delta.len > 0 {
            self.store
                .inner
                .fs
                .io
                .crash(crate::seam::CrashPoint::IndexFoldWritten);
        }
        // The delta named the base just replaced: ignored from now on, removed.
        self.store.inner.fs.remove_file(&self.delta_path())?;
        self.cached.delta = DeltaAt::default();
        ix.mark_on_disk();
        // What `file_id` would read back from the file just written (no other writer can
        // replace it while the workspace's lock is held).
        let mut tail = [0u8; 32];
        if let Some(at) = bytes.len().checked_sub(32) {
            tail.copy_from_slice(&bytes[at..]);
        }
        let (secs, nanos) = written.mtime;
        self.cached.file = Some((written.ino, written.size, secs, nanos, tail));
        self.cached.index = Some(ix);
        self.cached.edits += 1;
        Ok(())
    }

    /// Writes `frame` at the end of the delta's valid frames (cutting off what a torn
    /// append left after them), or as the first frame of a new delta file for the base
    /// whose checksum is `base_sum`; `fsync`s it (and, for a new file, its directory) in
    /// durable mode; keeps `ix` as the cached copy.
    fn append_frame(
        &mut self,
        mut ix: Index,
        base_sum: [u8; 32],
        frame: Vec<u8>,
    ) -> Result<(), Fault> {
        use std::os::unix::fs::FileExt;
        let fs = &self.store.inner.fs;
        let dpath = self.delta_path();
        let at = self.cached.delta.len;
        let mut bytes = if at == 0 {
            delta::head(&base_sum)
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(&frame);
        fs.io.check(FsOp::Open, Area::Store, &dpath)?;
        let mut o = OpenOptions::new();
        o.write(true).create(true);
        let f = fs
            .dir
            .open_with(&dpath, &o)
            .map_err(|e| fail(FsOp::Open, &dpath, e))?
            .into_std();
        fs.io.check(FsOp::Write, Area::Store, &dpath)?;
        let end = at + bytes.len() as u64;
        f.write_all_at(&bytes, at)
            .and_then(|()| f.set_len(end))
            .map_err(|e| fail(FsOp::Write, &dpath, e))?;
        let f = cap_std::fs::File::from_std(f);
        fs.sync_file(&f, &dpath)?;
        drop(f);
        if at == 0 {
            fs.sync_dir(&self.dir)?;
        }
        fs.io.crash(crate::seam::CrashPoint::IndexDeltaAppended);
        self.cached.delta = DeltaAt {
            id: file_id(self.store, &dpath)?,
            len: end,
            frames: self.cached.delta.frames + 1,
        };
        ix.mark_on_disk();
        self.cached.index = Some(ix);
        self.cached.edits += 1;
        Ok(())
    }
}

/// `ix`, the base index read from `base` (its file's bytes), with the valid frames of the
/// delta file `dpath` applied, and what applying them found.
fn with_delta(
    store: &Store,
    dpath: &Path,
    base: &[u8],
    mut ix: Index,
) -> Result<(Index, delta::Applied), Fault> {
    let Some(dbytes) = store.inner.fs.read_opt(dpath)? else {
        return Ok((ix, delta::Applied::default()));
    };
    let sum: [u8; 32] = base[base.len().saturating_sub(32)..]
        .try_into()
        .unwrap_or([0; 32]);
    let applied = delta::apply(dpath, &dbytes, &sum, &mut ix)?;
    Ok((ix, applied))
}

/// Reads the index of workspace directory `name` for the blob sweep: `Ok(None)` when
/// missing or corrupt (a corrupt index is rebuilt, and re-stores what it needs),
/// `Err` when newer than this build (the sweep then removes nothing).
pub(crate) fn read_for_gc(store: &Store, name: &std::ffi::OsStr) -> Result<Option<Index>, Fault> {
    match read_index(store, name) {
        Err(Fault::Corrupt(_)) => Ok(None),
        r => r,
    }
}

/// The store-relative path of workspace directory `name`'s index.
pub(crate) fn index_path_of(name: &std::ffi::OsStr) -> PathBuf {
    Path::new(WORKSPACES).join(name).join("index.bin")
}

/// The store-relative path of workspace directory `name`'s index delta.
pub(crate) fn delta_path_of(name: &std::ffi::OsStr) -> PathBuf {
    Path::new(WORKSPACES).join(name).join(delta::FILE_NAME)
}

/// Reads the head of the index of workspace directory `name` and checks it
/// ([`super::index::check_head`]): `Ok(())` also when it has none.
fn read_head(store: &Store, name: &std::ffi::OsStr) -> Result<(), Fault> {
    let path = index_path_of(name);
    let Some(head) = first_bytes(store, &path)? else {
        return Ok(());
    };
    super::index::check_head(&path, &head)?;
    // A delta a newer build wrote leaves the workspace alone too.
    let dpath = delta_path_of(name);
    let Some(head) = first_bytes(store, &dpath)? else {
        return Ok(());
    };
    delta::check_head(&dpath, &head).map(|_| ())
}

/// The first [`super::index::HEAD`] bytes of the store file `path` (fewer when it is
/// shorter); `None` when there is no such file.
fn first_bytes(store: &Store, path: &Path) -> Result<Option<Vec<u8>>, Fault> {
    let fs = &store.inner.fs;
    let Some(mut f) = fs.open_read(path)? else {
        return Ok(None);
    };
    let mut head = [0u8; super::index::HEAD];
    let mut got = 0;
    while got < head.len() {
        match fs.read_chunk(&mut f, path, &mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(Some(head[..got].to_vec()))
}

/// Reads and parses the index of workspace directory `name`, its base with its delta's
/// valid frames applied: `Ok(None)` when it has none; `Err(Corrupt)`, `Err(Newer)` (of
/// either file) or an I/O error as they are.
pub(crate) fn read_index(store: &Store, name: &std::ffi::OsStr) -> Result<Option<Index>, Fault> {
    let path = index_path_of(name);
    match store.inner.fs.read_opt(&path)? {
        Some(bytes) => {
            let ix = decode(&path, &bytes)?;
            with_delta(store, &delta_path_of(name), &bytes, ix).map(|(ix, _)| Some(ix))
        }
        None => Ok(None),
    }
}

/// What the last scan of workspace `key` in this process could not list
/// ([`Cached::unreadable`]), with the `scanned_at` of the index it left.
pub(crate) fn unreadable_seen(store: &Store, key: &str) -> Option<UnreadableSeen> {
    let slot = slot(store, key);
    let cached = slot.lock().unwrap_or_else(|p| p.into_inner());
    cached.unreadable.clone()
}

/// Runs `f` on workspace `key`'s index as it is on disk now (cached copy when
/// current); `None` when the workspace has no usable index. Takes the in-process
/// lock only: the index file is replaced atomically, so a read sees a whole one.
pub(crate) fn peek<R>(
    store: &Store,
    key: &str,
    f: impl FnOnce(&Index) -> R,
) -> Result<Option<R>, Fault> {
    let slot = slot(store, key);
    let mut cached = slot.lock().unwrap_or_else(|p| p.into_inner());
    let path = Path::new(WORKSPACES).join(key).join("index.bin");
    let dpath = Path::new(WORKSPACES).join(key).join(delta::FILE_NAME);
    let ids = |store: &Store| -> Result<_, FsFailure> {
        Ok((file_id(store, &path)?, file_id(store, &dpath)?))
    };
    // A read that met a write (the file it opened was the spare of a later write, rewritten
    // meanwhile) fails its checksum, and the file's identity has moved on: read again.
    let mut attempts = 3;
    loop {
        attempts -= 1;
        let id = ids(store)?;
        if id.0.is_none() {
            return Ok(None);
        }
        if id.0 == cached.file && id.1 == cached.delta.id && cached.index.is_some() {
            break;
        }
        let Some(bytes) = store.inner.fs.read_opt(&path)? else {
            return Ok(None);
        };
        let decoded = decode(&path, &bytes).and_then(|ix| with_delta(store, &dpath, &bytes, ix));
        let still = ids(store)? == id;
        match decoded {
            // Cached only when neither file changed while they were read.
            Ok((ix, applied)) if still => {
                cached.index = Some(ix);
                cached.file = id.0;
                cached.delta = DeltaAt {
                    id: id.1,
                    len: applied.len,
                    frames: applied.frames,
                };
                cached.edits += 1;
                break;
            }
            Ok((ix, _)) => return Ok(Some(f(&ix))),
            Err(Fault::Corrupt(_)) if !still && attempts > 0 => {}
            Err(Fault::Corrupt(_)) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(cached.index.as_ref().map(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreOptions;

    fn store(tmp: &tempfile::TempDir) -> Store {
        Store::open(&tmp.path().join("store"), StoreOptions::default()).expect("store")
    }

    #[test]
    fn a_saved_index_is_known_as_the_file_on_disk_without_reading_it_back() {
        // The identity `save` keeps is the one `file_id` reads from the file: the next scan
        // finds its cached copy current (an identity that differed would make every scan
        // read and decode the whole index again).
        let tmp = tempfile::tempdir().expect("tmp");
        let store = store(&tmp);
        let slot = slot(&store, "0123456789abcdef0123456789abcdef");
        for round in 0..3u64 {
            let mut locked =
                lock(&store, "0123456789abcdef0123456789abcdef", &slot, None).expect("lock");
            let mut ix = Index::default();
            ix.scanned_at = round;
            locked.save(ix).expect("save");
            let path = locked.index_path();
            assert_eq!(
                locked.cached.file,
                file_id(&store, &path).expect("file id"),
                "round {round}: the first write creates the file, the later ones swap it with its spare"
            );
            assert!(matches!(locked.load().expect("load"), Loaded::Present));
        }
    }

    #[test]
    fn a_frame_appended_is_known_as_the_delta_on_disk_and_a_fold_removes_the_delta() {
        use super::super::index::{Coverage, IdxEntry, Stat};
        let tmp = tempfile::tempdir().expect("tmp");
        let store = store(&tmp);
        let key = "00112233445566778899aabbccddeeff";
        let slot = slot(&store, key);
        let mut locked = lock(&store, key, &slot, None).expect("lock");
        let entry = |size: u64| IdxEntry {
            stat: Stat {
                mode: 0o100644,
                nlink: 1,
                size,
                mtime_s: 1,
                mtime_ns: 2,
                ctime_s: 3,
                ctime_ns: 4,
                ino: 5 + size,
                dev: 6,
            },
            cov: Coverage::Pending,
        };
        let mut ix = Index::default();
        ix.insert(b"a".to_vec().into(), entry(1));
        // Made in memory: written whole.
        locked.save(ix).expect("save");
        let base = std::fs::read(tmp.path().join("store").join(locked.index_path())).expect("base");
        let dpath = locked.delta_path();
        assert!(file_id(&store, &dpath).expect("id").is_none());
        for round in 0..3u64 {
            let mut ix = locked.cached.index.take().expect("cached");
            ix.insert(format!("f{round}").into_bytes().into(), entry(10 + round));
            let edits = locked.cached.edits;
            locked.save(ix).expect("save");
            // A frame: the base as it was, the delta's identity known without reading it.
            assert_eq!(
                std::fs::read(tmp.path().join("store").join(locked.index_path())).expect("base"),
                base
            );
            assert_eq!(locked.cached.delta.id, file_id(&store, &dpath).expect("id"));
            assert_eq!(locked.cached.delta.frames, round + 1);
            assert!(matches!(locked.load().expect("load"), Loaded::Present));
            assert_eq!(
                locked.cached.edits,
                edits + 1,
                "round {round}: not read again"
            );
        }
        // Read back by a load that has no copy: the same entries.
        let want = locked
            .cached
            .index
            .as_ref()
            .expect("cached")
            .entries()
            .clone();
        locked.cached.index = None;
        assert!(matches!(locked.load().expect("load"), Loaded::Present));
        assert_eq!(locked.cached.index.as_ref().expect("read").entries(), &want);
        assert_eq!(locked.cached.delta.frames, 3);
        // A change past the delta's bound but under its cap is appended: the fold is left
        // due, for `fold` (off the scan's path).
        let mut ix = locked.cached.index.take().expect("cached");
        for i in 0..4_000u64 {
            ix.insert(format!("mid/{i:0>40}").into_bytes().into(), entry(50 + i));
        }
        locked.save(ix).expect("append past the bound");
        let base_len = base.len() as u64;
        assert!(
            locked.cached.delta.len > delta::fold_at(base_len),
            "{}",
            locked.cached.delta.len
        );
        assert!(locked.cached.delta.len <= delta::fold_cap(base_len));
        assert_eq!(
            std::fs::read(tmp.path().join("store").join(locked.index_path())).expect("base"),
            base,
            "not folded inline"
        );
        assert!(locked.fold_due());
        let want = locked
            .cached
            .index
            .as_ref()
            .expect("cached")
            .entries()
            .clone();
        let edits = locked.cached.edits;
        assert!(locked.fold().expect("fold"), "folded");
        assert_eq!(locked.cached.edits, edits, "a fold is no edit of the index");
        assert!(!locked.fold_due());
        assert!(
            file_id(&store, &dpath).expect("id").is_none(),
            "delta removed"
        );
        assert_ne!(
            std::fs::read(tmp.path().join("store").join(locked.index_path())).expect("base"),
            base,
            "a new base"
        );
        assert!(!locked.fold().expect("nothing due"));
        locked.cached.index = None;
        assert!(matches!(locked.load().expect("load"), Loaded::Present));
        assert_eq!(locked.cached.index.as_ref().expect("read").entries(), &want);
        // A change past the delta's cap folds it at once: the base written whole, the delta
        // gone.
        let mut ix = locked.cached.index.take().expect("cached");
        for i in 0..30_000u64 {
            ix.insert(format!("bulk/{i:0>40}").into_bytes().into(), entry(100 + i));
        }
        // The new base (4,004 entries) has a small delta bound: 30,000 more pass its cap.
        let frame_base = locked.cached.file.expect("base").1;
        assert!(delta::fold_cap(frame_base) < 30_000 * 20);
        locked.save(ix).expect("fold");
        assert!(file_id(&store, &dpath).expect("id").is_none());
        assert_eq!(locked.cached.delta, DeltaAt::default());
        locked.cached.index = None;
        assert!(matches!(locked.load().expect("load"), Loaded::Present));
        assert_eq!(
            locked.cached.index.as_ref().expect("read").entries().len(),
            34_004
        );
    }

    #[test]
    fn a_kept_lock_file_is_unlocked_between_scans_and_not_used_once_removed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = store(&tmp);
        let key = "fedcba9876543210fedcba9876543210";
        let slot = slot(&store, key);
        let lpath = tmp
            .path()
            .join("store")
            .join(WORKSPACES)
            .join(key)
            .join("lock");
        // Whether another process could take the lock now (a descriptor of its own).
        let free = || {
            let f = std::fs::File::options()
                .read(true)
                .write(true)
                .open(&lpath)
                .expect("another descriptor of the lock file");
            rustix::fs::flock(&f, FlockOperation::NonBlockingLockExclusive).is_ok()
        };
        let held = lock(&store, key, &slot, None).expect("lock");
        assert!(!free(), "held while the scan runs");
        let kept = held.into_kept().expect("the file kept");
        assert!(
            free(),
            "released when the scan ends, though the file stays open"
        );
        let held = lock(&store, key, &slot, Some(kept)).expect("lock on the kept file");
        assert!(!free(), "held again");
        let kept = held.into_kept().expect("kept again");
        let kept_id = rustix::fs::fstat(&kept).expect("fstat").st_ino;
        // The sweep removes the directory: the next lock is taken on a file made anew, not
        // on the removed one that was kept.
        let dir = lpath.parent().expect("dir").to_path_buf();
        std::fs::rename(&dir, tmp.path().join("removed")).expect("remove");
        let held = lock(&store, key, &slot, Some(kept)).expect("lock after the removal");
        assert!(lpath.is_file(), "the directory and its lock file made anew");
        assert!(!free(), "the lock is held on the new file");
        let kept = held.into_kept().expect("kept");
        assert_ne!(rustix::fs::fstat(&kept).expect("fstat").st_ino, kept_id);
        assert!(free());
    }
}
