//! Cleanup bindings (async: a sweep walks and deletes directories).

use napi::bindgen_prelude::{AsyncTask, Env};
use napi_derive::napi;
use std::path::PathBuf;
use std::sync::Arc;

use rewind_cleanup::{
    KeepReason, MemoryPolicy, NoBackend, Policy, PolicyPort, QuotaReport, Scope, SweepRequest,
};
use rewind_engine::{Engine, EngineOptions};

use crate::error::BindingError;
use crate::task::Job;
use crate::types::{
    BindingAutoSweep, BindingCleanupPolicy, BindingCompact, BindingLastQuota, BindingLastSweep,
    BindingQuotaRecord, BindingSkippedPath, BindingStorage, BindingStorageSession,
    BindingSweepItem, BindingSweepReport,
};

/// The snapshot auto-cleanup of one DSH home. The policy comes from the host's settings on every
/// call; `null` means the host has no settings backend, and then every sweep refuses (fails closed).
#[napi]
pub struct BindingCleanup {
    engine: Arc<Engine>,
}

impl BindingCleanup {
    /// The cleanup of `engine`'s home and store (the sweeps forget the handles of the sessions
    /// they remove).
    pub(crate) fn of(engine: Arc<Engine>) -> Self {
        Self { engine }
    }
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

/// The sessions a sweep (by age or by size) kept, with why.
fn kept(kept: &[rewind_cleanup::Kept]) -> Vec<BindingSkippedPath> {
    kept.iter()
        .map(|k| BindingSkippedPath {
            path: k.session_id.clone(),
            reason: keep_reason(&k.reason),
        })
        .collect()
}

/// The sessions a sweep could not remove, with why.
fn failed(failed: Vec<rewind_cleanup::Failed>) -> Vec<BindingSkippedPath> {
    failed
        .into_iter()
        .map(|f| BindingSkippedPath {
            path: f.session_id,
            reason: f.detail,
        })
        .collect()
}

/// A sweep and the garbage collection after it: backups that were not freed are listed.
fn swept(s: rewind_engine::Swept) -> BindingSweepReport {
    let mut r = report(s.report);
    if let Some(reason) = s.blobs_not_freed {
        r.failed.push(BindingSkippedPath {
            path: "blobs".into(),
            reason: format!("unreferenced backups were not freed: {reason}"),
        });
    }
    r
}

fn quota_report(q: QuotaReport) -> BindingSweepReport {
    BindingSweepReport {
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
        kept: kept(&q.kept),
        failed: failed(q.failed),
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
        kept: kept(&r.kept),
        failed: failed(r.failed),
    }
}

/// The binding of the engine's storage figures.
fn storage(s: rewind_engine::Storage) -> BindingStorage {
    let ratio = s.ratio();
    BindingStorage {
        total_bytes: s.total_bytes as f64,
        unreferenced_bytes: s.unreferenced_bytes as f64,
        sessions: u32::try_from(s.sessions).unwrap_or(u32::MAX),
        workspace_bytes: s.workspace_bytes as f64,
        workspace_shared_bytes: s.workspace_shared_bytes as f64,
        workspace_sessions: u32::try_from(s.workspace_sessions).unwrap_or(u32::MAX),
        biggest: s
            .biggest
            .into_iter()
            .map(|b| BindingStorageSession {
                session_id: b.session_id,
                bytes: b.bytes as f64,
                own_bytes: b.own_bytes as f64,
                last_activity: b.last_activity_ms as f64,
                in_workspace: b.in_workspace,
            })
            .collect(),
        problems: u32::try_from(s.problems).unwrap_or(u32::MAX),
        ratio,
        logical_bytes: s.logical_bytes as f64,
        disk_bytes: s.disk_bytes as f64,
        workspace_logical_bytes: s.workspace_logical_bytes as f64,
        workspace_disk_bytes: s.workspace_disk_bytes as f64,
        packed_blobs: u32::try_from(s.packed_blobs).unwrap_or(u32::MAX),
    }
}

fn compact_report(c: snapshot_store::CompactReport) -> BindingCompact {
    BindingCompact {
        blobs_packed: c.blobs_packed as f64,
        bytes_packed: c.bytes_packed as f64,
        packs_written: u32::try_from(c.packs_written).unwrap_or(u32::MAX),
        pack_bytes: c.pack_bytes as f64,
    }
}

#[napi]
impl BindingCleanup {
    /// The cleanup of `dsh_home` (where the last-sweep record lives) over the snapshot store at
    /// `store_root`. Opening touches nothing. (The plugin takes its cleanup from
    /// `BindingEngine.cleanup()`, sharing the engine's session handles.)
    #[napi(factory)]
    pub fn open(dsh_home: String, store_root: String) -> Self {
        let home = PathBuf::from(dsh_home);
        Self::of(Engine::open_at(
            PathBuf::from(store_root),
            home.join(rewind_engine::HISTORY_DIR),
            EngineOptions::default(),
        ))
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
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || {
            let scope = match only_session {
                Some(id) => Scope::OnlySession(id),
                None => Scope::Idle,
            };
            let mut request = SweepRequest::dry_run(scope).with_active(active);
            if apply {
                request = request.applied();
            }
            Ok(swept(engine.sweep(port(policy).as_ref(), &request)?))
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
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || {
            let max = crate::types::seq_from_js(max_bytes, "maxBytes")?;
            let mut request = SweepRequest::dry_run(Scope::Idle).with_active(active);
            if apply {
                request = request.applied();
            }
            Ok(quota_report(engine.quota_sweep(
                port(policy).as_ref(),
                max,
                &request,
                &already,
            )?))
        }))
    }

    /// The last recorded sweep (with what its size quota did), `null` when none.
    #[napi(ts_return_type = "Promise<BindingLastSweep | null>")]
    pub fn last_sweep(&self) -> AsyncTask<Job<Option<BindingLastSweep>>> {
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || {
            Ok(engine.cleaner()?.last_sweep()?.map(|l| BindingLastSweep {
                at: l.at as f64,
                trigger: match l.trigger {
                    rewind_cleanup::Trigger::Auto => "auto".into(),
                    rewind_cleanup::Trigger::Manual => "manual".into(),
                },
                removed: l.removed as f64,
                bytes: l.bytes as f64,
                quota: l.quota.map(|q| BindingQuotaRecord {
                    max_bytes: q.max_bytes as f64,
                    removed: q.removed as f64,
                    freed: q.freed as f64,
                    bytes_after: q.bytes_after as f64,
                }),
            }))
        }))
    }

    /// The size quota's last run that removed sessions (when, which, what it freed), `null`
    /// when none was recorded.
    #[napi(ts_return_type = "Promise<BindingLastQuota | null>")]
    pub fn last_quota(&self) -> AsyncTask<Job<Option<BindingLastQuota>>> {
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || {
            Ok(engine.last_quota()?.map(|q| BindingLastQuota {
                at: q.at as f64,
                trigger: match q.trigger {
                    rewind_cleanup::Trigger::Auto => "auto".into(),
                    rewind_cleanup::Trigger::Manual => "manual".into(),
                },
                max_bytes: q.max_bytes as f64,
                sessions: q.sessions,
                freed: q.freed as f64,
                bytes_after: q.bytes_after as f64,
            }))
        }))
    }

    /// Packs the store's loose backups (zstd-compressed; small ones share chunks, so they stop
    /// costing a disk block each). Runs beside captures and restores; the loose copies go only
    /// once the pack and its index are durable.
    #[napi(ts_return_type = "Promise<BindingCompact>")]
    pub fn compact(&self) -> AsyncTask<Job<BindingCompact>> {
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || Ok(compact_report(engine.compact()?))))
    }

    /// How much the store takes: in all, for the workspace made of the sessions `members` and
    /// the workspace scan states of the directories `cwds` (a directory that no longer exists
    /// has none), and the `top` biggest sessions.
    #[napi(ts_return_type = "Promise<BindingStorage>")]
    pub fn storage(
        &self,
        members: Vec<String>,
        cwds: Vec<String>,
        top: u32,
    ) -> AsyncTask<Job<BindingStorage>> {
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || {
            let cwds: Vec<&std::path::Path> = cwds.iter().map(std::path::Path::new).collect();
            Ok(storage(engine.storage(&members, &cwds, top as usize)?))
        }))
    }

    /// The automatic sweep: the age rule (applied) only when the policy is enabled and the last
    /// sweep is a day old or more; then, whenever `max_bytes` is set (non-zero, whatever the
    /// age rule's switch), the size quota removes the oldest idle sessions until the store fits
    /// (never a live one, one an open journal or an undo in the history needs), and records
    /// what it removed. Resolves with both reports, or `null` when neither ran.
    #[napi(ts_return_type = "Promise<BindingAutoSweep | null>")]
    pub fn auto_sweep(
        &self,
        policy: Option<BindingCleanupPolicy>,
        active: Vec<String>,
        max_bytes: Option<f64>,
    ) -> AsyncTask<Job<Option<BindingAutoSweep>>> {
        let engine = Arc::clone(&self.engine);
        AsyncTask::new(Job::new(move || {
            let max = match max_bytes {
                Some(m) => crate::types::seq_from_js(m, "maxBytes")?,
                None => 0,
            };
            Ok(engine
                .auto_sweep(port(policy).as_ref(), &active, max)?
                .map(|a| BindingAutoSweep {
                    age: a.age.map(swept),
                    quota: a.quota.map(quota_report),
                    quota_error: a.quota_error,
                    compacted: a
                        .compacted
                        .as_ref()
                        .and_then(|c| c.clone().ok())
                        .map(compact_report),
                    compact_error: a.compacted.and_then(|c| c.err()),
                }))
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
