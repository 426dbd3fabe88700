//! Reading packed blobs: `packs/pack-<id>.pack` (zstd-compressed chunks of blob
//! contents) and `packs/pack-<id>.idx` (where each blob is). The format is in
//! `docs/format.md` ("Packs"); writing them is the compaction's (`crate::pack`).
//!
//! A blob is looked for loose first (`blobs/<sha256>`), then in the packs. The packs'
//! indexes are held in memory and read again when the `packs/` directory changed
//! (a compaction or a garbage collection added or removed a pack) — looked at only
//! when a blob is not found, so a store without packs pays one `stat` per miss.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::*;

/// The directory of the packs.
pub(crate) const PACKS_DIR: &str = "packs";
/// First bytes of a pack file.
pub(crate) const PACK_MAGIC: &[u8; 8] = b"RWPACK01";
/// First bytes of a pack index.
pub(crate) const IDX_MAGIC: &[u8; 8] = b"RWPIDX01";
/// First bytes of a chunk header.
pub(crate) const CHUNK_MAGIC: &[u8; 4] = b"CHNK";
/// Length of a chunk header: magic, raw length, compressed length, CRC-32, member count,
/// reserved (all `u32` little-endian after the magic).
pub(crate) const CHUNK_HEADER: usize = 24;
/// Length of one index entry: SHA-256 (32 raw bytes), chunk offset (`u64`), offset in the
/// chunk's raw bytes (`u32`), size (`u32`).
pub(crate) const IDX_ENTRY: usize = 48;
/// The largest raw chunk a reader accepts (a chunk holds one member at most this large,
/// or several smaller ones).
pub(crate) const MAX_CHUNK_RAW: u64 = 16 << 20;

/// Where a packed blob is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PackLoc {
    /// The pack's id (`pack-<id>.pack`).
    pub pack: Arc<str>,
    /// Offset of the chunk header in the pack file.
    pub chunk: u64,
    /// Offset of the member in the chunk's raw bytes.
    pub offset: u32,
    /// The member's size (the blob's length).
    pub size: u32,
}

/// One entry of a pack index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IdxEntry {
    /// The blob's SHA-256 (lowercase hex).
    pub sha: String,
    /// Offset of its chunk's header in the pack.
    pub chunk: u64,
    /// Offset in the chunk's raw bytes.
    pub offset: u32,
    /// Its length.
    pub size: u32,
}

/// Encodes a pack index: magic, entry count, entries (sorted by SHA-256), the pack
/// file's length, CRC-32 of everything before it.
pub(crate) fn encode_idx(entries: &[IdxEntry], pack_len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 4 + entries.len() * IDX_ENTRY + 12);
    out.extend_from_slice(IDX_MAGIC);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        let mut raw = [0u8; 32];
        let _ = hex::decode_to_slice(&e.sha, &mut raw);
        out.extend_from_slice(&raw);
        out.extend_from_slice(&e.chunk.to_le_bytes());
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.size.to_le_bytes());
    }
    out.extend_from_slice(&pack_len.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a pack index; returns its entries and the pack length it names, or what is
/// wrong with it.
pub(crate) fn decode_idx(bytes: &[u8]) -> Result<(Vec<IdxEntry>, u64), String> {
    if bytes.len() < 8 + 4 + 12 || &bytes[..8] != IDX_MAGIC {
        return Err("not a pack index (bad magic or too short)".into());
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let want = u32::from_le_bytes(crc.try_into().unwrap_or_default());
    if crc32fast::hash(body) != want {
        return Err("pack index checksum mismatch".into());
    }
    let count = u32::from_le_bytes(body[8..12].try_into().unwrap_or_default()) as usize;
    if body.len() != 12 + count * IDX_ENTRY + 8 {
        return Err(format!(
            "pack index of {count} entries has the wrong length"
        ));
    }
    let mut entries = Vec::with_capacity(count);
    for i in 0..count {
        let e = &body[12 + i * IDX_ENTRY..12 + (i + 1) * IDX_ENTRY];
        entries.push(IdxEntry {
            sha: hex::encode(&e[..32]),
            chunk: u64::from_le_bytes(e[32..40].try_into().unwrap_or_default()),
            offset: u32::from_le_bytes(e[40..44].try_into().unwrap_or_default()),
            size: u32::from_le_bytes(e[44..48].try_into().unwrap_or_default()),
        });
    }
    let pack_len = u64::from_le_bytes(body[body.len() - 8..].try_into().unwrap_or_default());
    Ok((entries, pack_len))
}

/// The zstd level chunks are written at. On generated source text in 64 KiB chunks:
/// level 3 compresses to 0.233 of the raw bytes at about 200 MB/s, level 9 to 0.209 at
/// about 33 MB/s (`ruzstd`'s fastest level: 0.32). A compaction runs off the tool calls,
/// when the host is idle, so the slower, smaller level; inflating is as fast at either
/// (about 700 MB/s).
pub(crate) const CHUNK_LEVEL: i32 = 9;

/// Encodes a chunk: header then the compressed bytes (one zstd frame; any encoder's
/// frame reads, so the level can change without a new pack version).
pub(crate) fn encode_chunk(raw: &[u8], members: u32) -> Vec<u8> {
    // Compressing from memory into memory fails only on an allocation failure; stored
    // as a raw zstd frame then (still a frame every reader accepts).
    let comp = zstd::bulk::compress(raw, CHUNK_LEVEL).unwrap_or_else(|_| raw_frame(raw));
    let mut out = Vec::with_capacity(CHUNK_HEADER + comp.len());
    out.extend_from_slice(CHUNK_MAGIC);
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&(comp.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&comp).to_le_bytes());
    out.extend_from_slice(&members.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&comp);
    out
}

/// `raw` as one zstd frame of raw blocks (no compression): magic, a frame header with the
/// content size and no window, then blocks of at most 128 KiB, the last one flagged.
fn raw_frame(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 16 + raw.len() / (128 << 10) * 3);
    out.extend_from_slice(&0xFD2F_B528u32.to_le_bytes());
    // Frame header descriptor: single segment, 8-byte content size.
    out.push(0b1110_0000);
    out.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    let mut blocks = raw.chunks(128 << 10).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0]);
    }
    while let Some(b) = blocks.next() {
        let last = u32::from(blocks.peek().is_none());
        let head = last | ((b.len() as u32) << 3);
        out.extend_from_slice(&head.to_le_bytes()[..3]);
        out.extend_from_slice(b);
    }
    out
}

/// A chunk header: `(raw length, compressed length, CRC-32)`, or what is wrong with it.
pub(crate) fn decode_chunk_header(h: &[u8]) -> Result<(u64, u64, u32), String> {
    if h.len() < CHUNK_HEADER || &h[..4] != CHUNK_MAGIC {
        return Err("bad chunk header".into());
    }
    let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap_or_default());
    let (raw, comp, crc) = (u64::from(word(4)), u64::from(word(8)), word(12));
    if raw > MAX_CHUNK_RAW || comp > MAX_CHUNK_RAW + (1 << 20) {
        return Err(format!(
            "chunk lengths out of range ({raw} raw, {comp} compressed)"
        ));
    }
    Ok((raw, comp, crc))
}

/// Decompresses a chunk's bytes (checked against the header's CRC-32 first) into its raw
/// bytes of exactly `raw` bytes, or says what is wrong.
pub(crate) fn inflate_chunk(comp: &[u8], raw: u64, crc: u32) -> Result<Vec<u8>, String> {
    if crc32fast::hash(comp) != crc {
        return Err("chunk checksum mismatch".into());
    }
    // Room for one byte more than expected, to see a longer chunk (a longer one fails as
    // not fitting).
    let out = zstd::bulk::decompress(comp, raw as usize + 1)
        .map_err(|e| format!("chunk does not decompress: {e}"))?;
    if out.len() as u64 != raw {
        return Err(format!(
            "chunk decompresses to {} bytes, its header says {raw}",
            out.len()
        ));
    }
    Ok(out)
}

/// The most raw chunk bytes a handle keeps inflated.
pub(crate) const CHUNK_CACHE_BYTES: usize = 16 << 20;

/// A chunk: its pack's id and its offset there.
type ChunkKey = (Arc<str>, u64);

/// The packs known to a store handle.
#[derive(Default)]
pub(crate) struct PackSet {
    /// Identity of `packs/` when the indexes were read (`None`: never read, or no `packs/`).
    seen: Option<(i64, i64, u64)>,
    /// Whether the indexes were read at all.
    loaded: bool,
    /// Blob → where it is packed.
    by_sha: HashMap<[u8; 32], PackLoc>,
    /// Open pack files.
    files: HashMap<Arc<str>, Arc<File>>,
    /// The chunks inflated last, newest at the back, with their raw bytes (at most
    /// [`CHUNK_CACHE_BYTES`] in all): a restore of many small files reads each chunk once
    /// or a few times, not once per member.
    recent: std::collections::VecDeque<(ChunkKey, Arc<Vec<u8>>)>,
}

/// The packs and the chunk cache of a store handle.
pub(crate) type Packs = Mutex<PackSet>;

fn raw_sha(sha: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(sha, &mut out).ok().map(|()| out)
}

/// The id in a pack index's name (`pack-<id>.idx`).
pub(crate) fn idx_id(name: &OsStr) -> Option<&str> {
    let n = name.to_str()?;
    let id = n.strip_prefix("pack-")?.strip_suffix(".idx")?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// `packs/pack-<id>.pack`.
pub(crate) fn pack_path(id: &str) -> PathBuf {
    Path::new(PACKS_DIR).join(format!("pack-{id}.pack"))
}

/// `packs/pack-<id>.idx`.
pub(crate) fn idx_path(id: &str) -> PathBuf {
    Path::new(PACKS_DIR).join(format!("pack-{id}.idx"))
}

impl StoreFs {
    /// The identity of `packs/` (mtime and inode), `None` when it does not exist.
    fn packs_dir_id(&self) -> Result<Option<(i64, i64, u64)>, FsFailure> {
        let path = Path::new(PACKS_DIR);
        self.check(FsOp::Stat, path)?;
        match rustix::fs::statat(&self.dir, path, AtFlags::SYMLINK_NOFOLLOW) {
            #[allow(clippy::unnecessary_cast)]
            Ok(st) => Ok(Some((
                st.st_mtime as i64,
                st.st_mtime_nsec as i64,
                st.st_ino as u64,
            ))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(fail(FsOp::Stat, Area::Store, path, e.into())),
        }
    }

    /// Reads every pack index again when `packs/` changed since they were read (or
    /// `force`). An index that cannot be read is skipped (verify names it).
    pub fn refresh_packs(&self, force: bool) -> Result<(), FsFailure> {
        let id = self.packs_dir_id()?;
        let mut set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
        if !force && set.loaded && set.seen == id {
            return Ok(());
        }
        let mut by_sha = HashMap::new();
        if id.is_some() {
            for name in self.list(Path::new(PACKS_DIR))? {
                let Some(pid) = idx_id(&name) else { continue };
                let Some(bytes) = self.read_opt(&idx_path(pid))? else {
                    continue;
                };
                let Ok((entries, _)) = decode_idx(&bytes) else {
                    continue;
                };
                let pack: Arc<str> = Arc::from(pid);
                for e in entries {
                    if let Some(raw) = raw_sha(&e.sha) {
                        by_sha.insert(
                            raw,
                            PackLoc {
                                pack: Arc::clone(&pack),
                                chunk: e.chunk,
                                offset: e.offset,
                                size: e.size,
                            },
                        );
                    }
                }
            }
        }
        set.by_sha = by_sha;
        set.files.clear();
        set.recent.clear();
        set.seen = id;
        set.loaded = true;
        Ok(())
    }

    /// Where blob `sha` is packed, if it is (the indexes read again when `packs/` changed).
    pub fn packed(&self, sha: &str) -> Result<Option<PackLoc>, FsFailure> {
        let Some(raw) = raw_sha(sha) else {
            return Ok(None);
        };
        self.refresh_packs(false)?;
        let set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
        Ok(set.by_sha.get(&raw).cloned())
    }

    /// Every packed blob and where it is (after reading the indexes again if needed).
    pub fn packed_all(&self) -> Result<Vec<(String, PackLoc)>, FsFailure> {
        self.refresh_packs(false)?;
        let set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<_> = set
            .by_sha
            .iter()
            .map(|(k, v)| (hex::encode(k), v.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn pack_file(&self, pack: &Arc<str>) -> Result<Arc<File>, FsFailure> {
        {
            let set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(f) = set.files.get(pack) {
                return Ok(Arc::clone(f));
            }
        }
        let path = pack_path(pack);
        let f = self.open_read(&path)?.ok_or_else(|| {
            fail(
                FsOp::Open,
                Area::Store,
                &path,
                io::Error::from(io::ErrorKind::NotFound),
            )
        })?;
        let f = Arc::new(f);
        let mut set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
        set.files.insert(Arc::clone(pack), Arc::clone(&f));
        Ok(f)
    }

    /// The raw bytes of the chunk at `chunk` of pack `pack`, checked (CRC-32, length).
    /// A damaged chunk is an `InvalidData` failure naming the pack and offset.
    pub fn read_pack_chunk(&self, pack: &Arc<str>, chunk: u64) -> Result<Arc<Vec<u8>>, FsFailure> {
        {
            let set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, bytes)) = set
                .recent
                .iter()
                .rev()
                .find(|((p, c), _)| p == pack && *c == chunk)
            {
                return Ok(Arc::clone(bytes));
            }
        }
        let path = pack_path(pack);
        let f = self.pack_file(pack)?;
        let bad = |d: String| {
            fail(
                FsOp::Read,
                Area::Store,
                &path,
                io::Error::new(io::ErrorKind::InvalidData, format!("chunk at {chunk}: {d}")),
            )
        };
        let head = self.read_at(&f, &path, chunk, CHUNK_HEADER as u64)?;
        let (raw, comp, crc) = decode_chunk_header(&head).map_err(bad)?;
        let bytes = self.read_at(&f, &path, chunk + CHUNK_HEADER as u64, comp)?;
        let raw = Arc::new(inflate_chunk(&bytes, raw, crc).map_err(bad)?);
        let mut set = self.packs.lock().unwrap_or_else(|p| p.into_inner());
        set.recent
            .push_back(((Arc::clone(pack), chunk), Arc::clone(&raw)));
        let mut held: usize = set.recent.iter().map(|(_, b)| b.len()).sum();
        while held > CHUNK_CACHE_BYTES && set.recent.len() > 1 {
            if let Some((_, b)) = set.recent.pop_front() {
                held -= b.len();
            }
        }
        Ok(raw)
    }

    /// The bytes of a packed blob (not yet checked against its name: the caller hashes
    /// them, as it does a loose blob's).
    pub fn read_packed(&self, loc: &PackLoc) -> Result<Vec<u8>, FsFailure> {
        let raw = self.read_pack_chunk(&loc.pack, loc.chunk)?;
        let (from, len) = (loc.offset as usize, loc.size as usize);
        match raw.get(from..from + len) {
            Some(b) => Ok(b.to_vec()),
            None => Err(fail(
                FsOp::Read,
                Area::Store,
                &pack_path(&loc.pack),
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("member at {from}+{len} is past its chunk's end"),
                ),
            )),
        }
    }

    /// `fsync` of a store file whatever the durability mode (a pack before the loose
    /// copies of its members go).
    pub fn sync_file_always(&self, f: &File, path: &Path) -> Result<(), FsFailure> {
        self.check(FsOp::Sync, path)?;
        f.sync_all()
            .map_err(|e| fail(FsOp::Sync, Area::Store, path, e))
    }

    /// `fsync` of a store directory whatever the durability mode.
    pub fn sync_dir_always(&self, path: &Path) -> Result<(), FsFailure> {
        self.check(FsOp::Sync, path)?;
        let d = if path.as_os_str().is_empty() {
            self.dir.try_clone()
        } else {
            self.dir.open_dir(path)
        }
        .map_err(|e| fail(FsOp::Open, Area::Store, path, e))?;
        rewind_durable::sync_dir(&d).map_err(|e| fail(FsOp::Sync, Area::Store, path, e))
    }
}

/// An open blob: a loose file, or a packed member read into memory.
pub(crate) enum BlobSrc {
    /// `blobs/<sha256>`.
    Loose(File),
    /// A member of a pack (its bytes, not yet checked against its name).
    Packed(io::Cursor<Vec<u8>>),
}

impl Read for BlobSrc {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BlobSrc::Loose(f) => f.read(buf),
            BlobSrc::Packed(c) => c.read(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_round_trips_and_a_flipped_byte_is_refused() {
        let e = vec![IdxEntry {
            sha: "ab".repeat(32),
            chunk: 8,
            offset: 3,
            size: 5,
        }];
        let bytes = encode_idx(&e, 99);
        assert_eq!(decode_idx(&bytes).unwrap(), (e, 99));
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode_idx(&b).is_err(), "flipped byte {i} accepted");
        }
        assert!(decode_idx(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn a_chunk_written_by_the_earlier_encoder_still_reads() {
        // Packs written before libzstd hold frames of `ruzstd`'s fastest level: same header,
        // same checks.
        let raw: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("let v{} = {};\n", i % 97, i * 7).into_bytes())
            .collect();
        let comp = ruzstd::encoding::compress_to_vec(
            &raw[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let crc = crc32fast::hash(&comp);
        assert_eq!(inflate_chunk(&comp, raw.len() as u64, crc).unwrap(), raw);
        // And this build's chunks are smaller than that encoder's on the same text.
        let ours = encode_chunk(&raw, 1);
        assert!(
            ours.len() - CHUNK_HEADER < comp.len(),
            "{} >= {}",
            ours.len() - CHUNK_HEADER,
            comp.len()
        );
    }

    #[test]
    fn the_uncompressed_fallback_is_a_frame_both_decoders_read() {
        for len in [0usize, 1, 1000, 128 << 10, (128 << 10) + 1, 300_000] {
            let raw: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let frame = raw_frame(&raw);
            let crc = crc32fast::hash(&frame);
            assert_eq!(
                inflate_chunk(&frame, len as u64, crc).unwrap(),
                raw,
                "{len}"
            );
            let mut back = Vec::new();
            ruzstd::decoding::StreamingDecoder::new(&frame[..])
                .unwrap()
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, raw, "{len} (ruzstd)");
        }
    }

    #[test]
    fn a_chunk_round_trips_and_damage_is_named() {
        let raw: Vec<u8> = b"hello hello hello packed world ".repeat(100);
        let c = encode_chunk(&raw, 1);
        let (len, comp, crc) = decode_chunk_header(&c).unwrap();
        assert!(comp < len, "compressed ({comp}) smaller than raw ({len})");
        let body = &c[CHUNK_HEADER..];
        assert_eq!(inflate_chunk(body, len, crc).unwrap(), raw);
        let mut flipped = body.to_vec();
        flipped[body.len() / 2] ^= 1;
        assert!(
            inflate_chunk(&flipped, len, crc)
                .unwrap_err()
                .contains("checksum")
        );
        assert!(inflate_chunk(&body[..body.len() - 3], len, crc).is_err());
        assert!(
            inflate_chunk(body, len + 1, crc)
                .unwrap_err()
                .contains("decompresses")
        );
    }
}
