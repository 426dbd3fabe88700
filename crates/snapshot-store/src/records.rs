//! A session's in-memory index, rebuilt from its record log, and the migration of
//! a layout-1 session directory (JSON files) into a record log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::codec::{Record, TrackedUpdate};
use crate::error::{CorruptFile, Fault, NewerVersion};
use crate::format::{
    BoundaryRecord, Entry, EntrySource, GroupRecord, Known, PendingLine, SessionMarker,
    TrackedRecord, parse_lines, parse_record,
};
use crate::fsio::StoreFs;
use crate::log::{
    DecodeError, HEADER_LEN, LOG_VERSION, check_header, encode_into, for_each_frame, header,
    unreadable,
};
use crate::path::BytesMap;
use crate::path::is_hidden;
use crate::seam::CrashPoint;

/// File name of a session's record log.
pub(crate) const LOG_NAME: &str = "records.log";
/// Tracked paths per record in a compacted log.
const TRACKED_BATCH: usize = 512;

/// What the store last knew about one tracked path.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub known: Known,
    /// The anchor at which `known` is recorded as a before-state (by a re-check), if any.
    pub since: Option<u64>,
    /// This path's share of the bytes of the record that set it (dead once replaced).
    share: u64,
}

/// One group of before-states at an anchor.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub source: EntrySource,
    body: GroupBody,
    bytes: u64,
}

/// A group's entries: built (appended by this handle) or still encoded (read back).
#[derive(Debug, Clone)]
enum GroupBody {
    Built(Vec<Entry>),
    Encoded(crate::codec::Shared),
}

impl Group {
    /// The group's entries (decoded from the log on demand).
    pub(crate) fn entries(&self) -> Result<std::borrow::Cow<'_, [Entry]>, String> {
        match &self.body {
            GroupBody::Built(v) => Ok(std::borrow::Cow::Borrowed(v)),
            GroupBody::Encoded(raw) => {
                Ok(std::borrow::Cow::Owned(crate::codec::decode_entries(raw)?))
            }
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        match &self.body {
            GroupBody::Built(v) => v.len(),
            GroupBody::Encoded(raw) => crate::codec::count_entries(raw),
        }
    }

    fn record(&self, anchor_seq: u64) -> Record {
        match &self.body {
            GroupBody::Built(entries) => Record::Group {
                anchor_seq,
                source: self.source.clone(),
                entries: entries.clone(),
            },
            GroupBody::Encoded(raw) => Record::GroupRaw {
                anchor_seq,
                source: self.source.clone(),
                raw: raw.clone(),
            },
        }
    }
}

/// The in-memory index of one session, folded from its records.
#[derive(Debug, Default, Clone)]
pub(crate) struct Index {
    pub session_id: Option<String>,
    pub format: Option<String>,
    pub groups: BTreeMap<u64, Vec<Group>>,
    /// Staged captures of calls not yet settled, and the bytes of their records.
    pub pending: BTreeMap<String, (Vec<Entry>, u64)>,
    pub tracked: BTreeMap<RelPathKey, Tracked>,
    pub boundary: Option<u64>,
    boundary_bytes: u64,
    /// The paths of every group are in `tracked` (see [`Index::merge_group_paths`]).
    merged: bool,
    /// Bytes of records whose content a compacted log would not carry.
    pub dead: u64,
}

pub(crate) type RelPathKey = crate::path::RelPath;

impl Index {
    /// Folds one record (of `bytes` bytes on disk) into the index.
    pub(crate) fn apply(&mut self, rec: Record, bytes: u64) -> Result<(), String> {
        match rec {
            Record::Session { session_id } => {
                if let Some(prev) = &self.session_id {
                    if *prev != session_id {
                        return Err(format!("log names session `{session_id}` after `{prev}`"));
                    }
                    self.dead += bytes;
                }
                self.session_id = Some(session_id);
            }
            Record::Format { format } => {
                self.format = format;
            }
            Record::Staged { call_id, entry } => {
                let slot = self.pending.entry(call_id).or_default();
                slot.0.push(entry);
                slot.1 += bytes;
            }
            Record::Dropped { call_id } => {
                if let Some((_, b)) = self.pending.remove(&call_id) {
                    self.dead += b;
                }
                self.dead += bytes;
            }
            Record::Group {
                anchor_seq,
                source,
                entries,
            } => {
                self.settle(&source);
                // Outside notes do not make a path tracked (it stays "left as is").
                if self.merged && source != EntrySource::Outside {
                    self.track_unknown(&entries);
                }
                self.groups.entry(anchor_seq).or_default().push(Group {
                    source,
                    body: GroupBody::Built(entries),
                    bytes,
                });
            }
            Record::GroupRaw {
                anchor_seq,
                source,
                raw,
            } => {
                self.settle(&source);
                let g = Group {
                    source,
                    body: GroupBody::Encoded(raw),
                    bytes,
                };
                if self.merged && g.source != EntrySource::Outside {
                    let entries = g.entries()?.into_owned();
                    self.track_unknown(&entries);
                }
                self.groups.entry(anchor_seq).or_default().push(g);
            }
            Record::Tracked { paths } => {
                let share = bytes / (paths.len().max(1) as u64);
                for u in paths {
                    let old = self.tracked.insert(
                        u.path,
                        Tracked {
                            known: u.known,
                            since: u.since,
                            share,
                        },
                    );
                    if let Some(o) = old {
                        self.dead += o.share;
                    }
                }
            }
            Record::Boundary { anchor_seq } => {
                if self.boundary.is_some() {
                    self.dead += self.boundary_bytes;
                }
                self.boundary = Some(anchor_seq);
                self.boundary_bytes = bytes;
            }
            Record::Pruned { anchors } => {
                for a in anchors {
                    if let Some(gs) = self.groups.remove(&a) {
                        self.dead += gs.iter().map(|g| g.bytes).sum::<u64>();
                    }
                }
                self.dead += bytes;
            }
        }
        Ok(())
    }

    /// A group of a tool call settles that call's staged captures.
    fn settle(&mut self, source: &EntrySource) {
        if let EntrySource::Tool { call_id } = source {
            if let Some((_, b)) = self.pending.remove(call_id) {
                self.dead += b;
            }
        }
    }

    /// Every path named by a group is tracked (state unknown until a re-check sees it).
    fn track_unknown(&mut self, entries: &[Entry]) {
        for e in entries {
            if !self.tracked.contains_key(&e.path) {
                self.tracked.insert(
                    e.path.clone(),
                    Tracked {
                        known: Known::Unknown,
                        since: None,
                        share: 0,
                    },
                );
            }
        }
    }

    /// Adds the paths of every group to `tracked` (deferred at open: only a re-check,
    /// a listing of tracked paths or a compaction needs the whole set).
    pub(crate) fn merge_group_paths(&mut self) -> Result<(), String> {
        if self.merged {
            return Ok(());
        }
        let mut all = Vec::new();
        for gs in self.groups.values() {
            for g in gs.iter().filter(|g| g.source != EntrySource::Outside) {
                all.extend(g.entries()?.iter().map(|e| e.path.clone()));
            }
        }
        for p in all {
            self.tracked.entry(p).or_insert(Tracked {
                known: Known::Unknown,
                since: None,
                share: 0,
            });
        }
        self.merged = true;
        Ok(())
    }

    /// The records of a compacted log carrying exactly this index's live content
    /// (call [`Index::merge_group_paths`] first).
    pub(crate) fn snapshot(&self, session_id: &str) -> Vec<Record> {
        let mut out = vec![Record::Session {
            session_id: session_id.to_string(),
        }];
        if self.format.is_some() {
            out.push(Record::Format {
                format: self.format.clone(),
            });
        }
        if let Some(b) = self.boundary {
            out.push(Record::Boundary { anchor_seq: b });
        }
        for (anchor, gs) in &self.groups {
            for g in gs {
                out.push(g.record(*anchor));
            }
        }
        for (call, (entries, _)) in &self.pending {
            for e in entries {
                out.push(Record::Staged {
                    call_id: call.clone(),
                    entry: e.clone(),
                });
            }
        }
        let all: Vec<TrackedUpdate> = self
            .tracked
            .iter()
            .map(|(p, t)| TrackedUpdate {
                path: p.clone(),
                known: t.known.clone(),
                since: t.since,
            })
            .collect();
        out.extend(tracked_records(all));
        out
    }
}

/// Tracked-cache updates as records of at most [`TRACKED_BATCH`] paths each (a frame
/// stays small however many paths one write touches).
pub(crate) fn tracked_records(updates: Vec<TrackedUpdate>) -> Vec<Record> {
    updates
        .chunks(TRACKED_BATCH)
        .map(|c| Record::Tracked { paths: c.to_vec() })
        .collect()
}

/// Encodes a whole log: header plus `records`.
pub(crate) fn encode_log(records: &[Record]) -> Vec<u8> {
    let mut out = header().to_vec();
    for r in records {
        encode_into(r, &mut out);
    }
    out
}

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
struct Deferred<'a> {
    /// The latest staged capture, while it is its call's only one (a write tool's call
    /// stages one path and its group follows): call id, entry, record bytes.
    last: Option<(&'a str, &'a [u8], u64)>,
    /// Call id → its staged entries (encoded, in log order) and their records' bytes.
    calls: BytesMap<&'a str, (Staged<'a>, u64)>,
    /// Path → its newest known state (encoded), `since` and share of record bytes.
    /// The keys are copies: compact in memory, where the slices of the log they
    /// were read from would be scattered over it (each lookup a cache miss).
    tracked: BytesMap<Box<[u8]>, Later<'a>>,
}

/// A tracked state left encoded: known state, `since`, share of record bytes.
type Later<'a> = (&'a [u8], Option<u64>, u64);

/// One call's staged entries (the first one inline: most calls stage one path).
#[derive(Default)]
struct Staged<'a> {
    first: &'a [u8],
    more: Vec<&'a [u8]>,
}

impl<'a> Deferred<'a> {
    fn stage(&mut self, call: &'a str, entry: &'a [u8], bytes: u64) {
        if self.last.is_none() && (self.calls.is_empty() || !self.calls.contains_key(call)) {
            self.last = Some((call, entry, bytes));
            return;
        }
        self.spill();
        self.add(call, entry, bytes);
    }

    /// Moves the latest capture into the map.
    fn spill(&mut self) {
        if let Some((call, entry, bytes)) = self.last.take() {
            self.add(call, entry, bytes);
        }
    }

    fn add(&mut self, call: &'a str, entry: &'a [u8], bytes: u64) {
        let (s, b) = self.calls.entry(call).or_default();
        if s.first.is_empty() {
            s.first = entry;
        } else {
            s.more.push(entry);
        }
        *b += bytes;
    }

    /// Removes a call's deferred captures; returns their bytes.
    fn take(&mut self, call: &str) -> Option<u64> {
        if let Some((c, _, b)) = self.last {
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
            let slot = idx.pending.entry(call.to_string()).or_default();
            slot.0.push(crate::codec::decode_entry(staged.first)?);
            for e in staged.more {
                slot.0.push(crate::codec::decode_entry(e)?);
            }
            slot.1 += b;
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
fn fold_tracked<'a>(
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
const PARALLEL_FOLD: usize = 1 << 20;

/// Why a frame could not be folded.
enum FoldError {
    /// The payload does not decode (damage; reported before any fold error).
    Decode(String),
    /// The record contradicts the index (e.g. names another session).
    Apply(String),
}

impl Index {
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
        use crate::codec::{DROPPED, GROUP, STAGED, TRACKED};
        match payload.first().copied() {
            Some(STAGED) => {
                let (call, entry) =
                    crate::codec::staged_parts(payload).map_err(FoldError::Decode)?;
                deferred.stage(call, entry, bytes);
            }
            Some(DROPPED) => {
                let call = crate::codec::dropped_call(payload).map_err(FoldError::Decode)?;
                if let Some(b) = deferred.take(call) {
                    self.dead += b;
                }
                if let Some((_, b)) = self.pending.remove(call) {
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
fn fold_frames_one(
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
        if refused.is_some() {
            return crate::codec::decode(payload)
                .map(drop)
                .map_err(|e| unreadable(o, &e));
        }
        match idx.fold_payload(all, payload, len, &mut deferred, &mut buf) {
            Ok(()) => Ok(()),
            Err(FoldError::Decode(e)) => Err(unreadable(o, &e)),
            Err(FoldError::Apply(e)) => {
                refused = Some(e);
                Ok(())
            }
        }
    });
    let corrupt = |detail: String| -> Fault {
        CorruptFile {
            path: path.to_string_lossy().into_owned(),
            detail,
        }
        .into()
    };
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
fn fold_frames_split(
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
                if refused.is_some() {
                    return crate::codec::decode(payload)
                        .map(drop)
                        .map_err(|e| unreadable(o, &e));
                }
                match idx.fold_payload(all, payload, len, &mut deferred, &mut buf) {
                    Ok(()) => Ok(()),
                    Err(FoldError::Decode(e)) => Err(unreadable(o, &e)),
                    Err(FoldError::Apply(e)) => {
                        refused = Some(e);
                        Ok(())
                    }
                }
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
    let corrupt = |detail: String| -> Fault {
        CorruptFile {
            path: path.to_string_lossy().into_owned(),
            detail,
        }
        .into()
    };
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

/// Reads the index of the session directory `sdir` (read-only; `None` when the
/// session has no log). A layout-1 directory must be migrated first.
pub(crate) fn read_index(fs: &StoreFs, sdir: &Path) -> Result<Option<Index>, Fault> {
    let path = sdir.join(LOG_NAME);
    match fs.read_opt(&path)? {
        None => Ok(None),
        Some(bytes) => Ok(Some(fold_log(&path, bytes)?.0)),
    }
}

/// The files of a layout-1 session directory (besides `journals/`).
const LEGACY: [&str; 5] = [
    "session.json",
    "pending.log",
    "tracked.json",
    "boundary.json",
    "groups",
];

/// Whether `sdir` holds layout-1 files.
pub(crate) fn has_legacy(fs: &StoreFs, sdir: &Path) -> Result<bool, Fault> {
    for name in LEGACY {
        if fs.exists(&sdir.join(name))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Migrates the layout-1 session directory `sdir` into a record log, crash-safely:
/// the log is built from the old files, written to a temporary name and renamed
/// into place (its presence marks the session as migrated), then the old files are
/// removed. After a crash, a present log wins and leftovers are removed again.
/// Nothing is removed when any old record is corrupt or newer (fails closed).
/// The caller holds the store's exclusive lock.
pub(crate) fn migrate_session(
    fs: &StoreFs,
    sdir: &Path,
    session_id: &str,
    trash: impl Fn(&Path) -> Result<bool, crate::error::FsFailure>,
) -> Result<bool, Fault> {
    let log_path = sdir.join(LOG_NAME);
    if !has_legacy(fs, sdir)? {
        return Ok(false);
    }
    if !fs.exists(&log_path)? {
        let records = legacy_records(fs, sdir, session_id)?;
        let bytes = encode_log(&records);
        let (tmp, mut f) = fs.create_tmp_beside(&log_path)?;
        let r = (|| {
            fs.write_all(&mut f, &tmp, &bytes)?;
            fs.sync_file(&f, &tmp)?;
            drop(f);
            fs.rename(&tmp, &log_path)
        })();
        if r.is_err() {
            let _ = fs.remove_file(&tmp);
        }
        r?;
        fs.sync_dir(sdir)?;
        fs.io.crash(CrashPoint::MigrateLogWritten);
    }
    for name in LEGACY {
        let p = sdir.join(name);
        if name == "groups" {
            trash(&p)?;
        } else {
            fs.remove_file(&p)?;
        }
    }
    fs.sync_dir(sdir)?;
    Ok(true)
}

/// The records of a layout-1 session: its marker, boundary, groups, pending calls
/// and tracked cache, in that order.
fn legacy_records(fs: &StoreFs, sdir: &Path, session_id: &str) -> Result<Vec<Record>, Fault> {
    let mut out = vec![Record::Session {
        session_id: session_id.to_string(),
    }];
    let mpath = sdir.join("session.json");
    if let Some(bytes) = fs.read_opt(&mpath)? {
        let m: SessionMarker = parse_record(&mpath, &bytes)?;
        if m.session_id != session_id {
            return Err(CorruptFile {
                path: mpath.to_string_lossy().into_owned(),
                detail: format!("marker names session `{}`", m.session_id),
            }
            .into());
        }
        if m.session_format.is_some() {
            out.push(Record::Format {
                format: m.session_format,
            });
        }
    }
    let bpath = sdir.join("boundary.json");
    if let Some(bytes) = fs.read_opt(&bpath)? {
        match parse_record::<BoundaryRecord>(&bpath, &bytes) {
            Ok(b) => out.push(Record::Boundary {
                anchor_seq: b.anchor_seq,
            }),
            // Layout 1 treats a torn boundary as "no previous boundary".
            Err(Fault::Corrupt(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let gdir = sdir.join("groups");
    for name in fs.list(&gdir)? {
        if is_hidden(&name) {
            continue;
        }
        let seq = parse_anchor(&gdir, &name)?;
        let adir = gdir.join(&name);
        for f in fs.list(&adir)? {
            if is_hidden(&f) {
                continue;
            }
            let p: PathBuf = adir.join(&f);
            let Some(bytes) = fs.read_opt(&p)? else {
                continue;
            };
            let rec: GroupRecord = parse_record(&p, &bytes)?;
            if rec.anchor_seq != seq {
                return Err(CorruptFile {
                    path: p.to_string_lossy().into_owned(),
                    detail: format!("anchor_seq {} in group {seq}", rec.anchor_seq),
                }
                .into());
            }
            out.push(Record::Group {
                anchor_seq: seq,
                source: rec.source,
                entries: rec.entries,
            });
        }
    }
    let ppath = sdir.join("pending.log");
    if let Some(bytes) = fs.read_opt(&ppath)? {
        let mut calls: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
        for line in parse_lines::<PendingLine>(&ppath, &bytes)? {
            if line.settled {
                calls.remove(&line.call_id);
            } else if let Some(e) = line.entry {
                calls.entry(line.call_id).or_default().push(e);
            }
        }
        for (call_id, entries) in calls {
            for entry in entries {
                out.push(Record::Staged {
                    call_id: call_id.clone(),
                    entry,
                });
            }
        }
    }
    let tpath = sdir.join("tracked.json");
    if let Some(bytes) = fs.read_opt(&tpath)? {
        match parse_record::<TrackedRecord>(&tpath, &bytes) {
            Ok(rec) => {
                let all: Vec<TrackedUpdate> = rec
                    .paths
                    .into_iter()
                    .map(|t| TrackedUpdate {
                        path: t.path,
                        known: t.known,
                        since: t.since,
                    })
                    .collect();
                out.extend(tracked_records(all));
            }
            // A cache: a torn one is dropped (paths become unknown), as layout 1 does.
            Err(Fault::Corrupt(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The anchor of a layout-1 group directory (its name: the seq, 20 digits).
pub(crate) fn parse_anchor(gdir: &Path, name: &std::ffi::OsStr) -> Result<u64, Fault> {
    name.to_str()
        .filter(|s| s.len() == 20)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| {
            CorruptFile {
                path: gdir.join(name).to_string_lossy().into_owned(),
                detail: "not an anchor group directory name".into(),
            }
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BeforeState, SkipReason};
    use crate::fsio::{DiskMeta, FileKind};
    use crate::path::RelPath;

    /// A small deterministic generator.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    fn entry(r: &mut Rng, order: u64) -> Entry {
        let path =
            RelPath::from_bytes(format!("d{}/f{}", r.next(3), r.next(6)).as_bytes()).expect("path");
        let before = match r.next(4) {
            0 => BeforeState::Absent,
            1 => BeforeState::File {
                sha256: format!("{:064x}", r.next(1 << 40)),
                size: r.next(100),
                mode: 0o644,
            },
            2 => BeforeState::Uncovered { size: r.next(9) },
            _ => BeforeState::Skipped {
                reason: SkipReason::Symlink,
            },
        };
        Entry {
            path,
            order,
            before,
        }
    }

    fn known(r: &mut Rng) -> Known {
        match r.next(3) {
            0 => Known::Unknown,
            1 => Known::Absent,
            _ => Known::Present {
                meta: DiskMeta {
                    kind: FileKind::File,
                    size: r.next(50),
                    mode: 0o600,
                    nlink: 1,
                    ino: r.next(1000),
                    dev: 3,
                    mtime_s: 5,
                    mtime_ns: 6,
                    ctime_s: -7,
                    ctime_ns: 8,
                },
                sha256: (r.next(2) == 0).then(|| format!("{:064x}", r.next(99))),
                recorded: r.next(2) == 0,
            },
        }
    }

    fn records(seed: u64, n: usize) -> Vec<Record> {
        let mut r = Rng(seed);
        let mut out = vec![Record::Session {
            session_id: "s".into(),
        }];
        for i in 0..n as u64 {
            let call = format!("c{}", r.next(5));
            out.push(match r.next(8) {
                0 | 1 => Record::Staged {
                    call_id: call,
                    entry: entry(&mut r, i),
                },
                2 => Record::Dropped { call_id: call },
                3 => Record::Group {
                    anchor_seq: r.next(4),
                    source: match r.next(3) {
                        0 => EntrySource::Recheck,
                        1 => EntrySource::Outside,
                        _ => EntrySource::Tool { call_id: call },
                    },
                    entries: (0..r.next(3)).map(|k| entry(&mut r, i * 10 + k)).collect(),
                },
                4 | 5 => Record::Tracked {
                    paths: (0..1 + r.next(3))
                        .map(|_| TrackedUpdate {
                            path: RelPath::from_bytes(format!("d1/f{}", r.next(6)).as_bytes())
                                .expect("path"),
                            known: known(&mut r),
                            since: (r.next(2) == 0).then(|| r.next(5)),
                        })
                        .collect(),
                },
                6 => Record::Boundary {
                    anchor_seq: r.next(5),
                },
                _ => Record::Pruned {
                    anchors: vec![r.next(4)],
                },
            });
        }
        out
    }

    /// The index as folded record by record from fully decoded frames.
    fn reference(bytes: &[u8], start: usize, idx: &mut Index) {
        let d = crate::log::decode_frames(bytes, start).expect("decode");
        for (rec, n) in d.records {
            idx.apply(rec, n).expect("apply");
        }
    }

    #[test]
    fn folding_frames_gives_the_index_of_decoding_then_applying_each_record() {
        for seed in 0..40 {
            let recs = records(seed, 120);
            let bytes = encode_log(&recs);
            let (got, valid, torn) =
                fold_log(Path::new("records.log"), bytes.clone()).expect("fold");
            assert_eq!((valid, torn), (bytes.len() as u64, 0));
            let mut want = Index::default();
            reference(&bytes, HEADER_LEN, &mut want);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "seed {seed}");
            // Folded in two parts (another handle's appends), with the groups' paths
            // merged in between.
            let cut = encode_log(&recs[..60]).len();
            let (mut a, _, _) =
                fold_log(Path::new("records.log"), bytes[..cut].to_vec()).expect("fold");
            let mut b = a.clone();
            a.merge_group_paths().expect("merge");
            b.merge_group_paths().expect("merge");
            fold_frames(
                &mut a,
                Path::new("records.log"),
                &std::sync::Arc::new(bytes[cut..].to_vec()),
                0,
            )
            .expect("tail");
            reference(&bytes[cut..], 0, &mut b);
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "seed {seed}, in two parts"
            );
        }
    }

    #[test]
    fn a_large_log_folds_on_two_threads_as_on_one() {
        let recs = records(11, 32_000);
        let full = encode_log(&recs);
        assert!(full.len() > PARALLEL_FOLD, "{}", full.len());
        let fold = |b: &[u8], split: bool| {
            let mut idx = Index::default();
            let all = std::sync::Arc::new(b.to_vec());
            let path = Path::new("records.log");
            let r = if split {
                fold_frames_split(&mut idx, path, &all, HEADER_LEN)
            } else {
                fold_frames_one(&mut idx, path, &all, HEADER_LEN)
            };
            match r {
                Ok(v) => format!("{v:?} {idx:?}"),
                Err(e) => format!("error: {e}"),
            }
        };
        let mut cases = vec![full.clone(), full[..full.len() - 7].to_vec()];
        let mut zeroed = full.clone();
        zeroed.extend_from_slice(&[0u8; 64]);
        cases.push(zeroed);
        for at in [
            HEADER_LEN + 20,
            full.len() / 3,
            full.len() / 2 + 5,
            full.len() - 2,
        ] {
            for bit in [0x01u8, 0x40] {
                let mut flipped = full.clone();
                flipped[at] ^= bit;
                cases.push(flipped);
            }
        }
        // A record naming another session late in the log, then (checksum fixed up)
        // an unknown kind after it, and a damaged checksum after that.
        let mut bad = recs.clone();
        bad.insert(
            24_000,
            Record::Session {
                session_id: "other".into(),
            },
        );
        let bad = encode_log(&bad);
        cases.push(bad.clone());
        let mut unknown = bad.clone();
        let payload = [200u8, 1];
        unknown.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        unknown.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
        unknown.extend_from_slice(&crate::log::crc32(&payload).to_le_bytes());
        unknown.extend_from_slice(&payload);
        unknown.extend_from_slice(&encode_log(&recs[1..40])[HEADER_LEN..]);
        cases.push(unknown.clone());
        let mut both = unknown;
        both[bad.len() - 30] ^= 0x08;
        cases.push(both);
        for (i, b) in cases.iter().enumerate() {
            assert_eq!(fold(b, true), fold(b, false), "case {i}");
        }
        assert!(!fold(&cases[0], true).starts_with("error"));
    }

    #[test]
    fn damage_is_reported_before_a_contradicting_record() {
        let mut recs = records(7, 30);
        recs.insert(
            5,
            Record::Session {
                session_id: "other".into(),
            },
        );
        let mut bytes = encode_log(&recs);
        match fold_log(Path::new("records.log"), bytes.clone()) {
            Err(Fault::Corrupt(c)) => assert!(c.detail.contains("other"), "{c:?}"),
            other => panic!("{other:?}"),
        }
        // An unknown record kind after it (checksum fixed up): that damage wins.
        let mut extra = Vec::new();
        let payload = [200u8, 1];
        extra.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        extra.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
        extra.extend_from_slice(&crate::log::crc32(&payload).to_le_bytes());
        extra.extend_from_slice(&payload);
        bytes.extend_from_slice(&extra);
        bytes.extend_from_slice(&encode_log(&recs[1..3])[HEADER_LEN..]);
        match fold_log(Path::new("records.log"), bytes.clone()) {
            Err(Fault::Corrupt(c)) => {
                assert!(c.detail.contains("unreadable record"), "{c:?}")
            }
            other => panic!("{other:?}"),
        }
    }
}
