//! Every refusal the engine raises, with its stable code — and that nothing changed.

use std::path::Path;
use std::sync::Arc;

use rewind_engine::{
    Choices, Engine, EngineOptions, EngineSession, ErrorCode, Outcome, Resolution, RestoreRequest,
    Start, WorkspaceKey,
};

struct Fixture {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
    engine: Arc<Engine>,
}

impl Fixture {
    fn new() -> Self {
        let home = tempfile::tempdir().expect("home");
        let ws = tempfile::tempdir().expect("ws");
        let engine = Engine::open(home.path(), EngineOptions::default());
        Self { home, ws, engine }
    }

    fn key(ws: &str) -> WorkspaceKey {
        WorkspaceKey::for_workspace(ws).expect("key")
    }

    fn session(&self, id: &str) -> EngineSession {
        self.engine
            .session(id, Some(self.ws.path()), Self::key("w"))
    }

    fn read(&self, f: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.path().join(f)).ok()
    }

    fn write(&self, f: &str, text: &str) {
        std::fs::write(self.ws.path().join(f), text).expect("write");
    }

    /// Message 1; a write tool changes `a.txt` from "one" to "two"; a rewind to message 1
    /// (op `op-1`) puts "one" back. Returns the session.
    fn rewound(&self) -> EngineSession {
        self.write("a.txt", "one");
        let es = self.session("s1");
        let files = es.files_of("s1").expect("files");
        files.recheck_tracked(1).expect("boundary");
        files
            .capture_before("c1", Path::new("a.txt"))
            .expect("capture");
        self.write("a.txt", "two");
        files.commit("c1", 1, true).expect("commit");
        es.begin(&start("op-1", 1), 100).expect("begin");
        let r = es.restore_files(&request("op-1", 1)).expect("restore");
        assert!(r.outcome.failed.is_empty() && r.not_recorded.is_none());
        assert_eq!(self.read("a.txt").as_deref(), Some("one"));
        es
    }
}

fn start(op: &str, target: u64) -> Start {
    Start {
        op_id: op.into(),
        target_seq: target,
        marker_id: Some(format!("m-{op}")),
        ..Start::default()
    }
}

fn request(op: &str, target: u64) -> RestoreRequest {
    RestoreRequest {
        target_seq: target,
        op_id: op.into(),
        ..RestoreRequest::default()
    }
}

fn none() -> Choices {
    Choices::default()
}

#[track_caller]
fn refused<T: std::fmt::Debug>(
    r: Result<T, rewind_engine::EngineError>,
    code: ErrorCode,
) -> rewind_engine::EngineError {
    let e = r.expect_err("refused");
    assert_eq!(e.code, code, "{e}");
    e
}

#[test]
fn undo_refusals() {
    let f = Fixture::new();
    let es = f.rewound();
    refused(es.undo_check("op-nope", &none()), ErrorCode::UnknownEntry);
    // Another session of the workspace may not undo it.
    refused(
        f.session("s2").undo_check("op-1", &none()),
        ErrorCode::UndoOtherSession,
    );
    // Another workspace does not even see it.
    let other = f
        .engine
        .session("s1", Some(f.ws.path()), Fixture::key("w2"));
    refused(other.undo_check("op-1", &none()), ErrorCode::UnknownEntry);
    // A file changed since the rewind must be decided: named, nothing changed.
    f.write("a.txt", "mine");
    let e = refused(es.undo_check("op-1", &none()), ErrorCode::StaleUndo);
    assert_eq!(e.paths(), ["a.txt"]);
    assert_eq!(f.read("a.txt").as_deref(), Some("mine"));
    // Decided: the undo runs, keeping the file.
    let keep = Choices {
        keep: vec!["a.txt".into()],
        ..Choices::default()
    };
    let check = es.undo_check("op-1", &keep).expect("decided");
    es.undo_start("op-1", None).expect("start");
    let done = es.undo_files(&check, &keep).expect("undo");
    assert_eq!(done.files.kept, ["a.txt"]);
    assert_eq!(f.read("a.txt").as_deref(), Some("mine"));
    refused(es.undo_check("op-1", &none()), ErrorCode::AlreadyUndone);
}

#[test]
fn an_interrupted_rewind_is_not_undone_before_it_is_settled() {
    let f = Fixture::new();
    let es = f.rewound();
    es.begin(&start("op-2", 1), 100).expect("begin");
    refused(es.undo_check("op-2", &none()), ErrorCode::Interrupted);
    // Settled as abandoned: not undoable either (nothing to undo).
    es.settle("op-2", Outcome::Abandoned, None).expect("settle");
    refused(es.undo_check("op-2", &none()), ErrorCode::NotUndoable);
    // A settled entry is never finished again.
    refused(
        es.settle("op-2", Outcome::Done, None),
        ErrorCode::NotUndoable,
    );
}

#[test]
fn without_a_working_directory_or_a_writable_store_files_are_not_undone() {
    let f = Fixture::new();
    let _ = f.rewound();
    let nowhere = f.engine.session("s1", None, Fixture::key("w"));
    let e = refused(nowhere.undo_check("op-1", &none()), ErrorCode::NotUndoable);
    assert!(e.message.contains("unavailable"), "{e}");
    refused(
        nowhere.resolve("op-1", Resolution::Continue, &[]),
        ErrorCode::UnknownEntry,
    );
    // A store written by a newer build: the engine opens, files are refused.
    std::fs::write(
        f.home.path().join("rewind-snapshots/store.json"),
        br#"{"store_version": 999}"#,
    )
    .expect("marker");
    let engine = Engine::open(f.home.path(), EngineOptions::default());
    assert_eq!(
        engine.files_unavailable().map(|e| e.code),
        Some(ErrorCode::StoreNewer)
    );
    let es = engine.session("s1", Some(f.ws.path()), Fixture::key("w"));
    refused(es.undo_check("op-1", &none()), ErrorCode::NotUndoable);
    refused(es.restore_files(&request("op-9", 1)), ErrorCode::StoreNewer);
    assert_eq!(f.read("a.txt").as_deref(), Some("one"), "nothing changed");
}

#[test]
fn redo_refusals() {
    let f = Fixture::new();
    let es = f.rewound();
    refused(
        es.redo("op-nope", "op-r", &none(), 100),
        ErrorCode::UnknownEntry,
    );
    refused(
        es.redo("op-1", "op-r", &none(), 100),
        ErrorCode::NotRedoable,
    );
    let check = es.undo_check("op-1", &none()).expect("check");
    es.undo_start("op-1", None).expect("start");
    es.undo_files(&check, &none()).expect("undo");
    assert_eq!(f.read("a.txt").as_deref(), Some("two"));
    refused(
        f.session("s2").redo("op-1", "op-r", &none(), 100),
        ErrorCode::UndoOtherSession,
    );
    // A file changed since the undo must be decided; the redo's entry is then abandoned.
    f.write("a.txt", "mine");
    refused(es.redo("op-1", "op-r0", &none(), 100), ErrorCode::StaleUndo);
    assert_eq!(
        es.entry("op-r0").expect("entry").outcome,
        Outcome::Abandoned
    );
    assert_eq!(f.read("a.txt").as_deref(), Some("mine"));
    let take = Choices {
        take: vec!["a.txt".into()],
        ..Choices::default()
    };
    es.redo("op-1", "op-r", &take, 100).expect("redo");
    assert_eq!(f.read("a.txt").as_deref(), Some("one"));
    refused(es.redo("op-1", "op-r2", &take, 100), ErrorCode::NotRedoable);
    let bad = Choices {
        take: vec!["../x".into()],
        ..Choices::default()
    };
    refused(
        es.undo_check("op-r", &bad)
            .and_then(|c| es.undo_files(&c, &bad)),
        ErrorCode::BadRequest,
    );
}

#[test]
fn selection_and_recovery_refusals() {
    let f = Fixture::new();
    let es = f.rewound();
    f.write("a.txt", "three");
    let files = es.files_of("s1").expect("files");
    files.recheck_tracked(2).expect("boundary");
    es.begin(&start("op-2", 1), 100).expect("begin");
    let only = RestoreRequest {
        only: vec!["nope.txt".into()],
        ..request("op-2", 1)
    };
    let e = refused(es.restore_files(&only), ErrorCode::BadSelection);
    assert!(e.message.contains("nothing was changed"), "{e}");
    assert_eq!(f.read("a.txt").as_deref(), Some("three"));
    // The entry stays started: an interrupted undo can only be continued; this rewind can
    // be continued or rolled back.
    refused(
        es.resolve("op-nope", Resolution::Continue, &[]),
        ErrorCode::UnknownEntry,
    );
    refused(
        es.resolve_journal("op-nope", Resolution::Continue),
        ErrorCode::UnknownEntry,
    );
    let r = es
        .resolve("op-2", Resolution::Rollback, &[])
        .expect("roll back");
    assert_eq!(r.entry_outcome, "rolled-back");
    assert_eq!(f.read("a.txt").as_deref(), Some("three"));
    refused(
        es.resolve("op-2", Resolution::Continue, &[]),
        ErrorCode::UnknownEntry,
    );
}

#[test]
fn an_interrupted_undo_is_only_continued() {
    let f = Fixture::new();
    let es = f.rewound();
    es.undo_start("op-1", None).expect("start");
    refused(
        es.resolve("op-1", Resolution::Rollback, &[]),
        ErrorCode::BadRequest,
    );
    let r = es
        .resolve("op-1", Resolution::Continue, &[])
        .expect("continue");
    assert_eq!(r.entry_outcome, "undone");
    assert_eq!(f.read("a.txt").as_deref(), Some("two"));
}

#[test]
fn a_path_both_kept_and_taken_or_matching_no_changed_file_is_refused() {
    let f = Fixture::new();
    let es = f.rewound();
    f.write("a.txt", "mine");
    let both = Choices {
        take: vec!["a.txt".into()],
        keep: vec!["a.txt".into()],
    };
    let e = refused(es.undo_check("op-1", &both), ErrorCode::BadRequest);
    assert!(
        e.message.contains("a.txt") && e.message.contains("both"),
        "{e}"
    );
    // A choice naming no file changed since the rewind: the rewind's own selection error.
    let typo = Choices {
        keep: vec!["a.txt".into(), "nonexistent.txt".into()],
        ..Choices::default()
    };
    let e = refused(es.undo_check("op-1", &typo), ErrorCode::BadSelection);
    assert!(e.message.contains("nonexistent.txt"), "{e}");
    assert_eq!(f.read("a.txt").as_deref(), Some("mine"), "nothing changed");
    // The undo then runs; a redo with both choices for one path is refused the same way.
    let keep = Choices {
        keep: vec!["a.txt".into()],
        ..Choices::default()
    };
    let check = es.undo_check("op-1", &keep).expect("check");
    es.undo_start("op-1", None).expect("start");
    es.undo_files(&check, &keep).expect("undo");
    refused(es.redo("op-1", "op-r", &both, 100), ErrorCode::BadRequest);
}

#[test]
fn a_stale_redo_is_named_as_a_redo() {
    let f = Fixture::new();
    let es = f.rewound();
    let check = es.undo_check("op-1", &none()).expect("check");
    es.undo_start("op-1", None).expect("start");
    es.undo_files(&check, &none()).expect("undo");
    f.write("a.txt", "mine");
    let e = refused(es.redo("op-1", "op-r", &none(), 100), ErrorCode::StaleUndo);
    assert!(e.message.starts_with("redo of"), "{e}");
    assert!(e.message.contains("since the undo"), "{e}");
    assert!(!e.message.contains("undo of"), "{e}");
    assert_eq!(e.paths(), ["a.txt"]);
}

#[test]
fn a_restore_the_store_cannot_serve_is_refused_when_prepared_with_nothing_changed() {
    let f = Fixture::new();
    f.write("a.txt", "one");
    let es = f.session("s1");
    let files = es.files_of("s1").expect("files");
    files.recheck_tracked(1).expect("boundary");
    files
        .capture_before("c1", Path::new("a.txt"))
        .expect("capture");
    f.write("a.txt", "two");
    files.commit("c1", 1, true).expect("commit");
    // A byte of the record log's first record flipped: its checksum no longer holds.
    let log = f
        .home
        .path()
        .join("rewind-snapshots/sessions/s1/records.log");
    let mut bytes = std::fs::read(&log).expect("log");
    let at = bytes.len() / 3;
    bytes[at] ^= 0x55;
    std::fs::write(&log, &bytes).expect("damage");
    // The host starts again on the damaged store.
    drop((es, files));
    let engine = Engine::open(f.home.path(), EngineOptions::default());
    let es = engine.session("s1", Some(f.ws.path()), Fixture::key("w"));
    let e = es
        .prepare_restore(&request("op-1", 1))
        .expect_err("a damaged log cannot serve a restore");
    assert_eq!(e.code, ErrorCode::StoreCorrupt, "{e:?}");
    assert_eq!(f.read("a.txt").as_deref(), Some("two"), "nothing changed");
    assert_eq!(
        es.restore_status("op-1").map(|s| s.op_id),
        None,
        "no journal"
    );
}

#[test]
fn a_prepared_restore_runs_under_its_op_id() {
    let f = Fixture::new();
    f.write("a.txt", "one");
    let es = f.session("s1");
    let files = es.files_of("s1").expect("files");
    files.recheck_tracked(1).expect("boundary");
    files
        .capture_before("c1", Path::new("a.txt"))
        .expect("capture");
    f.write("a.txt", "two");
    files.commit("c1", 1, true).expect("commit");
    let p = es.prepare_restore(&request("op-1", 1)).expect("prepare");
    assert_eq!((p.actions, p.refused.len()), (1, 0));
    assert_eq!(
        f.read("a.txt").as_deref(),
        Some("two"),
        "nothing changed yet"
    );
    es.begin(&start("op-1", 1), 100).expect("begin");
    // A clone of the handle (the host's next call) runs what was prepared.
    let r = es
        .clone()
        .restore_files(&request("op-1", 1))
        .expect("restore");
    assert!(r.outcome.failed.is_empty(), "{:?}", r.outcome.failed);
    assert_eq!(f.read("a.txt").as_deref(), Some("one"));
    assert_eq!(es.entry("op-1").expect("entry").outcome, Outcome::Done);
    // Discarding what is no longer prepared is harmless.
    es.discard_prepared("op-1");
}
