//! The per-session record log (`sessions/<id>/records.log`): framing, checksums,
//! torn-tail detection (the records themselves: [`crate::codec`]).
//!
//! ```text
//! file   = header frame*
//! header = "RWLG" version:u32le                       (8 bytes)
//! frame  = len:u32le  !len:u32le  crc32(payload):u32le  payload[len]
//! ```
//!
//! The payload is one binary record (see [`crate::codec`]). A frame is
//! written with one `write` call on an append-mode descriptor, so a crash leaves
//! at most one incomplete frame, always the last. The reader tells that torn tail
//! apart from damage: the length is stored twice (plain and inverted), so a
//! damaged length is recognised as such rather than read as "the rest of the file
//! is missing"; a bad checksum on a frame that other bytes follow is damage. A torn
//! tail is ignored (and cut off by the next writer, which holds the log's lock);
//! damage is a named `Corrupt` error and nothing is cut or rewritten.

use crate::codec::Record;

/// Magic bytes at the start of every record log.
pub(crate) const MAGIC: &[u8; 4] = b"RWLG";
/// Version of the record log this build writes and understands.
pub const LOG_VERSION: u32 = 3;
/// Length of the file header.
pub(crate) const HEADER_LEN: usize = 8;
/// Length of a frame header.
pub(crate) const FRAME_HEAD: usize = 12;
/// Largest payload a frame may carry (a larger length is damage). One group record
/// carries every entry of its group, so this is generous.
pub(crate) const MAX_PAYLOAD: u32 = 1 << 30;

/// The file header of a new log.
pub(crate) fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(MAGIC);
    h[4..].copy_from_slice(&LOG_VERSION.to_le_bytes());
    h
}

/// Appends the frame of `rec` to `out`; returns the frame length.
pub(crate) fn encode_into(rec: &Record, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEAD]);
    crate::codec::encode(rec, out);
    seal(out, start)
}

/// Fills in the head of the frame that starts at `start` and runs to the end of `out`
/// (its payload written after a zeroed head); returns the frame's length.
fn seal(out: &mut [u8], start: usize) -> usize {
    let len = (out.len() - start - FRAME_HEAD) as u32;
    let crc = crc32(&out[start + FRAME_HEAD..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&(!len).to_le_bytes());
    out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
    out.len() - start
}

/// `data`, named `sha256`, in a buffer that is the whole frame of the `blob` record carrying
/// it: the same bytes [`encode_into`] writes for that record, made with one copy of the
/// content. The log's writer writes the frame as it is ([`crate::codec::Shared::frame`]).
pub(crate) fn blob_frame(sha256: &str, data: &[u8]) -> crate::codec::Shared {
    let mut out = Vec::with_capacity(FRAME_HEAD + 48 + data.len());
    out.extend_from_slice(&[0u8; FRAME_HEAD]);
    crate::codec::put_blob_head(&mut out, sha256, data.len());
    let at = out.len();
    out.extend_from_slice(data);
    seal(&mut out, 0);
    crate::codec::Shared::in_frame(out, at)
}

/// Why a log could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The header names a newer log version.
    Newer(u32),
    /// Damage: what and where (byte offset).
    Corrupt(String),
}

/// A decoded log: the records with their frame lengths, and where the valid part ends.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub records: Vec<(Record, u64)>,
    /// Bytes up to the end of the last valid frame (the header included).
    pub valid_len: u64,
    /// Bytes after `valid_len` (a torn tail), 0 when none.
    pub torn: u64,
}

/// The version a log's header names (`None` when the file is shorter than a header).
pub(crate) fn header_version(bytes: &[u8]) -> Option<u32> {
    let v = bytes.get(4..HEADER_LEN)?;
    Some(u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
}

/// Checks a log header. `Ok(false)`: the file is shorter than a header (torn at creation).
pub(crate) fn check_header(bytes: &[u8]) -> Result<bool, DecodeError> {
    if bytes.len() < HEADER_LEN {
        // A header is one write: a shorter file was torn while being created, or is
        // zero-filled; anything else is not a record log.
        if MAGIC.starts_with(&bytes[..bytes.len().min(4)]) || bytes.iter().all(|b| *b == 0) {
            return Ok(false);
        }
        return Err(DecodeError::Corrupt("not a record log (bad magic)".into()));
    }
    if &bytes[..4] != MAGIC {
        if bytes.iter().all(|b| *b == 0) {
            return Ok(false);
        }
        return Err(DecodeError::Corrupt("not a record log (bad magic)".into()));
    }
    let v = header_version(bytes).unwrap_or(LOG_VERSION);
    if v > LOG_VERSION {
        return Err(DecodeError::Newer(v));
    }
    if v == 0 {
        return Err(DecodeError::Corrupt("log version 0".into()));
    }
    Ok(true)
}

/// Decodes the frames of `bytes` starting at `start` (≥ [`HEADER_LEN`]), the header
/// already checked. (The store folds frames as it reads them: [`for_each_frame`].)
#[cfg(test)]
pub(crate) fn decode_frames(bytes: &[u8], start: usize) -> Result<Decoded, DecodeError> {
    let mut records = Vec::new();
    let (valid_len, torn) = for_each_frame(bytes, start, |payload, len, o| {
        let rec = crate::codec::decode(payload).map_err(|e| unreadable(o, &e))?;
        records.push((rec, len));
        Ok(())
    })?;
    Ok(Decoded {
        records,
        valid_len,
        torn,
    })
}

/// The damage of a frame whose payload does not decode.
pub(crate) fn unreadable(offset: usize, e: &str) -> DecodeError {
    DecodeError::Corrupt(format!("unreadable record at offset {offset}: {e}"))
}

/// Logs at least this large have most of their checksums verified on a second thread
/// while the calling thread folds the frames.
const PARALLEL_CHECK: usize = 1 << 20;

/// The frame at offset `o` of `bytes`: its end and checksum, `Err(())` for a
/// damaged header, `Ok(None)` for a torn one (as [`for_each_frame`] reads them).
pub(crate) fn frame_at(bytes: &[u8], o: usize) -> Result<Option<(usize, u32)>, ()> {
    let rest = &bytes[o..];
    if rest.len() < FRAME_HEAD {
        return Ok(None);
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let inv = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    if inv != !len || len > MAX_PAYLOAD || len == 0 {
        return Err(());
    }
    let end = o + FRAME_HEAD + len as usize;
    if end > bytes.len() {
        return Ok(None);
    }
    Ok(Some((
        end,
        u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]),
    )))
}

/// Whether each frame from offset `from` on has a matching checksum, by offset, in
/// order (the frames' headers read from `start`, up to the first damaged or torn one).
fn checksums_from(bytes: &[u8], start: usize, from: usize) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    let mut o = start;
    while o < bytes.len() {
        let Ok(Some((end, crc))) = frame_at(bytes, o) else {
            break;
        };
        if o >= from {
            out.push((o, crc32(&bytes[o + FRAME_HEAD..end]) == crc));
        }
        o = end;
    }
    out
}

/// Calls `f(payload, frame length, offset)` for each complete, checksummed frame of
/// `bytes` from `start` (the header already checked), stopping at a torn tail.
/// Returns the end of the valid frames and the length of the torn tail.
pub(crate) fn for_each_frame<'a>(
    bytes: &'a [u8],
    start: usize,
    f: impl FnMut(&'a [u8], u64, usize) -> Result<(), DecodeError>,
) -> Result<(u64, u64), DecodeError> {
    if bytes.len().saturating_sub(start) < PARALLEL_CHECK {
        return frames(bytes, start, f, &mut |payload, crc, _| {
            crc32(payload) == crc
        });
    }
    // A helper thread checks the frames past the first third meanwhile.
    let from = start + (bytes.len() - start) / 3;
    std::thread::scope(|sc| {
        let mut helper = Some(sc.spawn(move || checksums_from(bytes, start, from)));
        let mut done: Vec<(usize, bool)> = Vec::new();
        let mut k = 0;
        frames(bytes, start, f, &mut |payload, crc, o| {
            if o >= from {
                if let Some(h) = helper.take() {
                    done = h.join().unwrap_or_default();
                }
                while k < done.len() && done[k].0 < o {
                    k += 1;
                }
                if let Some(&(at, ok)) = done.get(k) {
                    if at == o {
                        return ok;
                    }
                }
            }
            crc32(payload) == crc
        })
    })
}

/// The frame loop of [`for_each_frame`]; `checked(payload, crc, offset)` tells whether
/// a frame's checksum matches.
pub(crate) fn frames<'a>(
    bytes: &'a [u8],
    start: usize,
    mut f: impl FnMut(&'a [u8], u64, usize) -> Result<(), DecodeError>,
    checked: &mut dyn FnMut(&[u8], u32, usize) -> bool,
) -> Result<(u64, u64), DecodeError> {
    let mut valid_len = start as u64;
    let mut o = start;
    let n = bytes.len();
    while o < n {
        let (end, crc) = match frame_at(bytes, o) {
            Ok(Some(frame)) => frame,
            Ok(None) => break, // torn frame header or payload
            Err(()) => {
                if bytes[o..].iter().all(|b| *b == 0) {
                    break; // zero-filled tail (power loss in process-crash mode)
                }
                return Err(DecodeError::Corrupt(format!(
                    "damaged frame header at offset {o}"
                )));
            }
        };
        let payload = &bytes[o + FRAME_HEAD..end];
        if !checked(payload, crc, o) {
            if end == n || bytes[end..].iter().all(|b| *b == 0) {
                break; // the last frame, incompletely written
            }
            return Err(DecodeError::Corrupt(format!(
                "checksum mismatch in the frame at offset {o}"
            )));
        }
        f(payload, (end - o) as u64, o)?;
        o = end;
        valid_len = o as u64;
    }
    Ok((valid_len, (n as u64).saturating_sub(valid_len)))
}

/// CRC-32 (IEEE 802.3, zlib's `crc32`) of a frame's payload: `crc32fast`, which uses the
/// CPU's carry-less multiplication where it has it.
pub(crate) use crc32fast::hash as crc32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BeforeState, Entry};
    use crate::path::RelPath;

    fn rec(i: u64) -> Record {
        Record::Staged {
            call_id: format!("c{i}"),
            entry: Entry {
                path: RelPath::from_path(std::path::Path::new("a.txt")).unwrap(),
                order: i,
                before: BeforeState::Absent,
            },
            anchor: None,
        }
    }

    fn log(n: u64) -> Vec<u8> {
        let mut b = header().to_vec();
        for i in 0..n {
            encode_into(&rec(i), &mut b);
        }
        b
    }

    fn decode(b: &[u8]) -> Result<Decoded, DecodeError> {
        assert!(check_header(b)?);
        decode_frames(b, HEADER_LEN)
    }

    #[test]
    fn a_blob_framed_as_it_is_read_is_the_frame_encode_writes_for_it() {
        for data in [&b""[..], b"x", &[7u8; 300], &[1u8; 20_000]] {
            let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(data));
            let framed = blob_frame(&sha, data);
            assert_eq!(&*framed, data, "the content");
            let rec = Record::Blob {
                sha256: sha,
                bytes: crate::codec::Shared::copy_of(data),
            };
            let mut encoded = Vec::new();
            encode_into(&rec, &mut encoded);
            assert_eq!(framed.frame(), Some(&encoded[..]), "{} bytes", data.len());
            let mut b = header().to_vec();
            b.extend_from_slice(&encoded);
            assert_eq!(decode(&b).expect("decode").records[0].0, rec);
        }
        // Content in a buffer of its own, or read with a log, is not a frame.
        assert_eq!(crate::codec::Shared::copy_of(b"x").frame(), None);
    }

    #[test]
    fn round_trip() {
        let b = log(3);
        let d = decode(&b).unwrap();
        assert_eq!(d.records.len(), 3);
        assert_eq!(d.records[2].0, rec(2));
        assert_eq!(d.valid_len, b.len() as u64);
        assert_eq!(d.torn, 0);
    }

    #[test]
    fn every_truncation_is_a_torn_tail_keeping_the_complete_frames() {
        let full = log(3);
        let two = log(2).len();
        for cut in two..full.len() {
            let d = decode(&full[..cut]).unwrap();
            assert_eq!(d.records.len(), 2, "cut at {cut}");
            assert_eq!(d.valid_len, two as u64);
            assert_eq!(d.torn, (cut - two) as u64);
        }
    }

    #[test]
    fn zero_filled_tail_is_torn() {
        let mut b = log(2);
        let len = b.len();
        b.extend_from_slice(&[0u8; 40]);
        let d = decode(&b).unwrap();
        assert_eq!((d.records.len(), d.valid_len), (2, len as u64));
    }

    #[test]
    fn a_flipped_bit_before_the_last_frame_is_corruption() {
        let b = log(3);
        let first = HEADER_LEN;
        // In the payload of the first frame: checksum mismatch.
        let mut p = b.clone();
        p[first + FRAME_HEAD + 3] ^= 0x01;
        assert!(matches!(decode(&p), Err(DecodeError::Corrupt(m)) if m.contains("checksum")));
        // In the checksum itself.
        let mut c = b.clone();
        c[first + 9] ^= 0x80;
        assert!(matches!(decode(&c), Err(DecodeError::Corrupt(m)) if m.contains("checksum")));
        // In the length: caught by the inverted copy, not read as a torn tail.
        let mut l = b.clone();
        l[first + 1] ^= 0x40;
        assert!(matches!(decode(&l), Err(DecodeError::Corrupt(m)) if m.contains("header")));
    }

    #[test]
    fn large_logs_checked_on_two_threads_read_as_on_one() {
        let full = log(60_000);
        assert!(full.len() > PARALLEL_CHECK);
        let one = |b: &[u8]| {
            let mut n = 0;
            let r = frames(
                b,
                HEADER_LEN,
                |_, _, _| {
                    n += 1;
                    Ok(())
                },
                &mut |p, crc, _| crc32(p) == crc,
            );
            (r, n)
        };
        let two = |b: &[u8]| {
            let mut n = 0;
            let r = for_each_frame(b, HEADER_LEN, |_, _, _| {
                n += 1;
                Ok(())
            });
            (r, n)
        };
        let mut cases = vec![full.clone()];
        for at in [
            HEADER_LEN + 40,
            full.len() / 2,
            full.len() * 3 / 4,
            full.len() - 3,
        ] {
            let mut flipped = full.clone();
            flipped[at] ^= 0x10;
            cases.push(flipped);
        }
        cases.push(full[..full.len() - 5].to_vec());
        let mut zeroed = full.clone();
        zeroed.extend_from_slice(&[0u8; 100]);
        cases.push(zeroed);
        for (i, b) in cases.iter().enumerate() {
            assert_eq!(one(b), two(b), "case {i}");
        }
        assert_eq!(two(&full).1, 60_000);
        assert!(
            two(&cases[2]).0.is_err(),
            "a flipped byte mid-log is damage"
        );
    }

    #[test]
    fn the_frames_of_a_log_an_earlier_build_wrote_check_out() {
        // Written by the build that committed it (`examples/log_v3_fixture.rs`): every
        // frame, the last one included, must check out, or it would be read as a torn tail.
        let b = include_bytes!("../tests/fixtures/log-v3/store/sessions/fx-log/records.log");
        let d = decode(b).expect("decode");
        assert_eq!((d.valid_len, d.torn), (b.len() as u64, 0));
        assert!(d.records.len() >= 8, "{}", d.records.len());
        assert!(
            d.records.iter().any(|(_, len)| *len >= 12 + 64),
            "a frame long enough for the folding path"
        );
        // Known values of the checksum the format names (zlib's crc32).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        let pattern: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(crc32(&pattern), PATTERN_CRC);
    }

    /// The CRC-32 of the 1000-byte pattern above (as zlib computes it, and the table code
    /// this crate had before it used `crc32fast`).
    const PATTERN_CRC: u32 = 0x17BC_2A46;

    #[test]
    fn newer_and_foreign_headers_are_refused() {
        let mut b = log(1);
        b[4..8].copy_from_slice(&(LOG_VERSION + 1).to_le_bytes());
        assert_eq!(check_header(&b), Err(DecodeError::Newer(LOG_VERSION + 1)));
        assert!(matches!(
            check_header(b"{\"v\":1}\n"),
            Err(DecodeError::Corrupt(_))
        ));
        assert_eq!(check_header(b"RW"), Ok(false));
        assert_eq!(check_header(b""), Ok(false));
    }

    #[test]
    fn an_unknown_record_kind_is_named() {
        let mut b = header().to_vec();
        let payload = &[200u8, 1, 2, 3];
        b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        b.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
        b.extend_from_slice(&crc32(payload).to_le_bytes());
        b.extend_from_slice(payload);
        assert!(
            matches!(decode(&b), Err(DecodeError::Corrupt(m)) if m.contains("unreadable record"))
        );
    }
}
