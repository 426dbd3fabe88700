//! Integration tests of `snapshot-store` (one test binary).

mod basic;
mod common;
mod crash;
mod diff;
mod faults;
mod git;
mod git_baseline;
mod git_sweep;
mod hostile;
mod index_delta;
mod log_compat;
mod migrate;
mod model;
mod pack;
mod prepared;
mod repair;
mod scan;
mod scan_model;
mod scan_watch;
mod undo;
mod unreadable_dirs;
