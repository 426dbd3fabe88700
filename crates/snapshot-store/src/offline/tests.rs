use super::*;
use crate::StoreOptions;

fn store_with_session() -> (tempfile::TempDir, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), b"before").unwrap();
    // The before-state in a blob file of its own (not kept in the session's log).
    let options = StoreOptions {
        keep_in_log_bytes: 0,
        ..StoreOptions::default()
    };
    let store = Store::open(&tmp.path().join("store"), options).unwrap();
    let s = store.session("s1", &ws).unwrap();
    s.recheck_tracked(1).unwrap();
    s.capture_before("c1", "a.txt".as_ref()).unwrap();
    std::fs::write(ws.join("a.txt"), b"after").unwrap();
    s.commit("c1", 1, true).unwrap();
    (tmp, store)
}

#[test]
fn a_host_hold_and_a_tool_claim_exclude_each_other() {
    let (_tmp, store) = store_with_session();
    let host = store.hold_session("s1").unwrap().expect("host hold");
    assert!(store.session_is_held("s1").unwrap());
    assert!(store.claim_session("s1").unwrap().is_none());
    // Another session is not affected.
    assert!(store.claim_session("s2").unwrap().is_some());
    drop(host);
    assert!(!store.session_is_held("s1").unwrap());
    let tool = store.claim_session("s1").unwrap().expect("tool claim");
    assert!(store.hold_session("s1").unwrap().is_none());
    drop(tool);
    assert!(store.hold_session("s1").unwrap().is_some());
}

#[test]
fn quarantine_keeps_the_blobs_a_corrupt_record_names() {
    let (tmp, store) = store_with_session();
    let root = tmp.path().join("store");
    let sha = hex::encode(Sha256::digest(b"before"));
    // The session's log, damaged in its first frame: it still carries the blob's
    // name (raw bytes) further on, but no longer decodes.
    let group = root.join("sessions/s1/records.log");
    let mut bytes = std::fs::read(&group).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&group, &bytes).unwrap();
    let report = store.verify(&mut |_, _| {}).unwrap();
    assert!(
        report.problems.iter().any(
            |p| matches!(p, Problem::CorruptRecord { path, .. } if path.ends_with("records.log"))
        ),
        "{report:?}"
    );
    let q = store.quarantine(&report).unwrap();
    assert_eq!(q.moved, ["sessions/s1/records.log"]);
    assert_eq!(q.kept_blobs.as_slice(), std::slice::from_ref(&sha));
    let dir = root.join(q.dir.unwrap());
    assert_eq!(
        std::fs::read(dir.join("kept-blobs").join(&sha)).unwrap(),
        b"before"
    );
    assert!(dir.join("sessions/s1/records.log").is_file());
    // Garbage collection may now drop the blob from blobs/, never the kept copy.
    store.collect_garbage().unwrap();
    assert_eq!(
        std::fs::read(dir.join("kept-blobs").join(&sha)).unwrap(),
        b"before"
    );
}

#[test]
fn read_blob_verifies_and_bounds() {
    let (tmp, store) = store_with_session();
    let sha = hex::encode(Sha256::digest(b"before"));
    assert_eq!(
        store.read_blob(&sha, 100).unwrap(),
        BlobRead::Bytes(b"before".to_vec())
    );
    assert_eq!(
        store.read_blob(&sha, 3).unwrap(),
        BlobRead::TooLarge { size: 6 }
    );
    assert_eq!(
        store.read_blob(&"0".repeat(64), 100).unwrap(),
        BlobRead::Missing
    );
    assert_eq!(
        store.read_blob("../store.json", 100).unwrap(),
        BlobRead::Missing
    );
    std::fs::write(tmp.path().join("store/blobs").join(&sha), b"BEFORE").unwrap();
    assert!(matches!(
        store.read_blob(&sha, 100).unwrap(),
        BlobRead::Corrupt { .. }
    ));
}
