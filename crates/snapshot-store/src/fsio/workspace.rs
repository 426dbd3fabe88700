//! Workspace calls: one component at a time from the session cwd handle, with
//! `O_NOFOLLOW`, so a symlink anywhere in a path is seen and refused, never followed
//! (on Linux a parent directory is first opened in one call that the kernel refuses in
//! the same cases, see [`WsFs::open_parent_beneath`]).

use super::*;

/// A directory handle inside the workspace: the root or a walked-to child.
pub(crate) enum WsDir<'a> {
    Root(&'a Dir),
    Owned(Dir),
}

impl WsDir<'_> {
    /// The directory's handle, borrowed or owned.
    fn dir(&self) -> &Dir {
        match self {
            WsDir::Root(d) => d,
            WsDir::Owned(d) => d,
        }
    }
}

impl AsFd for WsDir<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.dir().as_fd()
    }
}

/// What [`WsFs::open_beneath`] found.
pub(crate) enum Beneath {
    /// The file, opened for reading, and its `fstat`.
    Opened(File, DiskMeta),
    /// Not there (nor, maybe, a parent directory).
    Missing,
    /// Anything else: something there when only looked for, a symlink on the way, a
    /// component not a directory, no `openat2`. The walk one component at a time tells.
    Other,
}

/// Result of walking to a path's parent directory.
pub(crate) enum Walk<'a> {
    /// The parent directory, opened without following symlinks.
    Parent(WsDir<'a>),
    /// Component `index` (0-based) of the parent chain does not exist.
    Missing(usize),
    /// The parent chain hits a symlink (`true`) or another non-directory (`false`).
    Blocked(bool),
}

pub(super) fn errno_is(e: &io::Error, code: rustix::io::Errno) -> bool {
    e.raw_os_error() == Some(code.raw_os_error())
}

/// Workspace access relative to the session cwd handle.
pub(crate) struct WsFs {
    pub root: Dir,
    pub io: Io,
}

impl WsFs {
    fn check(&self, op: FsOp, rel: &RelPath) -> Result<(), FsFailure> {
        self.io.check(op, Area::Workspace, rel.as_path())
    }

    /// Walks the parent components of `rel` without following symlinks.
    /// With `create`, missing directories are created (their paths are pushed to `created`).
    pub fn walk_parent(
        &self,
        rel: &RelPath,
        create: bool,
        created: &mut Vec<RelPath>,
    ) -> Result<Walk<'_>, FsFailure> {
        let (parents, _) = rel.split_last();
        if parents.len() >= 2 {
            if let Some(dir) = self.open_parent_beneath(rel)? {
                return Ok(Walk::Parent(WsDir::Owned(dir)));
            }
        }
        let mut cur = WsDir::Root(&self.root);
        for (i, comp) in parents.iter().enumerate() {
            let name = OsStr::from_bytes(comp);
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            self.check(FsOp::Open, rel)?;
            let opened: io::Result<OwnedFd> =
                rustix::fs::openat(&cur, name, flags, Mode::empty()).map_err(Into::into);
            match opened {
                Ok(fd) => cur = WsDir::Owned(Dir::from(fd)),
                Err(e) if errno_is(&e, rustix::io::Errno::NOENT) => {
                    if !create {
                        return Ok(Walk::Missing(i));
                    }
                    self.check(FsOp::CreateDir, rel)?;
                    match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) => {
                            if let Some(p) = rel.prefix(i + 1) {
                                created.push(p);
                            }
                        }
                        Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(rfail(FsOp::CreateDir, rel, e.into())),
                    }
                    self.check(FsOp::Open, rel)?;
                    let fd = rustix::fs::openat(&cur, name, flags, Mode::empty())
                        .map_err(|e| rfail(FsOp::Open, rel, e.into()))?;
                    cur = WsDir::Owned(Dir::from(fd));
                }
                Err(e)
                    if errno_is(&e, rustix::io::Errno::LOOP)
                        || errno_is(&e, rustix::io::Errno::NOTDIR) =>
                {
                    let meta = self.lstat(&cur, comp, rel)?;
                    let is_link = matches!(meta, Some(m) if m.kind == FileKind::Symlink);
                    return Ok(Walk::Blocked(is_link));
                }
                Err(e) => return Err(rfail(FsOp::Open, rel, e)),
            }
        }
        Ok(Walk::Parent(cur))
    }

    /// The parent directory of `rel` opened in one call that the kernel refuses when any
    /// component is a symlink or leads out of the workspace (`openat2` with
    /// `RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH`, Linux 5.6 and later): what the walk one
    /// component at a time finds, with one open instead of one per component. `None` when
    /// that call fails in any way (a component missing, a symlink, not a directory, a kernel
    /// without `openat2`): the walk then gives each such outcome its meaning.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn open_parent_beneath(&self, rel: &RelPath) -> Result<Option<Dir>, FsFailure> {
        let bytes = rel.as_bytes();
        let Some(end) = bytes.iter().rposition(|&b| b == b'/') else {
            return Ok(None);
        };
        self.check(FsOp::Open, rel)?;
        Ok(rustix::fs::openat2(
            &self.root,
            OsStr::from_bytes(&bytes[..end]),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::BENEATH,
        )
        .ok()
        .map(Dir::from))
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn open_parent_beneath(&self, _rel: &RelPath) -> Result<Option<Dir>, FsFailure> {
        Ok(None)
    }

    /// Opens `rel` itself for reading in one call that the kernel refuses when any
    /// component (the last one too) is a symlink or leads out of the workspace: what
    /// [`WsFs::walk_parent`] and [`WsFs::open_read`] find, with one system call instead
    /// of one per component. With `path_only`, the file is not opened for reading
    /// (`O_PATH`: never a device's or a FIFO's open), only found there or not.
    /// [`Beneath::Other`] when the call fails any other way (a symlink, not a
    /// directory, a kernel without `openat2`): the walk then gives that its meaning.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn open_beneath(&self, rel: &RelPath, path_only: bool) -> Result<Beneath, FsFailure> {
        self.check(FsOp::Open, rel)?;
        let flags = match path_only {
            true => OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            false => {
                OFlags::RDONLY
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC
                    | OFlags::NOCTTY
                    | OFlags::NONBLOCK
            }
        };
        let fd = match rustix::fs::openat2(
            &self.root,
            OsStr::from_bytes(rel.as_bytes()),
            flags,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::BENEATH,
        ) {
            Ok(fd) => fd,
            // Every component met on the way was a directory and no symlink (one would
            // have failed the call first), and one is not there: the path is absent.
            Err(rustix::io::Errno::NOENT) => return Ok(Beneath::Missing),
            Err(_) => return Ok(Beneath::Other),
        };
        if path_only {
            return Ok(Beneath::Other);
        }
        self.check(FsOp::Stat, rel)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| rfail(FsOp::Stat, rel, e.into()))?;
        Ok(Beneath::Opened(
            File::from_std(std::fs::File::from(fd)),
            DiskMeta::from_stat(&st),
        ))
    }

    /// Not made elsewhere than Linux (no `openat2`): the caller walks.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub fn open_beneath(&self, _rel: &RelPath, _path_only: bool) -> Result<Beneath, FsFailure> {
        Ok(Beneath::Other)
    }

    /// Whether directory `dir` (walked to as `rel`'s parent) lists an entry spelled exactly
    /// `name`, byte for byte (a filesystem that folds case or normalizes names may find a
    /// path under another spelling). A directory the walk opened is read through its own
    /// handle (no second open of it); the workspace root, which stays open (and may be
    /// open for its path only), through a handle of its own.
    pub fn lists(&self, dir: WsDir<'_>, name: &[u8], rel: &RelPath) -> Result<bool, FsFailure> {
        self.check(FsOp::ReadDir, rel)?;
        let fail = |e: rustix::io::Errno| rfail(FsOp::ReadDir, rel, e.into());
        let mut entries = match dir {
            WsDir::Owned(d) => rustix::fs::Dir::new(std::os::fd::OwnedFd::from(d.into_std_file())),
            WsDir::Root(d) => rustix::fs::openat(
                d,
                c".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .and_then(rustix::fs::Dir::new),
        }
        .map_err(fail)?;
        while let Some(e) = entries.read() {
            if e.map_err(fail)?.file_name().to_bytes() == name {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `lstat` of one component in `dir`; `None` when absent.
    pub fn lstat(
        &self,
        dir: &impl AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<Option<DiskMeta>, FsFailure> {
        self.check(FsOp::Stat, rel)?;
        match rustix::fs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(DiskMeta::from_stat(&st))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(rfail(FsOp::Stat, rel, e.into())),
        }
    }

    /// When the filesystem gives it (`statx`, Linux): the birth time of one component in
    /// `dir` (not followed when a symlink), in ns since the epoch, with its device and
    /// inode; `None` when the path is absent, the filesystem keeps no birth time, or the
    /// system has no `statx`.
    pub fn born(
        &self,
        dir: &impl AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<Option<Born>, FsFailure> {
        self.check(FsOp::Stat, rel)?;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = (dir, name);
            Ok(None)
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::fs::StatxFlags;
            let want = StatxFlags::BTIME | StatxFlags::INO;
            match rustix::fs::statx(
                dir,
                OsStr::from_bytes(name),
                AtFlags::SYMLINK_NOFOLLOW,
                want,
            ) {
                Ok(x) if x.stx_mask & want.bits() == want.bits() => Ok(Some(Born {
                    dev: rustix::fs::makedev(x.stx_dev_major, x.stx_dev_minor) as u64,
                    ino: x.stx_ino,
                    ns: u64::try_from(x.stx_btime.tv_sec)
                        .unwrap_or(0)
                        .saturating_mul(1_000_000_000)
                        .saturating_add(u64::from(x.stx_btime.tv_nsec)),
                })),
                Ok(_) | Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOSYS) => Ok(None),
                Err(e) => Err(rfail(FsOp::Stat, rel, e.into())),
            }
        }
    }

    /// Opens one component for reading without following a symlink and without
    /// blocking on FIFOs; `Ok(None)` when absent, `Err` with `ELOOP` for a symlink.
    pub fn open_read(
        &self,
        dir: &impl AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<Option<(File, DiskMeta)>, FsFailure> {
        self.check(FsOp::Open, rel)?;
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = match rustix::fs::openat(dir, OsStr::from_bytes(name), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(rfail(FsOp::Open, rel, e.into())),
        };
        self.check(FsOp::Stat, rel)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| rfail(FsOp::Stat, rel, e.into()))?;
        Ok(Some((
            File::from_std(std::fs::File::from(fd)),
            DiskMeta::from_stat(&st),
        )))
    }

    /// Reads one chunk from an open workspace file.
    pub fn read_chunk(
        &self,
        f: &mut File,
        rel: &RelPath,
        buf: &mut [u8],
    ) -> Result<usize, FsFailure> {
        self.check(FsOp::Read, rel)?;
        loop {
            match f.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(rfail(FsOp::Read, rel, e)),
            }
        }
    }

    /// Opens an existing component for writing in place, without following a
    /// symlink, creating or truncating anything, and without blocking on FIFOs;
    /// returns the handle and its `fstat` metadata. The error keeps the OS error
    /// (a caller falls back to a temporary file when writing in place is refused).
    pub fn open_write(
        &self,
        dir: &impl AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<(File, DiskMeta), FsFailure> {
        self.check(FsOp::Open, rel)?;
        let flags =
            OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(dir, OsStr::from_bytes(name), flags, Mode::empty())
            .map_err(|e| rfail(FsOp::Open, rel, e.into()))?;
        self.check(FsOp::Stat, rel)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| rfail(FsOp::Stat, rel, e.into()))?;
        Ok((
            File::from_std(std::fs::File::from(fd)),
            DiskMeta::from_stat(&st),
        ))
    }

    /// Cuts an open workspace file to `len` bytes.
    pub fn truncate(&self, f: &File, rel: &RelPath, len: u64) -> Result<(), FsFailure> {
        self.check(FsOp::Write, rel)?;
        rustix::fs::ftruncate(f, len).map_err(|e| rfail(FsOp::Write, rel, e.into()))
    }

    /// Creates a new temporary file beside `name` in `dir`; returns its name and handle.
    pub fn create_tmp(
        &self,
        dir: &impl AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<(Vec<u8>, File), FsFailure> {
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(&name[..name.len().min(100)]);
        tmp.extend_from_slice(format!(".rewind-tmp-{}", unique_suffix()).as_bytes());
        self.check(FsOp::Create, rel)?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(
            dir,
            OsStr::from_bytes(&tmp),
            flags,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| rfail(FsOp::Create, rel, e.into()))?;
        Ok((tmp, File::from_std(std::fs::File::from(fd))))
    }

    /// Writes bytes to an open workspace file.
    pub fn write_all(&self, f: &mut File, rel: &RelPath, bytes: &[u8]) -> Result<(), FsFailure> {
        self.check(FsOp::Write, rel)?;
        f.write_all(bytes).map_err(|e| rfail(FsOp::Write, rel, e))
    }

    /// Sets permission bits on an open workspace file.
    pub fn set_mode(&self, f: &File, rel: &RelPath, mode: u32) -> Result<(), FsFailure> {
        self.check(FsOp::SetPermissions, rel)?;
        rustix::fs::fchmod(f, Mode::from_raw_mode(mode & 0o7777))
            .map_err(|e| rfail(FsOp::SetPermissions, rel, e.into()))
    }

    /// `fsync` of an open workspace file, in durable mode only.
    pub fn sync_file(&self, f: &File, rel: &RelPath) -> Result<(), FsFailure> {
        if !self.io.durable {
            return Ok(());
        }
        self.check(FsOp::Sync, rel)?;
        f.sync_all().map_err(|e| rfail(FsOp::Sync, rel, e))
    }

    /// `fsync` of a workspace directory, in durable mode only.
    pub fn sync_dir(&self, dir: &impl AsFd, rel: &RelPath) -> Result<(), FsFailure> {
        if !self.io.durable {
            return Ok(());
        }
        self.check(FsOp::Sync, rel)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, ".", flags, Mode::empty())
            .map_err(|e| rfail(FsOp::Sync, rel, e.into()))?;
        rustix::fs::fsync(&fd).map_err(|e| rfail(FsOp::Sync, rel, e.into()))
    }

    /// Renames `from` to `to` inside one directory (atomic replace of `to`).
    pub fn rename(
        &self,
        dir: &impl AsFd,
        from: &[u8],
        to: &[u8],
        rel: &RelPath,
    ) -> Result<(), FsFailure> {
        self.check(FsOp::Rename, rel)?;
        rustix::fs::renameat(dir, OsStr::from_bytes(from), dir, OsStr::from_bytes(to))
            .map_err(|e| rfail(FsOp::Rename, rel, e.into()))
    }

    /// Unlinks one component; `false` when it was already absent.
    pub fn unlink(&self, dir: &impl AsFd, name: &[u8], rel: &RelPath) -> Result<bool, FsFailure> {
        self.check(FsOp::RemoveFile, rel)?;
        match rustix::fs::unlinkat(dir, OsStr::from_bytes(name), AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(rfail(FsOp::RemoveFile, rel, e.into())),
        }
    }

    /// Removes an empty directory; `false` when absent or not empty.
    pub fn rmdir_if_empty(
        &self,
        dir: &impl AsFd,
        name: &[u8],
        rel: &RelPath,
    ) -> Result<bool, FsFailure> {
        self.check(FsOp::RemoveDir, rel)?;
        match rustix::fs::unlinkat(dir, OsStr::from_bytes(name), AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            // Gone, not empty, or not a directory (a file put back in its place): left.
            Err(
                rustix::io::Errno::NOENT
                | rustix::io::Errno::NOTEMPTY
                | rustix::io::Errno::EXIST
                | rustix::io::Errno::NOTDIR,
            ) => Ok(false),
            Err(e) => Err(rfail(FsOp::RemoveDir, rel, e.into())),
        }
    }

    /// Walks the tree inside `dir` (the workspace's `rel`) depth-first, following nothing:
    /// `file` is asked of every entry that is not a directory, `left` of every directory
    /// once its own tree was walked (given the directory that holds it and its name).
    /// `false` as soon as either answers `false`, or when an entry cannot be listed,
    /// opened or named, or the tree is more than 64 levels deep.
    pub(crate) fn walk_tree(
        &self,
        dir: &Dir,
        rel: &RelPath,
        file: &mut dyn FnMut(&RelPath) -> bool,
        left: &mut LeftDir<'_>,
    ) -> Result<bool, FsFailure> {
        self.walk_tree_from(dir, rel, 0, file, left)
    }

    fn walk_tree_from(
        &self,
        dir: &Dir,
        rel: &RelPath,
        depth: usize,
        file: &mut dyn FnMut(&RelPath) -> bool,
        left: &mut LeftDir<'_>,
    ) -> Result<bool, FsFailure> {
        if depth > 64 {
            return Ok(false);
        }
        self.check(FsOp::ReadDir, rel)?;
        let Ok(entries) = dir.entries() else {
            return Ok(false);
        };
        for e in entries {
            let Ok(e) = e else { return Ok(false) };
            let name = e.file_name();
            let name = name.as_bytes();
            let Ok(child) = RelPath::from_bytes(&[rel.as_bytes(), b"/", name].concat()) else {
                return Ok(false);
            };
            if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                if !file(&child) {
                    return Ok(false);
                }
                continue;
            }
            let Some(sub) = super::open_sub(dir, name) else {
                return Ok(false);
            };
            if !self.walk_tree_from(&sub, &child, depth + 1, file, left)?
                || !left(dir, name, &child)?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Removes a temp file after a failure (best effort, not seam-checked: cleanup only).
    pub fn discard_tmp(&self, dir: &impl AsFd, tmp: &[u8]) {
        let _ = rustix::fs::unlinkat(dir, OsStr::from_bytes(tmp), AtFlags::empty());
    }
}

/// What [`WsFs::walk_tree`] asks of a directory whose tree it walked: given the directory
/// holding it, its name and its path, whether the walk goes on.
pub(crate) type LeftDir<'a> = dyn FnMut(&Dir, &[u8], &RelPath) -> Result<bool, FsFailure> + 'a;

/// Most paths one worker takes in a row from one directory (so that a large directory is
/// still shared out among the threads).
const RUN_MAX: usize = 256;

/// Runs `work` over `items` (sorted by path, `path_of` giving each one's workspace path)
/// in runs of consecutive items of the same parent directory, so that a worker opens
/// each directory once per run; on up to `threads` threads. Returns each run's output, in
/// the order of the items.
pub(crate) fn by_directory<T: Sync, O: Send>(
    items: &[T],
    path_of: impl Fn(&T) -> &[u8],
    threads: usize,
    work: impl Fn(&[T]) -> O + Sync,
) -> Vec<O> {
    let parent = |p: &[u8]| -> usize { p.iter().rposition(|b| *b == b'/').unwrap_or(0) };
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for i in 1..=items.len() {
        let split = i == items.len() || {
            let (a, b) = (path_of(&items[i - 1]), path_of(&items[i]));
            a[..parent(a)] != b[..parent(b)] || i - start >= RUN_MAX
        };
        if split {
            runs.push((start, i));
            start = i;
        }
    }
    let threads = threads.clamp(1, 8).min(runs.len().max(1));
    if threads == 1 {
        return runs.iter().map(|&(s, e)| work(&items[s..e])).collect();
    }
    let done: std::sync::Mutex<Vec<Option<O>>> =
        std::sync::Mutex::new((0..runs.len()).map(|_| None).collect());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                loop {
                    let r = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(s, e)) = runs.get(r) else { break };
                    let out = work(&items[s..e]);
                    done.lock().unwrap_or_else(|p| p.into_inner())[r] = Some(out);
                }
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// A file's birth, as [`WsFs::born`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Born {
    pub dev: u64,
    pub ino: u64,
    /// Birth time, ns since the epoch.
    pub ns: u64,
}
