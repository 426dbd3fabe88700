//! Compaction: loose blob files packed into zstd-compressed packs, and the packs'
//! side of garbage collection (a pack whose members are all dead is dropped, one
//! with many dead members rewritten). Readers are in `fsio/pack.rs`; the format is
//! in `docs/format.md` ("Packs").
//!
//! Crash order of a compaction (each step a crash point of the store's seam):
//!
//! 1. the pack is written under a temporary name and `fsync`ed (`pack-written`),
//!    then renamed to `packs/pack-<id>.pack`;
//! 2. its index is written under a temporary name, `fsync`ed, renamed to
//!    `packs/pack-<id>.idx`, and `packs/` is `fsync`ed (`pack-indexed`): from here the
//!    pack is durable and readers find its members;
//! 3. only then the loose copies of its members are removed (`pack-loose-removed`).
//!
//! This holds in both durability modes: a loose blob is never removed before its packed
//! copy is on disk. A crash before step 2 leaves a temporary file or a pack without an
//! index, which no reader looks at and the next garbage collection removes; after it,
//! a blob may be both loose and packed, which every reader accepts (the loose copy is
//! read first). A compaction holds the store's lock shared: captures and restores go
//! on beside it; a garbage collection (exclusive) waits for it.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{CompactError, Fault, FsFailure};
use crate::fsio::{
    CHUNK_HEADER, IdxEntry, PACKS_DIR, StoreFs, decode_idx, encode_chunk, encode_idx, idx_id,
    idx_path, pack_path, unique_suffix,
};
use crate::path::valid_sha;
use crate::seam::CrashPoint;
use crate::store::Store;

/// Blobs larger than this stay loose (a packed member is read into memory whole).
pub const PACK_MEMBER_MAX: u64 = 8 << 20;
/// A chunk is closed once its raw bytes reach this (one member larger than it is a
/// chunk of its own): small files compress together, and reading one member inflates
/// at most this much besides it. (On git.git's sources, chunks of 64 KiB, 256 KiB and
/// 1 MiB compress alike, within 1 %.)
pub const CHUNK_TARGET: usize = 64 << 10;
/// A pack is closed once its members' bytes reach this; a compaction writes as many
/// packs as it needs.
pub const PACK_TARGET: u64 = 64 << 20;
/// A garbage collection rewrites a pack once at least this share (in percent) of its
/// members' bytes is dead; a pack with every member dead is removed whole.
pub const PACK_DEAD_PERCENT: u64 = 25;

/// What [`Store::compact`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactReport {
    /// Loose blobs now packed (and removed from `blobs/`).
    pub blobs_packed: usize,
    /// Their bytes (logical, uncompressed).
    pub bytes_packed: u64,
    /// Packs written.
    pub packs_written: usize,
    /// Bytes of the packs written (on disk, before block rounding).
    pub pack_bytes: u64,
    /// Loose blobs already held by a pack, removed.
    pub duplicates_removed: usize,
    /// Loose blobs left loose because their bytes do not hash to their name
    /// (`dsh-rewind verify` names them).
    pub corrupt_left: Vec<String>,
    /// Loose blobs left loose because they are larger than [`PACK_MEMBER_MAX`].
    pub large_left: usize,
}

/// Writes one pack: chunks appended as members come, then the index.
pub(crate) struct PackWriter<'a> {
    fs: &'a StoreFs,
    tmp: PathBuf,
    file: cap_std::fs::File,
    len: u64,
    chunk: Vec<u8>,
    chunk_members: u32,
    /// Entries of the open chunk (their `chunk` offset set when it is written).
    open: Vec<IdxEntry>,
    entries: Vec<IdxEntry>,
    raw_bytes: u64,
}

impl<'a> PackWriter<'a> {
    /// Starts a pack under a temporary name in `packs/`.
    pub(crate) fn new(fs: &'a StoreFs) -> Result<Self, FsFailure> {
        fs.create_dir_all(Path::new(PACKS_DIR))?;
        let tmp = Path::new(PACKS_DIR).join(format!(".pack.tmp-{}", unique_suffix()));
        let mut file = fs.create_new(&tmp)?;
        let magic = crate::fsio::PACK_MAGIC;
        if let Err(e) = fs.write_all(&mut file, &tmp, magic) {
            let _ = fs.remove_file(&tmp);
            return Err(e);
        }
        Ok(Self {
            fs,
            tmp,
            file,
            len: magic.len() as u64,
            chunk: Vec::new(),
            chunk_members: 0,
            open: Vec::new(),
            entries: Vec::new(),
            raw_bytes: 0,
        })
    }

    /// The members' bytes so far.
    pub(crate) fn raw_bytes(&self) -> u64 {
        self.raw_bytes
    }

    /// Adds a member (its bytes already checked against `sha`).
    pub(crate) fn add(&mut self, sha: &str, bytes: &[u8]) -> Result<(), FsFailure> {
        if !self.chunk.is_empty() && self.chunk.len() + bytes.len() > CHUNK_TARGET {
            self.flush_chunk()?;
        }
        self.open.push(IdxEntry {
            sha: sha.to_string(),
            chunk: 0,
            offset: self.chunk.len() as u32,
            size: bytes.len() as u32,
        });
        self.chunk.extend_from_slice(bytes);
        self.chunk_members += 1;
        self.raw_bytes += bytes.len() as u64;
        if self.chunk.len() >= CHUNK_TARGET {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<(), FsFailure> {
        if self.open.is_empty() {
            return Ok(());
        }
        let encoded = encode_chunk(&self.chunk, self.chunk_members);
        debug_assert!(encoded.len() >= CHUNK_HEADER);
        self.fs.write_all(&mut self.file, &self.tmp, &encoded)?;
        for mut e in self.open.drain(..) {
            e.chunk = self.len;
            self.entries.push(e);
        }
        self.len += encoded.len() as u64;
        self.chunk.clear();
        self.chunk_members = 0;
        Ok(())
    }

    /// Writes the last chunk, makes the pack and then its index durable under their
    /// names; returns the pack's id, its entries and its length. On failure the
    /// temporary files are removed and no index names the pack.
    pub(crate) fn finish(mut self) -> Result<(String, Vec<IdxEntry>, u64), FsFailure> {
        let r = self.finish_inner();
        if r.is_err() {
            // Only the temporary name (absent once renamed).
            let _ = self.fs.remove_file(&self.tmp);
        }
        r
    }

    fn finish_inner(&mut self) -> Result<(String, Vec<IdxEntry>, u64), FsFailure> {
        let fs = self.fs;
        self.flush_chunk()?;
        fs.sync_file_always(&self.file, &self.tmp)?;
        fs.io.crash(CrashPoint::PackWritten);
        self.entries.sort_by(|a, b| a.sha.cmp(&b.sha));
        // The id: the hash of the index's entries and a unique suffix (two packs never
        // share a name).
        let mut h = Sha256::new();
        for e in &self.entries {
            h.update(e.sha.as_bytes());
        }
        h.update(unique_suffix().as_bytes());
        let id = hex::encode(&h.finalize()[..16]);
        let pack = pack_path(&id);
        fs.rename(&self.tmp, &pack)?;
        let idx = encode_idx(&self.entries, self.len);
        let idx_tmp = Path::new(PACKS_DIR).join(format!(".idx.tmp-{}", unique_suffix()));
        let written = (|| {
            let mut f = fs.create_new(&idx_tmp)?;
            fs.write_all(&mut f, &idx_tmp, &idx)?;
            fs.sync_file_always(&f, &idx_tmp)?;
            fs.rename(&idx_tmp, &idx_path(&id))?;
            fs.sync_dir_always(Path::new(PACKS_DIR))
        })();
        if let Err(e) = written {
            // The pack is whole and synced; its index may be in place already. Neither is
            // removed here: a pack without an index goes with the next garbage collection,
            // one with its index serves its members beside their loose copies (kept, since
            // this compaction stops here).
            let _ = fs.remove_file(&idx_tmp);
            return Err(e);
        }
        fs.io.crash(CrashPoint::PackIndexed);
        Ok((id, std::mem::take(&mut self.entries), self.len))
    }
}

/// Reads loose blob `sha` whole and checks it against its name; `None` when it is gone
/// (`Some(Err(()))` when its bytes do not hash to it).
fn read_loose_verified(
    fs: &StoreFs,
    sha: &str,
    size: u64,
) -> Result<Option<Result<Vec<u8>, ()>>, FsFailure> {
    let Some(mut f) = fs.loose_open(sha)? else {
        return Ok(None);
    };
    let path = Path::new("blobs").join(sha);
    let mut out = Vec::with_capacity(size as usize);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = fs.read_chunk(&mut f, &path, &mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() as u64 > PACK_MEMBER_MAX {
            return Ok(Some(Err(())));
        }
    }
    Ok(Some(if hex::encode(Sha256::digest(&out)) == sha {
        Ok(out)
    } else {
        Err(())
    }))
}

/// Reads packed blob `sha` and checks it against its name.
fn packed_ok(fs: &StoreFs, sha: &str) -> Result<bool, FsFailure> {
    let Some(loc) = fs.packed(sha)? else {
        return Ok(false);
    };
    Ok(match fs.read_packed(&loc) {
        Ok(b) => hex::encode(Sha256::digest(&b)) == sha,
        Err(e) if e.source.kind() == std::io::ErrorKind::InvalidData => false,
        Err(e) => return Err(e),
    })
}

impl Store {
    /// Packs the loose blob files: every blob of at most [`PACK_MEMBER_MAX`] bytes whose
    /// bytes hash to its name goes into a zstd-compressed pack (small files share
    /// compressed chunks, so they stop costing a disk block each), and its loose file is
    /// removed once the pack and its index are durable. A loose blob a pack already holds
    /// (checked) is removed. Content referenced or not is packed alike: the garbage
    /// collection drops dead members later.
    ///
    /// Runs beside captures and restores (the store's lock is held shared), never on a
    /// tool call's path: the host runs it when idle, after its size quota, and
    /// `dsh-rewind compact` by hand.
    pub fn compact(&self) -> Result<CompactReport, CompactError> {
        self.guard_writable()?;
        let _g = self.lock_shared()?;
        Ok(self.compact_locked()?)
    }

    fn compact_locked(&self) -> Result<CompactReport, Fault> {
        let fs = &self.inner.fs;
        let mut report = CompactReport::default();
        let mut writer: Option<PackWriter<'_>> = None;
        let mut members: Vec<String> = Vec::new();
        // Members in the order of the workspace indexes' paths where they name them (files of
        // one directory side by side: they compress together, and a restore, which goes path
        // by path, inflates each chunk about once), the others after them by name.
        let mut rank: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for w in crate::scan::workspace_refs(self).unwrap_or_default() {
            for sha in w.refs {
                let next = rank.len();
                rank.entry(sha).or_insert(next);
            }
        }
        let mut names: Vec<String> = fs
            .list(Path::new("blobs"))?
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .filter(|s| valid_sha(s))
            .collect();
        names.sort_by_cached_key(|sha| (rank.get(sha).copied().unwrap_or(usize::MAX), sha.clone()));
        for sha in &names {
            let sha = sha.as_str();
            let Some(size) = fs.loose_size(sha)? else {
                continue;
            };
            if size > PACK_MEMBER_MAX {
                report.large_left += 1;
                continue;
            }
            if packed_ok(fs, sha)? {
                if fs.remove_file(&Path::new("blobs").join(sha))? {
                    report.duplicates_removed += 1;
                }
                continue;
            }
            let bytes = match read_loose_verified(fs, sha, size)? {
                None => continue,
                Some(Err(())) => {
                    report.corrupt_left.push(sha.to_string());
                    continue;
                }
                Some(Ok(b)) => b,
            };
            let w = match writer.as_mut() {
                Some(w) => w,
                None => writer.insert(PackWriter::new(fs)?),
            };
            w.add(sha, &bytes)?;
            members.push(sha.to_string());
            report.bytes_packed += bytes.len() as u64;
            if w.raw_bytes() >= PACK_TARGET {
                if let Some(w) = writer.take() {
                    self.seal(w, &mut members, &mut report)?;
                }
            }
        }
        if let Some(w) = writer.take() {
            self.seal(w, &mut members, &mut report)?;
        }
        fs.refresh_packs(true)?;
        Ok(report)
    }

    /// Finishes a pack, then removes the loose copies of its members.
    fn seal(
        &self,
        w: PackWriter<'_>,
        members: &mut Vec<String>,
        report: &mut CompactReport,
    ) -> Result<(), Fault> {
        let fs = &self.inner.fs;
        let (_id, _entries, len) = w.finish()?;
        report.packs_written += 1;
        report.pack_bytes += len;
        let mut first = true;
        for sha in members.drain(..) {
            fs.remove_file(&Path::new("blobs").join(&sha))?;
            report.blobs_packed += 1;
            if first {
                fs.io.crash(CrashPoint::PackLooseRemoved);
                first = false;
            }
        }
        fs.sync_dir(Path::new("blobs"))?;
        Ok(())
    }

    /// The packs' side of a garbage collection (under the store's exclusive lock):
    /// temporary files and packs without an index (a compaction killed before its index)
    /// are removed; a pack whose members are all dead goes (index first); with `rewrite`,
    /// one with at least [`PACK_DEAD_PERCENT`] of its bytes dead is rewritten with its live members
    /// (the new pack durable before the old one's index goes). A pack whose index cannot
    /// be read, or a live member that does not read back whole, is left as it is
    /// (`verify` names it). Returns the members dropped.
    pub(crate) fn collect_packs_locked(
        &self,
        live: &std::collections::HashSet<String>,
        rewrite: bool,
    ) -> Result<usize, Fault> {
        let fs = &self.inner.fs;
        let names = fs.list(Path::new(PACKS_DIR))?;
        let indexed: std::collections::HashSet<String> = names
            .iter()
            .filter_map(|n| idx_id(n).map(str::to_string))
            .collect();
        for n in &names {
            let s = n.to_string_lossy();
            let orphan = s
                .strip_prefix("pack-")
                .and_then(|r| r.strip_suffix(".pack"))
                .is_some_and(|id| !indexed.contains(id));
            if s.starts_with(".pack.tmp-") || s.starts_with(".idx.tmp-") || orphan {
                fs.remove_file(&Path::new(PACKS_DIR).join(n))?;
            }
        }
        let mut dropped = 0;
        let mut ids: Vec<&String> = indexed.iter().collect();
        ids.sort();
        for id in ids {
            let Some(bytes) = fs.read_opt(&idx_path(id))? else {
                continue;
            };
            let Ok((entries, _)) = decode_idx(&bytes) else {
                continue;
            };
            let total: u64 = entries.iter().map(|e| u64::from(e.size)).sum();
            let dead: u64 = entries
                .iter()
                .filter(|e| !live.contains(&e.sha))
                .map(|e| u64::from(e.size))
                .sum();
            let dead_n = entries.iter().filter(|e| !live.contains(&e.sha)).count();
            if dead_n == 0 {
                continue;
            }
            if dead_n < entries.len() && (!rewrite || dead * 100 < total * PACK_DEAD_PERCENT) {
                continue;
            }
            if dead_n < entries.len() && !self.rewrite_live(id, &entries, live)? {
                continue;
            }
            fs.remove_file(&idx_path(id))?;
            fs.sync_dir_always(Path::new(PACKS_DIR))?;
            fs.io.crash(CrashPoint::PackOldUnindexed);
            fs.remove_file(&pack_path(id))?;
            dropped += dead_n;
        }
        fs.refresh_packs(true)?;
        Ok(dropped)
    }

    /// Writes the live members of pack `id` into a new pack; `false` (nothing written)
    /// when one of them does not read back whole.
    fn rewrite_live(
        &self,
        id: &str,
        entries: &[IdxEntry],
        live: &std::collections::HashSet<String>,
    ) -> Result<bool, Fault> {
        let fs = &self.inner.fs;
        let pack: std::sync::Arc<str> = std::sync::Arc::from(id);
        let mut w = PackWriter::new(fs)?;
        for e in entries.iter().filter(|e| live.contains(&e.sha)) {
            let loc = crate::fsio::PackLoc {
                pack: std::sync::Arc::clone(&pack),
                chunk: e.chunk,
                offset: e.offset,
                size: e.size,
            };
            let ok = match fs.read_packed(&loc) {
                Ok(b) if hex::encode(Sha256::digest(&b)) == e.sha => Some(b),
                Ok(_) => None,
                Err(err) if err.source.kind() == std::io::ErrorKind::InvalidData => None,
                Err(err) => {
                    drop(w);
                    return Err(err.into());
                }
            };
            match ok {
                Some(b) => w.add(&e.sha, &b)?,
                None => {
                    let tmp = w.tmp.clone();
                    drop(w);
                    fs.remove_file(&tmp)?;
                    return Ok(false);
                }
            }
        }
        w.finish()?;
        Ok(true)
    }

    /// Copies every member of pack `id` that reads back whole into a new pack (durable
    /// before this returns); the damaged ones are left out. Returns how many members were
    /// copied and how many were left out. For a repair, which then moves the damaged pack
    /// and its index into the quarantine.
    pub(crate) fn salvage_pack(&self, id: &str) -> Result<(usize, usize), Fault> {
        let fs = &self.inner.fs;
        let Some(bytes) = fs.read_opt(&idx_path(id))? else {
            return Ok((0, 0));
        };
        let Ok((entries, _)) = decode_idx(&bytes) else {
            return Ok((0, 0));
        };
        let pack: std::sync::Arc<str> = std::sync::Arc::from(id);
        let mut w: Option<PackWriter<'_>> = None;
        let (mut copied, mut lost) = (0, 0);
        for e in &entries {
            let loc = crate::fsio::PackLoc {
                pack: std::sync::Arc::clone(&pack),
                chunk: e.chunk,
                offset: e.offset,
                size: e.size,
            };
            match fs.read_packed(&loc) {
                Ok(b) if hex::encode(Sha256::digest(&b)) == e.sha => {
                    let writer = match w.as_mut() {
                        Some(w) => w,
                        None => w.insert(PackWriter::new(fs)?),
                    };
                    writer.add(&e.sha, &b)?;
                    copied += 1;
                }
                Ok(_) => lost += 1,
                Err(err) if err.source.kind() == std::io::ErrorKind::InvalidData => lost += 1,
                Err(err) if err.source.kind() == std::io::ErrorKind::UnexpectedEof => lost += 1,
                Err(err) => return Err(err.into()),
            }
        }
        if let Some(w) = w {
            w.finish()?;
        }
        Ok((copied, lost))
    }
}
