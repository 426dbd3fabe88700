//! Output into a pipe its reader closed early (`dsh-rewind history --json | head -1`): the
//! command ends quietly with its own exit code, never a panic.
//!
//! The pipe is a FIFO whose only reader is closed before the command starts, so every write
//! the command makes fails with `EPIPE`, whatever the size of its output.

#![cfg(target_os = "linux")]

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// `O_NONBLOCK` on Linux: opening the reader end of a FIFO then does not wait for a writer.
const O_NONBLOCK: i32 = 0o4000;

/// The write end of a pipe nobody reads any more.
fn closed_pipe(dir: &Path) -> File {
    let fifo = dir.join("out.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let reader = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(&fifo)
        .expect("open the reader");
    let writer = OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open the writer");
    drop(reader);
    writer
}

fn run(home: &Path, args: &[&str], stdout: Stdio) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("DSH_HOME")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("run dsh-rewind");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_output_into_a_closed_pipe_ends_quietly_with_the_command_s_own_exit_code() {
    let tmp = tempfile::tempdir().expect("tmp");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let cases: &[&[&str]] = &[
        &["history", "--json"],
        &["history"],
        &["sessions"],
        &["sessions", "--json"],
        &["restores", "--json"],
        &["du"],
        &["doctor"],
        &["doctor", "--json"],
        // An error answered as JSON on stdout.
        &["checkpoints", "no-such-session", "--json"],
    ];
    for args in cases {
        let (want, _) = run(&home, args, Stdio::piped());
        let dir = tempfile::tempdir().expect("tmp");
        let (code, stderr) = run(&home, args, Stdio::from(closed_pipe(dir.path())));
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            code, want,
            "{args:?}: the command's own exit code ({stderr})"
        );
        assert!(code != 101, "{args:?}: not a panic's exit code");
    }
}
