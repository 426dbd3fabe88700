//! The per-workspace index: `workspaces/<key>/index.bin`, a compact binary file
//! (documented byte by byte in `docs/format.md`, section "Workspace index").
//!
//! A torn or corrupt index is a cache miss (the scan rebuilds it); an index
//! written by a newer build fails closed.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{CorruptFile, Fault, NewerVersion};
use crate::fsio::{DiskMeta, FileKind};
use crate::path::BytesHasher;

/// The file's first eight bytes.
pub(crate) const MAGIC: &[u8; 8] = b"DSHRWIX\n";
/// The newest index version this build reads, and the one it writes: version 4, the compact
/// entry encoding (paths after the shared prefix with the previous path, integers as
/// varints, times and inodes as differences; about half the bytes of versions 1–3). Versions
/// 1–3 (fixed-width entries: 1 without [`Coverage::Kept`] or [`Coverage::Git`] entries, 2 with
/// kept ones, 3 with git ones) still read.
pub(crate) const INDEX_VERSION: u32 = 4;
pub(crate) const FLAG_BASELINE_COMPLETE: u32 = 1;
const HEADER: usize = 8 + 4 + 4 + 8 + 8;
const TRAILER: usize = 32;

/// `lstat` metadata of an index entry (the full `st_mode`, type bits included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub mode: u32,
    pub nlink: u32,
    pub size: u64,
    pub mtime_s: i64,
    pub mtime_ns: u32,
    pub ctime_s: i64,
    pub ctime_ns: u32,
    pub ino: u64,
    pub dev: u64,
}

impl Stat {
    /// From a raw `lstat` (what `from_meta` gives for the same entry).
    #[allow(clippy::unnecessary_cast)]
    pub fn from_raw(s: &rustix::fs::Stat) -> Self {
        Stat {
            mode: s.st_mode as u32,
            nlink: u32::try_from(s.st_nlink).unwrap_or(u32::MAX),
            size: s.st_size as u64,
            mtime_s: s.st_mtime as i64,
            mtime_ns: s.st_mtime_nsec as u32,
            ctime_s: s.st_ctime as i64,
            ctime_ns: s.st_ctime_nsec as u32,
            ino: s.st_ino as u64,
            dev: s.st_dev as u64,
        }
    }

    pub fn from_disk(d: &DiskMeta) -> Self {
        let fmt = match d.kind {
            FileKind::File => 0o100000,
            FileKind::Dir => 0o040000,
            FileKind::Symlink => 0o120000,
            FileKind::Other => 0o010000,
        };
        Stat {
            mode: fmt | (d.mode & 0o7777),
            nlink: u32::try_from(d.nlink).unwrap_or(u32::MAX),
            size: d.size,
            mtime_s: d.mtime_s,
            mtime_ns: d.mtime_ns,
            ctime_s: d.ctime_s,
            ctime_ns: d.ctime_ns,
            ino: d.ino,
            dev: d.dev,
        }
    }

    pub fn kind(&self) -> FileKind {
        match self.mode & 0o170000 {
            0o100000 => FileKind::File,
            0o040000 => FileKind::Dir,
            0o120000 => FileKind::Symlink,
            _ => FileKind::Other,
        }
    }

    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }

    /// The store's [`DiskMeta`] view (what the tracked map compares).
    pub fn disk_meta(&self) -> DiskMeta {
        DiskMeta {
            kind: self.kind(),
            size: self.size,
            mode: self.perm(),
            nlink: u64::from(self.nlink),
            ino: self.ino,
            dev: self.dev,
            mtime_s: self.mtime_s,
            mtime_ns: self.mtime_ns,
            ctime_s: self.ctime_s,
            ctime_ns: self.ctime_ns,
        }
    }

    /// Status-change time in nanoseconds since the epoch (0 before it).
    pub fn ctime_total(&self) -> u64 {
        u64::try_from(self.ctime_s)
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(self.ctime_ns))
    }
}

/// Why an in-scope entry's content is not in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Uncovered {
    /// Over the per-file cap.
    OverFileCap,
    /// The workspace's baseline byte budget was used up.
    OverBudget,
    /// Opening or reading failed (errno).
    Unreadable(i32),
    /// Size or times changed while it was read, twice.
    Changing,
    /// A symbolic link (never followed, not captured).
    Symlink,
    /// A regular file with more than one hard link.
    HardLink,
    /// A FIFO, socket or device.
    Special,
}

impl Uncovered {
    fn code(&self) -> (u8, i32) {
        match self {
            Uncovered::OverFileCap => (1, 0),
            Uncovered::OverBudget => (2, 0),
            Uncovered::Unreadable(e) => (3, *e),
            Uncovered::Changing => (4, 0),
            Uncovered::Symlink => (5, 0),
            Uncovered::HardLink => (6, 0),
            Uncovered::Special => (7, 0),
        }
    }

    fn from_code(c: u8, e: i32) -> Option<Self> {
        Some(match c {
            1 => Uncovered::OverFileCap,
            2 => Uncovered::OverBudget,
            3 => Uncovered::Unreadable(e),
            4 => Uncovered::Changing,
            5 => Uncovered::Symlink,
            6 => Uncovered::HardLink,
            7 => Uncovered::Special,
            _ => return None,
        })
    }

    /// Whether the next scan retries the entry even when its metadata is unchanged.
    pub fn retry(&self) -> bool {
        matches!(self, Uncovered::Changing)
    }
}

/// What the store holds of an entry's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Coverage {
    /// The content is the blob with this SHA-256.
    Hashed([u8; 32]),
    /// The content has this SHA-256 and is kept in the record log of the index's
    /// [`Index::keeper`] session (no blob file needs to hold it): a small file that
    /// session tracks with this very content. Only that session reads it from there;
    /// the first scan by another session writes it to a blob file first.
    Kept([u8; 32]),
    /// The content is the blob with this SHA-1 object id in the index of the git
    /// repository whose work tree is the workspace (no copy is in the store; see
    /// `scan::git_baseline`). Its SHA-256 is known once a change of it is recorded.
    Git([u8; 20]),
    /// Not hashed yet (an interrupted baseline continues with it).
    Pending,
    /// Not in the store, and why.
    Not(Uncovered),
}

/// One in-scope path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdxEntry {
    pub stat: Stat,
    pub cov: Coverage,
}

impl Coverage {
    /// The content's SHA-256, when it is known (in a blob file or a log).
    pub fn sha(&self) -> Option<&[u8; 32]> {
        match self {
            Coverage::Hashed(s) | Coverage::Kept(s) => Some(s),
            _ => None,
        }
    }
}

impl IdxEntry {
    pub fn sha_hex(&self) -> Option<String> {
        self.cov.sha().map(hex::encode)
    }
}

/// Index entries by path.
pub(crate) type Entries = HashMap<Box<[u8]>, IdxEntry, BuildHasherDefault<BytesHasher>>;

/// The paths whose entries changed (set, replaced by a different entry, or removed) since
/// the index was last read from or written to disk, for the delta frame of the next save
/// (see `super::delta`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Touched {
    pub paths: std::collections::HashSet<Box<[u8]>, BuildHasherDefault<BytesHasher>>,
}

/// How many entries of an index stand for each file, by (device, inode).
type InodeCounts = HashMap<(u64, u64), u32, BuildHasherDefault<BytesHasher>>;

/// Counts one more entry standing for the file `stat` describes.
fn count_in(counts: &mut InodeCounts, stat: &Stat) {
    *counts.entry((stat.dev, stat.ino)).or_default() += 1;
}

/// The index in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    /// No entry is [`Coverage::Pending`].
    pub baseline_complete: bool,
    /// Wall clock (ns) when the scan that wrote this index started its walk.
    pub scanned_at: u64,
    /// The session whose record log keeps the content of the [`Coverage::Kept`] entries.
    pub keeper: Option<String>,
    /// Changed only through [`Index::insert`], [`Index::remove`] and
    /// [`Index::coverages_mut`], which keep `inodes` true to it.
    entries: Entries,
    /// Built by the first [`Index::knows_inode`], then kept up to date by every change of
    /// `entries`: an index read from disk, or one never asked, carries none.
    inodes: Option<InodeCounts>,
    /// What changed since the index was read from or written to disk; `None` for an index
    /// not known to be the one on disk (made in memory): its save writes it whole.
    touched: Option<Touched>,
}

impl Index {
    /// The entries by path.
    pub fn entries(&self) -> &Entries {
        &self.entries
    }

    /// Sets the entry of `path`.
    pub fn insert(&mut self, path: Box<[u8]>, entry: IdxEntry) {
        if let Some(t) = self.touched.as_mut() {
            if self.entries.get(&path) != Some(&entry) {
                t.paths.insert(path.clone());
            }
        }
        if let Some(c) = self.inodes.as_mut() {
            count_in(c, &entry.stat);
        }
        if let Some(old) = self.entries.insert(path, entry) {
            self.forget_inode(old.stat);
        }
    }

    /// Removes the entry of `path`.
    pub fn remove(&mut self, path: &[u8]) {
        if let Some(old) = self.entries.remove(path) {
            if let Some(t) = self.touched.as_mut() {
                t.paths.insert(path.into());
            }
            self.forget_inode(old.stat);
        }
    }

    /// What changed since the index was last read from or written to disk (`None`: not
    /// known to be the one on disk), leaving nothing changed.
    pub fn take_touched(&mut self) -> Option<Touched> {
        self.touched.replace(Touched::default())
    }

    /// Marks the index as the one on disk now (nothing changed since).
    pub fn mark_on_disk(&mut self) {
        self.touched = Some(Touched::default());
    }

    /// Sets `path` to `entry`, or removes it, as a delta frame says (not counted as a
    /// change: the frame is on disk).
    pub(crate) fn apply(&mut self, path: Box<[u8]>, entry: Option<IdxEntry>) {
        let t = self.touched.take();
        match entry {
            Some(e) => self.insert(path, e),
            None => self.remove(&path),
        }
        self.touched = t;
    }

    fn forget_inode(&mut self, stat: Stat) {
        let Some(c) = self.inodes.as_mut() else {
            return;
        };
        let key = (stat.dev, stat.ino);
        match c.get_mut(&key) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                c.remove(&key);
            }
        }
    }

    /// Every entry kept in a log ([`Coverage::Kept`]): its metadata, with its coverage to
    /// change (the metadata stays as it is). Each one is counted as changed for the next
    /// save's delta frame (whether its coverage is changed or not: they are few, the files a
    /// session tracks).
    pub fn coverages_mut(&mut self) -> impl Iterator<Item = (&Stat, &mut Coverage)> {
        let mut touched = self.touched.as_mut();
        self.entries
            .iter_mut()
            .filter(|(_, e)| matches!(e.cov, Coverage::Kept(_)))
            .map(move |(k, e)| {
                if let Some(t) = touched.as_deref_mut() {
                    t.paths.insert(k.clone());
                }
                (&e.stat, &mut e.cov)
            })
    }

    /// Whether an entry stands for the file `(dev, ino)`, under any path. The first
    /// question goes through every entry once; later ones, and the changes between them,
    /// cost a lookup each.
    pub fn knows_inode(&mut self, dev: u64, ino: u64) -> bool {
        let entries = &self.entries;
        self.inodes
            .get_or_insert_with(|| {
                let mut c = InodeCounts::with_capacity_and_hasher(
                    entries.len(),
                    BuildHasherDefault::default(),
                );
                for e in entries.values() {
                    count_in(&mut c, &e.stat);
                }
                c
            })
            .contains_key(&(dev, ino))
    }

    /// The latest status-change time (ns) among the entries that stand for the file
    /// `(dev, ino)`, under any path; `None` when none does. A file born after it is not
    /// the one those entries saw, only one that was given its inode number after it was
    /// freed (a file's birth never follows its own status changes). Goes through every
    /// entry: for the rare question of a file whose inode [`Index::knows_inode`].
    pub fn inode_changed_last(&self, dev: u64, ino: u64) -> Option<u64> {
        self.entries
            .values()
            .filter(|e| e.stat.dev == dev && e.stat.ino == ino)
            .map(|e| e.stat.ctime_total())
            .max()
    }

    /// Whether any entry is [`Coverage::Kept`].
    pub fn has_kept(&self) -> bool {
        self.entries
            .values()
            .any(|e| matches!(e.cov, Coverage::Kept(_)))
    }
}

pub(crate) fn corrupt(path: &Path, detail: &str) -> Fault {
    CorruptFile {
        path: path.to_string_lossy().into_owned(),
        detail: detail.to_string(),
    }
    .into()
}

pub(crate) struct Reader<'a> {
    pub b: &'a [u8],
    pub at: usize,
}

impl Reader<'_> {
    pub fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|s| u16::from_le_bytes([s[0], s[1]]))
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_le_bytes)
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.u64().map(|v| v as i64)
    }
    /// A LEB128 varint of at most 10 bytes that fits a `u64`.
    pub fn var(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    /// A zigzag-encoded varint.
    fn ivar(&mut self) -> Option<i64> {
        self.var().map(unzig)
    }
}

pub(crate) fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zig(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzig(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// The longest path an entry holds (the walk never yields one over `PATH_MAX`, 4096).
const PATH_LEN_MAX: usize = u16::MAX as usize;

/// What a version-4 entry is encoded against: the entry before it (zero for the first).
#[derive(Default)]
pub(crate) struct Prev {
    path: Vec<u8>,
    mtime_s: i64,
    ino: u64,
    dev: u64,
}

/// Reads a version-4 entry (see [`put_compact`]).
pub(crate) fn read_compact(r: &mut Reader<'_>, prev: &mut Prev) -> Option<(Box<[u8]>, Stat)> {
    let shared = usize::try_from(r.var()?).ok()?;
    let rest = usize::try_from(r.var()?).ok()?;
    if shared > prev.path.len() || shared.checked_add(rest)? > PATH_LEN_MAX {
        return None;
    }
    prev.path.truncate(shared);
    prev.path.extend_from_slice(r.take(rest)?);
    let mode = u32::try_from(r.var()?).ok()?;
    let nlink = u32::try_from(r.var()?).ok()?;
    let size = r.var()?;
    let mtime_s = prev.mtime_s.wrapping_add(r.ivar()?);
    let mtime_ns = r.u32()?;
    let ctime_s = mtime_s.wrapping_add(r.ivar()?);
    let ctime_ns = u32::try_from(i64::from(mtime_ns).checked_add(r.ivar()?)?).ok()?;
    let ino = prev.ino.wrapping_add(r.ivar()? as u64);
    let dev = prev.dev.wrapping_add(r.ivar()? as u64);
    (prev.mtime_s, prev.ino, prev.dev) = (mtime_s, ino, dev);
    let stat = Stat {
        mode,
        nlink,
        size,
        mtime_s,
        mtime_ns,
        ctime_s,
        ctime_ns,
        ino,
        dev,
    };
    Some((prev.path.as_slice().into(), stat))
}

/// Writes a version-4 entry's path and metadata: the length of the prefix it shares with
/// the previous path and the rest of it (varint, varint, bytes); mode, link count and size
/// (varints); the mtime's seconds as the difference from the previous entry's (zigzag
/// varint) and its nanoseconds (`u32`); the ctime as differences from the mtime, seconds and
/// nanoseconds (zigzag varints); inode and device as differences from the previous entry's
/// (zigzag varints of the wrapping difference).
pub(crate) fn put_compact(out: &mut Vec<u8>, path: &[u8], s: &Stat, prev: &mut Prev) {
    let shared = path
        .iter()
        .zip(prev.path.iter())
        .take_while(|(a, b)| a == b)
        .count();
    put_var(out, shared as u64);
    put_var(out, (path.len() - shared) as u64);
    out.extend_from_slice(&path[shared..]);
    put_var(out, u64::from(s.mode));
    put_var(out, u64::from(s.nlink));
    put_var(out, s.size);
    put_var(out, zig(s.mtime_s.wrapping_sub(prev.mtime_s)));
    out.extend_from_slice(&s.mtime_ns.to_le_bytes());
    put_var(out, zig(s.ctime_s.wrapping_sub(s.mtime_s)));
    put_var(out, zig(i64::from(s.ctime_ns) - i64::from(s.mtime_ns)));
    put_var(out, zig(s.ino.wrapping_sub(prev.ino) as i64));
    put_var(out, zig(s.dev.wrapping_sub(prev.dev) as i64));
    prev.path.clear();
    prev.path.extend_from_slice(path);
    (prev.mtime_s, prev.ino, prev.dev) = (s.mtime_s, s.ino, s.dev);
}

/// Bytes of an index file's head: its magic and its version.
pub(crate) const HEAD: usize = 12;

/// The longest path an entry holds, for the delta frames (see `super::delta`).
pub(crate) const PATH_MAX_LEN: usize = PATH_LEN_MAX;

/// Checks an index file's head (its first [`HEAD`] bytes, or all of a shorter file) and
/// returns its version: `Err(Newer)` for a newer version (fail closed), `Err(Corrupt)` for
/// a bad magic, a version 0 or a file too short to hold them. The only part of a file that
/// tells a newer build's index from a damaged one.
pub(crate) fn check_head(path: &Path, bytes: &[u8]) -> Result<u32, Fault> {
    if bytes.len() < HEAD || &bytes[..8] != MAGIC {
        return Err(corrupt(
            path,
            "not a workspace index (bad magic or too short)",
        ));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version > INDEX_VERSION {
        return Err(NewerVersion {
            path: path.to_string_lossy().into_owned(),
            found: version,
            supported: INDEX_VERSION,
        }
        .into());
    }
    if version == 0 {
        return Err(corrupt(path, "version 0"));
    }
    Ok(version)
}

/// Reads an entry's coverage as index version `version` writes it (see [`put_cov`]).
pub(crate) fn read_cov(r: &mut Reader<'_>, version: u32) -> Option<Coverage> {
    Some(match r.u8()? {
        0 => Coverage::Hashed(r.take(32)?.try_into().ok()?),
        1 => Coverage::Pending,
        2 => {
            let c = r.u8()?;
            let e = r.u32()? as i32;
            Coverage::Not(Uncovered::from_code(c, e)?)
        }
        3 if version >= 2 => Coverage::Kept(r.take(32)?.try_into().ok()?),
        4 if version >= 3 => Coverage::Git(r.take(20)?.try_into().ok()?),
        _ => return None,
    })
}

/// Parses an index file. `Err(Newer)` for a newer version (fail closed),
/// `Err(Corrupt)` for anything torn or malformed.
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Index, Fault> {
    let version = check_head(path, bytes)?;
    if bytes.len() < HEADER + TRAILER {
        return Err(corrupt(path, "truncated header"));
    }
    let (body, sum) = bytes.split_at(bytes.len() - TRAILER);
    if Sha256::digest(body).as_slice() != sum {
        return Err(corrupt(path, "checksum mismatch (torn or damaged)"));
    }
    let mut r = Reader { b: body, at: 12 };
    let bad = || corrupt(path, "malformed entry");
    let flags = r.u32().ok_or_else(bad)?;
    let scanned_at = r.u64().ok_or_else(bad)?;
    let keeper = if version >= 2 {
        let len = usize::from(r.u16().ok_or_else(bad)?);
        let id = r.take(len).ok_or_else(bad)?;
        let id = std::str::from_utf8(id).map_err(|_| corrupt(path, "keeper is not UTF-8"))?;
        (!id.is_empty()).then(|| id.to_string())
    } else {
        None
    };
    let count = r.u64().ok_or_else(bad)?;
    let mut entries = Entries::with_capacity_and_hasher(
        usize::try_from(count).unwrap_or(0).min(1 << 24),
        BuildHasherDefault::default(),
    );
    let mut prev = Prev::default();
    for _ in 0..count {
        let e = (|| {
            let (p, stat) = if version >= 4 {
                read_compact(&mut r, &mut prev)?
            } else {
                let len = usize::from(r.u16()?);
                let p: Box<[u8]> = r.take(len)?.into();
                let stat = Stat {
                    mode: r.u32()?,
                    nlink: r.u32()?,
                    size: r.u64()?,
                    mtime_s: r.i64()?,
                    mtime_ns: r.u32()?,
                    ctime_s: r.i64()?,
                    ctime_ns: r.u32()?,
                    ino: r.u64()?,
                    dev: r.u64()?,
                };
                (p, stat)
            };
            let cov = read_cov(&mut r, version)?;
            Some((p, IdxEntry { stat, cov }))
        })()
        .ok_or_else(bad)?;
        if crate::path::RelPath::from_bytes(&e.0).is_err() {
            return Err(corrupt(path, "entry with an invalid path"));
        }
        if keeper.is_none() && matches!(e.1.cov, Coverage::Kept(_)) {
            return Err(corrupt(
                path,
                "an entry kept in a log, and no session keeping it",
            ));
        }
        entries.insert(e.0, e.1);
    }
    if r.at != body.len() {
        return Err(corrupt(path, "trailing bytes"));
    }
    Ok(Index {
        baseline_complete: flags & FLAG_BASELINE_COMPLETE != 0,
        scanned_at,
        keeper,
        entries,
        inodes: None,
        touched: Some(Touched::default()),
    })
}

/// Serializes an index as version 4, the compact encoding (entries sorted by path, so
/// equal indexes are equal bytes).
pub(crate) fn encode(ix: &Index) -> Vec<u8> {
    encode_as(ix, true)
}

/// Serializes an index as a build before version 4 did (fixed-width entries; version 1, 2
/// or 3 by what its entries need): what an older store holds.
#[cfg(test)]
pub(crate) fn encode_fixed(ix: &Index) -> Vec<u8> {
    encode_as(ix, false)
}

fn encode_as(ix: &Index, compact: bool) -> Vec<u8> {
    let mut keys: Vec<&Box<[u8]>> = ix.entries.keys().collect();
    keys.sort_unstable();
    let per_entry = if compact { 64 } else { 110 };
    let mut out = Vec::with_capacity(HEADER + TRAILER + ix.entries.len() * per_entry);
    out.extend_from_slice(MAGIC);
    // Fixed-width: version 2 only when an entry needs it (a keeper without one is not worth
    // saving), 3 when an entry is a git blob.
    let keeper = ix.keeper.as_deref().filter(|_| ix.has_kept());
    let git = ix
        .entries
        .values()
        .any(|e| matches!(e.cov, Coverage::Git(_)));
    let version: u32 = if compact {
        4
    } else if git {
        3
    } else if keeper.is_some() {
        2
    } else {
        1
    };
    out.extend_from_slice(&version.to_le_bytes());
    let flags = if ix.baseline_complete {
        FLAG_BASELINE_COMPLETE
    } else {
        0
    };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&ix.scanned_at.to_le_bytes());
    if let Some(id) = keeper {
        // Session ids are short (the store's id rules); never longer than a u16 length.
        let id = &id.as_bytes()[..id.len().min(usize::from(u16::MAX))];
        out.extend_from_slice(&(id.len() as u16).to_le_bytes());
        out.extend_from_slice(id);
    } else if version >= 2 {
        out.extend_from_slice(&0u16.to_le_bytes());
    }
    out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    let mut prev = Prev::default();
    for k in keys {
        let e = &ix.entries[k];
        // Paths are at most PATH_MAX (4096) bytes; the walk never yields longer ones.
        let k = &k[..k.len().min(PATH_LEN_MAX)];
        if compact {
            put_compact(&mut out, k, &e.stat, &mut prev);
            put_cov(&mut out, &e.cov);
            continue;
        }
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(k);
        let s = &e.stat;
        out.extend_from_slice(&s.mode.to_le_bytes());
        out.extend_from_slice(&s.nlink.to_le_bytes());
        out.extend_from_slice(&s.size.to_le_bytes());
        out.extend_from_slice(&s.mtime_s.to_le_bytes());
        out.extend_from_slice(&s.mtime_ns.to_le_bytes());
        out.extend_from_slice(&s.ctime_s.to_le_bytes());
        out.extend_from_slice(&s.ctime_ns.to_le_bytes());
        out.extend_from_slice(&s.ino.to_le_bytes());
        out.extend_from_slice(&s.dev.to_le_bytes());
        put_cov(&mut out, &e.cov);
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// An entry's coverage: the same bytes in every version.
pub(crate) fn put_cov(out: &mut Vec<u8>, cov: &Coverage) {
    match cov {
        Coverage::Hashed(sha) => {
            out.push(0);
            out.extend_from_slice(sha);
        }
        Coverage::Pending => out.push(1),
        Coverage::Kept(sha) => {
            out.push(3);
            out.extend_from_slice(sha);
        }
        Coverage::Git(oid) => {
            out.push(4);
            out.extend_from_slice(oid);
        }
        Coverage::Not(u) => {
            let (c, errno) = u.code();
            out.push(2);
            out.push(c);
            out.extend_from_slice(&(errno as u32).to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        let mut ix = Index {
            baseline_complete: true,
            scanned_at: 123,
            keeper: None,
            entries: Entries::default(),
            inodes: None,
            touched: None,
        };
        let stat = Stat {
            mode: 0o100755,
            nlink: 1,
            size: 3,
            mtime_s: 1,
            mtime_ns: 2,
            ctime_s: 3,
            ctime_ns: 4,
            ino: 5,
            dev: 6,
        };
        ix.insert(
            b"a/b".to_vec().into(),
            IdxEntry {
                stat,
                cov: Coverage::Hashed([7; 32]),
            },
        );
        ix.insert(
            b"\xff\xfe".to_vec().into(),
            IdxEntry {
                stat,
                cov: Coverage::Not(Uncovered::Unreadable(13)),
            },
        );
        ix.insert(
            b"p".to_vec().into(),
            IdxEntry {
                stat,
                cov: Coverage::Pending,
            },
        );
        ix
    }

    #[test]
    fn the_inode_counts_follow_every_change_of_the_entries() {
        // Once asked, the index keeps its inode counts through inserts, replacements and
        // removals (two paths may name one file: a hard link): every answer is the one an
        // index built afresh from the same entries gives.
        let mut ix = sample();
        let base = ix.entries[&b"a/b"[..]].stat;
        assert!(
            ix.knows_inode(base.dev, base.ino),
            "the sample's three entries"
        );
        assert!(!ix.knows_inode(base.dev, 99));
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for step in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let path: Box<[u8]> = match seed % 18 {
                16 => b"a/b".to_vec().into(),
                17 => b"p".to_vec().into(),
                n => format!("q{n}").into_bytes().into(),
            };
            let ino = (seed >> 8) % 8;
            if (seed >> 16) % 3 == 2 {
                ix.remove(&path);
            } else {
                let stat = Stat { ino, ..base };
                ix.insert(
                    path,
                    IdxEntry {
                        stat,
                        cov: Coverage::Pending,
                    },
                );
            }
            let mut fresh = Index {
                entries: ix.entries.clone(),
                ..Index::default()
            };
            for q in 0..9 {
                assert_eq!(
                    ix.knows_inode(base.dev, q),
                    fresh.knows_inode(base.dev, q),
                    "step {step}, inode {q}"
                );
            }
            assert!(!ix.knows_inode(base.dev + 1, base.ino), "another device");
        }
    }

    #[test]
    fn round_trips_and_detects_damage() {
        let ix = sample();
        let bytes = encode(&ix);
        let back = decode(Path::new("i"), &bytes).expect("decode");
        assert_eq!(back.entries, ix.entries);
        assert!(back.baseline_complete);
        assert_eq!(back.scanned_at, 123);
        assert_eq!(encode(&back), bytes);
        // Every truncation and every flipped byte is detected.
        for n in 0..bytes.len() {
            assert!(
                decode(Path::new("i"), &bytes[..n]).is_err(),
                "truncated at {n}"
            );
        }
        for i in 12..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(
                matches!(decode(Path::new("i"), &b), Err(Fault::Corrupt(_))),
                "flip at {i}"
            );
        }
    }

    #[test]
    fn an_entry_kept_in_a_log_was_written_as_version_2_with_its_keeper() {
        // As builds before version 4 wrote it (what an older store holds, still read).
        let mut ix = sample();
        // No entry kept in a log: version 1, readable by a build that knows only that one;
        // a keeper without such an entry is not written.
        ix.keeper = Some("sess-a".into());
        let v1 = encode_fixed(&ix);
        assert_eq!(&v1[8..12], &1u32.to_le_bytes());
        assert_eq!(decode(Path::new("i"), &v1).expect("v1").keeper, None);
        ix.insert(
            b"k".to_vec().into(),
            IdxEntry {
                stat: ix.entries[&b"a/b"[..]].stat,
                cov: Coverage::Kept([9; 32]),
            },
        );
        let bytes = encode_fixed(&ix);
        assert_eq!(&bytes[8..12], &2u32.to_le_bytes());
        let back = decode(Path::new("i"), &bytes).expect("decode");
        assert_eq!(back.entries, ix.entries);
        assert_eq!(back.keeper.as_deref(), Some("sess-a"));
        assert_eq!(
            back.entries[&b"k"[..]].sha_hex(),
            Some(hex::encode([9; 32]))
        );
        for n in 0..bytes.len() {
            assert!(
                decode(Path::new("i"), &bytes[..n]).is_err(),
                "truncated at {n}"
            );
        }
        // A version-1 file cannot hold such an entry; version 2 cannot without a keeper
        // (its length, after magic, version, flags and time, set to 0 and its bytes cut).
        let resealed = |mut b: Vec<u8>| {
            let body = b.len() - TRAILER;
            let sum = Sha256::digest(&b[..body]);
            b[body..].copy_from_slice(&sum);
            b
        };
        let mut as_v1 = bytes.clone();
        as_v1[8] = 1;
        let mut no_keeper = bytes.clone();
        let at = 8 + 4 + 4 + 8;
        no_keeper.splice(at..at + 2 + "sess-a".len(), 0u16.to_le_bytes());
        for b in [as_v1, no_keeper] {
            assert!(matches!(
                decode(Path::new("i"), &resealed(b)),
                Err(Fault::Corrupt(_))
            ));
        }
    }

    #[test]
    fn a_git_blob_entry_was_written_as_version_3() {
        // As builds before version 4 wrote it (what an older store holds, still read).
        let mut ix = sample();
        ix.insert(
            b"g".to_vec().into(),
            IdxEntry {
                stat: ix.entries[&b"a/b"[..]].stat,
                cov: Coverage::Git([5; 20]),
            },
        );
        let bytes = encode_fixed(&ix);
        assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
        let back = decode(Path::new("i"), &bytes).expect("decode");
        assert_eq!(back.entries, ix.entries);
        assert_eq!(back.keeper, None);
        assert_eq!(encode_fixed(&back), bytes);
        // With an entry kept in a log too: its keeper is written.
        ix.keeper = Some("s".into());
        ix.insert(
            b"k".to_vec().into(),
            IdxEntry {
                stat: ix.entries[&b"a/b"[..]].stat,
                cov: Coverage::Kept([9; 32]),
            },
        );
        let bytes = encode_fixed(&ix);
        let back = decode(Path::new("i"), &bytes).expect("decode");
        assert_eq!(
            (back.entries, back.keeper),
            (ix.entries.clone(), ix.keeper.clone())
        );
        for n in 0..bytes.len() {
            assert!(
                decode(Path::new("i"), &bytes[..n]).is_err(),
                "truncated at {n}"
            );
        }
        // Such an entry in a version-2 file is malformed.
        let mut b = bytes.clone();
        b[8] = 2;
        let body = b.len() - TRAILER;
        let sum = Sha256::digest(&b[..body]);
        b[body..].copy_from_slice(&sum);
        assert!(matches!(decode(Path::new("i"), &b), Err(Fault::Corrupt(_))));
    }

    /// An index of `n` entries shaped like a scanned tree: sorted paths in nested
    /// directories, times and inodes close together but for a few outliers.
    fn tree(n: u64) -> Index {
        let mut ix = Index {
            baseline_complete: true,
            scanned_at: 1_700_000_000_000_000_000,
            keeper: Some("keeper-1".into()),
            ..Index::default()
        };
        for i in 0..n {
            let odd = i % 97 == 5;
            let stat = Stat {
                mode: if i % 13 == 0 { 0o100755 } else { 0o100644 },
                nlink: 1,
                size: 2000 + (i * 7919) % 4000,
                mtime_s: if odd {
                    -3
                } else {
                    1_700_000_000 + (i % 50) as i64
                },
                mtime_ns: (i * 123_456_789 % 1_000_000_000) as u32,
                ctime_s: 1_700_000_000 + (i % 50) as i64 + i64::from(i % 3 == 0),
                ctime_ns: if i % 5 == 0 {
                    0
                } else {
                    (i * 123_456_789 % 1_000_000_000) as u32
                },
                ino: if odd { u64::MAX - i } else { 5_000_000 + i * 3 },
                dev: if i % 211 == 7 { 64_768 } else { 2049 },
            };
            let cov = match i % 29 {
                0 => Coverage::Pending,
                1 => Coverage::Not(Uncovered::Unreadable(13)),
                2 => Coverage::Kept([(i % 251) as u8; 32]),
                3 => Coverage::Git([(i % 241) as u8; 20]),
                _ => Coverage::Hashed([(i % 253) as u8; 32]),
            };
            let path = format!("src/d{}/e{}/file_{i}.rs", i / 1000, (i / 50) % 20);
            ix.insert(path.into_bytes().into(), IdxEntry { stat, cov });
        }
        ix
    }

    #[test]
    fn the_compact_encoding_reads_back_what_the_fixed_one_held_in_about_half_the_bytes() {
        let ix = tree(3000);
        let compact = encode(&ix);
        let fixed = encode_fixed(&ix);
        assert_eq!(&compact[8..12], &4u32.to_le_bytes());
        assert_eq!(&fixed[8..12], &3u32.to_le_bytes());
        let a = decode(Path::new("i"), &compact).expect("version 4");
        let b = decode(Path::new("i"), &fixed).expect("version 3");
        assert_eq!(a.entries, ix.entries);
        assert_eq!(b.entries, ix.entries);
        assert_eq!(
            (a.keeper.as_deref(), a.scanned_at, a.baseline_complete),
            (Some("keeper-1"), ix.scanned_at, true)
        );
        assert_eq!(encode(&b), compact, "an older index rewritten is version 4");
        assert!(
            compact.len() * 10 < fixed.len() * 6,
            "{} bytes compact, {} fixed",
            compact.len(),
            fixed.len()
        );
        // Truncated anywhere in the entries: refused.
        for n in (HEADER..compact.len()).step_by(997) {
            assert!(
                decode(Path::new("i"), &compact[..n]).is_err(),
                "truncated at {n}"
            );
        }
    }

    #[test]
    fn a_compact_entry_that_does_not_parse_is_malformed() {
        // Resealed (a valid checksum), so only the entry's own checks can refuse them.
        let reseal = |mut b: Vec<u8>| {
            let body = b.len() - TRAILER;
            let sum = Sha256::digest(&b[..body]);
            b[body..].copy_from_slice(&sum);
            b
        };
        let mut ix = Index::default();
        let stat = sample().entries[&b"a/b"[..]].stat;
        ix.insert(
            b"a".to_vec().into(),
            IdxEntry {
                stat,
                cov: Coverage::Pending,
            },
        );
        let bytes = encode(&ix);
        // The first entry starts after magic, version, flags, time, keeper length, count.
        let at = 8 + 4 + 4 + 8 + 2 + 8;
        assert_eq!(&bytes[at..at + 3], &[0, 1, b'a']);
        let bad = |b: Vec<u8>| matches!(decode(Path::new("i"), &reseal(b)), Err(Fault::Corrupt(_)));
        // A prefix shared with a previous path longer than it (the first has none).
        let mut b = bytes.clone();
        b[at] = 1;
        assert!(bad(b));
        // A varint of eleven bytes.
        let mut b = bytes.clone();
        b.splice(at..at + 1, [0x80; 10].into_iter().chain([0]));
        assert!(bad(b));
        // An empty path (no prefix, nothing after it).
        let mut b = bytes.clone();
        b.splice(at + 1..at + 3, [0]);
        assert!(bad(b));
        assert!(decode(Path::new("i"), &bytes).is_ok());
    }

    #[test]
    fn newer_version_fails_closed() {
        let mut bytes = encode(&sample());
        bytes[8] = 5;
        assert!(matches!(
            decode(Path::new("i"), &bytes),
            Err(Fault::Newer(_))
        ));
    }
}
