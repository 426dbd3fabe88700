//! `/rewind undo <n>` and `/rewind redo <n>` name entries by the same rule the history page
//! offers "Undo" and "Redo" by: over a session with rewinds (with and without files), an undone
//! one, the rewind that forked it, another session's rewind, an interrupted rewind, an undo
//! begun and never ended and a partial rewind whose journal is gone, the n-th entry
//! [`EngineSession::pick_entry`] names is the n-th entry [`EngineSession::entry_actions`]
//! offers the action on, and the undo's own check ([`EngineSession::undo_check`]) accepts
//! exactly the entries offered.

use std::path::Path;
use std::sync::Arc;

use rewind_engine::{
    Choices, Engine, EngineOptions, EngineSession, Entry, ErrorCode, Outcome, Paths, Pick,
    RestoreRequest, Start, WorkspaceKey,
};

fn key() -> WorkspaceKey {
    WorkspaceKey::for_workspace("w").expect("key")
}

fn request(op: &str, seq: u64) -> RestoreRequest {
    RestoreRequest {
        target_seq: seq,
        op_id: op.into(),
        ..RestoreRequest::default()
    }
}

/// A rewind of `es` to `seq` through the engine, as the plugin runs it.
fn rewind(es: &EngineSession, op: &str, seq: u64) {
    es.prepare_restore(&request(op, seq)).expect("prepare");
    let start = Start {
        op_id: op.into(),
        target_seq: seq,
        ..Start::default()
    };
    es.begin(&start, 100).expect("begin");
    let r = es.restore_files(&request(op, seq)).expect("restore");
    assert!(r.outcome.failed.is_empty() && r.not_recorded.is_none());
}

/// An entry written as it stands, for the states a test cannot reach without a crash.
fn entry(
    engine: &Engine,
    op: &str,
    session: &str,
    outcome: Outcome,
    paths: Paths,
    edit: impl FnOnce(&mut Entry),
) -> Entry {
    let mut e = Entry::new(op, session, &key(), 1, 1_000, outcome, paths);
    edit(&mut e);
    engine
        .history(Some(100))
        .expect("history")
        .append(&key(), e.clone())
        .expect("append");
    e
}

#[test]
fn undo_and_redo_numbers_agree_with_the_offered_actions_on_every_entry() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let engine: Arc<Engine> = Engine::open(home.path(), EngineOptions::default());
    let es = engine.session("s", Some(ws.path()), key());
    let write = |text: &str| std::fs::write(ws.path().join("a.txt"), text).expect("write");
    write("one");
    let files = es.files_of("s").expect("files");
    files.recheck_tracked(1).expect("boundary");
    files
        .capture_before("c1", Path::new("a.txt"))
        .expect("capture");
    write("two");
    files.commit("c1", 1, true).expect("commit");

    // A rewind with files, undone (its journal `undone`: redo is offered).
    rewind(&es, "r-undone", 1);
    let check = es
        .undo_check("r-undone", &Choices::default())
        .expect("check");
    es.undo_start("r-undone", None).expect("start");
    es.undo_files(&check, &Choices::default()).expect("undo");
    // A rewind with files, standing (its journal `completed`: undo is offered).
    rewind(&es, "r-files", 1);
    // The entries a test writes as they stand.
    entry(
        &engine,
        "parent-fork",
        "parent",
        Outcome::Done,
        Paths::default(),
        |e| {
            e.fork = Some(history::ForkInfo {
                child_session_id: "s".into(),
            })
        },
    );
    entry(
        &engine,
        "other",
        "someone-else",
        Outcome::Done,
        Paths::default(),
        |_| {},
    );
    entry(
        &engine,
        "interrupted",
        "s",
        Outcome::Started,
        Paths::default(),
        |_| {},
    );
    let begun = entry(
        &engine,
        "undo-begun",
        "s",
        Outcome::Done,
        Paths::default(),
        |_| {},
    );
    engine
        .history(None)
        .expect("history")
        .mark_undo_started_in(&key(), &begun.op_id, 2_000, None)
        .expect("undo started");
    let failed = Paths {
        failed: vec!["gone.txt".into()],
        ..Paths::default()
    };
    entry(
        &engine,
        "partial-no-journal",
        "s",
        Outcome::Partial,
        failed,
        |_| {},
    );
    entry(
        &engine,
        "no-files",
        "s",
        Outcome::Done,
        Paths::default(),
        |_| {},
    );

    let actions = es.entry_actions().expect("actions");
    assert_eq!(actions.len(), 8);
    let undoable: Vec<&str> = actions
        .iter()
        .filter(|a| a.undoable)
        .map(|a| a.op_id.as_str())
        .collect();
    let redoable: Vec<&str> = actions
        .iter()
        .filter(|a| a.redoable)
        .map(|a| a.op_id.as_str())
        .collect();
    assert_eq!(undoable, ["no-files", "parent-fork", "r-files"]);
    assert_eq!(redoable, ["r-undone"]);

    for (pick, list) in [(Pick::Undo, &undoable), (Pick::Redo, &redoable)] {
        assert_eq!(es.pick_entry(pick, None).expect("newest"), list[0]);
        for (i, op) in list.iter().enumerate() {
            let n = (i + 1).to_string();
            assert_eq!(
                es.pick_entry(pick, Some(&n)).expect("n-th"),
                *op,
                "{pick:?} {n}"
            );
        }
        let past = (list.len() + 1).to_string();
        let e = es.pick_entry(pick, Some(&past)).expect_err("past the list");
        assert_eq!(e.code, ErrorCode::UnknownEntry);
        assert_eq!(
            es.pick_entry(pick, Some("@undo-begun")).expect("op id"),
            "undo-begun"
        );
    }
    // The command's own check accepts exactly the entries the page offers "Undo" on.
    for a in &actions {
        let checked = es.undo_check(&a.op_id, &Choices::default());
        assert_eq!(checked.is_ok(), a.undoable, "{}: {checked:?}", a.op_id);
    }
}
