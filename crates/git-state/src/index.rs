//! The index file (`.git/index`): its identity, and what it holds apart from the stat data
//! git refreshes on every `git status`.

use sha2::{Digest, Sha256};

/// The identity of an index file's bytes: its trailing checksum (the SHA-1 git writes over
/// the file), or — when git left it zero (`index.skipHash`) or the file is too short — the
/// SHA-256 of the bytes, prefixed `sha256-`.
pub fn index_id(bytes: &[u8]) -> String {
    if bytes.len() >= 32 {
        let trailer = &bytes[bytes.len() - 20..];
        if trailer.iter().any(|b| *b != 0) {
            return hex::encode(trailer);
        }
    }
    format!("sha256-{}", hex::encode(Sha256::digest(bytes)))
}

/// A digest of what an index holds for git's purposes — each entry's path, mode, object id
/// and stage, and its extensions other than the cached trees — without the stat data, so two
/// indexes that differ only by a `git status` refresh have the same content digest. `None`
/// for bytes that are not an index of version 2, 3 or 4 with SHA-1 object names.
pub fn index_content(bytes: &[u8]) -> Option<String> {
    if bytes.len() < 12 + 20 || &bytes[..4] != b"DIRC" {
        return None;
    }
    let version = u32::from_be_bytes(bytes[4..8].try_into().ok()?);
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = u32::from_be_bytes(bytes[8..12].try_into().ok()?) as usize;
    let end = bytes.len() - 20;
    let mut h = Sha256::new();
    let mut at = 12usize;
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let fixed = bytes.get(at..at + 62)?;
        let mode = &fixed[24..28];
        let oid = &fixed[40..60];
        let flags = u16::from_be_bytes([fixed[60], fixed[61]]);
        at += 62;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let path: Vec<u8> = if version == 4 {
            // A varint of bytes to strip from the previous path, then the rest, NUL-ended.
            let mut strip: usize = 0;
            let mut first = true;
            loop {
                let b = *bytes.get(at)?;
                at += 1;
                if !first {
                    strip = strip.checked_add(1)?;
                }
                first = false;
                strip = (strip << 7) | usize::from(b & 0x7f);
                if b & 0x80 == 0 {
                    break;
                }
            }
            let nul = bytes.get(at..end)?.iter().position(|b| *b == 0)?;
            let keep = prev.len().checked_sub(strip)?;
            let mut p = prev[..keep].to_vec();
            p.extend_from_slice(&bytes[at..at + nul]);
            at += nul + 1;
            p
        } else {
            let nul = bytes.get(at..end)?.iter().position(|b| *b == 0)?;
            let p = bytes[at..at + nul].to_vec();
            // Entries are padded with 1–8 NULs to a multiple of 8 bytes.
            let len = at + nul - start;
            at = start + (len + 8) / 8 * 8;
            p
        };
        h.update(mode);
        h.update(oid);
        h.update([((flags >> 12) & 0x3) as u8]);
        h.update((path.len() as u32).to_be_bytes());
        h.update(&path);
        prev = path;
    }
    // Extensions: 4-byte signature, 4-byte length, data. The cached trees (`TREE`) and the
    // untracked cache (`UNTR`) and the fsmonitor token (`FSMN`) are caches; the rest (the
    // resolve-undo record, split/sparse markers) count.
    while at + 8 <= end {
        let sig = &bytes[at..at + 4];
        let len = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
        let data = bytes.get(at + 8..at.checked_add(8 + len)?)?;
        if !matches!(sig, b"TREE" | b"UNTR" | b"FSMN" | b"EOIE" | b"IEOT") {
            h.update(sig);
            h.update(data);
        }
        at += 8 + len;
    }
    Some(hex::encode(h.finalize()))
}
