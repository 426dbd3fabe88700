//! `BindingCleanupPolicy`: the auto-cleanup policy as the host's settings hold it.

use napi_derive::napi;

/// The auto-cleanup policy as the host's settings hold it.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingCleanupPolicy {
    /// Whether the automatic sweep runs.
    pub enabled: bool,
    /// Idle days after which a session's snapshots are removed.
    pub max_age_days: u32,
}
