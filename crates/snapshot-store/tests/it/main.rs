//! Integration tests of `snapshot-store` (one test binary).

mod basic;
mod common;
mod faults;
mod hostile;
mod crash;
mod model;
