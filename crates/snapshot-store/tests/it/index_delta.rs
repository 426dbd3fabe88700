//! The workspace index's delta file (`index.delta`): a scan that changes a few entries
//! appends a frame instead of rewriting the index; the base with its frames read back from
//! disk (by another store handle, which has no copy in memory) is the index the scans left;
//! a delta grown past its threshold is left by the scan (up to its cap) and folded into a
//! new base by `Session::fold_index`, run off the scan's path, or by the scan that would
//! pass the cap; a SIGKILL between a fold's new base and its removal of the delta leaves
//! the new base, the stale delta ignored; a torn last frame leaves the
//! index as the scan before left it, and the next scan finds the rest again; a newer delta
//! fails closed; a SIGKILL right after a frame is written leaves a consistent store.

use std::path::{Path, PathBuf};

use snapshot_store::{
    ScanError, ScanMode, ScanPhase, ScanReport, ScanRequest, Store, StoreOptions,
};

use crate::common::{Env, copy_tree};

fn req(phase: ScanPhase, anchor: u64) -> ScanRequest {
    ScanRequest::new(phase, anchor)
}

/// Every path the scan reported changed, sorted, by kind.
fn found(r: &ScanReport) -> [Vec<String>; 5] {
    let n = |v: &[snapshot_store::RelPath]| {
        let mut v: Vec<String> = v.iter().map(|p| p.display()).collect();
        v.sort();
        v
    };
    [
        n(&r.created),
        n(&r.modified),
        n(&r.deleted),
        n(&r.mode_changed),
        n(&r.outside),
    ]
}

fn nothing() -> [Vec<String>; 5] {
    Default::default()
}

/// The store's one workspace directory.
fn ws_dir(root: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("workspaces"))
        .expect("workspaces")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

/// A copy of `env`'s store and workspace in a new place: its store is another one (no copy
/// of the index in memory), reading the index from the files alone. The workspace is the
/// same directory: the copy's session is opened on `env.cwd`.
fn reread(env: &Env) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tmp");
    copy_tree(&env.root, &dir.path().join("store"));
    let store = Store::open(&dir.path().join("store"), StoreOptions::default()).expect("copy");
    (dir, store)
}

/// A full walk through a copy of `env`'s store finds nothing and counts `files`: the index
/// on disk (base and delta) is the workspace as the last scan saw it.
#[track_caller]
fn on_disk_is_current(env: &Env, files: u64, what: &str) {
    let (_dir, store) = reread(env);
    let s = store.session("s1", &env.cwd).expect("session");
    let r = s.scan(&req(ScanPhase::Boundary, 10_000)).expect("scan");
    assert!(r.index_rebuilt.is_none() && !r.baseline, "{what}: {r:?}");
    assert_eq!(found(&r), nothing(), "{what}");
    assert_eq!(r.files, files, "{what}");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Some random edits, creations, deletions and mode changes among `d<i>/f<j>.txt`.
fn mutate(env: &Env, rng: &mut Rng, step: usize) {
    use std::os::unix::fs::PermissionsExt;
    for k in 0..=rng.below(4) {
        let p = PathBuf::from(format!("d{}/f{}.txt", rng.below(5), rng.below(40)));
        let full = env.p(&p);
        match (full.exists(), rng.below(4)) {
            (true, 0) => std::fs::remove_file(&full).expect("rm"),
            (true, 1) => {
                let mode = std::fs::metadata(&full).expect("meta").permissions().mode();
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode ^ 0o100))
                    .expect("chmod");
            }
            _ => env.write(&p, format!("step {step} {k}").as_bytes()),
        }
    }
}

#[test]
fn scans_append_frames_and_the_index_read_back_from_disk_is_the_one_they_left() {
    let env = Env::new();
    for i in 0..100 {
        env.write(format!("d{}/f{}.txt", i % 5, i / 5), b"start");
    }
    let store = env.store();
    let s = env.session(&store);
    let first = s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
    assert!(first.baseline);
    let dir = ws_dir(&env.root);
    let base = std::fs::read(dir.join("index.bin")).expect("base");
    assert!(
        !dir.join("index.delta").exists(),
        "a baseline writes the whole index"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut delta_len = 0;
    for step in 0..25 {
        let anchor = 2 + step as u64;
        let call = format!("c{step}");
        let mut before = req(ScanPhase::Before, anchor);
        before.call_id = Some(call.clone());
        s.scan(&before).expect("before");
        mutate(&env, &mut rng, step);
        let mut after = req(ScanPhase::After, anchor);
        after.call_id = Some(call);
        let r = s.scan(&after).expect("after");
        assert_eq!(
            std::fs::read(dir.join("index.bin")).expect("base"),
            base,
            "step {step}: the base is not rewritten"
        );
        let now = std::fs::metadata(dir.join("index.delta")).map_or(0, |m| m.len());
        assert!(now >= delta_len, "step {step}: the delta only grows");
        delta_len = now;
        on_disk_is_current(&env, r.files, &format!("step {step}"));
    }
    assert!(delta_len > 0);
    // The inventory counts the delta with the index.
    let inv = store.inventory().expect("inventory");
    let on_disk: u64 = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .map(|e| e.metadata().expect("meta").len())
        .sum();
    assert_eq!(inv.workspaces[0].index_bytes, on_disk);
    assert!(on_disk >= base.len() as u64 + delta_len);
    // Verify and the blob sweep read the base with its delta: nothing is missing, and the
    // changes come back.
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    store.collect_garbage().expect("gc");
    let plan = s.plan_restore(1).expect("plan");
    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    for i in 0..100 {
        let p = format!("d{}/f{}.txt", i % 5, i / 5);
        assert_eq!(env.read(&p).as_deref(), Some(&b"start"[..]), "{p}");
    }
}

/// Long paths: a frame that changes all 250 of them is some 14 KiB, past the 64 KiB
/// threshold on the fifth, past the 256 KiB cap some fourteen frames later.
fn long_name(i: usize) -> String {
    format!("a-rather-long-directory-name/{:0>120}.txt", i)
}

/// Rewrites the 250 long-named files and scans (anchor `1 + round`).
fn long_round(env: &Env, s: &snapshot_store::Session, round: u64) -> ScanReport {
    for i in 0..250 {
        env.write(long_name(i), format!("round {round}").as_bytes());
    }
    let r = s.scan(&req(ScanPhase::Boundary, 1 + round)).expect("scan");
    assert_eq!(r.outside.len(), 250, "round {round}");
    r
}

#[test]
fn a_delta_past_its_threshold_is_not_folded_by_the_scan_but_by_fold_index() {
    let env = Env::new();
    for i in 0..250 {
        env.write(long_name(i), b"0");
    }
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
    assert!(!s.fold_index().expect("nothing to fold"), "no delta yet");
    let dir = ws_dir(&env.root);
    let base = std::fs::read(dir.join("index.bin")).expect("base");
    let mut last = 0;
    for round in 1..=6u64 {
        let r = long_round(&env, &s, round);
        if round > 1 {
            assert_eq!(
                r.mode,
                ScanMode::Watched,
                "round {round}: {:?}",
                r.full_reason
            );
        }
        // The scan only appended: the base as the baseline left it, the delta grown.
        assert_eq!(
            std::fs::read(dir.join("index.bin")).expect("base"),
            base,
            "round {round}"
        );
        let len = std::fs::metadata(dir.join("index.delta"))
            .expect("delta")
            .len();
        assert!(len > last, "round {round}: {len} bytes");
        last = len;
        assert_eq!(
            s.index_fold_due(),
            len > 64 << 10,
            "round {round}: {len} bytes"
        );
        on_disk_is_current(&env, 250, &format!("round {round}"));
    }
    assert!(last > 64 << 10, "past the threshold: {last} bytes");
    // The fold a host runs after the scan returned: a new base, the delta gone, the same
    // index read back by a copy of the store.
    assert!(s.fold_index().expect("fold"), "folded");
    assert!(!s.index_fold_due());
    assert_ne!(std::fs::read(dir.join("index.bin")).expect("base"), base);
    assert!(!dir.join("index.delta").exists());
    on_disk_is_current(&env, 250, "after the fold");
    assert!(!s.fold_index().expect("nothing to fold"), "once");
    // The next scan appends to a new delta, still through the change watcher (the fold
    // wrote the same index: the watcher's report since the last scan still holds).
    let r = long_round(&env, &s, 7);
    assert_eq!(r.mode, ScanMode::Watched, "{:?}", r.full_reason);
    assert!(dir.join("index.delta").exists());
    on_disk_is_current(&env, 250, "after the fold and a scan");
}

#[test]
fn a_delta_past_its_cap_is_folded_by_the_scan() {
    let env = Env::new();
    for i in 0..250 {
        env.write(long_name(i), b"0");
    }
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
    let dir = ws_dir(&env.root);
    let mut bases = vec![std::fs::read(dir.join("index.bin")).expect("base")];
    // No fold is run between the scans: the delta grows to its cap (four times the
    // threshold), and the scan that would pass it folds.
    for round in 1..=24u64 {
        long_round(&env, &s, round);
        let base = std::fs::read(dir.join("index.bin")).expect("base");
        if base != *bases.last().expect("base") {
            bases.push(base);
            assert!(!dir.join("index.delta").exists(), "round {round}");
            assert!(round > 6, "round {round}: folded before the cap");
        } else {
            let len = std::fs::metadata(dir.join("index.delta"))
                .expect("delta")
                .len();
            assert!(len <= 256 << 10, "round {round}: {len} bytes");
        }
        on_disk_is_current(&env, 250, &format!("round {round}"));
    }
    assert!(bases.len() >= 2, "folded at least once");
}

#[test]
fn a_torn_last_frame_leaves_the_index_as_before_and_the_next_scan_finds_the_change_again() {
    let env = Env::new();
    for i in 0..20 {
        env.write(format!("f{i}"), b"0");
    }
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
    env.write("f1", b"first change");
    s.scan(&req(ScanPhase::Boundary, 2)).expect("scan");
    // The store as it is before the next scan: what a torn frame must leave.
    let before = Env::new();
    copy_tree(&env.root, &before.root);
    env.write("f2", b"second change");
    env.remove("f3");
    env.write("new", b"n");
    let r = s.scan(&req(ScanPhase::Boundary, 3)).expect("scan");
    assert_eq!(found(&r)[4], ["f2", "f3", "new"]);
    // Tear the last frame (a crash while it was written): each cut leaves the index as the
    // scan before left it, in this store (whose copy in memory is told stale by the file's
    // size) as in the copy made before.
    let delta = ws_dir(&env.root).join("index.delta");
    let whole = std::fs::read(&delta).expect("delta");
    for cut in [1usize, 7, 40] {
        std::fs::write(&delta, &whole[..whole.len() - cut]).expect("tear");
        let (_d, torn) = reread(&env);
        let (_e, old) = {
            let dir = tempfile::tempdir().expect("tmp");
            copy_tree(&before.root, &dir.path().join("store"));
            let st = Store::open(&dir.path().join("store"), StoreOptions::default()).expect("o");
            (dir, st)
        };
        let a = torn
            .session("s1", &env.cwd)
            .expect("s")
            .scan(&req(ScanPhase::Boundary, 4))
            .expect("scan torn");
        let b = old
            .session("s1", &env.cwd)
            .expect("s")
            .scan(&req(ScanPhase::Boundary, 4))
            .expect("scan before");
        assert!(a.index_rebuilt.is_none(), "cut {cut}: {a:?}");
        assert_eq!(found(&a), found(&b), "cut {cut}");
        assert_eq!(found(&a)[4], ["f2", "f3", "new"], "cut {cut}");
        assert_eq!(a.files, b.files);
    }
    // The store itself: its next scan finds the changes again against the older index, and
    // appends its frame after the valid ones (the torn bytes cut off).
    let r = s.scan(&req(ScanPhase::Boundary, 4)).expect("scan");
    assert_eq!(found(&r)[4], ["f2", "f3", "new"]);
    assert!(r.index_rebuilt.is_none());
    on_disk_is_current(&env, 20, "after the torn frame");
    let r = s.scan(&req(ScanPhase::Boundary, 5)).expect("scan");
    assert_eq!(found(&r), nothing());
}

#[test]
fn a_newer_delta_fails_closed() {
    let env = Env::new();
    env.write("a", b"1");
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
    env.write("a", b"2");
    s.scan(&req(ScanPhase::Boundary, 2)).expect("scan");
    let delta = ws_dir(&env.root).join("index.delta");
    let mut bytes = std::fs::read(&delta).expect("delta");
    assert_eq!(&bytes[..8], b"DSHRWID\n");
    bytes[8] = 9;
    std::fs::write(&delta, &bytes).expect("write");
    let err = s
        .scan(&req(ScanPhase::Boundary, 3))
        .expect_err("newer delta");
    assert!(matches!(err, ScanError::NewerStore(_)), "{err}");
    assert!(
        store.collect_garbage().is_err(),
        "the sweep refuses to guess"
    );
    assert!(ws_dir(&env.root).join("index.bin").exists());
}

#[test]
fn a_kill_right_after_a_frame_is_written_leaves_a_consistent_store() {
    for durable in [false, true] {
        let env = Env::new();
        for i in 0..30 {
            env.write(format!("f{i}"), b"0");
        }
        {
            let store = env.store();
            let s = env.session(&store);
            s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
            env.write("f0", b"one");
            s.scan(&req(ScanPhase::Boundary, 2)).expect("a first frame");
        }
        env.write("f1", b"two");
        env.remove("f2");
        env.write("g", b"new");
        // The child's scan (anchor 5) records the changes, appends its frame and is killed.
        assert!(crate::crash::run_child_as(
            env.tmp.path(),
            "scan",
            "index-delta-appended",
            0,
            durable,
            false
        ));
        let store = env.store();
        let s = env.session(&store);
        // The frame is in place: the index is the workspace as the killed scan saw it.
        let r = s.scan(&req(ScanPhase::Boundary, 6)).expect("scan");
        assert!(r.index_rebuilt.is_none(), "durable {durable}: {r:?}");
        assert_eq!(found(&r), nothing(), "durable {durable}");
        // As a fresh store's full walk counts it, and what the killed scan recorded comes back.
        let fresh = Env::new();
        let f = Store::open(&fresh.root, StoreOptions::default())
            .expect("fresh")
            .session("s1", &env.cwd)
            .expect("s")
            .scan(&req(ScanPhase::Boundary, 1))
            .expect("full walk");
        assert_eq!(r.files, f.files, "durable {durable}");
        // What the killed scan recorded before its frame is in the log, once: the changes
        // it found, listed as made outside the conversation after the scan before it (2).
        let outside = |p: snapshot_store::RestorePlan| -> Vec<String> {
            p.outside.iter().map(|p| p.display()).collect()
        };
        assert_eq!(outside(s.plan_restore(2).expect("plan")), ["f1", "f2", "g"]);
        assert_eq!(
            outside(s.plan_restore(1).expect("plan")),
            ["f0", "f1", "f2", "g"]
        );
    }
}

#[test]
fn a_kill_between_the_folds_new_base_and_the_delta_removal_leaves_a_consistent_index() {
    for durable in [false, true] {
        let env = Env::new();
        for i in 0..250 {
            env.write(long_name(i), b"0");
        }
        let dir = ws_dir_after_baseline(&env);
        let old_base = std::fs::read(dir.join("index.bin")).expect("base");
        {
            let store = env.store();
            let s = env.session(&store);
            for round in 1..=6u64 {
                long_round(&env, &s, round);
            }
            assert!(s.index_fold_due(), "durable {durable}");
        }
        // The child's fold writes the new base and is killed before it removes the delta.
        assert!(crate::crash::run_child_as(
            env.tmp.path(),
            "fold",
            "index-fold-written",
            0,
            durable,
            false
        ));
        // The new base holds every change; the delta beside it names the old base.
        assert_ne!(
            std::fs::read(dir.join("index.bin")).expect("base"),
            old_base
        );
        assert!(dir.join("index.delta").exists(), "durable {durable}");
        on_disk_is_current(&env, 250, &format!("durable {durable}: after the kill"));
        // A scan goes on from it: the stale delta is replaced by a frame for the new base,
        // and the index read back is current.
        let store = env.store();
        let s = env.session(&store);
        let r = s.scan(&req(ScanPhase::Boundary, 20)).expect("scan");
        assert!(
            !s.index_fold_due(),
            "durable {durable}: the stale delta is not counted"
        );
        assert!(r.index_rebuilt.is_none(), "durable {durable}: {r:?}");
        assert_eq!(found(&r), nothing(), "durable {durable}");
        long_round(&env, &s, 20);
        on_disk_is_current(
            &env,
            250,
            &format!("durable {durable}: a frame after the kill"),
        );
    }
}

/// Scans `env`'s workspace once (the baseline) and returns its index directory.
fn ws_dir_after_baseline(env: &Env) -> PathBuf {
    let store = env.store();
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 1)).expect("baseline");
    ws_dir(&env.root)
}
