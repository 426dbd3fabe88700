//! Durable-write plumbing shared by the dsh-prompt-rewind crates: one
//! definition each of the atomic file replace, the directory sync, the
//! per-process and OS file locks, the millisecond clock and the crash seam.
//!
//! Everything works on `cap-std` [`Dir`](cap_std::fs::Dir) handles with
//! names relative to them; no ambient path enters here. The crate knows
//! neither napi nor DSH.
//!
//! ```
//! use cap_std::{ambient_authority, fs::Dir};
//! use rewind_durable::{Step, lock_exclusive, write_atomic};
//!
//! let tmp = tempfile::tempdir()?;
//! let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority())?;
//! let _lock = lock_exclusive(&dir, ".lock")?; // held until dropped
//! let mut steps = Vec::new();
//! write_atomic(&dir, "state.json", "state.json.tmp-", b"{}", &mut |s| steps.push(s))?;
//! assert_eq!(dir.read("state.json")?, b"{}");
//! assert_eq!(steps, Step::ALL);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod atomic;
mod clock;
mod lock;

pub use atomic::{
    AtomicOp, AtomicWriteError, Step, remove_temps, rename_aside, sync_dir, unique_suffix,
    write_atomic,
};
pub use clock::{Clock, CrashSeam, ms_since_epoch, system_clock, utc_minute};
pub use lock::{FileLock, LockError, lock_exclusive, process_lock};
