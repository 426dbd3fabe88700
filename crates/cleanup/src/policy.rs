//! The auto-cleanup policy and the port it is read and written through.

use std::sync::Mutex;

/// Idle-day cutoff used when none is configured.
pub const DEFAULT_MAX_AGE_DAYS: u32 = 30;
/// Smallest accepted idle-day cutoff.
pub const MIN_MAX_AGE_DAYS: u32 = 1;
/// Largest accepted idle-day cutoff (about ten years).
pub const MAX_MAX_AGE_DAYS: u32 = 3650;

/// The size quota of the whole snapshot store used when none is configured: 4 GiB. The
/// quota is on by default and independent of [`Policy::enabled`] (which governs only the
/// age rule): a fresh install enforces it with no setting changed.
pub const DEFAULT_MAX_SIZE_BYTES: u64 = 4 << 30;

/// The auto-cleanup policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Whether the automatic age rule runs (off by default). Manual runs work either way,
    /// and the size quota ([`DEFAULT_MAX_SIZE_BYTES`]) does not depend on it.
    pub enabled: bool,
    /// Sessions idle longer than this many days are swept.
    pub max_age_days: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            enabled: false,
            max_age_days: DEFAULT_MAX_AGE_DAYS,
        }
    }
}

impl Policy {
    /// Checks the idle-day cutoff is within
    /// [`MIN_MAX_AGE_DAYS`]`..=`[`MAX_MAX_AGE_DAYS`].
    pub fn validate(&self) -> Result<(), PolicyError> {
        if (MIN_MAX_AGE_DAYS..=MAX_MAX_AGE_DAYS).contains(&self.max_age_days) {
            Ok(())
        } else {
            Err(PolicyError::InvalidMaxAge {
                days: u64::from(self.max_age_days),
            })
        }
    }
}

/// Reading or writing the policy failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// There is no settings backend; the policy fails closed.
    #[error("snapshot cleanup policy unavailable: {reason}")]
    Unavailable {
        /// Why (for the user).
        reason: String,
    },
    /// The idle-day cutoff is out of range.
    #[error("idle-day cutoff {days} is outside {MIN_MAX_AGE_DAYS}..={MAX_MAX_AGE_DAYS}")]
    InvalidMaxAge {
        /// The rejected value.
        days: u64,
    },
    /// The settings backend failed.
    #[error("settings backend failed: {message}")]
    Backend {
        /// The backend's message.
        message: String,
    },
}

impl PolicyError {
    /// The stable error code (`rewind/bad-request` for a bad value, `rewind/failed` otherwise).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidMaxAge { .. } => "rewind/bad-request",
            Self::Unavailable { .. } | Self::Backend { .. } => "rewind/failed",
        }
    }
}

/// Where the policy lives. The host implements it over its settings
/// (in DSH: the plugin's settings namespace).
pub trait PolicyPort: Send + Sync {
    /// Reads the current policy.
    fn load(&self) -> Result<Policy, PolicyError>;
    /// Writes the policy (already validated).
    fn save(&self, policy: &Policy) -> Result<(), PolicyError>;
}

/// The port used when the host has no settings backend: every read and write
/// reports [`PolicyError::Unavailable`], so no sweep deletes anything.
#[derive(Clone, Debug)]
pub struct NoBackend {
    /// The reason reported.
    pub reason: String,
}

impl Default for NoBackend {
    fn default() -> Self {
        Self {
            reason: "no settings backend".into(),
        }
    }
}

impl PolicyPort for NoBackend {
    fn load(&self) -> Result<Policy, PolicyError> {
        Err(PolicyError::Unavailable {
            reason: self.reason.clone(),
        })
    }
    fn save(&self, _: &Policy) -> Result<(), PolicyError> {
        Err(PolicyError::Unavailable {
            reason: self.reason.clone(),
        })
    }
}

/// A port holding the policy in memory (for hosts that read their settings
/// themselves and pass the values in, and for tests).
#[derive(Debug, Default)]
pub struct MemoryPolicy(Mutex<Policy>);

impl MemoryPolicy {
    /// A port holding `policy`.
    pub fn new(policy: Policy) -> Self {
        Self(Mutex::new(policy))
    }
}

impl PolicyPort for MemoryPolicy {
    fn load(&self) -> Result<Policy, PolicyError> {
        Ok(*self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
    fn save(&self, policy: &Policy) -> Result<(), PolicyError> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = *policy;
        Ok(())
    }
}

/// The policy as the `show` command reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyStatus {
    /// The policy was read.
    Available(Policy),
    /// No backend, or the backend failed; nothing will be swept.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// Reads the policy for display; a failing or missing backend reads as
/// [`PolicyStatus::Unavailable`].
pub fn policy_status(port: &dyn PolicyPort) -> PolicyStatus {
    match port.load().and_then(|p| p.validate().map(|()| p)) {
        Ok(p) => PolicyStatus::Available(p),
        Err(e) => PolicyStatus::Unavailable {
            reason: e.to_string(),
        },
    }
}

/// Loads a policy and checks it (a stored out-of-range cutoff fails closed).
pub fn load_policy(port: &dyn PolicyPort) -> Result<Policy, PolicyError> {
    let p = port.load()?;
    p.validate()?;
    Ok(p)
}

/// Turns the automatic sweep on or off; returns the policy written.
pub fn set_enabled(port: &dyn PolicyPort, enabled: bool) -> Result<Policy, PolicyError> {
    let mut p = port.load()?;
    p.enabled = enabled;
    if p.validate().is_err() {
        p.max_age_days = DEFAULT_MAX_AGE_DAYS;
    }
    port.save(&p)?;
    Ok(p)
}

/// Sets the idle-day cutoff (validated first); returns the policy written.
pub fn set_max_age_days(port: &dyn PolicyPort, days: u32) -> Result<Policy, PolicyError> {
    let candidate = Policy {
        enabled: false,
        max_age_days: days,
    };
    candidate.validate()?;
    let mut p = port.load()?;
    p.max_age_days = days;
    port.save(&p)?;
    Ok(p)
}
