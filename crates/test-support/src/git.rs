//! Real git repositories for tests: the `git` command line, run with a fixed identity and
//! no user or system configuration, so a test reads the same on every machine.

use std::path::Path;
use std::process::Command;

/// Runs `git <args>` in `dir` and returns its standard output, trimmed; panics, with git's
/// standard error, when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_out(dir, args).trim().to_owned()
}

/// [`git`] with its standard output as git wrote it (not trimmed).
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
