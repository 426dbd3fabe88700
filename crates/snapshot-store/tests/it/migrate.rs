//! Migration of a layout-1 store (the committed fixture written by the layout-1
//! code, `tests/fixtures/layout1/`, scenario in `examples/layout1_fixture.rs`).

use std::path::{Path, PathBuf};

use snapshot_store::{CommitOutcome, JournalState, PlanError, Store, StoreOptions};

use crate::common::{copy_tree, count_files, log_records};

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layout1")
}

/// A copy of the fixture (store, ws-a, ws-b) under a fresh temp dir.
pub fn fixture_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture(), tmp.path());
    tmp
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// Every session of the fixture is rewindable and undoable, the pending call
/// commits, the open journal continues; nothing of layout 1 is left.
pub fn check_fixture(dir: &Path) {
    let root = dir.join("store");
    let (wa, wb) = (dir.join("ws-a"), dir.join("ws-b"));
    let store = Store::open(&root, StoreOptions::default()).expect("open");
    let mut ids = store.list_sessions().expect("list");
    ids.sort();
    assert_eq!(ids, vec!["fx-a".to_string(), "fx/b%".to_string()]);

    let a = store.session("fx-a", &wa).expect("session");
    assert_eq!(
        a.format().expect("format").as_deref(),
        Some("dsh-session-v0")
    );
    assert_eq!(a.anchors().expect("anchors"), vec![10, 20, 30]);
    let st = a.restore_statuses().expect("statuses");
    assert_eq!(st.len(), 1);
    assert_eq!(
        (st[0].op_id.as_str(), st[0].state),
        ("op-1", JournalState::Completed)
    );
    // The completed rewind to 20 is undoable.
    a.undo_restore("op-1").expect("undo op-1");
    assert_eq!(read(&wa.join("a.txt")).as_deref(), Some("a2"));
    assert_eq!(read(&wa.join("dir/c.txt")).as_deref(), Some("c2"));
    assert_eq!(read(&wa.join("b.txt")).as_deref(), Some("b1"));
    // Rewind to 10: every message's changes, the outside edit included.
    let out = a
        .restore(&a.plan_restore(10).expect("plan 10"), "op-2")
        .expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(read(&wa.join("a.txt")).as_deref(), Some("a0"));
    assert_eq!(read(&wa.join("b.txt")), None);
    assert_eq!(read(&wa.join("dir/c.txt")), None);
    assert_eq!(read(&wa.join("keep.txt")).as_deref(), Some("k0"));
    a.undo_restore("op-2").expect("undo op-2");
    assert_eq!(read(&wa.join("a.txt")).as_deref(), Some("a2"));
    // Rewind to 20: the state the re-check recorded for the outside edit.
    let plan = a.plan_restore(20).expect("plan 20");
    let out = a.restore(&plan, "op-3").expect("restore 20");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(read(&wa.join("a.txt")).as_deref(), Some("a1x"));
    assert_eq!(read(&wa.join("b.txt")).as_deref(), Some("b1"));
    assert_eq!(read(&wa.join("dir/c.txt")), None);
    // The call left pending by layout 1 settles.
    assert_eq!(
        a.commit("c6", 30, true).expect("commit c6"),
        CommitOutcome::Committed {
            anchor_seq: 30,
            entries: 1
        }
    );

    let b = store.session("fx/b%", &wb).expect("session b");
    let st = b.restore_statuses().expect("statuses");
    assert_eq!(
        (st[0].op_id.as_str(), st[0].state),
        ("op-open", JournalState::Open)
    );
    let c = b.continue_restore("op-open").expect("continue");
    assert_eq!(c.state, JournalState::Completed, "{c:?}");
    assert_eq!(read(&wb.join("x.txt")).as_deref(), Some("x0"));
    assert_eq!(read(&wb.join("y.txt")).as_deref(), Some("y0"));
    b.undo_restore("op-open").expect("undo");
    assert_eq!(read(&wb.join("x.txt")).as_deref(), Some("x1"));
    assert_eq!(read(&wb.join("y.txt")).as_deref(), Some("y1"));

    // Layout 2 on disk: the marker, one log per session, journals, nothing else.
    let marker = std::fs::read_to_string(root.join("store.json")).expect("marker");
    assert!(marker.contains("\"store_version\":2"), "{marker}");
    for s in ["fx-a", "fx%2Fb%25"] {
        let sdir = root.join("sessions").join(s);
        for old in [
            "groups",
            "pending.log",
            "tracked.json",
            "boundary.json",
            "session.json",
        ] {
            assert!(!sdir.join(old).exists(), "{s}/{old} left behind");
        }
        let (recs, torn) = log_records(&sdir.join("records.log"));
        assert_eq!(torn, 0);
        assert_eq!(recs[0].0, crate::common::SESSION);
    }
    assert!(store.collect_garbage().is_ok());
}

#[test]
fn a_layout1_store_migrates_and_every_session_stays_rewindable_and_undoable() {
    let tmp = fixture_copy();
    check_fixture(tmp.path());
    // Opening again migrates nothing more and changes nothing.
    let root = tmp.path().join("store");
    let before = count_files(&root);
    drop(Store::open(&root, StoreOptions::default()).expect("reopen"));
    assert_eq!(count_files(&root), before);
}

#[test]
fn a_session_migrates_when_first_used_if_the_store_was_busy_at_open() {
    let tmp = fixture_copy();
    let root = tmp.path().join("store");
    // Another user holds the store lock while it opens: no migration at open.
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join("lock"))
        .expect("lock");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared).expect("flock");
    let store = Store::open(&root, StoreOptions::default()).expect("open");
    assert!(root.join("sessions/fx-a/groups").exists());
    drop(lock);
    let a = store.session("fx-a", &tmp.path().join("ws-a")).expect("s");
    assert_eq!(a.anchors().expect("anchors"), vec![10, 20, 30]);
    assert!(!root.join("sessions/fx-a/groups").exists());
    drop(a);
    drop(store);
    check_fixture(tmp.path());
}

#[test]
fn a_newer_or_corrupt_layout1_record_fails_closed_and_nothing_is_removed() {
    let tmp = fixture_copy();
    let root = tmp.path().join("store");
    let gfile = root.join("sessions/fx-a/groups/00000000000000000010/c1.json");
    let good = std::fs::read_to_string(&gfile).expect("group");
    std::fs::write(&gfile, good.replacen("\"v\":1", "\"v\":7", 1)).expect("write");
    let store = Store::open(&root, StoreOptions::default()).expect("open");
    let a = store.session("fx-a", &tmp.path().join("ws-a")).expect("s");
    assert!(matches!(a.plan_restore(10), Err(PlanError::NewerStore(n)) if n.found == 7));
    assert!(a.capture_before("c9", Path::new("a.txt")).is_err());
    assert!(store.collect_garbage().is_err(), "sweep refuses");
    assert!(gfile.exists());
    assert!(!root.join("sessions/fx-a/records.log").exists());
    assert_eq!(count_files(&root.join("blobs")), 10, "no blob swept");
    // The other session migrated and works.
    let b = store.session("fx/b%", &tmp.path().join("ws-b")).expect("b");
    assert_eq!(b.anchors().expect("anchors"), vec![5]);
    // Put the record back: the session migrates and the whole fixture checks out.
    drop((a, b, store));
    std::fs::write(&gfile, &good).expect("restore");
    check_fixture(tmp.path());
}
