//! [`Session::scan`]: one scan of the session's workspace and what each phase records.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::codec::{Record, TrackedUpdate};
use crate::error::Fault;
use crate::format::{BeforeState, Entry, EntrySource, Known, SkipReason, parse_record, to_json};
use crate::fsio::FileKind;
use crate::path::{RelPath, encode_id};
use crate::records::tracked_records;
use crate::session::{Session, State};

use crate::scan::diff::{Change, ChangeKind, Keep, Limits, Outcome, run};
use crate::scan::index::{Coverage, IdxEntry, Uncovered};
use crate::scan::workspace::{Locked, lock, slot, workspace_key};
use crate::scan::{
    NotCovered, SCAN_BUDGET_CODE, ScanError, ScanPhase, ScanRefusal, ScanReport, ScanRequest,
};

/// `sessions/<id>/scan.json`: the anchor of this session's last scan of its workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanSessionState {
    /// Record version.
    pub v: u32,
    /// The workspace key scanned.
    pub workspace: String,
    /// The anchor of the last scan.
    pub anchor_seq: u64,
}

const SCAN_STATE_VERSION: u32 = 1;

/// What a session's `scan.json` says.
pub(crate) enum ScanState {
    /// None: the session never scanned.
    Never,
    /// Its last scan.
    Read(ScanSessionState),
    /// Torn, corrupt or newer than this build: not known.
    Unknown,
}

impl ScanState {
    /// The `scan.json` of the session in store directory `sdir`.
    pub(crate) fn of(
        fs: &crate::fsio::StoreFs,
        sdir: &std::path::Path,
    ) -> Result<ScanState, Fault> {
        let path = sdir.join("scan.json");
        let Some(bytes) = fs.read_opt(&path)? else {
            return Ok(ScanState::Never);
        };
        match parse_record::<ScanSessionState>(&path, &bytes) {
            Ok(s) if s.v <= SCAN_STATE_VERSION => Ok(ScanState::Read(s)),
            Ok(_) | Err(Fault::Corrupt(_)) => Ok(ScanState::Unknown),
            Err(e) => Err(e),
        }
    }
}

/// How a phase treats the changes found.
enum Mode {
    /// Restorable before-states at the anchor (`skip_explained`: a change a committed
    /// write-tool capture already explains is not recorded again).
    Restorable {
        source: EntrySource,
        skip_explained: bool,
    },
    /// Changes to paths no tool touched are outside notes; tracked paths are left to
    /// the boundary re-check.
    Outside,
}

/// The session's workspace scans: one scan of the workspace and what each phase records.
#[derive(Clone, Copy)]
pub(crate) struct WorkspaceScan<'s> {
    pub(crate) s: &'s Session,
}

impl Session {
    /// The session's workspace scans.
    pub(crate) fn workspace_scan(&self) -> WorkspaceScan<'_> {
        WorkspaceScan { s: self }
    }

    /// Scans the session's workspace (see [`ScanPhase`]) and records what changed:
    ///
    /// * `After` a tool call: every change since the previous scan is that call's
    ///   before-state in the group of `anchor_seq` (also when the call failed).
    /// * `Before` a tool call: changes since the previous scan of this turn (a
    ///   background job, an editor) are recorded the same way, except those a
    ///   committed write-tool capture already explains. When this session's
    ///   previous scan was in an earlier turn, it behaves as `Boundary`.
    /// * `Boundary`: changes to paths a tool touched are left to
    ///   [`Session::recheck_tracked`]; changes to any other path are recorded as
    ///   outside notes (listed by a plan, never restored).
    ///
    /// The first scan of a workspace reads every in-scope file into the store (the
    /// baseline, shared by every session of the workspace) and records nothing.
    /// Scans of one workspace are serialized across threads and processes.
    ///
    /// Each scan also records the git state of the workspace's repository
    /// ([`Session::record_git`]); a store that cannot keep it costs only the git half of
    /// a later rewind.
    pub fn scan(&self, req: &ScanRequest) -> Result<ScanReport, ScanError> {
        let report = self.workspace_scan().scan(req)?;
        let _ = self.record_git(req);
        Ok(report)
    }
}

impl Session {
    /// Makes the next scan of the workspace this handle last scanned walk in full, as after
    /// the change watcher's queue overflowed (a hook for tests and diagnostics; nothing when
    /// the handle holds no watcher).
    pub fn mark_watch_overflowed(&self) {
        let st = self.lock_state();
        if let Some(w) = &st.ws_watch {
            w.mark_overflowed();
        }
    }
}

impl Session {
    /// Whether the workspace index's delta, as this process last saw it, is past its bound
    /// and due to be folded ([`Session::fold_index`]). Reads only memory: a host asks it
    /// after each scan to decide whether to start the fold on a thread of its own.
    pub fn index_fold_due(&self) -> bool {
        let Some((_, slot)) = self.workspace_index() else {
            return false;
        };
        let cached = slot.lock().unwrap_or_else(|p| p.into_inner());
        crate::scan::workspace::fold_due_of(&cached)
    }

    /// Folds the workspace index's delta into a whole index when it is past its bound
    /// (`docs/format.md`, "Workspace index delta"); returns whether it folded. A scan only
    /// appends to the delta (up to a hard cap, four times the bound, past which it folds
    /// itself): this is the fold a host runs where no one waits, after a scan returned.
    /// Takes the store's shared lock (on a descriptor of its own) and the workspace's lock,
    /// as a scan does, so it never runs beside a scan or a blob sweep.
    pub fn fold_index(&self) -> Result<bool, ScanError> {
        let Some((key, slot)) = self.workspace_index() else {
            return Ok(false);
        };
        let _g = self.store.lock_shared()?;
        let mut locked = crate::scan::workspace::lock(&self.store, key, slot, None)?;
        Ok(locked.fold()?)
    }
}

impl WorkspaceScan<'_> {
    pub(crate) fn scan_state(&self) -> Result<Option<ScanSessionState>, Fault> {
        // Only tells whether the last scan was in this turn; a torn one means "unknown".
        Ok(match ScanState::of(&self.s.store.inner.fs, &self.s.dir)? {
            ScanState::Read(s) => Some(s),
            ScanState::Never | ScanState::Unknown => None,
        })
    }

    /// The before-state an index entry stands for: its content in a blob file, or kept in
    /// this session's log (`st`'s). Content the log keeps is also added to `carry`: it is
    /// written again with the group naming it, unless the log still has it then (another
    /// handle's compaction may drop content no record names any more meanwhile).
    fn before_of(
        &self,
        old: Option<&IdxEntry>,
        st: &crate::session::State,
        carry: &mut Vec<Record>,
    ) -> Result<BeforeState, Fault> {
        let Some(e) = old else {
            return Ok(BeforeState::Absent);
        };
        Ok(match e.stat.kind() {
            FileKind::Symlink => BeforeState::Skipped {
                reason: SkipReason::Symlink,
            },
            FileKind::Dir => BeforeState::Skipped {
                reason: SkipReason::Directory,
            },
            FileKind::Other => BeforeState::Skipped {
                reason: SkipReason::Special,
            },
            FileKind::File => match &e.cov {
                Coverage::Hashed(_) | Coverage::Kept(_) => match e.sha_hex() {
                    Some(sha) if self.s.store.has_blob(&sha) => BeforeState::File {
                        sha256: sha,
                        size: e.stat.size,
                        mode: e.stat.perm(),
                    },
                    Some(sha) if st.idx.inline.contains_key(&sha) => {
                        if let Some(bytes) = self.s.kept_content_unchecked(st, &sha)? {
                            carry.push(Record::Blob {
                                sha256: sha.clone(),
                                bytes,
                            });
                        }
                        BeforeState::File {
                            sha256: sha,
                            size: e.stat.size,
                            mode: e.stat.perm(),
                        }
                    }
                    _ => BeforeState::Uncovered { size: e.stat.size },
                },
                // Its index blob in the workspace's git repository: named by its SHA-256
                // once read from there, with a reference instead of a copy.
                Coverage::Git(oid) => match self.s.workspace_root().map(|root| {
                    crate::scan::git_baseline::before_state(
                        &self.s.store.inner.fs,
                        root,
                        oid,
                        e.stat.size,
                    )
                }) {
                    Some(Ok(Some(sha256))) => BeforeState::File {
                        sha256,
                        size: e.stat.size,
                        mode: e.stat.perm(),
                    },
                    Some(Err(err)) => return Err(err.into()),
                    _ => BeforeState::Uncovered { size: e.stat.size },
                },
                Coverage::Not(Uncovered::HardLink) => BeforeState::Skipped {
                    reason: SkipReason::HardLink {
                        nlink: u64::from(e.stat.nlink),
                    },
                },
                _ => BeforeState::Uncovered { size: e.stat.size },
            },
        })
    }

    /// What the store knows of a path's state after a recorded change.
    fn known_of(new: Option<&IdxEntry>) -> Known {
        match new {
            None => Known::Absent,
            Some(e) => Known::Present {
                meta: e.stat.disk_meta(),
                sha256: e.sha_hex(),
                recorded: e.cov.sha().is_some(),
            },
        }
    }

    /// A change a committed capture of the write tools explains: the tracked map
    /// already holds the path's current disk state.
    fn explained(&self, st: &mut State, path: &RelPath, c: &Change) -> Result<bool, Fault> {
        st.idx.merge_group_paths().map_err(|d| self.s.damaged(d))?;
        Ok(match (st.idx.tracked.get(path).map(|t| &t.known), &c.new) {
            (Some(Known::Absent), None) => true,
            (Some(Known::Present { meta, .. }), Some(n)) => *meta == n.stat.disk_meta(),
            _ => false,
        })
    }

    /// Whether a tool ever recorded a before-state of `path` in this session.
    fn is_tracked(&self, st: &mut State, path: &RelPath) -> Result<bool, Fault> {
        st.idx.merge_group_paths().map_err(|d| self.s.damaged(d))?;
        Ok(st.idx.tracked.contains_key(path))
    }

    pub(crate) fn scan(&self, req: &ScanRequest) -> Result<ScanReport, ScanError> {
        let t0 = Instant::now();
        if let Some(id) = &req.call_id {
            encode_id(id).map_err(|reason| ScanError::InvalidCallId {
                id: id.clone(),
                reason,
            })?;
        }
        let root = self
            .s
            .workspace_root()
            .ok_or_else(|| ScanError::NoWorkspace {
                session: self.s.id.clone(),
            })?
            .to_path_buf();
        let canonical = std::fs::canonicalize(&root).map_err(|source| ScanError::Workspace {
            path: root.to_string_lossy().into_owned(),
            source,
        })?;
        let key = workspace_key(&canonical);
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let _g = self.s.lock_shared()?;
        let slot = slot(&self.s.store, &key);
        let kept = st.ws_lock.take().and_then(|(k, f)| (k == key).then_some(f));
        let mut locked = lock(&self.s.store, &key, &slot, kept)?;
        // The content another session's log keeps, for the entries of the index it kept.
        // (Not a session directory still in layout 1: its migration takes the store's
        // exclusive lock, which this scan's shared lock would wait on. A log that keeps
        // content is never in layout 1.)
        let fetch = |id: &str| -> std::collections::HashMap<String, crate::codec::Shared> {
            let view = match self.s.planner().ancestor_view(id) {
                Ok(view) => view,
                Err(_) => return Default::default(),
            };
            match crate::records::has_legacy(&self.s.store.inner.fs, &view.dir) {
                Ok(false) if view.load().is_ok() => match view.kept_blobs() {
                    Ok(kept) => kept.into_iter().collect(),
                    Err(_) => Default::default(),
                },
                _ => Default::default(),
            }
        };
        // The workspace's change watcher (kept alive by this handle while it scans the
        // workspace), or why there is none: then the scan walks in full.
        let watcher = if req.watch {
            crate::scan::watch::for_scan(&mut locked.cached.watch, &mut st.ws_watch, &root)
        } else {
            Err("turned off for this scan".to_string())
        };
        let changes = (req.phase == ScanPhase::After).then(|| self.s.log_sink(&st));
        let limits = Limits {
            keep: Keep {
                me: &self.s.id,
                kept: &st.idx.inline,
                checked: st.idx.scan_checked,
                tracked: &st.idx.tracked,
                fetch: &fetch,
                changes: changes.as_ref(),
            },
            cap: self.s.store.max_file_bytes(),
            max_baseline_bytes: req.max_baseline_bytes,
            max_files: req.max_files,
            progress_batch: req.progress_batch,
            threads: req.threads,
            prev: st
                .scan_seen
                .as_ref()
                .and_then(|v| Some((v.index_at, v.absence.as_ref()?))),
            watch: watcher.as_deref().map_err(|why| why.as_str()),
        };
        let mut out = run(&mut locked, &self.s.ws, &root, &limits)?;
        let in_flight = self.pins(&mut locked, req, &mut out);
        // The index's entries kept in this log were checked against it (`run`): so they
        // stay, unless the scan stops before its index is saved.
        st.idx.scan_checked = out.refused.is_none();
        let recorded = self
            .record(&mut st, &mut locked, out, req, key.clone(), t0)
            .map(|mut r| {
                r.in_flight = in_flight;
                r
            });
        if recorded.is_err() {
            st.idx.scan_checked = false;
        }
        st.ws_lock = locked.into_kept().map(|f| (key, f));
        recorded
    }

    /// The pins of the workspace's calls in flight (see `crate::scan::pin`) after scan `out`:
    /// the changes it found are kept from moving the before-state of another session's call
    /// in flight; a scan after a call compares the paths another session moved on meanwhile
    /// with the state its call started from (`out.changes` rebased on the call's pin); a
    /// scan before a call pins the index for it, one after a call for the session's next
    /// call (the host may skip that one's scan before it), and one at a message boundary
    /// drops the session's pins. Returns the paths moved on in the index (by this scan or an
    /// earlier one) while a call of another session, still in flight, ran.
    fn pins(&self, locked: &mut Locked<'_>, req: &ScanRequest, out: &mut Outcome) -> Vec<RelPath> {
        if out.refused.is_some() {
            return Vec::new();
        }
        let me = self.s.id.as_str();
        let call = req.call_id.as_deref();
        let cached = &mut *locked.cached;
        let pins = &mut cached.pins;
        let in_flight = pins
            .moved_by(me, req.phase == ScanPhase::After, &out.changes)
            .iter()
            .filter_map(|p| RelPath::from_bytes(p).ok())
            .collect();
        match req.phase {
            ScanPhase::After => {
                if let Some(pin) = pins.take(me, call) {
                    if let Some(now) = out.save.as_ref().or(cached.index.as_ref()) {
                        crate::scan::pin::rebase(&mut out.changes, pin, now);
                    }
                }
                pins.pin(me, None);
            }
            ScanPhase::Before => {
                pins.unpin_standing(me);
                if call.is_some() {
                    pins.pin(me, call);
                }
            }
            ScanPhase::Boundary => pins.drop_session(me),
        }
        in_flight
    }

    /// Records what scan `out` found (see [`Session::scan`]) and saves the index.
    fn record(
        &self,
        st: &mut State,
        locked: &mut Locked<'_>,
        mut out: Outcome,
        req: &ScanRequest,
        key: String,
        t0: Instant,
    ) -> Result<ScanReport, ScanError> {
        let mut report = ScanReport {
            files: out.files,
            baseline_complete: out.baseline_complete,
            baseline: out.baseline,
            index_rebuilt: out.rebuilt.clone(),
            mode: out.mode,
            full_reason: out.full_reason.clone(),
            not_covered: out
                .not_covered
                .iter()
                .filter_map(|(p, r)| {
                    RelPath::from_bytes(p).ok().map(|path| NotCovered {
                        path,
                        reason: r.clone(),
                    })
                })
                .collect(),
            ..ScanReport::default()
        };
        if let Some(message) = out.refused.take() {
            report.refused = Some(ScanRefusal {
                code: SCAN_BUDGET_CODE,
                message,
            });
            report.elapsed_ms = t0.elapsed().as_secs_f64() * 1000.0;
            return Ok(report);
        }
        let prev = self.scan_state()?.filter(|s| s.workspace == key);
        let in_turn = prev
            .as_ref()
            .is_some_and(|s| s.anchor_seq == req.anchor_seq);
        let mode = match req.phase {
            ScanPhase::After => Mode::Restorable {
                source: EntrySource::Scan {
                    call_id: req.call_id.clone(),
                },
                skip_explained: false,
            },
            ScanPhase::Before if in_turn => Mode::Restorable {
                source: EntrySource::Scan { call_id: None },
                skip_explained: true,
            },
            ScanPhase::Before | ScanPhase::Boundary => Mode::Outside,
        };
        let mut entries = Vec::new();
        let mut updates = Vec::new();
        let mut carry = Vec::new();
        for c in &out.changes {
            let Ok(path) = RelPath::from_bytes(&c.path) else {
                continue;
            };
            let restorable = match &mode {
                Mode::Restorable { skip_explained, .. } => {
                    if *skip_explained && self.explained(st, &path, c)? {
                        continue;
                    }
                    true
                }
                Mode::Outside => {
                    if self.is_tracked(st, &path)? {
                        continue;
                    }
                    false
                }
            };
            if restorable {
                match c.kind {
                    ChangeKind::Created => report.created.push(path.clone()),
                    ChangeKind::Modified => report.modified.push(path.clone()),
                    ChangeKind::Deleted => report.deleted.push(path.clone()),
                    ChangeKind::ModeChanged => report.mode_changed.push(path.clone()),
                }
                updates.push(TrackedUpdate {
                    path: path.clone(),
                    known: Self::known_of(c.new.as_ref()),
                    since: None,
                });
            } else {
                report.outside.push(path.clone());
            }
            entries.push(Entry {
                path,
                order: self.s.store.next_order(),
                before: self.before_of(c.old.as_ref(), st, &mut carry)?,
            });
        }
        report.recorded = entries.len();
        // The new content of the changes, kept in the log by this scan (after a tool call:
        // every change is recorded, and tracked with that content).
        carry.append(&mut out.kept);
        // One write: the content the group names that the log keeps (ahead of it), the
        // group, and what the store now knows of its paths.
        match mode {
            Mode::Restorable { .. } if entries.is_empty() => {}
            Mode::Restorable { source, .. } => {
                self.s.append_group_after(
                    st,
                    carry,
                    req.anchor_seq,
                    source,
                    entries,
                    tracked_records(updates),
                )?;
            }
            Mode::Outside if entries.is_empty() => {}
            Mode::Outside => {
                // The change happened before this message: note it at the anchor of the
                // previous scan, so a rewind to this message itself does not list it.
                let at = prev
                    .as_ref()
                    .map(|s| s.anchor_seq)
                    .filter(|a| *a < req.anchor_seq)
                    .unwrap_or(req.anchor_seq);
                self.s.append_group_after(
                    st,
                    carry,
                    at,
                    EntrySource::Outside,
                    entries,
                    Vec::new(),
                )?;
            }
        }
        // The index moves on only once the changes are recorded: a failure before this
        // point leaves them to be found again by the next scan.
        if let Some(ix) = out.save.take() {
            locked.save(ix)?;
        }
        // A scan that looked only at what the change watcher reported keeps what the walk
        // before it saw (see `Outcome::keep_absence`).
        let absence = if out.keep_absence {
            st.scan_seen.take().and_then(|v| v.absence)
        } else {
            out.absence.take()
        };
        st.scan_seen = locked
            .cached
            .index
            .as_ref()
            .map(|ix| crate::session::ScanSeen {
                anchor: req.anchor_seq,
                index_at: ix.scanned_at,
                absence,
            });
        if !in_turn {
            let rec = ScanSessionState {
                v: SCAN_STATE_VERSION,
                workspace: key,
                anchor_seq: req.anchor_seq,
            };
            self.s
                .store
                .inner
                .fs
                .write_replacing(&self.s.p("scan.json"), &to_json(&rec))?;
        }
        report.elapsed_ms = t0.elapsed().as_secs_f64() * 1000.0;
        Ok(report)
    }
}

impl Session {
    /// Notes in the workspace's index what a restore of this session wrote and deleted
    /// (`done`: each path with the content written, SHA-256 hex and size, `None` for a
    /// deletion) as known content: the path's entry becomes the file as the restore left it
    /// (its content named when a blob file of the store holds it, else read again by the
    /// next scan), so that no later scan, of this session or another, takes the restore's
    /// writes for a change of its own, and no call in flight keeps an older state of them
    /// (`crate::scan::pin`). A path that is not what the restore left any more (changed
    /// again already) is left to the next scan. Best effort: a failure leaves the index as
    /// it was (the next scan then finds the restore's writes as changes, as it always did).
    pub(crate) fn note_restored(&self, done: &[(&RelPath, Option<(&str, u64)>)]) {
        if done.is_empty() {
            return;
        }
        let Some((key, slot)) = self.workspace_index() else {
            return;
        };
        // A workspace never scanned (the setting off) gets no directory of its own here.
        let index = std::path::Path::new(crate::scan::workspace::WORKSPACES)
            .join(key)
            .join("index.bin");
        if !matches!(self.store.inner.fs.exists(&index), Ok(true)) {
            return;
        }
        let Ok(mut locked) = lock(&self.store, key, slot, None) else {
            return;
        };
        if !matches!(locked.load(), Ok(crate::scan::workspace::Loaded::Present)) {
            return;
        }
        let Some(mut ix) = locked.cached.index.take() else {
            return;
        };
        let mut changed = false;
        for (rel, wrote) in done {
            let now = match self.ws.walk_parent(rel, false, &mut Vec::new()) {
                Ok(crate::fsio::Walk::Parent(dir)) => {
                    let (_, name) = rel.split_last();
                    match self.ws.lstat(&dir, name, rel) {
                        Ok(m) => m,
                        Err(_) => continue,
                    }
                }
                Ok(_) => None,
                Err(_) => continue,
            };
            match (wrote, now) {
                (None, None) => {
                    if ix.entries().contains_key(rel.as_bytes()) {
                        ix.remove(rel.as_bytes());
                        changed = true;
                    }
                }
                (Some((sha, size)), Some(m))
                    if m.kind == FileKind::File && m.nlink == 1 && m.size == *size =>
                {
                    let named = hex::decode(sha)
                        .ok()
                        .and_then(|b| <[u8; 32]>::try_from(b).ok())
                        .filter(|_| {
                            matches!(self.store.inner.fs.blob_size(sha), Ok(Some(n)) if n == *size)
                        });
                    let entry = IdxEntry {
                        stat: crate::scan::index::Stat::from_disk(&m),
                        cov: named.map_or(Coverage::Pending, Coverage::Hashed),
                    };
                    ix.insert(rel.as_bytes().into(), entry);
                    changed = true;
                }
                _ => continue,
            }
        }
        locked
            .cached
            .pins
            .known(done.iter().map(|(rel, _)| rel.as_bytes()));
        if !changed {
            locked.cached.index = Some(ix);
            return;
        }
        if locked.save(ix).is_err() {
            // The cached copy is dropped: the next scan reads the file as it is on disk.
            locked.cached.index = None;
        }
    }
}

impl crate::journal::Journal<'_> {
    /// What a restore pass (`out`) wrote and deleted, noted as known content in the
    /// workspace's index ([`Session::note_restored`]): `states` names each action's path
    /// and the state the pass puts there.
    pub(crate) fn note_known<'a>(
        &self,
        out: &crate::journal::RestoreOutcome,
        states: impl Iterator<Item = (&'a RelPath, &'a crate::journal::Desired)>,
    ) {
        use crate::journal::Desired;
        let done: std::collections::HashSet<&RelPath> =
            out.written.iter().chain(&out.deleted).collect();
        let list: Vec<(&RelPath, Option<(&str, u64)>)> = states
            .filter(|(p, _)| done.contains(p))
            .map(|(p, d)| match d {
                Desired::Absent => (p, None),
                Desired::File { sha256, size, .. } => (p, Some((sha256.as_str(), *size))),
            })
            .collect();
        self.s.note_restored(&list);
    }
}
