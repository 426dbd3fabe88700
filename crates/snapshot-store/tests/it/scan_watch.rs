//! The change watcher against the full walk: random creates, edits, deletes, renames,
//! directory moves and chmods, each scanned once through the watcher and once by a full
//! walk of the same workspace (another store, so another index), with the same changes
//! recorded; an overflow and a turned-off watcher fall back to the full walk.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use snapshot_store::{ScanMode, ScanPhase, ScanReport, ScanRequest, Store, StoreOptions};

use crate::common::Env;

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn req(phase: ScanPhase, anchor: u64, call: Option<&str>, watch: bool) -> ScanRequest {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_string);
    r.watch = watch;
    r
}

/// What a scan found, as sorted path lists.
fn found(r: &ScanReport) -> [Vec<String>; 4] {
    let n = |v: &[snapshot_store::RelPath]| {
        let mut v: Vec<String> = v.iter().map(|p| p.display()).collect();
        v.sort();
        v
    };
    [n(&r.created), n(&r.modified), n(&r.deleted), n(&r.mode_changed)]
}

/// Every regular file and directory under `dir` (relative), `.git` and ignored `out/` left out.
fn entries(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let rel = e.path().strip_prefix(dir).expect("under").to_path_buf();
            if rel.starts_with(".git") || rel.starts_with("out") || rel == Path::new(".gitignore") {
                continue;
            }
            if e.file_type().expect("type").is_dir() {
                dirs.push(rel);
                stack.push(e.path());
            } else {
                files.push(rel);
            }
        }
    }
    files.sort();
    dirs.sort();
    (files, dirs)
}

/// One random change to the workspace `ws`.
fn mutate(ws: &Path, rng: &mut Rng, step: usize) {
    let (files, dirs) = entries(ws);
    let pick_dir = |rng: &mut Rng| -> PathBuf {
        if dirs.is_empty() || rng.below(4) == 0 {
            PathBuf::new()
        } else {
            dirs[rng.below(dirs.len())].clone()
        }
    };
    match rng.below(9) {
        0 | 1 => {
            let d = pick_dir(rng);
            std::fs::write(ws.join(&d).join(format!("f{step}.txt")), format!("new {step}")).expect("create");
        }
        2 | 3 if !files.is_empty() => {
            let f = &files[rng.below(files.len())];
            // Same size now and then (the racy window and the watcher must both see it).
            let body = if rng.below(2) == 0 { "same-size".to_string() } else { format!("edit {step} {}", rng.next()) };
            std::fs::write(ws.join(f), body).expect("edit");
        }
        4 if !files.is_empty() => {
            std::fs::remove_file(ws.join(&files[rng.below(files.len())])).expect("rm");
        }
        5 if !files.is_empty() => {
            let f = &files[rng.below(files.len())];
            let to = pick_dir(rng).join(format!("r{step}.txt"));
            std::fs::rename(ws.join(f), ws.join(to)).expect("rename");
        }
        6 => {
            // A new directory with files, or one moved under another name (or into another).
            if dirs.is_empty() || rng.below(2) == 0 {
                let d = pick_dir(rng).join(format!("d{step}"));
                std::fs::create_dir_all(ws.join(&d).join("sub")).expect("mkdir");
                std::fs::write(ws.join(&d).join("a.txt"), "a").expect("write");
                std::fs::write(ws.join(&d).join("sub/b.txt"), "b").expect("write");
                std::fs::write(ws.join(&d).join("skip.log"), "ignored").expect("write");
            } else {
                let from = &dirs[rng.below(dirs.len())];
                let to = PathBuf::from(format!("m{step}"));
                std::fs::rename(ws.join(from), ws.join(&to)).expect("mv dir");
            }
        }
        7 if !files.is_empty() => {
            let f = ws.join(&files[rng.below(files.len())]);
            let mode = std::fs::metadata(&f).expect("meta").permissions().mode();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode ^ 0o100)).expect("chmod");
        }
        8 if !dirs.is_empty() => {
            std::fs::remove_dir_all(ws.join(&dirs[rng.below(dirs.len())])).expect("rm -r");
        }
        _ => {
            // An ignored file and one in an ignored directory: never a change.
            std::fs::create_dir_all(ws.join("out")).expect("mkdir out");
            std::fs::write(ws.join("out").join(format!("o{step}")), "x").expect("write");
            std::fs::write(ws.join(format!("x{step}.log")), "x").expect("write");
        }
    }
}

fn second_store(env: &Env) -> Store {
    Store::open(&env.tmp.path().join("store-full"), StoreOptions::default()).expect("store 2")
}

#[test]
fn watched_scans_record_what_full_walks_record_on_random_changes() {
    let env = Env::new();
    env.write(".gitignore", b"*.log\nout/\n");
    env.write("src/a.txt", b"alpha");
    env.write("src/lib/b.txt", b"bravo");
    env.write("docs/c.txt", b"charlie");
    let (sa, sb) = (env.store(), second_store(&env));
    let (wa, fb) = (env.session(&sa), sb.session("s1", &env.cwd).expect("session"));
    for seed in [7u64, 1234567, 987654321] {
        let mut rng = Rng(seed);
        for step in 0..40 {
            let anchor = step as u64 + 1;
            let id = format!("c{seed}-{step}");
            let before_w = wa.scan(&req(ScanPhase::Before, anchor, Some(&id), true)).expect("scan");
            let before_f = fb.scan(&req(ScanPhase::Before, anchor, Some(&id), false)).expect("scan");
            assert_eq!(found(&before_w), found(&before_f), "before, seed {seed} step {step}");
            for k in 0..=rng.below(3) {
                mutate(&env.cwd, &mut rng, step * 10 + k);
            }
            let w = wa.scan(&req(ScanPhase::After, anchor, Some(&id), true)).expect("scan");
            let f = fb.scan(&req(ScanPhase::After, anchor, Some(&id), false)).expect("scan");
            assert_eq!(f.mode, ScanMode::Full);
            assert_eq!(w.mode, ScanMode::Watched, "{:?}", w.full_reason);
            assert_eq!(found(&w), found(&f), "after, seed {seed} step {step}");
            assert_eq!(w.files, f.files, "seed {seed} step {step}");
            assert_eq!(w.recorded, f.recorded, "seed {seed} step {step}");
        }
    }
    // Both indexes name the same files: a full walk through the watched store finds nothing.
    wa.mark_watch_overflowed();
    let r = wa.scan(&req(ScanPhase::Boundary, 999, None, true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Full);
    assert!(r.full_reason.as_deref().is_some_and(|w| w.contains("overflowed")), "{:?}", r.full_reason);
    assert_eq!(found(&r), [vec![], vec![], vec![], vec![]] as [Vec<String>; 4]);
}

#[test]
fn the_first_scan_walks_in_full_and_a_shell_edit_and_rm_come_back_through_the_watcher() {
    let env = Env::new();
    env.write("a.txt", b"one");
    env.write("d/b.txt", b"two");
    let store = env.store();
    let s = env.session(&store);
    let first = s.scan(&req(ScanPhase::Boundary, 1, None, true)).expect("scan");
    assert_eq!(first.mode, ScanMode::Full);
    assert!(first.full_reason.is_some());
    s.scan(&req(ScanPhase::Before, 1, Some("c1"), true)).expect("scan");
    std::fs::write(env.p("a.txt"), b"changed").expect("edit");
    std::fs::remove_file(env.p("d/b.txt")).expect("rm");
    let r = s.scan(&req(ScanPhase::After, 1, Some("c1"), true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Watched, "{:?}", r.full_reason);
    assert_eq!(found(&r)[1], vec!["a.txt".to_string()]);
    assert_eq!(found(&r)[2], vec!["d/b.txt".to_string()]);
    let plan = s.plan_restore(1).expect("plan");
    let out = s.restore(&plan, "op1").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"one"[..]));
    assert_eq!(env.read("d/b.txt").as_deref(), Some(&b"two"[..]));
}

#[test]
fn an_overflow_sends_the_next_scan_to_a_full_walk_that_still_sees_every_change() {
    let env = Env::new();
    env.write("a.txt", b"one");
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1, None, true)).expect("scan");
    std::fs::write(env.p("a.txt"), b"edited").expect("edit");
    std::fs::write(env.p("new.txt"), b"n").expect("create");
    s.mark_watch_overflowed();
    let r = s.scan(&req(ScanPhase::After, 1, Some("c"), true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Full);
    assert_eq!(found(&r)[0], vec!["new.txt".to_string()]);
    assert_eq!(found(&r)[1], vec!["a.txt".to_string()]);
    // The full walk leaves the watcher in step: the next scan is watched again.
    std::fs::remove_file(env.p("new.txt")).expect("rm");
    let r = s.scan(&req(ScanPhase::After, 1, Some("d"), true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Watched, "{:?}", r.full_reason);
    assert_eq!(found(&r)[2], vec!["new.txt".to_string()]);
}

#[test]
fn without_a_watcher_every_scan_walks_in_full_and_sees_every_change() {
    let env = Env::new();
    env.write("a.txt", b"one");
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1, None, false)).expect("scan");
    std::fs::write(env.p("a.txt"), b"edited").expect("edit");
    let r = s.scan(&req(ScanPhase::After, 1, Some("c"), false)).expect("scan");
    assert_eq!(r.mode, ScanMode::Full);
    assert!(r.full_reason.as_deref().is_some_and(|w| w.contains("no change watcher")), "{:?}", r.full_reason);
    assert_eq!(found(&r)[1], vec!["a.txt".to_string()]);
}

#[test]
fn an_ignore_file_change_walks_in_full() {
    let env = Env::new();
    env.write(".gitignore", b"*.log\n");
    env.write("keep.log", b"log");
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1, None, true)).expect("scan");
    s.scan(&req(ScanPhase::Before, 1, Some("c"), true)).expect("scan");
    std::fs::write(env.p(".gitignore"), b"").expect("edit");
    let r = s.scan(&req(ScanPhase::After, 1, Some("c"), true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Full);
    assert!(r.full_reason.as_deref().is_some_and(|w| w.contains("ignore file")), "{:?}", r.full_reason);
}

#[test]
fn a_session_handle_that_has_not_walked_yet_walks_in_full_and_a_file_created_since_is_removed_by_the_rewind() {
    // A write tool's capture of a file no scan saw takes it for created only where the
    // handle's last walk listed its directory without it; a watched scan lists nothing. A
    // session that has not walked the workspace yet (a fork's child, a reopened session)
    // has no listing of its own: its first scan walks in full, so a file created after it
    // is recorded absent there and the rewind removes it.
    let env = Env::new();
    env.write("a.txt", b"one");
    let store = env.store();
    let first = env.session(&store);
    first.scan(&req(ScanPhase::Boundary, 1, None, true)).expect("scan");
    let r = first.scan(&req(ScanPhase::Boundary, 2, None, true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Watched, "{:?}", r.full_reason);
    let s = store.session("s2", &env.cwd).expect("session");
    let r = s.scan(&req(ScanPhase::Boundary, 3, None, true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Full, "{:?}", r.full_reason);
    std::fs::write(env.p("new.txt"), b"").expect("create");
    s.capture_before_at("c1", Path::new("new.txt"), 3).expect("capture");
    s.commit("c1", 3, false).expect("commit");
    let plan = s.plan_restore(3).expect("plan");
    assert!(s.restore(&plan, "op1").expect("restore").failed.is_empty());
    assert_eq!(env.read("new.txt"), None);
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"one"[..]));
    // With its own walk's listing in place, the session's scans are watched again.
    s.scan(&req(ScanPhase::Boundary, 4, None, true)).expect("scan");
    let r = s.scan(&req(ScanPhase::Boundary, 5, None, true)).expect("scan");
    assert_eq!(r.mode, ScanMode::Watched, "{:?}", r.full_reason);
}
