//! Cleanup bindings (async: a sweep walks and deletes directories).

use napi::bindgen_prelude::{AsyncTask, Env};
use napi_derive::napi;
use rewind_cleanup::{
    AutoSweep, Cleaner, KeepReason, MemoryPolicy, NoBackend, Pins, Policy, PolicyPort, Scope,
    SweepRequest,
};

use crate::error::BindingError;
use crate::task::Job;
use crate::types::{
    BindingCleanupPolicy, BindingSkippedPath, BindingSweepItem, BindingSweepReport,
};

/// The snapshot auto-cleanup of one DSH home. The policy comes from the host's settings on every
/// call; `null` means the host has no settings backend, and then every sweep refuses (fails closed).
#[napi]
pub struct BindingCleanup {
    dsh_home: String,
    store_root: String,
}

fn port(policy: Option<BindingCleanupPolicy>) -> Box<dyn PolicyPort> {
    match policy {
        Some(p) => Box::new(MemoryPolicy::new(Policy {
            enabled: p.enabled,
            max_age_days: p.max_age_days,
        })),
        None => Box::new(NoBackend {
            reason: "this host has no settings service".into(),
        }),
    }
}

fn keep_reason(reason: &KeepReason) -> String {
    match reason {
        KeepReason::Active => "active session".into(),
        KeepReason::Pinned => "pinned".into(),
        KeepReason::OpenJournal { op } => format!("an open restore journal ({op}) needs it"),
        KeepReason::UnreadableJournal { detail } => {
            format!("a restore journal is unreadable: {detail}")
        }
        KeepReason::Recent { last_activity } => {
            format!("active within the cutoff (last activity {last_activity})")
        }
        KeepReason::Unreadable { detail } => format!("unreadable: {detail}"),
    }
}

fn report(r: rewind_cleanup::SweepReport) -> BindingSweepReport {
    BindingSweepReport {
        applied: r.applied,
        bytes: r.bytes as f64,
        items: r
            .items
            .into_iter()
            .map(|i| BindingSweepItem {
                session_id: i.session_id,
                bytes: i.bytes as f64,
                files: i.files as f64,
                last_activity: i.last_activity as f64,
            })
            .collect(),
        kept: r
            .kept
            .iter()
            .map(|k| BindingSkippedPath {
                path: k.session_id.clone(),
                reason: keep_reason(&k.reason),
            })
            .collect(),
        failed: r
            .failed
            .into_iter()
            .map(|f| BindingSkippedPath {
                path: f.session_id,
                reason: f.detail,
            })
            .collect(),
    }
}

impl BindingCleanup {
    fn cleaner(&self) -> Result<Cleaner, BindingError> {
        Ok(Cleaner::open_with(&self.dsh_home, &self.store_root)?)
    }
}

/// After an applied sweep removed session directories, the backups only they referenced are
/// unreferenced blobs: the store's garbage collection frees them. A failure is reported in the
/// sweep's `failed` list (the sessions themselves are gone either way).
fn free_unreferenced_blobs(store_root: &str, report: &mut BindingSweepReport) {
    if !report.applied || report.items.is_empty() {
        return;
    }
    let freed = snapshot_store::Store::open(
        std::path::Path::new(store_root),
        snapshot_store::StoreOptions::default(),
    )
    .map_err(|e| e.to_string())
    .and_then(|store| store.collect_garbage().map_err(|e| e.to_string()));
    if let Err(reason) = freed {
        report.failed.push(BindingSkippedPath {
            path: "blobs".into(),
            reason: format!("unreferenced backups were not freed: {reason}"),
        });
    }
}

#[napi]
impl BindingCleanup {
    /// The cleanup of `dsh_home` (where the last-sweep record lives) over the snapshot store at
    /// `store_root`. Opening touches nothing.
    #[napi(factory)]
    pub fn open(dsh_home: String, store_root: String) -> Self {
        Self {
            dsh_home,
            store_root,
        }
    }

    /// Sweeps idle session directories (or only `only_session`); a dry run unless `apply`.
    /// Sessions in `active` are never removed.
    #[napi(ts_return_type = "Promise<BindingSweepReport>")]
    pub fn sweep(
        &self,
        policy: Option<BindingCleanupPolicy>,
        active: Vec<String>,
        apply: bool,
        only_session: Option<String>,
    ) -> AsyncTask<Job<BindingSweepReport>> {
        let cleaner = self.cleaner();
        let store_root = self.store_root.clone();
        AsyncTask::new(Job::new(move || {
            let cleaner = cleaner?;
            let scope = match only_session {
                Some(id) => Scope::OnlySession(id),
                None => Scope::Idle,
            };
            let mut request = SweepRequest::dry_run(scope).with_active(active);
            if apply {
                request = request.applied();
            }
            let mut swept = report(cleaner.sweep(port(policy).as_ref(), &request)?);
            free_unreferenced_blobs(&store_root, &mut swept);
            Ok(swept)
        }))
    }

    /// The size quota: after the age sweep, removes the oldest idle sessions until the store
    /// takes at most `max_bytes` (a dry run unless `apply`). Sessions in `active` and those an
    /// open restore journal needs are kept; `already` names the sessions the age sweep of the
    /// same run removes (or would remove). Items carry the bytes each removal frees; `bytes` is
    /// the store's size afterwards (measured when applied, else estimated).
    #[napi(ts_return_type = "Promise<BindingSweepReport>")]
    pub fn quota_sweep(
        &self,
        policy: Option<BindingCleanupPolicy>,
        active: Vec<String>,
        apply: bool,
        max_bytes: f64,
        already: Vec<String>,
    ) -> AsyncTask<Job<BindingSweepReport>> {
        let cleaner = self.cleaner();
        let store_root = self.store_root.clone();
        AsyncTask::new(Job::new(move || {
            let cleaner = cleaner?;
            let max = crate::types::seq_from_js(max_bytes, "maxBytes")?;
            let store = snapshot_store::Store::open(
                std::path::Path::new(&store_root),
                snapshot_store::StoreOptions::default(),
            )?;
            let mut request = SweepRequest::dry_run(Scope::Idle).with_active(active);
            if apply {
                request = request.applied();
            }
            let q = cleaner.quota_sweep(port(policy).as_ref(), &store, max, &request, &already)?;
            Ok(BindingSweepReport {
                applied: q.applied,
                bytes: q.bytes_after as f64,
                items: q
                    .items
                    .into_iter()
                    .map(|i| BindingSweepItem {
                        session_id: i.session_id,
                        bytes: i.freed as f64,
                        files: 0.0,
                        last_activity: i.last_activity as f64,
                    })
                    .collect(),
                kept: q
                    .kept
                    .iter()
                    .map(|k| BindingSkippedPath {
                        path: k.session_id.clone(),
                        reason: keep_reason(&k.reason),
                    })
                    .collect(),
                failed: q
                    .failed
                    .into_iter()
                    .map(|f| BindingSkippedPath {
                        path: f.session_id,
                        reason: f.detail,
                    })
                    .collect(),
            })
        }))
    }

    /// Epoch ms of the last recorded sweep, `null` when none.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn last_sweep(&self) -> AsyncTask<Job<Option<f64>>> {
        let cleaner = self.cleaner();
        AsyncTask::new(Job::new(move || {
            Ok(cleaner?.last_sweep()?.map(|l| l.at as f64))
        }))
    }

    /// The automatic sweep: runs (applied) only when the policy is enabled and the last sweep is
    /// a day old or more; resolves with its report, or `null` when it did not run.
    #[napi(ts_return_type = "Promise<BindingSweepReport | null>")]
    pub fn auto_sweep(
        &self,
        policy: Option<BindingCleanupPolicy>,
        active: Vec<String>,
    ) -> AsyncTask<Job<Option<BindingSweepReport>>> {
        let cleaner = self.cleaner();
        let store_root = self.store_root.clone();
        AsyncTask::new(Job::new(move || {
            Ok(
                match cleaner?.auto_sweep(port(policy).as_ref(), &active, &Pins::none())? {
                    AutoSweep::Ran { report: r, .. } => {
                        let mut swept = report(r);
                        free_unreferenced_blobs(&store_root, &mut swept);
                        Some(swept)
                    }
                    AutoSweep::Disabled | AutoSweep::NotDue { .. } => None,
                },
            )
        }))
    }
}

/// Validates an idle-day cutoff against the policy's bounds (`rewind/bad-request` otherwise).
#[napi]
pub fn check_max_age_days(env: Env, days: u32) -> napi::Result<()> {
    Policy {
        enabled: true,
        max_age_days: days,
    }
    .validate()
    .map_err(|e| BindingError::from(e).into_napi(&env))
}
