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

/// Sets the modification time of everything under `p` to `days` ago.
fn age(p: &Path, days: u64) {
    use std::fs::{File, FileTimes};
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
    if p.is_dir() {
        for e in std::fs::read_dir(p).expect("read dir") {
            age(&e.expect("entry").path(), days);
        }
    }
    File::open(p)
        .expect("open")
        .set_times(FileTimes::new().set_modified(t))
        .expect("set times");
}

#[test]
fn the_size_quota_runs_with_the_age_rule_off_and_keeps_what_an_undo_needs() {
    let home = tempfile::tempdir().expect("home");
    let options = EngineOptions {
        store: snapshot_store::StoreOptions {
            keep_in_log_bytes: 0,
            ..snapshot_store::StoreOptions::default()
        },
        ..EngineOptions::default()
    };
    let engine = Engine::open(home.path(), options);
    let key = WorkspaceKey::for_workspace("w").expect("key");
    let mut wss = Vec::new();
    // `undone` (oldest) has a rewind in the history that can still be undone; `idle` is
    // next; `live` is the newest and live. Each holds a 16 KiB backup of its own.
    for (id, days) in [("undone", 20), ("idle", 10), ("live", 0)] {
        let ws = tempfile::tempdir().expect("ws");
        std::fs::write(ws.path().join("a.txt"), id.repeat(16 * 1024 / id.len())).expect("w");
        let es = engine.session(id, Some(ws.path()), key.clone());
        let files = es.files_of(id).expect("files");
        files.recheck_tracked(1).expect("boundary");
        files.capture_before("c1", Path::new("a.txt")).expect("capture");
        files.commit("c1", 1, true).expect("commit");
        drop(files);
        engine.flush_all();
        if days > 0 {
            let dir = home
                .path()
                .join("rewind-snapshots/sessions")
                .join(snapshot_store::encode_id(id).expect("id"));
            age(&dir, days);
        }
        wss.push(ws);
    }
    let history = engine.history(None).expect("history");
    history
        .append(
            &key,
            rewind_engine::Entry::new(
                "op-1",
                "undone",
                &key,
                1,
                1,
                rewind_engine::Outcome::Done,
                rewind_engine::Paths::default(),
            ),
        )
        .expect("append");
    assert!(engine.undo_pins().expect("pins").contains("undone"));

    // The age rule is off (the default): the quota runs all the same.
    let policy = MemoryPolicy::new(Policy::default());
    assert!(!Policy::default().enabled);
    let swept = engine
        .auto_sweep(&policy, &["live".to_string()], 1)
        .expect("sweep")
        .expect("the quota ran");
    assert!(swept.age.is_none(), "the age rule is off");
    let quota = swept.quota.expect("quota report");
    let removed: Vec<&str> = quota.items.iter().map(|i| i.session_id.as_str()).collect();
    assert_eq!(removed, ["idle"], "only the idle session without an undo goes");
    let kept: Vec<&str> = quota.kept.iter().map(|k| k.session_id.as_str()).collect();
    assert!(kept.contains(&"undone") && kept.contains(&"live"), "{kept:?}");
    assert!(quota.over_quota());
    let sessions = engine
        .with_store(|s| s.list_sessions().expect("list"))
        .expect("store");
    assert!(!sessions.iter().any(|s| s == "idle"), "{sessions:?}");

    // What it removed, and when, is recorded.
    let last = engine.last_quota().expect("read").expect("recorded");
    assert_eq!(last.sessions, ["idle"]);
    assert_eq!(last.trigger, cleanup::Trigger::Auto);
    assert_eq!(last.max_bytes, 1);
    assert!(last.freed >= 16 * 1024, "{last:?}");
    assert!(last.at > 0);
}

#[test]
fn compaction_shrinks_the_store_and_the_storage_figures_say_so() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let options = EngineOptions {
        store: snapshot_store::StoreOptions {
            keep_in_log_bytes: 0,
            ..snapshot_store::StoreOptions::default()
        },
        ..EngineOptions::default()
    };
    let engine = Engine::open(home.path(), options);
    let key = WorkspaceKey::for_workspace("w").expect("key");
    let es = engine.session("s1", Some(ws.path()), key);
    let files = es.files_of("s1").expect("files");
    files.recheck_tracked(1).expect("boundary");
    for i in 0..300 {
        let text: String = (0..50)
            .map(|l| format!("let value_{i}_{l} = compute({l}, \"{i}\");\n"))
            .collect();
        let rel = format!("f{i}.txt");
        std::fs::write(ws.path().join(&rel), text).expect("write");
        files
            .capture_before(&format!("c{i}"), Path::new(&rel))
            .expect("capture");
        std::fs::write(ws.path().join(&rel), "after").expect("write");
        files.commit(&format!("c{i}"), 1, true).expect("commit");
    }
    drop(files);
    let members = ["s1".to_string()];
    let cwds = [ws.path()];
    let before = engine.storage(&members, &cwds, 5).expect("storage");
    assert!(before.logical_bytes > 300 * 2000, "{before:?}");
    assert!(
        before.disk_bytes >= before.logical_bytes,
        "loose: every blob takes a block: {before:?}"
    );
    assert_eq!(before.packed_blobs, 0);

    let report = engine.compact().expect("compact");
    assert_eq!(report.blobs_packed, 300);
    let after = engine.storage(&members, &cwds, 5).expect("storage");
    assert_eq!(after.packed_blobs, 300);
    assert_eq!(
        after.logical_bytes, before.logical_bytes,
        "the same content: {after:?}"
    );
    assert!(
        report.pack_bytes * 4 < report.bytes_packed,
        "compressed: {report:?}"
    );
    // The rest is the store's fixed part (directories, the record log) at this small size.
    assert!(
        after.ratio() < 0.5,
        "packed: {} on disk for {} logical",
        after.disk_bytes,
        after.logical_bytes
    );
    assert!(after.workspace_disk_bytes < after.workspace_logical_bytes / 2);
    assert!(after.total_bytes < before.total_bytes / 2, "the quota sees the packed size");

    // Every file comes back from the packed backups.
    let es = engine.session("s1", Some(ws.path()), WorkspaceKey::for_workspace("w").expect("key"));
    let files = es.files_of("s1").expect("files");
    let plan = files.plan_restore(1).expect("plan");
    let out = files.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert!(
        std::fs::read_to_string(ws.path().join("f7.txt"))
            .expect("read")
            .starts_with("let value_7_0")
    );
}
