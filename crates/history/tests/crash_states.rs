//! The states of a rewind that survive a crash (format version 2): `started`
//! before anything changes, `finish` once, `rolled-back` / `abandoned`,
//! `undoStartedAt` before an undo; and the damaged file that keeps what can
//! be read.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rewind_history::*;

fn key(id: &str) -> WorkspaceKey {
    WorkspaceKey::for_workspace(id).unwrap()
}

fn started(op: &str, session: &str, k: &WorkspaceKey) -> Entry {
    let mut e = Entry::new(op, session, k, 4, 10, Outcome::Started, Paths::default());
    e.marker_id = Some(format!("marker-{op}"));
    e
}

fn done_paths() -> Paths {
    Paths {
        restored: vec!["a.txt".into()],
        deleted: vec!["new.txt".into()],
        ..Paths::default()
    }
}

fn request<'a>(op: &'a str, k: &'a WorkspaceKey, journal: JournalState) -> UndoRequest<'a> {
    UndoRequest {
        op_id: op,
        active_session: "s",
        active_workspace: k,
        journal,
    }
}

#[test]
fn a_started_entry_is_interrupted_until_finished_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    store.append(&k, started("op-1", "s", &k)).unwrap();
    let p = store.read(&k).unwrap();
    assert_eq!(
        p.interrupted("s")
            .map(|e| e.op_id.as_str())
            .collect::<Vec<_>>(),
        ["op-1"]
    );
    assert_eq!(p.interrupted("other").count(), 0);
    // Not undoable while started, whatever the journal says.
    let refusal = undo_eligibility(&p, &request("op-1", &k, JournalState::Completed)).unwrap_err();
    assert_eq!(refusal.code(), "rewind/interrupted");

    let r = store
        .finish(&k, "op-1", Outcome::Done, Some(&done_paths()))
        .unwrap();
    assert_eq!(r.entry.outcome, Outcome::Done);
    assert_eq!(r.entry.counts.restored, 1);
    assert_eq!(r.entry.counts.deleted, 1);
    assert_eq!(r.entry.marker_id.as_deref(), Some("marker-op-1"));
    let p = store.read(&k).unwrap();
    assert_eq!(p.interrupted("s").count(), 0);
    undo_eligibility(&p, &request("op-1", &k, JournalState::Completed)).unwrap();

    // A second (late) finish never rewrites a settled entry.
    let again = store
        .finish(&k, "op-1", Outcome::RolledBack, None)
        .unwrap_err();
    assert_eq!(again.code(), "rewind/not-undoable");
    assert!(again.to_string().contains("is done"), "{again}");
    assert_eq!(store.read(&k).unwrap().entries[0].outcome, Outcome::Done);
    // Finishing into `started` is refused too.
    store.append(&k, started("op-2", "s", &k)).unwrap();
    assert!(store.finish(&k, "op-2", Outcome::Started, None).is_err());
    assert!(matches!(
        store.finish(&k, "nope", Outcome::Done, None),
        Err(SettleError::UnknownEntry { .. })
    ));
}

#[test]
fn rolled_back_and_abandoned_entries_leave_the_undo_chain() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    store.append(&k, started("op-1", "s", &k)).unwrap();
    store
        .finish(&k, "op-1", Outcome::Done, Some(&done_paths()))
        .unwrap();
    store.append(&k, started("op-2", "s", &k)).unwrap();
    store.finish(&k, "op-2", Outcome::RolledBack, None).unwrap();
    store.append(&k, started("op-3", "s", &k)).unwrap();
    store.finish(&k, "op-3", Outcome::Abandoned, None).unwrap();
    let p = store.read(&k).unwrap();
    // op-1 is the tail again: the two later rewinds changed nothing an undo could put back.
    assert_eq!(p.chain_tail("s").unwrap().op_id, "op-1");
    undo_eligibility(&p, &request("op-1", &k, JournalState::Completed)).unwrap();
    for op in ["op-2", "op-3"] {
        let r = undo_eligibility(&p, &request(op, &k, JournalState::RolledBack)).unwrap_err();
        assert_eq!(r.code(), "rewind/not-undoable", "{op}");
    }
    // The file names the new states in kebab case.
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("ws-w").join(HISTORY_FILE)).unwrap())
            .unwrap();
    assert_eq!(v["version"], rewind_history::FORMAT_VERSION);
    assert_eq!(v["entries"][1]["outcome"], "rolled-back");
    assert_eq!(v["entries"][2]["outcome"], "abandoned");
    assert_eq!(v["entries"][0]["markerId"], "marker-op-1");
}

#[test]
fn an_undo_start_is_durable_before_the_undo() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    store.append(&k, started("op-1", "s", &k)).unwrap();
    // Not before the rewind is settled.
    assert!(store.mark_undo_started(&k, "op-1", 20).is_err());
    store.finish(&k, "op-1", Outcome::Done, None).unwrap();
    let e = store.mark_undo_started(&k, "op-1", 20).unwrap().entry;
    assert_eq!(e.undo_started_at, Some(20));
    assert!(e.is_undo_interrupted());
    // A repeated start keeps the first time.
    assert_eq!(
        store
            .mark_undo_started(&k, "op-1", 30)
            .unwrap()
            .entry
            .undo_started_at,
        Some(20)
    );
    let p = store.read(&k).unwrap();
    assert_eq!(p.interrupted("s").count(), 1);
    store
        .mark_undone(&k, "op-1", UndoOutcome::Ok, UndoMode::Files, 40)
        .unwrap();
    let p = store.read(&k).unwrap();
    assert_eq!(p.interrupted("s").count(), 0);
    assert!(store.mark_undo_started(&k, "op-1", 50).is_err());
}

#[test]
fn version_1_files_are_read_and_written_back_as_version_2() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    std::fs::create_dir_all(dir.path().join("ws-w")).unwrap();
    let v1 = br#"{"version": 1, "workspace": "ws-w", "entries": [{"opId": "op-0", "sessionId": "s", "workspace": "ws-w", "targetSeq": 3, "time": 5, "outcome": "partial", "counts": {"restored": 0, "deleted": 0, "skipped": 0, "failed": 1}, "paths": {"failed": ["x"]}}]}"#;
    std::fs::write(dir.path().join("ws-w").join(HISTORY_FILE), v1).unwrap();
    let p = store.read(&k).unwrap();
    assert_eq!(p.version, 1);
    assert_eq!(p.entries[0].outcome, Outcome::Partial);
    assert_eq!(p.entries[0].marker_id, None);
    store.append(&k, started("op-1", "s", &k)).unwrap();
    let p = store.read(&k).unwrap();
    assert_eq!(p.version, rewind_history::FORMAT_VERSION);
    assert_eq!(p.entries.len(), 2);
}

#[test]
fn a_damaged_file_keeps_what_can_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path())
        .unwrap()
        .with_clock(Arc::new(|| 77));
    let k = key("w");
    std::fs::create_dir_all(dir.path().join("ws-w")).unwrap();
    // Three entries: a good one, one with a wrong type, a good one; plus a
    // damaged top level (an unknown outcome makes the strict parse fail).
    let damaged = br#"{"version": 2, "workspace": "ws-w", "entries": [
        {"opId": "op-a", "sessionId": "s", "workspace": "ws-w", "targetSeq": 1, "time": 1, "outcome": "done", "counts": {"restored": 1, "deleted": 0, "skipped": 0, "failed": 0}},
        {"opId": "op-b", "sessionId": "s", "workspace": "ws-w", "targetSeq": "x", "time": 2, "outcome": "done", "counts": {"restored": 0, "deleted": 0, "skipped": 0, "failed": 0}},
        {"opId": "op-c", "sessionId": "s", "workspace": "ws-w", "targetSeq": 3, "time": 3, "outcome": "done", "counts": {"restored": 0, "deleted": 0, "skipped": 0, "failed": 0}}
    ]}"#;
    let file = dir.path().join("ws-w").join(HISTORY_FILE);
    std::fs::write(&file, damaged).unwrap();
    let e = store.read(&k).unwrap_err();
    assert_eq!(e.code(), CODE_HISTORY_CORRUPT);
    let (p, s) = store.read_salvaged(&k).unwrap();
    let s = s.unwrap();
    assert_eq!(s.dropped, 1);
    assert!(!s.detail.is_empty());
    assert_eq!(
        p.entries
            .iter()
            .map(|e| e.op_id.as_str())
            .collect::<Vec<_>>(),
        ["op-a", "op-c"]
    );
    // Reading changed nothing.
    assert_eq!(std::fs::read(&file).unwrap(), damaged);
    // The next write keeps them, and the damaged bytes aside.
    let r = store.append(&k, started("op-d", "s", &k)).unwrap();
    assert_eq!(r.notes.salvaged, 2);
    let aside = r.notes.quarantined.unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("ws-w").join(aside)).unwrap(),
        damaged
    );
    let (p, s) = store.read_salvaged(&k).unwrap();
    assert!(s.is_none());
    assert_eq!(
        p.entries
            .iter()
            .map(|e| e.op_id.as_str())
            .collect::<Vec<_>>(),
        ["op-a", "op-c", "op-d"]
    );
    // Unreadable bytes salvage to nothing, still with the named code.
    std::fs::write(&file, b"\xff not json").unwrap();
    let (p, s) = store.read_salvaged(&k).unwrap();
    assert!(p.entries.is_empty());
    assert_eq!(s.unwrap().dropped, 0);
}

#[test]
fn a_newer_file_is_not_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    std::fs::create_dir_all(dir.path().join("ws-w")).unwrap();
    std::fs::write(
        dir.path().join("ws-w").join(HISTORY_FILE),
        br#"{"version": 9, "workspace": "ws-w", "entries": []}"#,
    )
    .unwrap();
    assert!(matches!(
        store.read_salvaged(&k),
        Err(ReadError::NewerVersion { found: 9, .. })
    ));
}
