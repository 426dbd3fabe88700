//! The auto-cleanup's coordination: a sweep of idle sessions, then the store's garbage
//! collection of the backups only they referenced, the size quota after the age rule, the
//! last-sweep record, and the engine's handles of swept sessions dropped.

use rewind_cleanup::{
    AutoSweep, Cleaner, Pins, PolicyPort, QuotaRecord, QuotaReport, Scope, SweepReport,
    SweepRequest,
};

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
    /// The age rule.
    pub age: Swept,
    /// The size quota (with a budget), and why it did not run or was not recorded.
    pub quota: Option<QuotaReport>,
    /// Why the quota failed or its result was not recorded, if so.
    pub quota_error: Option<String>,
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

    /// The size quota: the oldest idle sessions removed until the store takes at most
    /// `max_bytes` (a dry run unless `request` applies it); `already` names the sessions the
    /// same run's age sweep removes.
    pub fn quota_sweep(
        &self,
        policy: &dyn PolicyPort,
        max_bytes: u64,
        request: &SweepRequest,
        already: &[String],
    ) -> Result<QuotaReport, EngineError> {
        let cleaner = self.cleaner()?;
        let report = self.with_store(|store| {
            cleaner
                .quota_sweep(policy, store, max_bytes, request, already)
                .map_err(EngineError::from)
        })??;
        if report.applied {
            for item in &report.items {
                self.forget(&item.session_id);
            }
        }
        Ok(report)
    }

    /// The automatic sweep: when the policy is enabled and the last sweep is a day old, the
    /// age rule (applied), the freed backups, then — with a budget (`max_bytes` non-zero) —
    /// the size quota, whose result joins the last-sweep record. `None` when it did not run.
    pub fn auto_sweep(
        &self,
        policy: &dyn PolicyPort,
        active: &[String],
        max_bytes: u64,
    ) -> Result<Option<AutoSwept>, EngineError> {
        let cleaner = self.cleaner()?;
        let AutoSweep::Ran { report, .. } = cleaner.auto_sweep(policy, active, &Pins::none())?
        else {
            return Ok(None);
        };
        let removed: Vec<String> = report.items.iter().map(|i| i.session_id.clone()).collect();
        let blobs_not_freed = self.after_removal(&removed);
        let age = Swept {
            report,
            blobs_not_freed,
        };
        if max_bytes == 0 {
            return Ok(Some(AutoSwept {
                age,
                quota: None,
                quota_error: None,
            }));
        }
        let request = SweepRequest::dry_run(Scope::Idle)
            .with_active(active.iter().cloned())
            .applied();
        let (quota, quota_error) = match self.quota_sweep(policy, max_bytes, &request, &removed) {
            Ok(q) => {
                let record = QuotaRecord {
                    max_bytes,
                    removed: q.items.len() as u64,
                    freed: q.items.iter().map(|i| i.freed).sum(),
                    bytes_after: q.bytes_after,
                };
                let error = cleaner
                    .record_quota(record)
                    .err()
                    .map(|e| format!("the quota's result was not recorded: {e}"));
                (Some(q), error)
            }
            Err(e) => (None, Some(e.message)),
        };
        Ok(Some(AutoSwept {
            age,
            quota,
            quota_error,
        }))
    }
}
