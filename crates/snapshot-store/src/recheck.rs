//! Message boundaries: tracked files re-checked, what changed since recorded.

use serde::Serialize;

use crate::capture::Seen;
use crate::codec::{Record, TrackedUpdate};
use crate::error::{Fault, FsFailure, RecheckError};
use crate::format::{BeforeState, Entry, EntrySource, Known};
use crate::fsio::{FileKind, Walk, WsDir, by_directory};
use crate::outcome::PathFailure;
use crate::path::RelPath;
use crate::records::tracked_records;
use crate::seam::Area;

use crate::session::Session;

/// One change recorded by [`Session::recheck_tracked`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedChange {
    /// Workspace-relative path.
    pub path: RelPath,
    /// The state recorded (the current disk state at the boundary).
    pub before: BeforeState,
}

/// What [`Session::recheck_tracked`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RecheckOutcome {
    /// Tracked paths examined.
    pub checked: usize,
    /// Paths whose disk state changed since the store last knew it.
    pub recorded: Vec<RecordedChange>,
    /// Paths that could not be examined (the pass went on; they are retried next time).
    pub failed: Vec<PathFailure>,
}

/// A boundary re-check reads the changed paths on several threads from this many.
const PARALLEL_RECHECK: usize = 64;

/// A boundary re-check looks at its tracked paths (`lstat`) on several threads from
/// this many.
const PARALLEL_LOOK: usize = 4096;

/// A tracked path a re-check found changed, to be read into the store.
struct Changed {
    rel: RelPath,
    known: Known,
    since: Option<u64>,
    order: u64,
    tool_content: bool,
    /// Its `lstat` showed a regular file.
    regular: bool,
}

/// The session's re-check of tracked files at a message boundary: every change made
/// outside a captured call is recorded before the next turn.
#[derive(Clone, Copy)]
pub(crate) struct Recheck<'s> {
    pub(crate) s: &'s Session,
}

impl Session {
    /// The session's boundary re-check.
    pub(crate) fn recheck(&self) -> Recheck<'_> {
        Recheck { s: self }
    }

    /// [`Session::recheck_tracked`] of a forked session: at its first boundary (before it
    /// has re-checked anything itself), it first takes over the paths its `ancestors`
    /// (nearest parent first) track, with what each last knew of them, so a file the
    /// agent changed only before the fork is re-checked in the fork too: changed outside
    /// the agent, by an undo or by a restore inside the fork, it is recorded and a later
    /// rewind within the fork puts it back. A path this session tracks already keeps its
    /// own state; of several ancestors the nearest one's state is taken. With no
    /// ancestors this is exactly [`Session::recheck_tracked`].
    pub fn recheck_tracked_chain(
        &self,
        anchor_seq: u64,
        ancestors: &[crate::chain::ChainLink],
    ) -> Result<RecheckOutcome, RecheckError> {
        self.recheck().recheck_tracked_chain(anchor_seq, ancestors)
    }

    /// At a user-message boundary (`anchor_seq` = that message's seq): checks every
    /// tracked path and records the current state of each whose disk state changed
    /// since the store last knew it. Unchanged paths (same size, mtime, ctime, inode,
    /// mode, type) are not read.
    pub fn recheck_tracked(&self, anchor_seq: u64) -> Result<RecheckOutcome, RecheckError> {
        self.recheck().recheck_tracked(anchor_seq)
    }

    /// The tracked paths (every path with a recorded before-state, plus the cache).
    pub fn tracked_paths(&self) -> Result<Vec<RelPath>, RecheckError> {
        self.recheck().tracked_paths()
    }

    /// The anchors that have a group, ascending.
    pub fn anchors(&self) -> Result<Vec<u64>, RecheckError> {
        self.recheck().anchors()
    }
}

impl Recheck<'_> {
    pub(crate) fn recheck_tracked_chain(
        &self,
        anchor_seq: u64,
        ancestors: &[crate::chain::ChainLink],
    ) -> Result<RecheckOutcome, RecheckError> {
        if !ancestors.is_empty() {
            self.adopt_tracked(ancestors)?;
        }
        self.recheck_tracked(anchor_seq)
    }

    /// Takes over the tracked paths of `ancestors` (see [`Session::recheck_tracked_chain`])
    /// when this session has no boundary yet; returns how many paths it took.
    pub(crate) fn adopt_tracked(
        &self,
        ancestors: &[crate::chain::ChainLink],
    ) -> Result<usize, RecheckError> {
        {
            let mut st = self.s.lock_state();
            self.s.prepare(&mut st)?;
            if st.idx.boundary.is_some() {
                return Ok(0);
            }
        }
        let mut taken: std::collections::BTreeMap<RelPath, Known> = Default::default();
        // The content the ancestors' logs keep: what a state taken over names goes into
        // this session's log with it (a later boundary may record that state here).
        let mut elsewhere: std::collections::HashMap<String, crate::codec::Shared> =
            Default::default();
        let mut seen = vec![self.s.id.clone()];
        for link in ancestors {
            if seen.contains(&link.session_id) {
                continue;
            }
            seen.push(link.session_id.clone());
            let anc = match self.s.planner().ancestor_view(&link.session_id) {
                Ok(a) => a,
                Err(crate::chain::AncestorFail::Id(reason)) => {
                    return Err(RecheckError::InvalidAncestor {
                        id: link.session_id.clone(),
                        reason,
                    });
                }
                Err(crate::chain::AncestorFail::Fs(f)) => return Err(Fault::from(f).into()),
            };
            for (path, known) in anc.recheck().tracked_known()? {
                taken.entry(path).or_insert(known);
            }
            for (sha, bytes) in anc.kept_blobs()? {
                elsewhere.entry(sha).or_insert(bytes);
            }
        }
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        if st.idx.boundary.is_some() {
            return Ok(0);
        }
        st.idx.merge_group_paths().map_err(|d| self.s.damaged(d))?;
        let updates: Vec<TrackedUpdate> = taken
            .into_iter()
            .filter(|(path, _)| !st.idx.tracked.contains_key(path))
            .map(|(path, known)| TrackedUpdate {
                path,
                known,
                since: None,
            })
            .collect();
        let n = updates.len();
        if n > 0 {
            let mut recs: Vec<Record> = Vec::new();
            for u in &updates {
                if let Known::Present {
                    sha256: Some(sha), ..
                } = &u.known
                {
                    if let Some(bytes) = elsewhere.remove(sha) {
                        recs.push(Record::Blob {
                            sha256: sha.clone(),
                            bytes,
                        });
                    }
                }
            }
            recs.extend(tracked_records(updates));
            let _g = self.s.lock_shared()?;
            self.s.append(&mut st, recs)?;
        }
        Ok(n)
    }

    /// Every tracked path with what the store last knew of it.
    fn tracked_known(&self) -> Result<Vec<(RelPath, Known)>, RecheckError> {
        let mut st = self.s.lock_state();
        self.s.sync(&mut st)?;
        st.idx.merge_group_paths().map_err(|d| self.s.damaged(d))?;
        Ok(st
            .idx
            .tracked
            .iter()
            .map(|(p, t)| (p.clone(), t.known.clone()))
            .collect())
    }

    pub(crate) fn recheck_tracked(&self, anchor_seq: u64) -> Result<RecheckOutcome, RecheckError> {
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let _g = self.s.lock_shared()?;
        st.idx.merge_group_paths().map_err(|d| self.s.damaged(d))?;
        let paths: Vec<(RelPath, (Known, Option<u64>))> = st
            .idx
            .tracked
            .iter()
            .map(|(p, t)| (p.clone(), (t.known.clone(), t.since)))
            .collect();
        let prev_boundary = st.idx.boundary.filter(|b| *b < anchor_seq);
        // A second pass at the same message (before a preview, a rewind or a fork that adds
        // no message of its own): a change found now happened after the message, which saw
        // the last known state. That state is recorded at the message, ahead of the current
        // one, so a rewind to the message itself is exact.
        let rerun = st.idx.boundary == Some(anchor_seq);
        let mut backdated = Vec::new();
        let mut outcome = RecheckOutcome {
            checked: paths.len(),
            recorded: Vec::new(),
            failed: Vec::new(),
        };
        let mut entries = Vec::new();
        // The state of files tools wrote since the last boundary, recorded here once: kept
        // apart from the changes made outside the agent (a scan-found, in-turn source), so
        // the plan can tell who made the newest change of each path.
        let mut tool_written = Vec::new();
        let mut updates = Vec::new();
        // 1. Which paths changed (one `lstat` each, the parent directory opened once per
        //    directory; with many paths, directories shared out among threads): in path
        //    order.
        let threads = if paths.len() < PARALLEL_LOOK {
            1
        } else {
            crate::cpus().min(4)
        };
        let look = |run: &[(RelPath, (Known, Option<u64>))]| {
            // One run: the paths of one directory.
            let mut cached: Option<Option<WsDir<'_>>> = None;
            let mut out = Vec::with_capacity(run.len());
            for (rel, (known, _)) in run {
                let (_, name) = rel.split_last();
                let r = (|| -> Result<Option<(bool, bool)>, FsFailure> {
                    if cached.is_none() {
                        let mut created = Vec::new();
                        cached = Some(match self.s.ws.walk_parent(rel, false, &mut created)? {
                            Walk::Parent(d) => Some(d),
                            _ => None,
                        });
                    }
                    let dir = cached.as_ref().and_then(|d| d.as_ref());
                    let now = match dir {
                        Some(d) => match self.s.ws.lstat(d, name, rel)? {
                            None => Known::Absent,
                            Some(meta) => Known::Present {
                                meta,
                                sha256: None,
                                recorded: false,
                            },
                        },
                        // Parent missing or blocked: find out which through the full path.
                        None => self.s.staging().observe_meta(rel)?,
                    };
                    // Unchanged = same metadata and content already known. A file a tool wrote
                    // since (content unknown) is recorded once, so every boundary's state is exact.
                    let same = match (known, &now) {
                        // A directory is no file: absent as one, however its own metadata
                        // changes (its files have records of their own).
                        (a, b) if absent_as_file(a) && absent_as_file(b) => true,
                        // Still behind a parent that is not a directory (or a symlink): the
                        // skip recorded when it got there stands.
                        (Known::Unknown, Known::Unknown) => true,
                        (
                            Known::Present {
                                meta: a, recorded, ..
                            },
                            Known::Present { meta: b, .. },
                        ) => a == b && *recorded,
                        _ => false,
                    };
                    if same {
                        return Ok(None);
                    }
                    // The content a tool wrote, untouched since (same metadata), recorded once:
                    // not a change made outside the agent.
                    let tool_content = matches!(
                        (known, &now),
                        (Known::Present { meta: a, recorded: false, .. }, Known::Present { meta: b, .. }) if a == b
                    );
                    let regular =
                        matches!(&now, Known::Present { meta, .. } if meta.kind == FileKind::File);
                    Ok(Some((tool_content, regular)))
                })();
                if r.is_err() {
                    cached = None;
                }
                out.push(r);
            }
            out
        };
        let looked = by_directory(&paths, |(rel, _)| rel.as_bytes(), threads, look);
        let mut changed: Vec<Changed> = Vec::new();
        for ((rel, (known, since)), r) in paths.into_iter().zip(looked.into_iter().flatten()) {
            match r {
                Ok(None) => {}
                Ok(Some((tool_content, regular))) => changed.push(Changed {
                    order: self.s.store.next_order(),
                    rel,
                    known,
                    since,
                    tool_content,
                    regular,
                }),
                Err(e) if e.area == Area::Workspace => {
                    // Per-path failure: reported; the path stays as last known and is retried next time.
                    outcome.failed.push(PathFailure {
                        path: rel.clone(),
                        display: rel.display(),
                        error: e.to_string(),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        // 2. Their current states read into the store, a directory's files together, on
        //    several threads when there are many (after a long turn, every file a tool wrote).
        //    Small files are kept in the log, written ahead of the records naming them.
        //    The log keeps them up to its size limit: what does not fit goes to blob files.
        let sink = self.s.log_sink(&st);
        let captured = self.capture_changed(&changed, Some(&sink));
        let blobs = sink.records();
        // 3. Recorded in path order.
        for (c, r) in changed.into_iter().zip(captured) {
            let Changed {
                rel,
                known,
                since,
                order,
                tool_content,
                ..
            } = c;
            let (before, new_known) = match r {
                Ok(x) => x,
                Err(e) if e.area == Area::Workspace => {
                    outcome.failed.push(PathFailure {
                        path: rel.clone(),
                        display: rel.display(),
                        error: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // Same content and permission bits as last known (e.g. only touched): record
            // nothing, refresh metadata. (A `chmod` alone is a change: a restore puts the
            // bits back.)
            if let (
                Known::Present {
                    sha256: Some(old),
                    meta,
                    ..
                },
                BeforeState::File {
                    sha256: new, mode, ..
                },
            ) = (&known, &before)
            {
                if old == new && meta.mode == *mode {
                    updates.push((rel.clone(), new_known, since));
                    continue;
                }
            }
            // The change happened after the previous boundary, which saw the last known
            // state: record that state there too (unless already recorded there or later),
            // so a rewind to the previous boundary is exact.
            let mut order = order;
            let kept = &st.idx.inline;
            if rerun {
                if let Some(e) = self.backdated_entry(&rel, &known, since, anchor_seq, order, kept)
                {
                    backdated.push(e);
                    order = self.s.store.next_order();
                }
            } else if let Some(prev) = prev_boundary {
                let order = self.s.store.next_order();
                if let Some(e) = self.backdated_entry(&rel, &known, since, prev, order, kept) {
                    backdated.push(e);
                }
            }
            let entry = Entry {
                path: rel.clone(),
                order,
                before: before.clone(),
            };
            if tool_content {
                tool_written.push(entry);
            } else {
                entries.push(entry);
            }
            outcome.recorded.push(RecordedChange {
                path: rel.clone(),
                before,
            });
            updates.push((rel, new_known, Some(anchor_seq)));
        }
        let backdate_at = if rerun {
            Some(anchor_seq)
        } else {
            prev_boundary
        };
        if let (Some(at), false) = (backdate_at, backdated.is_empty()) {
            self.s
                .append_group(&mut st, at, EntrySource::Recheck, backdated, Vec::new())?;
        }
        let mut also = Vec::new();
        if !tool_written.is_empty() {
            also.push(Record::Group {
                anchor_seq,
                source: EntrySource::Scan { call_id: None },
                entries: tool_written,
            });
        }
        also.extend(tracked_records(
            updates
                .into_iter()
                .map(|(path, known, since)| TrackedUpdate { path, known, since })
                .collect(),
        ));
        if st.idx.boundary.is_none_or(|b| b < anchor_seq) {
            also.push(Record::Boundary { anchor_seq });
        }
        let mut recs = blobs;
        if !entries.is_empty() {
            recs.push(Record::Group {
                anchor_seq,
                source: EntrySource::Recheck,
                entries,
            });
        }
        recs.extend(also);
        if !recs.is_empty() {
            self.s.append(&mut st, recs)?;
        }
        Ok(outcome)
    }

    /// Reads the current state of each changed path into the store (as a capture does),
    /// in the order given. The paths of one directory are read together, with the
    /// directory opened once; with many paths, directories are shared out among threads.
    fn capture_changed(
        &self,
        changed: &[Changed],
        sink: Option<&crate::blob::LogSink<'_>>,
    ) -> Vec<Result<(BeforeState, Known), FsFailure>> {
        let threads = if changed.len() < PARALLEL_RECHECK {
            1
        } else {
            crate::cpus().min(4)
        };
        let run = |run: &[Changed]| {
            let mut out = Vec::with_capacity(run.len());
            let mut dir: Option<Option<WsDir<'_>>> = None;
            let staging = match sink {
                Some(k) => self.s.staging_into(k),
                None => self.s.staging(),
            };
            for c in run {
                let res = (|| {
                    if dir.is_none() {
                        let mut created = Vec::new();
                        dir = Some(match self.s.ws.walk_parent(&c.rel, false, &mut created)? {
                            Walk::Parent(d) => Some(d),
                            _ => None,
                        });
                    }
                    let (before, known, _) = match dir.as_ref().and_then(|d| d.as_ref()) {
                        // A regular file by the `lstat` just made: opened without another.
                        Some(d) => staging.capture_in(
                            d,
                            &c.rel,
                            if c.regular {
                                Seen::Regular
                            } else {
                                Seen::Unknown
                            },
                        )?,
                        None => staging.capture_path(&c.rel, Seen::Unknown)?,
                    };
                    Ok((before, known))
                })();
                if res.is_err() {
                    dir = None; // opened again for the next path
                }
                out.push(res);
            }
            out
        };
        by_directory(changed, |c| c.rel.as_bytes(), threads, run)
            .into_iter()
            .flatten()
            .collect()
    }

    /// The entry recording `known` (the state last seen) at boundary `prev`, when the
    /// path changed after `prev` and that state is not already recorded at `prev` or later
    /// (and its content is still in the store: a blob file, or `kept` in the log).
    pub(crate) fn backdated_entry(
        &self,
        rel: &RelPath,
        known: &Known,
        since: Option<u64>,
        prev: u64,
        order: u64,
        kept: &crate::records::Kept,
    ) -> Option<Entry> {
        if since.is_some_and(|s| s >= prev) {
            return None;
        }
        let before = match known {
            k if absent_as_file(k) => BeforeState::Absent,
            Known::Present {
                meta,
                sha256: Some(sha),
                recorded: true,
            } if meta.kind == FileKind::File
                && (kept.contains_key(sha) || self.s.store.has_blob(sha)) =>
            {
                BeforeState::File {
                    sha256: sha.clone(),
                    size: meta.size,
                    mode: meta.mode,
                }
            }
            _ => return None,
        };
        Some(Entry {
            path: rel.clone(),
            order,
            before,
        })
    }

    pub(crate) fn tracked_paths(&self) -> Result<Vec<RelPath>, RecheckError> {
        let mut st = self.s.lock_state();
        self.s.sync(&mut st)?;
        st.idx.merge_group_paths().map_err(|d| self.s.damaged(d))?;
        Ok(st.idx.tracked.keys().cloned().collect())
    }

    pub(crate) fn anchors(&self) -> Result<Vec<u64>, RecheckError> {
        let mut st = self.s.lock_state();
        self.s.sync(&mut st)?;
        Ok(st.idx.groups.keys().copied().collect())
    }
}

/// Whether `known` is no file at the path: nothing there, or a directory (a tracked path that
/// is a directory is recorded as absent).
fn absent_as_file(known: &Known) -> bool {
    match known {
        Known::Absent => true,
        Known::Present { meta, .. } => meta.kind == FileKind::Dir,
        _ => false,
    }
}
