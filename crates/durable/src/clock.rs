//! The injectable clock and crash seam.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A clock returning milliseconds since the Unix epoch (tests inject a fixed one).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A hook called after each step `S` of a durable operation (tests use it to
/// kill the process there; see the `rewind-test-support` crate).
pub type CrashSeam<S> = Arc<dyn Fn(S) + Send + Sync>;

/// Milliseconds since the Unix epoch of `t` (0 for a time before it).
pub fn ms_since_epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The system clock, milliseconds since the Unix epoch.
pub fn system_clock() -> Clock {
    Arc::new(|| ms_since_epoch(SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn milliseconds_since_the_epoch() {
        assert_eq!(ms_since_epoch(UNIX_EPOCH + Duration::from_millis(1234)), 1234);
        assert_eq!(ms_since_epoch(UNIX_EPOCH - Duration::from_secs(1)), 0);
        let now = system_clock()();
        assert!(now > 1_600_000_000_000, "{now}");
    }

    #[test]
    fn a_seam_sees_each_step() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let seam: CrashSeam<u8> = Arc::new(move |n| s.lock().unwrap().push(n));
        seam(1);
        seam(2);
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
    }
}
