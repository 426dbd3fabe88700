//! The entries of an index file (`.git/index`): each path's stat data, mode and object id,
//! read natively (versions 2, 3 and 4, with version 4's path compression).
//!
//! What is read is only used to tell whether a work-tree file is the blob the index names
//! (git's own rule: the file's `lstat` matches the entry's stat data and the entry is not
//! racily clean). Anything this reader cannot be sure of — a split index, sparse directory
//! entries, an unknown required extension, SHA-256 object names, a damaged checksum — is
//! refused as a whole ([`EntriesError`]), and the caller reads the files instead.

use sha1::{Digest, Sha1};

/// One stage-0 entry of an index: a path git tracks, with the stat data git recorded for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The path, relative to the work tree, `/`-separated.
    pub path: Vec<u8>,
    /// Status-change time, seconds (git keeps the low 32 bits).
    pub ctime_s: u32,
    /// Status-change time, nanoseconds.
    pub ctime_ns: u32,
    /// Modification time, seconds (low 32 bits).
    pub mtime_s: u32,
    /// Modification time, nanoseconds.
    pub mtime_ns: u32,
    /// Device (low 32 bits).
    pub dev: u32,
    /// Inode number (low 32 bits).
    pub ino: u32,
    /// The git mode: `0o100644`, `0o100755`, `0o120000` (symlink) or `0o160000` (gitlink).
    pub mode: u32,
    /// Size in bytes (low 32 bits).
    pub size: u32,
    /// The blob's SHA-1 object id.
    pub oid: [u8; 20],
}

/// The entries of an index file that a work-tree file may be matched against.
#[derive(Debug, Clone, Default)]
pub struct IndexEntries {
    /// The index format version (2, 3 or 4).
    pub version: u32,
    /// Stage-0 entries of regular files (mode `100644` / `100755`), sorted by path. Entries
    /// marked skip-worktree, intent-to-add or assume-unchanged, conflict stages, symlinks
    /// and gitlinks are left out: none of them says what the work-tree file holds.
    pub entries: Vec<IndexEntry>,
}

impl IndexEntries {
    /// The entry of `path`, if the index holds one this reader kept.
    pub fn get(&self, path: &[u8]) -> Option<&IndexEntry> {
        self.entries
            .binary_search_by(|e| e.path.as_slice().cmp(path))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// Why the entries of an index were not read (the caller reads the files instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntriesError {
    /// Not an index file (`DIRC` magic), or a version other than 2, 3 or 4.
    #[error("not an index of version 2, 3 or 4")]
    NotIndex,
    /// The trailing checksum does not match the bytes (a torn or damaged file).
    #[error("the index's checksum does not match its bytes")]
    Checksum,
    /// A split index (`link` extension): the entries are partly in a shared index.
    #[error("a split index is not read")]
    Split,
    /// A sparse index (`sdir` extension): directories stand for the files under them.
    #[error("a sparse index is not read")]
    Sparse,
    /// A required extension (its signature starts with a lowercase letter) this reader
    /// does not know.
    #[error("the index has a required extension `{0}` that is not read")]
    Extension(String),
    /// The bytes end early or hold something impossible.
    #[error("malformed index: {0}")]
    Malformed(&'static str),
}

/// Git's extended-flag bits (second flags word, versions 3 and 4).
const SKIP_WORKTREE: u16 = 1 << 14;
const INTENT_TO_ADD: u16 = 1 << 13;
/// First flags word.
const ASSUME_VALID: u16 = 0x8000;
const EXTENDED: u16 = 0x4000;

fn be32(b: &[u8], at: usize) -> Result<u32, EntriesError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or(EntriesError::Malformed("truncated entry"))
}

/// Reads the entries of an index file's bytes (SHA-1 object names). The trailing checksum
/// is checked unless git left it zero (`index.skipHash`).
pub fn read_entries(bytes: &[u8]) -> Result<IndexEntries, EntriesError> {
    if bytes.len() < 12 + 20 || &bytes[..4] != b"DIRC" {
        return Err(EntriesError::NotIndex);
    }
    let version = be32(bytes, 4)?;
    if !(2..=4).contains(&version) {
        return Err(EntriesError::NotIndex);
    }
    let end = bytes.len() - 20;
    let trailer = &bytes[end..];
    if trailer.iter().any(|b| *b != 0) && Sha1::digest(&bytes[..end]).as_slice() != trailer {
        return Err(EntriesError::Checksum);
    }
    let count = be32(bytes, 8)? as usize;
    let mut out = Vec::with_capacity(count.min(1 << 22));
    let mut at = 12usize;
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let fixed = bytes
            .get(at..at + 62)
            .filter(|_| at + 62 <= end)
            .ok_or(EntriesError::Malformed("truncated entry"))?;
        let f = |i: usize| u32::from_be_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
        let mut oid = [0u8; 20];
        oid.copy_from_slice(&fixed[40..60]);
        let flags = u16::from_be_bytes([fixed[60], fixed[61]]);
        at += 62;
        let mut ext = 0u16;
        if flags & EXTENDED != 0 {
            if version < 3 {
                return Err(EntriesError::Malformed(
                    "extended flags in a version-2 index",
                ));
            }
            let b = bytes
                .get(at..at + 2)
                .ok_or(EntriesError::Malformed("truncated entry"))?;
            ext = u16::from_be_bytes([b[0], b[1]]);
            at += 2;
        }
        let path: Vec<u8> = if version == 4 {
            // A varint (git's offset encoding) of bytes to strip from the previous path,
            // then the rest of the path, NUL-ended; no padding.
            let mut strip: usize = 0;
            let mut first = true;
            loop {
                let b = *bytes
                    .get(at)
                    .ok_or(EntriesError::Malformed("truncated path"))?;
                at += 1;
                if !first {
                    strip = strip
                        .checked_add(1)
                        .ok_or(EntriesError::Malformed("path prefix length"))?;
                }
                first = false;
                strip = strip
                    .checked_mul(128)
                    .ok_or(EntriesError::Malformed("path prefix length"))?
                    | usize::from(b & 0x7f);
                if b & 0x80 == 0 {
                    break;
                }
            }
            let nul = bytes
                .get(at..end)
                .and_then(|s| s.iter().position(|b| *b == 0))
                .ok_or(EntriesError::Malformed("unterminated path"))?;
            let keep = prev
                .len()
                .checked_sub(strip)
                .ok_or(EntriesError::Malformed(
                    "path prefix longer than the previous path",
                ))?;
            let mut p = prev[..keep].to_vec();
            p.extend_from_slice(&bytes[at..at + nul]);
            at += nul + 1;
            p
        } else {
            let nul = bytes
                .get(at..end)
                .and_then(|s| s.iter().position(|b| *b == 0))
                .ok_or(EntriesError::Malformed("unterminated path"))?;
            let p = bytes[at..at + nul].to_vec();
            // Entries are padded with 1–8 NULs to a multiple of 8 bytes.
            let len = at + nul - start;
            at = start + (len + 8) / 8 * 8;
            p
        };
        if at > end {
            return Err(EntriesError::Malformed("entry past the end"));
        }
        let mode = f(24);
        let stage = (flags >> 12) & 0x3;
        let regular = mode == 0o100644 || mode == 0o100755;
        let unreliable = flags & ASSUME_VALID != 0 || ext & (SKIP_WORKTREE | INTENT_TO_ADD) != 0;
        if stage == 0 && regular && !unreliable {
            out.push(IndexEntry {
                path: path.clone(),
                ctime_s: f(0),
                ctime_ns: f(4),
                mtime_s: f(8),
                mtime_ns: f(12),
                dev: f(16),
                ino: f(20),
                mode,
                size: f(36),
                oid,
            });
        }
        prev = path;
    }
    // Extensions: signature, length, data. A signature starting with an uppercase letter
    // is optional (a cache) and skipped; a lowercase one is required.
    while at + 8 <= end {
        let sig = &bytes[at..at + 4];
        let len = be32(bytes, at + 4)? as usize;
        let next = at
            .checked_add(8 + len)
            .filter(|n| *n <= end)
            .ok_or(EntriesError::Malformed("extension past the end"))?;
        match sig {
            b"link" => return Err(EntriesError::Split),
            b"sdir" => return Err(EntriesError::Sparse),
            s if s[0].is_ascii_uppercase() => {}
            s => {
                return Err(EntriesError::Extension(
                    String::from_utf8_lossy(s).into_owned(),
                ));
            }
        }
        at = next;
    }
    if at != end {
        return Err(EntriesError::Malformed(
            "trailing bytes before the checksum",
        ));
    }
    // Git sorts by path, then stage; stage-0 entries alone stay sorted. Checked, as
    // [`IndexEntries::get`] relies on it.
    if out.windows(2).any(|w| w[0].path >= w[1].path) {
        return Err(EntriesError::Malformed("entries out of order"));
    }
    Ok(IndexEntries {
        version,
        entries: out,
    })
}

/// The git blob object id of `content`: SHA-1 of `blob <len>\0` and the bytes.
pub fn blob_oid(content: &[u8]) -> [u8; 20] {
    let mut h = BlobHasher::new(content.len() as u64);
    h.update(content);
    h.finish()
}

/// The git blob object id of content of a known length, fed in pieces.
#[derive(Clone)]
pub struct BlobHasher(Sha1);

impl BlobHasher {
    /// A hasher for a blob of `len` bytes.
    pub fn new(len: u64) -> Self {
        let mut h = Sha1::new();
        h.update(format!("blob {len}\0").as_bytes());
        BlobHasher(h)
    }

    /// Feeds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The object id (valid when exactly the announced length was fed).
    pub fn finish(self) -> [u8; 20] {
        self.0.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            hex::encode(blob_oid(b"hello\n")),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        // The empty blob.
        assert_eq!(
            hex::encode(blob_oid(b"")),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
    }

    #[test]
    fn bad_bytes_are_refused() {
        assert_eq!(read_entries(b"nope").unwrap_err(), EntriesError::NotIndex);
        let mut b = b"DIRC\0\0\0\x05\0\0\0\0".to_vec();
        b.extend_from_slice(&[0; 20]);
        assert_eq!(read_entries(&b).unwrap_err(), EntriesError::NotIndex);
        // Version 2, one entry announced, none there.
        let mut b = b"DIRC\0\0\0\x02\0\0\0\x01".to_vec();
        b.extend_from_slice(&[0; 20]);
        assert!(matches!(read_entries(&b), Err(EntriesError::Malformed(_))));
        // A wrong checksum.
        let mut b = b"DIRC\0\0\0\x02\0\0\0\0".to_vec();
        b.extend_from_slice(&[1; 20]);
        assert_eq!(read_entries(&b).unwrap_err(), EntriesError::Checksum);
    }
}
