//! `BindingLastSweep`: the last recorded sweep.

use napi_derive::napi;

/// What the size quota of a recorded sweep did.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingQuotaRecord {
    /// The budget in bytes.
    pub max_bytes: f64,
    /// Sessions removed.
    pub removed: f64,
    /// Bytes freed.
    pub freed: f64,
    /// The store's size afterwards.
    pub bytes_after: f64,
}

/// The last recorded (applied) sweep.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingLastSweep {
    /// When it ran, ms since the Unix epoch.
    pub at: f64,
    /// `auto` or `manual`.
    #[napi(ts_type = "'auto' | 'manual'")]
    pub trigger: String,
    /// Session directories the age rule removed.
    pub removed: f64,
    /// Bytes they held.
    pub bytes: f64,
    /// What the size quota did, when it ran with the sweep.
    pub quota: Option<BindingQuotaRecord>,
}

/// The size quota's last run that removed sessions.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingLastQuota {
    /// When, ms since the Unix epoch.
    pub at: f64,
    /// `auto` or `manual`.
    #[napi(ts_type = "'auto' | 'manual'")]
    pub trigger: String,
    /// The budget in bytes.
    pub max_bytes: f64,
    /// The sessions removed, oldest activity first.
    pub sessions: Vec<String>,
    /// Bytes freed.
    pub freed: f64,
    /// The store's size afterwards.
    pub bytes_after: f64,
}

/// The automatic sweep's result: the age rule (when it ran), then the size quota.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingAutoSweep {
    /// The age rule (absent when it is off or ran less than a day ago).
    pub age: Option<super::BindingSweepReport>,
    /// The size quota (absent when no quota is set).
    pub quota: Option<super::BindingSweepReport>,
    /// Why the size quota could not run (the age rule's removals stand).
    pub quota_error: Option<String>,
    /// The compaction after the sweep (loose backups packed), when it ran.
    pub compacted: Option<super::BindingCompact>,
    /// Why that compaction failed, if it did.
    pub compact_error: Option<String>,
}
