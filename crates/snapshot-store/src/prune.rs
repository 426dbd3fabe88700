//! Keeping a session small: prune, clear, the recorded DSH session format.

use serde::Serialize;

use crate::codec::Record;
use crate::error::{ClearError, Fault, PruneError, RecheckError};
use crate::gc::GcReport;
use crate::path::{is_hidden, is_spare};
use crate::records::Index;
use crate::seam::CrashPoint;

use crate::session::Session;

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

/// Options of [`Session::prune`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Anchor groups to keep (newest first); default 100. The older ones are dropped once
    /// there are more than a tenth more (110 by default): the store-wide blob sweep that
    /// follows a drop then runs every eleventh new group (by default), not at every one.
    pub keep_groups: usize,
    /// Finished restore journals to keep (newest first); default 10. Open journals are always kept.
    pub keep_journals: usize,
}

/// Whether a session's directory entry is a temporary file a crash left behind: every hidden
/// name but a spare (see `StoreFs::write_replacing`), which is kept on purpose.
fn is_temporary(name: &std::ffi::OsStr) -> bool {
    is_hidden(name) && !is_spare(name)
}

impl PruneOptions {
    /// The number of groups above which a prune drops the oldest down to `keep_groups`.
    fn drop_above(&self) -> usize {
        self.keep_groups.saturating_add(self.keep_groups / 10)
    }
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

/// The session's pruning and clearing: old groups and journals, the whole session,
/// and a change of the host's log format.
#[derive(Clone, Copy)]
pub(crate) struct Pruner<'s> {
    pub(crate) s: &'s Session,
}

impl Session {
    /// The session's pruning.
    pub(crate) fn pruner(&self) -> Pruner<'_> {
        Pruner { s: self }
    }

    /// Keeps the newest `keep_groups` anchor groups (dropping the older ones once there are
    /// a tenth more, see [`PruneOptions::keep_groups`]) and `keep_journals` finished
    /// journals; open journals are always kept. Compacts the record log when it
    /// outgrew its live content. When that removed anything, it then removes every
    /// blob nothing references (store-wide).
    pub fn prune(&self, opts: PruneOptions) -> Result<PruneReport, PruneError> {
        self.pruner().prune(opts)
    }

    /// Removes this session's snapshot directory (record log, journals), then sweeps
    /// unreferenced blobs. Refused on a newer store.
    pub fn clear_session(&self) -> Result<GcReport, ClearError> {
        self.pruner().clear_session()
    }

    /// Records the host's session-log format `format`; when a different format was
    /// recorded, the session's snapshots are cleared first (anchors are log seqs, so
    /// they are not re-mapped across formats).
    pub fn reconcile_format(&self, format: &str) -> Result<FormatOutcome, ClearError> {
        self.pruner().reconcile_format(format)
    }

    /// The recorded session-log format, if any.
    pub fn format(&self) -> Result<Option<String>, RecheckError> {
        self.pruner().format()
    }
}

impl Pruner<'_> {
    pub(crate) fn prune(&self, opts: PruneOptions) -> Result<PruneReport, PruneError> {
        let mut st = self.s.lock_state();
        self.s.prepare(&mut st)?;
        // The plugin prunes at every message: most find nothing to do, and need not wait
        // for the exclusive store lock (behind every other handle's calls) to find it out.
        if !self.due(&mut st, &opts)? {
            return Ok(PruneReport::default());
        }
        let _g = self.s.store.lock_exclusive()?;
        let mut report = PruneReport::default();
        let anchors: Vec<u64> = st.idx.groups.keys().copied().collect();
        if anchors.len() > opts.drop_above() {
            let drop = anchors[..anchors.len() - opts.keep_groups].to_vec();
            report.groups_removed = drop.len();
            self.s
                .append(&mut st, vec![Record::Pruned { anchors: drop }])?;
            self.s
                .store
                .inner
                .fs
                .io
                .crash(CrashPoint::PruneGroupDetached);
        }
        self.s.compact_if_due(&mut st)?;
        report.journals_removed = self.s.journal().prune_journals(opts.keep_journals)?;
        self.sweep_temporaries()?;
        self.s.store.inner.fs.io.crash(CrashPoint::PruneBeforeSweep);
        // The blob sweep reads every record of every session: worth it only when this prune
        // dropped references. Blobs left by dropped captures wait for the next sweep that runs
        // (a prune that removes something, `Store::collect_garbage`, `clear_session`).
        if report.groups_removed > 0 || report.journals_removed > 0 {
            // Packs mostly dead are rewritten by an explicit collection, not at a message.
            report.gc = self.s.store.collect_garbage_locked_with(false)?;
        }
        Ok(report)
    }

    /// Whether a prune with `opts` may have anything to do: groups to drop (a tenth more
    /// than it keeps), a log due for compaction, more journals than it keeps finished ones,
    /// or a temporary file left in the session. Looked at under the session's state lock only; what
    /// changes after the look waits for the next prune.
    fn due(&self, st: &mut crate::session::State, opts: &PruneOptions) -> Result<bool, Fault> {
        if st.idx.groups.len() > opts.drop_above() || self.s.wants_compaction(st) {
            return Ok(true);
        }
        let fs = &self.s.store.inner.fs;
        // One listing of `journals/` tells both the finished intents and its temporaries.
        let journals = fs.list(&self.s.p("journals"))?;
        let intents = journals
            .iter()
            .filter(|n| !is_hidden(n) && n.as_encoded_bytes().ends_with(b".json"))
            .count();
        let any = |names: &[std::ffi::OsString]| names.iter().any(|n| is_temporary(n));
        Ok(intents > opts.keep_journals || any(&journals) || any(&fs.list(&self.s.dir)?))
    }

    /// The temporary files (`.name.tmp-…`) a crash in the middle of an atomic write or a
    /// compaction left in the session (see [`is_temporary`]).
    fn temporaries(&self) -> Result<Vec<std::path::PathBuf>, Fault> {
        let fs = &self.s.store.inner.fs;
        let mut out = Vec::new();
        for d in [self.s.dir.clone(), self.s.p("journals")] {
            for name in fs.list(&d)? {
                if is_temporary(&name) {
                    out.push(d.join(name));
                }
            }
        }
        Ok(out)
    }

    /// Removes the temporary files left in the session (see `Pruner::temporaries`).
    /// Called under the exclusive store lock and the session's state lock.
    pub(crate) fn sweep_temporaries(&self) -> Result<(), Fault> {
        let fs = &self.s.store.inner.fs;
        for path in self.temporaries()? {
            fs.remove_file(&path)?;
        }
        Ok(())
    }

    pub(crate) fn clear_session(&self) -> Result<GcReport, ClearError> {
        let mut st = self.s.lock_state();
        self.s.store.guard_writable()?;
        let _g = self.s.store.lock_exclusive()?;
        self.s.store.remove_tree(&self.s.dir)?;
        st.idx = Index::default();
        st.log = None;
        st.deferred.clear();
        st.inflight.clear();
        st.recorded.clear();
        st.prepared = false;
        st.legacy_checked = true;
        Ok(self.s.store.collect_garbage_locked()?)
    }

    pub(crate) fn reconcile_format(&self, format: &str) -> Result<FormatOutcome, ClearError> {
        self.s.store.guard_writable()?;
        let mut st = self.s.lock_state();
        self.s.sync(&mut st)?;
        let previous = st.idx.format.clone();
        let outcome = if previous.as_deref() == Some(format) {
            return Ok(FormatOutcome::Unchanged);
        } else if previous.is_none() && st.idx.groups.is_empty() && !self.has_journals()? {
            FormatOutcome::Initialized
        } else {
            drop(st);
            self.clear_session()?;
            st = self.s.lock_state();
            FormatOutcome::Cleared { previous }
        };
        self.s.prepare(&mut st)?;
        self.s.append(
            &mut st,
            vec![Record::Format {
                format: Some(format.to_string()),
            }],
        )?;
        Ok(outcome)
    }

    pub(crate) fn has_journals(&self) -> Result<bool, Fault> {
        Ok(!self
            .s
            .store
            .inner
            .fs
            .list(&self.s.p("journals"))?
            .is_empty())
    }

    pub(crate) fn format(&self) -> Result<Option<String>, RecheckError> {
        let mut st = self.s.lock_state();
        self.s.sync(&mut st)?;
        Ok(st.idx.format.clone())
    }
}
