//! The binary payload of a record-log frame (see `docs/format.md`, "Record
//! payloads"): a kind byte, then the fields in order. Integers are LEB128 varints
//! (signed ones zigzag-encoded), strings and paths are a varint length followed by
//! the bytes, a SHA-256 is its 32 raw bytes. Rare, open-ended values (a skip reason,
//! an entry source other than a tool call or a re-check) are carried as JSON text,
//! so a new kind of source needs no new binary layout.

use crate::format::{BeforeState, Entry, EntrySource, Known, SkipReason};
use crate::fsio::{DiskMeta, FileKind};
use crate::path::RelPath;

/// One record of the log (framed by [`crate::log`]). Unknown kinds are
/// damage in a log of a version this build understands: a newer build that adds a
/// kind also bumps [`crate::log::LOG_VERSION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// First record of every log: names the session (must match the directory).
    Session { session_id: String },
    /// The host's session-log format was recorded.
    Format { format: Option<String> },
    /// A tool call staged a before-state (`capture_before`).
    Staged { call_id: String, entry: Entry },
    /// A call's staged captures were dropped (failed call, or discarded).
    Dropped { call_id: String },
    /// A group of before-states joined anchor `anchor_seq`. A group whose source is a
    /// tool call also settles that call's staged captures.
    Group {
        anchor_seq: u64,
        source: EntrySource,
        entries: Vec<Entry>,
    },
    /// A group read back from a log, its entries still encoded (count + entries).
    GroupRaw {
        anchor_seq: u64,
        source: EntrySource,
        raw: Shared,
    },
    /// Updates of the tracked cache (last known disk state per path).
    Tracked { paths: Vec<TrackedUpdate> },
    /// A boundary re-check ran at `anchor_seq`.
    Boundary { anchor_seq: u64 },
    /// Anchor groups removed by a prune.
    Pruned { anchors: Vec<u64> },
}

/// Bytes of a buffer a log was read into, shared (a group read back keeps its
/// entries encoded there instead of in a copy of its own).
#[derive(Clone)]
pub(crate) struct Shared {
    buf: std::sync::Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl Shared {
    /// A copy of `bytes` in a buffer of its own.
    pub(crate) fn copy_of(bytes: &[u8]) -> Shared {
        Shared {
            buf: std::sync::Arc::new(bytes.to_vec()),
            start: 0,
            end: bytes.len(),
        }
    }

    /// `part`, a slice of `buf`, sharing `buf` (a copy if it is not a slice of it).
    pub(crate) fn within(buf: &std::sync::Arc<Vec<u8>>, part: &[u8]) -> Shared {
        let base = buf.as_ptr() as usize;
        let at = (part.as_ptr() as usize).wrapping_sub(base);
        match at.checked_add(part.len()) {
            Some(end) if at <= buf.len() && end <= buf.len() => Shared {
                buf: std::sync::Arc::clone(buf),
                start: at,
                end,
            },
            _ => Shared::copy_of(part),
        }
    }
}

impl std::ops::Deref for Shared {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        **self == **other
    }
}

impl Eq for Shared {}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// One path's new tracked state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TrackedUpdate {
    pub path: RelPath,
    pub known: Known,
    pub since: Option<u64>,
}

const SESSION: u8 = 1;
const FORMAT: u8 = 2;
pub(crate) const STAGED: u8 = 3;
pub(crate) const DROPPED: u8 = 4;
pub(crate) const GROUP: u8 = 5;
pub(crate) const TRACKED: u8 = 6;
const BOUNDARY: u8 = 7;
const PRUNED: u8 = 8;

/// Appends the payload of `rec` to `out`.
pub(crate) fn encode(rec: &Record, out: &mut Vec<u8>) {
    match rec {
        Record::Session { session_id } => {
            out.push(SESSION);
            put_str(out, session_id);
        }
        Record::Format { format } => {
            out.push(FORMAT);
            match format {
                None => out.push(0),
                Some(f) => {
                    out.push(1);
                    put_str(out, f);
                }
            }
        }
        Record::Staged { call_id, entry } => {
            out.push(STAGED);
            put_str(out, call_id);
            put_entry(out, entry);
        }
        Record::Dropped { call_id } => {
            out.push(DROPPED);
            put_str(out, call_id);
        }
        Record::Group {
            anchor_seq,
            source,
            entries,
        } => {
            out.push(GROUP);
            put_u(out, *anchor_seq);
            put_source(out, source);
            put_u(out, entries.len() as u64);
            for e in entries {
                put_entry(out, e);
            }
        }
        Record::GroupRaw {
            anchor_seq,
            source,
            raw,
        } => {
            out.push(GROUP);
            put_u(out, *anchor_seq);
            put_source(out, source);
            out.extend_from_slice(raw);
        }
        Record::Tracked { paths } => {
            out.push(TRACKED);
            put_u(out, paths.len() as u64);
            for u in paths {
                put_bytes(out, u.path.as_bytes());
                put_known(out, &u.known);
                match u.since {
                    None => out.push(0),
                    Some(s) => {
                        out.push(1);
                        put_u(out, s);
                    }
                }
            }
        }
        Record::Boundary { anchor_seq } => {
            out.push(BOUNDARY);
            put_u(out, *anchor_seq);
        }
        Record::Pruned { anchors } => {
            out.push(PRUNED);
            put_u(out, anchors.len() as u64);
            for a in anchors {
                put_u(out, *a);
            }
        }
    }
}

/// Decodes one payload; the error says what is wrong.
pub(crate) fn decode(bytes: &[u8]) -> Result<Record, String> {
    let mut r = Reader { b: bytes, o: 0 };
    let rec = match r.u8()? {
        SESSION => Record::Session {
            session_id: r.string()?,
        },
        FORMAT => Record::Format {
            format: match r.u8()? {
                0 => None,
                1 => Some(r.string()?),
                t => return Err(format!("bad option tag {t}")),
            },
        },
        STAGED => Record::Staged {
            call_id: r.string()?,
            entry: r.entry()?,
        },
        DROPPED => Record::Dropped {
            call_id: r.string()?,
        },
        GROUP => {
            // The entries stay encoded until asked for (opening a long session reads
            // only what the index needs); their framing is checked here.
            let anchor_seq = r.u()?;
            let source = r.source()?;
            let start = r.o;
            let n = r.count()?;
            for _ in 0..n {
                r.skip_entry()?;
            }
            Record::GroupRaw {
                anchor_seq,
                source,
                raw: Shared::copy_of(&bytes[start..r.o]),
            }
        }
        TRACKED => {
            let n = r.count()?;
            let mut paths = Vec::with_capacity(n);
            for _ in 0..n {
                let path = r.path()?;
                let known = r.known()?;
                let since = match r.u8()? {
                    0 => None,
                    1 => Some(r.u()?),
                    t => return Err(format!("bad option tag {t}")),
                };
                paths.push(TrackedUpdate { path, known, since });
            }
            Record::Tracked { paths }
        }
        BOUNDARY => Record::Boundary { anchor_seq: r.u()? },
        PRUNED => {
            let n = r.count()?;
            let mut anchors = Vec::with_capacity(n);
            for _ in 0..n {
                anchors.push(r.u()?);
            }
            Record::Pruned { anchors }
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    if r.o != bytes.len() {
        return Err(format!("{} bytes after the record", bytes.len() - r.o));
    }
    Ok(rec)
}

/// The call id and the encoded entry of a `staged` payload, checked as [`decode`]
/// checks them (the entry is decoded later by [`decode_entry`], if ever).
pub(crate) fn staged_parts(bytes: &[u8]) -> Result<(&str, &[u8]), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let call = r.str_ref()?;
    let start = r.o;
    r.check_entry()?;
    r.end()?;
    Ok((call, &bytes[start..]))
}

/// Decodes an entry returned by [`staged_parts`].
pub(crate) fn decode_entry(bytes: &[u8]) -> Result<Entry, String> {
    let mut r = Reader { b: bytes, o: 0 };
    let e = r.entry()?;
    r.end()?;
    Ok(e)
}

/// The call id of a `dropped` payload.
pub(crate) fn dropped_call(bytes: &[u8]) -> Result<&str, String> {
    let mut r = Reader { b: bytes, o: 1 };
    let call = r.str_ref()?;
    r.end()?;
    Ok(call)
}

/// One update of a `tracked` payload: path and known state still encoded (both
/// checked), and `since`.
pub(crate) type TrackedRef<'a> = (&'a [u8], &'a [u8], Option<u64>);

/// Reads a `tracked` payload into `out`, checked as [`decode`] checks it; the known
/// states are decoded later by [`decode_known`], if ever.
pub(crate) fn decode_tracked<'a>(
    bytes: &'a [u8],
    out: &mut Vec<TrackedRef<'a>>,
) -> Result<(), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let n = r.count()?;
    out.reserve(n);
    for _ in 0..n {
        let path = r.bytes()?;
        RelPath::check(path).map_err(|e| format!("bad path: {e:?}"))?;
        let start = r.o;
        r.check_known()?;
        let known = &bytes[start..r.o];
        let since = match r.u8()? {
            0 => None,
            1 => Some(r.u()?),
            t => return Err(format!("bad option tag {t}")),
        };
        out.push((path, known, since));
    }
    r.end()
}

/// Decodes a known state returned by [`decode_tracked`].
pub(crate) fn decode_known(bytes: &[u8]) -> Result<Known, String> {
    let mut r = Reader { b: bytes, o: 0 };
    let k = r.known()?;
    r.end()?;
    Ok(k)
}

/// Lowercase hex of raw bytes.
fn hex_lower(raw: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(raw.len() * 2);
    for b in raw {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Reads a `group` payload as [`decode`] does: anchor, source and the entries, still
/// encoded (their framing checked).
pub(crate) fn group_parts(bytes: &[u8]) -> Result<(u64, EntrySource, &[u8]), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let anchor_seq = r.u()?;
    let source = r.source()?;
    let start = r.o;
    let n = r.count()?;
    for _ in 0..n {
        r.skip_entry()?;
    }
    let raw = &bytes[start..r.o];
    r.end()?;
    Ok((anchor_seq, source, raw))
}

/// Decodes the entries of a group payload kept encoded ([`Record::GroupRaw`]).
pub(crate) fn decode_entries(raw: &[u8]) -> Result<Vec<Entry>, String> {
    let mut r = Reader { b: raw, o: 0 };
    let n = r.count()?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(r.entry()?);
    }
    if r.o != raw.len() {
        return Err(format!("{} bytes after the entries", raw.len() - r.o));
    }
    Ok(entries)
}

/// The number of entries of a group payload kept encoded.
pub(crate) fn count_entries(raw: &[u8]) -> usize {
    let mut r = Reader { b: raw, o: 0 };
    r.u().map(|n| n as usize).unwrap_or(0)
}

fn put_u(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_i(out: &mut Vec<u8>, v: i64) {
    put_u(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

fn put_json<T: serde::Serialize>(out: &mut Vec<u8>, v: &T) {
    put_bytes(out, &crate::format::to_json(v));
}

fn put_sha(out: &mut Vec<u8>, sha: &str) {
    // Valid names are 64 lowercase hex digits; anything else is kept as text.
    match hex::decode(sha) {
        Ok(raw) if raw.len() == 32 && crate::path::valid_sha(sha) => {
            out.push(0);
            out.extend_from_slice(&raw);
        }
        _ => {
            out.push(1);
            put_str(out, sha);
        }
    }
}

fn put_entry(out: &mut Vec<u8>, e: &Entry) {
    put_bytes(out, e.path.as_bytes());
    put_u(out, e.order);
    match &e.before {
        BeforeState::Absent => out.push(0),
        BeforeState::File { sha256, size, mode } => {
            out.push(1);
            put_sha(out, sha256);
            put_u(out, *size);
            put_u(out, u64::from(*mode));
        }
        BeforeState::Uncovered { size } => {
            out.push(2);
            put_u(out, *size);
        }
        BeforeState::Skipped { reason } => {
            out.push(3);
            put_json(out, reason);
        }
    }
}

fn put_source(out: &mut Vec<u8>, s: &EntrySource) {
    match s {
        EntrySource::Tool { call_id } => {
            out.push(0);
            put_str(out, call_id);
        }
        EntrySource::Recheck => out.push(1),
        #[allow(unreachable_patterns)]
        other => {
            out.push(255);
            put_json(out, other);
        }
    }
}

fn put_known(out: &mut Vec<u8>, k: &Known) {
    match k {
        Known::Unknown => out.push(0),
        Known::Absent => out.push(1),
        Known::Present {
            meta,
            sha256,
            recorded,
        } => {
            out.push(2);
            out.push(match meta.kind {
                FileKind::File => 0,
                FileKind::Dir => 1,
                FileKind::Symlink => 2,
                FileKind::Other => 3,
            });
            for v in [
                meta.size,
                u64::from(meta.mode),
                meta.nlink,
                meta.ino,
                meta.dev,
            ] {
                put_u(out, v);
            }
            put_i(out, meta.mtime_s);
            put_u(out, u64::from(meta.mtime_ns));
            put_i(out, meta.ctime_s);
            put_u(out, u64::from(meta.ctime_ns));
            match sha256 {
                None => out.push(0),
                Some(s) => {
                    out.push(1);
                    put_sha(out, s);
                }
            }
            out.push(u8::from(*recorded));
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    o: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn u8(&mut self) -> Result<u8, String> {
        let v = *self.b.get(self.o).ok_or("record ends early")?;
        self.o += 1;
        Ok(v)
    }

    #[inline]
    fn u(&mut self) -> Result<u64, String> {
        // Most values fit in one byte.
        if let Some(&b) = self.b.get(self.o) {
            if b & 0x80 == 0 {
                self.o += 1;
                return Ok(u64::from(b));
            }
        }
        self.u_long()
    }

    fn u_long(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    #[inline]
    fn i(&mut self) -> Result<i64, String> {
        let u = self.u()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, String> {
        u32::try_from(self.u()?).map_err(|_| "value out of range".to_string())
    }

    /// A count of items that each take at least one byte.
    #[inline]
    fn count(&mut self) -> Result<usize, String> {
        let n = self.u()?;
        if n > (self.b.len() - self.o) as u64 {
            return Err(format!("count {n} exceeds the record"));
        }
        Ok(n as usize)
    }

    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.count()?;
        let s = &self.b[self.o..self.o + n];
        self.o += n;
        Ok(s)
    }

    fn string(&mut self) -> Result<String, String> {
        self.str_ref().map(str::to_string)
    }

    #[inline]
    fn str_ref(&mut self) -> Result<&'a str, String> {
        let b = self.bytes()?;
        std::str::from_utf8(b).map_err(|_| "text is not UTF-8".to_string())
    }

    /// Nothing left after the record.
    fn end(&self) -> Result<(), String> {
        if self.o != self.b.len() {
            return Err(format!("{} bytes after the record", self.b.len() - self.o));
        }
        Ok(())
    }

    /// Checks a hash as [`Reader::sha`] would read it.
    fn check_sha(&mut self) -> Result<(), String> {
        self.pass_sha(true)
    }

    /// Steps over a hash (32 raw bytes, or its text form — checked as UTF-8 with `utf8`).
    fn pass_sha(&mut self, utf8: bool) -> Result<(), String> {
        match self.u8()? {
            0 => {
                let end = self.o + 32;
                if end > self.b.len() {
                    return Err("record ends early".into());
                }
                self.o = end;
            }
            1 if utf8 => {
                self.str_ref()?;
            }
            1 => {
                self.bytes()?;
            }
            t => return Err(format!("bad hash tag {t}")),
        }
        Ok(())
    }

    /// Checks a known state as [`Reader::known`] would read it, building nothing.
    fn check_known(&mut self) -> Result<(), String> {
        match self.u8()? {
            0 | 1 => Ok(()),
            2 => {
                if self.u8()? > 3 {
                    return Err(format!("bad file kind {}", self.b[self.o - 1]));
                }
                self.u()?;
                self.u32()?;
                self.u()?;
                self.u()?;
                self.u()?;
                self.i()?;
                self.u32()?;
                self.i()?;
                self.u32()?;
                match self.u8()? {
                    0 => {}
                    1 => self.check_sha()?,
                    t => return Err(format!("bad option tag {t}")),
                }
                match self.u8()? {
                    0 | 1 => Ok(()),
                    t => Err(format!("bad flag {t}")),
                }
            }
            t => Err(format!("bad known-state tag {t}")),
        }
    }

    /// Checks one entry as [`Reader::entry`] would read it, building nothing
    /// (a skip reason, rare, is parsed).
    fn check_entry(&mut self) -> Result<(), String> {
        let path = self.bytes()?;
        RelPath::check(path).map_err(|e| format!("bad path: {e:?}"))?;
        self.u()?;
        match self.u8()? {
            0 => {}
            1 => {
                self.check_sha()?;
                self.u()?;
                self.u32()?;
            }
            2 => {
                self.u()?;
            }
            3 => {
                self.json::<SkipReason>()?;
            }
            t => return Err(format!("bad before-state tag {t}")),
        }
        Ok(())
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
        let b = self.bytes()?;
        serde_json::from_slice(b).map_err(|e| e.to_string())
    }

    fn path(&mut self) -> Result<RelPath, String> {
        let b = self.bytes()?;
        RelPath::from_bytes(b).map_err(|e| format!("bad path: {e:?}"))
    }

    fn sha(&mut self) -> Result<String, String> {
        match self.u8()? {
            0 => {
                let end = self.o + 32;
                let raw = self.b.get(self.o..end).ok_or("record ends early")?;
                self.o = end;
                Ok(hex_lower(raw))
            }
            1 => self.string(),
            t => Err(format!("bad hash tag {t}")),
        }
    }

    /// Skips one entry, checking its framing (lengths, tags) without building it.
    fn skip_entry(&mut self) -> Result<(), String> {
        self.bytes()?;
        self.u()?;
        match self.u8()? {
            0 => {}
            1 => {
                self.pass_sha(false)?;
                self.u()?;
                self.u32()?;
            }
            2 => {
                self.u()?;
            }
            3 => {
                self.bytes()?;
            }
            t => return Err(format!("bad before-state tag {t}")),
        }
        Ok(())
    }

    fn entry(&mut self) -> Result<Entry, String> {
        let path = self.path()?;
        let order = self.u()?;
        let before = match self.u8()? {
            0 => BeforeState::Absent,
            1 => BeforeState::File {
                sha256: self.sha()?,
                size: self.u()?,
                mode: self.u32()?,
            },
            2 => BeforeState::Uncovered { size: self.u()? },
            3 => BeforeState::Skipped {
                reason: self.json::<SkipReason>()?,
            },
            t => return Err(format!("bad before-state tag {t}")),
        };
        Ok(Entry {
            path,
            order,
            before,
        })
    }

    fn source(&mut self) -> Result<EntrySource, String> {
        match self.u8()? {
            0 => Ok(EntrySource::Tool {
                call_id: self.string()?,
            }),
            1 => Ok(EntrySource::Recheck),
            255 => self.json(),
            t => Err(format!("bad source tag {t}")),
        }
    }

    fn known(&mut self) -> Result<Known, String> {
        match self.u8()? {
            0 => Ok(Known::Unknown),
            1 => Ok(Known::Absent),
            2 => {
                let kind = match self.u8()? {
                    0 => FileKind::File,
                    1 => FileKind::Dir,
                    2 => FileKind::Symlink,
                    3 => FileKind::Other,
                    t => return Err(format!("bad file kind {t}")),
                };
                let meta = DiskMeta {
                    kind,
                    size: self.u()?,
                    mode: self.u32()?,
                    nlink: self.u()?,
                    ino: self.u()?,
                    dev: self.u()?,
                    mtime_s: self.i()?,
                    mtime_ns: self.u32()?,
                    ctime_s: self.i()?,
                    ctime_ns: self.u32()?,
                };
                let sha256 = match self.u8()? {
                    0 => None,
                    1 => Some(self.sha()?),
                    t => return Err(format!("bad option tag {t}")),
                };
                let recorded = match self.u8()? {
                    0 => false,
                    1 => true,
                    t => return Err(format!("bad flag {t}")),
                };
                Ok(Known::Present {
                    meta,
                    sha256,
                    recorded,
                })
            }
            t => Err(format!("bad known-state tag {t}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(rec: Record) {
        let mut b = Vec::new();
        encode(&rec, &mut b);
        let back = match decode(&b).expect("decode") {
            Record::GroupRaw {
                anchor_seq,
                source,
                raw,
            } => {
                // Re-encoding the kept bytes gives the same payload.
                let mut again = Vec::new();
                encode(
                    &Record::GroupRaw {
                        anchor_seq,
                        source: source.clone(),
                        raw: raw.clone(),
                    },
                    &mut again,
                );
                assert_eq!(again, b);
                Record::Group {
                    anchor_seq,
                    source,
                    entries: decode_entries(&raw).expect("entries"),
                }
            }
            r => r,
        };
        assert_eq!(back, rec);
        // Every strict prefix is refused, never misread.
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "prefix {cut} of {rec:?}");
        }
    }

    fn p(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes()).expect("path")
    }

    #[test]
    fn every_record_kind_round_trips() {
        let sha = "ab".repeat(32);
        let meta = DiskMeta {
            kind: FileKind::File,
            size: 16384,
            mode: 0o644,
            nlink: 1,
            ino: u64::MAX,
            dev: 2049,
            mtime_s: -5,
            mtime_ns: 999_999_999,
            ctime_s: 1_764_440_000,
            ctime_ns: 0,
        };
        let entries = vec![
            Entry {
                path: p("a/b.txt"),
                order: 1_764_440_000_000_000_000,
                before: BeforeState::File {
                    sha256: sha.clone(),
                    size: 3,
                    mode: 0o755,
                },
            },
            Entry {
                path: RelPath::from_bytes(b"bin/\xff\xfe").expect("raw"),
                order: 2,
                before: BeforeState::Absent,
            },
            Entry {
                path: p("big"),
                order: 3,
                before: BeforeState::Uncovered { size: 9 << 30 },
            },
            Entry {
                path: p("link"),
                order: 4,
                before: BeforeState::Skipped {
                    reason: SkipReason::HardLink { nlink: 3 },
                },
            },
        ];
        rt(Record::Session {
            session_id: "s/ü%".into(),
        });
        rt(Record::Format { format: None });
        rt(Record::Format {
            format: Some("dsh-session-v0".into()),
        });
        rt(Record::Staged {
            call_id: "c1".into(),
            entry: entries[0].clone(),
        });
        rt(Record::Dropped {
            call_id: "c1".into(),
        });
        rt(Record::Group {
            anchor_seq: 12,
            source: EntrySource::Tool {
                call_id: "c1".into(),
            },
            entries: entries.clone(),
        });
        rt(Record::Group {
            anchor_seq: u64::MAX,
            source: EntrySource::Recheck,
            entries,
        });
        rt(Record::Tracked {
            paths: vec![
                TrackedUpdate {
                    path: p("a"),
                    known: Known::Unknown,
                    since: None,
                },
                TrackedUpdate {
                    path: p("b"),
                    known: Known::Absent,
                    since: Some(7),
                },
                TrackedUpdate {
                    path: p("c"),
                    known: Known::Present {
                        meta,
                        sha256: Some(sha),
                        recorded: true,
                    },
                    since: Some(0),
                },
                TrackedUpdate {
                    path: p("d"),
                    known: Known::Present {
                        meta,
                        sha256: None,
                        recorded: false,
                    },
                    since: None,
                },
            ],
        });
        rt(Record::Boundary { anchor_seq: 300 });
        rt(Record::Pruned {
            anchors: vec![1, 2, 1 << 40],
        });
    }

    #[test]
    fn damaged_payloads_are_refused_with_a_reason() {
        assert_eq!(decode(&[99]).unwrap_err(), "unknown record kind 99");
        let mut b = Vec::new();
        encode(&Record::Boundary { anchor_seq: 5 }, &mut b);
        b.push(0);
        assert!(decode(&b).unwrap_err().contains("after the record"));
        // A count larger than the record cannot make the reader allocate or overrun.
        let mut g = vec![GROUP, 1, 1];
        put_u(&mut g, u64::MAX);
        assert!(decode(&g).unwrap_err().contains("exceeds"));
    }
}
