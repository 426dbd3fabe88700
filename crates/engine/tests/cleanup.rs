//! The auto-cleanup's coordination through the engine: a removed session's backups are freed
//! and its cached handle is forgotten, so a later call starts from the disk.

use std::path::Path;

use cleanup::{MemoryPolicy, Policy, Scope, SweepRequest};
use rewind_engine::{Engine, EngineOptions, WorkspaceKey};

#[test]
fn a_swept_session_frees_its_backups_and_is_forgotten() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(
        ws.path().join("a.txt"),
        "one, a backup only this session holds",
    )
    .expect("write");
    // The backup in a blob file of its own (not kept in the session's log), for the sweep
    // to free.
    let options = EngineOptions {
        store: snapshot_store::StoreOptions {
            keep_in_log_bytes: 0,
            ..snapshot_store::StoreOptions::default()
        },
        ..EngineOptions::default()
    };
    let engine = Engine::open(home.path(), options);
    let es = engine.session(
        "s1",
        Some(ws.path()),
        WorkspaceKey::for_workspace("w").expect("key"),
    );
    let files = es.files_of("s1").expect("files");
    files.recheck_tracked(1).expect("boundary");
    files
        .capture_before("c1", Path::new("a.txt"))
        .expect("capture");
    std::fs::write(ws.path().join("a.txt"), "two").expect("write");
    files.commit("c1", 1, true).expect("commit");
    drop(files);
    assert!(
        engine.cached_files("s1", ws.path(), None).is_some(),
        "the handle is cached"
    );
    let blobs = || {
        engine
            .with_store(|s| s.inventory().expect("inventory"))
            .expect("store")
    };
    assert!(blobs().blobs > 0);

    let policy = MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: 30,
    });
    // A dry run changes nothing.
    let dry = engine
        .sweep(
            &policy,
            &SweepRequest::dry_run(Scope::OnlySession("s1".into())),
        )
        .expect("dry run");
    assert_eq!(dry.report.items.len(), 1);
    assert!(engine.cached_files("s1", ws.path(), None).is_some());
    // Applied: the session's directory, then its backups, then its handle.
    let swept = engine
        .sweep(
            &policy,
            &SweepRequest::dry_run(Scope::OnlySession("s1".into())).applied(),
        )
        .expect("sweep");
    assert_eq!(swept.report.items.len(), 1, "{:?}", swept.report);
    assert_eq!(swept.blobs_not_freed, None);
    let after = blobs();
    assert_eq!(
        (after.sessions.len(), after.blobs, after.unreferenced_blobs),
        (0, 0, 0)
    );
    assert!(
        engine.cached_files("s1", ws.path(), None).is_none(),
        "forgotten"
    );
    // The session starts again from the disk: nothing to restore.
    let plan = es.plan(1, &[]).expect("plan");
    assert!(plan.actions.is_empty(), "{plan:?}");
}
