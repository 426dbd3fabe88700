//! What the CLI's git tests share: running `dsh-rewind` on a home, and a scan of a session.

use std::path::Path;
use std::process::Command;

use snapshot_store::{ScanPhase, ScanRequest, Session};

/// Runs `dsh-rewind --home <home> <args>`: its exit code and its output (stdout, then stderr).
pub fn run(home: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("DSH_HOME")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// One scan of session `s` (phase, anchor, call id), on one thread.
pub fn scan(s: &Session, phase: ScanPhase, anchor: u64, call: Option<&str>) {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_owned);
    r.threads = 1;
    s.scan(&r).unwrap();
}
