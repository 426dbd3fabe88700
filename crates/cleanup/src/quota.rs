//! The size quota: after the age rule, the oldest idle sessions go until the
//! snapshot store fits in a byte budget.
//!
//! Sizes come from the store's own inventory (`snapshot_store::Store::inventory`):
//! a session's records plus the blobs only it references, so removing a set of
//! sessions is credited exactly with the blobs no remaining session needs.
//! The same keep rules as the age sweep apply to every session: never an active
//! one, never a pinned one (e.g. a live fork's ancestors), never one an open
//! restore journal needs. Each removal goes through [`Cleaner::sweep`] with
//! [`Scope::OnlySession`], so it is as crash-safe as the age sweep; the store's
//! garbage collection then frees the blobs nothing references any more.

use std::collections::HashMap;

use snapshot_store::Store;

use crate::policy::PolicyPort;
use crate::sweep::{Cleaner, Failed, KeepReason, Kept, Scope, SweepError, SweepRequest};

/// A session the quota removes (or would remove).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaItem {
    /// The session id.
    pub session_id: String,
    /// Newest activity in its snapshot directory, ms since the Unix epoch.
    pub last_activity: u64,
    /// Bytes its removal frees, given the sessions removed before it.
    pub freed: u64,
}

/// What [`Cleaner::quota_sweep`] did or would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaReport {
    /// Whether sessions were removed (else a dry run).
    pub applied: bool,
    /// The budget in bytes.
    pub max_bytes: u64,
    /// Store size before: records, workspace indexes, referenced and unreferenced blobs.
    pub bytes_before: u64,
    /// Store size after (measured when applied, else the estimate).
    pub bytes_after: u64,
    /// Sessions removed, oldest activity first.
    pub items: Vec<QuotaItem>,
    /// Sessions the rules kept although the store is over the budget.
    pub kept: Vec<Kept>,
    /// Sessions whose removal failed.
    pub failed: Vec<Failed>,
    /// Unreferenced blobs removed by garbage collection (applied runs).
    pub blobs_removed: usize,
    /// Workspace scan states no session uses any more, removed by garbage collection
    /// (applied runs).
    pub workspaces_removed: usize,
}

impl QuotaReport {
    /// Whether the store is still over the budget.
    pub fn over_quota(&self) -> bool {
        self.bytes_after > self.max_bytes
    }
}

fn store_fault(op: &'static str, e: impl std::fmt::Display) -> SweepError {
    SweepError::Io {
        op,
        path: crate::sweep::SNAPSHOT_DIR.into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Drops a session's references; returns its record bytes plus the bytes of the
/// blobs no other remaining session references.
fn release(users: &mut HashMap<&str, usize>, s: &snapshot_store::SessionUsage) -> u64 {
    s.record_bytes + drop_refs(users, &s.referenced)
}

/// Drops one user of each blob of `referenced`; returns the bytes of those left with none.
fn drop_refs(
    users: &mut HashMap<&str, usize>,
    referenced: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    let mut freed = 0;
    for (sha, size) in referenced {
        if let Some(n) = users.get_mut(sha.as_str()) {
            *n -= 1;
            if *n == 0 {
                freed += size;
            }
        }
    }
    freed
}

/// The workspace scan states of an inventory, as sessions leave: which sessions still
/// name each, and whether the blob sweep may remove it once none does.
struct Spaces<'a> {
    /// By key: the workspace, and how many remaining sessions name it.
    by_key: HashMap<&'a str, (&'a snapshot_store::WorkspaceUsage, usize)>,
    /// Some session's scan state could not be read: no workspace is counted as going.
    unknown: bool,
    /// Written after this (ms since the Unix epoch): within the grace period, kept.
    cutoff_ms: u64,
}

impl<'a> Spaces<'a> {
    fn new(inv: &'a snapshot_store::Inventory) -> Self {
        let mut by_key: HashMap<&str, _> = inv
            .workspaces
            .iter()
            .map(|w| (w.key.as_str(), (w, 0)))
            .collect();
        for s in &inv.sessions {
            if let Some((_, n)) = s.workspace.as_deref().and_then(|k| by_key.get_mut(k)) {
                *n += 1;
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let grace = u64::try_from(snapshot_store::WORKSPACE_UNUSED_GRACE.as_millis()).unwrap_or(0);
        Spaces {
            by_key,
            unknown: inv.sessions.iter().any(|s| s.workspace_unknown),
            cutoff_ms: now.saturating_sub(grace),
        }
    }

    /// The bytes freed when workspace `w` goes: its own files and the blobs nothing else
    /// references any more (dropping its references from `users`); 0 when it stays.
    fn release(
        &self,
        users: &mut HashMap<&'a str, usize>,
        w: &'a snapshot_store::WorkspaceUsage,
    ) -> u64 {
        if self.unknown || w.last_write_ms > self.cutoff_ms {
            return 0;
        }
        w.index_bytes + drop_refs(users, &w.referenced)
    }

    /// The workspaces no session names: they go with the next blob sweep.
    fn release_unnamed(&self, users: &mut HashMap<&'a str, usize>) -> u64 {
        self.by_key
            .values()
            .filter(|(_, n)| *n == 0)
            .map(|(w, _)| self.release(users, w))
            .sum()
    }

    /// Session `s` goes: the workspace it named goes too when it was the last to name it.
    fn leave(
        &mut self,
        users: &mut HashMap<&'a str, usize>,
        s: &snapshot_store::SessionUsage,
    ) -> u64 {
        let Some((w, n)) = s.workspace.as_deref().and_then(|k| self.by_key.get_mut(k)) else {
            return 0;
        };
        *n -= 1;
        let (w, last) = (*w, *n == 0);
        if last { self.release(users, w) } else { 0 }
    }
}

impl Cleaner {
    /// Removes the oldest idle sessions of `store` (the store this cleaner sweeps)
    /// until it takes at most `max_bytes`, keeping what `req` marks active or pinned
    /// and every session with an open restore journal. `req.scope` is ignored;
    /// `req.apply` decides between a dry run and removal. `already` names sessions
    /// the same run's age sweep removes (or, in a dry run, would remove): they are
    /// counted as gone, never listed again.
    ///
    /// Fails closed: when a record cannot be read, the sizes cannot be trusted and
    /// nothing is removed.
    pub fn quota_sweep(
        &self,
        port: &dyn PolicyPort,
        store: &Store,
        max_bytes: u64,
        req: &SweepRequest,
        already: &[String],
    ) -> Result<QuotaReport, SweepError> {
        let inv = store.inventory().map_err(|e| store_fault("inventory", e))?;
        if let Some(p) = inv.problems.first() {
            return Err(store_fault(
                "inventory",
                format!("{p}; sizes are unknown, nothing removed by the size quota"),
            ));
        }
        let before = inv.total_bytes();
        let mut report = QuotaReport {
            applied: req.apply,
            max_bytes,
            bytes_before: before,
            bytes_after: before,
            items: Vec::new(),
            kept: Vec::new(),
            failed: Vec::new(),
            blobs_removed: 0,
            workspaces_removed: 0,
        };
        // Garbage collection frees the unreferenced blobs whatever is removed.
        let mut estimate = before - inv.unreferenced_bytes;
        let mut users: HashMap<&str, usize> = HashMap::new();
        for s in &inv.sessions {
            for sha in s.referenced.keys() {
                *users.entry(sha.as_str()).or_default() += 1;
            }
        }
        // A blob a workspace index references stays (garbage collection spares it).
        for w in &inv.workspaces {
            for sha in w.referenced.keys() {
                *users.entry(sha.as_str()).or_default() += 1;
            }
        }
        // A workspace's scan state goes (with the blob sweep) once no session names it and
        // it has gone unwritten for the grace period; not at all when a session's scan
        // state cannot be read.
        let mut spaces = Spaces::new(&inv);
        estimate = estimate.saturating_sub(spaces.release_unnamed(&mut users));
        let gone = |id: &str| already.iter().any(|a| a == id);
        for s in inv.sessions.iter().filter(|s| gone(&s.session_id)) {
            let freed = release(&mut users, s) + spaces.leave(&mut users, s);
            estimate = estimate.saturating_sub(freed);
        }
        let mut order: Vec<_> = inv
            .sessions
            .iter()
            .filter(|s| !gone(&s.session_id))
            .collect();
        order.sort_by(|a, b| {
            (a.last_activity_ms, &a.session_id).cmp(&(b.last_activity_ms, &b.session_id))
        });
        for s in order {
            if estimate <= max_bytes {
                break;
            }
            let keep = if req.active.contains(&s.session_id) {
                Some(KeepReason::Active)
            } else if req.pins.contains(&s.session_id) {
                Some(KeepReason::Pinned)
            } else {
                s.open_journals
                    .first()
                    .map(|op| KeepReason::OpenJournal { op: op.clone() })
            };
            if let Some(reason) = keep {
                report.kept.push(Kept {
                    session_id: s.session_id.clone(),
                    reason,
                });
                continue;
            }
            let freed = release(&mut users, s) + spaces.leave(&mut users, s);
            estimate = estimate.saturating_sub(freed);
            report.items.push(QuotaItem {
                session_id: s.session_id.clone(),
                last_activity: s.last_activity_ms,
                freed,
            });
        }
        report.bytes_after = estimate;
        if !req.apply {
            return Ok(report);
        }
        let mut removed = Vec::new();
        for item in std::mem::take(&mut report.items) {
            let mut one = SweepRequest::dry_run(Scope::OnlySession(item.session_id.clone()))
                .with_active(req.active.iter().cloned())
                .with_pins(req.pins.clone());
            one.apply = true;
            let r = self.sweep(port, &one)?;
            if r.items.iter().any(|i| i.session_id == item.session_id) {
                removed.push(item);
            }
            report.kept.extend(r.kept);
            report.failed.extend(r.failed);
        }
        report.items = removed;
        let gc = store
            .collect_garbage()
            .map_err(|e| store_fault("collect garbage", e))?;
        report.blobs_removed = gc.blobs_removed;
        report.workspaces_removed = gc.workspaces_removed;
        let after = store.inventory().map_err(|e| store_fault("inventory", e))?;
        report.bytes_after = after.total_bytes();
        Ok(report)
    }
}
