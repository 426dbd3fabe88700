//! Crash tests with real processes: a child process (this test binary, re-run
//! with an env var naming the scenario and crash point) is SIGKILLed when it
//! reaches the point; the parent reopens the store and checks that continue or
//! rollback yields exactly the post- or the pre-state.

use std::path::Path;
use std::sync::Arc;

use rewind_test_support::{CrashChild, CrashTarget, each_hit, each_point};
use snapshot_store::{
    CommitOutcome, CrashPoint, FaultSeam, JournalState, PruneOptions, Store, StoreOptions,
};

use crate::common::{
    Env, GROUP, SESSION, Snap, assert_snap, contains, copy_tree, log_records, tool_edit,
};
use crate::faults::{
    setup_dir_became_file, setup_file_became_dir, setup_kept, setup_overwrite, setup_restore,
};

const SCENARIO: &str = "SNAPSHOT_STORE_CRASH_SCENARIO";
const DIR: &str = "SNAPSHOT_STORE_CRASH_DIR";
const DURABLE: &str = "SNAPSHOT_STORE_CRASH_DURABLE";
/// Set: the child's store puts every content in a blob file (none kept in the log).
const BLOB_FILES: &str = "SNAPSHOT_STORE_CRASH_BLOB_FILES";
/// Compaction threshold of the crash and compaction tests (small logs compact).
pub const SMALL_LOG: u64 = 16 * 1024;

/// The store's seam in the child: stops at the harness's crash target.
struct StopAt(CrashTarget);

impl FaultSeam for StopAt {
    fn crash_point(&self, p: CrashPoint) {
        self.0.reached(p.name());
    }
}

/// The child side: runs one scenario with a seam that stops at the named point.
#[test]
#[ignore = "child process of the crash tests; run by them"]
fn crash_child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let target = CrashTarget::from_env().expect("crash point");
    let dir = std::path::PathBuf::from(std::env::var(DIR).expect("dir"));
    let seam = Arc::new(StopAt(target));
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
            keep_in_log_bytes: match std::env::var_os(BLOB_FILES) {
                Some(_) => 0,
                None => snapshot_store::DEFAULT_KEEP_IN_LOG_BYTES,
            },
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
        "commit-at" => {
            // As the plugin calls it: the capture names the commit's anchor, so the
            // commit is settled in memory and written with the next append.
            s.capture_before_at("c9", Path::new("a"), 3)
                .expect("capture");
            std::fs::write(dir.join("ws/a"), b"a-after").expect("tool write");
            s.commit("c9", 3, true).expect("commit");
            // The process ends before anything else is written (no flush, no drop).
            if std::env::var_os("SNAPSHOT_STORE_CRASH_EXIT").is_some() {
                std::process::exit(0);
            }
        }
        "prune" => {
            s.prune(PruneOptions {
                keep_groups: 2,
                keep_journals: 10,
            })
            .expect("prune");
        }
        "compact" => {
            store.compact().expect("compact");
        }
        "gc" => {
            store.collect_garbage().expect("gc");
        }
        "scan" => {
            let r = snapshot_store::ScanRequest::new(snapshot_store::ScanPhase::Boundary, 5);
            s.scan(&r).expect("scan");
        }
        "fold" => {
            // The fold a host runs after a scan returned (the delta is past its bound).
            s.fold_index().expect("fold");
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
    run_child_as(dir, scenario, point, hit, durable, false)
}

/// [`run_child_with`]; with `blob_files`, the child's store puts every content in a blob
/// file of its own.
pub(crate) fn run_child_as(
    dir: &Path,
    scenario: &str,
    point: &str,
    hit: usize,
    durable: bool,
    blob_files: bool,
) -> bool {
    let mut child = CrashChild::new("crash::crash_child")
        .ignored()
        .env(SCENARIO, scenario)
        .env(DIR, dir);
    if durable {
        child = child.env(DURABLE, "1");
    }
    if blob_files {
        child = child.env(BLOB_FILES, "1");
    }
    child.run(point, hit).killed()
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
    each_point(
        [
            "restore-rescued",
            "restore-journal-written",
            "restore-action-applied",
            "restore-action-logged",
            "restore-action-partial",
            "restore-before-complete",
        ],
        |point| {
            if durable && point == "restore-action-partial" && !cfg!(target_os = "linux") {
                return; // power-loss mode replaces files through a temporary name there
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
        },
    );
}

/// A directory a tool replaced by a file: the restore deletes the file and recreates the
/// directory's files; killed at any point, continue reaches the state at the message, and
/// undo and rollback the file again.
#[test]
fn kill_during_a_restore_under_a_file_that_was_a_directory_then_continue_or_rollback_is_exact() {
    kills_during_restore_of(&RESTORE_POINTS, setup_dir_became_file, "dir became a file");
}

/// A file a tool replaced by a directory: the restore deletes the directory's files,
/// removes it and writes the file; killed at any point, continue reaches the state at the
/// message, and undo and rollback the directory again.
#[test]
fn kill_during_a_restore_over_a_directory_that_was_a_file_then_continue_or_rollback_is_exact() {
    kills_during_restore_of(&RESTORE_POINTS, setup_file_became_dir, "file became a dir");
}

/// The points of a restore (without the in-place write's).
const RESTORE_POINTS: [&str; 5] = [
    "restore-rescued",
    "restore-journal-written",
    "restore-action-applied",
    "restore-action-logged",
    "restore-before-complete",
];

/// Kills the restore of `setup`'s workspace to message 1 at every hit of each of `points`,
/// then checks the recovery ([`check_recovery`]).
fn kills_during_restore_of(points: &[&str], setup: fn(&Env) -> (Snap, Snap), what: &str) {
    each_point(points.iter().copied(), |point| {
        each_hit(point, |hit| {
            let env = Env::new();
            let (pre, at1) = setup(&env);
            if !run_child(env.tmp.path(), "restore", point, hit) {
                return false;
            }
            check_recovery(&env, &pre, &at1, &format!("{what}, {point}#{hit}"));
            true
        });
    });
}

/// Killed while the plan writes out the content the session's log keeps (a blob file
/// created, the next not yet), or at any point of the restore after it: recovery is exact.
#[test]
fn kill_while_a_plan_writes_out_kept_content_or_during_its_restore_is_exact() {
    let mut points = vec!["capture-blob-stored"];
    points.extend(RESTORE_POINTS);
    kills_during_restore_of(&points, setup_kept, "kept content");
}

/// A restore killed half-way through writing a file over its old bytes (the file
/// holds new bytes followed by old ones: neither state, nor a prefix of either):
/// continue reaches the post-state, rollback the pre-state.
#[test]
fn kill_during_a_write_over_old_bytes_then_continue_or_rollback_is_exact() {
    // Power-loss mode writes in place too (on Linux), and `fsync`s each file after.
    let modes: &[bool] = if cfg!(target_os = "linux") {
        &[false, true]
    } else {
        &[false]
    };
    for &durable in modes {
        let mut mixed = 0;
        each_hit("restore-action-partial", |hit| {
            let env = Env::new();
            let (pre, at1) = setup_overwrite(&env);
            if !run_child_with(
                env.tmp.path(),
                "restore",
                "restore-action-partial",
                hit,
                durable,
            ) {
                return false;
            }
            let now = env.snapshot();
            if now.iter().any(|(p, b)| {
                pre.get(p) != Some(b) && at1.get(p).is_some_and(|t| t != b && !t.starts_with(b))
            }) {
                mixed += 1;
            }
            check_recovery(
                &env,
                &pre,
                &at1,
                &format!("overwrite#{hit} durable={durable}"),
            );
            true
        });
        assert_eq!(
            mixed, 3,
            "each file was left holding new and old bytes once (durable={durable})"
        );
    }
}

/// What a power loss during a restore's in-place writes can leave on disk and a kill
/// cannot: some of the new blocks kept and not others, a file not yet cut to its new
/// length, an extension's size kept before its bytes (zeros). Continue takes each such
/// file as the restore's own and reaches the post-state; rollback, the pre-state. A
/// file with a zero where neither state can have one is left as it is and reported.
#[test]
fn a_power_loss_mix_of_old_and_new_blocks_is_taken_as_the_restores_own_write() {
    let forge = |env: &Env, zero_inside: bool| {
        let (pre, at1) = setup_overwrite(env);
        // The journal is on disk, no file written yet.
        assert!(run_child_with(
            env.tmp.path(),
            "restore",
            "restore-journal-written",
            0,
            true
        ));
        // `shrink`: 5000 × `x` being turned into 3000 × `y`, not yet cut to 3000.
        let shrink = [
            &[b'y'; 1000][..],
            &[b'x'; 1000],
            &[b'y'; 1000],
            &[b'x'; 2000],
        ]
        .concat();
        // `grow`: 1200 × `q` being turned into 2000 × `p`, its size at 1600, the
        // extension's blocks not yet written.
        let mut grow = [&[b'q'; 600][..], &[b'p'; 600], &[0; 400]].concat();
        if zero_inside {
            grow[100] = 0; // inside both states: no write of the restore leaves a zero there
        }
        // `d/same`: 4000 × `t` being turned into 4000 × `s`, blocks kept out of order.
        let same = [&[b't'; 1000][..], &[b's'; 2000], &[b't'; 1000]].concat();
        env.write("shrink", &shrink);
        env.write("grow", &grow);
        env.write("d/same", &same);
        (pre, at1, grow)
    };

    let env = Env::new();
    let (pre, at1, _) = forge(&env, false);
    check_recovery(&env, &pre, &at1, "power-loss mix");

    let env = Env::new();
    let (_, _, grow) = forge(&env, true);
    let store = env.store();
    let s = env.session(&store);
    let c = s.continue_restore("op").expect("continue");
    assert_eq!(c.state, JournalState::Open, "{c:?}");
    assert_eq!(c.failed.len(), 1, "{c:?}");
    assert_eq!(c.failed[0].display, "grow");
    assert!(c.failed[0].error.contains("changed since"), "{c:?}");
    assert_eq!(env.read("grow").as_deref(), Some(&grow[..]));
    assert_eq!(env.read("shrink").as_deref(), Some(&[b'y'; 3000][..]));

    // A blob no longer whole (what a power loss can do to one in process-crash mode):
    // the mix is not taken for the restore's, even where its bytes still match. Here
    // the rescue blob of `d/same` is damaged where the file holds the target's bytes.
    let env = Env::new();
    let (_, _, _) = forge(&env, false);
    use sha2::Digest;
    let rescue = env
        .root
        .join("blobs")
        .join(hex::encode(sha2::Sha256::digest([b't'; 4000])));
    let mut damaged = std::fs::read(&rescue).expect("the rescue blob");
    damaged[1500] = b'u';
    std::fs::write(&rescue, &damaged).expect("damage");
    let store = env.store();
    let s = env.session(&store);
    let c = s.continue_restore("op").expect("continue");
    assert_eq!(c.state, JournalState::Open, "{c:?}");
    assert!(c.failed.iter().any(|f| f.display == "d/same"), "{c:?}");
    let same = [&[b't'; 1000][..], &[b's'; 2000], &[b't'; 1000]].concat();
    assert_eq!(env.read("d/same").as_deref(), Some(&same[..]));
}

/// A file left holding new bytes followed by old ones that is then changed (one
/// old byte) is no longer taken as the restore's write: continue and rollback leave
/// it as it is and report it.
#[test]
fn a_write_over_old_bytes_changed_since_is_left_alone() {
    let env = Env::new();
    let (_, _) = setup_overwrite(&env);
    assert!(run_child(
        env.tmp.path(),
        "restore",
        "restore-action-partial",
        0
    ));
    // The first action in path order: `d/same`, now 2000 × `s` then 2000 × `t`.
    let mut torn = env.read("d/same").expect("file");
    assert_eq!(&torn[..2000], &[b's'; 2000][..]);
    assert_eq!(&torn[2000..], &[b't'; 2000][..]);
    torn[3999] = b'u';
    env.write("d/same", &torn);
    let copy = Env::new();
    copy_tree(env.tmp.path(), copy.tmp.path());
    let store = env.store();
    let s = env.session(&store);
    let c = s.continue_restore("op").expect("continue");
    assert_eq!(c.state, JournalState::Open);
    assert_eq!(c.failed.len(), 1, "{c:?}");
    assert_eq!(c.failed[0].display, "d/same");
    assert!(c.failed[0].error.contains("changed since"), "{c:?}");
    assert_eq!(env.read("d/same").as_deref(), Some(&torn[..]));
    let cstore = copy.store();
    let cs = copy.session(&cstore);
    let rb = cs.rollback_restore("op").expect("rollback");
    assert_eq!(rb.failed.len(), 1, "{rb:?}");
    assert_eq!(copy.read("d/same").as_deref(), Some(&torn[..]));
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
    each_point(
        [
            ("continue", "restore-action-applied"),
            ("continue", "restore-action-logged"),
            ("continue", "restore-before-complete"),
            ("continue", "restore-action-partial"),
            ("rollback", "rollback-action-applied"),
            ("rollback", "rollback-before-complete"),
            ("rollback", "rollback-action-partial"),
        ],
        |(scenario, point)| {
            for durable in [false, true] {
                each_hit(point, |hit| {
                    let env = Env::new();
                    let (pre, at1) = open_journal(&env);
                    if !run_child_with(env.tmp.path(), scenario, point, hit, durable) {
                        return false;
                    }
                    let what = format!("{scenario}/{point}#{hit} durable={durable}");
                    let copy = Env::new();
                    copy_tree(env.tmp.path(), copy.tmp.path());
                    let store = env.store();
                    let s = env.session(&store);
                    let st = s.restore_status("op").expect("status");
                    // Read from the log's end alone, the state is the whole journal's.
                    assert_eq!(
                        s.restore_state("op").expect("state"),
                        st.state,
                        "{what}: state from the log's end"
                    );
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
        },
    );
}

/// An undo killed while it rewrites a file in place: running the undo again (what
/// the host does after a restart) reaches exactly the pre-restore state, the torn
/// file being recognised as the undo's own unfinished write, not as a change since.
/// In power-loss mode the undo writes over the restored bytes: with files whose
/// halves differ (`setup_overwrite`) the torn file is neither state nor a prefix.
#[test]
fn kill_during_undo_then_undo_again_is_exact() {
    type Setup = fn(&Env) -> (Snap, Snap);
    let setups: [(&str, Setup); 2] = [("restore", setup_restore), ("overwrite", setup_overwrite)];
    for (durable, (name, setup)) in [false, true]
        .into_iter()
        .flat_map(|d| setups.map(|s| (d, s)))
    {
        each_hit("rollback-action-partial", |hit| {
            let env = Env::new();
            let (pre, at1) = setup(&env);
            {
                let store = env.store();
                let s = env.session(&store);
                let out = s
                    .restore(&s.plan_restore(1).expect("plan"), "op")
                    .expect("restore");
                assert_eq!(out.state, JournalState::Completed);
                assert_snap(&env.snapshot(), &at1, "restored");
            }
            if !run_child_with(
                env.tmp.path(),
                "undo",
                "rollback-action-partial",
                hit,
                durable,
            ) {
                return false;
            }
            let what = format!("undo/rollback-action-partial#{hit} {name} durable={durable}");
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
}

#[test]
fn kill_during_capture_and_commit_loses_nothing() {
    each_point(
        [
            "capture-blob-stored",
            "capture-staged",
            "commit-entry-written",
            "commit-pending-removed",
        ],
        |point| {
            // The before-state in a blob file of its own, and kept in the log (a small
            // file's, by default: no blob file is written then).
            for blob_files in [true, false] {
                if !blob_files && point == "capture-blob-stored" {
                    continue;
                }
                kill_during_capture_and_commit(point, blob_files);
            }
        },
    );
}

fn kill_during_capture_and_commit(point: &str, blob_files: bool) {
    {
        {
            let env = Env::new();
            env.write("a", b"a-before");
            env.write("other", b"o");
            {
                let store = env.store();
                let s = env.session(&store);
                tool_edit(&env, &s, "c1", 1, "other", Some(b"o2"));
            }
            assert!(
                run_child_as(env.tmp.path(), "commit", point, 0, false, blob_files),
                "{point} reached (blob files: {blob_files})"
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
            rewinds_call_c9(&env, &s, point);
        }
    }
}

/// A rewind to anchor 3 brings `a` back to its state before call `c9`; `other`, written
/// at anchor 1, stays.
fn rewinds_call_c9(env: &Env, s: &snapshot_store::Session, point: &str) {
    let out = s
        .restore(&s.plan_restore(3).expect("plan"), "op")
        .expect("restore");
    assert!(out.failed.is_empty(), "{point}: {out:?}");
    assert_eq!(
        env.read("a").as_deref(),
        Some(&b"a-before"[..]),
        "{point}: before-state restored"
    );
    assert_eq!(env.read("other").as_deref(), Some(&b"o2"[..]));
}

#[test]
fn a_deferred_commit_lost_with_its_process_counts_as_committed() {
    // Killed right after the capture, right after the commit settled in memory, or
    // ended normally before anything else was written.
    for point in [
        "capture-staged",
        "commit-entry-written",
        "commit-pending-removed",
        "exit",
    ] {
        let env = Env::new();
        env.write("a", b"a-before");
        {
            let store = env.store();
            let s = env.session(&store);
            tool_edit(&env, &s, "c1", 1, "other", Some(b"o2"));
        }
        let log = env.root.join("sessions/s1/records.log");
        if point == "exit" {
            let killed = CrashChild::new("crash::crash_child")
                .ignored()
                .env(SCENARIO, "commit-at")
                .env(DIR, env.tmp.path())
                .env("SNAPSHOT_STORE_CRASH_EXIT", "1")
                .run("no-such-point", 0)
                .killed();
            assert!(!killed, "the child ends on its own");
        } else {
            assert!(
                run_child(env.tmp.path(), "commit-at", point, 0),
                "{point} reached"
            );
        }
        let tool_ran = env.read("a").as_deref() == Some(&b"a-after"[..]);
        assert_eq!(tool_ran, point != "capture-staged", "{point}");
        let (recs, torn) = log_records(&log);
        assert_eq!(torn, 0, "{point}");
        assert!(
            !recs
                .iter()
                .any(|(k, p)| *k == GROUP && contains(p, b"\x00\x02c9")),
            "{point}: the commit was never written"
        );
        let store = env.store();
        let s = env.session(&store);
        // The staged record names anchor 3: the call counts as committed there.
        assert_eq!(s.anchors().expect("anchors"), vec![1, 3], "{point}");
        // The host's retry after restart finds it committed.
        assert_eq!(
            s.commit("c9", 3, true).expect("commit"),
            CommitOutcome::Committed {
                anchor_seq: 3,
                entries: 1
            },
            "{point}"
        );
        rewinds_call_c9(&env, &s, point);
        // A later write carries the settlement on: one group for the call, still
        // restorable after the log is reopened.
        drop(s);
        let s = env.session(&store);
        assert_eq!(s.anchors().expect("anchors"), vec![1, 3], "{point}");
    }
}

/// Each restore of `f` to an anchor gives the content wanted there, without a failure.
fn restores_f(env: &Env, s: &snapshot_store::Session, cases: &[(u64, &str)], what: &str) {
    for (anchor, want) in cases {
        let out = s
            .restore(
                &s.plan_restore(*anchor).expect("plan"),
                &format!("op{anchor}"),
            )
            .expect("restore");
        assert!(out.failed.is_empty(), "{what}: {out:?}");
        assert_eq!(env.read("f").as_deref(), Some(want.as_bytes()), "{what}");
    }
}

#[test]
fn kill_during_prune_keeps_the_store_consistent() {
    each_point(
        [
            "prune-group-detached",
            "prune-before-sweep",
            "prune-blob-removed",
        ],
        |point| {
            each_hit(point, |hit| {
                let env = Env::new();
                {
                    // Blob files for the prune to sweep (none kept in the log).
                    let store = env.store_with_blob_files();
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
                restores_f(
                    &env,
                    &s,
                    &[(13, "f at 3"), (14, "f at 4")],
                    &format!("{point}#{hit}"),
                );
                s.prune(PruneOptions {
                    keep_groups: 2,
                    keep_journals: 10,
                })
                .expect("prune again");
                assert_eq!(s.anchors().expect("anchors"), vec![13, 14], "{point}#{hit}");
                true
            });
        },
    );
}

#[test]
fn kill_during_compaction_loses_nothing() {
    each_point(["compact-written", "compact-replaced"], |point| {
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
            restores_f(
                &env,
                &s,
                &[(408, "f at 398"), (409, "f at 399")],
                &format!("{point}#{hit}"),
            );
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
    });
}

#[test]
fn kill_during_migration_loses_nothing() {
    each_point(["migrate-marker-written", "migrate-log-written"], |point| {
        each_hit(point, |hit| {
            let env = Env::new();
            copy_tree(&crate::migrate::fixture(), env.tmp.path());
            if !run_child(env.tmp.path(), "migrate", point, hit) {
                return false;
            }
            crate::migrate::check_fixture(env.tmp.path());
            true
        });
    });
}
