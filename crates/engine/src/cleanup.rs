//! The auto-cleanup's coordination: a sweep of idle sessions, then the store's garbage
//! collection of the backups only they referenced, the size quota after the age rule, the
//! last-sweep record, and the engine's handles of swept sessions dropped.

use rewind_cleanup::{
    AutoSweep, Cleaner, LastQuota, Pins, PolicyPort, QUOTA_RECORD_VERSION, QuotaRecord,
    QuotaReport, Scope, SweepReport, SweepRequest, Trigger,
};
use rewind_history::Outcome;

use crate::engine::Engine;
use crate::error::EngineError;

/// What a sweep did, with the garbage collection that followed it.
#[derive(Debug, Clone)]
pub struct Swept {
    /// The sweep.
    pub report: SweepReport,
    /// Why the backups only the removed sessions referenced were not freed, if so.
    pub blobs_not_freed: Option<String>,
}

/// What the automatic sweep did when it ran.
#[derive(Debug, Clone)]
pub struct AutoSwept {
    /// The age rule, when it ran (it is off by default and runs at most once a day).
    pub age: Option<Swept>,
    /// The size quota (with a budget), and why it did not run or was not recorded.
    pub quota: Option<QuotaReport>,
    /// Why the quota failed or its result was not recorded, if so.
    pub quota_error: Option<String>,
    /// The compaction that followed (loose blobs packed), or why it failed.
    pub compacted: Option<Result<snapshot_store::CompactReport, String>>,
}

/// The sessions whose backups a rewind listed in `history` still needs ([`Engine::undo_pins`];
/// for tools that read the history without an engine, such as `dsh-rewind gc`).
pub fn undo_pins_of(history: &rewind_history::HistoryStore) -> Result<Pins, EngineError> {
    let mut pins = Pins::none();
    for key in history.partition_keys()? {
        let (partition, _) = history.read_salvaged(&key)?;
        for e in &partition.entries {
            if matches!(
                e.outcome,
                Outcome::Done | Outcome::Partial | Outcome::Failed
            ) {
                pins.insert(e.session_id.clone());
            }
        }
    }
    Ok(pins)
}

impl Engine {
    /// The cleaner of this engine's home and store.
    pub fn cleaner(&self) -> Result<Cleaner, EngineError> {
        Ok(Cleaner::open_with(self.home(), self.snapshots_root())?)
    }

    /// After sessions were removed, the backups only they referenced are unreferenced: the
    /// store's garbage collection frees them; and the engine forgets their handles.
    fn after_removal(&self, removed: &[String]) -> Option<String> {
        for id in removed {
            self.forget(id);
        }
        if removed.is_empty() {
            return None;
        }
        let freed = self
            .with_store(|store| {
                store
                    .collect_garbage()
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .unwrap_or_else(|e| Err(e.message));
        freed.err()
    }

    /// A sweep by age (or of one session), a dry run unless `request` applies it.
    pub fn sweep(
        &self,
        policy: &dyn PolicyPort,
        request: &SweepRequest,
    ) -> Result<Swept, EngineError> {
        let report = self.cleaner()?.sweep(policy, request)?;
        let removed: Vec<String> = if report.applied {
            report.items.iter().map(|i| i.session_id.clone()).collect()
        } else {
            Vec::new()
        };
        let blobs_not_freed = self.after_removal(&removed);
        Ok(Swept {
            report,
            blobs_not_freed,
        })
    }

    /// The sessions whose backups a rewind listed in the history still needs: the session
    /// each entry that can be undone or redone restored its files in (its restore journal
    /// and rescue copies live there). Entries rolled back, abandoned or still started need
    /// nothing here (a started one's open journal pins its session by itself). A damaged
    /// history file is read for what can be salvaged; one that cannot be read at all (a
    /// newer version, a disk error) is an error: the size quota then removes nothing.
    pub fn undo_pins(&self) -> Result<Pins, EngineError> {
        undo_pins_of(&self.history(None)?)
    }

    /// The size quota: the oldest idle sessions removed until the store takes at most
    /// `max_bytes` (a dry run unless `request` applies it); `already` names the sessions the
    /// same run's age sweep removes. Besides what `request` keeps, every session an undo or
    /// redo listed in the rewind history needs is kept ([`Engine::undo_pins`]). An applied
    /// run that removed sessions is recorded (`snapshot-cleanup-last-quota.json`, with
    /// `trigger`).
    pub fn quota_sweep(
        &self,
        policy: &dyn PolicyPort,
        max_bytes: u64,
        request: &SweepRequest,
        already: &[String],
    ) -> Result<QuotaReport, EngineError> {
        self.quota_sweep_by(policy, max_bytes, request, already, Trigger::Manual)
    }

    fn quota_sweep_by(
        &self,
        policy: &dyn PolicyPort,
        max_bytes: u64,
        request: &SweepRequest,
        already: &[String],
        trigger: Trigger,
    ) -> Result<QuotaReport, EngineError> {
        let cleaner = self.cleaner()?;
        let mut pins = self.undo_pins()?;
        for id in request.pins.iter() {
            pins.insert(id.clone());
        }
        let request = request.clone().with_pins(pins);
        let report = self.with_store(|store| {
            cleaner
                .quota_sweep(policy, store, max_bytes, &request, already)
                .map_err(EngineError::from)
        })??;
        if report.applied && !report.items.is_empty() {
            for item in &report.items {
                self.forget(&item.session_id);
            }
            let run = LastQuota {
                version: QUOTA_RECORD_VERSION,
                at: self.now(),
                trigger,
                max_bytes,
                sessions: report.items.iter().map(|i| i.session_id.clone()).collect(),
                freed: report.items.iter().map(|i| i.freed).sum(),
                bytes_after: report.bytes_after,
            };
            // The sessions are gone whether or not the note is written; a failed note is
            // not a failed quota.
            let _ = cleaner.record_quota_run(&run);
        }
        Ok(report)
    }

    /// Packs the store's loose blobs (zstd-compressed, small ones sharing chunks): see
    /// `snapshot_store::Store::compact`. Never on a tool call's path: the automatic sweep
    /// runs it after its size quota, `dsh-rewind compact` by hand.
    pub fn compact(&self) -> Result<snapshot_store::CompactReport, EngineError> {
        self.with_store(|store| store.compact().map_err(EngineError::from))?
    }

    /// The size quota's last run that removed sessions, if one was recorded and can be read.
    pub fn last_quota(&self) -> Result<Option<LastQuota>, EngineError> {
        Ok(self.cleaner()?.last_quota()?)
    }

    /// The automatic sweep. The age rule runs when the policy enables it and the last sweep
    /// is a day old; the size quota runs whenever `max_bytes` is non-zero (it is on by
    /// default and does not depend on the age rule's switch): the oldest idle sessions go
    /// until the store fits, never a live one, one an open restore journal needs, or one an
    /// undo in the history needs. The quota's result joins the last-sweep record when the
    /// age rule ran too. `None` when neither ran. The caller decides how often to call it
    /// (the plugin: at each session start and after turns, at most every few minutes).
    pub fn auto_sweep(
        &self,
        policy: &dyn PolicyPort,
        active: &[String],
        max_bytes: u64,
    ) -> Result<Option<AutoSwept>, EngineError> {
        let cleaner = self.cleaner()?;
        let age = match cleaner.auto_sweep(policy, active, &Pins::none())? {
            AutoSweep::Ran { report, .. } => {
                let removed: Vec<String> =
                    report.items.iter().map(|i| i.session_id.clone()).collect();
                let blobs_not_freed = self.after_removal(&removed);
                Some(Swept {
                    report,
                    blobs_not_freed,
                })
            }
            AutoSweep::Disabled | AutoSweep::NotDue { .. } => None,
        };
        if max_bytes == 0 {
            let compacted = age.as_ref().map(|_| self.compact().map_err(|e| e.message));
            return Ok(age.map(|age| AutoSwept {
                age: Some(age),
                quota: None,
                quota_error: None,
                compacted,
            }));
        }
        let removed: Vec<String> = age
            .iter()
            .flat_map(|a| a.report.items.iter().map(|i| i.session_id.clone()))
            .collect();
        let request = SweepRequest::dry_run(Scope::Idle)
            .with_active(active.iter().cloned())
            .applied();
        let (quota, quota_error) =
            match self.quota_sweep_by(policy, max_bytes, &request, &removed, Trigger::Auto) {
                Ok(q) => {
                    let error = if age.is_some() {
                        let record = QuotaRecord {
                            max_bytes,
                            removed: q.items.len() as u64,
                            freed: q.items.iter().map(|i| i.freed).sum(),
                            bytes_after: q.bytes_after,
                        };
                        cleaner
                            .record_quota(record)
                            .err()
                            .map(|e| format!("the quota's result was not recorded: {e}"))
                    } else {
                        None
                    };
                    (Some(q), error)
                }
                Err(e) => (None, Some(e.message)),
            };
        // After the quota, the loose blobs that stay are packed (off every tool call's path).
        let compacted = Some(self.compact().map_err(|e| e.message));
        Ok(Some(AutoSwept {
            age,
            quota,
            quota_error,
            compacted,
        }))
    }
}
