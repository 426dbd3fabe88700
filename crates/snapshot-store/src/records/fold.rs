//! Folding a record log into the index: frames checked and decoded (on two
//! threads for a large log), staged captures and tracked states left encoded until
//! the fold ends, damage told apart from a torn tail.

use super::*;

/// Maps a decode failure of the log at `path` onto the store's errors.
pub(crate) fn decode_fault(path: &Path, e: DecodeError) -> Fault {
    let shown = path.to_string_lossy().into_owned();
    match e {
        DecodeError::Newer(found) => NewerVersion {
            path: shown,
            found,
            supported: LOG_VERSION,
        }
        .into(),
        DecodeError::Corrupt(detail) => CorruptFile {
            path: shown,
            detail,
        }
        .into(),
    }
}

/// What folding frames leaves encoded until the fold ends: staged captures (most
/// are settled by their call's group a few records later and never need building)
/// and the newest tracked state of each path (earlier ones are replaced unread).
#[derive(Default)]
pub(super) struct Deferred<'a> {
    /// The latest staged capture, while it is its call's only one (a write tool's call
    /// stages one path and its group follows): call id, entry, record bytes.
    last: Option<(&'a str, Option<u64>, &'a [u8], u64)>,
    /// Call id → its staged entries (encoded, in log order) and their records' bytes.
    calls: BytesMap<&'a str, (Staged<'a>, u64)>,
    /// Path → its newest known state (encoded), `since` and share of record bytes.
    /// The keys are copies: compact in memory, where the slices of the log they
    /// were read from would be scattered over it (each lookup a cache miss).
    tracked: BytesMap<Box<[u8]>, Later<'a>>,
}

/// A tracked state left encoded: known state, `since`, share of record bytes.
pub(super) type Later<'a> = (&'a [u8], Option<u64>, u64);

/// One call's staged entries (the first one inline: most calls stage one path).
#[derive(Default)]
pub(super) struct Staged<'a> {
    first: &'a [u8],
    more: Vec<&'a [u8]>,
    /// The anchor named by the call's latest staged record (`staged_at`).
    anchor: Option<u64>,
}

impl<'a> Deferred<'a> {
    fn stage(&mut self, call: &'a str, anchor: Option<u64>, entry: &'a [u8], bytes: u64) {
        if self.last.is_none() && (self.calls.is_empty() || !self.calls.contains_key(call)) {
            self.last = Some((call, anchor, entry, bytes));
            return;
        }
        self.spill();
        self.add(call, anchor, entry, bytes);
    }

    /// Moves the latest capture into the map.
    fn spill(&mut self) {
        if let Some((call, anchor, entry, bytes)) = self.last.take() {
            self.add(call, anchor, entry, bytes);
        }
    }

    fn add(&mut self, call: &'a str, anchor: Option<u64>, entry: &'a [u8], bytes: u64) {
        let (s, b) = self.calls.entry(call).or_default();
        if s.first.is_empty() {
            s.first = entry;
        } else {
            s.more.push(entry);
        }
        s.anchor = anchor;
        *b += bytes;
    }

    /// Removes a call's deferred captures; returns their bytes.
    fn take(&mut self, call: &str) -> Option<u64> {
        if let Some((c, _, _, b)) = self.last {
            if c == call {
                self.last = None;
                return Some(b);
            }
        }
        if self.calls.is_empty() {
            return None;
        }
        self.calls.remove(call).map(|(_, b)| b)
    }

    /// Brings the index up to date: what is still staged (after any staged
    /// entries it held already) and the newest tracked states. The latter go in
    /// last, which gives what folding them in order gives, since nothing else
    /// reads or writes a tracked state's value while frames are folded.
    fn finish(mut self, idx: &mut Index) -> Result<(), String> {
        self.spill();
        for (call, (staged, b)) in self.calls {
            // The call's latest staged record decides its anchor (as `Index::apply`).
            match staged.anchor {
                Some(a) => idx.pending_at.insert(call.to_string(), a),
                None => idx.pending_at.remove(call),
            };
            let slot = idx.pending.entry(call.to_string()).or_default();
            slot.push(crate::codec::decode_entry(staged.first)?);
            for e in staged.more {
                slot.push(crate::codec::decode_entry(e)?);
            }
            slot.bytes += b;
        }
        for (path, (known, since, share)) in self.tracked {
            let t = Tracked {
                known: crate::codec::decode_known(known)?,
                since,
                share,
            };
            if let Some(old) = idx.tracked.get_mut(&*path) {
                idx.dead += old.share;
                *old = t;
            } else {
                let p = RelPathKey::from_bytes(&path).map_err(|e| format!("bad path: {e:?}"))?;
                idx.tracked.insert(p, t);
            }
        }
        Ok(())
    }
}

/// Folds a `tracked` payload (of `bytes` bytes on disk) into `map`, the newest
/// state per path, adding the shares of the states it replaces to `dead`.
pub(super) fn fold_tracked<'a>(
    map: &mut BytesMap<Box<[u8]>, Later<'a>>,
    dead: &mut u64,
    buf: &mut Vec<crate::codec::TrackedRef<'a>>,
    payload: &'a [u8],
    bytes: u64,
) -> Result<(), String> {
    buf.clear();
    crate::codec::decode_tracked(payload, buf)?;
    let share = bytes / (buf.len().max(1) as u64);
    for (path, known, since) in buf.drain(..) {
        if let Some(old) = map.get_mut(path) {
            *dead += old.2;
            *old = (known, since, share);
        } else {
            map.insert(path.into(), (known, since, share));
        }
    }
    Ok(())
}

/// Logs with at least this many bytes of frames to fold are folded on two threads
/// ([`fold_frames_split`]).
pub(super) const PARALLEL_FOLD: usize = 1 << 20;

/// Why a frame could not be folded.
pub(super) enum FoldError {
    /// The payload does not decode (damage; reported before any fold error).
    Decode(String),
    /// The record contradicts the index (e.g. names another session).
    Apply(String),
}

impl Index {
    /// Folds the payload of the frame at offset `o`. After a record that contradicts the
    /// index (kept in `refused`), later frames are only decoded: damage further on is
    /// still reported first.
    #[allow(clippy::too_many_arguments)]
    fn fold_frame<'a>(
        &mut self,
        buf_all: &std::sync::Arc<Vec<u8>>,
        payload: &'a [u8],
        bytes: u64,
        o: usize,
        deferred: &mut Deferred<'a>,
        buf: &mut Vec<crate::codec::TrackedRef<'a>>,
        refused: &mut Option<String>,
    ) -> Result<(), DecodeError> {
        if refused.is_some() {
            return crate::codec::decode(payload)
                .map(drop)
                .map_err(|e| unreadable(o, &e));
        }
        match self.fold_payload(buf_all, payload, bytes, deferred, buf) {
            Ok(()) => Ok(()),
            Err(FoldError::Decode(e)) => Err(unreadable(o, &e)),
            Err(FoldError::Apply(e)) => {
                *refused = Some(e);
                Ok(())
            }
        }
    }

    /// Folds one payload read from a log, as [`Index::apply`] of its decoded record
    /// would, building only what the index keeps.
    fn fold_payload<'a>(
        &mut self,
        buf_all: &std::sync::Arc<Vec<u8>>,
        payload: &'a [u8],
        bytes: u64,
        deferred: &mut Deferred<'a>,
        buf: &mut Vec<crate::codec::TrackedRef<'a>>,
    ) -> Result<(), FoldError> {
        use crate::codec::{BLOB, DROPPED, GROUP, STAGED, STAGED_AT, TRACKED};
        match payload.first().copied() {
            Some(STAGED | STAGED_AT) => {
                let (call, anchor, entry) =
                    crate::codec::staged_parts(payload).map_err(FoldError::Decode)?;
                deferred.stage(call, anchor, entry, bytes);
            }
            Some(DROPPED) => {
                let call = crate::codec::dropped_call(payload).map_err(FoldError::Decode)?;
                if let Some(b) = deferred.take(call) {
                    self.dead += b;
                }
                if let Some(b) = self.unpend(call) {
                    self.dead += b;
                }
                self.dead += bytes;
            }
            Some(TRACKED) => {
                fold_tracked(&mut deferred.tracked, &mut self.dead, buf, payload, bytes)
                    .map_err(FoldError::Decode)?;
            }
            Some(GROUP) => {
                let (anchor_seq, source, raw) =
                    crate::codec::group_parts(payload).map_err(FoldError::Decode)?;
                if let EntrySource::Tool { call_id } = &source {
                    if let Some(b) = deferred.take(call_id) {
                        self.dead += b;
                    }
                }
                let raw = crate::codec::Shared::within(buf_all, raw);
                let rec = Record::GroupRaw {
                    anchor_seq,
                    source,
                    raw,
                };
                self.apply(rec, bytes).map_err(FoldError::Apply)?;
            }
            Some(BLOB) => {
                // The bytes stay where the log was read into (no copy).
                let (sha256, data) =
                    crate::codec::blob_parts(payload).map_err(FoldError::Decode)?;
                let rec = Record::Blob {
                    sha256,
                    bytes: crate::codec::Shared::within(buf_all, data),
                };
                self.apply(rec, bytes).map_err(FoldError::Apply)?;
            }
            _ => {
                let rec = crate::codec::decode(payload).map_err(FoldError::Decode)?;
                self.apply(rec, bytes).map_err(FoldError::Apply)?;
            }
        }
        Ok(())
    }
}

/// Folds the frames of `bytes` from `start` (the log at `path`) into `idx`. Returns
/// the end of the valid frames and the length of a torn tail. Damage anywhere in the
/// frames is reported before a record that contradicts the index.
pub(crate) fn fold_frames(
    idx: &mut Index,
    path: &Path,
    all: &std::sync::Arc<Vec<u8>>,
    start: usize,
) -> Result<(u64, u64), Fault> {
    if all.len().saturating_sub(start) >= PARALLEL_FOLD {
        return fold_frames_split(idx, path, all, start);
    }
    fold_frames_one(idx, path, all, start)
}

/// [`fold_frames`] on the calling thread (checksums of a large log on a second one).
pub(super) fn fold_frames_one(
    idx: &mut Index,
    path: &Path,
    all: &std::sync::Arc<Vec<u8>>,
    start: usize,
) -> Result<(u64, u64), Fault> {
    let bytes: &[u8] = all;
    let mut deferred = Deferred::default();
    let mut buf = Vec::new();
    let mut refused: Option<String> = None;
    let r = for_each_frame(bytes, start, |payload, len, o| {
        idx.fold_frame(all, payload, len, o, &mut deferred, &mut buf, &mut refused)
    });
    let corrupt = |detail: String| corrupt_log(path, detail);
    let (valid, torn) = r.map_err(|e| decode_fault(path, e))?;
    if let Some(detail) = refused {
        return Err(corrupt(detail));
    }
    deferred.finish(idx).map_err(corrupt)?;
    Ok((valid, torn))
}

/// [`fold_frames`] of a large log on two threads, with the result of folding it on
/// one. A helper thread verifies the checksum of every frame and folds the `tracked`
/// records (the newest state per path: independent of every other record kind);
/// the calling thread folds everything else, checking only the checksum of a frame
/// that could be a torn tail (the last one, or one only zero bytes follow). Folding
/// a frame whose checksum the helper then finds wrong does no harm: such a frame
/// is damage, and the index is dropped. Of the two threads' errors the one at the
/// earlier frame is reported (at the same frame, the helper's checksum error: the
/// one-thread fold checks the checksum before it decodes); a record that
/// contradicts the index is reported only when there is no damage.
pub(super) fn fold_frames_split(
    idx: &mut Index,
    path: &Path,
    all: &std::sync::Arc<Vec<u8>>,
    start: usize,
) -> Result<(u64, u64), Fault> {
    use crate::codec::TRACKED;
    use crate::log::{FRAME_HEAD, crc32, frames};
    let bytes: &[u8] = all;
    let n = bytes.len();
    let mut deferred = Deferred::default();
    let mut buf = Vec::new();
    let mut refused: Option<String> = None;
    let (mine, mine_at, theirs) = std::thread::scope(|sc| {
        let helper = sc.spawn(move || {
            let mut map: BytesMap<Box<[u8]>, Later<'_>> = BytesMap::default();
            let mut dead = 0u64;
            let mut buf = Vec::new();
            let mut at = 0usize;
            let r = frames(
                bytes,
                start,
                |payload, len, o| {
                    if payload.first() == Some(&TRACKED) {
                        fold_tracked(&mut map, &mut dead, &mut buf, payload, len)
                            .map_err(|e| unreadable(o, &e))?;
                    }
                    Ok(())
                },
                &mut |payload, crc, o| {
                    at = o;
                    crc32(payload) == crc
                },
            );
            (r, at, map, dead)
        });
        let mut at = 0usize;
        let r = frames(
            bytes,
            start,
            |payload, len, o| {
                if payload.first() == Some(&TRACKED) {
                    return Ok(());
                }
                idx.fold_frame(all, payload, len, o, &mut deferred, &mut buf, &mut refused)
            },
            &mut |payload, crc, o| {
                at = o;
                let end = o + FRAME_HEAD + payload.len();
                if end == n || bytes[end..].iter().all(|b| *b == 0) {
                    crc32(payload) == crc
                } else {
                    true // the helper checks it
                }
            },
        );
        (r, at, helper.join())
    });
    let Ok((theirs, theirs_at, map, dead)) = theirs else {
        return Err(CorruptFile {
            path: path.to_string_lossy().into_owned(),
            detail: "the checksum thread failed".into(),
        }
        .into());
    };
    let r = match (mine, theirs) {
        (Err(e), Err(h)) => Err(if theirs_at <= mine_at { h } else { e }),
        (Err(e), Ok(_)) => Err(e),
        (Ok(_), Err(h)) => Err(h),
        (Ok(m), Ok(_)) => Ok(m),
    };
    let corrupt = |detail: String| corrupt_log(path, detail);
    let (valid, torn) = r.map_err(|e| decode_fault(path, e))?;
    if let Some(detail) = refused {
        return Err(corrupt(detail));
    }
    idx.dead += dead;
    deferred.tracked = map;
    deferred.finish(idx).map_err(corrupt)?;
    Ok((valid, torn))
}

/// Folds a whole log's bytes. Returns the index, the end of its valid frames and
/// the length of a torn tail.
/// Groups keep their entries encoded in `bytes` (shared, not copied).
pub(crate) fn fold_log(path: &Path, bytes: Vec<u8>) -> Result<(Index, u64, u64), Fault> {
    let mut idx = Index::default();
    if !check_header(&bytes).map_err(|e| decode_fault(path, e))? {
        return Ok((idx, 0, bytes.len() as u64));
    }
    let all = std::sync::Arc::new(bytes);
    let (valid, torn) = fold_frames(&mut idx, path, &all, HEADER_LEN)?;
    Ok((idx, valid, torn))
}

/// The longest prefix of the damaged log `bytes` (at `path`) that a reader takes whole: the
/// frames in order, each with an intact header and checksum, up to the first damaged one,
/// and of those the most that fold without a record the index refuses. Its length (the
/// header included, so at least [`HEADER_LEN`]), or `None` when the header itself is not
/// a readable one. What follows that prefix is not read: a frame past damage may depend
/// on what was lost.
pub(crate) fn readable_prefix(path: &Path, bytes: &[u8]) -> Option<usize> {
    use crate::log::{FRAME_HEAD, crc32, frame_at};
    if !matches!(check_header(bytes), Ok(true)) {
        return None;
    }
    let mut ends = vec![HEADER_LEN];
    let mut o = HEADER_LEN;
    while let Ok(Some((end, crc))) = frame_at(bytes, o) {
        if crc32(&bytes[o + FRAME_HEAD..end]) != crc {
            break;
        }
        ends.push(end);
        o = end;
    }
    let whole = |n: usize| fold_log(path, bytes[..n].to_vec()).is_ok_and(|(_, _, torn)| torn == 0);
    // A prefix of a prefix that folds folds too: the longest one is found by halving.
    let (mut lo, mut hi) = (0, ends.len() - 1);
    if whole(ends[hi]) {
        return Some(ends[hi]);
    }
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if whole(ends[mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(ends[lo])
}

/// The log at `path` is corrupt: `detail` says how.
fn corrupt_log(path: &Path, detail: String) -> Fault {
    CorruptFile {
        path: path.to_string_lossy().into_owned(),
        detail,
    }
    .into()
}
