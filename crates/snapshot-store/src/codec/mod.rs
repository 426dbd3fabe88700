//! The binary payload of a record-log frame (see `docs/format.md`, "Record
//! payloads"): a kind byte, then the fields in order. Integers are LEB128 varints
//! (signed ones zigzag-encoded), strings and paths are a varint length followed by
//! the bytes, a SHA-256 is its 32 raw bytes. Rare, open-ended values (a skip reason,
//! an entry source other than a tool call or a re-check) are carried as JSON text,
//! so a new kind of source needs no new binary layout.

mod decode;

pub(crate) use decode::{
    TrackedRef, blob_parts, count_entries, decode, decode_entries, decode_entry, decode_known,
    decode_tracked, dropped_call, group_parts, staged_parts,
};

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
    /// A tool call staged a before-state (`capture_before`). With `anchor` (kind
    /// `staged_at`), the anchor its commit will join: a call whose settlement never
    /// reached the log counts as committed there (see [`crate::records`]).
    Staged {
        call_id: String,
        entry: Entry,
        anchor: Option<u64>,
    },
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
    /// The content of a small file, kept in the log instead of a blob file of its own
    /// (log version 3): entries name it by `sha256` as they name any blob. Written
    /// ahead of the records that name it, in the same write.
    Blob { sha256: String, bytes: Shared },
}

/// Bytes of a buffer a log was read into, shared (a group read back keeps its
/// entries encoded there instead of in a copy of its own).
#[derive(Clone)]
pub(crate) struct Shared {
    buf: std::sync::Arc<Vec<u8>>,
    start: usize,
    end: usize,
    /// `buf` is, whole, the log frame of a `blob` record whose content these bytes are
    /// (see [`Shared::frame`]).
    framed: bool,
}

impl Shared {
    /// A copy of `bytes` in a buffer of its own.
    pub(crate) fn copy_of(bytes: &[u8]) -> Shared {
        Shared {
            buf: std::sync::Arc::new(bytes.to_vec()),
            start: 0,
            end: bytes.len(),
            framed: false,
        }
    }

    /// The content `start..` of `frame`, the whole log frame of a `blob` record that
    /// carries it (built by [`crate::log::blob_frame`]).
    pub(crate) fn in_frame(frame: Vec<u8>, start: usize) -> Shared {
        Shared {
            end: frame.len(),
            buf: std::sync::Arc::new(frame),
            start,
            framed: true,
        }
    }

    /// The log frame of the `blob` record that carries these bytes, when they were put in
    /// one as they were read: the log's writer then writes that frame as it is, with no
    /// copy into the write's buffer.
    pub(crate) fn frame(&self) -> Option<&[u8]> {
        self.framed.then_some(&self.buf[..])
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
                framed: false,
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
/// `staged` with the anchor of the call's commit (log version 2).
pub(crate) const STAGED_AT: u8 = 9;
pub(crate) const DROPPED: u8 = 4;
pub(crate) const GROUP: u8 = 5;
pub(crate) const TRACKED: u8 = 6;
const BOUNDARY: u8 = 7;
const PRUNED: u8 = 8;
/// A blob kept in the log (log version 3).
pub(crate) const BLOB: u8 = 10;

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
        Record::Staged {
            call_id,
            entry,
            anchor: None,
        } => {
            out.push(STAGED);
            put_str(out, call_id);
            put_entry(out, entry);
        }
        Record::Staged {
            call_id,
            entry,
            anchor: Some(anchor),
        } => {
            out.push(STAGED_AT);
            put_str(out, call_id);
            put_u(out, *anchor);
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
        Record::Blob { sha256, bytes } => {
            put_blob_head(out, sha256, bytes.len());
            out.extend_from_slice(bytes);
        }
    }
}

/// A `blob` record's payload up to its content (which follows it): the kind, the name and
/// the content's length.
pub(crate) fn put_blob_head(out: &mut Vec<u8>, sha256: &str, len: usize) {
    out.push(BLOB);
    put_sha(out, sha256);
    put_u(out, len as u64);
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

#[cfg(test)]
mod tests;
