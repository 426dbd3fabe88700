//! Reading blobs from a repository's object store, natively: loose objects (zlib) and
//! packs (`.idx` version 2 lookup, offset and ref deltas resolved), with the
//! `objects/info/alternates` the repository names. Every blob read is checked against its
//! object id before it is returned: a wrong or damaged object is an error, never content.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::index_entries::BlobHasher;

/// Why an object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OdbError {
    /// A file of the object store could not be read.
    #[error("reading `{path}`: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// An object or pack is damaged (bad zlib stream, bad delta, bad header, wrong id).
    #[error("damaged object {oid} in `{path}`: {why}")]
    Damaged {
        /// The object id asked for (hex).
        oid: String,
        /// Where it was read from.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The object exists but is not a blob.
    #[error("object {oid} is a {kind}, not a blob")]
    NotBlob {
        /// The object id (hex).
        oid: String,
        /// Its type.
        kind: &'static str,
    },
}

/// The longest delta chain followed (git's default `pack.depth` is 50).
const MAX_CHAIN: usize = 10_000;

/// One pack: its index, read whole, and its data file.
struct Pack {
    pack_path: PathBuf,
    /// Object count.
    n: usize,
    idx: Vec<u8>,
    pack: File,
    pack_len: u64,
}

impl Pack {
    fn open(idx_path: PathBuf) -> Result<Option<Pack>, OdbError> {
        let pack_path = idx_path.with_extension("pack");
        let io = |p: &Path, e| OdbError::Io {
            path: p.to_path_buf(),
            source: e,
        };
        let idx = match std::fs::read(&idx_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&idx_path, e)),
        };
        let pack = match File::open(&pack_path) {
            Ok(f) => f,
            // An index without its pack (being written or removed): not a pack yet.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&pack_path, e)),
        };
        let pack_len = pack.metadata().map_err(|e| io(&pack_path, e))?.len();
        let bad = |why: &str| OdbError::Damaged {
            oid: String::new(),
            path: idx_path.clone(),
            why: why.into(),
        };
        if idx.len() < 8 + 256 * 4 + 40 || &idx[..4] != b"\xfftOc" || idx[4..8] != [0, 0, 0, 2] {
            return Err(bad("not a version-2 pack index"));
        }
        let n = be32(&idx, 8 + 255 * 4) as usize;
        if idx.len() < 8 + 256 * 4 + n * 28 + 40 {
            return Err(bad("pack index shorter than its object count"));
        }
        Ok(Some(Pack {
            pack_path,
            n,
            idx,
            pack,
            pack_len,
        }))
    }

    /// The pack offset of `oid`, when the pack holds it.
    fn find(&self, oid: &[u8; 20]) -> Option<u64> {
        let fan = |i: usize| be32(&self.idx, 8 + i * 4) as usize;
        let first = usize::from(oid[0]);
        let (mut lo, mut hi) = (if first == 0 { 0 } else { fan(first - 1) }, fan(first));
        let names = 8 + 256 * 4;
        hi = hi.min(self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let name = &self.idx[names + mid * 20..names + mid * 20 + 20];
            match name.cmp(oid.as_slice()) {
                std::cmp::Ordering::Equal => return Some(self.offset(mid)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    fn offset(&self, i: usize) -> u64 {
        let offs = 8 + 256 * 4 + self.n * 24;
        let o = be32(&self.idx, offs + i * 4);
        if o & 0x8000_0000 == 0 {
            return u64::from(o);
        }
        let large = offs + self.n * 4 + (o & 0x7fff_ffff) as usize * 8;
        self.idx
            .get(large..large + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(u64::MAX)
    }

    fn read_at(&self, at: u64, len: usize) -> Result<Vec<u8>, OdbError> {
        let len = len.min(usize::try_from(self.pack_len.saturating_sub(at)).unwrap_or(usize::MAX));
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match self.pack.read_at(&mut buf[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(OdbError::Io {
                        path: self.pack_path.clone(),
                        source: e,
                    });
                }
            }
        }
        buf.truncate(got);
        Ok(buf)
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A repository's object store, opened for reading blobs.
pub struct Odb {
    /// `objects/` and the alternates it names, in lookup order.
    dirs: Vec<PathBuf>,
    /// Packs of every directory, read on first need (and again once when an object is
    /// not found: a `git gc` may have packed or repacked meanwhile).
    packs: Mutex<Option<Vec<Pack>>>,
}

/// A piece of a pack entry: its type and where its (zlib) data starts.
enum Entry {
    Base(u8, Vec<u8>),
    Ofs(u64),
    Ref([u8; 20]),
}

impl Odb {
    /// The object store of the repository whose common directory is `common_dir`.
    pub fn open(common_dir: &Path) -> Odb {
        let objects = common_dir.join("objects");
        let mut dirs = vec![objects.clone()];
        if let Ok(text) = std::fs::read_to_string(objects.join("info").join("alternates")) {
            for line in text.lines() {
                let l = line.trim();
                if l.is_empty() || l.starts_with('#') {
                    continue;
                }
                let p = Path::new(l);
                dirs.push(if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    objects.join(p)
                });
            }
        }
        Odb {
            dirs,
            packs: Mutex::new(None),
        }
    }

    /// The `objects/` directory (the first one searched).
    pub fn objects_dir(&self) -> &Path {
        &self.dirs[0]
    }

    fn load_packs(&self) -> Result<Vec<Pack>, OdbError> {
        let mut out = Vec::new();
        for d in &self.dirs {
            let dir = d.join("pack");
            let Ok(list) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names: Vec<PathBuf> = list
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "idx"))
                .collect();
            names.sort();
            for p in names {
                if let Some(pack) = Pack::open(p)? {
                    out.push(pack);
                }
            }
        }
        Ok(out)
    }

    /// The blob `oid`, checked against its id; `Ok(None)` when the repository does not
    /// hold it (neither loose nor in a pack).
    pub fn read_blob(&self, oid: &[u8; 20]) -> Result<Option<Vec<u8>>, OdbError> {
        let Some((kind, data, from)) = self.read_object(oid, 0)? else {
            return Ok(None);
        };
        if kind != 3 {
            return Err(OdbError::NotBlob {
                oid: hex::encode(oid),
                kind: kind_name(kind),
            });
        }
        let mut h = BlobHasher::new(data.len() as u64);
        h.update(&data);
        if h.finish() != *oid {
            return Err(OdbError::Damaged {
                oid: hex::encode(oid),
                path: from,
                why: "its content does not hash to its id".into(),
            });
        }
        Ok(Some(data))
    }

    /// Whether the repository holds object `oid` (loose or packed), without reading it.
    pub fn contains(&self, oid: &[u8; 20]) -> Result<bool, OdbError> {
        if self.loose_path(oid).is_some() {
            return Ok(true);
        }
        for again in [false, true] {
            let mut g = self.packs.lock().unwrap_or_else(|p| p.into_inner());
            if again || g.is_none() {
                *g = Some(self.load_packs()?);
            }
            if g.as_ref()
                .is_some_and(|ps| ps.iter().any(|p| p.find(oid).is_some()))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn loose_path(&self, oid: &[u8; 20]) -> Option<PathBuf> {
        let h = hex::encode(oid);
        self.dirs
            .iter()
            .map(|d| d.join(&h[..2]).join(&h[2..]))
            .find(|p| p.is_file())
    }

    /// Any object: its type (1 commit, 2 tree, 3 blob, 4 tag), its content and the file
    /// it came from.
    fn read_object(
        &self,
        oid: &[u8; 20],
        depth: usize,
    ) -> Result<Option<(u8, Vec<u8>, PathBuf)>, OdbError> {
        if depth > MAX_CHAIN {
            return Err(OdbError::Damaged {
                oid: hex::encode(oid),
                path: self.dirs[0].clone(),
                why: "delta chain too long (a cycle?)".into(),
            });
        }
        if let Some(p) = self.loose_path(oid) {
            return self.read_loose(oid, &p).map(|(k, d)| Some((k, d, p)));
        }
        for again in [false, true] {
            let mut g = self.packs.lock().unwrap_or_else(|p| p.into_inner());
            if again || g.is_none() {
                *g = Some(self.load_packs()?);
            }
            let packs = g.as_ref().map(Vec::as_slice).unwrap_or(&[]);
            if let Some((i, at)) = packs
                .iter()
                .enumerate()
                .find_map(|(i, p)| p.find(oid).map(|at| (i, at)))
            {
                let (kind, data) = self.read_packed(packs, i, at, oid, depth)?;
                return Ok(Some((kind, data, packs[i].pack_path.clone())));
            }
            drop(g);
            // Packed or pruned since the loose lookup (`git gc` running now)?
            if let Some(p) = self.loose_path(oid) {
                return self.read_loose(oid, &p).map(|(k, d)| Some((k, d, p)));
            }
        }
        Ok(None)
    }

    fn read_loose(&self, oid: &[u8; 20], p: &Path) -> Result<(u8, Vec<u8>), OdbError> {
        let raw = std::fs::read(p).map_err(|e| OdbError::Io {
            path: p.to_path_buf(),
            source: e,
        })?;
        let bad = |why: String| OdbError::Damaged {
            oid: hex::encode(oid),
            path: p.to_path_buf(),
            why,
        };
        let all = miniz_oxide::inflate::decompress_to_vec_zlib(&raw)
            .map_err(|e| bad(format!("zlib: {e:?}")))?;
        let nul = all
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(|| bad("no header".into()))?;
        let head = std::str::from_utf8(&all[..nul]).map_err(|_| bad("bad header".into()))?;
        let (kind, len) = head
            .split_once(' ')
            .ok_or_else(|| bad("bad header".into()))?;
        let kind = match kind {
            "commit" => 1,
            "tree" => 2,
            "blob" => 3,
            "tag" => 4,
            _ => return Err(bad(format!("unknown type `{kind}`"))),
        };
        let len: usize = len.parse().map_err(|_| bad("bad length".into()))?;
        if all.len() - nul - 1 != len {
            return Err(bad("length does not match the header".into()));
        }
        Ok((kind, all[nul + 1..].to_vec()))
    }

    /// The object at `at` of pack `i`, deltas resolved.
    fn read_packed(
        &self,
        packs: &[Pack],
        i: usize,
        at: u64,
        oid: &[u8; 20],
        depth: usize,
    ) -> Result<(u8, Vec<u8>), OdbError> {
        let pack = &packs[i];
        let bad = |why: String| OdbError::Damaged {
            oid: hex::encode(oid),
            path: pack.pack_path.clone(),
            why,
        };
        // Deltas are applied from the base up: collect the chain first.
        let mut chain: Vec<Vec<u8>> = Vec::new();
        let mut pos = at;
        let (kind, mut data) = loop {
            if chain.len() + depth > MAX_CHAIN {
                return Err(bad("delta chain too long".into()));
            }
            match self.entry(pack, pos, &bad)? {
                (Entry::Base(kind, data), _) => break (kind, data),
                (Entry::Ofs(base), delta) => {
                    chain.push(delta);
                    pos = base;
                }
                (Entry::Ref(base), delta) => {
                    chain.push(delta);
                    match pack.find(&base) {
                        Some(p) => pos = p,
                        None => {
                            // The base is elsewhere (a thin pack completed by git, or another
                            // pack): read it as any object.
                            let (k, d) = match packs
                                .iter()
                                .enumerate()
                                .find_map(|(j, p)| p.find(&base).map(|a| (j, a)))
                            {
                                Some((j, a)) => {
                                    self.read_packed(packs, j, a, &base, depth + chain.len())?
                                }
                                None => match self.loose_path(&base) {
                                    Some(lp) => self.read_loose(&base, &lp)?,
                                    None => {
                                        return Err(bad(format!(
                                            "delta base {} is missing",
                                            hex::encode(base)
                                        )));
                                    }
                                },
                            };
                            break (k, d);
                        }
                    }
                }
            }
        };
        while let Some(delta) = chain.pop() {
            data = apply_delta(&data, &delta).map_err(|w| bad(w.into()))?;
        }
        Ok((kind, data))
    }

    /// The entry at `pos`: a base object's type and content, or a delta's base and data.
    fn entry(
        &self,
        pack: &Pack,
        pos: u64,
        bad: &dyn Fn(String) -> OdbError,
    ) -> Result<(Entry, Vec<u8>), OdbError> {
        if pos < 12 || pos >= pack.pack_len.saturating_sub(20) {
            return Err(bad(format!("offset {pos} outside the pack")));
        }
        let head = pack.read_at(pos, 32)?;
        let mut i = 0usize;
        let byte = |i: usize| {
            head.get(i)
                .copied()
                .ok_or_else(|| bad("truncated entry".into()))
        };
        let mut c = byte(i)?;
        i += 1;
        let kind = (c >> 4) & 7;
        let mut size = u64::from(c & 0x0f);
        let mut shift = 4;
        while c & 0x80 != 0 {
            c = byte(i)?;
            i += 1;
            if shift > 57 {
                return Err(bad("entry size too large".into()));
            }
            size |= u64::from(c & 0x7f) << shift;
            shift += 7;
        }
        let base = match kind {
            6 => {
                let mut c = byte(i)?;
                i += 1;
                let mut off = u64::from(c & 0x7f);
                while c & 0x80 != 0 {
                    c = byte(i)?;
                    i += 1;
                    off = off
                        .checked_add(1)
                        .and_then(|o| o.checked_mul(128))
                        .ok_or_else(|| bad("delta offset too large".into()))?
                        | u64::from(c & 0x7f);
                }
                Some(Entry::Ofs(
                    pos.checked_sub(off)
                        .filter(|b| *b < pos)
                        .ok_or_else(|| bad("delta base before the pack".into()))?,
                ))
            }
            7 => {
                let b = head
                    .get(i..i + 20)
                    .ok_or_else(|| bad("truncated entry".into()))?;
                i += 20;
                Some(Entry::Ref(b.try_into().unwrap_or([0; 20])))
            }
            1..=4 => None,
            k => return Err(bad(format!("unknown entry type {k}"))),
        };
        let size = usize::try_from(size).map_err(|_| bad("entry too large".into()))?;
        // A zlib stream of `size` bytes is at most that plus 5 bytes per 16 KiB stored block
        // and its header and checksum: read that much (or to the end of the pack).
        let room = size.saturating_add(size / 8192).saturating_add(64);
        let raw = pack.read_at(pos + i as u64, room)?;
        let data = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&raw, size)
            .map_err(|e| bad(format!("zlib: {:?}", e.status)))?;
        if data.len() != size {
            return Err(bad("inflated size does not match the entry".into()));
        }
        Ok(match base {
            None => (Entry::Base(kind, data), Vec::new()),
            Some(b) => (b, data),
        })
    }
}

impl std::fmt::Debug for Odb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Odb").field("dirs", &self.dirs).finish()
    }
}

fn kind_name(k: u8) -> &'static str {
    match k {
        1 => "commit",
        2 => "tree",
        3 => "blob",
        4 => "tag",
        _ => "unknown object",
    }
}

/// Applies a git delta (`base` size, result size, then copy and insert instructions).
fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut i = 0usize;
    let varint = |i: &mut usize| -> Result<u64, &'static str> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let c = *delta.get(*i).ok_or("truncated delta header")?;
            *i += 1;
            if shift > 63 {
                return Err("delta header too long");
            }
            v |= u64::from(c & 0x7f) << shift;
            shift += 7;
            if c & 0x80 == 0 {
                return Ok(v);
            }
        }
    };
    let src = varint(&mut i)?;
    let dst = varint(&mut i)?;
    if src != base.len() as u64 {
        return Err("delta base size does not match");
    }
    let dst = usize::try_from(dst).map_err(|_| "delta result too large")?;
    let mut out = Vec::with_capacity(dst);
    while i < delta.len() {
        let cmd = delta[i];
        i += 1;
        if cmd & 0x80 != 0 {
            let mut off = 0usize;
            let mut len = 0usize;
            for b in 0..4 {
                if cmd & (1 << b) != 0 {
                    off |= usize::from(*delta.get(i).ok_or("truncated copy")?) << (8 * b);
                    i += 1;
                }
            }
            for b in 0..3 {
                if cmd & (0x10 << b) != 0 {
                    len |= usize::from(*delta.get(i).ok_or("truncated copy")?) << (8 * b);
                    i += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let piece = off
                .checked_add(len)
                .and_then(|e| base.get(off..e))
                .ok_or("copy outside the base")?;
            out.extend_from_slice(piece);
        } else if cmd != 0 {
            let n = usize::from(cmd);
            out.extend_from_slice(delta.get(i..i + n).ok_or("truncated insert")?);
            i += n;
        } else {
            return Err("reserved delta instruction 0");
        }
        if out.len() > dst {
            return Err("delta result longer than announced");
        }
    }
    if out.len() != dst {
        return Err("delta result size does not match");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_copy_and_insert_and_refuse_damage() {
        let base = b"hello, world";
        // src 12, dst 11: copy 5 bytes at 0, insert "!!", copy 4 bytes at 8 ("orld").
        let d = [12, 11, 0x90, 5, 2, b'!', b'!', 0x91, 8, 4];
        assert_eq!(apply_delta(base, &d).unwrap(), b"hello!!orld");
        // Wrong base size, a copy past the base, a reserved instruction, a short result.
        assert!(apply_delta(base, &[11, 1, 1, b'x']).is_err());
        assert!(apply_delta(base, &[12, 5, 0x91, 10, 5]).is_err());
        assert!(apply_delta(base, &[12, 1, 0]).is_err());
        assert!(apply_delta(base, &[12, 3, 1, b'x']).is_err());
    }
}
