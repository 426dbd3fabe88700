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

/// `2026-11-30 15:20 UTC` from ms since the Unix epoch: the time as messages show it.
pub fn utc_minute(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn milliseconds_since_the_epoch() {
        assert_eq!(
            ms_since_epoch(UNIX_EPOCH + Duration::from_millis(1234)),
            1234
        );
        assert_eq!(ms_since_epoch(UNIX_EPOCH - Duration::from_secs(1)), 0);
        let now = system_clock()();
        assert!(now > 1_600_000_000_000, "{now}");
    }

    #[test]
    fn times_are_civil_utc() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_minute(1_764_516_000_000), "2025-11-30 15:20 UTC");
        assert_eq!(utc_minute(951_782_400_000), "2000-02-29 00:00 UTC");
        assert_eq!(utc_minute(1_796_411_841_268), "2026-12-04 19:17 UTC");
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
