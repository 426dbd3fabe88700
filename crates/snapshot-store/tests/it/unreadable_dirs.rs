//! A directory that becomes unreadable, and what the scan, the plan and the restore say
//! of it; a file restored while over the per-file cap.
//!
//! Root reads any directory, so each test about permissions runs this test binary again
//! in a child process without the capabilities that let root past file permissions
//! (`setpriv --bounding-set -dac_override,-dac_read_search`); without setpriv (and as
//! root) such a test says it is skipped.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use snapshot_store::{ScanPhase, ScanReport, ScanRequest, Session, StoreOptions};

use crate::common::Env;

const CHILD: &str = "SNAPSHOT_STORE_TEST_NO_DAC";

/// Whether this process is held to file permissions: a mode-000 directory cannot be listed.
fn permissions_apply() -> bool {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path().join("d");
    std::fs::create_dir(&d).expect("mkdir");
    chmod(&d, 0o000);
    let held = std::fs::read_dir(&d).is_err();
    chmod(&d, 0o755);
    held
}

/// Runs `body` where file permissions apply: here, or in this test alone run again under
/// `setpriv` (`name`: the test's path in this binary). `false`: it could not run.
fn without_dac(name: &str, body: impl FnOnce()) -> bool {
    if permissions_apply() {
        body();
        return true;
    }
    if std::env::var_os(CHILD).is_some() {
        panic!("the child runs with file permissions ignored");
    }
    let ok = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped {name}: running as root without setpriv");
        return false;
    }
    let exe = std::env::current_exe().expect("exe");
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-dac_override,-dac_read_search"])
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Gives a directory its permissions back when dropped (the temp dir can be removed).
struct Opened(PathBuf);

impl Drop for Opened {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

fn scan(s: &Session, phase: ScanPhase, anchor: u64, call: Option<&str>) -> ScanReport {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_string);
    s.scan(&r).expect("scan")
}

/// A shell-like tool call: scan before, mutate, scan after.
fn call(s: &Session, anchor: u64, id: &str, f: impl FnOnce()) -> ScanReport {
    scan(s, ScanPhase::Before, anchor, Some(id));
    f();
    scan(s, ScanPhase::After, anchor, Some(id))
}

fn listed(list: &[snapshot_store::NotCovered]) -> Vec<(String, String)> {
    list.iter()
        .map(|n| (n.path.display(), n.reason.clone()))
        .collect()
}

#[test]
fn changes_inside_a_directory_that_became_unreadable_are_listed_not_covered() {
    without_dac(
        "unreadable_dirs::changes_inside_a_directory_that_became_unreadable_are_listed_not_covered",
        || {
            let env = Env::new();
            env.write("src/a.txt", b"a1");
            env.write("src/b.txt", b"b1");
            env.write("open.txt", b"o1");
            let store = env.store();
            let s = env.session(&store);
            scan(&s, ScanPhase::Boundary, 1, None);
            let _g = Opened(env.p("src"));
            // `echo x > src/a.txt && rm src/b.txt && chmod 000 src` in one call.
            let r = call(&s, 2, "c", || {
                env.write("src/a.txt", b"x");
                env.remove("src/b.txt");
                chmod(&env.p("src"), 0o000);
            });
            assert!(r.deleted.is_empty() && r.modified.is_empty(), "{r:?}");
            let nc = listed(&r.not_covered);
            let paths: Vec<&str> = nc.iter().map(|(p, _)| p.as_str()).collect();
            assert_eq!(paths, ["src", "src/a.txt", "src/b.txt"], "{nc:?}");
            assert!(
                nc[0].1.contains("unreadable directory") && nc[0].1.contains("ermission denied"),
                "{nc:?}"
            );
            assert!(nc[0].1.contains("2 file(s)"), "{nc:?}");
            assert!(
                nc[1].1.contains("not checked") && nc[1].1.contains("`src`"),
                "{nc:?}"
            );
            // The preview and the rewind (the plan) name them too, with why.
            let plan = s.plan_restore(1).expect("plan");
            assert_eq!(listed(&plan.not_covered), nc);
            // Readable again: the next scan sees the changes, and the list is gone.
            chmod(&env.p("src"), 0o755);
            let r = call(&s, 3, "d", || {});
            assert!(r.not_covered.is_empty(), "{:?}", r.not_covered);
            let plan = s.plan_restore(1).expect("plan");
            assert!(plan.not_covered.is_empty(), "{:?}", plan.not_covered);
        },
    );
}

#[test]
fn a_rewind_into_an_unreadable_directory_names_the_files_it_cannot_restore() {
    without_dac(
        "unreadable_dirs::a_rewind_into_an_unreadable_directory_names_the_files_it_cannot_restore",
        || {
            let env = Env::new();
            env.write("src/a.txt", b"a1");
            env.write("open.txt", b"o1");
            let store = env.store();
            let s = env.session(&store);
            scan(&s, ScanPhase::Boundary, 1, None);
            call(&s, 2, "c1", || {
                env.write("src/a.txt", b"a2");
                env.write("src/new.txt", b"n");
                env.write("open.txt", b"o2");
            });
            let _g = Opened(env.p("src"));
            call(&s, 3, "c2", || chmod(&env.p("src"), 0o000));
            // The plan does not fail as a whole: the files in the directory are planned, the
            // preview warns they cannot be read, the restore refuses them alone.
            let plan = s.plan_restore(2).expect("plan");
            let mut planned: Vec<String> = plan.actions.iter().map(|a| a.display.clone()).collect();
            planned.sort();
            assert_eq!(planned, ["open.txt", "src/a.txt", "src/new.txt"]);
            let warned: Vec<String> = s
                .unreadable(&plan)
                .iter()
                .map(|f| f.display.clone())
                .collect();
            assert_eq!(warned, ["src/a.txt", "src/new.txt"]);
            let out = s.restore(&plan, "op-1").expect("restore");
            let mut failed: Vec<(String, String)> = out
                .failed
                .iter()
                .map(|f| (f.display.clone(), f.error.clone()))
                .collect();
            failed.sort();
            assert_eq!(failed.len(), 2, "{failed:?}");
            assert_eq!(failed[0].0, "src/a.txt");
            assert!(failed[0].1.contains("ermission denied"), "{failed:?}");
            assert_eq!(failed[1].0, "src/new.txt");
            assert_eq!(
                out.written.iter().map(|p| p.display()).collect::<Vec<_>>(),
                ["open.txt"]
            );
            assert_eq!(env.read("open.txt").as_deref(), Some(&b"o1"[..]));
            chmod(&env.p("src"), 0o755);
            assert_eq!(
                env.read("src/a.txt").as_deref(),
                Some(&b"a2"[..]),
                "left as it is"
            );
        },
    );
}

#[test]
fn an_unreadable_workspace_lists_every_file_it_holds_and_names_what_a_rewind_cannot_restore() {
    without_dac(
        "unreadable_dirs::an_unreadable_workspace_lists_every_file_it_holds_and_names_what_a_rewind_cannot_restore",
        || {
            let env = Env::new();
            env.write("x.txt", b"x1");
            env.write("y.txt", b"y1");
            let store = env.store();
            let s = env.session(&store);
            scan(&s, ScanPhase::Boundary, 1, None);
            call(&s, 2, "c1", || env.write("x.txt", b"x2"));
            let _g = Opened(env.cwd.clone());
            let r = call(&s, 3, "c2", || chmod(&env.cwd, 0o000));
            let nc = listed(&r.not_covered);
            let paths: Vec<&str> = nc.iter().map(|(p, _)| p.as_str()).collect();
            assert_eq!(paths, ["x.txt", "y.txt"], "{nc:?}");
            assert!(
                nc[0].1.contains("the workspace directory cannot be read"),
                "{nc:?}"
            );
            let plan = s.plan_restore(2).expect("plan");
            // x.txt is planned (and fails alone); y.txt is not covered.
            assert_eq!(
                plan.actions
                    .iter()
                    .map(|a| a.display.clone())
                    .collect::<Vec<_>>(),
                ["x.txt"]
            );
            assert_eq!(
                listed(&plan.not_covered)
                    .into_iter()
                    .map(|(p, _)| p)
                    .collect::<Vec<_>>(),
                ["y.txt"]
            );
            assert_eq!(s.unreadable(&plan).len(), 1);
            let out = s.restore(&plan, "op-1").expect("restore");
            assert_eq!(out.failed.len(), 1, "{:?}", out.failed);
            assert_eq!(out.failed[0].display, "x.txt");
            assert!(out.written.is_empty());
        },
    );
}

#[test]
fn a_file_restored_while_over_the_per_file_cap_is_not_listed_as_not_covered() {
    let env = Env::new();
    env.write("big.txt", b"small at first");
    env.write("other.bin", &vec![1u8; 5000]);
    let store = env.store_with(StoreOptions {
        max_file_bytes: 4096,
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    call(&s, 2, "c", || env.write("big.txt", &vec![7u8; 5000]));
    let plan = s.plan_restore(2).expect("plan");
    assert_eq!(
        plan.actions
            .iter()
            .map(|a| a.display.clone())
            .collect::<Vec<_>>(),
        ["big.txt"]
    );
    // Restored, so not "not covered"; a file over the cap the rewind leaves still is.
    let nc = listed(&plan.not_covered);
    assert_eq!(nc.len(), 1, "{nc:?}");
    assert_eq!(nc[0].0, "other.bin");
    assert!(nc[0].1.contains("per-file cap"), "{nc:?}");
    let out = s.restore(&plan, "op-1").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_eq!(env.read("big.txt").as_deref(), Some(&b"small at first"[..]));
}
