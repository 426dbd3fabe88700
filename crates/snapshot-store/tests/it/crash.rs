//! Crash tests with real processes: a child process (this test binary, re-run
//! with an env var naming the scenario and crash point) is SIGKILLed when it
//! reaches the point; the parent reopens the store and checks that continue or
//! rollback yields exactly the post- or the pre-state.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use snapshot_store::{
    CommitOutcome, CrashPoint, FaultSeam, JournalState, PruneOptions, Store, StoreOptions,
};

use crate::common::{
    Env, GROUP, SESSION, Snap, assert_snap, contains, copy_tree, log_records, tool_edit,
};
use crate::faults::setup_restore;

const SCENARIO: &str = "SNAPSHOT_STORE_CRASH_SCENARIO";
const POINT: &str = "SNAPSHOT_STORE_CRASH_POINT";
const HIT: &str = "SNAPSHOT_STORE_CRASH_HIT";
const DIR: &str = "SNAPSHOT_STORE_CRASH_DIR";
const DURABLE: &str = "SNAPSHOT_STORE_CRASH_DURABLE";
const REACHED: &str = "CRASH-POINT-REACHED";
/// Compaction threshold of the crash and compaction tests (small logs compact).
pub const SMALL_LOG: u64 = 16 * 1024;

struct StopAt {
    name: String,
    hit: usize,
    seen: AtomicUsize,
}

impl FaultSeam for StopAt {
    fn crash_point(&self, p: CrashPoint) {
        if p.name() == self.name && self.seen.fetch_add(1, Ordering::SeqCst) == self.hit {
            println!("{REACHED}");
            let _ = std::io::stdout().flush();
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}

/// The child side: runs one scenario with a seam that stops at the named point.
#[test]
#[ignore = "child process of the crash tests; run by them"]
fn crash_child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let point = std::env::var(POINT).expect("point");
    let hit: usize = std::env::var(HIT)
        .expect("hit")
        .parse()
        .expect("hit number");
    let dir = std::path::PathBuf::from(std::env::var(DIR).expect("dir"));
    let seam = Arc::new(StopAt {
        name: point,
        hit,
        seen: AtomicUsize::new(0),
    });
    let durability = if std::env::var(DURABLE).is_ok() {
        snapshot_store::Durability::PowerLoss
    } else {
        snapshot_store::Durability::ProcessCrash
    };
    let store = Store::open(
        &dir.join("store"),
        StoreOptions {
            seam,
            durability,
            compact_min_bytes: SMALL_LOG,
            ..StoreOptions::default()
        },
    )
    .expect("open");
    if scenario == "migrate" {
        // The migration runs inside `Store::open`; using each session finishes it.
        for (id, ws) in [("fx-a", "ws-a"), ("fx/b%", "ws-b")] {
            store
                .session(id, &dir.join(ws))
                .expect("session")
                .anchors()
                .expect("anchors");
        }
        println!("CRASH-POINT-NOT-REACHED");
        return;
    }
    let s = store.session("s1", &dir.join("ws")).expect("session");
    match scenario.as_str() {
        "restore" => {
            let plan = s.plan_restore(1).expect("plan");
            s.restore(&plan, "op").expect("restore");
        }
        "continue" => {
            s.continue_restore("op").expect("continue");
        }
        "rollback" => {
            s.rollback_restore("op").expect("rollback");
        }
        "undo" => {
            s.undo_restore("op").expect("undo");
        }
        "commit" => {
            s.capture_before("c9", Path::new("a")).expect("capture");
            std::fs::write(dir.join("ws/a"), b"a-after").expect("tool write");
            s.commit("c9", 3, true).expect("commit");
        }
        "prune" => {
            s.prune(PruneOptions {
                keep_groups: 2,
                keep_journals: 10,
            })
            .expect("prune");
        }
        other => panic!("unknown scenario {other}"),
    }
    println!("CRASH-POINT-NOT-REACHED");
}

/// Runs the child; true when it reached the point and was SIGKILLed there.
fn run_child(dir: &Path, scenario: &str, point: &str, hit: usize) -> bool {
    run_child_with(dir, scenario, point, hit, false)
}

fn run_child_with(dir: &Path, scenario: &str, point: &str, hit: usize, durable: bool) -> bool {
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = Command::new(exe);
    if durable {
        cmd.env(DURABLE, "1");
    }
    let mut child = cmd
        .args([
            "crash::crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO, scenario)
        .env(POINT, point)
        .env(HIT, hit.to_string())
        .env(DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let mut reached = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if line.contains(REACHED) {
            reached = true;
            break;
        }
    }
    if reached {
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("wait");
        assert!(!status.success());
        return true;
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// Visits each hit of `point` (indexed points occur once per action) until the child no longer reaches it.
fn each_hit(point: &str, mut f: impl FnMut(usize) -> bool) {
    let mut hit = 0;
    while f(hit) {
        hit += 1;
        assert!(hit < 100, "{point}: runaway");
    }
    assert!(hit > 0, "crash point {point} was never reached");
}

/// After a crash, recovery on this copy and on a second copy of the same state.
fn check_recovery(env: &Env, pre: &Snap, post: &Snap, what: &str) {
    let copy = Env::new();
    copy_tree(env.tmp.path(), copy.tmp.path());
    let store = env.store();
    let s = env.session(&store);
    let open = s.reconcile_restores().expect("reconcile");
    let statuses = s.restore_statuses().expect("statuses");
    if let Some(op) = open.first() {
        let c = s.continue_restore(&op.op_id).expect("continue");
        assert_eq!(c.state, JournalState::Completed, "{what}: {c:?}");
        assert_snap(
            &env.snapshot(),
            post,
            &format!("{what}: continue reaches the post-state"),
        );
        s.undo_restore(&op.op_id).expect("undo");
        assert_snap(
            &env.snapshot(),
            pre,
            &format!("{what}: undo reaches the pre-state"),
        );
        let cstore = copy.store();
        let cs = copy.session(&cstore);
        let rb = cs.rollback_restore(&op.op_id).expect("rollback");
        assert_eq!(rb.state, JournalState::RolledBack, "{what}: {rb:?}");
        assert_snap(
            &copy.snapshot(),
            pre,
            &format!("{what}: rollback reaches the pre-state"),
        );
    } else if statuses
        .iter()
        .any(|st| st.state == JournalState::Completed)
    {
        assert_snap(&env.snapshot(), post, &format!("{what}: completed"));
    } else {
        assert_snap(
            &env.snapshot(),
            pre,
            &format!("{what}: nothing changed before the journal"),
        );
        let out = s
            .restore(&s.plan_restore(1).expect("plan"), "retry")
            .expect("retry");
        assert_eq!(out.state, JournalState::Completed);
        assert_snap(
            &env.snapshot(),
            post,
            &format!("{what}: a fresh restore works"),
        );
    }
}

#[test]
fn kill_during_restore_then_continue_or_rollback_is_exact() {
    restore_kills(false);
}

#[test]
fn kill_during_power_loss_mode_restore_then_continue_or_rollback_is_exact() {
    restore_kills(true);
}

fn restore_kills(durable: bool) {
    for point in [
        "restore-rescued",
        "restore-journal-written",
        "restore-action-applied",
        "restore-action-logged",
        "restore-action-partial",
        "restore-before-complete",
    ] {
        if durable && point == "restore-action-partial" {
            continue; // power-loss mode replaces files through a temporary name
        }
        each_hit(point, |hit| {
            let env = Env::new();
            let (pre, at1) = setup_restore(&env);
            if !run_child_with(env.tmp.path(), "restore", point, hit, durable) {
                return false;
            }
            check_recovery(
                &env,
                &pre,
                &at1,
                &format!("{point}#{hit} durable={durable}"),
            );
            true
        });
    }
}

/// A restore left open (one damaged blob, repaired afterwards).
fn open_journal(env: &Env) -> (Snap, Snap) {
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
    let out = s.restore(&plan, "op").expect("restore");
    assert_eq!(out.state, JournalState::Open);
    std::fs::write(&blob, good).expect("repair");
    (pre, at1)
}

#[test]
fn kill_during_continue_and_rollback_is_recoverable() {
    for (scenario, point) in [
        ("continue", "restore-action-applied"),
        ("continue", "restore-action-logged"),
        ("continue", "restore-before-complete"),
        ("continue", "restore-action-partial"),
        ("rollback", "rollback-action-applied"),
        ("rollback", "rollback-before-complete"),
        ("rollback", "rollback-action-partial"),
    ] {
        each_hit(point, |hit| {
            let env = Env::new();
            let (pre, at1) = open_journal(&env);
            if !run_child(env.tmp.path(), scenario, point, hit) {
                return false;
            }
            let what = format!("{scenario}/{point}#{hit}");
            let copy = Env::new();
            copy_tree(env.tmp.path(), copy.tmp.path());
            let store = env.store();
            let s = env.session(&store);
            let st = s.restore_status("op").expect("status");
            if st.state == JournalState::Open {
                let rb = s.rollback_restore("op").expect("rollback");
                assert_eq!(rb.state, JournalState::RolledBack, "{what}: {rb:?}");
                assert_snap(
                    &env.snapshot(),
                    &pre,
                    &format!("{what}: rollback reaches the pre-state"),
                );
                let cstore = copy.store();
                let cs = copy.session(&cstore);
                let c = cs.continue_restore("op").expect("continue");
                assert_eq!(c.state, JournalState::Completed, "{what}: {c:?}");
                assert_snap(
                    &copy.snapshot(),
                    &at1,
                    &format!("{what}: continue reaches the post-state"),
                );
            } else if st.state == JournalState::Completed {
                assert_snap(&env.snapshot(), &at1, &what);
            } else {
                assert_snap(&env.snapshot(), &pre, &what);
            }
            true
        });
    }
}

/// An undo killed while it rewrites a file in place: running the undo again (what
/// the host does after a restart) reaches exactly the pre-restore state, the torn
/// file being recognised as the undo's own unfinished write, not as a change since.
#[test]
fn kill_during_undo_then_undo_again_is_exact() {
    each_hit("rollback-action-partial", |hit| {
        let env = Env::new();
        let (pre, at1) = setup_restore(&env);
        {
            let store = env.store();
            let s = env.session(&store);
            let out = s
                .restore(&s.plan_restore(1).expect("plan"), "op")
                .expect("restore");
            assert_eq!(out.state, JournalState::Completed);
            assert_snap(&env.snapshot(), &at1, "restored");
        }
        if !run_child(env.tmp.path(), "undo", "rollback-action-partial", hit) {
            return false;
        }
        let what = format!("undo/rollback-action-partial#{hit}");
        let store = env.store();
        let s = env.session(&store);
        assert_eq!(
            s.undo_changed_paths("op").expect("changed"),
            Vec::<snapshot_store::RelPath>::new(),
            "{what}: the torn file is the undo's own"
        );
        s.undo_restore("op").expect("undo again");
        assert_snap(
            &env.snapshot(),
            &pre,
            &format!("{what}: undo reaches the pre-state"),
        );
        true
    });
}

#[test]
fn kill_during_capture_and_commit_loses_nothing() {
    for point in [
        "capture-blob-stored",
        "capture-staged",
        "commit-entry-written",
        "commit-pending-removed",
    ] {
        let env = Env::new();
        env.write("a", b"a-before");
        env.write("other", b"o");
        {
            let store = env.store();
            let s = env.session(&store);
            tool_edit(&env, &s, "c1", 1, "other", Some(b"o2"));
        }
        assert!(
            run_child(env.tmp.path(), "commit", point, 0),
            "{point} reached"
        );
        let tool_ran = env.read("a").as_deref() == Some(&b"a-after"[..]);
        let store = env.store();
        let s = env.session(&store);
        // The host's retry after restart: the commit is idempotent.
        let c = s.commit("c9", 3, true).expect("commit");
        if point.starts_with("commit") {
            assert!(tool_ran, "{point}");
            assert_eq!(
                c,
                CommitOutcome::Committed {
                    anchor_seq: 3,
                    entries: 1
                },
                "{point}"
            );
        }
        if point == "capture-staged" {
            assert!(!tool_ran);
            assert_eq!(
                c,
                CommitOutcome::Committed {
                    anchor_seq: 3,
                    entries: 1
                },
                "{point}: staged record survived"
            );
        }
        let (recs, torn) = log_records(&env.root.join("sessions/s1/records.log"));
        let groups = recs
            .iter()
            .filter(|(k, p)| *k == GROUP && contains(p, b"\x00\x02c9"))
            .count();
        if point == "capture-blob-stored" {
            assert!(groups <= 1, "{point}: no duplicate group");
        } else {
            assert_eq!(groups, 1, "{point}: one group for the call");
        }
        assert_eq!(torn, 0, "{point}");
        let out = s
            .restore(&s.plan_restore(3).expect("plan"), "op")
            .expect("restore");
        assert!(out.failed.is_empty(), "{point}: {out:?}");
        assert_eq!(
            env.read("a").as_deref(),
            Some(&b"a-before"[..]),
            "{point}: before-state intact"
        );
        assert_eq!(env.read("other").as_deref(), Some(&b"o2"[..]));
    }
}

#[test]
fn kill_during_prune_keeps_the_store_consistent() {
    for point in [
        "prune-group-detached",
        "prune-before-sweep",
        "prune-blob-removed",
    ] {
        each_hit(point, |hit| {
            let env = Env::new();
            {
                let store = env.store();
                let s = env.session(&store);
                for i in 0..5u64 {
                    env.write("f", format!("f at {i}").as_bytes());
                    tool_edit(&env, &s, &format!("c{i}"), 10 + i, "f", Some(b"tool"));
                }
            }
            if !run_child(env.tmp.path(), "prune", point, hit) {
                return false;
            }
            let store = env.store();
            let s = env.session(&store);
            for (anchor, want) in [(13u64, "f at 3"), (14, "f at 4")] {
                let out = s
                    .restore(
                        &s.plan_restore(anchor).expect("plan"),
                        &format!("op{anchor}"),
                    )
                    .expect("restore");
                assert!(out.failed.is_empty(), "{point}#{hit}: {out:?}");
                assert_eq!(
                    env.read("f").as_deref(),
                    Some(want.as_bytes()),
                    "{point}#{hit}"
                );
            }
            s.prune(PruneOptions {
                keep_groups: 2,
                keep_journals: 10,
            })
            .expect("prune again");
            assert_eq!(s.anchors().expect("anchors"), vec![13, 14], "{point}#{hit}");
            true
        });
    }
}

#[test]
fn kill_during_compaction_loses_nothing() {
    for point in ["compact-written", "compact-replaced"] {
        each_hit(point, |hit| {
            let env = Env::new();
            {
                let store = env.store();
                let s = env.session(&store);
                for i in 0..400u64 {
                    env.write("f", format!("f at {i}").as_bytes());
                    tool_edit(&env, &s, &format!("c{i}"), 10 + i, "f", Some(b"tool"));
                }
            }
            let log = env.root.join("sessions/s1/records.log");
            let before = std::fs::metadata(&log).expect("log").len();
            assert!(before > SMALL_LOG, "big enough to compact: {before}");
            if !run_child(env.tmp.path(), "prune", point, hit) {
                return false;
            }
            let store = env.store_with(StoreOptions {
                compact_min_bytes: SMALL_LOG,
                ..StoreOptions::default()
            });
            let s = env.session(&store);
            assert_eq!(
                s.anchors().expect("anchors"),
                vec![408, 409],
                "{point}#{hit}"
            );
            for (anchor, want) in [(408u64, "f at 398"), (409, "f at 399")] {
                let out = s
                    .restore(
                        &s.plan_restore(anchor).expect("plan"),
                        &format!("op{anchor}"),
                    )
                    .expect("restore");
                assert!(out.failed.is_empty(), "{point}#{hit}: {out:?}");
                assert_eq!(
                    env.read("f").as_deref(),
                    Some(want.as_bytes()),
                    "{point}#{hit}"
                );
            }
            s.prune(PruneOptions {
                keep_groups: 2,
                keep_journals: 10,
            })
            .expect("prune again");
            let (recs, torn) = log_records(&log);
            assert_eq!(torn, 0);
            assert!(
                std::fs::metadata(&log).expect("log").len() < before / 4,
                "{point}#{hit}: compacted"
            );
            assert_eq!(recs[0].0, SESSION);
            let hidden = std::fs::read_dir(env.root.join("sessions/s1"))
                .expect("dir")
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
                .count();
            assert_eq!(hidden, 0, "{point}#{hit}: temporaries swept");
            true
        });
    }
}

#[test]
fn kill_during_migration_loses_nothing() {
    for point in ["migrate-marker-written", "migrate-log-written"] {
        each_hit(point, |hit| {
            let env = Env::new();
            copy_tree(&crate::migrate::fixture(), env.tmp.path());
            if !run_child(env.tmp.path(), "migrate", point, hit) {
                return false;
            }
            crate::migrate::check_fixture(env.tmp.path());
            true
        });
    }
}
