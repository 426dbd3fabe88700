//! The workspace scan on real temp trees: what each phase records, what a restore
//! brings back, ignore rules, budgets, bad input.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use snapshot_store::{
    Area, FaultSeam, FsOp, ScanError, ScanPhase, ScanReport, ScanRequest, Session, Store,
    StoreOptions,
};

use crate::common::Env;

/// Path → (bytes, executable bit) of every regular file (`.git` left out).
type Tree = BTreeMap<Vec<u8>, (Vec<u8>, bool)>;

fn tree(dir: &Path) -> Tree {
    fn walk(base: &Path, dir: &Path, out: &mut Tree) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_name() == ".git" {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                walk(base, &p, out);
            } else if m.is_file() {
                let rel = p.strip_prefix(base).expect("under base");
                let exec = m.permissions().mode() & 0o111 != 0;
                out.insert(
                    rel.as_os_str().as_bytes().to_vec(),
                    (std::fs::read(&p).expect("read"), exec),
                );
            }
        }
    }
    let mut out = Tree::new();
    walk(dir, dir, &mut out);
    out
}

/// Every directory under `dir` (relative paths).
fn dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.push(e.path().strip_prefix(dir).expect("under").to_path_buf());
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn req(phase: ScanPhase, anchor: u64, call: Option<&str>) -> ScanRequest {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_string);
    r
}

fn scan(s: &Session, phase: ScanPhase, anchor: u64, call: Option<&str>) -> ScanReport {
    s.scan(&req(phase, anchor, call)).expect("scan")
}

fn names(v: &[snapshot_store::RelPath]) -> Vec<String> {
    v.iter().map(|p| p.display()).collect()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn restore_to(s: &Session, target: u64, op: &str) -> snapshot_store::RestorePlan {
    let plan = s.plan_restore(target).expect("plan");
    let out = s.restore(&plan, op).expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    plan
}

/// A shell-like tool call: scan before, mutate, scan after.
fn call(s: &Session, anchor: u64, id: &str, f: impl FnOnce()) -> ScanReport {
    scan(s, ScanPhase::Before, anchor, Some(id));
    f();
    scan(s, ScanPhase::After, anchor, Some(id))
}

#[test]
fn every_kind_of_shell_change_comes_back_exactly() {
    let env = Env::new();
    env.write("src/a.txt", b"alpha");
    env.write("src/b.txt", b"bravo");
    env.write("bin/tool.sh", b"#!/bin/sh\necho hi\n");
    env.write("data.bin", &[0u8, 159, 146, 150, 255, 0, 1]);
    env.write("old/name.txt", b"to be renamed");
    env.write("gone/deep/x.txt", b"x");
    env.write("gone/deep/y.txt", b"y");
    let store = env.store();
    let s = env.session(&store);
    let first = scan(&s, ScanPhase::Boundary, 10, None);
    assert!(first.baseline && first.baseline_complete, "{first:?}");
    assert_eq!(first.files, 7);
    assert_eq!(first.recorded, 0);
    let at10 = tree(&env.cwd);
    let dirs10 = dirs(&env.cwd);

    let r = call(&s, 10, "bash-1", || {
        env.write("src/a.txt", b"ALPHA, edited in place");
        chmod(&env.p("bin/tool.sh"), 0o755);
        env.write("data.bin", &[1u8, 2, 3, 0, 0, 0, 254]);
        std::fs::rename(env.p("old/name.txt"), env.p("new-name.txt")).expect("mv");
        std::fs::remove_dir_all(env.p("gone")).expect("rm -rf");
        for i in 0..20 {
            env.write(
                format!("gen/d{}/e{}/f{i}.rs", i % 3, i % 2),
                format!("// {i}").as_bytes(),
            );
        }
        env.write("src/b.txt", b"bravo"); // same bytes: not a change
    });
    assert_eq!(names(&r.modified), ["data.bin", "src/a.txt"]);
    assert_eq!(names(&r.mode_changed), ["bin/tool.sh"]);
    assert_eq!(
        names(&r.deleted),
        ["gone/deep/x.txt", "gone/deep/y.txt", "old/name.txt"]
    );
    assert_eq!(r.created.len(), 21);
    assert!(names(&r.created).contains(&"new-name.txt".to_string()));
    assert_eq!(r.recorded, 2 + 1 + 3 + 21);
    assert!(r.outside.is_empty());

    let plan = restore_to(&s, 10, "op-1");
    assert!(plan.outside.is_empty());
    assert_eq!(tree(&env.cwd), at10, "bytes and executable bits");
    // The generated directories are gone; the removed ones are back.
    assert_eq!(dirs(&env.cwd), dirs10);
    // The undo puts the shell's result back.
    s.undo_restore("op-1").expect("undo");
    assert_eq!(
        env.read("src/a.txt").as_deref(),
        Some(&b"ALPHA, edited in place"[..])
    );
    assert!(env.p("gen/d0/e0/f0.rs").exists());
}

#[test]
fn a_directory_a_later_call_moves_comes_back_and_its_files_at_the_new_place_go() {
    // A directory renamed or moved in (`mv d g/h`) keeps its files' status times, older
    // than the scan before the call: they are still the call's creations, as that scan's
    // walk listed the directory that holds them now without them. A directory that comes
    // into scope as the call edits `.ignore` holds files that walk saw the name of (ignored)
    // and were there before: not created.
    let env = Env::new();
    env.write("d/c", b"c0");
    env.write("d/e/f", b"f0");
    env.write("build/o", b"an ignored build output");
    env.write(".ignore", b"build/\n");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    // A later turn, the files older than its scans' window of changes made just before.
    std::thread::sleep(std::time::Duration::from_millis(80));
    scan(&s, ScanPhase::Boundary, 2, None);
    let at2 = tree(&env.cwd);
    let r = call(&s, 2, "bash-1", || {
        std::fs::create_dir_all(env.p("g")).expect("mkdir");
        std::fs::rename(env.p("d"), env.p("g/h")).expect("mv");
        env.write(".ignore", b"# nothing ignored now\n");
    });
    assert_eq!(names(&r.created), ["g/h/c", "g/h/e/f"], "{r:?}");
    assert_eq!(names(&r.deleted), ["d/c", "d/e/f"], "{r:?}");
    assert_eq!(names(&r.modified), [".ignore"], "{r:?}");
    restore_to(&s, 2, "op");
    assert_eq!(tree(&env.cwd), at2, "d back, g/h gone, build/o kept");
    assert!(
        !env.p("g").exists(),
        "the directory the call made is removed"
    );
}

#[test]
fn a_failed_call_still_records_what_it_changed() {
    let env = Env::new();
    env.write("a.txt", b"one");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 5, None);
    scan(&s, ScanPhase::Before, 5, Some("c1"));
    env.write("a.txt", b"two, then the command failed");
    let mut r = req(ScanPhase::After, 5, Some("c1"));
    r.ok = false;
    let rep = s.scan(&r).expect("scan");
    assert_eq!(names(&rep.modified), ["a.txt"]);
    restore_to(&s, 5, "op");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"one"[..]));
}

#[test]
fn changes_between_calls_belong_to_the_turn_and_write_tool_captures_are_not_recorded_twice() {
    let env = Env::new();
    env.write("a.txt", b"a0");
    env.write("w.txt", b"w0");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 10, None);
    call(&s, 10, "bash-1", || env.write("a.txt", b"a1"));
    // A background job writes after the call returned.
    env.write("job.log", b"late output");
    env.write("a.txt", b"a2 by the job");
    // The write tool (captured through the fs intents) changes w.txt.
    s.capture_before("write-1", Path::new("w.txt"))
        .expect("capture");
    env.write("w.txt", b"w1");
    s.commit("write-1", 10, true).expect("commit");
    let before = scan(&s, ScanPhase::Before, 10, Some("bash-2"));
    assert_eq!(names(&before.created), ["job.log"]);
    assert_eq!(
        names(&before.modified),
        ["a.txt"],
        "w.txt is explained by its capture"
    );
    assert!(before.outside.is_empty());
    scan(&s, ScanPhase::After, 10, Some("bash-2"));
    restore_to(&s, 10, "op");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a0"[..]));
    assert_eq!(env.read("w.txt").as_deref(), Some(&b"w0"[..]));
    assert_eq!(env.read("job.log"), None);
}

#[test]
fn changes_outside_the_agent_are_listed_and_left_as_they_are() {
    let env = Env::new();
    env.write("agent.txt", b"v0");
    env.write("user.txt", b"mine");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 10, None);
    call(&s, 10, "bash-1", || {
        env.write("agent.txt", b"v1 by the agent")
    });
    // Between turns: the user edits a file no tool touched, and the agent's file too.
    env.write("user.txt", b"mine, edited by the user");
    env.write("agent.txt", b"v2 by the user");
    s.recheck_tracked(20).expect("recheck");
    let b = scan(&s, ScanPhase::Boundary, 20, None);
    assert_eq!(names(&b.outside), ["user.txt"]);
    assert!(b.modified.is_empty(), "tracked paths are the re-check's");
    call(&s, 20, "bash-2", || {
        env.write("agent.txt", b"v3 by the agent")
    });

    // Rewind to 10: the agent's file comes back; the user's file is listed, untouched.
    let plan = s.plan_restore(10).expect("plan");
    assert_eq!(names(&plan.outside), ["user.txt"]);
    assert!(plan.actions.iter().all(|a| a.display != "user.txt"));
    restore_to(&s, 10, "op-10");
    assert_eq!(env.read("agent.txt").as_deref(), Some(&b"v0"[..]));
    assert_eq!(
        env.read("user.txt").as_deref(),
        Some(&b"mine, edited by the user"[..])
    );
    s.undo_restore("op-10").expect("undo");
    // Rewind to 20 (the user's state at that message): nothing outside to list.
    let plan = s.plan_restore(20).expect("plan");
    assert!(plan.outside.is_empty(), "{:?}", plan.outside);
    restore_to(&s, 20, "op-20");
    assert_eq!(
        env.read("agent.txt").as_deref(),
        Some(&b"v2 by the user"[..])
    );
}

#[test]
fn a_file_written_by_the_write_tool_then_removed_by_the_shell_comes_back() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 10, None);
    s.capture_before("w1", Path::new("made.txt"))
        .expect("capture");
    env.write("made.txt", b"written by the tool");
    s.commit("w1", 10, true).expect("commit");
    call(&s, 10, "bash-1", || env.remove("made.txt"));
    s.recheck_tracked(20).expect("recheck");
    scan(&s, ScanPhase::Boundary, 20, None);
    // In a later turn the shell removes a file the tool wrote in that turn.
    s.capture_before("w2", Path::new("made.txt"))
        .expect("capture");
    env.write("made.txt", b"written again");
    s.commit("w2", 20, true).expect("commit");
    let r = call(&s, 20, "bash-2", || env.remove("made.txt"));
    assert_eq!(names(&r.deleted), ["made.txt"]);
    let plan = s.plan_restore(20).expect("plan");
    assert!(plan.actions.is_empty(), "absent at 20 and now");
    // Rewind into the turn of message 20 is exact up to the message: absent.
    // Rewind to 10: absent as well (created in turn 10).
    assert!(s.plan_restore(10).expect("plan").actions.is_empty());
    // Yet the state after the tool's write is recoverable through the undo of a rewind.
    assert_eq!(env.read("made.txt"), None);
}

#[test]
fn ignore_rules_hidden_files_and_git() {
    let env = Env::new();
    env.write(".gitignore", b"target/\n*.log\n");
    env.write(".ignore", b"scratch/\n");
    env.write(".git/info/exclude", b"local-only.txt\n");
    env.write(".git/HEAD", b"ref: refs/heads/main\n");
    env.write(".hidden/conf", b"hidden but in scope");
    env.write("target/out.o", b"ignored");
    env.write("x.log", b"ignored");
    env.write("scratch/a", b"ignored");
    env.write("local-only.txt", b"ignored by exclude");
    env.write("src/main.rs", b"fn main() {}");
    let store = env.store();
    let s = env.session(&store);
    let r = scan(&s, ScanPhase::Boundary, 1, None);
    // .gitignore, .ignore, .hidden/conf, src/main.rs (and .git/info/exclude is inside .git).
    assert_eq!(r.files, 4, "{r:?}");
    let r = call(&s, 1, "c", || {
        env.write("target/out.o", b"rebuilt");
        env.write(".git/HEAD", b"ref: refs/heads/other\n");
        env.write("y.log", b"new log");
        env.write(".hidden/conf", b"changed");
    });
    assert_eq!(names(&r.modified), [".hidden/conf"]);
    assert!(r.created.is_empty() && r.deleted.is_empty());
    // A .gitignore that ignores everything: the files leave the scope; nothing is "deleted".
    let r = call(&s, 1, "c2", || env.write(".gitignore", b"*\n"));
    assert!(r.deleted.is_empty(), "{:?}", r.deleted);
    assert_eq!(r.files, 0, "`*` ignores the ignore files too: {r:?}");
    assert!(env.p("src/main.rs").exists());
}

#[test]
fn ignore_rules_apply_outside_a_git_repository_too() {
    let env = Env::new();
    env.write(".gitignore", b"build/\n");
    env.write("build/x", b"ignored");
    env.write("keep", b"k");
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(scan(&s, ScanPhase::Boundary, 1, None).files, 2);
}

#[test]
fn budgets_are_reported_never_silent() {
    let env = Env::new();
    env.write("small.txt", b"s");
    env.write("big.bin", &vec![7u8; 5000]);
    env.write("mid1.txt", &[1u8; 600]);
    env.write("mid2.txt", &[2u8; 600]);
    let store = env.store_with(StoreOptions {
        max_file_bytes: 4096,
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    let mut r = req(ScanPhase::Boundary, 1, None);
    r.max_baseline_bytes = 1000;
    let rep = s.scan(&r).expect("scan");
    let nc: BTreeMap<String, String> = rep
        .not_covered
        .iter()
        .map(|n| (n.path.display(), n.reason.clone()))
        .collect();
    assert!(nc["big.bin"].contains("per-file cap"), "{nc:?}");
    assert!(nc["mid2.txt"].contains("baseline byte budget"), "{nc:?}");
    assert_eq!(nc.len(), 2, "{nc:?}");
    // A changed not-covered file is recorded as not restorable, and the plan says so.
    let mut before = req(ScanPhase::Before, 1, Some("c"));
    before.max_baseline_bytes = 1000;
    s.scan(&before).expect("scan");
    env.write("mid2.txt", b"short now");
    let mut after = req(ScanPhase::After, 1, Some("c"));
    after.max_baseline_bytes = 1000;
    let rep = s.scan(&after).expect("scan");
    assert_eq!(names(&rep.modified), ["mid2.txt"]);
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.uncovered.len(), 1);
    assert!(
        plan.not_covered
            .iter()
            .any(|n| n.path.display() == "big.bin")
    );
}

#[test]
fn a_workspace_over_the_file_count_limit_is_refused_early() {
    let env = Env::new();
    for i in 0..300 {
        env.write(format!("d{}/f{i}", i % 10), b"x");
    }
    let store = env.store();
    let s = env.session(&store);
    let mut r = req(ScanPhase::Boundary, 1, None);
    r.max_files = 50;
    let rep = s.scan(&r).expect("scan");
    let refused = rep.refused.expect("refused");
    assert_eq!(refused.code, "rewind/scan-budget");
    assert!(refused.message.contains("50"), "{}", refused.message);
    assert_eq!(rep.recorded, 0);
    // Nothing was stored; a scan within the limit then builds the baseline.
    assert_eq!(env.blob_count(), 0);
    let rep = scan(&s, ScanPhase::Boundary, 1, None);
    assert!(rep.refused.is_none() && rep.baseline_complete);
    assert_eq!(rep.files, 300);
}

#[test]
fn non_utf8_names_come_back() {
    let env = Env::new();
    let odd = OsStr::from_bytes(b"caf\xe9-\xff.txt");
    std::fs::write(env.cwd.join(odd), b"latin-1 name").expect("write");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let at1 = tree(&env.cwd);
    let r = call(&s, 1, "c", || {
        std::fs::remove_file(env.cwd.join(odd)).expect("rm");
        std::fs::write(env.cwd.join(OsStr::from_bytes(b"new-\xfe")), b"n").expect("write");
    });
    assert_eq!(r.deleted.len(), 1);
    assert_eq!(r.created.len(), 1);
    restore_to(&s, 1, "op");
    assert_eq!(tree(&env.cwd), at1);
}

/// A seam that fails `op` on workspace paths ending in `name` with `errno`.
struct FailPath {
    op: FsOp,
    name: &'static str,
    errno: i32,
}

impl FaultSeam for FailPath {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        if op == self.op && area == Area::Workspace && path.ends_with(self.name) {
            return Err(io::Error::from_raw_os_error(self.errno));
        }
        Ok(())
    }
}

#[test]
fn unreadable_files_are_listed_not_covered_and_the_scan_goes_on() {
    let env = Env::new();
    env.write("ok.txt", b"fine");
    env.write("secret.txt", b"no access");
    // Root ignores permission bits, so EACCES comes from the seam at the open.
    let store = env.store_with(StoreOptions {
        seam: Arc::new(FailPath {
            op: FsOp::Open,
            name: "secret.txt",
            errno: 13,
        }),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    let r = scan(&s, ScanPhase::Boundary, 1, None);
    assert_eq!(r.not_covered.len(), 1, "{:?}", r.not_covered);
    assert_eq!(r.not_covered[0].path.display(), "secret.txt");
    assert!(
        r.not_covered[0].reason.contains("ermission denied"),
        "{:?}",
        r.not_covered
    );
    let r = call(&s, 1, "c", || env.write("secret.txt", b"changed"));
    assert_eq!(names(&r.modified), ["secret.txt"]);
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.uncovered.len(), 1, "known changed, not restorable");
}

#[test]
fn an_unreadable_directory_keeps_what_the_index_knew() {
    let env = Env::new();
    env.write("locked/inner.txt", b"inside");
    env.write("open.txt", b"o");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    chmod(&env.p("locked"), 0o000);
    let readable = std::fs::read_dir(env.p("locked")).is_ok();
    if readable {
        chmod(&env.p("locked"), 0o755);
        eprintln!("skipped: running as root, a mode-000 directory stays readable");
        return;
    }
    let r = call(&s, 1, "c", || env.write("open.txt", b"o2"));
    chmod(&env.p("locked"), 0o755);
    assert!(
        r.deleted.is_empty(),
        "files under it are not deleted: {:?}",
        r.deleted
    );
    assert!(r.not_covered.iter().any(|n| n.path.display() == "locked"));
}

/// Appends to the file at its first read after each of the first `times` opens.
struct Grows {
    path: PathBuf,
    name: &'static str,
    times: AtomicUsize,
    armed: std::sync::atomic::AtomicBool,
}

impl FaultSeam for Grows {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        if area != Area::Workspace || !path.ends_with(self.name) {
            return Ok(());
        }
        if op == FsOp::Open {
            let left = self.times.load(Ordering::SeqCst);
            if left > 0 {
                self.times.store(left - 1, Ordering::SeqCst);
                self.armed.store(true, Ordering::SeqCst);
            }
        }
        if op == FsOp::Read && self.armed.swap(false, Ordering::SeqCst) {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&self.path)?;
            f.write_all(b"+")?;
        }
        Ok(())
    }
}

#[test]
fn a_file_growing_while_read_is_read_again_then_not_covered() {
    for (times, covered) in [(1usize, true), (usize::MAX, false)] {
        let env = Env::new();
        env.write("log.txt", b"start");
        let store = env.store_with(StoreOptions {
            seam: Arc::new(Grows {
                path: env.p("log.txt"),
                name: "log.txt",
                times: AtomicUsize::new(times),
                armed: Default::default(),
            }),
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        let r = scan(&s, ScanPhase::Boundary, 1, None);
        let listed = r
            .not_covered
            .iter()
            .any(|n| n.reason.contains("changed while"));
        assert_eq!(listed, !covered, "times={times}: {:?}", r.not_covered);
    }
}

/// Deletes the file when it is about to be opened (once).
struct Vanish {
    path: PathBuf,
    name: &'static str,
    done: std::sync::atomic::AtomicBool,
}

impl FaultSeam for Vanish {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        if op == FsOp::Open
            && area == Area::Workspace
            && path.ends_with(self.name)
            && !self.done.swap(true, Ordering::SeqCst)
        {
            let _ = std::fs::remove_file(&self.path);
        }
        Ok(())
    }
}

#[test]
fn a_file_vanishing_during_the_scan_is_simply_gone() {
    let env = Env::new();
    env.write("keep.txt", b"k");
    env.write("tmp.txt", b"t");
    let store = env.store_with(StoreOptions {
        seam: Arc::new(Vanish {
            path: env.p("tmp.txt"),
            name: "tmp.txt",
            done: Default::default(),
        }),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    let r = scan(&s, ScanPhase::Boundary, 1, None);
    assert!(r.not_covered.is_empty(), "{:?}", r.not_covered);
    assert!(r.baseline_complete);
    let r = call(&s, 1, "c", || env.write("tmp.txt", b"back"));
    assert_eq!(names(&r.created), ["tmp.txt"]);
}

/// Fails the `n`-th store write (counting from arming), counting workspace reads.
#[derive(Default)]
struct Interrupt {
    store_writes: AtomicUsize,
    fail_at: AtomicUsize,
    reads: Mutex<Vec<PathBuf>>,
}

impl FaultSeam for Interrupt {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        if area == Area::Workspace && op == FsOp::Open {
            self.reads.lock().expect("lock").push(path.to_path_buf());
        }
        if area == Area::Store
            && matches!(op, FsOp::Create | FsOp::Write)
            && path.starts_with("blobs")
        {
            let n = self.store_writes.fetch_add(1, Ordering::SeqCst);
            if n == self.fail_at.load(Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(28));
            }
        }
        Ok(())
    }
}

#[test]
fn an_interrupted_baseline_continues_where_it_stopped() {
    let env = Env::new();
    for i in 0..40 {
        env.write(format!("f{i:02}"), format!("content {i}").as_bytes());
    }
    // Files changed just before a scan are re-read by the next one (coarse file clocks);
    // let that window pass so only the resumption is measured.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let seam = Arc::new(Interrupt::default());
    seam.fail_at.store(25, Ordering::SeqCst);
    let store = env.store_with(StoreOptions {
        seam: seam.clone(),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    let mut r = req(ScanPhase::Boundary, 1, None);
    r.progress_batch = 10;
    r.threads = 1;
    let err = s.scan(&r).expect_err("interrupted");
    assert!(matches!(err, ScanError::Fs(_)), "{err}");
    seam.fail_at.store(usize::MAX, Ordering::SeqCst);
    seam.reads.lock().expect("lock").clear();
    let rep = s.scan(&r).expect("resumed");
    assert!(rep.baseline_complete);
    let reread = seam.reads.lock().expect("lock").len();
    // Two store checks per new small blob: the 25th fails inside the second batch of
    // 10, so the first batch was saved and only the other 30 files are read again.
    assert_eq!(reread, 30, "the saved batch is not read again");
    // And the result is a complete baseline: a change is restorable.
    let rep = call(&s, 1, "c", || env.write("f03", b"changed"));
    assert_eq!(names(&rep.modified), ["f03"]);
    restore_to(&s, 1, "op");
    assert_eq!(env.read("f03").as_deref(), Some(&b"content 3"[..]));
}

fn index_files(env: &Env) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in std::fs::read_dir(env.root.join("workspaces"))
        .expect("workspaces")
        .flatten()
    {
        v.push(d.path().join("index.bin"));
    }
    v
}

#[test]
fn a_corrupt_index_is_rebuilt_and_a_newer_one_fails_closed() {
    let env = Env::new();
    env.write("a", b"1");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let idx = index_files(&env).remove(0);
    let good = std::fs::read(&idx).expect("index");
    std::fs::write(&idx, &good[..good.len() - 7]).expect("tear");
    let r = scan(&s, ScanPhase::Boundary, 2, None);
    assert!(r.index_rebuilt.is_some() && r.baseline, "{r:?}");
    // A newer version: refused, and the blob sweep refuses to guess either.
    let mut newer = std::fs::read(&idx).expect("index");
    newer[8] = 9;
    std::fs::write(&idx, &newer).expect("write");
    let err = s
        .scan(&req(ScanPhase::Boundary, 3, None))
        .expect_err("newer");
    assert!(matches!(err, ScanError::NewerStore(_)), "{err}");
    assert!(store.collect_garbage().is_err());
}

#[test]
fn the_blob_sweep_keeps_what_workspace_indexes_reference() {
    let env = Env::new();
    env.write("a", b"only in the baseline");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    assert_eq!(env.blob_count(), 1);
    let gc = store.collect_garbage().expect("gc");
    assert_eq!((gc.blobs_kept, gc.blobs_removed), (1, 0));
    // Deleted by a call: its blob lives on in the call's group, then the index lets go.
    call(&s, 1, "c", || env.remove("a"));
    store.collect_garbage().expect("gc");
    restore_to(&s, 1, "op");
    assert_eq!(env.read("a").as_deref(), Some(&b"only in the baseline"[..]));
}

#[test]
fn two_sessions_share_one_baseline() {
    let env = Env::new();
    for i in 0..10 {
        env.write(format!("f{i}"), format!("{i}").as_bytes());
    }
    let store = env.store();
    let a = store.session("a", &env.cwd).expect("a");
    let b = store.session("b", &env.cwd).expect("b");
    assert!(scan(&a, ScanPhase::Boundary, 1, None).baseline);
    let blobs = env.blob_count();
    let rb = scan(&b, ScanPhase::Boundary, 1, None);
    assert!(!rb.baseline, "b reuses a's baseline");
    assert_eq!(env.blob_count(), blobs);
    // A's call is A's: B's next scan sees nothing new.
    call(&a, 1, "a1", || env.write("f1", b"by a"));
    let rb = scan(&b, ScanPhase::Before, 1, Some("b1"));
    assert!(rb.modified.is_empty());
    assert_eq!(index_files(&env).len(), 1);
}

#[test]
fn a_workspace_on_another_filesystem_than_the_store() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    let ws = tempfile::tempdir_in(shm).expect("tmp in /dev/shm");
    let env = Env::new();
    std::fs::write(ws.path().join("x.txt"), b"on tmpfs").expect("write");
    let store = env.store();
    let s = store.session("s", ws.path()).expect("session");
    scan(&s, ScanPhase::Boundary, 1, None);
    scan(&s, ScanPhase::Before, 1, Some("c"));
    std::fs::write(ws.path().join("x.txt"), b"changed").expect("write");
    std::fs::create_dir_all(ws.path().join("n/m")).expect("mkdir");
    std::fs::write(ws.path().join("n/m/y"), b"y").expect("write");
    scan(&s, ScanPhase::After, 1, Some("c"));
    let plan = s.plan_restore(1).expect("plan");
    s.restore(&plan, "op").expect("restore");
    assert_eq!(
        std::fs::read(ws.path().join("x.txt")).expect("x"),
        b"on tmpfs"
    );
    assert!(!ws.path().join("n").exists());
}

#[test]
fn the_store_inside_the_workspace_is_never_scanned() {
    let env = Env::new();
    env.write("a", b"a");
    let store = Store::open(&env.cwd.join(".store"), StoreOptions::default()).expect("store");
    let s = store.session("s", &env.cwd).expect("session");
    let r = scan(&s, ScanPhase::Boundary, 1, None);
    assert_eq!(r.files, 1, "{r:?}");
    let r = call(&s, 1, "c", || env.write("b", b"b"));
    assert_eq!(names(&r.created), ["b"]);
}

#[test]
fn a_file_a_shell_call_replaced_by_a_directory_comes_back_and_one_holding_other_files_is_reported()
{
    let env = Env::new();
    env.write("x", b"a file");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let r = call(&s, 1, "c", || {
        env.remove("x");
        env.write("x/inside", b"now a directory");
    });
    assert_eq!(names(&r.deleted), ["x"]);
    assert_eq!(names(&r.created), ["x/inside"]);
    // A file nobody recorded in the directory: the file is not guessed over it.
    env.write("x/by-hand", b"mine");
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.skipped.len(), 1, "{plan:?}");
    assert_eq!(plan.skipped[0].display, "x");
    // Without it, the directory's files go and the file comes back.
    env.remove("x/by-hand");
    let plan = s.plan_restore(1).expect("plan");
    assert!(plan.skipped.is_empty(), "{plan:?}");
    restore_to(&s, 1, "op");
    assert_eq!(env.read("x").as_deref(), Some(&b"a file"[..]));
}

#[test]
fn scans_of_one_workspace_wait_for_the_lock_held_by_another_process() {
    let env = Env::new();
    env.write("a", b"1");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    // Another process's scan holds the workspace lock (a separate open file description).
    let key = snapshot_store::workspace_key(&std::fs::canonicalize(&env.cwd).expect("canonical"));
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .open(env.root.join("workspaces").join(&key).join("lock"))
        .expect("lock file");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            let r = scan(&s, ScanPhase::Boundary, 2, None);
            (released.load(Ordering::SeqCst), r)
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        released.store(true, Ordering::SeqCst);
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::Unlock).expect("unlock");
        h.join().expect("join")
    });
    assert!(
        seen.0,
        "the scan returned while the other process held the lock"
    );
}

#[test]
fn concurrent_scans_of_one_workspace_keep_one_consistent_index() {
    let env = Env::new();
    for i in 0..50 {
        env.write(format!("f{i}"), b"0");
    }
    let store = env.store();
    let sessions: Vec<Session> = (0..4)
        .map(|i| store.session(&format!("s{i}"), &env.cwd).expect("session"))
        .collect();
    // Each session's turn starts with its boundary scan (as the host does at a message).
    for s in &sessions {
        scan(s, ScanPhase::Boundary, 1, None);
    }
    std::thread::scope(|sc| {
        for (i, s) in sessions.iter().enumerate() {
            let env = &env;
            sc.spawn(move || {
                for round in 0..5 {
                    let id = format!("c{i}-{round}");
                    scan(s, ScanPhase::Before, 1, Some(&id));
                    env.write(
                        format!("f{}", i * 10 + round),
                        format!("{i}-{round}").as_bytes(),
                    );
                    scan(s, ScanPhase::After, 1, Some(&id));
                }
            });
        }
    });
    // Every change was recorded by exactly one session, and the index is current.
    let last = scan(&sessions[0], ScanPhase::Before, 1, Some("final"));
    assert!(
        last.modified.is_empty() && last.created.is_empty(),
        "{last:?}"
    );
    assert!(last.not_covered.is_empty());
    let mut restorable = std::collections::BTreeSet::new();
    for s in &sessions {
        let plan = s.plan_restore(1).expect("plan");
        restorable.extend(plan.actions.iter().map(|a| a.display.clone()));
    }
    assert_eq!(
        restorable.len(),
        20,
        "each changed file is restorable by some session"
    );
}

#[test]
fn an_interrupted_scan_loses_no_change() {
    let env = Env::new();
    for i in 0..40 {
        env.write(format!("f{i:02}"), format!("content {i}").as_bytes());
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    let seam = Arc::new(Interrupt::default());
    seam.fail_at.store(25, Ordering::SeqCst);
    let store = env.store_with(StoreOptions {
        seam: seam.clone(),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    let mut r = req(ScanPhase::Boundary, 1, None);
    r.progress_batch = 10;
    r.threads = 1;
    s.scan(&r)
        .expect_err("baseline interrupted after its first batch");
    // A shell call deletes and rewrites files the interrupted baseline had read.
    env.remove("f00");
    env.write("f01", b"rewritten");
    let mut after = req(ScanPhase::After, 1, Some("c"));
    after.progress_batch = 10;
    after.threads = 1;
    seam.store_writes.store(0, Ordering::SeqCst);
    s.scan(&after)
        .expect_err("interrupted again, after saving progress");
    seam.fail_at.store(usize::MAX, Ordering::SeqCst);
    let rep = s.scan(&after).expect("completed");
    assert_eq!(names(&rep.deleted), ["f00"]);
    assert_eq!(names(&rep.modified), ["f01"]);
    restore_to(&s, 1, "op");
    assert_eq!(env.read("f00").as_deref(), Some(&b"content 0"[..]));
    assert_eq!(env.read("f01").as_deref(), Some(&b"content 1"[..]));
}

/// Fails the first store write under a session's `groups/` once armed.
#[derive(Default)]
struct FailGroupWrite {
    armed: std::sync::atomic::AtomicBool,
}

impl FaultSeam for FailGroupWrite {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        // The session's record log, where every group is appended.
        let in_log = path.file_name().is_some_and(|n| n == "records.log");
        if area == Area::Store
            && matches!(op, FsOp::Create | FsOp::Write | FsOp::CreateDir)
            && in_log
            && self.armed.swap(false, Ordering::SeqCst)
        {
            return Err(io::Error::from_raw_os_error(28));
        }
        Ok(())
    }
}

#[test]
fn changes_are_found_again_when_recording_them_failed() {
    let env = Env::new();
    env.write("a.txt", b"before");
    let seam = Arc::new(FailGroupWrite::default());
    let store = env.store_with(StoreOptions {
        seam: seam.clone(),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    scan(&s, ScanPhase::Before, 1, Some("c"));
    env.write("a.txt", b"after the call");
    seam.armed.store(true, Ordering::SeqCst);
    let err = s
        .scan(&req(ScanPhase::After, 1, Some("c")))
        .expect_err("the group write fails");
    assert!(matches!(err, ScanError::Fs(_)), "{err}");
    // The next scan finds the same change and records it.
    let r = scan(&s, ScanPhase::After, 1, Some("c"));
    assert_eq!(names(&r.modified), ["a.txt"]);
    restore_to(&s, 1, "op");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"before"[..]));
}

#[test]
fn a_file_over_the_cap_is_covered_once_the_cap_allows_it() {
    let env = Env::new();
    env.write("big.txt", &[b'x'; 100]);
    {
        let small = env.store_with(StoreOptions {
            max_file_bytes: 10,
            ..StoreOptions::default()
        });
        let r = scan(&env.session(&small), ScanPhase::Boundary, 1, None);
        assert_eq!(
            names(
                &r.not_covered
                    .iter()
                    .map(|n| n.path.clone())
                    .collect::<Vec<_>>()
            ),
            ["big.txt"]
        );
    }
    // The cap is raised: the unchanged file is read now, and nothing is recorded as a change.
    let store = env.store();
    let s = env.session(&store);
    let r = scan(&s, ScanPhase::Boundary, 2, None);
    assert!(r.not_covered.is_empty(), "{:?}", r.not_covered);
    assert_eq!(r.recorded, 0);
    // A shell call that then overwrites it: its old content comes back.
    call(&s, 3, "c1", || env.write("big.txt", b"short\n"));
    let plan = s.plan_restore(3).expect("plan");
    assert_eq!(plan.actions.len(), 1);
    s.restore(&plan, "op1").expect("restore");
    assert_eq!(env.read("big.txt").as_deref(), Some(&[b'x'; 100][..]));
}

#[test]
fn the_scan_reuses_the_content_a_boundary_kept_in_the_log() {
    // A file a tool wrote is kept in the session's log at the next message; the message's
    // workspace scan, which reads the new file too, writes no blob file for it, and a shell
    // change to it later in the session still comes back from the log.
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    s.recheck_tracked(1).expect("boundary 1");
    s.capture_before_at("w1", Path::new("src/new.txt"), 1)
        .expect("capture");
    env.write("src/new.txt", b"written by the tool");
    s.commit("w1", 1, true).expect("commit");
    s.recheck_tracked(2).expect("boundary 2");
    scan(&s, ScanPhase::Boundary, 2, None);
    assert_eq!(
        env.blob_count(),
        0,
        "kept in the log, read by the scan, no blob file"
    );
    let r = call(&s, 2, "bash-1", || {
        env.write("src/new.txt", b"rewritten by the shell");
    });
    assert_eq!(r.recorded, 1, "{r:?}");
    restore_to(&s, 2, "op");
    assert_eq!(
        env.read("src/new.txt").as_deref(),
        Some(&b"written by the tool"[..])
    );
}

/// Session `s1` writes `src/new.txt` with a tool; its next message keeps the content in its
/// log and the workspace index names it there (no blob file).
fn kept_by_s1(env: &Env, store: &Store) -> Session {
    let s = env.session(store);
    scan(&s, ScanPhase::Boundary, 1, None);
    s.recheck_tracked(1).expect("boundary 1");
    s.capture_before_at("w1", Path::new("src/new.txt"), 1)
        .expect("capture");
    env.write("src/new.txt", b"written by the tool");
    s.commit("w1", 1, true).expect("commit");
    s.recheck_tracked(2).expect("boundary 2");
    // Past the scan's racy window (a file changed within 50 ms before a scan is read
    // again by the next one): the next scan reads the file only if it must.
    std::thread::sleep(std::time::Duration::from_millis(80));
    scan(&s, ScanPhase::Boundary, 2, None);
    assert_eq!(env.blob_count(), 0, "kept in s1's log, no blob file");
    s
}

/// A shell call of `s` at `anchor` rewrites `src/new.txt`; a rewind to `anchor` brings back
/// the content `s1`'s tool gave it.
fn shell_change_comes_back(env: &Env, s: &Session, anchor: u64) {
    let r = call(s, anchor, "bash-1", || {
        env.write("src/new.txt", b"rewritten by the shell");
    });
    assert_eq!(names(&r.modified), ["src/new.txt"], "{r:?}");
    let plan = restore_to(s, anchor, "op");
    assert!(plan.uncovered.is_empty(), "{:?}", plan.uncovered);
    assert_eq!(
        env.read("src/new.txt").as_deref(),
        Some(&b"written by the tool"[..])
    );
}

#[test]
fn another_session_of_the_workspace_restores_content_the_first_one_kept_in_its_log() {
    // A second conversation in the same folder: its shell call rewrites the file the first
    // one's tool wrote. The workspace index is shared, the first session's log is not: the
    // second session's first scan writes that content to a blob file, and its rewind brings
    // the file back.
    let env = Env::new();
    let store = env.store();
    let _s1 = kept_by_s1(&env, &store);
    let s2 = store.session("s2", &env.cwd).expect("s2");
    s2.recheck_tracked(1).expect("s2 boundary 1");
    scan(&s2, ScanPhase::Boundary, 1, None);
    assert_eq!(env.blob_count(), 1, "taken over from s1's log");
    shell_change_comes_back(&env, &s2, 1);
}

#[test]
fn content_the_keeping_session_no_longer_has_is_read_again_from_the_workspace() {
    // The first session is gone (its directory removed) before another one scans: the
    // index's entry is read again from the file, which has not changed, and a later shell
    // change to it still comes back.
    let env = Env::new();
    let store = env.store();
    let s1 = kept_by_s1(&env, &store);
    drop(s1);
    std::fs::remove_dir_all(env.root.join("sessions/s1")).expect("remove s1");
    let s2 = store.session("s2", &env.cwd).expect("s2");
    let rep = scan(&s2, ScanPhase::Boundary, 1, None);
    assert_eq!(rep.recorded, 0, "unchanged: nothing to record");
    assert_eq!(env.blob_count(), 1, "read again into a blob file");
    shell_change_comes_back(&env, &s2, 1);
}

#[test]
fn a_copy_a_shell_call_makes_is_kept_for_itself_and_outlives_the_original_s_history() {
    // The shell copies a file whose content the session's log keeps: the copy is a change of
    // the call, tracked with that content, so its content stays in the log for the copy's
    // sake (no blob file), whatever happens to the original and to the groups that named it.
    let env = Env::new();
    let store = env.store_with(StoreOptions {
        compact_min_bytes: 1,
        ..StoreOptions::default()
    });
    let s = kept_by_s1(&env, &store);
    let r = call(&s, 2, "bash-1", || {
        env.write("copy.txt", b"written by the tool");
    });
    assert_eq!(names(&r.created), ["copy.txt"], "{r:?}");
    assert_eq!(env.blob_count(), 0, "the copy's content is the log's");
    s.recheck_tracked(3).expect("boundary 3");
    scan(&s, ScanPhase::Boundary, 3, None);
    call(&s, 3, "bash-2", || {
        env.write("src/new.txt", b"the original, changed")
    });
    s.recheck_tracked(4).expect("boundary 4");
    scan(&s, ScanPhase::Boundary, 4, None);
    // The groups that named the original's content go, and the log is compacted.
    s.prune(snapshot_store::PruneOptions {
        keep_groups: 1,
        ..snapshot_store::PruneOptions::default()
    })
    .expect("prune");
    call(&s, 4, "bash-3", || {
        env.write("copy.txt", b"the copy, changed")
    });
    let plan = restore_to(&s, 4, "op");
    assert!(plan.uncovered.is_empty(), "{:?}", plan.uncovered);
    assert_eq!(
        env.read("copy.txt").as_deref(),
        Some(&b"written by the tool"[..])
    );
}

#[test]
fn the_content_a_shell_call_writes_goes_to_the_session_s_log_not_to_blob_files() {
    // A shell call's new content costs an append to the log, not a new file each; a rewind
    // brings it back from there, and another session of the workspace, whose scans read the
    // shared index, takes it over into blob files of its own.
    let env = Env::new();
    env.write("a.txt", b"alpha at the baseline");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    assert_eq!(
        env.blob_count(),
        1,
        "the baseline is the workspace's: a blob file"
    );
    let r = call(&s, 1, "bash-1", || {
        env.write("a.txt", b"alpha-changed-by-the-shell");
        env.write("gen/b.txt", b"bravo-made-by-the-shell");
    });
    assert_eq!(names(&r.modified), ["a.txt"], "{r:?}");
    assert_eq!(names(&r.created), ["gen/b.txt"], "{r:?}");
    assert_eq!(env.blob_count(), 1, "no blob file for the call's content");
    let log = std::fs::read(env.root.join("sessions/s1/records.log")).expect("log");
    assert!(crate::common::contains(&log, b"alpha-changed-by-the-shell"));
    assert!(crate::common::contains(&log, b"bravo-made-by-the-shell"));
    s.recheck_tracked(2).expect("boundary 2");
    scan(&s, ScanPhase::Boundary, 2, None);
    call(&s, 2, "bash-2", || {
        env.write("a.txt", b"changed again");
        env.remove("gen/b.txt");
    });
    let plan = restore_to(&s, 2, "op");
    assert!(plan.uncovered.is_empty(), "{:?}", plan.uncovered);
    assert_eq!(
        env.read("a.txt").as_deref(),
        Some(&b"alpha-changed-by-the-shell"[..])
    );
    assert_eq!(
        env.read("gen/b.txt").as_deref(),
        Some(&b"bravo-made-by-the-shell"[..])
    );
    // Another session's scan takes the index over: what the first session's log keeps and
    // the index names ("changed again", from the second call) is written to a blob file;
    // the two files the rewind wrote, which this scan reads, go to blob files too (a
    // boundary scan's reads are not kept in a log).
    let s2 = store.session("s2", &env.cwd).expect("s2");
    scan(&s2, ScanPhase::Boundary, 1, None);
    assert_eq!(env.blob_count(), 4);
    call(&s2, 1, "s2-bash", || env.write("a.txt", b"changed by s2"));
    restore_to(&s2, 1, "op2");
    assert_eq!(
        env.read("a.txt").as_deref(),
        Some(&b"alpha-changed-by-the-shell"[..])
    );
}

#[test]
fn a_file_a_shell_call_reads_with_no_change_to_record_is_not_kept_in_the_log() {
    // Files the scan after a call reads that are no change of the call (one the call only
    // touched; one that comes into scope as the call edits `.ignore`, there since before):
    // no record would name their content in the log, so the index names blob files.
    let env = Env::new();
    env.write("a.txt", b"content-the-shell-only-touches");
    env.write(".ignore", b"x.txt\n");
    env.write("x.txt", b"content-ignored-until-the-call");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    assert_eq!(env.blob_count(), 2, ".ignore and a.txt");
    std::thread::sleep(std::time::Duration::from_millis(80));
    let r = call(&s, 1, "bash-1", || {
        let f = std::fs::File::options()
            .write(true)
            .open(env.cwd.join("a.txt"))
            .expect("open");
        f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .expect("touch");
        env.write(".ignore", b"# nothing ignored now\n");
    });
    assert_eq!(names(&r.modified), [".ignore"], "{r:?}");
    assert!(r.created.is_empty(), "{r:?}");
    let log = std::fs::read(env.root.join("sessions/s1/records.log")).expect("log");
    assert!(
        crate::common::contains(&log, b"# nothing ignored now"),
        "the call's change is the log's"
    );
    assert!(!crate::common::contains(
        &log,
        b"content-the-shell-only-touches"
    ));
    assert!(!crate::common::contains(
        &log,
        b"content-ignored-until-the-call"
    ));
    assert_eq!(
        env.blob_count(),
        3,
        "x.txt's content in a blob file of its own"
    );
    // Both changed by another call: their states before come back from the blob files.
    call(&s, 1, "bash-2", || {
        env.write("a.txt", b"changed");
        env.write("x.txt", b"changed too");
    });
    restore_to(&s, 1, "op");
    assert_eq!(
        env.read("a.txt").as_deref(),
        Some(&b"content-the-shell-only-touches"[..])
    );
    assert_eq!(
        env.read("x.txt").as_deref(),
        Some(&b"content-ignored-until-the-call"[..])
    );
}

#[test]
fn content_kept_in_a_log_since_cleared_is_read_again_by_the_next_scan() {
    // The session's snapshots are cleared (a new session-log format, or by hand) while the
    // workspace index still names content its log kept: the next scan reads the unchanged
    // file again, and a shell change to it after that still comes back.
    let env = Env::new();
    let store = env.store();
    let s = kept_by_s1(&env, &store);
    s.clear_session().expect("clear");
    let rep = scan(&s, ScanPhase::Boundary, 3, None);
    assert_eq!(rep.recorded, 0, "unchanged: nothing to record");
    assert_eq!(env.blob_count(), 1, "read again into a blob file");
    shell_change_comes_back(&env, &s, 3);
}

#[test]
fn a_scan_refused_after_taking_the_index_over_leaves_it_to_the_next_scan() {
    // Another session's scan stops at the file-count limit after it took the index over
    // (the content written to a blob file, the index not saved; the copy in memory is
    // dropped, so that no index names a blob file only there). A blob sweep runs; the next
    // scan takes the index over again, and the file still comes back.
    let env = Env::new();
    let store = env.store();
    let _s1 = kept_by_s1(&env, &store);
    for i in 0..20 {
        env.write(format!("other/f{i}"), b"x");
    }
    let s2 = store.session("s2", &env.cwd).expect("s2");
    let mut r = req(ScanPhase::Boundary, 1, None);
    r.max_files = 5;
    assert!(s2.scan(&r).expect("scan").refused.is_some());
    store.collect_garbage().expect("sweep");
    scan(&s2, ScanPhase::Boundary, 1, None);
    shell_change_comes_back(&env, &s2, 1);
}

/// A seam that, while armed, fails with `EIO` every call `when` picks, and counts them.
struct FailWhileArmed<F> {
    armed: std::sync::atomic::AtomicBool,
    failed: AtomicUsize,
    when: F,
}

impl<F: Fn(FsOp, Area, &Path) -> bool + Send + Sync> FailWhileArmed<F> {
    fn new(when: F) -> Arc<Self> {
        Arc::new(FailWhileArmed {
            armed: false.into(),
            failed: AtomicUsize::new(0),
            when,
        })
    }
}

impl<F: Fn(FsOp, Area, &Path) -> bool + Send + Sync> FaultSeam for FailWhileArmed<F> {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        if self.armed.load(Ordering::SeqCst) && (self.when)(op, area, path) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(5));
        }
        Ok(())
    }
}

#[test]
fn a_scan_that_fails_before_saving_its_index_leaves_the_check_of_kept_content_to_the_next() {
    // After the session's snapshots are cleared, a scan that fails to save the workspace index
    // (EIO) leaves it naming content the log no longer keeps; once a blob sweep has run, the
    // next scan still finds that out and reads the file again.
    let env = Env::new();
    // Every write to the index or its delta (temporary file and rename included); reads go through.
    let seam = FailWhileArmed::new(|op, area, path: &Path| {
        matches!(op, FsOp::Create | FsOp::Write | FsOp::Rename)
            && area == Area::Store
            && path.to_string_lossy().contains("index.")
    });
    let store = env.store_with(StoreOptions {
        seam: seam.clone(),
        ..StoreOptions::default()
    });
    let s = kept_by_s1(&env, &store);
    s.clear_session().expect("clear");
    // The session goes on: its next message starts a new log.
    s.recheck_tracked(3).expect("boundary 3");
    seam.armed.store(true, Ordering::SeqCst);
    assert!(s.scan(&req(ScanPhase::Boundary, 3, None)).is_err());
    seam.armed.store(false, Ordering::SeqCst);
    store.collect_garbage().expect("sweep");
    scan(&s, ScanPhase::Boundary, 3, None);
    shell_change_comes_back(&env, &s, 3);
}

/// The store-relative path of the store's one workspace index, and its bytes.
fn the_index(env: &Env) -> (String, PathBuf) {
    let files = index_files(env);
    assert_eq!(files.len(), 1, "{files:?}");
    let rel = files[0]
        .strip_prefix(&env.root)
        .expect("in the store")
        .to_string_lossy()
        .into_owned();
    (rel, files[0].clone())
}

/// The blobs `verify` reports missing, each with the records naming it.
fn missing_blobs(store: &Store) -> Vec<(String, Vec<String>)> {
    let report = store.verify(&mut |_, _| {}).expect("verify");
    report
        .problems
        .iter()
        .map(|p| match p {
            snapshot_store::Problem::MissingBlob {
                sha256,
                referenced_by,
            } => (sha256.clone(), referenced_by.clone()),
            other => panic!("unexpected problem: {other:?}"),
        })
        .collect()
}

#[test]
fn verify_checks_the_content_a_workspace_index_names() {
    // The index is where a shell call's before-states come from: content it names in a
    // blob file, or as kept in its keeper session's log, must be there.
    let env = Env::new();
    let store = env.store();
    let s1 = kept_by_s1(&env, &store);
    // A file made outside any tool call, found by the next message's scan: its content is
    // the index's alone, in a blob file.
    env.write("made-by-hand.txt", b"shell content");
    scan(&s1, ScanPhase::Boundary, 3, None);
    assert_eq!(env.blob_count(), 1, "the file went to a blob file");
    assert!(missing_blobs(&store).is_empty(), "a whole store is clean");
    drop(s1);
    let (index, _) = the_index(&env);
    let sha = |b: &[u8]| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b))
    };

    // The blob file a `hashed` entry names is gone: the index is named as its user.
    for b in std::fs::read_dir(env.root.join("blobs"))
        .expect("blobs")
        .flatten()
    {
        std::fs::remove_file(b.path()).expect("remove blob");
    }
    assert_eq!(
        missing_blobs(&store),
        [(sha(b"shell content"), vec![index.clone()])]
    );

    // The keeper's log is gone too: the content the index names as kept there is missing.
    std::fs::remove_dir_all(env.root.join("sessions/s1")).expect("remove s1");
    let mut missing = missing_blobs(&store);
    missing.sort();
    let mut want = vec![
        (sha(b"shell content"), vec![index.clone()]),
        (sha(b"written by the tool"), vec![index.clone()]),
    ];
    want.sort();
    assert_eq!(missing, want);
}

#[test]
fn a_sweep_after_the_keeper_session_went_leaves_no_index_naming_lost_content() {
    // The session whose log keeps content the workspace index names goes (removed as the
    // size quota's sweep removes a session: its directory out of `sessions/`), while the
    // index stays for its grace hour. The blob sweep then leaves no index naming content
    // nothing holds: `verify` is clean after it, and a shell change still comes back.
    let env = Env::new();
    let store = env.store();
    let s1 = kept_by_s1(&env, &store);
    drop(s1);
    let (index, _) = the_index(&env);
    std::fs::rename(env.root.join("sessions/s1"), env.tmp.path().join("gone-s1"))
        .expect("remove s1");
    store.collect_garbage().expect("sweep");
    assert!(
        env.root.join(&index).is_file(),
        "the index stays for its grace hour"
    );
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let s2 = store.session("s2", &env.cwd).expect("s2");
    scan(&s2, ScanPhase::Boundary, 1, None);
    shell_change_comes_back(&env, &s2, 1);
    assert!(
        store
            .verify(&mut |_, _| {})
            .expect("verify")
            .problems
            .is_empty()
    );
}

#[test]
fn a_sweep_keeps_a_blob_file_that_holds_content_an_index_names_as_kept_in_a_gone_log() {
    let env = Env::new();
    let store = env.store();
    drop(kept_by_s1(&env, &store));
    // A blob file with the kept content (as a restore or another session's scan writes one).
    let content = b"written by the tool";
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(content))
    };
    std::fs::write(env.root.join("blobs").join(&sha), content).expect("blob");
    std::fs::rename(env.root.join("sessions/s1"), env.tmp.path().join("gone-s1"))
        .expect("remove s1");
    store.collect_garbage().expect("sweep");
    assert!(
        env.root.join("blobs").join(&sha).is_file(),
        "still named: kept"
    );
    assert!(missing_blobs(&store).is_empty());
    // The index now names the blob file: another session's shell change comes back from it
    // even if the file changed before that session's first scan.
    let s2 = store.session("s2", &env.cwd).expect("s2");
    scan(&s2, ScanPhase::Boundary, 1, None);
    shell_change_comes_back(&env, &s2, 1);
}

#[test]
fn verify_reports_a_corrupt_workspace_index_and_quarantine_moves_it_aside() {
    let env = Env::new();
    let store = env.store();
    let s1 = kept_by_s1(&env, &store);
    drop(s1);
    let (index, file) = the_index(&env);
    let mut bytes = std::fs::read(&file).expect("read index");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, &bytes).expect("damage index");
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(
        matches!(
            report.problems.as_slice(),
            [snapshot_store::Problem::CorruptRecord { path, .. }] if *path == index
        ),
        "{:?}",
        report.problems
    );
    let q = store.quarantine(&report).expect("quarantine");
    assert_eq!(q.moved, std::slice::from_ref(&index));
    assert!(!file.exists(), "moved aside");
    let dir = env.root.join(q.dir.expect("quarantine dir"));
    assert_eq!(std::fs::read(dir.join(&index)).expect("kept"), bytes);
    assert!(
        store
            .verify(&mut |_, _| {})
            .expect("verify")
            .problems
            .is_empty()
    );
    // The next scan builds the index again, and a shell change comes back from it.
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 3, None);
    assert!(file.exists(), "rebuilt");
    shell_change_comes_back(&env, &s, 3);
}

#[test]
fn verify_reports_a_workspace_index_from_a_newer_build_and_leaves_it() {
    let env = Env::new();
    let store = env.store();
    drop(kept_by_s1(&env, &store));
    let (index, file) = the_index(&env);
    let mut bytes = std::fs::read(&file).expect("read index");
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&file, &bytes).expect("newer index");
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(
        matches!(
            report.problems.as_slice(),
            [snapshot_store::Problem::NewerRecord { path, found: 99, .. }] if *path == index
        ),
        "{:?}",
        report.problems
    );
    let q = store.quarantine(&report).expect("quarantine");
    assert!(q.moved.is_empty(), "a newer index is never moved");
    assert_eq!(std::fs::read(&file).expect("still there"), bytes);
}

/// The tool writes `rel` after call `call`'s capture and the call commits at `anchor`; a
/// rewind to `anchor` brings back `before`.
fn tool_edit_undone(env: &Env, s: &Session, call: &str, anchor: u64, rel: &str, before: &[u8]) {
    env.write(rel, b"the tool's edit");
    s.commit(call, anchor, true).expect("commit");
    restore_to(s, anchor, "op");
    assert_eq!(env.read(rel).as_deref(), Some(before));
}

/// A store whose reads of workspace file `watched` are counted in the returned counter.
fn store_counting_reads(env: &Env, watched: &'static str) -> (Store, Arc<AtomicUsize>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let seen = reads.clone();
    let store = env.store_with(StoreOptions {
        seam: Arc::new(crate::common::Watch(move |op, area, path: &Path| {
            if op == FsOp::Read && area == Area::Workspace && path == Path::new(watched) {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        })),
        ..StoreOptions::default()
    });
    (store, reads)
}

/// Call `call`'s capture of `rel` at `anchor`: in the form that never waits (`quick`, which
/// must run) or in the one that may.
fn capture_in_form(
    s: &Session,
    quick: bool,
    call: &str,
    rel: &str,
    anchor: u64,
) -> snapshot_store::CaptureOutcome {
    let o = if quick {
        s.try_capture_before_at(call, Path::new(rel), anchor, 1 << 20)
            .expect("runs without waiting")
    } else {
        s.capture_before_at(call, Path::new(rel), anchor)
    };
    o.expect("capture")
}

/// The SHA-256 a capture staged (panics on any other outcome).
fn staged_sha(o: snapshot_store::CaptureOutcome) -> (String, bool) {
    match o {
        snapshot_store::CaptureOutcome::Captured {
            sha256,
            deduplicated,
            ..
        } => (sha256, deduplicated),
        o => panic!("{o:?}"),
    }
}

/// A session whose workspace holds `src/a.ts` (`before`), scanned once the file has settled
/// (past the scan's 50 ms racy window), at message 1.
fn scanned_once(env: &Env, store: &Store, before: &[u8]) -> Session {
    env.write("src/a.ts", before);
    std::thread::sleep(std::time::Duration::from_millis(80));
    let s = env.session(store);
    scan(&s, ScanPhase::Boundary, 1, None);
    s.recheck_tracked(1).expect("boundary 1");
    s
}

#[test]
fn a_write_tools_first_edit_of_a_file_the_scan_stored_reads_nothing() {
    // The baseline holds the file's content; the write tool's first edit of it finds the
    // index's entry matching the file and stages that content without reading the file, in
    // both forms of the call. A rewind brings the content back from the store.
    for quick in [false, true] {
        let env = Env::new();
        let (store, reads) = store_counting_reads(&env, "src/a.ts");
        let s = scanned_once(&env, &store, b"as the project had it");
        assert_eq!(reads.load(Ordering::SeqCst), 1, "the baseline read it");
        let (sha, dedup) = staged_sha(capture_in_form(&s, quick, "w1", "src/a.ts", 1));
        assert!(dedup, "the store had the content");
        assert_eq!(reads.load(Ordering::SeqCst), 1, "the capture read the file");
        assert!(env.root.join("blobs").join(&sha).exists());
        tool_edit_undone(&env, &s, "w1", 1, "src/a.ts", b"as the project had it");
    }
}

#[test]
fn a_file_changed_since_the_scan_is_read_even_with_its_size_and_mtime_put_back() {
    // Same size, the old mtime set back: the ctime tells, and the capture reads the file. (The
    // change was made during the turn, after its scan: a rewind to the message brings back
    // what the scan saw.)
    let env = Env::new();
    let (store, reads) = store_counting_reads(&env, "src/a.ts");
    let s = scanned_once(&env, &store, b"version one");
    let path = env.cwd.join("src/a.ts");
    let mtime = std::fs::metadata(&path)
        .expect("meta")
        .modified()
        .expect("mtime");
    env.write("src/a.ts", b"version two");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open")
        .set_modified(mtime)
        .expect("set mtime");
    assert_eq!(
        std::fs::metadata(&path)
            .expect("meta")
            .modified()
            .expect("mtime"),
        mtime
    );
    let (sha, _) = staged_sha(
        s.capture_before_at("w1", Path::new("src/a.ts"), 1)
            .expect("capture"),
    );
    assert_eq!(reads.load(Ordering::SeqCst), 2, "read by the capture");
    use sha2::Digest;
    assert_eq!(
        sha,
        hex::encode(sha2::Sha256::digest(b"version two")),
        "staged as read"
    );
    tool_edit_undone(&env, &s, "w1", 1, "src/a.ts", b"version one");
}

#[test]
fn a_file_the_scan_saw_just_after_it_changed_is_read_by_the_capture() {
    // Changed within the racy window before the scan started: a same-size rewrite in the
    // same clock tick would keep its metadata, so the index's content is not trusted.
    let env = Env::new();
    let (store, reads) = store_counting_reads(&env, "src/a.ts");
    env.write("src/a.ts", b"version one");
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    s.recheck_tracked(1).expect("boundary 1");
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    s.capture_before_at("w1", Path::new("src/a.ts"), 1)
        .expect("capture");
    assert_eq!(reads.load(Ordering::SeqCst), 2, "read by the capture");
}

#[test]
fn a_scanned_files_blob_file_gone_from_the_store_is_read_again() {
    // The index names content whose blob file is no longer there (removed by hand): the
    // capture reads the file and stores it, and the rewind brings it back.
    let env = Env::new();
    let (store, reads) = store_counting_reads(&env, "src/a.ts");
    let s = scanned_once(&env, &store, b"as the project had it");
    let blobs: Vec<_> = std::fs::read_dir(env.root.join("blobs"))
        .expect("blobs")
        .flatten()
        .collect();
    assert_eq!(blobs.len(), 1);
    std::fs::remove_file(blobs[0].path()).expect("remove blob");
    let (_, dedup) = staged_sha(
        s.capture_before_at("w1", Path::new("src/a.ts"), 1)
            .expect("capture"),
    );
    assert!(!dedup, "stored anew");
    assert_eq!(reads.load(Ordering::SeqCst), 2, "read by the capture");
    tool_edit_undone(&env, &s, "w1", 1, "src/a.ts", b"as the project had it");
}

#[test]
fn content_the_sessions_log_keeps_for_a_scanned_file_is_not_read_again() {
    // A file the tool wrote in the first turn: its content is kept in the session's log and
    // the index names it there. A later turn's first edit of it, made without waiting (the
    // log's lock held), stages that content; made in the form that may wait, it reads the
    // file (the log may be compacted by another handle before the capture's record names
    // the content). Either way the rewind brings the tool's first content back.
    for quick in [true, false] {
        let env = Env::new();
        let (store, reads) = store_counting_reads(&env, "src/new.txt");
        let s = kept_by_s1(&env, &store);
        let before = reads.load(Ordering::SeqCst);
        s.recheck_tracked(3).expect("boundary 3");
        let (_, dedup) = staged_sha(capture_in_form(&s, quick, "w3", "src/new.txt", 3));
        assert!(dedup);
        let read = reads.load(Ordering::SeqCst) - before;
        assert_eq!(read, usize::from(!quick), "quick: {quick}");
        assert_eq!(env.blob_count(), 0, "still kept in the log only");
        tool_edit_undone(&env, &s, "w3", 3, "src/new.txt", b"written by the tool");
    }
}

#[test]
fn a_change_between_calls_that_a_write_tool_then_edits_comes_back() {
    // A job or an editor changes a project file during the turn, and the agent's next call
    // is a write tool's edit of it: no scan ran in between. The capture finds the file
    // changed since the turn's scan saw it and records that state ahead of its own, so a
    // rewind to the message brings back the file as it was there — in both call forms, and
    // when the job deleted the file and the tool wrote it anew.
    for (quick, job) in [
        (false, Some(&b"a background job"[..])),
        (true, Some(&b"a background job"[..])),
        (false, None),
    ] {
        let env = Env::new();
        let store = env.store();
        let s = scanned_once(&env, &store, b"at the message");
        match job {
            Some(b) => env.write("src/a.ts", b),
            None => env.remove("src/a.ts"),
        }
        capture_in_form(&s, quick, "w1", "src/a.ts", 1);
        env.write("src/a.ts", b"the tool");
        s.commit("w1", 1, true).expect("commit");
        s.recheck_tracked(2).expect("boundary 2");
        scan(&s, ScanPhase::Boundary, 2, None);
        restore_to(&s, 1, "op");
        assert_eq!(
            env.read("src/a.ts").as_deref(),
            Some(&b"at the message"[..]),
            "quick: {quick}, job: {job:?}"
        );
    }
}

#[test]
fn a_change_no_scan_of_this_turn_saw_is_not_backdated_by_the_capture() {
    // The session's last scan was at an earlier message (none at this one): whether the file
    // changed before this message (outside the agent) or during the turn is not known, so the
    // capture records only what it finds, and a rewind to this message leaves that.
    let env = Env::new();
    let store = env.store();
    let s = scanned_once(&env, &store, b"at message 1");
    s.recheck_tracked(2).expect("boundary 2, not scanned");
    env.write("src/a.ts", b"changed later");
    s.capture_before_at("w2", Path::new("src/a.ts"), 2)
        .expect("capture");
    env.write("src/a.ts", b"the tool");
    s.commit("w2", 2, true).expect("commit");
    restore_to(&s, 2, "op");
    assert_eq!(env.read("src/a.ts").as_deref(), Some(&b"changed later"[..]));
}

#[test]
fn another_sessions_scan_since_this_turns_scan_is_not_taken_for_the_state_at_its_message() {
    // Two sessions of one workspace in one process share its index. Session A scans at its
    // message; an editor saves the file; session B's scan sees that save and moves the index
    // on; the editor saves again; then A's write tool edits the file. The index's entry is
    // B's view, not the state at A's message: A's capture records the file as it finds it,
    // and a rewind of A to its message never brings back B's intermediate state.
    let env = Env::new();
    let store = env.store();
    let a = scanned_once(&env, &store, b"at A's message");
    env.write("src/a.ts", b"an editor's first save");
    let b = store.session("s2", &env.cwd).expect("session s2");
    scan(&b, ScanPhase::Boundary, 1, None);
    assert!(
        env.root
            .join("blobs")
            .join(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
                b"an editor's first save"
            )))
            .exists(),
        "B's scan stored the first save"
    );
    env.write("src/a.ts", b"the editor's second save, longer");
    capture_in_form(&a, true, "w1", "src/a.ts", 1);
    tool_edit_undone(
        &env,
        &a,
        "w1",
        1,
        "src/a.ts",
        b"the editor's second save, longer",
    );
}

#[test]
fn a_file_created_between_calls_that_a_write_tool_then_edits_is_removed_by_the_rewind() {
    // A job or an editor creates a file during the turn (beside the project's files, or in a
    // directory it creates too), and the agent's next call is a write tool's edit of it: no
    // scan ran in between. The turn's scan listed the directory that would have held it and
    // found no such name, so the capture records it as absent at the message first; a rewind
    // to the message removes it (and the directory made for it), in both call forms.
    for (quick, rel) in [
        (false, "src/generated.ts"),
        (true, "src/generated.ts"),
        (true, "src/gen/deep/out.ts"),
    ] {
        let env = Env::new();
        let store = env.store();
        let s = scanned_once(&env, &store, b"at the message");
        env.write(rel, b"written by a job");
        capture_in_form(&s, quick, "w1", rel, 1);
        env.write(rel, b"the tool");
        s.commit("w1", 1, true).expect("commit");
        s.recheck_tracked(2).expect("boundary 2");
        scan(&s, ScanPhase::Boundary, 2, None);
        restore_to(&s, 1, "op");
        assert_eq!(env.read(rel), None, "quick: {quick}, {rel}");
        assert!(!env.cwd.join("src/gen").exists(), "{rel}");
        assert_eq!(
            env.read("src/a.ts").as_deref(),
            Some(&b"at the message"[..])
        );
    }
}

#[test]
fn a_created_file_whose_directory_cannot_be_listed_is_not_taken_for_created() {
    // As above, but listing the directory that would hold the new file fails (through the
    // store's fault seam, as every workspace call): whether the name is spelled as the scan
    // looked for it is not known, so the capture records the file as it found it, and a
    // rewind leaves it with that content instead of removing it.
    let env = Env::new();
    let seam =
        FailWhileArmed::new(|op, area, _: &Path| op == FsOp::ReadDir && area == Area::Workspace);
    let store = env.store_with(StoreOptions {
        seam: seam.clone(),
        ..StoreOptions::default()
    });
    let s = scanned_once(&env, &store, b"at the message");
    env.write("src/generated.ts", b"written by a job");
    seam.armed.store(true, Ordering::SeqCst);
    staged_sha(capture_in_form(&s, true, "w1", "src/generated.ts", 1));
    assert_eq!(
        seam.failed.load(Ordering::SeqCst),
        1,
        "the listing went through the seam"
    );
    seam.armed.store(false, Ordering::SeqCst);
    tool_edit_undone(&env, &s, "w1", 1, "src/generated.ts", b"written by a job");
}

#[test]
fn a_file_out_of_the_scans_scope_is_never_taken_for_created() {
    // Ignored files the turn's scan did not walk on: one that was there at the message
    // (edited by an editor, then by the write tool) and one created in an ignored directory.
    // Neither is known to have been absent: a rewind leaves both with the content the
    // capture found.
    let env = Env::new();
    let store = env.store();
    env.write(".gitignore", b".env\nbuild/\n");
    env.write(".env", b"TOKEN=at the message");
    env.write("build/old.js", b"built before");
    let s = scanned_once(&env, &store, b"at the message");
    env.write(".env", b"TOKEN=an editor's save");
    env.write("build/new.js", b"built by a job");
    for (i, rel) in [".env", "build/new.js"].into_iter().enumerate() {
        let call = format!("w{i}");
        capture_in_form(&s, true, &call, rel, 1);
        env.write(rel, b"the tool");
        s.commit(&call, 1, true).expect("commit");
    }
    s.recheck_tracked(2).expect("boundary 2");
    restore_to(&s, 1, "op");
    for (rel, want) in [
        (".env", &b"TOKEN=an editor's save"[..]),
        ("build/new.js", b"built by a job"),
        ("build/old.js", b"built before"),
    ] {
        assert_eq!(env.read(rel).as_deref(), Some(want), "{rel}");
    }
}

#[test]
fn an_ignored_file_another_sessions_scan_did_not_see_is_not_taken_for_created() {
    // Session A's scan at its message walks past the ignored `.env`. It is deleted, session
    // B's scan (which finds no change in scope: the shared index stays as it was) does not see
    // it, and an editor writes it again before A's write tool edits it. What A's own walk saw
    // decides: `.env` was there at A's message, so a rewind of A leaves it.
    let env = Env::new();
    let store = env.store();
    env.write(".gitignore", b".env\n");
    env.write(".env", b"TOKEN=at A's message");
    let a = scanned_once(&env, &store, b"at A's message");
    env.remove(".env");
    let b = store.session("s2", &env.cwd).expect("session s2");
    scan(&b, ScanPhase::Boundary, 1, None);
    env.write(".env", b"TOKEN=the editor's");
    capture_in_form(&a, true, "w1", ".env", 1);
    tool_edit_undone(&env, &a, "w1", 1, ".env", b"TOKEN=the editor's");
}

#[test]
fn a_file_moved_mid_turn_is_not_taken_for_created_at_its_new_path() {
    // A job renames the project's directory during the turn (`src` → `lib`), and the agent's
    // write tool then edits the file at its new path. The turn's scan listed no `lib`, but the
    // file is one the index knows (the same inode): it was there at the message under another
    // path, so a rewind leaves it with the content the capture found instead of removing the
    // only copy.
    let env = Env::new();
    let store = env.store();
    let s = scanned_once(&env, &store, b"at the message");
    std::fs::rename(env.cwd.join("src"), env.cwd.join("lib")).expect("mv src lib");
    capture_in_form(&s, true, "w1", "lib/a.ts", 1);
    tool_edit_undone(&env, &s, "w1", 1, "lib/a.ts", b"at the message");
}

#[test]
fn a_file_created_under_a_deleted_files_inode_number_is_still_taken_for_created() {
    // A job deletes a file the turn's scan saw and creates a new one, which the filesystem
    // gives the freed inode number (ext4 often does); the agent's write tool then edits the
    // new file. The index knows that inode number under the deleted path, but the new file
    // was born after that file last changed: it is not that file moved, so a rewind to the
    // message removes it, as any file created during the turn.
    // Other processes creating files on the same filesystem can take the freed numbers
    // first: the search is made again on a fresh workspace a few times.
    let found = (0..5).find_map(|_| {
        let env = Env::new();
        let store = env.store();
        let olds: Vec<String> = (0..400).map(|i| format!("src/old{i}.ts")).collect();
        for o in &olds {
            env.write(o, b"there at the message");
        }
        let known: std::collections::HashSet<u64> =
            olds.iter().map(|o| inode(&env.cwd.join(o))).collect();
        let s = scanned_once(&env, &store, b"at the message");
        // Past the clock tick of the scan and of the files' last changes.
        std::thread::sleep(std::time::Duration::from_millis(20));
        for (i, o) in olds.iter().enumerate() {
            env.remove(o);
            let rel = format!("src/new{i}.ts");
            env.write(&rel, b"written by a job");
            if known.contains(&inode(&env.cwd.join(&rel))) {
                return Some((env, store, s, rel));
            }
            env.remove(&rel);
        }
        None
    });
    let (env, _store, s, rel) = found.expect(
        "the filesystem under the temp dir gave no freed inode number to a new file in 5 \
         workspaces of 400 tries: this test needs one that does (ext4, xfs)",
    );
    capture_in_form(&s, true, "w1", &rel, 1);
    env.write(&rel, b"the tool");
    s.commit("w1", 1, true).expect("commit");
    s.recheck_tracked(2).expect("boundary 2");
    scan(&s, ScanPhase::Boundary, 2, None);
    restore_to(&s, 1, "op");
    assert_eq!(env.read(&rel), None, "{rel}: created during the turn");
    assert_eq!(
        env.read("src/a.ts").as_deref(),
        Some(&b"at the message"[..])
    );
}

#[test]
fn a_file_saved_again_with_the_same_bytes_mid_turn_is_not_taken_for_changed() {
    // An editor saves an unchanged buffer during the turn (new mtime, same bytes), then the
    // agent's write tool fails on the file. The capture reads the file and finds the content
    // the turn's scan stored: nothing changed, so nothing is recorded and the file stays one
    // no tool touched. Deleted by the user between turns, it is then left as is by a rewind,
    // as any file changed outside the agent, and listed as such.
    for quick in [false, true] {
        let env = Env::new();
        let store = env.store();
        let s = scanned_once(&env, &store, b"at the message");
        std::thread::sleep(std::time::Duration::from_millis(20));
        env.write("src/a.ts", b"at the message");
        capture_in_form(&s, quick, "w1", "src/a.ts", 1);
        s.commit("w1", 1, false).expect("commit");
        s.recheck_tracked(2).expect("boundary 2");
        scan(&s, ScanPhase::Boundary, 2, None);
        env.remove("src/a.ts");
        s.recheck_tracked(3).expect("boundary 3");
        scan(&s, ScanPhase::Boundary, 3, None);
        let plan = restore_to(&s, 2, "op");
        assert_eq!(env.read("src/a.ts"), None, "quick: {quick}");
        assert_eq!(
            plan.outside.iter().map(|p| p.display()).collect::<Vec<_>>(),
            ["src/a.ts"],
            "quick: {quick}"
        );
    }
}

#[test]
fn a_file_moved_after_a_later_scan_is_known_by_that_scans_index_not_an_earliers() {
    // Whether the index knows a file under another path is asked of its inode counts, built
    // on first use and kept up to date as scans change the index. Here a created file's
    // capture at message 1 builds them; a new file joins the index at message 2's scan; a job
    // moves it and the write tool edits it at its new path. Message 2's index knows its inode: a rewind to message 2 leaves the file
    // with the content the capture found instead of removing the only copy.
    let env = Env::new();
    let store = env.store();
    let s = scanned_once(&env, &store, b"at the message");
    env.write("src/generated.ts", b"written by a job");
    capture_in_form(&s, true, "w1", "src/generated.ts", 1);
    env.write("src/generated.ts", b"the tool");
    s.commit("w1", 1, true).expect("commit");
    env.write("src/b.ts", b"there at message 2");
    std::thread::sleep(std::time::Duration::from_millis(80));
    s.recheck_tracked(2).expect("boundary 2");
    scan(&s, ScanPhase::Boundary, 2, None);
    std::fs::rename(env.cwd.join("src/b.ts"), env.cwd.join("src/c.ts")).expect("mv");
    capture_in_form(&s, true, "w2", "src/c.ts", 2);
    tool_edit_undone(&env, &s, "w2", 2, "src/c.ts", b"there at message 2");
    assert_eq!(
        env.read("src/generated.ts").as_deref(),
        Some(&b"the tool"[..])
    );
}

#[test]
fn a_large_file_the_scan_stored_or_over_the_cap_is_captured_without_waiting() {
    // The form of the call that never waits leaves a file over its `max_bytes` to the one that
    // may (it would read it), except when the capture reads none of its bytes: a file the
    // scan's index stands for, or one over the store's per-file cap. A file changed since the
    // scan is read, so it is left to the other form.
    let env = Env::new();
    let store = env.store_with(StoreOptions {
        max_file_bytes: 4096,
        ..StoreOptions::default()
    });
    env.write("src/big.ts", &[b'x'; 2000]);
    env.write("src/huge.bin", &[b'y'; 8000]);
    let s = scanned_once(&env, &store, b"small");
    let quick = |call: &str, rel: &str| s.try_capture_before_at(call, Path::new(rel), 1, 100);
    let o = quick("w1", "src/big.ts").expect("runs without waiting");
    assert!(
        matches!(
            o,
            Ok(snapshot_store::CaptureOutcome::Captured {
                deduplicated: true,
                ..
            })
        ),
        "{o:?}"
    );
    let o = quick("w2", "src/huge.bin").expect("runs without waiting");
    assert!(
        matches!(
            o,
            Ok(snapshot_store::CaptureOutcome::Uncovered { size: 8000, .. })
        ),
        "{o:?}"
    );
    env.write("src/a.ts", &[b'z'; 1000]);
    assert!(
        quick("w3", "src/a.ts").is_none(),
        "changed since the scan: it would be read"
    );
    tool_edit_undone(&env, &s, "w1", 1, "src/big.ts", &[b'x'; 2000]);
}

/// The inode of `p` (`lstat`).
fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).expect("stat").ino()
}

#[cfg(target_os = "linux")]
#[test]
fn the_index_and_scan_state_are_rewritten_over_a_spare_without_a_new_file_each_time() {
    // Each write of `scan.json` goes over the spare kept beside the file and swaps the two:
    // after the first writes, it takes turns between the same two inodes, and the spare
    // holds the content before. The index itself is not rewritten for a change of a few
    // entries: each scan appends one frame to its delta file, and the base stays as it is.
    let env = Env::new();
    env.write("a", b"0");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let idx = index_files(&env).remove(0);
    let delta = idx.with_file_name("index.delta");
    let base = std::fs::read(&idx).expect("index");
    let base_ino = inode(&idx);
    let state = env.root.join("sessions").join("s1").join("scan.json");
    let state_spare = state.with_file_name(".scan.json.spare");
    let mut seen = std::collections::BTreeSet::new();
    let mut state_seen = std::collections::BTreeSet::new();
    for k in 0..6u64 {
        env.write("a", format!("change {k}").as_bytes());
        let before = std::fs::read(&delta).unwrap_or_default();
        let r = scan(&s, ScanPhase::Boundary, 2 + k, None);
        assert_eq!(names(&r.outside), ["a"], "{r:?}");
        assert_eq!(std::fs::read(&idx).expect("index"), base, "the base as it was");
        assert_eq!(inode(&idx), base_ino);
        let now = std::fs::read(&delta).expect("delta");
        assert!(
            now.len() > before.len() && now.starts_with(&before),
            "one frame appended: {} bytes, {} before",
            now.len(),
            before.len()
        );
        seen.insert(inode(&delta));
        if k >= 1 {
            state_seen.insert(inode(&state));
        }
        let rec = std::fs::read_to_string(&state).expect("scan.json");
        assert!(rec.contains(&format!("\"anchor_seq\":{}", 2 + k)), "{rec}");
    }
    assert_eq!(seen.len(), 1, "the delta's inodes: {seen:?}");
    assert_eq!(state_seen.len(), 2, "scan.json's inodes: {state_seen:?}");
    assert!(state_spare.exists());
    // And the index is whole: a change is found against it, and comes back.
    let r = call(&s, 8, "c", || env.write("a", b"by the shell"));
    assert_eq!(names(&r.modified), ["a"]);
    restore_to(&s, 8, "op");
    assert_eq!(env.read("a").as_deref(), Some(&b"change 5"[..]));
}

#[cfg(target_os = "linux")]
#[test]
fn a_spare_that_is_a_symlink_or_has_another_link_is_left_alone() {
    // Something else in the spare's place is never written through: the write goes the
    // ordinary way (a new file renamed over the index), and the other file keeps its bytes.
    let env = Env::new();
    env.write("a", b"0");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let idx = index_files(&env).remove(0);
    let spare = idx.with_file_name(".index.bin.spare");
    let other = env.root.join("precious");
    std::fs::write(&other, b"not the index").expect("write");
    let _ = std::fs::remove_file(&spare);
    std::os::unix::fs::symlink(&other, &spare).expect("symlink");
    env.write("a", b"1");
    assert_eq!(
        names(&scan(&s, ScanPhase::Boundary, 2, None).outside),
        ["a"]
    );
    assert_eq!(std::fs::read(&other).expect("other"), b"not the index");
    assert!(
        std::fs::symlink_metadata(&spare)
            .expect("spare")
            .file_type()
            .is_symlink()
    );
    // A hard link of the spare elsewhere: not written over either.
    std::fs::remove_file(&spare).expect("rm");
    std::fs::write(&spare, b"spare").expect("write");
    std::fs::hard_link(&spare, other.with_file_name("linked")).expect("link");
    env.write("a", b"2");
    assert_eq!(
        names(&scan(&s, ScanPhase::Boundary, 3, None).outside),
        ["a"]
    );
    assert_eq!(
        std::fs::read(other.with_file_name("linked")).expect("linked"),
        b"spare"
    );
    // The index written each time is whole.
    let r = call(&s, 4, "c", || env.write("a", b"3"));
    assert_eq!(names(&r.modified), ["a"]);
    restore_to(&s, 4, "op");
    assert_eq!(env.read("a").as_deref(), Some(&b"2"[..]));
}

#[test]
fn an_index_rewritten_in_place_with_the_same_size_and_mtime_is_read_again() {
    // Another process's writes swap the index with its spare, so the inode the cached copy
    // was read from comes back every other write, possibly with the same size and mtime
    // (a coarse clock). Here its bytes change in place, size and mtime kept: the next scan
    // must read the file again (it is torn, so the baseline is rebuilt), not trust its copy.
    let env = Env::new();
    env.write("a", b"1");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let idx = index_files(&env).remove(0);
    let mtime = std::fs::metadata(&idx)
        .expect("stat")
        .modified()
        .expect("mtime");
    let ino = inode(&idx);
    let mut bytes = std::fs::read(&idx).expect("index");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&idx)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(&f, &bytes, 0).expect("write");
    f.set_modified(mtime).expect("mtime");
    drop(f);
    assert_eq!(inode(&idx), ino);
    let r = scan(&s, ScanPhase::Boundary, 2, None);
    assert!(r.index_rebuilt.is_some() && r.baseline, "{r:?}");
}

/// The directory of the workspace scan state of `ws`, in the store at `env.root`.
fn workspace_dir(env: &Env, ws: &Path) -> PathBuf {
    let key = snapshot_store::workspace_key(&ws.canonicalize().expect("canonical"));
    env.root.join("workspaces").join(key)
}

/// Dates every file of `dir` `secs` seconds back (their last write).
fn age(dir: &Path, secs: u64) {
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    for e in std::fs::read_dir(dir).expect("list").flatten() {
        let f = std::fs::File::options()
            .write(true)
            .open(e.path())
            .expect("open");
        f.set_times(std::fs::FileTimes::new().set_modified(then))
            .expect("set mtime");
    }
}

#[test]
fn a_workspace_no_session_uses_goes_with_the_blob_sweep_and_its_next_scan_starts_anew() {
    let env = Env::new();
    env.write("a", b"only in the first workspace's baseline");
    let other = env.tmp.path().join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(other.join("b"), b"only in the second workspace's baseline").expect("write");
    let store = env.store_with_blob_files();
    let a = store.session("a", &env.cwd).expect("a");
    let b = store.session("b", &other).expect("b");
    assert!(scan(&a, ScanPhase::Boundary, 1, None).baseline);
    assert!(scan(&b, ScanPhase::Boundary, 1, None).baseline);
    let (wa, wb) = (workspace_dir(&env, &env.cwd), workspace_dir(&env, &other));
    assert!(wa.is_dir() && wb.is_dir());
    assert_eq!(env.blob_count(), 2);
    // The last session of the first workspace goes: its state was written just now, and
    // stays until it has gone unwritten for an hour.
    let gc = a.clear_session().expect("clear");
    assert_eq!((gc.workspaces_removed, gc.blobs_removed), (0, 0));
    assert!(wa.is_dir());
    age(&wa, 2 * 3600);
    age(&wb, 2 * 3600);
    let gc = store.collect_garbage().expect("gc");
    assert_eq!(
        (gc.workspaces_removed, gc.blobs_removed, gc.blobs_kept),
        (1, 1, 1)
    );
    assert!(!wa.exists(), "no session uses it");
    assert!(wb.is_dir(), "session b uses it, however old");
    // The second workspace still works: a shell change comes back.
    call(&b, 1, "b1", || {
        std::fs::write(other.join("b"), b"changed").expect("write")
    });
    let plan = b.plan_restore(1).expect("plan");
    b.restore(&plan, "op-b").expect("restore");
    assert_eq!(
        std::fs::read(other.join("b")).expect("read"),
        b"only in the second workspace's baseline"
    );
    // A new session in the first workspace builds a new baseline, and its changes come back.
    drop(a);
    let c = store.session("c", &env.cwd).expect("c");
    assert!(scan(&c, ScanPhase::Boundary, 1, None).baseline);
    call(&c, 1, "c1", || env.remove("a"));
    restore_to(&c, 1, "op-c");
    assert_eq!(
        env.read("a").as_deref(),
        Some(&b"only in the first workspace's baseline"[..])
    );
}

#[test]
fn a_workspace_is_kept_while_a_scan_holds_it_or_a_session_cannot_be_read() {
    let env = Env::new();
    env.write("a", b"baseline");
    let store = env.store_with_blob_files();
    let a = store.session("a", &env.cwd).expect("a");
    scan(&a, ScanPhase::Boundary, 1, None);
    let elsewhere = env.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let keeper = store.session("keeper", &elsewhere).expect("keeper");
    scan(&keeper, ScanPhase::Boundary, 1, None);
    let wa = workspace_dir(&env, &env.cwd);
    a.clear_session().expect("clear");
    age(&wa, 2 * 3600);
    // A scan of the workspace in another process holds its lock.
    let lock = std::fs::File::open(wa.join("lock")).expect("lock");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    assert_eq!(store.collect_garbage().expect("gc").workspaces_removed, 0);
    drop(lock);
    // A session whose `scan.json` is torn may be using it.
    let sessions = env.root.join("sessions");
    let kdir = std::fs::read_dir(&sessions)
        .expect("sessions")
        .flatten()
        .map(|e| e.path())
        .next()
        .expect("the keeper's directory");
    std::fs::write(kdir.join("scan.json"), b"{\"v\":1,\"workspa").expect("tear");
    let gc = store.collect_garbage().expect("gc");
    assert_eq!((gc.workspaces_removed, gc.blobs_kept), (0, 1));
    assert!(wa.is_dir());
    // Once it is known not to use it, the state goes.
    std::fs::remove_file(kdir.join("scan.json")).expect("rm");
    drop(keeper);
    let gc = store.collect_garbage().expect("gc");
    assert_eq!((gc.workspaces_removed, gc.blobs_removed), (1, 1));
    assert!(!wa.exists());
}

#[test]
fn an_unused_workspace_with_a_newer_builds_index_is_kept_and_one_with_a_damaged_index_goes() {
    let env = Env::new();
    env.write("a", b"baseline");
    let store = env.store_with_blob_files();
    let a = store.session("a", &env.cwd).expect("a");
    scan(&a, ScanPhase::Boundary, 1, None);
    let wa = workspace_dir(&env, &env.cwd);
    a.clear_session().expect("clear");
    let index = wa.join("index.bin");
    let whole = std::fs::read(&index).expect("index");
    // The same index, its version raised: a newer build wrote it. Only its head says so.
    let mut newer = whole.clone();
    newer[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&index, &newer).expect("newer");
    age(&wa, 2 * 3600);
    let blobs = env.blob_count();
    let err = store
        .collect_garbage()
        .expect_err("a newer index stops the sweep");
    assert!(err.to_string().contains("newer"), "{err}");
    assert!(index.is_file(), "left as the newer build wrote it");
    assert_eq!(std::fs::read(&index).expect("index"), newer);
    assert_eq!(env.blob_count(), blobs, "nothing removed");
    // Its head torn off (a damaged file, not a newer build's): the workspace goes.
    std::fs::write(&index, &whole[..10]).expect("tear");
    age(&wa, 2 * 3600);
    let gc = store.collect_garbage().expect("gc");
    assert_eq!(gc.workspaces_removed, 1);
    assert!(!wa.exists());
}

#[test]
fn a_scan_waiting_for_a_workspace_the_sweep_removes_locks_it_anew() {
    let env = Env::new();
    env.write("a", b"baseline");
    let store = env.store();
    let s = env.session(&store);
    scan(&s, ScanPhase::Boundary, 1, None);
    let wa = workspace_dir(&env, &env.cwd);
    // Another process holds the lock, as the sweep does while it removes the directory.
    let lock = std::fs::File::open(wa.join("lock")).expect("lock");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    let r = std::thread::scope(|sc| {
        let waiting = sc.spawn(|| s.scan(&req(ScanPhase::Boundary, 2, None)));
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::rename(&wa, env.tmp.path().join("removed")).expect("remove");
        drop(lock);
        waiting.join().expect("scan thread")
    });
    let r = r.expect("the scan goes on in a new directory");
    assert!(r.baseline, "{r:?}");
    assert!(wa.join("index.bin").is_file());
    call(&s, 2, "c", || env.remove("a"));
    restore_to(&s, 2, "op");
    assert_eq!(env.read("a").as_deref(), Some(&b"baseline"[..]));
}

#[test]
fn a_call_in_flight_keeps_its_before_state_from_another_sessions_scan_and_restore() {
    let env = Env::new();
    env.write("shared.txt", b"base\n");
    env.write("a.txt", b"a0\n");
    let store = env.store();
    let a = store.session("a", &env.cwd).expect("a");
    let b = store.session("b", &env.cwd).expect("b");
    assert!(scan(&a, ScanPhase::Boundary, 1, None).baseline);
    scan(&b, ScanPhase::Boundary, 1, None);
    // A's turn at message 2 changes a.txt; A's next message is 3.
    scan(&a, ScanPhase::Boundary, 2, None);
    call(&a, 2, "a-1", || env.write("a.txt", b"a1\n"));
    scan(&a, ScanPhase::Boundary, 3, None);
    // B's command (message 5) starts: shared.txt half written, new.txt made.
    scan(&b, ScanPhase::Boundary, 5, None);
    scan(&b, ScanPhase::Before, 5, Some("b-1"));
    env.write("shared.txt", b"B half\n");
    env.write("new.txt", b"by B\n");
    // A rewinds to message 2 meanwhile: its scan first takes B's files into the index.
    let ra = scan(&a, ScanPhase::Boundary, 3, None);
    assert_eq!(names(&ra.outside), ["new.txt", "shared.txt"]);
    assert_eq!(
        names(&ra.in_flight),
        ["new.txt", "shared.txt"],
        "B's command runs"
    );
    restore_to(&a, 2, "op-a");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a0\n"[..]));
    // B's command ends; its scan after it records its own changes from their state at its start,
    // and not A's restored a.txt.
    env.write("shared.txt", b"B half\nB done\n");
    let rb = scan(&b, ScanPhase::After, 5, Some("b-1"));
    assert_eq!(names(&rb.created), ["new.txt"]);
    assert_eq!(names(&rb.modified), ["shared.txt"]);
    assert!(rb.in_flight.is_empty(), "no call of another session runs");
    // B's rewind to its message: what its command changed comes back; A's rewind stays.
    restore_to(&b, 5, "op-b");
    assert_eq!(env.read("shared.txt").as_deref(), Some(&b"base\n"[..]));
    assert_eq!(env.read("new.txt"), None);
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a0\n"[..]));
    // A's next scan finds nothing of its own restore to note.
    let ra = scan(&a, ScanPhase::Boundary, 6, None);
    assert!(
        !names(&ra.outside).contains(&"a.txt".to_string()),
        "{:?}",
        ra.outside
    );
}
