//! A record log written by an earlier build (the committed fixture
//! `tests/fixtures/log-v3/`, scenario in `examples/log_v3_fixture.rs`) reads with this
//! one: every frame's checksum, kept content and blob file as that build wrote them.

use std::path::Path;

use snapshot_store::{Store, StoreOptions};

use crate::common::copy_tree;

#[test]
fn a_log_written_by_an_earlier_build_still_reads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-v3/store");
    copy_tree(&fixture, tmp.path());
    let log = std::fs::read(tmp.path().join("sessions/fx-log/records.log")).expect("read");
    let store = Store::open(tmp.path(), StoreOptions::default()).expect("open");
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    let s = store.session("fx-log", &ws).expect("session");
    assert_eq!(s.anchors().expect("anchors"), vec![1, 2]);
    // The planned restore to message 1 names the three files with the content the
    // earlier build recorded (a.txt kept in the log, big.txt in a blob file).
    let plan = s.plan_restore(1).expect("plan");
    let mut names: Vec<_> = plan.actions.iter().map(|a| a.display.clone()).collect();
    names.sort();
    assert_eq!(names, ["a.txt", "big.txt"], "{plan:?}");
    drop(s);
    assert_eq!(
        std::fs::read(tmp.path().join("sessions/fx-log/records.log")).expect("read"),
        log,
        "reading wrote nothing"
    );
}
