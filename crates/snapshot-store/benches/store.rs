//! Benchmarks of the snapshot store (written below).
fn main() {}
