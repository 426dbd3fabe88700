//! An interrupted rewind of a file whose name is not valid UTF-8 is finished and reported by
//! the name's exact spelling (`hex:…`), as every other report names it: the leftover temp file
//! beside it is found and removed, and the report says which by that spelling — never by the
//! lossy display form, which two different names may share.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use rewind_engine::{Engine, EngineOptions, Resolution, RestoreRequest, Start, WorkspaceKey};

#[test]
fn an_interrupted_rewind_names_a_non_utf8_file_by_its_spelling() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let key = WorkspaceKey::for_workspace("w").expect("key");
    let engine: Arc<Engine> = Engine::open(home.path(), EngineOptions::default());
    let es = engine.session("s", Some(ws.path()), key);
    let name = OsStr::from_bytes(b"n\xff.txt");
    let spelling = "hex:6eff2e747874";
    let file = ws.path().join(name);
    std::fs::write(&file, "one").expect("write");
    let files = es.files_of("s").expect("files");
    files.recheck_tracked(1).expect("boundary");
    files
        .capture_before("c1", Path::new(name))
        .expect("capture");
    std::fs::write(&file, "two").expect("write");
    files.commit("c1", 1, true).expect("commit");

    // The rewind begins and is killed before its restore ran, a temp file left beside the name
    // (the store's temp shape: `.<name>.rewind-tmp-<pid>-<n>`).
    let request = RestoreRequest {
        target_seq: 1,
        op_id: "r1".into(),
        ..RestoreRequest::default()
    };
    es.prepare_restore(&request).expect("prepare");
    let start = Start {
        op_id: "r1".into(),
        target_seq: 1,
        ..Start::default()
    };
    es.begin(&start, 100).expect("begin");
    let temp = ws
        .path()
        .join(OsStr::from_bytes(b".n\xff.txt.rewind-tmp-12-3"));
    std::fs::write(&temp, "half").expect("temp");
    // A UTF-8 name that reads like it, whose temp must stay.
    let lookalike = ws.path().join(".n\u{fffd}.txt.rewind-tmp-12-3");
    std::fs::write(&lookalike, "other").expect("lookalike");

    let interrupted = es.interrupted_entries().expect("interrupted");
    assert_eq!(interrupted.len(), 1);
    let resolved = es
        .resolve("r1", Resolution::Continue, &[])
        .expect("continue");
    assert_eq!(resolved.entry_outcome, "done");
    assert_eq!(std::fs::read(&file).expect("restored"), b"one");
    assert!(
        !temp.exists(),
        "the temp beside the non-UTF-8 name is removed"
    );
    assert!(
        lookalike.exists(),
        "a look-alike UTF-8 name's temp is not touched"
    );
    // `.n\xff.txt.rewind-tmp-12-3`, spelled.
    assert_eq!(
        resolved.temps_removed,
        ["hex:2e6eff2e7478742e726577696e642d746d702d31322d33"]
    );
    assert!(
        resolved
            .outcome
            .written
            .iter()
            .any(|p| p.spelling() == spelling),
        "written: {:?}",
        resolved.outcome.written
    );
}
