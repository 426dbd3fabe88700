//! The single I/O layer: every filesystem call of the store, on the store root
//! and on a workspace, goes through here and first asks the [`FaultSeam`].
//!
//! Store-side calls use `cap-std` [`Dir`] methods with store-relative paths.
//! Workspace calls walk one component at a time from the session cwd handle
//! with `O_NOFOLLOW` (`openat`/`fstatat`/`renameat`/`unlinkat` on the handle's
//! descriptor, always with a single component), so a symlink anywhere in the
//! path is seen and refused, never followed.

pub(crate) mod gitref;
mod pack;
mod store;
mod workspace;

pub(crate) use pack::{
    BlobSrc, CHUNK_HEADER, IdxEntry, PACK_MAGIC, PACKS_DIR, PackLoc, Packs, decode_chunk_header,
    decode_idx, encode_chunk, encode_idx, idx_id, idx_path, inflate_chunk, pack_path,
};
pub(crate) use store::StoreFs;
pub(crate) use workspace::{Beneath, Walk, WsDir, WsFs, by_directory};

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::{Dir, File, OpenOptions};
use rustix::fs::{AtFlags, Mode, OFlags};

use crate::error::FsFailure;
use crate::path::RelPath;
use crate::seam::{Area, CrashPoint, FaultSeam, FsOp};

/// Size of the streaming buffer (the most of one file held in memory while streaming).
pub(crate) const CHUNK: usize = 64 * 1024;

/// A unique temporary-file suffix for this process (`<pid>-<n>`).
pub(crate) use rewind_durable::unique_suffix;

fn fail(op: FsOp, area: Area, path: &Path, source: io::Error) -> FsFailure {
    FsFailure {
        op,
        area,
        path: path.to_string_lossy().into_owned(),
        source,
    }
}

fn rfail(op: FsOp, path: &RelPath, source: io::Error) -> FsFailure {
    FsFailure {
        op,
        area: Area::Workspace,
        path: path.display(),
        source,
    }
}

/// The shared seam plus durability mode.
#[derive(Clone)]
pub(crate) struct Io {
    pub seam: Arc<dyn FaultSeam>,
    pub durable: bool,
}

impl Io {
    pub fn check(&self, op: FsOp, area: Area, path: &Path) -> Result<(), FsFailure> {
        self.seam
            .before(op, area, path)
            .map_err(|e| fail(op, area, path, e))
    }
    pub fn crash(&self, p: CrashPoint) {
        self.seam.crash_point(p);
    }
}

/// File type as seen by `lstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// FIFO, socket, device.
    Other,
}

/// Identity of a store file: device, inode, size and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileId {
    pub(crate) fn from_stat(st: &rustix::fs::Stat) -> Self {
        // The field types differ between targets.
        #[allow(clippy::unnecessary_cast)]
        FileId {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// Same file (device and inode).
    pub(crate) fn same_file(&self, other: &FileId) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// Metadata of a workspace entry as seen by `lstat` (the recheck fast path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiskMeta {
    /// File type.
    pub kind: FileKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Hard-link count.
    pub nlink: u64,
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
    /// Modification time, seconds.
    pub mtime_s: i64,
    /// Modification time, nanoseconds.
    pub mtime_ns: u32,
    /// Status-change time, seconds.
    pub ctime_s: i64,
    /// Status-change time, nanoseconds.
    pub ctime_ns: u32,
}

impl DiskMeta {
    pub(crate) fn from_stat(st: &rustix::fs::Stat) -> Self {
        let fmt = st.st_mode & 0o170000;
        let kind = match fmt {
            0o100000 => FileKind::File,
            0o040000 => FileKind::Dir,
            0o120000 => FileKind::Symlink,
            _ => FileKind::Other,
        };
        #[allow(clippy::unnecessary_cast)]
        DiskMeta {
            kind,
            size: st.st_size as u64,
            mode: (st.st_mode & 0o7777) as u32,
            nlink: st.st_nlink as u64,
            ino: st.st_ino as u64,
            dev: st.st_dev as u64,
            mtime_s: st.st_mtime as i64,
            mtime_ns: st.st_mtime_nsec as u32,
            ctime_s: st.st_ctime as i64,
            ctime_ns: st.st_ctime_nsec as u32,
        }
    }
}

/// Opens subdirectory `name` of `dir` without following a symlink; `None` when that fails.
pub(crate) fn open_sub(dir: &impl AsFd, name: &[u8]) -> Option<Dir> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, OsStr::from_bytes(name), flags, Mode::empty())
        .ok()
        .map(Dir::from)
}
