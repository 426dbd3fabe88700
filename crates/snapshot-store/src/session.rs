//! A session's workspace handle: capture, commit, discard, recheck, prune, clear.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use cap_std::fs::Dir;
use serde::Serialize;

use crate::blob::{Stored, store_file};
use crate::error::{
    CaptureError, ClearError, CommitError, CorruptFile, Fault, FsFailure, PruneError, RecheckError,
};
use crate::format::{
    BeforeState, BoundaryRecord, Entry, EntrySource, GroupRecord, Known, PendingLine,
    RECORD_VERSION, SessionMarker, SkipReason, TrackedPath, TrackedRecord, anchor_dir_name,
    parse_lines, parse_record, to_json,
};
use crate::fsio::{DiskMeta, FileKind, Io, Walk, WsDir, WsFs};
use crate::journal::PathFailure;
use crate::path::{RelPath, RelPathError, encode_id};
use crate::seam::{Area, CrashPoint};
use crate::store::{GcReport, Store, is_hidden};

/// What [`Session::capture_before`] recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CaptureOutcome {
    /// The file's bytes are staged (stored once per distinct content).
    Captured {
        /// Workspace-relative path.
        path: RelPath,
        /// SHA-256 of the content.
        sha256: String,
        /// Size in bytes.
        size: u64,
        /// The content was already in the store; nothing new was written.
        deduplicated: bool,
    },
    /// The path did not exist; "absent" is staged (a restore deletes what the call creates).
    Absent {
        /// Workspace-relative path.
        path: RelPath,
    },
    /// A regular file over the per-file cap: staged as known but not backed up.
    Uncovered {
        /// Workspace-relative path.
        path: RelPath,
        /// Its size.
        size: u64,
    },
    /// Not capturable; when the path is inside the workspace the skip is staged too,
    /// so a later preview can say the path cannot be restored.
    Skipped {
        /// The path as given (lossy text).
        path: String,
        /// Why.
        reason: SkipReason,
    },
    /// The same call already staged this path (first touch wins).
    AlreadyStaged {
        /// Workspace-relative path.
        path: RelPath,
    },
}

/// What [`Session::commit`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CommitOutcome {
    /// The staged before-states joined the anchor group.
    Committed {
        /// The anchor (user-message seq).
        anchor_seq: u64,
        /// Number of paths.
        entries: usize,
    },
    /// The call failed: its staged captures were dropped.
    Dropped {
        /// Number of paths dropped.
        entries: usize,
    },
    /// The call staged nothing.
    NothingStaged,
}

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

/// Options of [`Session::prune`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Anchor groups to keep (newest first); default 100.
    pub keep_groups: usize,
    /// Finished restore journals to keep (newest first); default 10. Open journals are always kept.
    pub keep_journals: usize,
}

impl Default for PruneOptions {
    fn default() -> Self {
        Self {
            keep_groups: 100,
            keep_journals: 10,
        }
    }
}

/// What [`Session::prune`] removed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PruneReport {
    /// Anchor groups removed.
    pub groups_removed: usize,
    /// Finished journals removed.
    pub journals_removed: usize,
    /// Blob sweep result.
    pub gc: GcReport,
}

/// What [`Session::reconcile_format`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FormatOutcome {
    /// The session had no recorded format; it is now recorded.
    Initialized,
    /// The recorded format matches.
    Unchanged,
    /// The format differed: the session's snapshots were cleared.
    Cleared {
        /// The format that was recorded before.
        previous: Option<String>,
    },
}

/// Staged captures not yet settled, folded from `pending.log`.
pub(crate) struct PendingLog {
    file: Option<cap_std::fs::File>,
    calls: BTreeMap<String, Vec<Entry>>,
    len: u64,
}

pub(crate) struct State {
    /// Path → (what the store last knew, the anchor at which that state is recorded).
    pub tracked: Option<BTreeMap<RelPath, (Known, Option<u64>)>>,
    pub prepared: bool,
    /// The anchor of the last recheck (`None` until loaded / never).
    pub last_boundary: Option<Option<u64>>,
    /// The pending log, loaded on first use.
    pub pending: Option<PendingLog>,
}

/// One session's view of the store and its workspace (the session cwd).
pub struct Session {
    pub(crate) store: Store,
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
    pub(crate) ws: WsFs,
    roots: Vec<PathBuf>,
    pub(crate) state: Mutex<State>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        store: Store,
        id: String,
        dir: PathBuf,
        root: Dir,
        roots: Vec<PathBuf>,
    ) -> Self {
        let io = Io {
            seam: store.inner.fs.io.seam.clone(),
            durable: store.inner.fs.io.durable,
        };
        Session {
            store,
            id,
            dir,
            ws: WsFs { root, io },
            roots,
            state: Mutex::new(State {
                tracked: None,
                prepared: false,
                last_boundary: None,
                pending: None,
            }),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The workspace directory as given to [`Store::session`] (`None` for an ancestor view).
    pub(crate) fn workspace_root(&self) -> Option<&Path> {
        self.roots.first().map(PathBuf::as_path)
    }

    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn p(&self, rest: &str) -> PathBuf {
        self.dir.join(rest)
    }

    /// Refuses when the store, or this session's marker, is newer than this build
    /// (or the marker is corrupt); creates the session directories once.
    pub(crate) fn prepare(&self, st: &mut State) -> Result<(), Fault> {
        self.store.guard_writable()?;
        if st.prepared {
            return Ok(());
        }
        self.read_marker()?;
        let fs = &self.store.inner.fs;
        for d in ["groups", "journals"] {
            fs.create_dir_all(&self.p(d))?;
        }
        if !fs.exists(&self.p("session.json"))? {
            let m = SessionMarker {
                v: RECORD_VERSION,
                session_id: self.id.clone(),
                session_format: None,
            };
            fs.write_atomic(&self.p("session.json"), &to_json(&m))?;
        }
        st.prepared = true;
        Ok(())
    }

    pub(crate) fn read_marker(&self) -> Result<Option<SessionMarker>, Fault> {
        let path = self.p("session.json");
        match self.store.inner.fs.read_opt(&path)? {
            None => Ok(None),
            Some(bytes) => {
                let m: SessionMarker = parse_record(&path, &bytes)?;
                if m.session_id != self.id {
                    return Err(CorruptFile {
                        path: path.to_string_lossy().into_owned(),
                        detail: format!("marker names session `{}`", m.session_id),
                    }
                    .into());
                }
                Ok(Some(m))
            }
        }
    }

    /// Maps a host path (absolute inside the cwd, or cwd-relative) to a workspace path.
    pub fn resolve(&self, input: &Path) -> Result<RelPath, SkipReason> {
        let bytes = input.as_os_str().as_bytes();
        if bytes.is_empty() {
            return Err(SkipReason::InvalidPath {
                detail: "empty path".into(),
            });
        }
        if bytes.contains(&0) {
            return Err(SkipReason::InvalidPath {
                detail: "contains a NUL byte".into(),
            });
        }
        let rel: &Path = if input.is_absolute() {
            self.roots
                .iter()
                .find_map(|r| input.strip_prefix(r).ok())
                .ok_or(SkipReason::OutsideWorkspace)?
        } else {
            input
        };
        RelPath::from_path(rel).map_err(|e| match e {
            RelPathError::Empty => SkipReason::Directory,
            RelPathError::BadComponent | RelPathError::Absolute => SkipReason::OutsideWorkspace,
            RelPathError::Nul => SkipReason::InvalidPath {
                detail: "contains a NUL byte".into(),
            },
        })
    }

    fn cap(&self) -> u64 {
        self.store.inner.max_file_bytes
    }

    /// Reads a path's current state into the store (blob for a regular file).
    /// Returns the before-state, what the store now knows, and whether it was a dedup hit.
    pub(crate) fn capture_path(
        &self,
        rel: &RelPath,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        let mut created = Vec::new();
        match self.ws.walk_parent(rel, false, &mut created)? {
            Walk::Missing(_) => Ok((BeforeState::Absent, Known::Absent, false)),
            Walk::Blocked(link) => Ok((
                BeforeState::Skipped {
                    reason: if link {
                        SkipReason::SymlinkedParent
                    } else {
                        SkipReason::ParentNotDirectory
                    },
                },
                Known::Unknown,
                false,
            )),
            Walk::Parent(dir) => self.capture_in(&dir, rel),
        }
    }

    pub(crate) fn capture_in(
        &self,
        dir: &WsDir<'_>,
        rel: &RelPath,
    ) -> Result<(BeforeState, Known, bool), FsFailure> {
        let (_, name) = rel.split_last();
        let Some(meta) = self.ws.lstat(dir, name, rel)? else {
            return Ok((BeforeState::Absent, Known::Absent, false));
        };
        if let Some(reason) = not_capturable(&meta) {
            return Ok((
                BeforeState::Skipped { reason },
                Known::Present {
                    meta,
                    sha256: None,
                    recorded: true,
                },
                false,
            ));
        }
        let cap = self.cap();
        if cap != 0 && meta.size > cap {
            return Ok((
                BeforeState::Uncovered { size: meta.size },
                Known::Present {
                    meta,
                    sha256: None,
                    recorded: true,
                },
                false,
            ));
        }
        let opened = match self.ws.open_read(dir, name, rel) {
            Ok(o) => o,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok((
                    BeforeState::Skipped {
                        reason: SkipReason::Symlink,
                    },
                    Known::Unknown,
                    false,
                ));
            }
            Err(e) => return Err(e),
        };
        let Some((mut file, fmeta)) = opened else {
            return Ok((BeforeState::Absent, Known::Absent, false));
        };
        if let Some(reason) = not_capturable(&fmeta) {
            return Ok((
                BeforeState::Skipped { reason },
                Known::Present {
                    meta: fmeta,
                    sha256: None,
                    recorded: true,
                },
                false,
            ));
        }
        match store_file(
            &self.store.inner.fs,
            &self.ws,
            &mut file,
            rel,
            fmeta.size,
            cap,
        )? {
            Stored::OverCap { size } => Ok((
                BeforeState::Uncovered { size },
                Known::Present {
                    meta: fmeta,
                    sha256: None,
                    recorded: true,
                },
                false,
            )),
            Stored::Blob {
                sha256,
                size,
                dedup,
            } => Ok((
                BeforeState::File {
                    sha256: sha256.clone(),
                    size,
                    mode: fmeta.mode,
                },
                Known::Present {
                    meta: fmeta,
                    sha256: Some(sha256),
                    recorded: true,
                },
                dedup,
            )),
        }
    }

    /// `lstat`-level observation (no content read).
    pub(crate) fn observe_meta(&self, rel: &RelPath) -> Result<Known, FsFailure> {
        let mut created = Vec::new();
        match self.ws.walk_parent(rel, false, &mut created)? {
            Walk::Missing(_) => Ok(Known::Absent),
            Walk::Blocked(..) => Ok(Known::Unknown),
            Walk::Parent(dir) => {
                let (_, name) = rel.split_last();
                Ok(match self.ws.lstat(&dir, name, rel)? {
                    None => Known::Absent,
                    Some(meta) => Known::Present {
                        meta,
                        sha256: None,
                        recorded: false,
                    },
                })
            }
        }
    }

    fn pending_log<'s>(&self, st: &'s mut State) -> Result<&'s mut PendingLog, Fault> {
        if st.pending.is_none() {
            let path = self.p("pending.log");
            let bytes = self.store.inner.fs.read_opt(&path)?.unwrap_or_default();
            let mut calls: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
            for line in parse_lines::<PendingLine>(&path, &bytes)? {
                if line.settled {
                    calls.remove(&line.call_id);
                } else if let Some(e) = line.entry {
                    calls.entry(line.call_id).or_default().push(e);
                }
            }
            st.pending = Some(PendingLog {
                file: None,
                calls,
                len: bytes.len() as u64,
            });
        }
        Ok(st.pending.get_or_insert_with(|| PendingLog {
            file: None,
            calls: BTreeMap::new(),
            len: 0,
        }))
    }

    fn append_pending(&self, st: &mut State, line: &PendingLine) -> Result<(), Fault> {
        let path = self.p("pending.log");
        let fs = &self.store.inner.fs;
        let log = self.pending_log(st)?;
        if log.file.is_none() {
            log.file = Some(fs.open_append(&path)?);
        }
        let bytes = to_json(line);
        if let Some(f) = log.file.as_mut() {
            fs.append_to(f, &path, &bytes, true)?;
        }
        log.len += bytes.len() as u64 + 1;
        Ok(())
    }

    /// Settles `call_id` in the pending log.
    fn settle(&self, st: &mut State, call_id: &str) -> Result<(), Fault> {
        let line = PendingLine {
            v: RECORD_VERSION,
            call_id: call_id.to_string(),
            entry: None,
            settled: true,
        };
        self.append_pending(st, &line)?;
        let fs = &self.store.inner.fs;
        let log = self.pending_log(st)?;
        log.calls.remove(call_id);
        // Nothing pending and the log has grown: start it afresh.
        if log.calls.is_empty() && log.len > 256 * 1024 {
            if let Some(f) = log.file.as_ref() {
                fs.truncate(f, &self.p("pending.log"), 0)?;
                log.len = 0;
            }
        }
        Ok(())
    }

    /// Records the before-state of `path` for tool call `call_id`, before the tool writes.
    ///
    /// `path` is absolute (inside the session cwd) or cwd-relative. When this returns
    /// `Ok`, the staged record survives a kill -9 of the process (see `docs/format.md`).
    pub fn capture_before(
        &self,
        call_id: &str,
        path: &Path,
    ) -> Result<CaptureOutcome, CaptureError> {
        encode_id(call_id).map_err(|reason| CaptureError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let rel = match self.resolve(path) {
            Ok(r) => r,
            Err(reason) => {
                return Ok(CaptureOutcome::Skipped {
                    path: path.to_string_lossy().into_owned(),
                    reason,
                });
            }
        };
        let _g = self.store.lock_shared()?;
        let staged = self
            .pending_log(&mut st)?
            .calls
            .get(call_id)
            .is_some_and(|v| v.iter().any(|e| e.path == rel));
        if staged {
            return Ok(CaptureOutcome::AlreadyStaged { path: rel });
        }
        let back_order = self.store.next_order();
        let order = self.store.next_order();
        let (before, now, dedup) = self.capture_path(&rel).map_err(|e| map_read(e, &rel))?;
        // Changed since the last boundary without the store seeing it (an external edit
        // in this turn): record the state that boundary saw, ahead of this capture.
        if let Some(prev) = self.last_boundary(&mut st)? {
            let (known, since) = self
                .tracked(&mut st)?
                .get(&rel)
                .cloned()
                .unwrap_or((Known::Unknown, None));
            if differs(&known, &now) {
                if let Some(e) = self.backdated_entry(&rel, &known, since, prev, back_order) {
                    self.write_recheck_group(prev, vec![e])?;
                    self.update_tracked(&mut st, vec![(rel.clone(), known, Some(prev))])?;
                }
            }
        }
        let entry = Entry {
            path: rel.clone(),
            order,
            before: before.clone(),
        };
        let line = PendingLine {
            v: RECORD_VERSION,
            call_id: call_id.to_string(),
            entry: Some(entry.clone()),
            settled: false,
        };
        self.append_pending(&mut st, &line)?;
        self.pending_log(&mut st)?
            .calls
            .entry(call_id.to_string())
            .or_default()
            .push(entry);
        self.store.inner.fs.io.crash(CrashPoint::CaptureStaged);
        Ok(match before {
            BeforeState::Absent => CaptureOutcome::Absent { path: rel },
            BeforeState::File { sha256, size, .. } => CaptureOutcome::Captured {
                path: rel,
                sha256,
                size,
                deduplicated: dedup,
            },
            BeforeState::Uncovered { size } => CaptureOutcome::Uncovered { path: rel, size },
            BeforeState::Skipped { reason } => CaptureOutcome::Skipped {
                path: rel.display(),
                reason,
            },
        })
    }

    /// Settles tool call `call_id`: a failed call (`ok == false`) drops its staged
    /// captures; a successful one joins anchor group `anchor_seq` (the seq of the
    /// user message the call belongs to). Idempotent after a crash.
    pub fn commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        let enc = encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.store.lock_shared()?;
        let fs = &self.store.inner.fs;
        let gdir = self.dir.join("groups").join(anchor_dir_name(anchor_seq));
        let gpath = gdir.join(format!("{enc}.json"));
        let staged = self.pending_log(&mut st)?.calls.get(call_id).cloned();
        let Some(entries) = staged else {
            if ok && fs.exists(&gpath)? {
                let bytes = fs.read_opt(&gpath)?.unwrap_or_default();
                let g: GroupRecord = parse_record(&gpath, &bytes)?;
                return Ok(CommitOutcome::Committed {
                    anchor_seq,
                    entries: g.entries.len(),
                });
            }
            return Ok(CommitOutcome::NothingStaged);
        };
        let n = entries.len();
        if !ok {
            self.settle(&mut st, call_id)?;
            return Ok(CommitOutcome::Dropped { entries: n });
        }
        if !fs.exists(&gpath)? {
            fs.create_dir_all(&gdir)?;
            let g = GroupRecord {
                v: RECORD_VERSION,
                anchor_seq,
                source: EntrySource::Tool {
                    call_id: call_id.to_string(),
                },
                entries: entries.clone(),
            };
            fs.write_atomic(&gpath, &to_json(&g))?;
        }
        fs.io.crash(CrashPoint::CommitEntryWritten);
        self.settle(&mut st, call_id)?;
        fs.io.crash(CrashPoint::CommitPendingRemoved);
        // The tool has written: remember the after-state metadata (content unknown).
        let mut updates = Vec::with_capacity(n);
        for e in &entries {
            let known = self.observe_meta(&e.path).unwrap_or(Known::Unknown);
            updates.push((e.path.clone(), known, None));
        }
        self.update_tracked(&mut st, updates)?;
        Ok(CommitOutcome::Committed {
            anchor_seq,
            entries: n,
        })
    }

    /// Drops whatever call `call_id` staged (the host's safety net when a call's
    /// post-execution step never ran). Returns whether anything was staged.
    pub fn discard(&self, call_id: &str) -> Result<bool, CommitError> {
        encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.store.lock_shared()?;
        if !self.pending_log(&mut st)?.calls.contains_key(call_id) {
            return Ok(false);
        }
        self.settle(&mut st, call_id)?;
        Ok(true)
    }

    /// Loads (once) the tracked cache: `tracked.json` plus every path named by a group.
    pub(crate) fn tracked<'s>(
        &self,
        st: &'s mut State,
    ) -> Result<&'s mut BTreeMap<RelPath, (Known, Option<u64>)>, Fault> {
        if st.tracked.is_none() {
            let path = self.p("tracked.json");
            let mut map = BTreeMap::new();
            if let Some(bytes) = self.store.inner.fs.read_opt(&path)? {
                match parse_record::<TrackedRecord>(&path, &bytes) {
                    Ok(rec) => {
                        for t in rec.paths {
                            map.insert(t.path, (t.known, t.since));
                        }
                    }
                    // A cache: a torn or malformed one is rebuilt (paths become Unknown).
                    Err(Fault::Corrupt(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            for (_, rec) in self.load_groups(0)? {
                // Outside notes do not make a path tracked (it stays "left as is").
                if rec.source == EntrySource::Outside {
                    continue;
                }
                for e in rec.entries {
                    map.entry(e.path).or_insert((Known::Unknown, None));
                }
            }
            st.tracked = Some(map);
        }
        Ok(st.tracked.get_or_insert_with(BTreeMap::new))
    }

    pub(crate) fn update_tracked(
        &self,
        st: &mut State,
        updates: Vec<(RelPath, Known, Option<u64>)>,
    ) -> Result<(), Fault> {
        if updates.is_empty() {
            return Ok(());
        }
        let map = self.tracked(st)?;
        for (p, k, since) in updates {
            map.insert(p, (k, since));
        }
        self.save_tracked(st)
    }

    fn save_tracked(&self, st: &State) -> Result<(), Fault> {
        let Some(map) = &st.tracked else {
            return Ok(());
        };
        let rec = TrackedRecord {
            v: RECORD_VERSION,
            paths: map
                .iter()
                .map(|(p, (k, since))| TrackedPath {
                    path: p.clone(),
                    known: k.clone(),
                    since: *since,
                })
                .collect(),
        };
        Ok(self
            .store
            .inner
            .fs
            .write_atomic(&self.p("tracked.json"), &to_json(&rec))?)
    }

    /// Every group record with anchor ≥ `min_anchor`, in (anchor, file) order.
    pub(crate) fn load_groups(&self, min_anchor: u64) -> Result<Vec<(u64, GroupRecord)>, Fault> {
        let fs = &self.store.inner.fs;
        let gdir = self.p("groups");
        let mut out = Vec::new();
        for name in fs.list(&gdir)? {
            if is_hidden(&name) {
                continue;
            }
            let seq = parse_anchor(&gdir, &name)?;
            if seq < min_anchor {
                continue;
            }
            let adir = gdir.join(&name);
            for f in fs.list(&adir)? {
                if is_hidden(&f) {
                    continue;
                }
                let p = adir.join(&f);
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
                out.push((seq, rec));
            }
        }
        Ok(out)
    }

    /// At a user-message boundary (`anchor_seq` = that message's seq): checks every
    /// tracked path and records the current state of each whose disk state changed
    /// since the store last knew it. Unchanged paths (same size, mtime, ctime, inode,
    /// mode, type) are not read.
    pub fn recheck_tracked(&self, anchor_seq: u64) -> Result<RecheckOutcome, RecheckError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.store.lock_shared()?;
        let paths: Vec<(RelPath, (Known, Option<u64>))> = self
            .tracked(&mut st)?
            .iter()
            .map(|(p, k)| (p.clone(), k.clone()))
            .collect();
        let prev_boundary = self.last_boundary(&mut st)?.filter(|b| *b < anchor_seq);
        let mut backdated = Vec::new();
        let mut outcome = RecheckOutcome {
            checked: paths.len(),
            recorded: Vec::new(),
            failed: Vec::new(),
        };
        let mut entries = Vec::new();
        let mut updates = Vec::new();
        let mut cached: Option<(Vec<u8>, Option<WsDir<'_>>)> = None;
        for (rel, (known, since)) in paths {
            let (parents, name) = rel.split_last();
            let key = parents.join(&b'/');
            let r = (|| -> Result<Option<(BeforeState, Known, u64)>, FsFailure> {
                if cached.as_ref().map(|(k, _)| k != &key).unwrap_or(true) {
                    let mut created = Vec::new();
                    cached = None;
                    let d = match self.ws.walk_parent(&rel, false, &mut created)? {
                        Walk::Parent(d) => Some(d),
                        _ => None,
                    };
                    cached = Some((key.clone(), d));
                }
                let dir = cached.as_ref().and_then(|(_, d)| d.as_ref());
                let now = match dir {
                    Some(d) => match self.ws.lstat(d, name, &rel)? {
                        None => Known::Absent,
                        Some(meta) => Known::Present {
                            meta,
                            sha256: None,
                            recorded: false,
                        },
                    },
                    // Parent missing or blocked: find out which through the full path.
                    None => self.observe_meta(&rel)?,
                };
                // Unchanged = same metadata and content already known. A file a tool wrote
                // since (content unknown) is recorded once, so every boundary's state is exact.
                let same = match (&known, &now) {
                    (Known::Absent, Known::Absent) => true,
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
                let order = self.store.next_order();
                let (before, new_known, _) = match dir {
                    Some(d) => self.capture_in(d, &rel)?,
                    None => self.capture_path(&rel)?,
                };
                Ok(Some((before, new_known, order)))
            })();
            let (before, new_known, order) = match r {
                Ok(None) => continue,
                Ok(Some(x)) => x,
                Err(e) if e.area == Area::Workspace => {
                    // Per-path failure: reported; the path stays as last known and is retried next time.
                    cached = None;
                    outcome.failed.push(PathFailure {
                        path: rel.clone(),
                        display: rel.display(),
                        error: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // Same content as last known (e.g. only touched): record nothing, refresh metadata.
            if let (
                Known::Present {
                    sha256: Some(old), ..
                },
                BeforeState::File { sha256: new, .. },
            ) = (&known, &before)
            {
                if old == new {
                    updates.push((rel.clone(), new_known, since));
                    continue;
                }
            }
            // The change happened after the previous boundary, which saw the last known
            // state: record that state there too (unless already recorded there or later),
            // so a rewind to the previous boundary is exact.
            if let Some(prev) = prev_boundary {
                if let Some(e) =
                    self.backdated_entry(&rel, &known, since, prev, self.store.next_order())
                {
                    backdated.push(e);
                }
            }
            entries.push(Entry {
                path: rel.clone(),
                order,
                before: before.clone(),
            });
            outcome.recorded.push(RecordedChange {
                path: rel.clone(),
                before,
            });
            updates.push((rel, new_known, Some(anchor_seq)));
        }
        drop(cached);
        if let (Some(prev), false) = (prev_boundary, backdated.is_empty()) {
            self.write_recheck_group(prev, backdated)?;
        }
        if !entries.is_empty() {
            self.write_recheck_group(anchor_seq, entries)?;
        }
        self.update_tracked(&mut st, updates)?;
        if prev_boundary != Some(anchor_seq) {
            self.set_last_boundary(&mut st, anchor_seq)?;
        }
        Ok(outcome)
    }

    /// The entry recording `known` (the state last seen) at boundary `prev`, when the
    /// path changed after `prev` and that state is not already recorded at `prev` or later.
    fn backdated_entry(
        &self,
        rel: &RelPath,
        known: &Known,
        since: Option<u64>,
        prev: u64,
        order: u64,
    ) -> Option<Entry> {
        if since.is_some_and(|s| s >= prev) {
            return None;
        }
        let before = match known {
            Known::Absent => BeforeState::Absent,
            Known::Present {
                meta,
                sha256: Some(sha),
                recorded: true,
            } if meta.kind == FileKind::File && self.store.has_blob(sha) => BeforeState::File {
                sha256: sha.clone(),
                size: meta.size,
                mode: meta.mode,
            },
            _ => return None,
        };
        Some(Entry {
            path: rel.clone(),
            order,
            before,
        })
    }

    fn write_recheck_group(&self, anchor_seq: u64, entries: Vec<Entry>) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let gdir = self.p("groups").join(anchor_dir_name(anchor_seq));
        fs.create_dir_all(&gdir)?;
        let name = format!("~recheck-{}.json", entries[0].order);
        let g = GroupRecord {
            v: RECORD_VERSION,
            anchor_seq,
            source: EntrySource::Recheck,
            entries,
        };
        Ok(fs.write_atomic(&gdir.join(name), &to_json(&g))?)
    }

    /// Writes one group record of `entries` (none: nothing) at `anchor_seq`: the one
    /// function through which workspace scans add before-states and outside notes
    /// (`st`: the caller holds the session state lock).
    pub(crate) fn append_group(
        &self,
        _st: &mut State,
        anchor_seq: u64,
        source: EntrySource,
        entries: Vec<Entry>,
    ) -> Result<(), Fault> {
        let Some(first) = entries.first() else {
            return Ok(());
        };
        let fs = &self.store.inner.fs;
        let gdir = self.p("groups").join(anchor_dir_name(anchor_seq));
        fs.create_dir_all(&gdir)?;
        let kind = match &source {
            EntrySource::Tool { .. } | EntrySource::Recheck => "recheck",
            EntrySource::Scan { .. } => "scan",
            EntrySource::Outside => "outside",
        };
        let name = format!("~{kind}-{}.json", first.order);
        let g = GroupRecord {
            v: RECORD_VERSION,
            anchor_seq,
            source,
            entries,
        };
        Ok(fs.write_atomic(&gdir.join(name), &to_json(&g))?)
    }

    fn last_boundary(&self, st: &mut State) -> Result<Option<u64>, Fault> {
        if let Some(b) = st.last_boundary {
            return Ok(b);
        }
        let path = self.p("boundary.json");
        let b = match self.store.inner.fs.read_opt(&path)? {
            None => None,
            Some(bytes) => match parse_record::<BoundaryRecord>(&path, &bytes) {
                Ok(r) => Some(r.anchor_seq),
                // Only used to make records exact; a torn one means "unknown".
                Err(Fault::Corrupt(_)) => None,
                Err(e) => return Err(e),
            },
        };
        st.last_boundary = Some(b);
        Ok(b)
    }

    fn set_last_boundary(&self, st: &mut State, anchor_seq: u64) -> Result<(), Fault> {
        if self.last_boundary(st)?.is_some_and(|b| b >= anchor_seq) {
            return Ok(());
        }
        let rec = BoundaryRecord {
            v: RECORD_VERSION,
            anchor_seq,
        };
        self.store
            .inner
            .fs
            .write_atomic(&self.p("boundary.json"), &to_json(&rec))?;
        st.last_boundary = Some(Some(anchor_seq));
        Ok(())
    }

    /// The tracked paths (every path with a recorded before-state, plus the cache).
    pub fn tracked_paths(&self) -> Result<Vec<RelPath>, RecheckError> {
        let mut st = self.lock_state();
        Ok(self.tracked(&mut st)?.keys().cloned().collect())
    }

    /// The anchors that have a group, ascending.
    pub fn anchors(&self) -> Result<Vec<u64>, RecheckError> {
        let gdir = self.p("groups");
        let mut out = Vec::new();
        for name in self.store.inner.fs.list(&gdir)? {
            if !is_hidden(&name) {
                out.push(parse_anchor(&gdir, &name)?);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Keeps the newest `keep_groups` anchor groups and `keep_journals` finished
    /// journals; open journals are always kept. When that removed anything, it then
    /// removes every blob nothing references (store-wide).
    pub fn prune(&self, opts: PruneOptions) -> Result<PruneReport, PruneError> {
        let mut st = self.lock_state();
        self.prepare(&mut st)?;
        let _g = self.store.lock_exclusive()?;
        let mut report = PruneReport::default();
        let anchors = self.anchors().map_err(|e| match e {
            RecheckError::Fs(f) => Fault::Fs(f),
            RecheckError::Corrupt(c) => Fault::Corrupt(c),
            RecheckError::NewerStore(n) => Fault::Newer(n),
            RecheckError::Read { source, .. } => Fault::Fs(source),
        })?;
        if anchors.len() > opts.keep_groups {
            for seq in &anchors[..anchors.len() - opts.keep_groups] {
                self.store
                    .remove_tree(&self.p("groups").join(anchor_dir_name(*seq)))?;
                report.groups_removed += 1;
            }
        }
        report.journals_removed = self.prune_journals(opts.keep_journals)?;
        self.sweep_temporaries()?;
        self.store.inner.fs.io.crash(CrashPoint::PruneBeforeSweep);
        // The blob sweep reads every record of every session: worth it only when this prune
        // dropped references. Blobs left by dropped captures wait for the next sweep that runs
        // (a prune that removes something, `Store::collect_garbage`, `clear_session`).
        if report.groups_removed > 0 || report.journals_removed > 0 {
            report.gc = self.store.collect_garbage_locked()?;
        }
        Ok(report)
    }

    /// Removes temporary files (`.name.tmp-…`) left in the session by a crash in the
    /// middle of an atomic write. Called under the exclusive store lock, so no writer
    /// of this store is between creating and renaming one.
    fn sweep_temporaries(&self) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let mut dirs = vec![self.dir.clone(), self.p("journals")];
        for g in fs.list(&self.p("groups"))? {
            if !is_hidden(&g) {
                dirs.push(self.p("groups").join(g));
            }
        }
        for d in dirs {
            for name in fs.list(&d)? {
                if is_hidden(&name) {
                    fs.remove_file(&d.join(name))?;
                }
            }
        }
        Ok(())
    }

    /// Removes this session's snapshot directory (groups, pending captures, tracked
    /// cache, journals), then sweeps unreferenced blobs. Refused on a newer store.
    pub fn clear_session(&self) -> Result<GcReport, ClearError> {
        let mut st = self.lock_state();
        self.store.guard_writable()?;
        let _g = self.store.lock_exclusive()?;
        self.store.remove_tree(&self.dir)?;
        st.tracked = None;
        st.prepared = false;
        st.last_boundary = None;
        st.pending = None;
        Ok(self.store.collect_garbage_locked()?)
    }

    /// Records the host's session-log format `format`; when a different format was
    /// recorded, the session's snapshots are cleared first (anchors are log seqs, so
    /// they are not re-mapped across formats).
    pub fn reconcile_format(&self, format: &str) -> Result<FormatOutcome, ClearError> {
        self.store.guard_writable()?;
        let previous = match self.read_marker() {
            Ok(m) => m,
            Err(Fault::Corrupt(_)) => Some(SessionMarker {
                v: RECORD_VERSION,
                session_id: self.id.clone(),
                session_format: None,
            }),
            Err(e) => return Err(e.into()),
        };
        let outcome = match &previous {
            None => FormatOutcome::Initialized,
            Some(m) if m.session_format.as_deref() == Some(format) => {
                return Ok(FormatOutcome::Unchanged);
            }
            Some(m) if m.session_format.is_none() && !self.has_records()? => {
                FormatOutcome::Initialized
            }
            Some(m) => {
                self.clear_session()?;
                FormatOutcome::Cleared {
                    previous: m.session_format.clone(),
                }
            }
        };
        let fs = &self.store.inner.fs;
        let _g = self.store.lock_shared()?;
        fs.create_dir_all(&self.dir)?;
        let m = SessionMarker {
            v: RECORD_VERSION,
            session_id: self.id.clone(),
            session_format: Some(format.to_string()),
        };
        fs.write_atomic(&self.p("session.json"), &to_json(&m))?;
        Ok(outcome)
    }

    fn has_records(&self) -> Result<bool, Fault> {
        let fs = &self.store.inner.fs;
        Ok(!fs.list(&self.p("groups"))?.is_empty() || !fs.list(&self.p("journals"))?.is_empty())
    }

    /// The recorded session-log format, if any.
    pub fn format(&self) -> Result<Option<String>, RecheckError> {
        Ok(self.read_marker()?.and_then(|m| m.session_format))
    }
}

/// Whether the disk state `now` differs from the last known state (unknown never differs).
fn differs(known: &Known, now: &Known) -> bool {
    match (known, now) {
        (Known::Unknown, _) | (_, Known::Unknown) => false,
        (Known::Absent, Known::Absent) => false,
        (Known::Present { meta: a, .. }, Known::Present { meta: b, .. }) => a != b,
        _ => true,
    }
}

fn not_capturable(meta: &DiskMeta) -> Option<SkipReason> {
    match meta.kind {
        FileKind::Symlink => Some(SkipReason::Symlink),
        FileKind::Dir => Some(SkipReason::Directory),
        FileKind::Other => Some(SkipReason::Special),
        FileKind::File if meta.nlink > 1 => Some(SkipReason::HardLink { nlink: meta.nlink }),
        FileKind::File => None,
    }
}

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

fn map_read(e: FsFailure, rel: &RelPath) -> CaptureError {
    if e.area == Area::Workspace {
        CaptureError::Read {
            path: rel.display(),
            source: e,
        }
    } else {
        CaptureError::Fs(e)
    }
}
