//! Semantics: capture/commit, earliest-per-path planning, recheck, dedup, cap,
//! prune, undo, rollback, versions and corrupt files.

use std::path::Path;

use snapshot_store::{
    Action, BeforeState, CaptureOutcome, CommitOutcome, FormatOutcome, JournalError, JournalState,
    PlanError, PruneOptions, RestoreError, StoreOptions,
};

use crate::common::{
    BLOB, DROPPED, Env, GROUP, contains, count_files, log_records, snapshot_dir, tool_edit,
};

#[test]
fn rewind_restores_earliest_before_state_per_path_and_is_idempotent() {
    let env = Env::new();
    env.write("a.txt", b"a0");
    env.write("b.txt", b"b0");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(10).expect("recheck");
    tool_edit(&env, &s, "c1", 10, "a.txt", Some(b"a1"));
    tool_edit(&env, &s, "c2", 10, "a.txt", Some(b"a2"));
    s.recheck_tracked(20).expect("recheck");
    tool_edit(&env, &s, "c3", 20, "b.txt", Some(b"b1"));
    tool_edit(&env, &s, "c4", 20, "new/dir/c.txt", Some(b"c1"));
    tool_edit(&env, &s, "c5", 20, "a.txt", Some(b"a3"));
    s.recheck_tracked(30).expect("recheck");
    tool_edit(&env, &s, "c6", 30, "a.txt", None);

    // Rewind to 20: a back to a2, b to b0, c removed.
    let plan = s.plan_restore(20).expect("plan");
    assert_eq!(plan.actions.len(), 3, "{plan:#?}");
    let out = s.restore(&plan, "op1").expect("restore");
    assert_eq!(out.state, JournalState::Completed);
    assert!(out.failed.is_empty(), "{out:#?}");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a2"[..]));
    assert_eq!(env.read("b.txt").as_deref(), Some(&b"b0"[..]));
    assert_eq!(env.read("new/dir/c.txt"), None);

    // Same target again: nothing to do.
    let again = s.plan_restore(20).expect("plan");
    assert!(again.is_empty(), "{again:#?}");

    // Rewind further to 10: a back to a0.
    let plan = s.plan_restore(10).expect("plan");
    s.restore(&plan, "op2").expect("restore");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a0"[..]));
    assert_eq!(env.read("b.txt").as_deref(), Some(&b"b0"[..]));
}

#[test]
fn failed_call_is_dropped_and_discard_removes_staging() {
    let env = Env::new();
    env.write("a", b"orig");
    let store = env.store();
    let s = env.session(&store);
    s.capture_before("bad", Path::new("a")).expect("capture");
    assert_eq!(
        s.commit("bad", 5, false).expect("commit"),
        CommitOutcome::Dropped { entries: 1 }
    );
    s.capture_before("lost", Path::new("a")).expect("capture");
    assert!(s.discard("lost").expect("discard"));
    assert!(!s.discard("lost").expect("discard"));
    assert_eq!(
        s.commit("never", 5, true).expect("commit"),
        CommitOutcome::NothingStaged
    );
    env.write("a", b"changed");
    assert!(
        s.plan_restore(5).expect("plan").is_empty(),
        "nothing was committed"
    );
}

#[test]
fn a_call_naming_many_paths_stages_each_once_across_a_reopen() {
    // Whether a path is staged already is a lookup in the call's set of paths: the set
    // is kept as captures are staged, and rebuilt from the log when a handle opens it.
    let env = Env::new();
    let n = 300;
    let name = |i: usize| format!("d/f{i}");
    for i in 0..n {
        env.write(name(i), format!("before {i}").as_bytes());
    }
    {
        let store = env.store();
        let s = env.session(&store);
        for i in (0..n).step_by(2) {
            let first = s
                .capture_before("bulk", Path::new(&name(i)))
                .expect("capture");
            assert!(
                matches!(first, CaptureOutcome::Captured { .. }),
                "{first:?}"
            );
            env.write(name(i), b"changed by the call");
        }
    }
    // Another handle folds the staged records from the log: the paths staged before are
    // found staged, the others are staged now.
    let store = env.store();
    let s = env.session(&store);
    for i in 0..n {
        let again = s
            .capture_before("bulk", Path::new(&name(i)))
            .expect("capture");
        if i % 2 == 0 {
            assert!(
                matches!(again, CaptureOutcome::AlreadyStaged { .. }),
                "{i}: {again:?}"
            );
        } else {
            assert!(
                matches!(again, CaptureOutcome::Captured { .. }),
                "{i}: {again:?}"
            );
            env.write(name(i), b"changed by the call");
        }
    }
    assert_eq!(
        s.commit("bulk", 1, true).expect("commit"),
        CommitOutcome::Committed {
            anchor_seq: 1,
            entries: n
        }
    );
    s.restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    for i in 0..n {
        assert_eq!(
            env.read(name(i)).as_deref(),
            Some(format!("before {i}").as_bytes()),
            "{i}"
        );
    }
}

#[test]
fn same_call_same_path_first_touch_wins() {
    let env = Env::new();
    env.write("a", b"one");
    let store = env.store();
    let s = env.session(&store);
    s.capture_before("c", Path::new("a")).expect("capture");
    env.write("a", b"two");
    let again = s.capture_before("c", Path::new("a")).expect("capture");
    assert!(
        matches!(again, CaptureOutcome::AlreadyStaged { .. }),
        "{again:?}"
    );
    env.write("a", b"three");
    s.commit("c", 1, true).expect("commit");
    s.restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_eq!(env.read("a").as_deref(), Some(&b"one"[..]));
}

#[test]
fn recheck_records_a_chmod_alone_and_a_rewind_puts_the_bits_back() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("t", b"v0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "t", Some(b"v1"));
    s.recheck_tracked(2).expect("recheck");
    // Made executable outside the agent, the same bytes: a change, recorded at 3.
    let mode = |m| std::fs::set_permissions(env.p("t"), std::fs::Permissions::from_mode(m));
    mode(0o755).expect("chmod");
    let r3 = s.recheck_tracked(3).expect("recheck");
    assert_eq!(r3.recorded.len(), 1, "{r3:?}");
    // Only touched (same bytes, same bits): nothing.
    mode(0o755).expect("chmod");
    assert!(s.recheck_tracked(4).expect("recheck").recorded.is_empty());
    let plan = s.plan_restore(2).expect("plan");
    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    let bits = std::fs::metadata(env.p("t"))
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(bits, 0o644, "the bits at message 2");
    assert_eq!(env.read("t").as_deref(), Some(&b"v1"[..]));
}

#[test]
fn recheck_records_external_edits_deletes_and_recreates_only_when_changed() {
    let env = Env::new();
    env.write("t", b"v0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "t", Some(b"v1"));
    // Boundary 2: the tool's result is not known yet: recorded once.
    let r2 = s.recheck_tracked(2).expect("recheck");
    assert_eq!(r2.recorded.len(), 1);
    // Boundary 3: nothing changed: nothing recorded.
    let r3 = s.recheck_tracked(3).expect("recheck");
    assert_eq!(r3.checked, 1);
    assert!(r3.recorded.is_empty(), "{r3:?}");
    // External edit, then boundary 4.
    env.write("t", b"external-longer");
    let r4 = s.recheck_tracked(4).expect("recheck");
    assert_eq!(r4.recorded.len(), 1);
    // External delete, boundary 5; re-create, boundary 6.
    env.remove("t");
    assert_eq!(
        s.recheck_tracked(5).expect("recheck").recorded[0].before,
        BeforeState::Absent
    );
    env.write("t", b"recreated");
    assert!(matches!(
        s.recheck_tracked(6).expect("recheck").recorded[0].before,
        BeforeState::File { .. }
    ));
    env.write("t", b"latest");
    // Each boundary restores exactly.
    for (target, want) in [
        (1, Some(&b"v0"[..])),
        (2, Some(b"v1")),
        (3, Some(b"v1")),
        (4, Some(b"external-longer")),
        (5, None),
        (6, Some(b"recreated")),
    ] {
        let plan = s.plan_restore(target).expect("plan");
        let out = s.restore(&plan, &format!("op{target}")).expect("restore");
        assert!(out.failed.is_empty(), "{out:?}");
        assert_eq!(env.read("t").as_deref(), want, "target {target}");
    }
}

#[test]
fn identical_before_states_are_stored_once() {
    let env = Env::new();
    for i in 0..5 {
        env.write(format!("f{i}"), b"same content");
    }
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    let mut dedups = 0;
    for i in 0..5 {
        match s
            .capture_before(&format!("c{i}"), Path::new(&format!("f{i}")))
            .expect("capture")
        {
            CaptureOutcome::Captured { deduplicated, .. } => dedups += usize::from(deduplicated),
            o => panic!("{o:?}"),
        }
        s.commit(&format!("c{i}"), 1, true).expect("commit");
    }
    assert_eq!(dedups, 4);
    assert_eq!(env.blob_count(), 1);
}

#[test]
fn per_file_cap_exact_and_one_over_and_disabled() {
    let env = Env::new();
    let cap = 1000u64;
    env.write("at", &vec![7u8; cap as usize]);
    env.write("over", &vec![7u8; cap as usize + 1]);
    let store = env.store_with(StoreOptions {
        max_file_bytes: cap,
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    assert!(matches!(
        s.capture_before("c", Path::new("at")).expect("c"),
        CaptureOutcome::Captured { size: 1000, .. }
    ));
    assert!(matches!(
        s.capture_before("c", Path::new("over")).expect("c"),
        CaptureOutcome::Uncovered { size: 1001, .. }
    ));
    s.commit("c", 1, true).expect("commit");
    env.write("at", b"x");
    env.write("over", b"y");
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.actions.len(), 1);
    assert_eq!(plan.uncovered.len(), 1);
    assert_eq!(plan.uncovered[0].size, 1001);
    drop(s);
    drop(store);
    // Cap 0: no cap (a streamed large file).
    let big = vec![3u8; 300_000];
    env.write("big", &big);
    let store = env.store_with(StoreOptions {
        max_file_bytes: 0,
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    assert!(matches!(
        s.capture_before("d", Path::new("big")).expect("c"),
        CaptureOutcome::Captured { size: 300_000, .. }
    ));
    s.commit("d", 2, true).expect("commit");
    env.write("big", b"small now");
    s.restore(&s.plan_restore(2).expect("plan"), "op")
        .expect("restore");
    assert_eq!(env.read("big"), Some(big));
}

#[test]
fn mode_bits_are_restored() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("x.sh", b"#!/bin/sh\n");
    std::fs::set_permissions(env.p("x.sh"), std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "x.sh", None);
    s.restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    let mode = std::fs::metadata(env.p("x.sh"))
        .expect("meta")
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o750);
}

#[test]
fn undo_restores_pre_rewind_state_and_refuses_when_stale() {
    let env = Env::new();
    env.write("a", b"a0");
    env.write("b", b"b0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "a", Some(b"a1"));
    tool_edit(&env, &s, "c2", 1, "b", Some(b"b1"));
    tool_edit(&env, &s, "c3", 1, "made", Some(b"m"));
    let pre = env.snapshot();
    s.restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_ne!(env.snapshot(), pre);
    // The state read from the log's end alone agrees with the whole journal's.
    assert_eq!(
        s.restore_state("op").expect("state"),
        JournalState::Completed
    );
    assert!(matches!(
        s.restore_state("never"),
        Err(JournalError::UnknownOp { .. })
    ));
    // Undo twice is refused the second time.
    let out = s.undo_restore("op").expect("undo");
    assert_eq!(out.state, JournalState::Undone);
    assert_eq!(s.restore_state("op").expect("state"), JournalState::Undone);
    assert_eq!(env.snapshot(), pre);
    assert!(matches!(
        s.undo_restore("op"),
        Err(JournalError::WrongState { .. })
    ));

    // Stale: the user edits a restored file after the rewind.
    s.restore(&s.plan_restore(1).expect("plan"), "op2")
        .expect("restore");
    env.write("b", b"user edit");
    match s.undo_restore("op2") {
        Err(JournalError::Stale { paths, .. }) => {
            assert_eq!(paths.iter().map(|p| p.display()).collect::<Vec<_>>(), ["b"])
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        env.read("b").as_deref(),
        Some(&b"user edit"[..]),
        "nothing overwritten"
    );
    assert!(matches!(
        s.undo_restore("nope"),
        Err(JournalError::UnknownOp { .. })
    ));
}

#[test]
fn corrupt_blob_is_reported_never_restored_and_pass_continues() {
    let env = Env::new();
    env.write("a", b"AAAA-original");
    env.write("b", b"BBBB-original");
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    let sha = match s.capture_before("c", Path::new("a")).expect("capture") {
        CaptureOutcome::Captured { sha256, .. } => sha256,
        o => panic!("{o:?}"),
    };
    s.capture_before("c", Path::new("b")).expect("capture");
    env.write("a", b"a-new");
    env.write("b", b"b-new");
    s.commit("c", 1, true).expect("commit");
    // Flip one byte of a's blob.
    let blob = env.root.join("blobs").join(&sha);
    let mut bytes = std::fs::read(&blob).expect("blob");
    bytes[0] ^= 0xff;
    std::fs::write(&blob, &bytes).expect("write blob");
    let out = s
        .restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_eq!(out.failed.len(), 1, "{out:?}");
    assert!(
        out.failed[0].error.contains("corrupt blob"),
        "{}",
        out.failed[0].error
    );
    assert_eq!(
        env.read("a").as_deref(),
        Some(&b"a-new"[..]),
        "corrupt bytes never written"
    );
    assert_eq!(env.read("b").as_deref(), Some(&b"BBBB-original"[..]));
    assert_eq!(out.state, JournalState::Open);
    // Rollback returns to exactly the pre-restore state.
    let rb = s.rollback_restore("op").expect("rollback");
    assert_eq!(rb.state, JournalState::RolledBack, "{rb:?}");
    assert_eq!(env.read("b").as_deref(), Some(&b"b-new"[..]));
    assert_eq!(s.reconcile_restores().expect("reconcile"), vec![]);
    // Truncated blob: also refused.
    std::fs::write(&blob, &bytes[..3]).expect("truncate");
    let out = s
        .restore(&s.plan_restore(1).expect("plan"), "op2")
        .expect("restore");
    assert_eq!(out.failed.len(), 1);
    assert_eq!(env.read("a").as_deref(), Some(&b"a-new"[..]));
}

#[test]
fn prune_keeps_newest_groups_and_sweeps_unreferenced_blobs() {
    let env = Env::new();
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    for i in 0..6u64 {
        env.write("f", format!("content {i}").as_bytes());
        tool_edit(&env, &s, &format!("c{i}"), 10 + i, "f", Some(b"tool"));
    }
    assert_eq!(env.blob_count(), 6);
    let rep = s
        .prune(PruneOptions {
            keep_groups: 2,
            keep_journals: 10,
        })
        .expect("prune");
    assert_eq!(rep.groups_removed, 4);
    assert_eq!(rep.gc.blobs_removed, 4);
    assert_eq!(s.anchors().expect("anchors"), vec![14, 15]);
    assert_eq!(env.blob_count(), 2);
    s.restore(&s.plan_restore(14).expect("plan"), "op")
        .expect("restore");
    assert_eq!(env.read("f").as_deref(), Some(&b"content 4"[..]));
    // The journal's rescue blob ("tool") survives prune while the journal is kept.
    let rep = s
        .prune(PruneOptions {
            keep_groups: 0,
            keep_journals: 1,
        })
        .expect("prune");
    assert_eq!(rep.groups_removed, 2);
    s.undo_restore("op").expect("undo still possible");
    assert_eq!(env.read("f").as_deref(), Some(&b"tool"[..]));
    let rep = s
        .prune(PruneOptions {
            keep_groups: 0,
            keep_journals: 0,
        })
        .expect("prune");
    assert_eq!(rep.journals_removed, 1);
    assert_eq!(env.blob_count(), 0);
}

#[test]
fn open_journal_pins_its_blobs_and_continue_finishes_it() {
    let env = Env::new();
    env.write("a", b"a0");
    env.write("b", b"b0");
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "a", Some(b"a1"));
    let sha_b = match s.capture_before("c2", Path::new("b")).expect("capture") {
        CaptureOutcome::Captured { sha256, .. } => sha256,
        o => panic!("{o:?}"),
    };
    env.write("b", b"b1");
    s.commit("c2", 1, true).expect("commit");
    // b's blob is damaged: the restore writes a, fails b, and stays open.
    let blob = env.root.join("blobs").join(&sha_b);
    std::fs::write(&blob, b"garbage").expect("damage");
    let out = s
        .restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_eq!(out.state, JournalState::Open);
    assert_eq!(out.written.len(), 1);
    // Prune everything it can: the open journal and the blobs it names stay.
    s.prune(PruneOptions {
        keep_groups: 0,
        keep_journals: 0,
    })
    .expect("prune");
    assert_eq!(s.anchors().expect("anchors"), Vec::<u64>::new());
    let open = s.reconcile_restores().expect("rec");
    assert_eq!(open.len(), 1);
    assert_eq!((open[0].done, open[0].failed, open[0].pending), (1, 1, 0));
    // Repair the blob; continue finishes exactly.
    std::fs::write(&blob, b"b0").expect("repair");
    let c = s.continue_restore("op").expect("continue");
    assert_eq!(c.state, JournalState::Completed, "{c:?}");
    assert_eq!(env.read("a").as_deref(), Some(&b"a0"[..]));
    assert_eq!(env.read("b").as_deref(), Some(&b"b0"[..]));
    assert!(matches!(
        s.rollback_restore("op"),
        Err(JournalError::WrongState { .. })
    ));
    s.undo_restore("op").expect("undo");
    assert_eq!(env.read("a").as_deref(), Some(&b"a1"[..]));
    assert_eq!(env.read("b").as_deref(), Some(&b"b1"[..]));
}

#[test]
fn newer_store_fails_closed_but_queries_work() {
    let env = Env::new();
    env.write("a", b"x");
    {
        let store = env.store();
        let s = env.session(&store);
        tool_edit(&env, &s, "c", 1, "a", Some(b"y"));
    }
    std::fs::write(env.root.join("store.json"), br#"{"store_version":99}"#).expect("write");
    let store = env.store();
    assert_eq!(store.newer_version().map(|n| n.found), Some(99));
    assert_eq!(store.list_sessions().expect("list"), vec!["s1".to_string()]);
    let s = env.session(&store);
    let e = s.capture_before("c2", Path::new("a")).expect_err("refused");
    assert!(e.to_string().contains("newer"), "{e}");
    assert!(matches!(s.plan_restore(1), Err(PlanError::NewerStore(_))));
    assert!(s.clear_session().is_err());
    assert!(s.prune(PruneOptions::default()).is_err());
    assert!(s.commit("c", 1, true).is_err());
    assert_eq!(env.read("a").as_deref(), Some(&b"y"[..]));
}

#[test]
fn newer_or_corrupt_records_fail_closed() {
    let env = Env::new();
    env.write("a", b"x");
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "a", Some(b"y"));
    drop(s);
    let log = env.root.join("sessions/s1/records.log");
    let good = std::fs::read(&log).expect("log");
    // A log written by a newer build: named, refused for reading and writing, untouched.
    let mut newer = good.clone();
    newer[4..8].copy_from_slice(&7u32.to_le_bytes());
    std::fs::write(&log, &newer).expect("write");
    let s = env.session(&store);
    let e = s.plan_restore(1).expect_err("newer log");
    assert!(
        matches!(&e, PlanError::NewerStore(n) if n.found == 7),
        "{e}"
    );
    assert!(e.to_string().contains("records.log"), "{e}");
    assert!(s.capture_before("c2", Path::new("a")).is_err());
    assert!(
        store.collect_garbage().is_err(),
        "sweep refuses a newer log"
    );
    assert_eq!(
        std::fs::read(&log).expect("log"),
        newer,
        "nothing rewritten"
    );
    // A flipped bit in a record that others follow: damage, named, never cut off.
    drop(s);
    let mut flipped = good.clone();
    flipped[8 + 12 + 3] ^= 0x04;
    std::fs::write(&log, &flipped).expect("write");
    let s = env.session(&store);
    let e = s.plan_restore(1).expect_err("corrupt log");
    assert!(
        matches!(&e, PlanError::Corrupt(c) if c.detail.contains("checksum")),
        "{e}"
    );
    assert!(s.capture_before("c2", Path::new("a")).is_err());
    assert!(s.commit("c", 1, true).is_err());
    assert!(
        store.collect_garbage().is_err(),
        "sweep refuses when references are unreadable"
    );
    assert_eq!(env.blob_count(), 1);
    assert_eq!(std::fs::read(&log).expect("log"), flipped, "nothing cut");
    drop(s);
    std::fs::write(&log, &good).expect("restore record");
    let s = env.session(&store);
    assert_eq!(s.plan_restore(1).expect("plan").actions.len(), 1);
    // Corrupt and truncated store marker.
    drop(s);
    drop(store);
    std::fs::write(env.root.join("store.json"), b"{\"store_ver").expect("write");
    assert!(matches!(
        snapshot_store::Store::open(&env.root, StoreOptions::default()),
        Err(snapshot_store::OpenError::Corrupt(_))
    ));
    std::fs::write(env.root.join("store.json"), b"").expect("write");
    assert!(snapshot_store::Store::open(&env.root, StoreOptions::default()).is_err());
}

#[test]
fn restore_refuses_duplicate_op_and_foreign_plan() {
    let env = Env::new();
    env.write("a", b"x");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "a", Some(b"y"));
    let plan = s.plan_restore(1).expect("plan");
    s.restore(&plan, "op").expect("restore");
    assert!(matches!(
        s.restore(&plan, "op"),
        Err(RestoreError::DuplicateOp { .. })
    ));
    let other = store.session("s2", &env.cwd).expect("session");
    assert!(matches!(
        other.restore(&plan, "op9"),
        Err(RestoreError::WrongSession { .. })
    ));
}

#[test]
fn format_change_clears_the_session() {
    let env = Env::new();
    env.write("a", b"x");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "a", Some(b"y"));
    // First format on a session with records: recorded; the records predate it but stay.
    assert!(matches!(
        s.reconcile_format("fmt-1").expect("fmt"),
        FormatOutcome::Cleared { previous: None }
    ));
    tool_edit(&env, &s, "c2", 2, "a", Some(b"z"));
    assert_eq!(
        s.reconcile_format("fmt-1").expect("fmt"),
        FormatOutcome::Unchanged
    );
    assert!(!s.plan_restore(2).expect("plan").is_empty());
    assert_eq!(
        s.reconcile_format("fmt-2").expect("fmt"),
        FormatOutcome::Cleared {
            previous: Some("fmt-1".into())
        }
    );
    assert!(s.plan_restore(0).expect("plan").is_empty());
    assert_eq!(s.format().expect("format").as_deref(), Some("fmt-2"));
    assert_eq!(env.blob_count(), 0);
    let fresh = store.session("fresh", &env.cwd).expect("session");
    assert_eq!(
        fresh.reconcile_format("fmt-2").expect("fmt"),
        FormatOutcome::Initialized
    );
}

#[test]
fn plan_serializes_for_preview() {
    let env = Env::new();
    env.write("keep", b"k0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "keep", Some(b"k1"));
    tool_edit(&env, &s, "d", 1, "sub/new", Some(b"n"));
    std::fs::remove_dir_all(env.p("sub")).expect("rm");
    env.write("keep", b"k2");
    let plan = s.plan_restore(1).expect("plan");
    let json = serde_json::to_value(&plan).expect("json");
    assert_eq!(json["actions"][0]["display"], "keep");
    assert_eq!(json["actions"][0]["action"]["kind"], "write");
    assert!(matches!(plan.actions[0].action, Action::Write { .. }));
    assert_eq!(
        plan.actions.len(),
        1,
        "sub/new is already absent: {plan:#?}"
    );
}

#[test]
fn torn_log_tails_are_cut_before_appending() {
    use std::io::Write as _;
    let env = Env::new();
    env.write("a", b"a0");
    env.write("b", b"b0");
    {
        let store = env.store();
        let s = env.session(&store);
        tool_edit(&env, &s, "c1", 1, "a", Some(b"a1"));
    }
    // A crash in the middle of appending a record: a frame header and half a payload.
    let rlog = env.root.join("sessions/s1/records.log");
    let payload = [4u8, 3, b'x', b'y', b'z'];
    let mut torn = Vec::new();
    torn.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    torn.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
    torn.extend_from_slice(&[0, 0, 0, 0]);
    torn.extend_from_slice(&payload[..3]);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&rlog)
        .expect("open")
        .write_all(&torn)
        .expect("w");
    assert_eq!(log_records(&rlog).1, torn.len(), "the tail is torn");
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(s.anchors().expect("read past nothing"), vec![1]);
    tool_edit(&env, &s, "c2", 1, "b", Some(b"b1"));
    let (recs, rest) = log_records(&rlog);
    assert_eq!(rest, 0, "the torn tail was cut before appending");
    assert!(recs.iter().all(|(k, _)| *k != DROPPED));
    assert_eq!(recs.iter().filter(|(k, _)| *k == GROUP).count(), 2);
    // A torn progress line in an open journal.
    let plan = s.plan_restore(1).expect("plan");
    let sha = plan
        .actions
        .iter()
        .find_map(|a| match &a.action {
            Action::Write { sha256, .. } if a.display == "b" => Some(sha256.clone()),
            _ => None,
        })
        .expect("b");
    let blob = env.root.join("blobs").join(&sha);
    std::fs::write(&blob, b"bad").expect("damage");
    assert_eq!(
        s.restore(&plan, "op").expect("restore").state,
        JournalState::Open
    );
    let jlog = env.root.join("sessions/s1/journals/op.log");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&jlog)
        .expect("open")
        .write_all(b"{\"p\":\"apply\",\"i\"")
        .expect("w");
    std::fs::write(&blob, b"b0").expect("repair");
    let c = s.continue_restore("op").expect("continue");
    assert_eq!(c.state, JournalState::Completed, "{c:?}");
    assert_eq!(
        s.restore_status("op").expect("status").state,
        JournalState::Completed
    );
    assert_eq!(env.read("a").as_deref(), Some(&b"a0"[..]));
    assert_eq!(env.read("b").as_deref(), Some(&b"b0"[..]));
}

#[test]
fn handles_are_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<snapshot_store::Store>();
    send_sync::<snapshot_store::Session>();
    send_sync::<snapshot_store::RestorePlan>();
    // Parallel captures of different calls on one session handle.
    let env = Env::new();
    for i in 0..8 {
        env.write(format!("f{i}"), format!("v{i}").as_bytes());
    }
    let store = env.store();
    let s = std::sync::Arc::new(env.session(&store));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                s.capture_before(&format!("c{i}"), Path::new(&format!("f{i}")))
                    .expect("capture");
                s.commit(&format!("c{i}"), 1, true).expect("commit");
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    for i in 0..8 {
        env.write(format!("f{i}"), b"changed");
    }
    let out = s
        .restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_eq!(out.written.len(), 8);
    assert_eq!(env.read("f3").as_deref(), Some(&b"v3"[..]));
}

#[test]
fn a_newer_store_marker_written_while_open_is_noticed_without_reopening() {
    let env = Env::new();
    env.write("a", b"x");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "a", Some(b"y"));
    assert!(store.newer_version().is_none());
    // A newer build sharing the store rewrites the marker (atomically, as builds do).
    let tmp = env.root.join(".store.json.tmp-other");
    std::fs::write(&tmp, br#"{"store_version":99}"#).expect("write");
    std::fs::rename(&tmp, env.root.join("store.json")).expect("rename");
    let e = s.capture_before("c2", Path::new("a")).expect_err("refused");
    assert!(e.to_string().contains("newer"), "{e}");
    assert!(matches!(s.plan_restore(1), Err(PlanError::NewerStore(_))));
    assert!(s.commit("c1", 1, true).is_err());
    assert!(s.prune(PruneOptions::default()).is_err());
    assert_eq!(store.newer_version().map(|n| n.found), Some(99));
    // Rewritten in place (same inode).
    std::fs::write(env.root.join("store.json"), br#"{"store_version":2}"#).expect("write");
    assert!(store.newer_version().is_none());
    tool_edit(&env, &s, "c3", 2, "a", Some(b"z"));
    // In place with the same size: caught by the changed modification time (the pause
    // makes it differ even on a filesystem with coarse timestamps).
    std::thread::sleep(std::time::Duration::from_millis(50));
    std::fs::write(env.root.join("store.json"), br#"{"store_version":9}"#).expect("write");
    assert!(s.capture_before("c4", Path::new("a")).is_err());
    assert_eq!(store.newer_version().map(|n| n.found), Some(9));
    // A removed marker fails closed.
    std::fs::remove_file(env.root.join("store.json")).expect("rm");
    assert!(s.capture_before("c4", Path::new("a")).is_err());
    assert!(store.newer_version().is_some());
}

#[test]
fn files_in_the_store_do_not_grow_with_tool_calls() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    env.write("f", b"0");
    tool_edit(&env, &s, "c0", 1, "f", Some(b"1"));
    let sessions = env.root.join("sessions");
    let after_one = count_files(&sessions);
    for i in 1..200u64 {
        tool_edit(
            &env,
            &s,
            &format!("c{i}"),
            1 + i / 10,
            "f",
            Some(format!("{i}").as_bytes()),
        );
    }
    s.recheck_tracked(100).expect("recheck");
    assert_eq!(
        count_files(&sessions),
        after_one,
        "one record log per session"
    );
    assert_eq!(after_one, 1);
    // Two handles on one session see each other's records.
    let t = env.session(&store);
    assert_eq!(t.anchors().expect("anchors"), s.anchors().expect("anchors"));
    tool_edit(&env, &t, "other", 500, "g", Some(b"g"));
    assert_eq!(s.anchors().expect("anchors").last(), Some(&500));
    tool_edit(&env, &s, "again", 501, "g", Some(b"g2"));
    assert_eq!(t.anchors().expect("anchors").last(), Some(&501));
    let plan = t.plan_restore(500).expect("plan");
    assert_eq!(plan.actions.len(), 1, "{plan:?}");
}

#[test]
fn two_handles_appending_to_one_session_at_once_lose_no_record() {
    let env = Env::new();
    for t in 0..2 {
        for i in 0..150 {
            env.write(format!("t{t}/f{i}"), b"before");
        }
    }
    let store = env.store();
    std::thread::scope(|scope| {
        for t in 0..2 {
            let (env, store) = (&env, &store);
            scope.spawn(move || {
                // Each thread has its own handle (its own log descriptor and lock).
                let s = env.session(store);
                for i in 0..150u64 {
                    let rel = format!("t{t}/f{i}");
                    s.capture_before(&format!("t{t}-c{i}"), Path::new(&rel))
                        .expect("capture");
                    env.write(&rel, b"after");
                    s.commit(&format!("t{t}-c{i}"), 1 + i, true)
                        .expect("commit");
                }
            });
        }
    });
    let log = env.root.join("sessions/s1/records.log");
    let (recs, torn) = log_records(&log);
    assert_eq!(torn, 0);
    assert_eq!(recs.iter().filter(|(k, _)| *k == GROUP).count(), 300);
    let s = env.session(&env.store());
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(
        plan.actions.len(),
        300,
        "every call's before-state is there"
    );
    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.read("t1/f149").as_deref(), Some(&b"before"[..]));
}

#[test]
fn calls_that_must_not_wait_run_only_when_nothing_is_in_the_way() {
    let env = Env::new();
    env.write("a.txt", b"a0");
    env.write("big.bin", &[7u8; 5000]);
    let store = env.store();
    let s = env.session(&store);
    // A fresh handle: its first write may compact the log, so it declines.
    assert!(
        s.try_capture_before("c0", Path::new("a.txt"), 4096)
            .is_none()
    );
    assert!(s.try_commit("c0", 1, true, 64).is_none());
    tool_edit(&env, &s, "c0", 1, "a.txt", Some(b"a1"));

    // Now it runs, and records what the blocking call records.
    let out = s
        .try_capture_before("c1", Path::new("a.txt"), 4096)
        .expect("runs")
        .expect("captured");
    assert!(matches!(out, CaptureOutcome::Captured { .. }), "{out:?}");
    env.write("a.txt", b"a2");
    let done = s
        .try_commit("c1", 2, true, 64)
        .expect("runs")
        .expect("committed");
    assert!(
        matches!(done, CommitOutcome::Committed { entries: 1, .. }),
        "{done:?}"
    );
    // A file over the limit, or a call staging more paths than allowed: declined.
    assert!(
        s.try_capture_before("c2", Path::new("big.bin"), 4096)
            .is_none()
    );
    s.capture_before("c2", Path::new("big.bin"))
        .expect("capture");
    s.capture_before("c2", Path::new("a.txt")).expect("capture");
    assert!(s.try_commit("c2", 2, true, 1).is_none());
    s.commit("c2", 2, true).expect("commit");
    // Invalid ids are refused at once, as by the blocking calls.
    assert!(matches!(
        s.try_capture_before("", Path::new("a.txt"), 4096),
        Some(Err(_))
    ));

    // Another user of the store lock (a blob sweep holds it exclusively): declined.
    let lock = std::fs::File::open(env.root.join("lock")).expect("lock file");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    assert!(
        s.try_capture_before("c3", Path::new("a.txt"), 4096)
            .is_none()
    );
    // A commit takes no store lock.
    assert!(s.try_commit("nothing-staged", 2, true, 64).is_some());
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::Unlock).expect("unlock");
    assert!(
        s.try_capture_before("c3", Path::new("a.txt"), 4096)
            .is_some()
    );

    // Another handle holding the log lock: declined.
    let log = std::fs::File::open(env.root.join("sessions/s1/records.log")).expect("log");
    rustix::fs::flock(&log, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    assert!(s.try_commit("c3", 3, true, 64).is_none());
    rustix::fs::flock(&log, rustix::fs::FlockOperation::Unlock).expect("unlock");
    assert!(matches!(
        s.try_commit("c3", 3, true, 64),
        Some(Ok(CommitOutcome::Committed { .. }))
    ));

    // Rewinding to 2 brings back what the first quick capture recorded (a1).
    let plan = s.plan_restore(2).expect("plan");
    s.restore(&plan, "op").expect("restore");
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a1"[..]));
}

#[test]
fn a_quick_capture_records_what_the_blocking_capture_records() {
    use sha2::Digest;
    let env = Env::new();
    // Run once, just before the next open of workspace path `x`: the file replaced between a
    // capture's look at it and its open.
    type Swap = Option<Box<dyn FnOnce() + Send>>;
    let swap = std::sync::Arc::new(std::sync::Mutex::new(Swap::None));
    let armed = swap.clone();
    let store = env.store_with(StoreOptions {
        seam: std::sync::Arc::new(crate::common::Watch(move |op, area, path: &Path| {
            if op == snapshot_store::FsOp::Open
                && area == snapshot_store::Area::Workspace
                && path == Path::new("x")
            {
                if let Some(f) = armed.lock().expect("lock").take() {
                    f();
                }
            }
        })),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    env.write("a", b"a0");
    tool_edit(&env, &s, "c0", 1, "a", Some(b"a1"));

    // Files of several sizes, a shorter one after a longer one: each captured whole, with
    // its own bytes.
    for (i, size) in [3000usize, 1, 0, 65_536, 17, 65_537]
        .into_iter()
        .enumerate()
    {
        let name = format!("f{i}");
        let bytes: Vec<u8> = (0..size).map(|k| (k * 7 + i) as u8).collect();
        env.write(&name, &bytes);
        let out = s
            .try_capture_before(&format!("q{i}"), Path::new(&name), 64 * 1024)
            .map(|r| r.expect("captured"));
        if size > 64 * 1024 {
            assert!(out.is_none(), "over the limit: declined");
            continue;
        }
        let Some(CaptureOutcome::Captured {
            sha256, size: got, ..
        }) = out
        else {
            panic!("{name}: {out:?}");
        };
        assert_eq!(got, size as u64, "{name}");
        assert_eq!(sha256, hex::encode(sha2::Sha256::digest(&bytes)), "{name}");
    }

    // The file replaced by something else just before the quick capture opens it (after its
    // `stat` saw a regular file): the outcome is the blocking capture's for what is there.
    let p = env.p("x");
    let to_symlink: Box<dyn Fn() + Send + Sync> = Box::new({
        let p = p.clone();
        move || {
            std::fs::remove_file(&p).expect("rm");
            std::os::unix::fs::symlink("a", &p).expect("symlink");
        }
    });
    let to_dir: Box<dyn Fn() + Send + Sync> = Box::new({
        let p = p.clone();
        move || {
            std::fs::remove_file(&p).expect("rm");
            std::fs::create_dir(&p).expect("mkdir");
        }
    });
    let to_fifo: Box<dyn Fn() + Send + Sync> = Box::new({
        let p = p.clone();
        move || {
            std::fs::remove_file(&p).expect("rm");
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .expect("mkfifo");
        }
    });
    let to_hard_link: Box<dyn Fn() + Send + Sync> = Box::new({
        let p = p.clone();
        let other = env.p("x-link");
        move || std::fs::hard_link(&p, &other).expect("link")
    });
    let to_absent: Box<dyn Fn() + Send + Sync> = Box::new({
        let p = p.clone();
        move || std::fs::remove_file(&p).expect("rm")
    });
    let swaps = [
        ("symlink", to_symlink),
        ("dir", to_dir),
        ("fifo", to_fifo),
        ("hard-link", to_hard_link),
        ("absent", to_absent),
    ];
    for (what, change) in swaps {
        let change = std::sync::Arc::new(change);
        env.write("x", b"regular");
        let once = std::sync::Arc::clone(&change);
        *swap.lock().expect("lock") = Some(Box::new(move || once()));
        let quick = s
            .try_capture_before(&format!("q-{what}"), Path::new("x"), 4096)
            .expect("runs")
            .expect("captured");
        assert!(swap.lock().expect("lock").is_none(), "{what}: swapped");
        // The same end state, captured by the blocking call.
        let _ = std::fs::remove_dir(&p);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(env.p("x-link"));
        env.write("x", b"regular");
        change();
        let blocking = s
            .capture_before(&format!("b-{what}"), Path::new("x"))
            .expect("captured");
        assert_eq!(quick, blocking, "{what}");
        assert!(
            !matches!(quick, CaptureOutcome::Captured { .. }),
            "{what}: {quick:?}"
        );
        let _ = std::fs::remove_dir(&p);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(env.p("x-link"));
    }
}

/// Frames of kind `kind` in the log of session `s1` that name `call`.
fn frames_naming(env: &Env, kind: u8, call: &str) -> usize {
    let (recs, _) = log_records(&env.root.join("sessions/s1/records.log"));
    let mut needle = vec![call.len() as u8];
    needle.extend_from_slice(call.as_bytes());
    recs.iter()
        .filter(|(k, p)| *k == kind && crate::common::contains(p, &needle))
        .count()
}

#[test]
fn a_commit_at_the_captured_anchor_joins_the_next_write() {
    let env = Env::new();
    env.write("a", b"a0");
    env.write("b", b"b0");
    let store = env.store();
    let s = env.session(&store);
    let log = env.root.join("sessions/s1/records.log");
    s.capture_before_at("c1", Path::new("a"), 4)
        .expect("capture");
    env.write("a", b"a1");
    let before = std::fs::metadata(&log).expect("log").len();
    assert_eq!(
        s.commit("c1", 4, true).expect("commit"),
        CommitOutcome::Committed {
            anchor_seq: 4,
            entries: 1
        }
    );
    assert_eq!(
        std::fs::metadata(&log).expect("log").len(),
        before,
        "the commit wrote nothing"
    );
    // This handle sees it committed at once (idempotent retry, plan).
    assert_eq!(
        s.commit("c1", 4, true).expect("retry"),
        CommitOutcome::Committed {
            anchor_seq: 4,
            entries: 1
        }
    );
    assert_eq!(s.anchors().expect("anchors"), vec![4]);
    // Another handle (another process) sees the call committed too, from its
    // anchored staged record.
    {
        let other = env.session(&env.store());
        assert_eq!(other.anchors().expect("anchors"), vec![4]);
    }
    // The next capture's write carries the commit.
    s.capture_before_at("c2", Path::new("b"), 4)
        .expect("capture");
    assert_eq!(frames_naming(&env, GROUP, "c1"), 1);
    env.write("b", b"b1");
    s.commit("c2", 4, true).expect("commit");
    assert_eq!(frames_naming(&env, GROUP, "c2"), 0);
    assert!(s.flush().expect("flush"), "one commit waited");
    assert!(!s.flush().expect("flush"), "nothing left");
    assert_eq!(frames_naming(&env, GROUP, "c2"), 1);
    // The after-state is known: a hand edit after the call is told apart.
    env.write("a", b"a-hand");
    let other = env.session(&env.store());
    let out = other.recheck_tracked(9).expect("recheck");
    assert!(!out.recorded.is_empty(), "{out:?}");
    let plan = other.plan_restore(4).expect("plan");
    other.restore(&plan, "op").expect("restore");
    assert_eq!(env.read("a").as_deref(), Some(&b"a0"[..]));
    assert_eq!(env.read("b").as_deref(), Some(&b"b0"[..]));
}

#[test]
fn a_commit_at_another_anchor_or_a_failed_call_is_written_at_once() {
    let env = Env::new();
    env.write("a", b"a0");
    env.write("b", b"b0");
    let store = env.store();
    let s = env.session(&store);
    s.capture_before_at("c1", Path::new("a"), 4)
        .expect("capture");
    env.write("a", b"a1");
    // A message arrived while the tool ran: the commit names a later anchor.
    s.commit("c1", 6, true).expect("commit");
    assert_eq!(frames_naming(&env, GROUP, "c1"), 1);
    assert_eq!(s.anchors().expect("anchors"), vec![6]);
    // (`b`: the state of `a` at 6 is recorded, so a capture of it there stages nothing.)
    s.capture_before_at("c2", Path::new("b"), 6)
        .expect("capture");
    s.commit("c2", 6, false).expect("drop");
    assert_eq!(frames_naming(&env, DROPPED, "c2"), 1);
    // A capture that names no anchor keeps the commit's own write.
    s.capture_before("c3", Path::new("a")).expect("capture");
    s.commit("c3", 6, true).expect("commit");
    assert_eq!(frames_naming(&env, GROUP, "c3"), 1);
}

#[test]
fn a_later_write_of_a_path_in_the_same_turn_reads_nothing_and_rewinds_to_the_first_state() {
    let env = Env::new();
    env.write("a", b"a, before the turn");
    env.write("b", b"b, before the turn");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(2).expect("boundary");
    let first = s
        .capture_before_at("c1", Path::new("a"), 2)
        .expect("capture");
    assert!(
        matches!(first, CaptureOutcome::Captured { .. }),
        "{first:?}"
    );
    env.write("a", b"a1, the first call's");
    s.commit("c1", 2, true).expect("commit");
    // The state the first call left is never a rewind target: the second call's capture of
    // the path stages nothing and reads nothing (on either way of calling).
    let again = s
        .capture_before_at("c2", Path::new("a"), 2)
        .expect("capture");
    assert!(
        matches!(again, CaptureOutcome::AlreadyRecorded { .. }),
        "{again:?}"
    );
    // Another path of the same call is captured as usual.
    let other = s
        .try_capture_before_at("c2", Path::new("b"), 2, 1 << 20)
        .expect("on this thread")
        .expect("capture");
    assert!(
        matches!(other, CaptureOutcome::Captured { .. }),
        "{other:?}"
    );
    env.write("a", b"a2, the second call's");
    env.write("b", b"b1");
    assert_eq!(
        s.commit("c2", 2, true).expect("commit"),
        CommitOutcome::Committed {
            anchor_seq: 2,
            entries: 1
        }
    );
    let third = s
        .try_capture_before_at("c3", Path::new("a"), 2, 1 << 20)
        .expect("on this thread")
        .expect("capture");
    assert!(
        matches!(third, CaptureOutcome::AlreadyRecorded { .. }),
        "{third:?}"
    );
    env.write("a", b"a3, the third call's");
    assert_eq!(
        s.try_commit("c3", 2, true, 16)
            .expect("on this thread")
            .expect("commit"),
        CommitOutcome::Committed {
            anchor_seq: 2,
            entries: 0
        }
    );
    s.flush().expect("flush");
    // Small files: their content is kept in the session's log, no blob file of its own.
    assert_eq!(env.blob_count(), 0);
    let stored: Vec<u8> = snapshot_dir(&env.root).into_values().flatten().collect();
    for (what, kept) in [
        (&b"a, before the turn"[..], true),
        (b"b, before the turn", true),
        (b"a1, the first call's", false),
        (b"a2, the second call's", false),
    ] {
        assert_eq!(
            contains(&stored, what),
            kept,
            "{} stored",
            String::from_utf8_lossy(what)
        );
    }
    // The commits recorded the after-states in the log: the next message (in a new
    // handle) finds `a` as the agent left it, a change of the agent's, not one made outside.
    drop(s);
    let s = env.session(&store);
    s.recheck_tracked(5).expect("boundary");
    let rel = s.resolve(Path::new("a")).expect("path");
    let origins = s
        .change_origins(2, std::slice::from_ref(&rel))
        .expect("origins");
    assert_eq!(
        origins.get(&rel),
        Some(&snapshot_store::ChangeOrigin::Agent)
    );
    let plan = s.plan_restore(2).expect("plan");
    let out = s.restore(&plan, "op-1").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.read("a").as_deref(), Some(&b"a, before the turn"[..]));
    assert_eq!(env.read("b").as_deref(), Some(&b"b, before the turn"[..]));
}

#[test]
fn a_write_found_recorded_whose_call_fails_or_commits_elsewhere_stays_exact() {
    let env = Env::new();
    env.write("a", b"a0");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(2).expect("boundary");
    tool_edit(&env, &s, "c1", 2, "a", Some(b"a1"));
    // A failed call: nothing staged, nothing to drop.
    s.capture_before_at("c2", Path::new("a"), 2)
        .expect("capture");
    assert_eq!(
        s.commit("c2", 2, false).expect("drop"),
        CommitOutcome::NothingStaged
    );
    assert_eq!(frames_naming(&env, DROPPED, "c2"), 0);
    // A message came while the tool ran: the commit names a later anchor, where the
    // path's state before the call was not read. Its state there is left to the next
    // re-check, and the rewind to the turn's message is still exact.
    s.capture_before_at("c3", Path::new("a"), 2)
        .expect("capture");
    env.write("a", b"a3");
    s.commit("c3", 4, true).expect("commit");
    s.recheck_tracked(4).expect("boundary");
    let plan = s.plan_restore(2).expect("plan");
    let out = s.restore(&plan, "op-1").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.read("a").as_deref(), Some(&b"a0"[..]));
}

#[test]
fn dropping_the_handle_writes_its_waiting_commits() {
    let env = Env::new();
    env.write("a", b"a0");
    {
        let store = env.store();
        let s = env.session(&store);
        s.capture_before_at("c1", Path::new("a"), 2)
            .expect("capture");
        env.write("a", b"a1");
        s.commit("c1", 2, true).expect("commit");
        assert_eq!(frames_naming(&env, GROUP, "c1"), 0);
    }
    assert_eq!(frames_naming(&env, GROUP, "c1"), 1);
}

#[test]
fn a_waiting_commit_whose_anchor_another_handle_pruned_is_not_written() {
    let env = Env::new();
    env.write("a", b"a0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c0", 1, "a", Some(b"a1"));
    s.capture_before_at("c1", Path::new("a"), 2)
        .expect("capture");
    env.write("a", b"a2");
    s.commit("c1", 2, true).expect("commit");
    // Another handle sees c1 committed at 2 and prunes that anchor's groups.
    {
        let other = env.session(&env.store());
        assert_eq!(other.anchors().expect("anchors"), vec![1, 2]);
        other
            .prune(PruneOptions {
                keep_groups: 1,
                keep_journals: 10,
            })
            .expect("prune");
    }
    let _ = s.flush().expect("flush");
    let fresh = env.session(&env.store());
    let anchors = fresh.anchors().expect("anchors");
    let (recs, _) = log_records(&env.root.join("sessions/s1/records.log"));
    let c1_groups = recs
        .iter()
        .filter(|(k, p)| *k == GROUP && crate::common::contains(p, b"\x02c1"))
        .count();
    assert!(c1_groups <= 1, "never written twice: {anchors:?}");
    assert_eq!(
        anchors,
        s.anchors().expect("anchors"),
        "both handles agree on what is left"
    );
}

#[test]
fn a_log_of_an_older_version_is_rewritten_in_this_version_before_the_first_write() {
    // Version 1 (before `staged_at`) and version 2 (before `blob`).
    for old in [1u32, 2] {
        older_log_rewritten(old);
    }
}

fn older_log_rewritten(old: u32) {
    let env = Env::new();
    env.write("a", b"a0");
    let log = env.root.join("sessions/s1/records.log");
    {
        let store = env.store();
        let s = env.session(&store);
        tool_edit(&env, &s, "c0", 1, "a", Some(b"a1"));
    }
    // As an earlier build wrote it: its version in the header (its records are the same).
    let mut bytes = std::fs::read(&log).expect("log");
    bytes[4..8].copy_from_slice(&old.to_le_bytes());
    std::fs::write(&log, &bytes).expect("write");
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(
        s.anchors().expect("anchors"),
        vec![1],
        "a log of version {old} opens"
    );
    s.capture_before_at("c1", Path::new("a"), 2)
        .expect("capture");
    let bytes = std::fs::read(&log).expect("log");
    assert_eq!(
        u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        snapshot_store::LOG_VERSION,
        "rewritten in this build's version first"
    );
    env.write("a", b"a2");
    s.commit("c1", 2, true).expect("commit");
    drop(s);
    let s = env.session(&store);
    assert_eq!(s.anchors().expect("anchors"), vec![1, 2]);
    s.restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_eq!(env.read("a").as_deref(), Some(&b"a0"[..]));
}

#[test]
fn a_recheck_of_many_changed_files_records_each_exactly() {
    // Enough changed paths, over several directories, for the re-check to read them on
    // several threads: files a tool wrote (content unknown until the boundary) and files
    // changed outside, a deleted one, and a directory put where a file was.
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    let names: Vec<String> = (0..240).map(|i| format!("d{}/f{i}", i % 7)).collect();
    for (i, n) in names.iter().enumerate() {
        env.write(n, format!("v0 {i}").as_bytes());
    }
    s.recheck_tracked(1).expect("recheck");
    for (i, n) in names.iter().enumerate() {
        let call = format!("c{i}");
        s.capture_before_at(&call, Path::new(n), 1)
            .expect("capture");
        env.write(n, format!("v1 {i} by the tool").as_bytes());
        s.commit(&call, 1, true).expect("commit");
    }
    let out = s.recheck_tracked(2).expect("recheck at 2");
    assert_eq!(
        out.recorded.len(),
        names.len(),
        "every tool-written file recorded"
    );
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    // Outside: every other file edited, one removed, one replaced by a directory.
    for (i, n) in names.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        env.write(n, format!("v2 {i} by hand").as_bytes());
    }
    env.remove(&names[1]);
    env.remove(&names[3]);
    std::fs::create_dir(env.p(&names[3])).expect("dir");
    let out = s.recheck_tracked(3).expect("recheck at 3");
    assert_eq!(out.recorded.len(), names.len() / 2 + 2);
    std::fs::remove_dir(env.p(&names[3])).expect("rmdir");
    // Each anchor's state comes back exactly.
    for (anchor, version) in [(2u64, "v1"), (1, "v0")] {
        let plan = s.plan_restore(anchor).expect("plan");
        let done = s.restore(&plan, &format!("op{anchor}")).expect("restore");
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        for (i, n) in names.iter().enumerate() {
            let want = match version {
                "v1" => format!("v1 {i} by the tool"),
                _ => format!("v0 {i}"),
            };
            assert_eq!(
                env.read(n).as_deref(),
                Some(want.as_bytes()),
                "{n} at {anchor}"
            );
        }
    }
}

#[test]
fn one_boundary_keeps_no_more_than_the_log_limit_and_the_rest_goes_to_blob_files() {
    // A turn that wrote more small files than the log keeps (64 MiB of content): the
    // boundary keeps files until the log is full, file by file, and the rest go to blob
    // files; every one of them comes back.
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("boundary 1");
    let n = 4200; // 4,200 × 16 KiB = 65.6 MiB
    let body = |i: usize| {
        let mut b = format!("file {i} ").into_bytes();
        b.resize(16 * 1024, b'.');
        b
    };
    s.capture_before_at("bulk", Path::new("d/seed"), 1)
        .expect("capture");
    for i in 0..n {
        s.capture_before_at("bulk", Path::new(&format!("d/f{i}")), 1)
            .expect("capture");
    }
    for i in 0..n {
        env.write(format!("d/f{i}"), &body(i));
    }
    s.commit("bulk", 1, true).expect("commit");
    s.recheck_tracked(2).expect("boundary 2");
    let log = std::fs::metadata(env.root.join("sessions/s1/records.log"))
        .expect("log")
        .len();
    assert!(log <= (64 << 20) + (1 << 20), "log of {log} bytes");
    assert!(log >= 60 << 20, "the log kept what fits: {log} bytes");
    let blobs = env.blob_count();
    assert!((1..n).contains(&blobs), "{blobs} blob files");
    // Every file changed by hand comes back from wherever its content went.
    for i in (0..n).step_by(97) {
        env.write(format!("d/f{i}"), b"changed");
    }
    s.recheck_tracked(3).expect("boundary 3");
    let plan = s.plan_restore(2).expect("plan");
    let done = s.restore(&plan, "op").expect("restore");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    for i in (0..n).step_by(97) {
        assert_eq!(env.read(format!("d/f{i}")), Some(body(i)), "d/f{i}");
    }
}

#[test]
fn a_boundary_keeps_small_files_in_the_log_and_every_anchor_restores_from_it() {
    // The files a tool wrote in a turn are read at the next message: the small ones go into
    // the session's record log, a large one into a blob file of its own.
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("boundary 1");
    let names: Vec<String> = (0..20).map(|i| format!("d{}/f{i}.txt", i % 3)).collect();
    let big_v1 = vec![b'x'; 20 * 1024];
    for (i, n) in names.iter().enumerate() {
        let call = format!("c{i}");
        s.capture_before_at(&call, Path::new(n), 1)
            .expect("capture");
        env.write(n, format!("v1 {i}").as_bytes());
        s.commit(&call, 1, true).expect("commit");
    }
    s.capture_before_at("cb", Path::new("big.bin"), 1)
        .expect("capture");
    env.write("big.bin", &big_v1);
    s.commit("cb", 1, true).expect("commit");
    let out = s.recheck_tracked(2).expect("boundary 2");
    assert_eq!(out.recorded.len(), names.len() + 1);
    assert_eq!(env.blob_count(), 1, "only the large file has a blob file");
    let log = env.root.join("sessions/s1/records.log");
    let kept = log_records(&log)
        .0
        .iter()
        .filter(|(k, _)| *k == BLOB)
        .count();
    assert_eq!(kept, names.len(), "one blob record per small file");
    // Changed outside the agent (no capture), recorded at the next boundary, also in the log;
    // two files now have the same content, kept once.
    for (i, n) in names.iter().enumerate() {
        env.write(n, format!("v2 {} by hand", i.min(18)).as_bytes());
    }
    s.recheck_tracked(3).expect("boundary 3");
    assert_eq!(env.blob_count(), 1);
    let kept = log_records(&log)
        .0
        .iter()
        .filter(|(k, _)| *k == BLOB)
        .count();
    assert_eq!(kept, 2 * names.len() - 1);
    // Nothing is missing for an integrity check: the log holds the content its records name.
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(s);
    drop(store);
    // A new handle reads the content back from the log; each anchor comes back exactly.
    let store = env.store();
    let s = env.session(&store);
    for (anchor, version) in [(2u64, "v1"), (3, "v2"), (1, "")] {
        let plan = s.plan_restore(anchor).expect("plan");
        let done = s.restore(&plan, &format!("op{anchor}")).expect("restore");
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        for (i, n) in names.iter().enumerate() {
            let want = match version {
                "v1" => Some(format!("v1 {i}")),
                "v2" => Some(format!("v2 {} by hand", i.min(18))),
                _ => None,
            };
            assert_eq!(env.read(n), want.map(String::into_bytes), "{n} at {anchor}");
        }
        let big = env.read("big.bin");
        assert_eq!(
            big.as_deref(),
            (anchor > 1).then_some(&big_v1[..]),
            "big.bin at {anchor}"
        );
    }
    // What the restores wrote was put into blob files first (the restore reads blob files).
    assert!(env.blob_count() > 1);
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn compaction_keeps_the_content_still_named_and_drops_the_rest() {
    let env = Env::new();
    let store = env.store_with(StoreOptions {
        compact_min_bytes: 1,
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    s.recheck_tracked(1).expect("boundary 1");
    // Five turns, each writing one new file (4 KiB, a marker of its own); each is kept in
    // the log at the next message.
    let content = |k: u64| format!("turn-{k}-marker\n{}", "y".repeat(4096));
    for k in 1..=5u64 {
        let (call, name) = (format!("c{k}"), format!("t{k}.txt"));
        s.capture_before_at(&call, Path::new(&name), k)
            .expect("capture");
        env.write(&name, content(k).as_bytes());
        s.commit(&call, k, true).expect("commit");
        s.recheck_tracked(k + 1).expect("boundary");
    }
    // t1..t3 removed by hand: once the groups that name their content are pruned, nothing
    // names it (their last known state is now "absent"). t4 and t5 are unchanged: their
    // last known content stays named by the tracked states.
    for k in 1..=3 {
        env.remove(format!("t{k}.txt"));
    }
    s.recheck_tracked(7).expect("boundary 7");
    let log = env.root.join("sessions/s1/records.log");
    let before = std::fs::read(&log).expect("log");
    for k in 1..=5 {
        assert!(contains(&before, format!("turn-{k}-marker").as_bytes()));
    }
    s.prune(PruneOptions {
        keep_groups: 1,
        ..PruneOptions::default()
    })
    .expect("prune");
    let after = std::fs::read(&log).expect("log");
    assert!(
        after.len() + 3 * 4096 < before.len(),
        "{} -> {}",
        before.len(),
        after.len()
    );
    for k in 1..=3 {
        assert!(
            !contains(&after, format!("turn-{k}-marker").as_bytes()),
            "t{k} dropped"
        );
    }
    for k in 4..=5 {
        assert!(
            contains(&after, format!("turn-{k}-marker").as_bytes()),
            "t{k} kept"
        );
    }
    assert_eq!(env.blob_count(), 0, "nothing went to blob files");
    // Reopened after the compaction: t4 changed by hand is recorded at the next message,
    // its state at message 7 (the kept content) with it, and comes back from the log.
    drop(s);
    drop(store);
    let store = env.store();
    let s = env.session(&store);
    env.write("t4.txt", b"changed by hand");
    s.recheck_tracked(8).expect("boundary 8");
    let plan = s.plan_restore(7).expect("plan");
    let done = s.restore(&plan, "op").expect("restore");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    assert_eq!(env.read("t4.txt"), Some(content(4).into_bytes()));
    assert_eq!(env.read("t5.txt"), Some(content(5).into_bytes()));
    assert_eq!(env.read("t1.txt"), None);
}

#[test]
fn content_a_handle_kept_is_read_back_from_the_log_file_and_checked_against_its_name() {
    // What a capture keeps in the log is not also held in memory by the handle that wrote
    // it: a restore by that handle reads it back from the log file and checks it against
    // its name. Bytes changed there since are damage: named, and nothing is written.
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    let old = |k: u32| format!("old-{k}-marker\n{}", "z".repeat(4000));
    for k in 0..3 {
        env.write(format!("f{k}.txt"), old(k).as_bytes());
    }
    for k in 0..3 {
        let call = format!("c{k}");
        s.capture_before_at(&call, Path::new(&format!("f{k}.txt")), 1)
            .expect("capture");
        env.write(format!("f{k}.txt"), b"new");
        s.commit(&call, 1, true).expect("commit");
    }
    assert_eq!(env.blob_count(), 0, "kept in the log");
    let plan = s.plan_restore(1).expect("plan");
    let done = s.restore(&plan, "op1").expect("restore");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    for k in 0..3 {
        assert_eq!(env.read(format!("f{k}.txt")), Some(old(k).into_bytes()));
    }
    // A second turn keeps g.txt's content; then a byte of it is changed in the log file.
    let g = format!("second-marker\n{}", "q".repeat(3000));
    env.write("g.txt", g.as_bytes());
    s.capture_before_at("c9", Path::new("g.txt"), 2)
        .expect("capture");
    env.write("g.txt", b"after");
    s.commit("c9", 2, true).expect("commit");
    s.flush().expect("flush");
    let log = env.root.join("sessions/s1/records.log");
    let bytes = std::fs::read(&log).expect("log");
    let at = bytes
        .windows(13)
        .position(|w| w == b"second-marker")
        .expect("kept in the log");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .expect("open log");
        f.write_all_at(b"S", at as u64).expect("damage");
    }
    let blobs = env.blob_count();
    let e = s.plan_restore(2).expect_err("damaged content");
    assert!(
        matches!(&e, PlanError::Corrupt(c) if c.detail.contains("reads back hashing to")),
        "{e}"
    );
    assert_eq!(
        env.read("g.txt"),
        Some(b"after".to_vec()),
        "nothing written"
    );
    assert_eq!(env.blob_count(), blobs, "no blob file written");
}

#[test]
fn a_quick_capture_of_a_path_not_there_records_what_the_blocking_capture_records() {
    // The quick capture takes a `stat` that finds nothing as the path's absence once the
    // walk to its parent found every parent a directory: behind a symlink, or where a
    // parent is missing or a file, the outcome is still the blocking capture's.
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    env.write("a", b"a0");
    tool_edit(&env, &s, "c0", 1, "a", Some(b"a1"));
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("sub")).expect("mkdir");
    std::fs::create_dir_all(env.p("d/e")).expect("mkdir");
    std::os::unix::fs::symlink(&outside, env.p("link")).expect("symlink");
    std::os::unix::fs::symlink(&outside, env.p("d/link")).expect("symlink");
    for (i, path) in [
        "new",
        "d/new",
        "d/e/new",
        "missing/new",
        "d/missing/deeper/new",
        "link/new",
        "link/sub/new",
        "d/link/sub/new",
        "a/new",
        "d/e/new/deeper",
    ]
    .into_iter()
    .enumerate()
    {
        let quick = s
            .try_capture_before(&format!("q{i}"), Path::new(path), 4096)
            .expect("runs")
            .expect("captured");
        let blocking = s
            .capture_before(&format!("b{i}"), Path::new(path))
            .expect("captured");
        assert_eq!(quick, blocking, "{path}");
    }
    let absent = |p: &str| {
        matches!(
            s.try_capture_before("x", Path::new(p), 4096)
                .expect("runs")
                .expect("captured"),
            CaptureOutcome::Absent { .. } | CaptureOutcome::AlreadyStaged { .. }
        )
    };
    assert!(absent("d/e/new"));
    assert!(!absent("d/link/sub/new"), "behind a symlink: skipped");
    assert!(absent("a/new"), "under a file: nothing can be there");
}

#[test]
fn a_quick_capture_of_a_file_in_a_directory_records_what_the_blocking_capture_records() {
    // The quick capture opens a file in a directory, which its `stat` showed regular, in
    // one call refusing any symlink on the way: the outcome is still the blocking
    // capture's, behind a symlink (to a regular file outside) or a file, at any depth,
    // and the file is opened once, its parents not at all.
    let env = Env::new();
    let (opens, _store, s) = CountOps::on_written_session(&env, snapshot_store::FsOp::Open);
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("sub")).expect("mkdir");
    std::fs::write(outside.join("f"), b"outside").expect("write");
    std::fs::write(outside.join("sub/f"), b"outside").expect("write");
    for p in ["d/f", "d/e/f", "d/e/g/f", "d/e/g/h/f"] {
        env.write(p, p.as_bytes());
    }
    std::os::unix::fs::symlink(&outside, env.p("link")).expect("symlink");
    std::os::unix::fs::symlink(&outside, env.p("d/link")).expect("symlink");
    std::os::unix::fs::symlink("..", env.p("d/e/up")).expect("symlink");
    std::os::unix::fs::symlink(outside.join("f"), env.p("d/e/to-file")).expect("symlink");
    let at = |p: &str| -> usize { p.matches('/').count() };
    for (i, path) in [
        "d/f",
        "d/e/f",
        "d/e/g/h/f",
        "link/f",
        "link/sub/f",
        "d/link/sub/f",
        "d/e/up/e/f",
        "d/e/to-file",
    ]
    .into_iter()
    .enumerate()
    {
        let before = opens.count();
        let quick = s
            .try_capture_before(&format!("q{i}"), Path::new(path), 4096)
            .expect("runs")
            .expect("captured");
        let quick_opens = opens.count() - before;
        let blocking = s
            .capture_before(&format!("b{i}"), Path::new(path))
            .expect("captured");
        // The blocking capture finds the content stored: only that may differ.
        let same = |o: &CaptureOutcome| match o.clone() {
            CaptureOutcome::Captured {
                path, sha256, size, ..
            } => CaptureOutcome::Captured {
                path,
                sha256,
                size,
                deduplicated: false,
            },
            o => o,
        };
        assert_eq!(same(&quick), same(&blocking), "{path}");
        // (Elsewhere than Linux, without `openat2`, the parents are walked.)
        if cfg!(target_os = "linux") && matches!(quick, CaptureOutcome::Captured { .. }) {
            assert_eq!(
                quick_opens,
                1,
                "{path}: one open, no walk ({} parents)",
                at(path)
            );
        }
    }
    // What was captured comes back.
    for p in ["d/f", "d/e/f", "d/e/g/h/f"] {
        env.write(p, b"changed by the tool");
    }
    for i in 0..8 {
        s.commit(&format!("q{i}"), 2, true).expect("commit");
        s.commit(&format!("b{i}"), 2, true).expect("commit");
    }
    let plan = s.plan_restore(2).expect("plan");
    let done = s.restore(&plan, "op").expect("restore");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    for p in ["d/f", "d/e/f", "d/e/g/h/f"] {
        assert_eq!(env.read(p), Some(p.as_bytes().to_vec()), "{p}");
    }
    assert_eq!(
        std::fs::read(outside.join("sub/f")).expect("read"),
        b"outside"
    );
}

/// Counts the calls of one kind a store makes.
struct CountOps(snapshot_store::FsOp, std::sync::atomic::AtomicUsize);

impl CountOps {
    fn count(&self) -> usize {
        self.1.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A store counting its calls of kind `op`, and its session once a first tool call has
    /// edited `a` at anchor 1 (the handle has written: its quick calls can run).
    fn on_written_session(
        env: &Env,
        op: snapshot_store::FsOp,
    ) -> (
        std::sync::Arc<CountOps>,
        snapshot_store::Store,
        snapshot_store::Session,
    ) {
        let ops = std::sync::Arc::new(CountOps(op, Default::default()));
        let store = env.store_with(StoreOptions {
            seam: ops.clone(),
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        env.write("a", b"a0");
        tool_edit(env, &s, "c0", 1, "a", Some(b"a1"));
        (ops, store, s)
    }
}

impl snapshot_store::FaultSeam for CountOps {
    fn before(
        &self,
        op: snapshot_store::FsOp,
        _area: snapshot_store::Area,
        _path: &Path,
    ) -> std::io::Result<()> {
        if op == self.0 {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }
}

#[test]
fn a_handle_keeping_its_locks_takes_them_once_per_burst_and_others_wait_for_their_release() {
    let env = Env::new();
    // The lock calls (`flock` other than an unlock) the store makes.
    let (locks, _store, s) = CountOps::on_written_session(&env, snapshot_store::FsOp::Lock);
    s.keep_locks_between_calls(true);
    let count = || locks.count();

    // A burst: the first call that must not wait takes the locks, the next ones none.
    let quick = |call: &str, path: &str| {
        env.write(path, call.as_bytes());
        let out = s
            .try_capture_before_at(call, Path::new(path), 2, 4096)
            .expect("runs")
            .expect("captured");
        assert!(matches!(out, CaptureOutcome::Captured { .. }), "{out:?}");
        env.write(path, b"changed by the tool");
        s.try_commit(call, 2, true, 64)
            .expect("runs")
            .expect("committed");
    };
    let before = count();
    quick("q1", "b");
    assert!(count() > before, "the first call of the burst locks");
    let after_first = count();
    for i in 2..6 {
        quick(&format!("q{i}"), &format!("f{i}"));
    }
    assert_eq!(count(), after_first, "the burst's other calls take no lock");

    // Another handle on the same store (as another process would) waits for the locks...
    let other_store = env.store();
    let other = env.session(&other_store);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            env.write("o", b"other");
            let out = other.capture_before("o1", Path::new("o")).expect("capture");
            env.write("o", b"changed by the other tool");
            other.commit("o1", 2, true).expect("commit");
            tx.send(out).expect("send");
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            rx.try_recv().is_err(),
            "the other handle waits for the kept locks"
        );
        // ...until they are released once idle.
        assert!(
            !s.release_idle_locks(std::time::Duration::from_secs(3600)),
            "not idle that long"
        );
        assert!(s.release_idle_locks(std::time::Duration::ZERO));
        let out = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the other handle goes on");
        assert!(matches!(out, CaptureOutcome::Captured { .. }), "{out:?}");
    });
    assert!(
        !s.release_idle_locks(std::time::Duration::ZERO),
        "nothing kept"
    );

    // The next burst takes them again and sees what the other handle wrote.
    let before = count();
    quick("q9", "g");
    assert!(count() > before);
    // A call of the handle that may wait releases them first: it never waits on itself.
    let plan = s.plan_restore(2).expect("plan");
    let mut paths: Vec<String> = plan.actions.iter().map(|a| a.path.display()).collect();
    paths.sort();
    assert_eq!(paths, ["b", "f2", "f3", "f4", "f5", "g", "o"]);
    s.capture_before("slow", Path::new("a"))
        .expect("a blocking capture while locks are kept");
    assert!(
        !s.release_idle_locks(std::time::Duration::ZERO),
        "released by that call"
    );
}

#[test]
fn locks_taken_ahead_of_a_burst_leave_its_first_call_none_to_take() {
    let env = Env::new();
    let (locks, _store, s) = CountOps::on_written_session(&env, snapshot_store::FsOp::Lock);
    // Another handle on the same store (as another process), which has written too.
    let other_store = env.store();
    let other = env.session(&other_store);
    other.keep_locks_between_calls(true);
    tool_edit(&env, &other, "o0", 1, "o", Some(b"o1"));
    // A handle that does not keep its locks takes none ahead.
    let before = locks.count();
    assert!(!s.take_locks_ahead());
    assert_eq!(locks.count(), before, "no lock taken");

    s.keep_locks_between_calls(true);
    assert!(s.take_locks_ahead(), "taken ahead");
    let ahead = locks.count();
    assert!(ahead > before, "the locks were taken");
    // The burst's first call finds them held.
    env.write("b", b"b0");
    let out = s
        .try_capture_before_at("q1", Path::new("b"), 2, 4096)
        .expect("runs")
        .expect("captured");
    assert!(matches!(out, CaptureOutcome::Captured { .. }), "{out:?}");
    env.write("b", b"b1");
    s.try_commit("q1", 2, true, 64)
        .expect("runs")
        .expect("committed");
    assert_eq!(locks.count(), ahead, "the first call took no lock");

    // The other handle finds them held until they are released once idle...
    assert!(!other.take_locks_ahead(), "held by the first handle");
    assert!(s.release_idle_locks(std::time::Duration::ZERO));
    assert!(other.take_locks_ahead(), "free again");
    assert!(other.release_idle_locks(std::time::Duration::ZERO));
    // ...or by a call of the handle that may wait (the flush of the burst's commits).
    assert!(s.take_locks_ahead());
    assert!(
        s.flush().expect("flush"),
        "the burst's commit waited for it"
    );
    assert!(
        !s.release_idle_locks(std::time::Duration::ZERO),
        "released by the flush"
    );
    // What the burst wrote is there for the other handle.
    let plan = other.plan_restore(2).expect("plan");
    let paths: Vec<String> = plan.actions.iter().map(|a| a.path.display()).collect();
    assert_eq!(paths, ["b"]);
}

#[test]
fn a_commit_after_a_pause_leaves_its_lstat_to_the_next_call_and_one_within_a_burst_does_not() {
    let env = Env::new();
    let (ops, _store, s) = RecordOps::on_written_session(&env);
    let stats = || {
        ops.workspace_calls()
            .into_iter()
            .filter(|(op, _, _)| *op == snapshot_store::FsOp::Stat)
            .map(|(_, _, p)| p.display().to_string())
            .collect::<Vec<_>>()
    };
    // A burst lasts an hour here: the handle's first commit on the calling thread comes after
    // no other and leaves its look; the next ones, within the burst, look at once.
    s.look_later_after(std::time::Duration::from_secs(3600));
    let call = |id: &str, rel: &str, body: &[u8]| {
        s.try_capture_before_at(id, Path::new(rel), 2, 4096)
            .expect("runs")
            .expect("captured");
        env.write(rel, body);
        stats();
        s.try_commit(id, 2, true, 64)
            .expect("runs")
            .expect("committed");
        stats()
    };
    assert_eq!(
        call("c1", "b", b"b1"),
        Vec::<String>::new(),
        "after a pause"
    );
    let next = call("c2", "c", b"c1");
    assert_eq!(next, ["c"], "within the burst: its own path only");
    // The next call looked at `b` first: the burst's capture of `c` made that `lstat`.
    s.flush().expect("flush");
    assert_eq!(stats(), Vec::<String>::new(), "nothing left to look at");
    // The states the burst left are the tools': the next message records each file's
    // content once, as after any tool's write, and a rewind brings back the states before.
    let recorded = s.recheck_tracked(3).expect("recheck").recorded;
    let mut paths: Vec<String> = recorded.iter().map(|c| c.path.display()).collect();
    paths.sort();
    assert_eq!(paths, ["a", "b", "c"]);
    let plan = s.plan_restore(2).expect("plan");
    s.restore(&plan, "op").expect("restore");
    assert_eq!(env.read("b"), None);
    assert_eq!(env.read("c"), None);
    assert_eq!(env.read("a").as_deref(), Some(&b"a1"[..]));
    // With no pause required, every commit on the calling thread leaves its look.
    s.look_later_after(std::time::Duration::ZERO);
    assert_eq!(call("c3", "d", b"d1"), Vec::<String>::new());
    assert_eq!(call("c4", "e", b"e1"), Vec::<String>::new());
}

#[test]
fn a_commit_looks_at_a_written_path_with_one_stat_and_no_walk() {
    use snapshot_store::{Area, FsOp};
    let env = Env::new();
    env.write("d/e/f", b"f0");
    let (ops, _store, s) = RecordOps::on_written_session(&env);
    let out = s
        .try_capture_before_at("c1", Path::new("d/e/f"), 2, 4096)
        .expect("runs")
        .expect("captured");
    assert!(matches!(out, CaptureOutcome::Captured { .. }), "{out:?}");
    env.write("d/e/f", b"written by the tool");
    let workspace_calls = || ops.workspace_calls();
    workspace_calls();
    s.try_commit("c1", 2, true, 64)
        .expect("runs")
        .expect("committed");
    // On the calling thread the commit looks at nothing: the handle's next call (here its
    // flush) looks at the path, with one `lstat`.
    assert_eq!(workspace_calls(), [], "the commit");
    s.flush().expect("flush");
    assert_eq!(
        workspace_calls(),
        [(
            FsOp::Stat,
            Area::Workspace,
            std::path::PathBuf::from("d/e/f")
        )],
        "the flush"
    );
    // The next message's re-check reads the content the tool wrote.
    let at = |recorded: &[snapshot_store::RecordedChange]| {
        recorded
            .iter()
            .find(|c| c.path.display() == "d/e/f")
            .map(|c| c.before.clone())
    };
    let recorded = s.recheck_tracked(3).expect("recheck").recorded;
    assert!(
        matches!(at(&recorded), Some(BeforeState::File { size: 19, .. })),
        "{recorded:?}"
    );

    // A parent replaced by a symlink between the capture and the commit: the commit follows
    // it, and the re-check, which does not, records the path as changed.
    let elsewhere = env.tmp.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("e")).expect("mkdir");
    std::fs::write(elsewhere.join("e").join("f"), b"outside").expect("write");
    env.write("d/e/f", b"f3");
    s.try_capture_before_at("c2", Path::new("d/e/f"), 4, 4096)
        .expect("runs")
        .expect("captured");
    std::fs::rename(env.p("d"), env.tmp.path().join("moved")).expect("move");
    std::os::unix::fs::symlink(&elsewhere, env.p("d")).expect("symlink");
    s.try_commit("c2", 4, true, 64)
        .expect("runs")
        .expect("committed");
    s.flush().expect("flush");
    let recorded = s.recheck_tracked(5).expect("recheck").recorded;
    assert!(
        matches!(at(&recorded), Some(BeforeState::Skipped { .. })),
        "recorded as not capturable, never as the file beyond the symlink: {recorded:?}"
    );
    assert_eq!(
        std::fs::read(elsewhere.join("e").join("f")).expect("read"),
        b"outside",
        "nothing written through the symlink"
    );
}

/// Records the calls a store makes: kind, area, path.
#[derive(Default)]
struct RecordOps(
    std::sync::Mutex<
        Vec<(
            snapshot_store::FsOp,
            snapshot_store::Area,
            std::path::PathBuf,
        )>,
    >,
);

impl RecordOps {
    /// A store recording its calls, and its session once a first tool call has edited `a` at
    /// anchor 1 (the handle has written: its quick calls can run).
    fn on_written_session(
        env: &Env,
    ) -> (
        std::sync::Arc<RecordOps>,
        snapshot_store::Store,
        snapshot_store::Session,
    ) {
        let ops = std::sync::Arc::new(RecordOps::default());
        let store = env.store_with(StoreOptions {
            seam: ops.clone(),
            ..StoreOptions::default()
        });
        let s = env.session(&store);
        tool_edit(env, &s, "c0", 1, "a", Some(b"a1"));
        (ops, store, s)
    }

    /// The workspace calls recorded since the last time this was asked.
    fn workspace_calls(
        &self,
    ) -> Vec<(
        snapshot_store::FsOp,
        snapshot_store::Area,
        std::path::PathBuf,
    )> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
            .into_iter()
            .filter(|(_, area, _)| *area == snapshot_store::Area::Workspace)
            .collect()
    }
}

impl snapshot_store::FaultSeam for RecordOps {
    fn before(
        &self,
        op: snapshot_store::FsOp,
        area: snapshot_store::Area,
        path: &Path,
    ) -> std::io::Result<()> {
        self.0
            .lock()
            .expect("lock")
            .push((op, area, path.to_path_buf()));
        Ok(())
    }
}

/// Power-loss mode rewrites a small file that exists in place, as the default mode
/// does (no new inode, no temporary name): the filesystem is synced first (the rescue
/// blobs on disk before any bytes they keep are written over), and each file is
/// `fsync`ed after its last write.
#[cfg(target_os = "linux")]
#[test]
fn a_power_loss_mode_restore_writes_small_files_in_place_after_a_sync_and_syncs_each() {
    use snapshot_store::{Area, FsOp};
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    let ops = std::sync::Arc::new(RecordOps::default());
    let store = env.store_with(StoreOptions {
        seam: ops.clone(),
        durability: snapshot_store::Durability::PowerLoss,
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    env.write("a", b"a0");
    env.write("d/b", &[b'b'; 5000]);
    s.recheck_tracked(1).expect("recheck");
    tool_edit(&env, &s, "c1", 1, "a", Some(b"a1, longer"));
    tool_edit(&env, &s, "c2", 1, "d/b", Some(&[b'c'; 300]));
    let ino = |p: &str| std::fs::metadata(env.p(p)).expect("stat").ino();
    let inodes = (ino("a"), ino("d/b"));
    let plan = s.plan_restore(1).expect("plan");
    ops.0.lock().expect("lock").clear();
    let out = s.restore(&plan, "op").expect("restore");
    assert_eq!(out.state, JournalState::Completed);
    assert_eq!(out.written.len(), 2, "{out:?}");
    assert_eq!(env.read("a").as_deref(), Some(&b"a0"[..]));
    assert_eq!(env.read("d/b").as_deref(), Some(&[b'b'; 5000][..]));
    assert_eq!((ino("a"), ino("d/b")), inodes, "written in place");
    let ops = ops.0.lock().expect("lock").clone();
    let at = |want: &dyn Fn(&(FsOp, Area, std::path::PathBuf)) -> bool| ops.iter().rposition(want);
    let fs_sync = ops
        .iter()
        .position(|(op, area, p)| {
            *op == FsOp::Sync && *area == Area::Store && p.as_os_str().is_empty()
        })
        .expect("the store's filesystem synced");
    let first_write = ops
        .iter()
        .position(|(op, area, _)| *op == FsOp::Write && *area == Area::Workspace)
        .expect("a workspace write");
    assert!(
        fs_sync < first_write,
        "synced before the first write: {ops:?}"
    );
    for p in ["a", "d/b"] {
        let mine = |op: FsOp| {
            move |o: &(FsOp, Area, std::path::PathBuf)| {
                o.0 == op && o.1 == Area::Workspace && o.2 == Path::new(p)
            }
        };
        let last_write = at(&mine(FsOp::Write)).expect("written");
        let sync = at(&mine(FsOp::Sync)).expect("synced");
        assert!(
            last_write < sync,
            "{p}: synced after its last write: {ops:?}"
        );
    }
    assert!(
        !ops.iter()
            .any(|o| o.0 == FsOp::Rename && o.1 == Area::Workspace),
        "no file replaced: {ops:?}"
    );
}

/// A re-check of more tracked paths than it looks at on one thread finds every change
/// among them (an edit, a removal, a directory replaced by a file) and records them in
/// path order, and a restore to the message before brings them all back.
#[test]
fn a_re_check_of_many_tracked_paths_finds_each_change_in_path_order() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    let name = |d: usize, f: usize| format!("d{d:02}/f{f:03}");
    for d in 0..60 {
        for f in 0..100 {
            env.write(name(d, f), format!("{d} {f}").as_bytes());
        }
    }
    for d in 0..60 {
        for f in 0..100 {
            s.capture_before("bulk", Path::new(&name(d, f)))
                .expect("capture");
        }
    }
    s.commit("bulk", 1, true).expect("commit");
    let first = s.recheck_tracked(2).expect("recheck");
    assert_eq!(first.checked, 6000);
    let pre = env.snapshot();
    env.write(name(3, 7), b"edited");
    env.write(name(59, 99), b"edited too");
    std::fs::remove_file(env.p(name(10, 50))).expect("rm");
    std::fs::remove_dir_all(env.p("d20")).expect("rm dir");
    env.write("d20", b"a file where a directory was");
    let out = s.recheck_tracked(3).expect("recheck");
    assert!(out.failed.is_empty(), "{out:?}");
    let mut want: Vec<String> = vec![name(3, 7), name(10, 50), name(59, 99)];
    want.extend((0..100).map(|f| name(20, f)));
    want.sort();
    let got: Vec<String> = out.recorded.iter().map(|r| r.path.display()).collect();
    assert_eq!(got, want);
    // Unchanged since: the next re-check records nothing new, a path whose parent is
    // still not a directory included.
    let again = s.recheck_tracked(4).expect("recheck");
    assert!(again.recorded.is_empty(), "{again:?}");
    // The directory back with one of its files: that file is recorded again (the others
    // were absent under the file, and still are).
    std::fs::remove_file(env.p("d20")).expect("rm");
    env.write(name(20, 5), b"back");
    let back = s.recheck_tracked(5).expect("recheck");
    let got: Vec<String> = back.recorded.iter().map(|r| r.path.display()).collect();
    assert_eq!(got, [name(20, 5)]);
    assert!(s.recheck_tracked(6).expect("recheck").recorded.is_empty());
    std::fs::remove_dir_all(env.p("d20")).expect("rm dir");
    let restored = s
        .restore(&s.plan_restore(2).expect("plan"), "op")
        .expect("restore");
    assert!(restored.failed.is_empty(), "{restored:?}");
    assert_eq!(env.snapshot(), pre);
}

#[test]
fn a_small_file_is_kept_in_the_log_without_looking_for_a_blob_file_of_it() {
    let env = Env::new();
    env.write("src/a.ts", b"the same content");
    // A blob file with that content, from another session of a store that keeps nothing in
    // its logs.
    {
        let store = env.store_with_blob_files();
        let other = store.session("other", &env.cwd).expect("session");
        tool_edit(&env, &other, "o1", 1, "src/a.ts", Some(b"the same content"));
        assert_eq!(env.blob_count(), 1);
    }
    // Every `stat` of a blob file's name in the store, as the store makes it.
    let stats = std::sync::Arc::new(std::sync::Mutex::new(Vec::<std::path::PathBuf>::new()));
    let seen = stats.clone();
    let store = env.store_with(StoreOptions {
        seam: std::sync::Arc::new(crate::common::Watch(move |op, area, path: &Path| {
            if op == snapshot_store::FsOp::Stat
                && area == snapshot_store::Area::Store
                && path.starts_with("blobs")
            {
                seen.lock().expect("lock").push(path.to_path_buf());
            }
        })),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    match s
        .capture_before("c1", Path::new("src/a.ts"))
        .expect("capture")
    {
        CaptureOutcome::Captured { deduplicated, .. } => assert!(!deduplicated),
        o => panic!("{o:?}"),
    }
    env.write("src/a.ts", b"the tool's content");
    s.commit("c1", 1, true).expect("commit");
    assert_eq!(
        *stats.lock().expect("lock"),
        Vec::<std::path::PathBuf>::new(),
        "the capture looked for a blob file"
    );
    // Kept in the log: no new blob file, and the rewind brings the content back from there.
    assert_eq!(env.blob_count(), 1);
    let log = env.root.join("sessions/s1/records.log");
    let kept = log_records(&log)
        .0
        .iter()
        .filter(|(k, _)| *k == BLOB)
        .count();
    assert_eq!(kept, 1, "the content is kept in the log");
    s.restore(&s.plan_restore(1).expect("plan"), "op")
        .expect("restore");
    assert_eq!(
        env.read("src/a.ts").as_deref(),
        Some(&b"the same content"[..])
    );
}

#[test]
fn a_prune_with_nothing_to_do_does_not_wait_for_the_store_lock() {
    // The plugin prunes at every message. One with nothing to prune takes no store lock, so it
    // does not wait behind another process's calls (here: a shared lock held on the store's
    // lock file); one that has something to do still takes the exclusive lock.
    let env = Env::new();
    env.write("f", b"0");
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "f", Some(b"1"));
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .open(env.root.join("lock"))
        .expect("lock file");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared).expect("flock");
    let (tx, rx) = std::sync::mpsc::channel();
    let spare = env
        .root
        .join("sessions")
        .join("s1")
        .join(".scan.json.spare");
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let r = s.prune(PruneOptions::default()).expect("prune");
            tx.send(r).expect("send");
            // A temporary left by a crash: this prune has something to do, and waits.
            std::fs::write(&spare, b"kept").expect("spare");
            std::fs::write(spare.with_file_name(".scan.json.tmp-1-1"), b"left").expect("tmp");
            let r = s.prune(PruneOptions::default()).expect("prune");
            tx.send(r).expect("send");
        });
        let first = rx.recv_timeout(std::time::Duration::from_secs(10));
        if first.is_err() {
            // Let the waiting prune go, so that the test fails instead of hanging.
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::Unlock).expect("unlock");
        }
        let first = first.expect("a prune with nothing to do returned while the lock was held");
        assert_eq!((first.groups_removed, first.journals_removed), (0, 0));
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "a prune with something to do waits for the lock"
        );
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::Unlock).expect("unlock");
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the second prune");
    });
    assert!(!spare.with_file_name(".scan.json.tmp-1-1").exists());
    assert_eq!(std::fs::read(&spare).expect("the spare is kept"), b"kept");
    assert_eq!(s.anchors().expect("anchors"), vec![1]);
}

#[test]
fn a_prune_sweeps_a_temporary_left_in_the_sessions_journals() {
    // A crash in the middle of a journal's atomic write leaves its temporary in `journals/`:
    // the next message's prune has that to do (the session has nothing else) and removes it.
    let env = Env::new();
    env.write("f", b"0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "f", Some(b"1"));
    let journals = env.root.join("sessions").join("s1").join("journals");
    std::fs::create_dir_all(&journals).expect("journals");
    let tmp = journals.join(".op-1.json.tmp-1-1");
    std::fs::write(&tmp, b"torn").expect("temporary");
    let r = s.prune(PruneOptions::default()).expect("prune");
    assert_eq!((r.groups_removed, r.journals_removed), (0, 0));
    assert!(!tmp.exists(), "the temporary is swept");
    assert_eq!(s.anchors().expect("anchors"), vec![1]);
}

#[test]
fn groups_are_dropped_in_batches_so_the_blob_sweep_runs_once_per_batch() {
    // With 20 groups kept, the oldest are dropped once there are more than 22 (a tenth
    // more), all the way down to 20: the store-wide sweep that follows a drop runs every
    // third new group, not at every one.
    let env = Env::new();
    let store = env.store_with_blob_files();
    let s = env.session(&store);
    let opts = PruneOptions {
        keep_groups: 20,
        keep_journals: 10,
    };
    let mut swept = Vec::new();
    for i in 0..30u64 {
        env.write("f", format!("content {i}").as_bytes());
        tool_edit(&env, &s, &format!("c{i}"), 10 + i, "f", Some(b"tool"));
        let rep = s.prune(opts).expect("prune");
        if rep.groups_removed > 0 {
            swept.push((i + 1, rep.groups_removed, rep.gc.blobs_removed));
        }
    }
    // 23 groups after the 23rd call: 3 dropped, their 3 blobs swept; then at 26 and 29.
    assert_eq!(swept, vec![(23, 3, 3), (26, 3, 3), (29, 3, 3)]);
    let anchors = s.anchors().expect("anchors");
    assert_eq!(anchors.len(), 21);
    assert_eq!(anchors.first(), Some(&19));
    // The oldest group kept still restores.
    s.restore(&s.plan_restore(19).expect("plan"), "op")
        .expect("restore");
    assert_eq!(env.read("f").as_deref(), Some(&b"content 9"[..]));
}

/// The store's writes of content (blob files and temporary files), as the seam sees them.
fn content_writes(
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> impl Fn(snapshot_store::FsOp, snapshot_store::Area, &Path) + Send + Sync {
    move |op, area, path| {
        use snapshot_store::{Area, FsOp};
        let content = path.starts_with("blobs") || path.starts_with("tmp");
        if area == Area::Store && content && matches!(op, FsOp::Create | FsOp::Write | FsOp::Rename)
        {
            seen.lock()
                .expect("lock")
                .push(format!("{op} {}", path.display()));
        }
    }
}

#[test]
fn a_capture_of_content_the_store_has_writes_nothing_for_files_up_to_one_mib() {
    use sha2::Digest;
    let env = Env::new();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let store = env.store_with(StoreOptions {
        seam: std::sync::Arc::new(crate::common::Watch(content_writes(seen.clone()))),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    for (i, size) in [65_537usize, 300_000, 1 << 20, (1 << 20) + 1]
        .into_iter()
        .enumerate()
    {
        let bytes: Vec<u8> = (0..size).map(|k| (k * 31 + i) as u8).collect();
        let (first, copy) = (format!("f{i}"), format!("copy{i}"));
        env.write(&first, &bytes);
        env.write(&copy, &bytes);
        seen.lock().expect("lock").clear();
        tool_edit(&env, &s, &format!("a{i}"), 1, &first, Some(b"x"));
        assert!(
            !seen.lock().expect("lock").is_empty(),
            "{size}: new content is written"
        );
        seen.lock().expect("lock").clear();
        let out = s
            .capture_before(&format!("b{i}"), Path::new(&copy))
            .expect("capture");
        let CaptureOutcome::Captured {
            sha256,
            size: got,
            deduplicated,
            ..
        } = out
        else {
            panic!("{size}: {out:?}");
        };
        assert_eq!(got, size as u64);
        assert_eq!(sha256, hex::encode(sha2::Sha256::digest(&bytes)));
        assert!(deduplicated, "{size}: the store has it");
        let writes = seen.lock().expect("lock").clone();
        if size <= 1 << 20 {
            assert!(
                writes.is_empty(),
                "{size}: read whole, nothing written: {writes:?}"
            );
        } else {
            // Streamed: copied to a temporary file, removed when the store has it.
            assert!(!writes.is_empty(), "{size}: streamed");
        }
        env.write(&copy, b"y");
        s.commit(&format!("b{i}"), 1, true).expect("commit");
        // Both come back whole.
        let plan = s.plan_restore(1).expect("plan");
        s.restore(&plan, &format!("op{i}")).expect("restore");
        assert_eq!(env.read(&first).as_deref(), Some(&bytes[..]), "{size}");
        assert_eq!(env.read(&copy).as_deref(), Some(&bytes[..]), "{size}");
    }
    assert_eq!(
        std::fs::read_dir(env.root.join("tmp"))
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "no temporary file left"
    );
}

#[test]
fn a_file_that_grows_past_its_size_while_read_whole_is_captured_with_what_it_grew_to() {
    use sha2::Digest;
    let env = Env::new();
    for size in [1000usize, 200_000, 1 << 20] {
        let name = format!("g{size}");
        let start: Vec<u8> = (0..size).map(|k| (k % 251) as u8).collect();
        env.write(&name, &start);
        // Its first read by the store finds it longer by 100 KiB than its `fstat` said.
        let armed = std::sync::atomic::AtomicBool::new(true);
        let path = env.p(&name);
        let target = name.clone();
        let store = env.store_with(StoreOptions {
            seam: std::sync::Arc::new(crate::common::Watch(move |op, area, p: &Path| {
                use std::io::Write;
                if op == snapshot_store::FsOp::Read
                    && area == snapshot_store::Area::Workspace
                    && p == Path::new(&target)
                    && armed.swap(false, std::sync::atomic::Ordering::SeqCst)
                {
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .expect("open");
                    f.write_all(&vec![b'+'; 100 << 10]).expect("grow");
                }
            })),
            ..StoreOptions::default()
        });
        let s = store
            .session(&format!("s{size}"), &env.cwd)
            .expect("session");
        let mut grown = start.clone();
        grown.extend(std::iter::repeat_n(b'+', 100 << 10));
        let out = s.capture_before("c", Path::new(&name)).expect("capture");
        let CaptureOutcome::Captured {
            sha256, size: got, ..
        } = out
        else {
            panic!("{size}: {out:?}");
        };
        assert_eq!(got, grown.len() as u64, "{size}");
        assert_eq!(sha256, hex::encode(sha2::Sha256::digest(&grown)), "{size}");
        env.write(&name, b"after");
        s.commit("c", 1, true).expect("commit");
        let plan = s.plan_restore(1).expect("plan");
        s.restore(&plan, "op").expect("restore");
        assert_eq!(env.read(&name).as_deref(), Some(&grown[..]), "{size}");
    }
}

#[test]
fn a_tracked_path_that_is_a_directory_at_a_message_comes_back_as_one() {
    // `d` was a file the agent deleted and made a directory (holding its file `d/c`); after
    // two messages, something else replaced the directory by a file. A rewind to the second
    // message takes that file away and brings `d/c` back.
    let env = Env::new();
    env.write("d", b"a file");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    tool_edit(&env, &s, "c0", 1, "d", None);
    std::fs::create_dir(env.cwd.join("d")).expect("mkdir");
    tool_edit(&env, &s, "c1", 1, "d/c", Some(b"c1"));
    // A directory is no file: nothing recorded for `d` at these messages.
    let out = s.recheck_tracked(2).expect("recheck");
    assert!(
        out.recorded.iter().all(|r| r.path.display() != "d"),
        "{out:?}"
    );
    s.recheck_tracked(3).expect("recheck");
    let at3 = env.snapshot();
    std::fs::remove_dir_all(env.cwd.join("d")).expect("rm -rf");
    env.write("d", b"made elsewhere");
    s.recheck_tracked(4).expect("recheck");
    let plan = s.plan_restore(3).expect("plan");
    let planned: Vec<_> = plan
        .actions
        .iter()
        .map(|a| {
            (
                a.display.as_str(),
                format!("{:?}", a.action)
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        planned,
        [("d", "Delete".to_string()), ("d/c", "Recreate".to_string())],
        "{plan:?}"
    );
    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty() && out.skipped.is_empty(), "{out:?}");
    assert_eq!(env.snapshot(), at3);
}
