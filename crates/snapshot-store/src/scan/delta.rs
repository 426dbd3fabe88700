//! The workspace index's delta file: `workspaces/<key>/index.delta`, beside `index.bin`
//! (documented byte by byte in `docs/format.md`, section "Workspace index delta").
//!
//! A scan that changes entries appends one checksummed frame (the entries it set or
//! removed, the index's header fields and entry count after it) instead of writing the
//! whole index; the index is the base file with the delta's valid frames applied in
//! order. The delta names the base it applies to by the base file's checksum (its last 32
//! bytes): a delta left from before the base was rewritten is ignored. A frame that is
//! cut short or fails its checksum ends the delta (what a crash while appending leaves:
//! the index is then as the previous scan left it). A delta written by a newer version
//! fails closed, as the index does.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Fault, NewerVersion};

use super::index::{
    Coverage, FLAG_BASELINE_COMPLETE, INDEX_VERSION, IdxEntry, Index, PATH_MAX_LEN, Prev, Reader,
    corrupt, put_compact, put_cov, put_var, read_compact, read_cov,
};

/// The delta file's first eight bytes.
pub(crate) const MAGIC: &[u8; 8] = b"DSHRWID\n";
/// The newest delta version this build reads, and the one it writes.
pub(crate) const DELTA_VERSION: u32 = 1;
/// Bytes of the delta file's head: magic, version, the base index's checksum.
pub(crate) const HEAD: usize = 8 + 4 + 32;
const SUM: usize = 32;

/// The file name of the delta beside `index.bin`.
pub(crate) const FILE_NAME: &str = "index.delta";

/// What applying a delta file found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Bytes of the file up to the end of its last valid frame; 0 when the file has no
    /// usable head (missing, damaged or for another base): the next frame starts a new file.
    pub len: u64,
    /// Frames applied.
    pub frames: u64,
}

/// Checks a delta file's head: the base checksum it names; `None` for a file too short or
/// with a bad magic (a damaged head: nothing in it is applied); `Err(Newer)` for a newer
/// version.
pub(crate) fn check_head(path: &Path, bytes: &[u8]) -> Result<Option<[u8; 32]>, Fault> {
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Ok(None);
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version > DELTA_VERSION {
        return Err(NewerVersion {
            path: path.to_string_lossy().into_owned(),
            found: version,
            supported: DELTA_VERSION,
        }
        .into());
    }
    if version == 0 || bytes.len() < HEAD {
        return Ok(None);
    }
    Ok(bytes[12..HEAD].try_into().ok())
}

/// The head of a new delta file for the base whose checksum is `base_sum`.
pub(crate) fn head(base_sum: &[u8; 32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&DELTA_VERSION.to_le_bytes());
    out.extend_from_slice(base_sum);
    out
}

/// Applies the valid frames of delta file `bytes` to `ix`, the base index whose file's
/// checksum is `base_sum`. `Err(Corrupt)` for a frame whose checksum holds but whose content
/// does not parse or does not fit the index (the caller rebuilds the index); `Err(Newer)`
/// for a newer delta.
pub(crate) fn apply(
    path: &Path,
    bytes: &[u8],
    base_sum: &[u8; 32],
    ix: &mut Index,
) -> Result<Applied, Fault> {
    match check_head(path, bytes)? {
        Some(b) if b == *base_sum => {}
        _ => return Ok(Applied::default()),
    }
    let mut at = HEAD;
    let mut frames = 0u64;
    while let Some(len) = bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    {
        let end = at + 4 + len + SUM;
        if end > bytes.len() {
            break;
        }
        let sealed = &bytes[at..at + 4 + len];
        if Sha256::digest(sealed).as_slice() != &bytes[at + 4 + len..end] {
            break;
        }
        frames += 1;
        apply_frame(path, &sealed[4..], frames, ix)?;
        at = end;
    }
    Ok(Applied {
        len: at as u64,
        frames,
    })
}

fn apply_frame(path: &Path, body: &[u8], seq: u64, ix: &mut Index) -> Result<(), Fault> {
    let bad = || corrupt(path, "malformed delta frame");
    let mut r = Reader { b: body, at: 0 };
    if r.u64().ok_or_else(bad)? != seq {
        return Err(corrupt(path, "delta frame out of sequence"));
    }
    let flags = r.u32().ok_or_else(bad)?;
    let scanned_at = r.u64().ok_or_else(bad)?;
    let klen = usize::from(r.u16().ok_or_else(bad)?);
    let keeper = std::str::from_utf8(r.take(klen).ok_or_else(bad)?)
        .map_err(|_| corrupt(path, "keeper is not UTF-8"))?;
    let keeper = (!keeper.is_empty()).then(|| keeper.to_string());
    let count = r.u64().ok_or_else(bad)?;
    let set = r.var().ok_or_else(bad)?;
    let mut prev = Prev::default();
    let mut changes = Vec::new();
    for _ in 0..set {
        let (p, stat) = read_compact(&mut r, &mut prev).ok_or_else(bad)?;
        let cov = read_cov(&mut r, INDEX_VERSION).ok_or_else(bad)?;
        if keeper.is_none() && matches!(cov, Coverage::Kept(_)) {
            return Err(corrupt(
                path,
                "an entry kept in a log, and no session keeping it",
            ));
        }
        changes.push((p, Some(IdxEntry { stat, cov })));
    }
    let removed = r.var().ok_or_else(bad)?;
    for _ in 0..removed {
        let len = usize::try_from(r.var().ok_or_else(bad)?).map_err(|_| bad())?;
        if len > PATH_MAX_LEN {
            return Err(bad());
        }
        changes.push((r.take(len).ok_or_else(bad)?.into(), None));
    }
    if r.at != body.len() {
        return Err(corrupt(path, "trailing bytes in a delta frame"));
    }
    for (p, _) in &changes {
        if crate::path::RelPath::from_bytes(p).is_err() {
            return Err(corrupt(path, "delta entry with an invalid path"));
        }
    }
    for (p, e) in changes {
        ix.apply(p, e);
    }
    if ix.entries().len() as u64 != count {
        return Err(corrupt(
            path,
            "the entry count after a delta frame is not the one it names",
        ));
    }
    ix.baseline_complete = flags & FLAG_BASELINE_COMPLETE != 0;
    ix.scanned_at = scanned_at;
    ix.keeper = keeper;
    Ok(())
}

/// One frame (number `seq`, the first of a file being 1): the entries of `ix` at `paths`
/// (sorted; a path `ix` no longer holds is written as removed), and `ix`'s header fields
/// and entry count.
pub(crate) fn frame(seq: u64, ix: &Index, paths: &[Box<[u8]>]) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + paths.len() * 80);
    body.extend_from_slice(&seq.to_le_bytes());
    let flags = if ix.baseline_complete {
        FLAG_BASELINE_COMPLETE
    } else {
        0
    };
    body.extend_from_slice(&flags.to_le_bytes());
    body.extend_from_slice(&ix.scanned_at.to_le_bytes());
    let keeper = ix.keeper.as_deref().unwrap_or("").as_bytes();
    let keeper = &keeper[..keeper.len().min(usize::from(u16::MAX))];
    body.extend_from_slice(&(keeper.len() as u16).to_le_bytes());
    body.extend_from_slice(keeper);
    body.extend_from_slice(&(ix.entries().len() as u64).to_le_bytes());
    let (set, gone): (Vec<&[u8]>, Vec<&[u8]>) = paths
        .iter()
        .map(|p| &p[..])
        .partition(|p| ix.entries().contains_key(*p));
    put_var(&mut body, set.len() as u64);
    let mut prev = Prev::default();
    for p in set {
        let e = &ix.entries()[p];
        put_compact(
            &mut body,
            &p[..p.len().min(PATH_MAX_LEN)],
            &e.stat,
            &mut prev,
        );
        put_cov(&mut body, &e.cov);
    }
    put_var(&mut body, gone.len() as u64);
    for p in gone {
        let p = &p[..p.len().min(PATH_MAX_LEN)];
        put_var(&mut body, p.len() as u64);
        body.extend_from_slice(p);
    }
    let mut out = Vec::with_capacity(4 + body.len() + SUM);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// How many bytes the delta may reach before it is due to be folded into a whole index: a
/// quarter of the base file's, at least 64 KiB and at most 4 MiB. A save past it still
/// appends (up to [`fold_cap`]); the fold runs later, off the scan's path
/// (`Session::fold_index`).
pub(crate) fn fold_at(base_len: u64) -> u64 {
    (base_len / 4).clamp(64 << 10, 4 << 20)
}

/// How many bytes the delta may reach at all: four times [`fold_at`] (256 KiB to 16 MiB).
/// A save that would pass it folds at once, on the scan's path (when the later fold did
/// not run: a host that exits right after its scans, a fold that keeps failing).
pub(crate) fn fold_cap(base_len: u64) -> u64 {
    fold_at(base_len) * 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::index::{Stat, decode, encode};

    fn stat(i: u64) -> Stat {
        Stat {
            mode: 0o100644,
            nlink: 1,
            size: i,
            mtime_s: 1_700_000_000 + i as i64,
            mtime_ns: 5,
            ctime_s: 1_700_000_000 + i as i64,
            ctime_ns: 6,
            ino: 1000 + i,
            dev: 7,
        }
    }

    fn entry(i: u64) -> IdxEntry {
        IdxEntry {
            stat: stat(i),
            cov: Coverage::Hashed([i as u8; 32]),
        }
    }

    fn base() -> (Index, Vec<u8>) {
        let mut ix = Index::default();
        for i in 0..50 {
            ix.insert(format!("d/f{i}").into_bytes().into(), entry(i));
        }
        ix.scanned_at = 10;
        ix.baseline_complete = true;
        let bytes = encode(&ix);
        (decode(Path::new("i"), &bytes).expect("base"), bytes)
    }

    fn sum_of(bytes: &[u8]) -> [u8; 32] {
        bytes[bytes.len() - 32..].try_into().expect("sum")
    }

    /// Two frames' worth of changes made to `ix` (read from disk), with the file they make.
    fn two_frames(ix: &mut Index, base_sum: &[u8; 32]) -> Vec<u8> {
        let mut file = head(base_sum);
        for (seq, round) in [(1u64, 0u64), (2, 1)] {
            ix.insert(
                format!("d/f{round}").into_bytes().into(),
                entry(900 + round),
            );
            ix.remove(format!("d/f{}", 10 + round).as_bytes());
            ix.insert(
                format!("new/{round}").into_bytes().into(),
                entry(500 + round),
            );
            // The same entry set again is no change.
            ix.insert(b"d/f20".to_vec().into(), entry(20));
            ix.keeper = Some("keeper".into());
            ix.insert(
                format!("k{round}").into_bytes().into(),
                IdxEntry {
                    stat: stat(3),
                    cov: Coverage::Kept([3; 32]),
                },
            );
            ix.scanned_at = 100 + round;
            let t = ix.take_touched().expect("read from disk: changes known");
            assert_eq!(
                t.paths.len(),
                4,
                "round {round}: the unchanged entry is not one"
            );
            let mut paths: Vec<_> = t.paths.into_iter().collect();
            paths.sort_unstable();
            file.extend_from_slice(&frame(seq, ix, &paths));
        }
        file
    }

    #[test]
    fn frames_applied_to_the_base_give_the_index_they_were_made_from() {
        let (mut ix, bytes) = base();
        let file = two_frames(&mut ix, &sum_of(&bytes));
        let mut back = decode(Path::new("i"), &bytes).expect("base");
        let a = apply(Path::new("d"), &file, &sum_of(&bytes), &mut back).expect("apply");
        assert_eq!(
            a,
            Applied {
                len: file.len() as u64,
                frames: 2
            }
        );
        assert_eq!(back.entries(), ix.entries());
        assert_eq!(
            (
                back.scanned_at,
                back.keeper.as_deref(),
                back.baseline_complete
            ),
            (101, Some("keeper"), true)
        );
        assert_eq!(encode(&back), encode(&ix), "as the whole index written");
    }

    #[test]
    fn a_torn_frame_ends_the_delta_and_a_stale_one_is_ignored() {
        let (mut ix, bytes) = base();
        let sum = sum_of(&bytes);
        let file = two_frames(&mut ix, &sum);
        // The index as the first frame left it.
        let mut first = decode(Path::new("i"), &bytes).expect("base");
        let one = HEAD
            + 4
            + u32::from_le_bytes(file[HEAD..HEAD + 4].try_into().expect("len")) as usize
            + SUM;
        apply(Path::new("d"), &file[..one], &sum, &mut first).expect("first frame");
        // Cut anywhere in the second frame, or a byte of it flipped: the first frame only.
        for cut in one..file.len() {
            let mut got = decode(Path::new("i"), &bytes).expect("base");
            let a = apply(Path::new("d"), &file[..cut], &sum, &mut got).expect("torn");
            assert_eq!((a.len, a.frames), (one as u64, 1), "cut at {cut}");
            assert_eq!(got.entries(), first.entries(), "cut at {cut}");
            let mut flipped = file.clone();
            flipped[cut] ^= 0x10;
            let mut got = decode(Path::new("i"), &bytes).expect("base");
            let a = apply(Path::new("d"), &flipped, &sum, &mut got).expect("flipped");
            assert_eq!(a.frames, 1, "flip at {cut}");
        }
        // Cut in the first frame or the head: the base alone.
        for cut in 0..one {
            let mut got = decode(Path::new("i"), &bytes).expect("base");
            let a = apply(Path::new("d"), &file[..cut], &sum, &mut got).expect("torn");
            assert_eq!(a.frames, 0, "cut at {cut}");
            assert_eq!(a.len, if cut >= HEAD { HEAD as u64 } else { 0 });
            assert_eq!(got.entries().len(), 50);
        }
        // For another base (the base rewritten since): ignored.
        let mut got = decode(Path::new("i"), &bytes).expect("base");
        let a = apply(Path::new("d"), &file, &[0; 32], &mut got).expect("stale");
        assert_eq!(a, Applied::default());
        assert_eq!(got.scanned_at, 10);
    }

    #[test]
    fn a_sealed_frame_that_does_not_fit_is_corrupt_and_a_newer_delta_is_refused() {
        let (mut ix, bytes) = base();
        let sum = sum_of(&bytes);
        let mut file = head(&sum);
        ix.insert(b"x".to_vec().into(), entry(1));
        let t: Vec<_> = ix.take_touched().expect("t").paths.into_iter().collect();
        // Numbered 2 where 1 is due.
        file.extend_from_slice(&frame(2, &ix, &t));
        let mut got = decode(Path::new("i"), &bytes).expect("base");
        assert!(matches!(
            apply(Path::new("d"), &file, &sum, &mut got),
            Err(Fault::Corrupt(_))
        ));
        // An entry count that is not the index's after it.
        let mut other = ix.clone();
        other.insert(b"y".to_vec().into(), entry(2));
        let mut file = head(&sum);
        file.extend_from_slice(&frame(1, &other, &t));
        let mut got = decode(Path::new("i"), &bytes).expect("base");
        assert!(matches!(
            apply(Path::new("d"), &file, &sum, &mut got),
            Err(Fault::Corrupt(_))
        ));
        // A newer version.
        let mut file = head(&sum);
        file[8] = 2;
        let mut got = decode(Path::new("i"), &bytes).expect("base");
        assert!(matches!(
            apply(Path::new("d"), &file, &sum, &mut got),
            Err(Fault::Newer(_))
        ));
    }

    #[test]
    fn the_fold_threshold_is_a_quarter_of_the_base_within_bounds() {
        assert_eq!(fold_at(1000), 64 << 10);
        assert_eq!(fold_at(8 << 20), 2 << 20);
        assert_eq!(fold_at(100 << 20), 4 << 20);
        assert_eq!(fold_cap(1000), 256 << 10);
        assert_eq!(fold_cap(100 << 20), 16 << 20);
    }
}
