//! A tool call's staged before-states committed under their anchor, or discarded.

use serde::Serialize;

use crate::capture::Staging;
use crate::codec::{Record, TrackedUpdate};
use crate::error::CommitError;
use crate::format::{EntrySource, Known};
use crate::path::encode_id;
use crate::records::tracked_records;
use crate::seam::CrashPoint;

use crate::session::{DeferredCommit, Session, State};

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

impl Session {
    /// Settles tool call `call_id`: a failed call (`ok == false`) drops its staged
    /// captures; a successful one joins anchor group `anchor_seq` (the seq of the
    /// user message the call belongs to). Idempotent after a crash.
    pub fn commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        self.staging().commit(call_id, anchor_seq, ok)
    }

    /// [`Session::commit`] for a caller that must not wait: `None`, having done
    /// nothing, in the cases of [`Session::try_capture_before`] (no store lock is
    /// involved) or when the call staged more than `max_paths` paths.
    pub fn try_commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
        max_paths: usize,
    ) -> Option<Result<CommitOutcome, CommitError>> {
        self.staging()
            .try_commit(call_id, anchor_seq, ok, max_paths)
    }

    /// Drops whatever call `call_id` staged (the host's safety net when a call's
    /// post-execution step never ran). Returns whether anything was staged.
    pub fn discard(&self, call_id: &str) -> Result<bool, CommitError> {
        self.staging().discard(call_id)
    }

    /// Writes the commits this handle settled without writing (see
    /// [`Session::capture_before_at`]) now, instead of with its next append. Returns
    /// whether there were any. A host calls it when a burst of tool calls goes quiet;
    /// dropping the handle does it too.
    pub fn flush(&self) -> Result<bool, CommitError> {
        self.staging().flush()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let waiting = |st: &State| !st.deferred.is_empty() || !st.unlooked.is_empty();
        let deferred = match self.state.get_mut() {
            Ok(st) => waiting(st),
            Err(p) => waiting(p.into_inner()),
        };
        if deferred {
            // Best effort: what is not written counts as committed when the log is
            // next opened (the staged records name the anchor).
            let _ = self.flush();
        }
    }
}

impl<'s> Staging<'s> {
    pub(crate) fn commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.s.lock_state();
        if ok {
            if let Some(done) = self.defer(&mut st, call_id, anchor_seq, usize::MAX, false) {
                return done;
            }
        }
        self.commit_with(&mut st, call_id, anchor_seq, ok)
    }

    pub(crate) fn try_commit(
        &self,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
        max_paths: usize,
    ) -> Option<Result<CommitOutcome, CommitError>> {
        if let Err(reason) = encode_id(call_id) {
            return Some(Err(CommitError::InvalidCallId {
                id: call_id.into(),
                reason,
            }));
        }
        if ok {
            let deferred = match self.s.state.try_lock() {
                Ok(mut st) => self.defer(&mut st, call_id, anchor_seq, max_paths, true),
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    self.defer(&mut p.into_inner(), call_id, anchor_seq, max_paths, true)
                }
                Err(std::sync::TryLockError::WouldBlock) => return None,
            };
            if deferred.is_some() {
                return deferred;
            }
        }
        let (mut q, _) = self.quick_state(false)?;
        let many =
            q.st.idx
                .pending
                .get(call_id)
                .is_some_and(|p| p.entries().len() > max_paths);
        (!many).then(|| self.commit_with(&mut q.st, call_id, anchor_seq, ok))
    }

    /// Commits a call staged by this handle at the anchor its captures named, without
    /// writing: the group and the after-states are settled in the index now and their
    /// frames join this handle's next append ([`Session::flush`]). Should the process
    /// end first, the call still counts as committed at that anchor (its `staged_at`
    /// records name it); only the after-state metadata is lost, so the next re-check
    /// records those paths' states afresh. `None` (nothing done) when the call does not
    /// qualify: power-loss mode (a commit is durable when it returns), a call this
    /// handle did not stage with this anchor, more than `max_paths` paths, or no log.
    ///
    /// With `later` (a commit on the host's thread, of at most `max_paths` paths) after a
    /// pause (see [`Session::look_later_after`]), the after-states are not looked at here:
    /// the handle's next call looks at them first
    /// ([`Staging::look_after`]), on whichever thread it runs; a quiet burst's flush, on the
    /// thread pool, does it for the last call. Until then nothing reads the index, so every
    /// reader finds it as if they had been looked at with the commit. The `lstat` of a file
    /// the tool has just written, `fsync`ed and renamed is the commit's costliest part on
    /// the host's thread after the model's pause. A change to such a path by another
    /// process in between is taken into its after-state, as if the tool had made it.
    pub(crate) fn defer(
        &self,
        st: &mut State,
        call_id: &str,
        anchor_seq: u64,
        max_paths: usize,
        later: bool,
    ) -> Option<Result<CommitOutcome, CommitError>> {
        let fs = &self.s.store.inner.fs;
        let staged = st.idx.pending.contains_key(call_id);
        let settles = staged
            && st.inflight.contains(call_id)
            && st.idx.pending_at.get(call_id) == Some(&anchor_seq);
        let recorded = st.recorded.get(call_id).map(|(a, p)| (*a, p.len()));
        if fs.io.durable
            || st.log.is_none()
            || (staged && !settles)
            || recorded.is_some_and(|(a, _)| a != anchor_seq)
            || !(settles || recorded.is_some())
        {
            return None;
        }
        let entries = match settles {
            true => st.idx.pending.get(call_id)?.entries().to_vec(),
            false => Vec::new(),
        };
        if entries.len() + recorded.map_or(0, |(_, n)| n) > max_paths {
            return None;
        }
        let n = entries.len();
        let later = later && self.s.looks_later(st);
        let also = st.recorded.remove(call_id);
        let mut look: Vec<(crate::path::RelPath, bool)> =
            entries.iter().map(|e| (e.path.clone(), true)).collect();
        look.extend(Self::recorded_looks(&mut st.idx, also, anchor_seq));
        let mut recs = Vec::with_capacity(2);
        if settles {
            recs.push(Record::Group {
                anchor_seq,
                source: EntrySource::Tool {
                    call_id: call_id.to_string(),
                },
                entries,
            });
        }
        if !later {
            recs.extend(tracked_records(self.looked(look.drain(..))));
        }
        if !recs.is_empty() {
            let rec = self.deferred_commit(st, call_id, anchor_seq, settles, recs);
            match rec {
                Ok(d) => st.deferred.push(d),
                Err(e) => return Some(Err(e.into())),
            }
        }
        st.inflight.remove(call_id);
        st.unlooked.append(&mut look);
        // The call is settled (in the index; in the log once flushed, or as an orphan).
        fs.io.crash(CrashPoint::CommitEntryWritten);
        fs.io.crash(CrashPoint::CommitPendingRemoved);
        Some(Ok(CommitOutcome::Committed {
            anchor_seq,
            entries: n,
        }))
    }

    /// `recs` encoded and applied to the index, as a commit whose frames wait for the
    /// handle's next append.
    fn deferred_commit(
        &self,
        st: &mut State,
        call_id: &str,
        anchor: u64,
        settles: bool,
        recs: Vec<Record>,
    ) -> Result<DeferredCommit, crate::error::Fault> {
        let mut bytes = Vec::with_capacity(128 * recs.len());
        let sizes = self.s.encode_frames(&recs, &mut bytes)?;
        let recs: Vec<(Record, u64)> = recs.into_iter().zip(sizes).collect();
        for (r, n) in &recs {
            st.idx.apply(r.clone(), *n).map_err(|d| self.s.damaged(d))?;
        }
        Ok(DeferredCommit {
            call_id: call_id.to_string(),
            anchor,
            settles,
            bytes,
            recs,
        })
    }

    /// Looks at the after-states the commits made on the host's thread left (see
    /// [`Staging::defer`]) and settles them in the index as a commit of their own, whose
    /// frames join the handle's next append. Should that fail (a frame over the limit, a
    /// damaged index), they are left as they were before the tool wrote: the next re-check
    /// finds those paths changed and records their states afresh.
    pub(crate) fn look_after(&self, st: &mut State) {
        if st.unlooked.is_empty() {
            return;
        }
        let look = std::mem::take(&mut st.unlooked);
        let recs = tracked_records(self.looked(look.into_iter()));
        if let Ok(d) = self.deferred_commit(st, "", 0, false, recs) {
            st.deferred.push(d);
        }
    }

    /// The after-states of `look`'s paths: looked at, or unknown.
    fn looked(
        &self,
        look: impl Iterator<Item = (crate::path::RelPath, bool)>,
    ) -> Vec<TrackedUpdate> {
        look.map(|(path, looks)| match looks {
            true => self.after_state(&path),
            false => TrackedUpdate {
                path,
                known: Known::Unknown,
                since: None,
            },
        })
        .collect()
    }

    /// The tool has written: the after-state metadata of its paths (content unknown).
    fn after_states(&self, entries: &[crate::format::Entry]) -> Vec<TrackedUpdate> {
        entries.iter().map(|e| self.after_state(&e.path)).collect()
    }

    /// The metadata a tool left at `path`, in one `lstat` relative to the workspace's handle,
    /// without the walk of a capture or a re-check: this call runs on the host's thread after
    /// every write-tool call, and the walk's open and close of the parent directory cost it
    /// two more system calls. A parent that became a symlink since the capture (which found
    /// it a directory) is followed here, which the walk never does; the after-state is only
    /// what the next re-check compares the path's state with, and the re-check's walk then
    /// finds the path blocked, a state that differs, and records it (no content is read
    /// through the symlink).
    fn after_state(&self, path: &crate::path::RelPath) -> TrackedUpdate {
        let ws = &self.s.ws;
        let known = match ws.lstat(&ws.root, path.as_bytes(), path) {
            Ok(Some(meta)) => Known::Present {
                meta,
                sha256: None,
                recorded: false,
            },
            Ok(None) => Known::Absent,
            Err(_) => Known::Unknown,
        };
        TrackedUpdate {
            path: path.clone(),
            known,
            since: None,
        }
    }

    /// The after-states of the paths a call captured without staging (its entry of
    /// [`State::recorded`]: their anchor and the paths), committed at `anchor_seq`.
    /// Committed at another anchor than its captures named (a message came while the
    /// tool ran), a path whose state there is not recorded is left unknown (the next
    /// re-check records it), not taken for the state the tool left.
    fn recorded_after_states(
        &self,
        idx: &mut crate::records::Index,
        recorded: Option<(u64, std::collections::BTreeSet<crate::path::RelPath>)>,
        anchor_seq: u64,
    ) -> Vec<TrackedUpdate> {
        self.looked(Self::recorded_looks(idx, recorded, anchor_seq).into_iter())
    }

    /// [`Staging::recorded_after_states`]' paths, each with whether its state is looked at.
    fn recorded_looks(
        idx: &mut crate::records::Index,
        recorded: Option<(u64, std::collections::BTreeSet<crate::path::RelPath>)>,
        anchor_seq: u64,
    ) -> Vec<(crate::path::RelPath, bool)> {
        let Some((anchor, paths)) = recorded else {
            return Vec::new();
        };
        paths
            .into_iter()
            .map(|p| {
                let there =
                    anchor == anchor_seq || idx.recorded_at(anchor_seq, &p).unwrap_or(false);
                (p, there)
            })
            .collect()
    }

    pub(crate) fn commit_with(
        &self,
        st: &mut State,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        self.s.prepare(st)?;
        let staged = st.idx.pending.get(call_id).map(|p| p.entries().to_vec());
        let recorded = st.recorded.remove(call_id);
        let Some(entries) = staged else {
            if let Some(r) = recorded.filter(|_| ok) {
                let updates = self.recorded_after_states(&mut st.idx, Some(r), anchor_seq);
                self.s.append(st, tracked_records(updates))?;
                return Ok(CommitOutcome::Committed {
                    anchor_seq,
                    entries: 0,
                });
            }
            if ok {
                let done = st.idx.groups.get(&anchor_seq).and_then(|gs| {
                    gs.iter().find(
                        |g| matches!(&g.source, EntrySource::Tool { call_id: c } if c == call_id),
                    )
                });
                if let Some(g) = done {
                    return Ok(CommitOutcome::Committed {
                        anchor_seq,
                        entries: g.len(),
                    });
                }
            }
            return Ok(CommitOutcome::NothingStaged);
        };
        let n = entries.len();
        st.inflight.remove(call_id);
        if !ok {
            self.s.append(
                st,
                vec![Record::Dropped {
                    call_id: call_id.to_string(),
                }],
            )?;
            return Ok(CommitOutcome::Dropped { entries: n });
        }
        let mut updates = self.after_states(&entries);
        updates.extend(self.recorded_after_states(&mut st.idx, recorded, anchor_seq));
        self.s.append_group(
            st,
            anchor_seq,
            EntrySource::Tool {
                call_id: call_id.to_string(),
            },
            entries,
            tracked_records(updates),
        )?;
        let fs = &self.s.store.inner.fs;
        // One record settles the call: both points follow the same write.
        fs.io.crash(CrashPoint::CommitEntryWritten);
        fs.io.crash(CrashPoint::CommitPendingRemoved);
        Ok(CommitOutcome::Committed {
            anchor_seq,
            entries: n,
        })
    }

    pub(crate) fn flush(&self) -> Result<bool, CommitError> {
        let mut st = self.s.lock_state();
        if st.deferred.is_empty() {
            return Ok(false);
        }
        self.s.store.guard_writable()?;
        self.s.sync(&mut st)?;
        if st.log.is_none() {
            // The session's log is gone (cleared or swept): nothing to settle, and
            // nothing is created again.
            st.deferred.clear();
            return Ok(false);
        }
        if st.deferred.is_empty() {
            return Ok(false);
        }
        self.s.append(&mut st, Vec::new())?;
        Ok(true)
    }

    pub(crate) fn discard(&self, call_id: &str) -> Result<bool, CommitError> {
        encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        let recorded = st.recorded.remove(call_id).is_some();
        if !st.idx.pending.contains_key(call_id) {
            return Ok(recorded);
        }
        st.inflight.remove(call_id);
        self.s.append(
            &mut st,
            vec![Record::Dropped {
                call_id: call_id.to_string(),
            }],
        )?;
        Ok(true)
    }
}
