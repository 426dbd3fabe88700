//! Dry-run, apply and automatic sweeps.
//! (The example of the crate README.)

use rewind_cleanup::{Cleaner, MemoryPolicy, Pins, Policy, Scope, SweepRequest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = tempfile::tempdir()?; // or <dsh home>
    let cleaner = Cleaner::open(home.path())?; // sweeps <home>/rewind-snapshots
    let policy = MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: 30,
    });

    // Dry run: what would go, and how many bytes.
    let request = SweepRequest::dry_run(Scope::Idle)
        .with_active(["live-session"])
        .with_pins(Pins::from_iter(["session-with-open-restore"]));
    let report = cleaner.sweep(&policy, &request)?;
    println!("{} sessions, {} bytes", report.items.len(), report.bytes);

    // Delete.
    cleaner.sweep(&policy, &request.clone().applied())?;

    // The automatic sweep: only when enabled, at most once a day.
    cleaner.auto_sweep(&policy, &["live-session".to_string()], &Pins::none())?;
    Ok(())
}
