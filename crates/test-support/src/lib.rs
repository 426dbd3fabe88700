//! The SIGKILL crash harness shared by the crash tests of the dsh-prompt-rewind
//! crates (a dev-dependency only; never published), and what their model-based
//! tests share ([`model`]), and real git repositories for the git tests ([`git`]).
//!
//! A crash test runs its own test binary again as a child process, naming a
//! crash point (and which hit of it) in the environment. The child installs the
//! crate's crash seam with a [`CrashTarget`]; when the seam reaches the point,
//! the child announces it on stdout and waits. The parent ([`CrashChild::run`])
//! reads that line, kills the child with SIGKILL — no destructor, no flush, no
//! `atexit` runs, exactly like a power cut of the process — and then checks the
//! state on disk. [`each_point`] and [`each_hit`] iterate over every point (and
//! every hit of a point that recurs) and fail a test that killed nothing, so a
//! renamed point or a child that stopped reaching it cannot pass silently.
//!
//! ```no_run
//! use rewind_test_support::{CrashChild, CrashTarget, each_point};
//!
//! /// The child's entry point: a no-op in a normal test run.
//! #[test]
//! fn child_main() {
//!     let Some(target) = CrashTarget::from_env() else { return };
//!     // ... open the store with a seam calling `target.reached(step_name)`, then write ...
//! #   let _ = target;
//! }
//!
//! #[test]
//! fn killed_writer_leaves_old_or_new_file() {
//!     each_point(["temp-created", "renamed"], |point| {
//!         let outcome = CrashChild::new("child_main").run(point, 0);
//!         assert!(outcome.killed(), "{point} reached");
//!         // ... check what is on disk ...
//!     });
//! }
//! ```

pub mod git;
pub mod model;

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Environment variable naming the crash point the child stops at.
pub const POINT_ENV: &str = "REWIND_CRASH_POINT";
/// Environment variable naming which hit of the point (0 = the first) the child stops at.
pub const HIT_ENV: &str = "REWIND_CRASH_HIT";
/// Start of the line the child prints when it reached the point.
pub const REACHED: &str = "@@crash-point";

/// The child's side: the crash point it stops at.
#[derive(Debug)]
pub struct CrashTarget {
    point: String,
    hit: usize,
    seen: AtomicUsize,
}

impl CrashTarget {
    /// The point named by the environment ([`POINT_ENV`], [`HIT_ENV`]); `None`
    /// when the process is not a crash child.
    pub fn from_env() -> Option<Self> {
        let point = std::env::var(POINT_ENV).ok()?;
        let hit = match std::env::var(HIT_ENV) {
            Ok(h) => h.parse().expect("REWIND_CRASH_HIT is a number"),
            Err(_) => 0,
        };
        Some(Self::new(point, hit))
    }

    /// Stops at hit `hit` (0 = the first) of `point`.
    pub fn new(point: impl Into<String>, hit: usize) -> Self {
        Self {
            point: point.into(),
            hit,
            seen: AtomicUsize::new(0),
        }
    }

    /// The point's name.
    pub fn point(&self) -> &str {
        &self.point
    }

    /// Called by the seam at every crash point: at the target's hit, announces
    /// it on stdout and waits to be killed (never returns).
    pub fn reached(&self, point: &str) {
        if point == self.point && self.seen.fetch_add(1, Ordering::SeqCst) == self.hit {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "\n{REACHED} {point} {}", self.hit);
            let _ = out.flush();
            drop(out);
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}

/// How a child run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The child reached the point and was killed there.
    Killed,
    /// The child ran to its end without reaching the point (it succeeded).
    Finished,
}

impl Outcome {
    /// Whether the child was killed at the point.
    pub fn killed(&self) -> bool {
        *self == Outcome::Killed
    }
}

/// The parent's side: runs one test of this test binary as a crash child.
#[derive(Debug)]
pub struct CrashChild {
    test: String,
    ignored: bool,
    env: Vec<(String, std::ffi::OsString)>,
}

impl CrashChild {
    /// The child runs the test named `test` (its full path inside the binary,
    /// matched exactly) of the current test binary.
    pub fn new(test: &str) -> Self {
        Self {
            test: test.to_owned(),
            ignored: false,
            env: Vec::new(),
        }
    }

    /// The child test is `#[ignore]`d (so a normal run skips it).
    pub fn ignored(mut self) -> Self {
        self.ignored = true;
        self
    }

    /// Passes an environment variable to the child.
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.env.push((key.to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Runs the child, stopping at hit `hit` of `point`: [`Outcome::Killed`]
    /// once it was SIGKILLed there, [`Outcome::Finished`] when it ended without
    /// reaching it. Panics when the child fails, or announces another point.
    pub fn run(&self, point: &str, hit: usize) -> Outcome {
        let exe = std::env::current_exe().expect("current test binary");
        let mut cmd = Command::new(exe);
        cmd.args([
            self.test.as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ]);
        if self.ignored {
            cmd.arg("--ignored");
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .env(POINT_ENV, point)
            .env(HIT_ENV, hit.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the crash child");
        let stdout = child.stdout.take().expect("child stdout");
        let mut announced = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("child stdout line");
            if let Some(rest) = line.strip_prefix(REACHED) {
                announced = Some(rest.trim().to_owned());
                break;
            }
        }
        if let Some(announced) = announced {
            child.kill().expect("SIGKILL the child");
            let status = child.wait().expect("wait for the child");
            assert!(
                !status.success(),
                "{point}#{hit}: the killed child succeeded"
            );
            assert_eq!(
                announced,
                format!("{point} {hit}"),
                "the child stopped at another point"
            );
            // Seen with `--nocapture`: which cases a crash test really killed.
            eprintln!("{REACHED} killed: {point} {hit}");
            return Outcome::Killed;
        }
        let out = child.wait_with_output().expect("wait for the child");
        assert!(
            out.status.success(),
            "{point}#{hit}: the child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Outcome::Finished
    }
}

/// Runs `case` for every point; returns how many there were. Panics when there
/// were none (a test that runs zero crash cases proves nothing).
pub fn each_point<P>(points: impl IntoIterator<Item = P>, mut case: impl FnMut(P)) -> usize {
    let mut n = 0;
    for p in points {
        case(p);
        n += 1;
    }
    assert!(n > 0, "no crash points to test");
    n
}

/// Runs `case` for hit 0, 1, 2, … of `point` until it returns `false` (the
/// child no longer reached that hit); returns how many hits were killed.
/// Panics when not even the first hit was reached, and after 100 hits.
pub fn each_hit(point: &str, mut case: impl FnMut(usize) -> bool) -> usize {
    let mut hit = 0;
    while case(hit) {
        hit += 1;
        assert!(hit < 100, "{point}: runaway");
    }
    assert!(hit > 0, "crash point {point} was never reached");
    hit
}

/// The case count of a property test: `PROPTEST_CASES` when set (the documented long runs),
/// else `default` (the test command's small run).
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child of the tests below: stops at the second hit of `b`.
    #[test]
    fn child() {
        let Some(target) = CrashTarget::from_env() else {
            return;
        };
        for p in ["a", "b", "a", "b", "b"] {
            target.reached(p);
        }
    }

    #[test]
    fn a_child_is_killed_at_the_named_hit() {
        let child = CrashChild::new("tests::child");
        assert_eq!(child.run("b", 0), Outcome::Killed);
        assert_eq!(child.run("b", 2), Outcome::Killed);
        assert_eq!(child.run("b", 3), Outcome::Finished);
        assert_eq!(child.run("nowhere", 0), Outcome::Finished);
    }

    #[test]
    fn every_hit_is_visited_and_zero_is_a_failure() {
        let child = CrashChild::new("tests::child");
        assert_eq!(each_hit("a", |hit| child.run("a", hit).killed()), 2);
        let none = std::panic::catch_unwind(|| each_hit("x", |_| false));
        assert!(none.is_err());
        assert_eq!(each_point(["a", "b"], |_| {}), 2);
        let empty = std::panic::catch_unwind(|| each_point(Vec::<&str>::new(), |_| {}));
        assert!(empty.is_err());
    }

    #[test]
    fn a_target_ignores_other_points() {
        let t = CrashTarget::new("p", 5);
        t.reached("q");
        t.reached("p"); // hit 0 of 5: goes on
        assert_eq!(t.point(), "p");
    }
}
