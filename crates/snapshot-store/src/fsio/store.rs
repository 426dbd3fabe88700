//! Store-side calls: `cap-std` `Dir` methods with store-relative paths, each asking
//! the fault seam first.

use super::*;

/// Store-root access.
pub(crate) struct StoreFs {
    pub dir: Dir,
    pub io: Io,
    /// `blobs/`, opened once: blob lookups are single-component calls on it.
    pub blobs: Option<Dir>,
    /// The packs' indexes and the last chunk read (see `fsio/pack.rs`).
    pub packs: Packs,
}

/// `path` relative to the store's directory, the directory itself (`.`) for an empty one.
fn or_root(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

impl StoreFs {
    pub(super) fn check(&self, op: FsOp, path: &Path) -> Result<(), FsFailure> {
        self.io.check(op, Area::Store, path)
    }

    /// Reads a whole (small) store file; `None` when it does not exist.
    pub fn read_opt(&self, path: &Path) -> Result<Option<Vec<u8>>, FsFailure> {
        let Some(mut f) = self.open_read(path)? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            self.check(FsOp::Read, path)?;
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(FsOp::Read, Area::Store, path, e)),
            }
        }
        Ok(Some(out))
    }

    /// Opens a store file for reading; `None` when it does not exist.
    pub fn open_read(&self, path: &Path) -> Result<Option<File>, FsFailure> {
        self.check(FsOp::Open, path)?;
        match self.dir.open(path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fail(FsOp::Open, Area::Store, path, e)),
        }
    }

    /// Size of blob `sha` (a validated hex name): the loose file's, else the packed
    /// member's, else that of the git blob a reference `gitrefs/<sha>` names when the
    /// repository still holds it; `None` when absent from all.
    pub fn blob_size(&self, sha: &str) -> Result<Option<u64>, FsFailure> {
        match self.loose_size(sha)? {
            Some(n) => Ok(Some(n)),
            None => self.packed_size(sha),
        }
    }

    /// [`StoreFs::blob_size`] of a blob not found loose (kept out of line: the hot paths
    /// find their blobs loose or not at all).
    #[cold]
    #[inline(never)]
    fn packed_size(&self, sha: &str) -> Result<Option<u64>, FsFailure> {
        match self.packed(sha)? {
            Some(l) => Ok(Some(u64::from(l.size))),
            // Else a reference to a git blob the repository still holds.
            None => super::gitref::ref_size(self, sha),
        }
    }

    /// Size of the loose blob file `blobs/<sha>`; `None` when there is none.
    pub fn loose_size(&self, sha: &str) -> Result<Option<u64>, FsFailure> {
        if !crate::path::valid_sha(sha) {
            return Ok(None);
        }
        let path = Path::new("blobs").join(sha);
        let Some(blobs) = &self.blobs else {
            return self.size(&path);
        };
        self.check(FsOp::Stat, &path)?;
        match rustix::fs::statat(blobs, sha, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st.st_size as u64)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(fail(FsOp::Stat, Area::Store, &path, e.into())),
        }
    }

    /// Opens blob `sha` (a validated hex name) for reading: the loose file, else the packed
    /// member (read into memory), else the git blob a reference `gitrefs/<sha>` names (read
    /// from the repository into memory, checked against its object id); `None` when absent
    /// from all. The bytes are not checked
    /// here: every reader hashes what it reads against the name.
    pub fn blob_open(&self, sha: &str) -> Result<Option<BlobSrc>, FsFailure> {
        if let Some(f) = self.loose_open(sha)? {
            return Ok(Some(BlobSrc::Loose(f)));
        }
        self.packed_open(sha)
    }

    /// [`StoreFs::blob_open`] of a blob not found loose (kept out of line).
    #[cold]
    #[inline(never)]
    fn packed_open(&self, sha: &str) -> Result<Option<BlobSrc>, FsFailure> {
        let Some(loc) = self.packed(sha)? else {
            // Else a reference to a git blob, read from the repository.
            return Ok(super::gitref::ref_bytes(self, sha)?
                .map(|b| BlobSrc::Packed(io::Cursor::new(b))));
        };
        match self.read_packed(&loc) {
            Ok(b) => Ok(Some(BlobSrc::Packed(io::Cursor::new(b)))),
            // The pack was rewritten by a garbage collection since its index was read: read
            // the indexes again and look once more.
            Err(e) if e.source.kind() == io::ErrorKind::NotFound => {
                self.refresh_packs(true)?;
                match self.packed(sha)? {
                    Some(loc) => Ok(Some(BlobSrc::Packed(io::Cursor::new(
                        self.read_packed(&loc)?,
                    )))),
                    None => Ok(self.loose_open(sha)?.map(BlobSrc::Loose)),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Opens the loose blob file `blobs/<sha>`; `None` when there is none.
    pub fn loose_open(&self, sha: &str) -> Result<Option<File>, FsFailure> {
        // A name that is not a SHA-256 (e.g. from a hostile plan) is never resolved.
        if !crate::path::valid_sha(sha) {
            return Ok(None);
        }
        let path = Path::new("blobs").join(sha);
        let Some(blobs) = &self.blobs else {
            return self.open_read(&path);
        };
        self.check(FsOp::Open, &path)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(blobs, sha, flags, Mode::empty()) {
            Ok(fd) => Ok(Some(File::from_std(std::fs::File::from(fd)))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(fail(FsOp::Open, Area::Store, &path, e.into())),
        }
    }

    /// Size of a store file; `None` when it does not exist.
    pub fn size(&self, path: &Path) -> Result<Option<u64>, FsFailure> {
        self.check(FsOp::Stat, path)?;
        match self.dir.symlink_metadata(path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fail(FsOp::Stat, Area::Store, path, e)),
        }
    }

    /// Whether a store path exists.
    pub fn exists(&self, path: &Path) -> Result<bool, FsFailure> {
        self.check(FsOp::Stat, path)?;
        match self.dir.symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(fail(FsOp::Stat, Area::Store, path, e)),
        }
    }

    /// Creates a directory and its parents.
    pub fn create_dir_all(&self, path: &Path) -> Result<(), FsFailure> {
        self.check(FsOp::CreateDir, path)?;
        self.dir
            .create_dir_all(path)
            .map_err(|e| fail(FsOp::CreateDir, Area::Store, path, e))
    }

    /// Creates a new temporary file next to `path`; returns its path and handle.
    pub fn create_tmp_beside(&self, path: &Path) -> Result<(PathBuf, File), FsFailure> {
        let name = path.file_name().unwrap_or_else(|| OsStr::new("file"));
        let mut tmp_name = OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp-{}", unique_suffix()));
        let tmp = path.with_file_name(tmp_name);
        self.create_new(&tmp).map(|f| (tmp, f))
    }

    /// Creates a new file (fails if it exists).
    pub fn create_new(&self, path: &Path) -> Result<File, FsFailure> {
        self.check(FsOp::Create, path)?;
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        self.dir
            .open_with(path, &o)
            .map_err(|e| fail(FsOp::Create, Area::Store, path, e))
    }

    /// Writes all bytes to an open store file.
    pub fn write_all(&self, f: &mut File, path: &Path, bytes: &[u8]) -> Result<(), FsFailure> {
        self.check(FsOp::Write, path)?;
        f.write_all(bytes)
            .map_err(|e| fail(FsOp::Write, Area::Store, path, e))
    }

    /// `fsync` of a file, in durable mode only.
    pub fn sync_file(&self, f: &File, path: &Path) -> Result<(), FsFailure> {
        if !self.io.durable {
            return Ok(());
        }
        self.check(FsOp::Sync, path)?;
        f.sync_all()
            .map_err(|e| fail(FsOp::Sync, Area::Store, path, e))
    }

    /// `fsync` of a directory, in durable mode only (makes a rename/unlink in it durable).
    pub fn sync_dir(&self, path: &Path) -> Result<(), FsFailure> {
        if !self.io.durable {
            return Ok(());
        }
        self.check(FsOp::Sync, path)?;
        // Directory handles may be O_PATH: `sync_dir` opens it for reading to fsync it.
        let d = self
            .dir
            .open_dir(or_root(path))
            .map_err(|e| fail(FsOp::Sync, Area::Store, path, e))?;
        rewind_durable::sync_dir(&d).map_err(|e| fail(FsOp::Sync, Area::Store, path, e))
    }

    /// `syncfs` of the store's filesystem, in durable mode only: every blob on disk,
    /// also those a handle in process-crash mode wrote and left to the kernel, before
    /// a restore writes over the bytes they rescue. It reports a write-back error of
    /// what it writes (Linux 5.8 and later). Linux only; elsewhere nothing calls it
    /// (see `IN_PLACE_DURABLE` in the journal).
    pub fn sync_filesystem(&self) -> Result<(), FsFailure> {
        if !self.io.durable {
            return Ok(());
        }
        let path = Path::new("");
        self.check(FsOp::Sync, path)?;
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{Mode, OFlags};
            // The store's handle may be `O_PATH`, which `syncfs` refuses.
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fail = |e: rustix::io::Errno| fail(FsOp::Sync, Area::Store, path, e.into());
            let fd = rustix::fs::openat(&self.dir, ".", flags, Mode::empty()).map_err(fail)?;
            rustix::fs::syncfs(&fd).map_err(fail)?;
        }
        Ok(())
    }

    /// Creates `path` with `bytes` only if it does not exist yet, without a temporary
    /// name (`Ok(false)` when it exists). For records whose torn form is detectable
    /// and harmless; a failed write removes the partial file.
    pub fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<bool, FsFailure> {
        self.check(FsOp::Create, path)?;
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        let mut f = match self.dir.open_with(path, &o) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(fail(FsOp::Create, Area::Store, path, e)),
        };
        let r = self
            .write_all(&mut f, path, bytes)
            .and_then(|()| self.sync_file(&f, path));
        if r.is_err() {
            drop(f);
            let _ = self.dir.remove_file(path);
        }
        r.map(|()| true)
    }

    /// Opens the line log `path` for appending (creating it). A final line torn by a
    /// crash (no newline) is cut off first, so new lines never join a fragment.
    pub fn open_append(&self, path: &Path) -> Result<File, FsFailure> {
        let torn = match self.read_opt(path)? {
            Some(bytes) if !bytes.is_empty() && bytes.last() != Some(&b'\n') => Some(
                bytes
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map(|i| i + 1)
                    .unwrap_or(0),
            ),
            _ => None,
        };
        self.check(FsOp::Open, path)?;
        let mut o = OpenOptions::new();
        o.append(true).create(true);
        let f = self
            .dir
            .open_with(path, &o)
            .map_err(|e| fail(FsOp::Open, Area::Store, path, e))?;
        if let Some(len) = torn {
            self.truncate(&f, path, len as u64)?;
        }
        // A newly created log must have a durable directory entry too.
        self.sync_dir(path.parent().unwrap_or(Path::new("")))?;
        Ok(f)
    }

    /// Identity and size of a store file (`lstat`); `None` when it does not exist.
    pub fn stat_id(&self, path: &Path) -> Result<Option<FileId>, FsFailure> {
        self.check(FsOp::Stat, path)?;
        match rustix::fs::statat(&self.dir, or_root(path), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(FileId::from_stat(&st))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(fail(FsOp::Stat, Area::Store, path, e.into())),
        }
    }

    /// Identity and size of an open store file (`fstat`).
    pub fn fstat_id(&self, f: &File, path: &Path) -> Result<FileId, FsFailure> {
        self.check(FsOp::Stat, path)?;
        rustix::fs::fstat(f)
            .map(|st| FileId::from_stat(&st))
            .map_err(|e| fail(FsOp::Stat, Area::Store, path, e.into()))
    }

    /// Opens (creating) a record log for reading and appending.
    pub fn open_log(&self, path: &Path) -> Result<File, FsFailure> {
        self.check(FsOp::Open, path)?;
        let mut o = OpenOptions::new();
        o.read(true).append(true).create(true);
        self.dir
            .open_with(path, &o)
            .map_err(|e| fail(FsOp::Open, Area::Store, path, e))
    }

    /// Reads an open store file from `offset` to its end (positional reads).
    pub fn read_from(&self, f: &File, path: &Path, offset: u64) -> Result<Vec<u8>, FsFailure> {
        use std::io::{Read, Seek, SeekFrom};
        // Into a buffer reserved at the file's size (read straight into it, not zeroed
        // first, never reallocated for a log of any size). Every other read of a store
        // file is positional: moving this descriptor's offset disturbs none.
        #[allow(clippy::unnecessary_cast)]
        let size = rustix::fs::fstat(f).map_or(0, |s| s.st_size as u64);
        let mut out = Vec::new();
        out.reserve_exact(usize::try_from(size.saturating_sub(offset)).unwrap_or(0) + 1);
        self.check(FsOp::Read, path)?;
        let mut r: &File = f;
        r.seek(SeekFrom::Start(offset))
            .and_then(|_| r.read_to_end(&mut out))
            .map_err(|e| fail(FsOp::Read, Area::Store, path, e))?;
        Ok(out)
    }

    /// Reads `len` bytes of an open store file at `offset` (positional: the descriptor's
    /// offset does not move). A file that ends before is an `UnexpectedEof` failure.
    pub fn read_at(
        &self,
        f: &File,
        path: &Path,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, FsFailure> {
        self.check(FsOp::Read, path)?;
        let eof = || {
            let e = io::Error::from(io::ErrorKind::UnexpectedEof);
            fail(FsOp::Read, Area::Store, path, e)
        };
        let mut out = vec![0u8; usize::try_from(len).map_err(|_| eof())?];
        let mut got = 0;
        while got < out.len() {
            match rustix::io::pread(f, &mut out[got..], offset + got as u64) {
                Ok(0) => return Err(eof()),
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(fail(FsOp::Read, Area::Store, path, e.into())),
            }
        }
        Ok(out)
    }

    /// `flock` on an open store file (`Ok(false)`: a non-blocking request would block).
    pub fn flock(
        &self,
        f: &File,
        path: &Path,
        op: rustix::fs::FlockOperation,
    ) -> Result<bool, FsFailure> {
        if op != rustix::fs::FlockOperation::Unlock {
            self.check(FsOp::Lock, path)?;
        }
        loop {
            match rustix::fs::flock(f, op) {
                Ok(()) => return Ok(true),
                Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(fail(FsOp::Lock, Area::Store, path, e.into())),
            }
        }
    }

    /// Writes `parts`, one after the other, at the end of an append-mode file in one
    /// `writev` (more than one only when the first writes part of them); `fdatasync` in
    /// durable mode.
    pub fn append_parts(
        &self,
        f: &mut File,
        path: &Path,
        parts: &[&[u8]],
    ) -> Result<(), FsFailure> {
        self.check(FsOp::Write, path)?;
        let mut slices: Vec<std::io::IoSlice<'_>> =
            parts.iter().map(|p| std::io::IoSlice::new(p)).collect();
        let mut left = &mut slices[..];
        while !left.is_empty() {
            match f.write_vectored(left) {
                Ok(0) => {
                    let e = std::io::Error::from(std::io::ErrorKind::WriteZero);
                    return Err(fail(FsOp::Write, Area::Store, path, e));
                }
                Ok(n) => std::io::IoSlice::advance_slices(&mut left, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(FsOp::Write, Area::Store, path, e)),
            }
        }
        if self.io.durable {
            self.check(FsOp::Sync, path)?;
            f.sync_data()
                .map_err(|e| fail(FsOp::Sync, Area::Store, path, e))?;
        }
        Ok(())
    }

    /// Truncates an open store file to `len` bytes.
    pub fn truncate(&self, f: &File, path: &Path, len: u64) -> Result<(), FsFailure> {
        self.check(FsOp::Write, path)?;
        f.set_len(len)
            .map_err(|e| fail(FsOp::Write, Area::Store, path, e))?;
        self.sync_file(f, path)
    }

    /// Appends one line (with its newline) to an open append-mode file.
    /// With `sync`, the line is `fsync`ed (durable mode only).
    pub fn append_to(
        &self,
        f: &mut File,
        path: &Path,
        line: &[u8],
        sync: bool,
    ) -> Result<(), FsFailure> {
        self.check(FsOp::Write, path)?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        f.write_all(&buf)
            .map_err(|e| fail(FsOp::Write, Area::Store, path, e))?;
        if sync {
            self.sync_file(f, path)
        } else {
            Ok(())
        }
    }

    /// Atomically replaces `path` with `bytes` (temp file, optional fsync, rename).
    pub fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), FsFailure> {
        self.write_atomic_id(path, bytes).map(|_| ())
    }

    /// [`StoreFs::write_atomic`], returning the identity of the file written (see
    /// [`StoreFs::write_replacing`]).
    fn write_atomic_id(&self, path: &Path, bytes: &[u8]) -> Result<FileId, FsFailure> {
        let (tmp, mut f) = self.create_tmp_beside(path)?;
        let r = (|| {
            self.write_all(&mut f, &tmp, bytes)?;
            let id = self.fstat_id(&f, &tmp)?;
            self.sync_file(&f, &tmp)?;
            drop(f);
            self.rename(&tmp, path)?;
            Ok(id)
        })();
        if r.is_err() {
            let _ = self.dir.remove_file(&tmp);
        }
        let id = r?;
        self.sync_dir(path.parent().unwrap_or(Path::new("")))?;
        Ok(id)
    }

    /// Replaces `path` with `bytes` as [`StoreFs::write_atomic`] does, for a file that is
    /// rewritten again and again (the workspace index, a session's `scan.json`), without
    /// creating or deleting an inode each time (Linux): the bytes are written over a spare
    /// file kept beside it (`.<name>.spare`, `fsync`ed in durable mode), and the two are
    /// swapped in one `renameat2(RENAME_EXCHANGE)`. The spare then holds the old content
    /// until the next write. A reader sees the whole old file or the whole new one, as
    /// with a rename, and a crash while the spare is written leaves `path` as it was.
    ///
    /// On ext4 the new inode and the rename over the old file cost 150–180 µs per write on
    /// this design's test machine, and more after many files were deleted nearby (each
    /// new inode skips the recently freed ones); writing the spare and swapping, 13 µs.
    /// Anything odd in the spare's place (not a regular file, more than one link) is left
    /// alone, and the write goes the ordinary way; so does a filesystem without the swap.
    ///
    /// Returns the identity of the file now at `path` (its `fstat` once written: a rename
    /// changes none of what it holds but the change time), so that a caller that remembers
    /// which file it last wrote need not open it again to learn it.
    pub fn write_replacing(&self, path: &Path, bytes: &[u8]) -> Result<FileId, FsFailure> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(id) = self.write_over_spare(path, bytes)? {
            return Ok(id);
        }
        self.write_atomic_id(path, bytes)
    }

    /// [`StoreFs::write_replacing`] through the spare: `None` when it could not be used
    /// (nothing was changed then but, possibly, the spare's own bytes).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn write_over_spare(&self, path: &Path, bytes: &[u8]) -> Result<Option<FileId>, FsFailure> {
        use rustix::fs::{FileType, RenameFlags};
        use rustix::io::Errno;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(None);
        };
        let spare_name = crate::path::spare_name(name);
        let spare = path.with_file_name(&spare_name);
        self.check(FsOp::Open, parent)?;
        let dir = self
            .dir
            .open_dir(or_root(parent))
            .map_err(|e| fail(FsOp::Open, Area::Store, parent, e))?;
        self.check(FsOp::Create, &spare)?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(
            &dir,
            spare_name.as_os_str(),
            flags,
            Mode::from_raw_mode(0o644),
        ) {
            Ok(fd) => fd,
            // A symlink, a FIFO, a directory… in the spare's place: not ours to write.
            Err(Errno::LOOP | Errno::NXIO | Errno::ISDIR | Errno::ACCESS | Errno::PERM) => {
                return Ok(None);
            }
            Err(e) => return Err(fail(FsOp::Create, Area::Store, &spare, e.into())),
        };
        self.check(FsOp::Stat, &spare)?;
        let st =
            rustix::fs::fstat(&fd).map_err(|e| fail(FsOp::Stat, Area::Store, &spare, e.into()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_nlink != 1 {
            return Ok(None);
        }
        let f = std::fs::File::from(fd);
        self.check(FsOp::Write, &spare)?;
        {
            use std::os::unix::fs::FileExt;
            f.write_all_at(bytes, 0)
                .map_err(|e| fail(FsOp::Write, Area::Store, &spare, e))?;
            if u64::try_from(st.st_size).unwrap_or(0) > bytes.len() as u64 {
                f.set_len(bytes.len() as u64)
                    .map_err(|e| fail(FsOp::Write, Area::Store, &spare, e))?;
            }
        }
        let f = File::from_std(f);
        let id = self.fstat_id(&f, &spare)?;
        self.sync_file(&f, &spare)?;
        drop(f);
        self.check(FsOp::Rename, path)?;
        let swapped = rustix::fs::renameat_with(
            &dir,
            spare_name.as_os_str(),
            &dir,
            name,
            RenameFlags::EXCHANGE,
        );
        match swapped {
            Ok(()) => {}
            // No file to swap with (the first write), or a filesystem without the swap: the
            // spare becomes the file, as a temporary file would.
            Err(Errno::NOENT | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                match rustix::fs::renameat(&dir, spare_name.as_os_str(), &dir, name) {
                    Ok(()) => {}
                    // The spare went away meanwhile (a sweep): the ordinary way.
                    Err(Errno::NOENT) => return Ok(None),
                    Err(e) => return Err(fail(FsOp::Rename, Area::Store, path, e.into())),
                }
            }
            Err(e) => return Err(fail(FsOp::Rename, Area::Store, path, e.into())),
        }
        self.sync_dir(parent)?;
        Ok(Some(id))
    }

    /// Renames within the store.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), FsFailure> {
        self.check(FsOp::Rename, to)?;
        self.dir
            .rename(from, &self.dir, to)
            .map_err(|e| fail(FsOp::Rename, Area::Store, to, e))
    }

    /// Removes a file; `false` when it did not exist.
    pub fn remove_file(&self, path: &Path) -> Result<bool, FsFailure> {
        self.check(FsOp::RemoveFile, path)?;
        match self.dir.remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(fail(FsOp::RemoveFile, Area::Store, path, e)),
        }
    }

    /// Removes a directory tree; `false` when it did not exist.
    pub fn remove_dir_all(&self, path: &Path) -> Result<bool, FsFailure> {
        self.check(FsOp::RemoveDir, path)?;
        match self.dir.remove_dir_all(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(fail(FsOp::RemoveDir, Area::Store, path, e)),
        }
    }

    /// Lists a directory's entry names (sorted); empty when it does not exist.
    pub fn list(&self, path: &Path) -> Result<Vec<OsString>, FsFailure> {
        self.check(FsOp::ReadDir, path)?;
        let rd = if path.as_os_str().is_empty() {
            self.dir.entries()
        } else {
            self.dir.read_dir(path)
        };
        let rd = match rd {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(fail(FsOp::ReadDir, Area::Store, path, e)),
        };
        let mut out = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| fail(FsOp::ReadDir, Area::Store, path, e))?;
            out.push(ent.file_name());
        }
        out.sort();
        Ok(out)
    }

    /// Reads one chunk from an open store file.
    pub fn read_chunk(
        &self,
        f: &mut impl Read,
        path: &Path,
        buf: &mut [u8],
    ) -> Result<usize, FsFailure> {
        self.check(FsOp::Read, path)?;
        loop {
            match f.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(FsOp::Read, Area::Store, path, e)),
            }
        }
    }
}
