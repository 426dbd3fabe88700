//! Fault injection on every filesystem call: each call in turn fails with EIO,
//! ENOSPC or EACCES. The error is clear, the pass continues, the store stays
//! readable, and continue/rollback reach exactly the target or the pre-state.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use snapshot_store::{Area, Durability, FaultSeam, FsOp, JournalState, PruneOptions, StoreOptions};

use crate::common::{Env, Snap, assert_snap, tool_edit};

const OFF: usize = usize::MAX;
const ERRNOS: [i32; 3] = [5 /* EIO */, 28 /* ENOSPC */, 13 /* EACCES */];

#[derive(Default)]
pub struct FailNth {
    count: AtomicUsize,
    target: AtomicUsize,
    errno: AtomicUsize,
    pub hit: Mutex<Option<(FsOp, Area, PathBuf)>>,
}

impl FailNth {
    pub fn new() -> Arc<Self> {
        let s = Self::default();
        s.target.store(OFF, Ordering::SeqCst);
        Arc::new(s)
    }
    pub fn arm(&self, n: usize, errno: i32) {
        self.count.store(0, Ordering::SeqCst);
        self.errno.store(errno as usize, Ordering::SeqCst);
        self.target.store(n, Ordering::SeqCst);
        *self.hit.lock().expect("lock") = None;
    }
    pub fn disarm(&self) -> usize {
        self.target.store(OFF, Ordering::SeqCst);
        self.count.load(Ordering::SeqCst)
    }
    pub fn fired(&self) -> bool {
        self.hit.lock().expect("lock").is_some()
    }
}

impl FaultSeam for FailNth {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        let c = self.count.fetch_add(1, Ordering::SeqCst);
        if c == self.target.load(Ordering::SeqCst) {
            *self.hit.lock().expect("lock") = Some((op, area, path.to_path_buf()));
            return Err(io::Error::from_raw_os_error(
                self.errno.load(Ordering::SeqCst) as i32,
            ));
        }
        Ok(())
    }
}

fn os_text(errno: i32) -> String {
    let s = io::Error::from_raw_os_error(errno).to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// A workspace edited over anchors 1 and 2; returns (pre-state, state at anchor 1).
pub fn setup_restore(env: &Env) -> (Snap, Snap) {
    env.write("a", b"a0");
    env.write("b", &vec![b'b'; 100_000]);
    env.write("d/e", b"e0");
    env.write("gone", b"will be deleted");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    let at1 = env.snapshot();
    tool_edit(env, &s, "c1", 1, "a", Some(b"a1"));
    tool_edit(env, &s, "c2", 1, "b", Some(b"b1"));
    tool_edit(env, &s, "c3", 1, "new/deep/f", Some(b"created"));
    s.recheck_tracked(2).expect("recheck");
    tool_edit(env, &s, "c4", 2, "d/e", Some(b"e1"));
    tool_edit(env, &s, "c5", 2, "gone", None);
    (env.snapshot(), at1)
}

/// Files a restore rewrites in place over their old bytes, each written in two
/// halves that leave new bytes followed by old ones (neither state, nor a prefix of
/// either): one shrinks, one grows, one keeps its size. Returns (pre-state, state at
/// anchor 1).
pub fn setup_overwrite(env: &Env) -> (Snap, Snap) {
    env.write("shrink", &[b'y'; 3000]);
    env.write("grow", &[b'p'; 2000]);
    env.write("d/same", &[b's'; 4000]);
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    let at1 = env.snapshot();
    tool_edit(env, &s, "c1", 1, "shrink", Some(&[b'x'; 5000]));
    tool_edit(env, &s, "c2", 1, "grow", Some(&[b'q'; 1200]));
    tool_edit(env, &s, "c3", 2, "d/same", Some(&[b't'; 4000]));
    (env.snapshot(), at1)
}

/// Files a tool wrote before message 1, kept in the session's log at that message, then
/// changed and removed by hand: a restore to 1 brings them back from the log (its plan
/// writes them into blob files first). Returns (pre-state, state at anchor 1).
pub fn setup_kept(env: &Env) -> (Snap, Snap) {
    env.write("stays", b"untouched");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(0).expect("recheck");
    tool_edit(env, &s, "c1", 0, "k1", Some(b"kept one"));
    tool_edit(env, &s, "c2", 0, "deep/k2", Some(b"kept two"));
    tool_edit(env, &s, "c3", 0, "k3", Some(b"kept three"));
    s.recheck_tracked(1).expect("recheck");
    let at1 = env.snapshot();
    env.write("k1", b"changed by hand");
    env.remove("deep/k2");
    env.write("k3", b"also changed by hand, longer");
    s.recheck_tracked(2).expect("recheck");
    assert_eq!(env.blob_count(), 0, "the content is kept in the log");
    (env.snapshot(), at1)
}

#[test]
fn every_fs_call_of_a_restore_from_content_kept_in_the_log_can_fail() {
    plan_and_restore_faults(Durability::ProcessCrash, setup_kept);
}

/// A directory of tracked files that a tool replaced by a file of the same name after
/// message 1 (`rm -rf d && echo > d`): a restore to 1 deletes the file and recreates the
/// directory's files. Returns (pre-state, state at anchor 1).
pub fn setup_dir_became_file(env: &Env) -> (Snap, Snap) {
    env.write("a", b"a0");
    env.write("d/x", b"x0");
    env.write("d/sub/y", b"y0");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    let at1 = env.snapshot();
    tool_edit(env, &s, "c0", 1, "a", Some(b"a1"));
    tool_edit(env, &s, "c1", 1, "d/x", Some(b"x1"));
    tool_edit(env, &s, "c2", 1, "d/sub/y", Some(b"y1"));
    s.recheck_tracked(2).expect("recheck");
    tool_edit(env, &s, "c3", 2, "d/x", None);
    tool_edit(env, &s, "c4", 2, "d/sub/y", None);
    std::fs::remove_dir(env.cwd.join("d/sub")).expect("rmdir");
    std::fs::remove_dir(env.cwd.join("d")).expect("rmdir");
    tool_edit(env, &s, "c5", 2, "d", Some(b"now a file"));
    (env.snapshot(), at1)
}

/// A tracked file that a tool replaced by a directory of the same name after message 1
/// (`rm f && mkdir f && echo > f/x`): a restore to 1 deletes the directory's new files,
/// removes it and writes the file. Returns (pre-state, state at anchor 1).
pub fn setup_file_became_dir(env: &Env) -> (Snap, Snap) {
    env.write("a", b"a0");
    env.write("f", b"the file");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    let at1 = env.snapshot();
    tool_edit(env, &s, "c0", 1, "a", Some(b"a1"));
    tool_edit(env, &s, "c1", 1, "f", None);
    tool_edit(env, &s, "c2", 1, "f/x", Some(b"inside"));
    tool_edit(env, &s, "c3", 1, "f/sub/y", Some(b"deeper"));
    s.recheck_tracked(2).expect("recheck");
    (env.snapshot(), at1)
}

#[test]
fn every_fs_call_of_a_restore_over_a_directory_that_was_a_file_can_fail() {
    plan_and_restore_faults(Durability::ProcessCrash, setup_file_became_dir);
}

#[test]
fn every_fs_call_of_a_restore_under_a_file_that_was_a_directory_can_fail() {
    plan_and_restore_faults(Durability::ProcessCrash, setup_dir_became_file);
}

#[test]
fn every_fs_call_of_plan_and_restore_can_fail() {
    plan_and_restore_faults(Durability::ProcessCrash, setup_restore);
}

#[test]
fn every_fs_call_of_plan_and_restore_can_fail_in_power_loss_mode() {
    plan_and_restore_faults(Durability::PowerLoss, setup_restore);
}

/// A write over a file's old bytes that fails half-way leaves new bytes followed by
/// old ones: continue and rollback take them as the restore's own.
#[test]
fn every_fs_call_of_a_restore_written_over_old_bytes_can_fail() {
    plan_and_restore_faults(Durability::ProcessCrash, setup_overwrite);
}

fn plan_and_restore_faults(durability: Durability, setup: fn(&Env) -> (Snap, Snap)) {
    // Count the calls of a clean run.
    let total = {
        let env = Env::new();
        setup(&env);
        let seam = FailNth::new();
        let store = env.store_with(StoreOptions {
            seam: seam.clone(),
            durability,
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        seam.arm(OFF - 1, 5);
        let plan = s.plan_restore(1).expect("plan");
        let out = s.restore(&plan, "op").expect("restore");
        assert_eq!(out.state, JournalState::Completed);
        seam.disarm()
    };
    assert!(total > 30, "{total}");
    let mut fired = 0;
    for n in 0..total {
        let errno = ERRNOS[n % 3];
        let env = Env::new();
        let (pre, at1) = setup(&env);
        let seam = FailNth::new();
        let store = env.store_with(StoreOptions {
            seam: seam.clone(),
            durability,
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        seam.arm(n, errno);
        let result = s
            .plan_restore(1)
            .map_err(|e| e.to_string())
            .and_then(|plan| s.restore(&plan, "op").map_err(|e| e.to_string()));
        seam.disarm();
        if !seam.fired() {
            continue;
        }
        fired += 1;
        let text = os_text(errno);
        match &result {
            Err(e) => assert!(e.contains(&text), "call {n}: error names the cause: {e}"),
            Ok(out) => {
                for f in &out.failed {
                    assert!(
                        f.error.contains(&text) || f.error.contains("changed"),
                        "call {n}: {f:?}"
                    );
                }
            }
        }
        // The store stays readable; recovery reaches exactly the target, then undo the pre-state.
        let store2 = env.store();
        let s2 = env.session(&store2);
        s2.plan_restore(1)
            .unwrap_or_else(|e| panic!("call {n}: store unreadable: {e}"));
        let open = s2.reconcile_restores().expect("reconcile");
        let statuses = s2.restore_statuses().expect("statuses");
        if let Some(st) = open.first() {
            let rb_env = Env::new();
            crate::common::copy_tree(env.tmp.path(), rb_env.tmp.path());
            let c = s2.continue_restore(&st.op_id).expect("continue");
            assert_eq!(c.state, JournalState::Completed, "call {n}: {c:?}");
            assert_snap(
                &env.snapshot(),
                &at1,
                &format!("call {n}: continue reaches the target"),
            );
            s2.undo_restore(&st.op_id).expect("undo");
            assert_snap(
                &env.snapshot(),
                &pre,
                &format!("call {n}: undo reaches the pre-state"),
            );
            // And on a copy of the interrupted state, rollback reaches the pre-state.
            let rs = rb_env.store();
            let rss = rb_env.session(&rs);
            let rb = rss.rollback_restore(&st.op_id).expect("rollback");
            assert_eq!(rb.state, JournalState::RolledBack, "call {n}: {rb:?}");
            assert_snap(
                &rb_env.snapshot(),
                &pre,
                &format!("call {n}: rollback reaches the pre-state"),
            );
        } else if statuses
            .iter()
            .any(|st| st.state == JournalState::Completed)
        {
            // A path that could not be read for its rescue copy was refused alone, before any
            // mutation: it is as it was, every other path is restored.
            let mut want = at1.clone();
            if let Ok(out) = &result {
                for f in &out.failed {
                    if out.written.contains(&f.path) || out.deleted.contains(&f.path) {
                        continue; // a directory left behind after its path was done
                    }
                    let key = f.display.as_bytes().to_vec();
                    match pre.get(&key) {
                        Some(bytes) => want.insert(key, bytes.clone()),
                        None => want.remove(&key),
                    };
                }
            }
            assert_snap(&env.snapshot(), &want, &format!("call {n}: {result:?}"));
        } else {
            assert_snap(
                &env.snapshot(),
                &pre,
                &format!("call {n}: failed before any mutation"),
            );
            let out = s2
                .restore(&s2.plan_restore(1).expect("plan"), "retry")
                .expect("retry");
            assert_eq!(out.state, JournalState::Completed);
            assert_eq!(env.snapshot(), at1);
        }
    }
    assert!(fired as f64 > total as f64 * 0.9, "{fired}/{total}");
}

#[test]
fn every_fs_call_of_capture_commit_recheck_can_fail() {
    capture_commit_recheck_faults(snapshot_store::DEFAULT_KEEP_IN_LOG_BYTES);
}

#[test]
fn every_fs_call_of_capture_commit_recheck_can_fail_with_blob_files_only() {
    capture_commit_recheck_faults(0);
}

/// Every fs call of a capture, commit, re-check and prune failing in turn, with small
/// files kept in the log up to `keep` bytes (`0`: every content in a blob file).
fn capture_commit_recheck_faults(keep: u64) {
    let run = |seam: &Arc<FailNth>, env: &Env, n: usize, errno: i32| -> Vec<Result<(), String>> {
        let store = env.store_with(StoreOptions {
            seam: seam.clone(),
            keep_in_log_bytes: keep,
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        seam.arm(n, errno);
        let mut r = Vec::new();
        r.push(
            s.capture_before("c1", Path::new("a"))
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
        env.write("a", b"a-after");
        r.push(
            s.commit("c1", 1, true)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
        r.push(
            s.recheck_tracked(2)
                .map(|o| assert!(o.failed.len() <= 1))
                .map_err(|e| e.to_string()),
        );
        r.push(
            s.capture_before("c2", Path::new("sub/b"))
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
        env.write("sub/b", b"b-after");
        r.push(
            s.commit("c2", 2, true)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
        r.push(
            s.prune(PruneOptions::default())
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
        seam.disarm();
        r
    };
    let total = {
        let env = Env::new();
        env.write("a", b"a-before");
        let seam = FailNth::new();
        let r = run(&seam, &env, OFF - 1, 5);
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        seam.disarm()
    };
    for n in 0..total {
        let errno = ERRNOS[n % 3];
        let env = Env::new();
        env.write("a", b"a-before");
        let seam = FailNth::new();
        let r = run(&seam, &env, n, errno);
        if !seam.fired() {
            continue;
        }
        for e in r.iter().filter_map(|x| x.as_ref().err()) {
            assert!(e.contains(&os_text(errno)), "call {n}: {e}");
        }
        // Readable, and whatever was acknowledged is restorable exactly.
        let store = env.store();
        let s = env.session(&store);
        let plan = s
            .plan_restore(1)
            .unwrap_or_else(|e| panic!("call {n}: {e}"));
        s.restore(&plan, "op").expect("restore");
        if r[0].is_ok() && r[1].is_ok() {
            assert_eq!(env.read("a").as_deref(), Some(&b"a-before"[..]), "call {n}");
        }
        if r[3].is_ok() && r[4].is_ok() {
            assert_eq!(env.read("sub/b"), None, "call {n}");
        }
    }
}

/// A restore left open by one damaged blob (repaired afterwards); returns (pre, target).
fn open_restore(env: &Env) -> (Snap, Snap) {
    let (pre, at1) = setup_restore(env);
    let store = env.store();
    let s = env.session(&store);
    let plan = s.plan_restore(1).expect("plan");
    let sha = plan
        .actions
        .iter()
        .find_map(|a| match &a.action {
            snapshot_store::Action::Write { sha256, .. } if a.display == "b" => {
                Some(sha256.clone())
            }
            _ => None,
        })
        .expect("b is written");
    let blob = env.root.join("blobs").join(&sha);
    let good = std::fs::read(&blob).expect("blob");
    std::fs::write(&blob, b"damaged").expect("damage");
    assert_eq!(
        s.restore(&plan, "op").expect("restore").state,
        JournalState::Open
    );
    std::fs::write(&blob, good).expect("repair");
    (pre, at1)
}

#[test]
fn every_fs_call_of_continue_rollback_and_undo_can_fail() {
    for which in ["continue", "rollback", "undo"] {
        let run = |seam: &Arc<FailNth>,
                   env: &Env,
                   n: usize,
                   errno: i32|
         -> Result<JournalState, String> {
            let store = env.store_with(StoreOptions {
                seam: seam.clone(),
                ..StoreOptions::default()
            });
            let s = env.session(&store);
            if which == "undo" {
                s.continue_restore("op").expect("continue");
            }
            seam.arm(n, errno);
            let r = match which {
                "continue" => s.continue_restore("op"),
                "rollback" => s.rollback_restore("op"),
                _ => s.undo_restore("op"),
            };
            seam.disarm();
            r.map(|o| o.state).map_err(|e| e.to_string())
        };
        let total = {
            let env = Env::new();
            open_restore(&env);
            let seam = FailNth::new();
            run(&seam, &env, OFF - 1, 5).expect("clean run");
            seam.disarm()
        };
        assert!(total > 10, "{which}: {total}");
        for n in 0..total {
            let errno = ERRNOS[n % 3];
            let env = Env::new();
            let (pre, at1) = open_restore(&env);
            let seam = FailNth::new();
            let r = run(&seam, &env, n, errno);
            if let Err(e) = &r {
                assert!(e.contains(&os_text(errno)), "{which} call {n}: {e}");
            }
            // Faults off: the same operation finishes the job exactly.
            let store = env.store();
            let s = env.session(&store);
            let st = s
                .restore_status("op")
                .unwrap_or_else(|e| panic!("{which} call {n}: {e}"));
            match which {
                "continue" => {
                    if st.state == JournalState::Open {
                        s.continue_restore("op")
                            .unwrap_or_else(|e| panic!("{which} call {n}: {e}"));
                    }
                    assert_snap(&env.snapshot(), &at1, &format!("{which} call {n}"));
                }
                "rollback" => {
                    if st.state == JournalState::Open {
                        let o = s
                            .rollback_restore("op")
                            .unwrap_or_else(|e| panic!("{which} call {n}: {e}"));
                        assert_eq!(o.state, JournalState::RolledBack, "{which} call {n}: {o:?}");
                    }
                    assert_snap(&env.snapshot(), &pre, &format!("{which} call {n}"));
                }
                _ => {
                    if st.state == JournalState::Completed {
                        let o = s
                            .undo_restore("op")
                            .unwrap_or_else(|e| panic!("{which} call {n}: {e}"));
                        assert_eq!(o.state, JournalState::Undone, "{which} call {n}: {o:?}");
                    }
                    assert_snap(&env.snapshot(), &pre, &format!("{which} call {n}"));
                }
            }
        }
    }
}

#[test]
fn every_fs_call_of_compaction_can_fail() {
    // One big log, copied for each fault: 400 commits of one path, most of it dead.
    let base = Env::new();
    {
        let store = base.store();
        let s = base.session(&store);
        for i in 0..400u64 {
            base.write("f", format!("f at {i}").as_bytes());
            tool_edit(&base, &s, &format!("c{i}"), 10 + i, "f", Some(b"tool"));
        }
    }
    let log = |env: &Env| env.root.join("sessions/s1/records.log");
    let full = std::fs::metadata(log(&base)).expect("log").len();
    let run = |seam: &Arc<FailNth>, env: &Env, n: usize, errno: i32| -> Result<(), String> {
        let store = env.store_with(StoreOptions {
            seam: seam.clone(),
            compact_min_bytes: crate::crash::SMALL_LOG,
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        seam.arm(n, errno);
        let r = s
            .prune(PruneOptions {
                keep_groups: 2,
                keep_journals: 10,
            })
            .map(|_| ())
            .map_err(|e| e.to_string());
        seam.disarm();
        r
    };
    let total = {
        let env = Env::new();
        crate::common::copy_tree(base.tmp.path(), env.tmp.path());
        let seam = FailNth::new();
        run(&seam, &env, OFF - 1, 5).expect("prune");
        assert!(
            std::fs::metadata(log(&env)).expect("log").len() < full / 4,
            "compacted"
        );
        seam.disarm()
    };
    let mut fired = 0;
    for n in 0..total {
        let errno = ERRNOS[n % 3];
        let env = Env::new();
        crate::common::copy_tree(base.tmp.path(), env.tmp.path());
        let seam = FailNth::new();
        let r = run(&seam, &env, n, errno);
        if !seam.fired() {
            continue;
        }
        fired += 1;
        if let Err(e) = &r {
            assert!(e.contains(&os_text(errno)), "call {n}: {e}");
        }
        // Either log is whole: every group or the newest two, exactly restorable.
        let store = env.store_with(StoreOptions {
            compact_min_bytes: crate::crash::SMALL_LOG,
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        let anchors = s.anchors().unwrap_or_else(|e| panic!("call {n}: {e}"));
        assert!(
            anchors == vec![408, 409] || anchors.len() == 400,
            "call {n}: {anchors:?}"
        );
        let out = s
            .restore(&s.plan_restore(409).expect("plan"), "op")
            .expect("restore");
        assert!(out.failed.is_empty(), "call {n}: {out:?}");
        assert_eq!(env.read("f").as_deref(), Some(&b"f at 399"[..]), "call {n}");
        s.prune(PruneOptions {
            keep_groups: 2,
            keep_journals: 10,
        })
        .expect("prune after the fault");
        assert_eq!(s.anchors().expect("anchors"), vec![408, 409]);
        assert!(
            std::fs::metadata(log(&env)).expect("log").len() < full / 4,
            "call {n}"
        );
    }
    assert!(fired > 0);
}

#[test]
fn every_fs_call_of_migration_can_fail() {
    let run = |seam: &Arc<FailNth>, dir: &Path, n: usize, errno: i32| -> Vec<Result<(), String>> {
        seam.arm(n, errno);
        let mut r = Vec::new();
        match snapshot_store::Store::open(
            &dir.join("store"),
            StoreOptions {
                seam: seam.clone(),
                ..StoreOptions::default()
            },
        ) {
            Err(e) => r.push(Err(e.to_string())),
            Ok(store) => {
                for (id, ws) in [("fx-a", "ws-a"), ("fx/b%", "ws-b")] {
                    r.push(
                        store
                            .session(id, &dir.join(ws))
                            .map_err(|e| e.to_string())
                            .and_then(|s| s.anchors().map(|_| ()).map_err(|e| e.to_string())),
                    );
                }
            }
        }
        seam.disarm();
        r
    };
    let total = {
        let tmp = crate::migrate::fixture_copy();
        let seam = FailNth::new();
        let r = run(&seam, tmp.path(), OFF - 1, 5);
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        seam.disarm()
    };
    let mut fired = 0;
    for n in 0..total {
        let errno = ERRNOS[n % 3];
        let tmp = crate::migrate::fixture_copy();
        let seam = FailNth::new();
        let r = run(&seam, tmp.path(), n, errno);
        if !seam.fired() {
            continue;
        }
        fired += 1;
        for e in r.iter().filter_map(|x| x.as_ref().err()) {
            assert!(e.contains(&os_text(errno)), "call {n}: {e}");
        }
        // The next open finishes the migration; nothing was lost.
        crate::migrate::check_fixture(tmp.path());
    }
    assert!(fired > 10, "{fired}/{total}");
}
