//! A session's in-memory index, rebuilt from its record log (`fold`), and the
//! migration of a layout-1 session directory (JSON files) into a record log
//! (`legacy`).

mod fold;
mod legacy;

pub(crate) use fold::{fold_frames, fold_log, readable_prefix};
pub(crate) use legacy::{has_legacy, migrate_session, parse_anchor};

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

/// The blobs a log keeps (`blob` records): name → bytes, and the record's size.
pub(crate) type Kept = BTreeMap<String, (KeptBytes, u64)>;

/// Where the content of a `blob` record is: in memory (read with the log), or only in the
/// log file (appended by this handle: read back when it is needed, so what a turn keeps
/// in the log does not also stay in memory; see [`crate::Session`]'s `kept_content`).
#[derive(Clone, Debug)]
pub(crate) enum KeptBytes {
    Mem(crate::codec::Shared),
    /// `len` bytes at offset `at` of the log file the index was folded from.
    File {
        at: u64,
        len: u64,
    },
}

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

/// The staged captures of one call not yet settled: its entries in the order staged,
/// the bytes of their records, and the set of their paths (whether a path is staged
/// already is one lookup in `log n`, however many paths the call names).
#[derive(Debug, Default, Clone)]
pub(crate) struct Pending {
    /// Only through [`Pending::push`], which keeps `paths` in step.
    entries: Vec<Entry>,
    pub bytes: u64,
    paths: std::collections::BTreeSet<RelPathKey>,
}

impl Pending {
    pub(crate) fn push(&mut self, e: Entry) {
        self.paths.insert(e.path.clone());
        self.entries.push(e);
    }

    /// The call's staged entries, in the order staged.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether the call staged a capture of `path`.
    pub(crate) fn stages(&self, path: &RelPathKey) -> bool {
        self.paths.contains(path)
    }
}

/// The in-memory index of one session, folded from its records.
#[derive(Debug, Default, Clone)]
pub(crate) struct Index {
    pub session_id: Option<String>,
    pub format: Option<String>,
    pub groups: BTreeMap<u64, Vec<Group>>,
    /// Staged captures of calls not yet settled.
    pub pending: BTreeMap<String, Pending>,
    /// The anchor a staged call's commit will join, when its captures named one
    /// (`staged_at`): such a call counts as committed there if its settlement never
    /// reaches the log ([`Index::settle_orphans`]).
    pub pending_at: BTreeMap<String, u64>,
    pub tracked: BTreeMap<RelPathKey, Tracked>,
    pub boundary: Option<u64>,
    boundary_bytes: u64,
    /// The paths of every group are in `tracked` (see [`Index::merge_group_paths`]).
    merged: bool,
    /// Bytes of records whose content a compacted log would not carry.
    pub dead: u64,
    /// Blobs kept in the log (`blob` records): name → bytes, and the record's size.
    pub inline: Kept,
    /// Bytes of the `blob` records [`Index::named_blobs`] leaves out (as of the last
    /// count, made when groups or calls were removed since; see [`Index::waste`]).
    inline_dead: u64,
    /// Groups or staged calls were removed since `inline_dead` was counted.
    inline_stale: bool,
    /// The workspace scan checked its index's entries kept in this log against `inline`
    /// (not written anywhere: content leaves `inline` only with the whole index, which a
    /// new one replaces with this `false`).
    pub scan_checked: bool,
    /// The paths with a before-state at one anchor (the one last asked about: see
    /// [`Index::recorded_at`]), kept current as groups come and go.
    at_anchor: Option<(u64, std::collections::HashSet<RelPathKey>)>,
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
            Record::Staged {
                call_id,
                entry,
                anchor,
            } => {
                match anchor {
                    Some(a) => self.pending_at.insert(call_id.clone(), a),
                    None => self.pending_at.remove(&call_id),
                };
                let slot = self.pending.entry(call_id).or_default();
                slot.push(entry);
                slot.bytes += bytes;
            }
            Record::Dropped { call_id } => {
                if let Some(b) = self.unpend(&call_id) {
                    self.dead += b;
                }
                self.dead += bytes;
                self.inline_stale = !self.inline.is_empty();
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
                self.note_recorded(anchor_seq, &source, &entries);
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
                let noted = self
                    .at_anchor
                    .as_ref()
                    .is_some_and(|(a, _)| *a == anchor_seq);
                if (self.merged || noted) && g.source != EntrySource::Outside {
                    let entries = g.entries()?.into_owned();
                    if self.merged {
                        self.track_unknown(&entries);
                    }
                    self.note_recorded(anchor_seq, &g.source, &entries);
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
                if self
                    .at_anchor
                    .as_ref()
                    .is_some_and(|(a, _)| anchors.contains(a))
                {
                    self.at_anchor = None;
                }
                for a in anchors {
                    if let Some(gs) = self.groups.remove(&a) {
                        self.dead += gs.iter().map(|g| g.bytes).sum::<u64>();
                    }
                }
                self.dead += bytes;
                self.inline_stale = !self.inline.is_empty();
            }
            Record::Blob {
                sha256,
                bytes: data,
            } => self.keep(sha256, KeptBytes::Mem(data), bytes),
        }
        Ok(())
    }

    /// A `blob` record of `bytes` bytes keeps `sha256`'s content (`at`): the first one
    /// counts, a later one is dead.
    fn keep(&mut self, sha256: String, at: KeptBytes, bytes: u64) {
        match self.inline.entry(sha256) {
            std::collections::btree_map::Entry::Occupied(_) => self.dead += bytes,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert((at, bytes));
            }
        }
    }

    /// [`Index::apply`] of a `blob` record this handle appended, its frame of `frame`
    /// bytes ending with the `len` bytes of content at offset `at` of the log: the index
    /// keeps where they are, not a copy of them.
    pub(crate) fn apply_kept_in_file(&mut self, sha256: String, at: u64, len: u64, frame: u64) {
        self.keep(sha256, KeptBytes::File { at, len }, frame);
    }

    /// Every blob name the index keeps alive: named by a group, a staged call, or the
    /// tracked cache's last known content of a path (what garbage collection spares, and
    /// the `blob` records a compaction carries).
    pub(crate) fn named_blobs(&self) -> Result<std::collections::HashSet<String>, String> {
        let mut named = std::collections::HashSet::new();
        let mut add = |entries: &[Entry]| {
            for e in entries {
                if let crate::format::BeforeState::File { sha256, .. } = &e.before {
                    named.insert(sha256.clone());
                }
            }
        };
        for gs in self.groups.values() {
            for g in gs {
                add(&g.entries()?);
            }
        }
        for p in self.pending.values() {
            add(p.entries());
        }
        // A later re-check records it at a boundary if the path changes, and the
        // workspace scan's index may name it.
        for t in self.tracked.values() {
            if let Known::Present {
                sha256: Some(sha), ..
            } = &t.known
            {
                named.insert(sha.clone());
            }
        }
        Ok(named)
    }

    /// Bytes of the log a compaction would not carry: dead records, and the `blob`
    /// records nothing names any more (counted again only after groups or staged calls
    /// were removed).
    pub(crate) fn waste(&mut self) -> Result<u64, String> {
        if self.inline_stale {
            let named = self.named_blobs()?;
            self.inline_dead = self
                .inline
                .iter()
                .filter(|(sha, _)| !named.contains(*sha))
                .map(|(_, (_, n))| *n)
                .sum();
            self.inline_stale = false;
        }
        Ok(self.dead + self.inline_dead)
    }

    /// A group of a tool call settles that call's staged captures.
    fn settle(&mut self, source: &EntrySource) {
        if let EntrySource::Tool { call_id } = source {
            if let Some(b) = self.unpend(call_id) {
                self.dead += b;
            }
        }
    }

    /// Removes a call's staged captures; returns their records' bytes.
    pub(crate) fn unpend(&mut self, call_id: &str) -> Option<u64> {
        if !self.pending_at.is_empty() {
            self.pending_at.remove(call_id);
        }
        self.pending.remove(call_id).map(|p| p.bytes)
    }

    /// Settles, as committed at the anchor their captures named, the staged calls whose
    /// settlement is not in the log and that `live` does not claim (calls this handle
    /// staged or committed itself and has not written the settlement of yet). Such a
    /// call's commit was lost with its process (or is still to come from another
    /// handle): its before-states join the anchor as a tool group, and its paths'
    /// states become unknown (the next re-check records them). Nothing is written:
    /// the next compaction carries the groups.
    pub(crate) fn settle_orphans(&mut self, live: impl Fn(&str) -> bool) {
        let orphans: Vec<(String, u64)> = self
            .pending_at
            .iter()
            .filter(|(c, _)| !live(c))
            .map(|(c, a)| (c.clone(), *a))
            .collect();
        for (call_id, anchor) in orphans {
            self.pending_at.remove(&call_id);
            let Some(Pending { entries, bytes, .. }) = self.pending.remove(&call_id) else {
                continue;
            };
            for e in &entries {
                let old = self.tracked.insert(
                    e.path.clone(),
                    Tracked {
                        known: Known::Unknown,
                        since: None,
                        share: 0,
                    },
                );
                if let Some(o) = old {
                    self.dead += o.share;
                }
            }
            let source = EntrySource::Tool { call_id };
            self.note_recorded(anchor, &source, &entries);
            self.groups.entry(anchor).or_default().push(Group {
                source,
                body: GroupBody::Built(entries),
                bytes,
            });
        }
    }

    /// Whether `path` has a before-state at `anchor` (in a group other than outside
    /// notes): a rewind to that anchor or earlier restores that one or an earlier one,
    /// never a state recorded there later. The first question about an anchor reads its
    /// groups; the answer is then kept current as groups are added or pruned.
    pub(crate) fn recorded_at(&mut self, anchor: u64, path: &RelPathKey) -> Result<bool, String> {
        if self.at_anchor.as_ref().is_none_or(|(a, _)| *a != anchor) {
            // The previous anchor's set, emptied: its table is reused (a turn's first call
            // need not allocate one).
            let mut paths = match self.at_anchor.take() {
                Some((_, mut p)) if p.capacity() <= 4096 => {
                    p.clear();
                    p
                }
                _ => std::collections::HashSet::new(),
            };
            for g in self.groups.get(&anchor).into_iter().flatten() {
                if g.source != EntrySource::Outside {
                    paths.extend(g.entries()?.iter().map(|e| e.path.clone()));
                }
            }
            self.at_anchor = Some((anchor, paths));
        }
        Ok(self
            .at_anchor
            .as_ref()
            .is_some_and(|(_, paths)| paths.contains(path)))
    }

    /// A group of `entries` from `source` joins `anchor` (see [`Index::recorded_at`]).
    fn note_recorded(&mut self, anchor: u64, source: &EntrySource, entries: &[Entry]) {
        if let Some((a, paths)) = self.at_anchor.as_mut() {
            if *a == anchor && *source != EntrySource::Outside {
                paths.extend(entries.iter().map(|e| e.path.clone()));
            }
        }
    }

    /// Whether the group of tool call `call_id` is at `anchor`.
    pub(crate) fn has_tool_group(&self, anchor: u64, call_id: &str) -> bool {
        // From the newest: a waiting commit's group is usually its anchor's last one (an
        // anchor of a long turn holds thousands).
        self.groups.get(&anchor).is_some_and(|gs| {
            gs.iter()
                .rev()
                .any(|g| matches!(&g.source, EntrySource::Tool { call_id: c } if c == call_id))
        })
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
    /// (call [`Index::merge_group_paths`] first, and read back the content the index
    /// keeps in the log file only: see the session's `load_kept`).
    pub(crate) fn snapshot(&self, session_id: &str) -> Result<Vec<Record>, String> {
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
        // The blobs kept in the log that a group or a staged call still names, ahead of
        // them; the others go with the compaction.
        if !self.inline.is_empty() {
            let named = self.named_blobs()?;
            let mut kept: Vec<(&String, &crate::codec::Shared)> = Vec::new();
            for (sha, (b, _)) in &self.inline {
                match b {
                    _ if !named.contains(sha) => {}
                    KeptBytes::Mem(b) => kept.push((sha, b)),
                    KeptBytes::File { .. } => {
                        return Err(format!("the content of blob {sha} was not read back"));
                    }
                }
            }
            kept.sort_by(|a, b| a.0.cmp(b.0));
            for (sha, b) in kept {
                out.push(Record::Blob {
                    sha256: sha.clone(),
                    bytes: b.clone(),
                });
            }
        }
        for (anchor, gs) in &self.groups {
            for g in gs {
                out.push(g.record(*anchor));
            }
        }
        for (call, p) in &self.pending {
            for e in p.entries() {
                out.push(Record::Staged {
                    call_id: call.clone(),
                    entry: e.clone(),
                    anchor: self.pending_at.get(call).copied(),
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
        Ok(out)
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

/// Reads the index of the session directory `sdir` (read-only; `None` when the
/// session has no log). A layout-1 directory must be migrated first.
pub(crate) fn read_index(fs: &StoreFs, sdir: &Path) -> Result<Option<Index>, Fault> {
    let path = sdir.join(LOG_NAME);
    match fs.read_opt(&path)? {
        None => Ok(None),
        Some(bytes) => Ok(Some(fold_log(&path, bytes)?.0)),
    }
}

#[cfg(test)]
mod tests;
