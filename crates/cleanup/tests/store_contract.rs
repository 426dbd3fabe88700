//! The sweep against directories written by the real snapshot store: its
//! session layout, its journal files and its lock are what this crate expects.

#![allow(clippy::unwrap_used)]

use std::fs::{self, File, FileTimes};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rewind_cleanup::{
    Cleaner, DAY_MS, KeepReason, MemoryPolicy, Policy, SNAPSHOT_DIR, Scope, SweepRequest,
};
use snapshot_store::{CaptureOutcome, JournalState, Store, StoreOptions};

const NOW: u64 = 1_800_000_000_000;

fn age(path: &Path, ms: u64) {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    let md = fs::symlink_metadata(path).unwrap();
    if md.is_dir() {
        for e in fs::read_dir(path).unwrap() {
            age(&e.unwrap().path(), ms);
        }
    }
    if !md.file_type().is_symlink() {
        File::open(path)
            .unwrap()
            .set_times(FileTimes::new().set_modified(t))
            .unwrap();
    }
}

#[test]
fn sweeps_real_store_sessions_and_respects_open_journals() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let root = home.join(SNAPSHOT_DIR);
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    // Every content in a blob file of its own (one is damaged below).
    let options = StoreOptions {
        keep_in_log_bytes: 0,
        ..StoreOptions::default()
    };
    let store = Store::open(&root, options).unwrap();

    // Session "done/1": one edit, a completed restore.
    fs::write(ws.join("a"), b"a0").unwrap();
    let done = store.session("done/1", &ws).unwrap();
    done.capture_before("c1", Path::new("a")).unwrap();
    fs::write(ws.join("a"), b"a1").unwrap();
    done.commit("c1", 1, true).unwrap();
    let out = done
        .restore(&done.plan_restore(1).unwrap(), "op-done")
        .unwrap();
    assert_eq!(out.state, JournalState::Completed);

    // Session "open": a restore that fails on a damaged blob stays open.
    fs::write(ws.join("b"), b"b0").unwrap();
    let open = store.session("open", &ws).unwrap();
    let CaptureOutcome::Captured { sha256, .. } =
        open.capture_before("c2", Path::new("b")).unwrap()
    else {
        panic!()
    };
    fs::write(ws.join("b"), b"b1").unwrap();
    open.commit("c2", 1, true).unwrap();
    fs::write(root.join("blobs").join(&sha256), b"garbage").unwrap();
    let out = open
        .restore(&open.plan_restore(1).unwrap(), "op-open")
        .unwrap();
    assert_eq!(out.state, JournalState::Open);
    drop((done, open));

    age(&root.join("sessions"), NOW - 60 * DAY_MS);
    let policy = MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: 30,
    });
    let cleaner = Cleaner::open(&home).unwrap().with_clock(Arc::new(|| NOW));
    let r = cleaner
        .sweep(&policy, &SweepRequest::dry_run(Scope::Idle).applied())
        .unwrap();
    assert_eq!(
        r.items
            .iter()
            .map(|i| i.session_id.as_str())
            .collect::<Vec<_>>(),
        ["done/1"]
    );
    assert!(r.ignored.is_empty(), "{:?}", r.ignored);
    assert_eq!(r.kept.len(), 1);
    assert_eq!(r.kept[0].session_id, "open");
    assert!(
        matches!(&r.kept[0].reason, KeepReason::OpenJournal { op } if op == "op-open"),
        "{:?}",
        r.kept
    );

    // The store still opens, lists only the kept session, and collects the freed blobs.
    let store = Store::open(&root, StoreOptions::default()).unwrap();
    assert_eq!(store.list_sessions().unwrap(), ["open"]);
    store.collect_garbage().unwrap();
    let open = store.session("open", &ws).unwrap();
    assert_eq!(
        open.reconcile_restores().unwrap().len(),
        1,
        "the open journal is intact"
    );
}
