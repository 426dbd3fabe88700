//! A tool call's staged before-states committed under their anchor, or discarded.

use serde::Serialize;

use crate::capture::Staging;
use crate::codec::{Record, TrackedUpdate};
use crate::error::CommitError;
use crate::format::{EntrySource, Known};
use crate::path::encode_id;
use crate::records::tracked_records;
use crate::seam::CrashPoint;

use crate::session::{Session, State};

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
        self.commit_with(&mut self.s.lock_state(), call_id, anchor_seq, ok)
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
        let (mut q, _) = self.quick_state(false)?;
        let many =
            q.st.idx
                .pending
                .get(call_id)
                .is_some_and(|(e, _)| e.len() > max_paths);
        (!many).then(|| self.commit_with(&mut q.st, call_id, anchor_seq, ok))
    }

    pub(crate) fn commit_with(
        &self,
        st: &mut State,
        call_id: &str,
        anchor_seq: u64,
        ok: bool,
    ) -> Result<CommitOutcome, CommitError> {
        self.s.prepare(st)?;
        let staged = st.idx.pending.get(call_id).map(|(e, _)| e.clone());
        let Some(entries) = staged else {
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
        if !ok {
            self.s.append(
                st,
                vec![Record::Dropped {
                    call_id: call_id.to_string(),
                }],
            )?;
            return Ok(CommitOutcome::Dropped { entries: n });
        }
        // The tool has written: remember the after-state metadata (content unknown).
        let mut updates = Vec::with_capacity(n);
        for e in &entries {
            let known = self.observe_meta(&e.path).unwrap_or(Known::Unknown);
            updates.push(TrackedUpdate {
                path: e.path.clone(),
                known,
                since: None,
            });
        }
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

    pub(crate) fn discard(&self, call_id: &str) -> Result<bool, CommitError> {
        encode_id(call_id).map_err(|reason| CommitError::InvalidCallId {
            id: call_id.into(),
            reason,
        })?;
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        if !st.idx.pending.contains_key(call_id) {
            return Ok(false);
        }
        self.s.append(
            &mut st,
            vec![Record::Dropped {
                call_id: call_id.to_string(),
            }],
        )?;
        Ok(true)
    }
}
