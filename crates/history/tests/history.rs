//! Integration tests of the history store: one binary, real files in temp dirs.
//!
//! Some tests re-run this binary as a child process (`child_main`) to append
//! from several processes at once or to kill a writer at a chosen write step.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use proptest::prelude::*;
use rewind_history::*;
use rewind_test_support::{CrashChild, CrashTarget, each_point};

const CHILD_ENV: &str = "REWIND_HISTORY_CHILD";

fn key(id: &str) -> WorkspaceKey {
    WorkspaceKey::for_workspace(id).unwrap()
}

fn entry(op: &str, session: &str, k: &WorkspaceKey, time: u64) -> Entry {
    let paths = Paths {
        restored: vec![format!("{op}.txt")],
        ..Paths::default()
    };
    Entry::new(op, session, k, time, time, Outcome::Done, paths)
}

fn ops(p: &Partition) -> Vec<String> {
    p.entries.iter().map(|e| e.op_id.clone()).collect()
}

fn file(root: &Path, k: &WorkspaceKey) -> std::path::PathBuf {
    root.join(k.as_str()).join(HISTORY_FILE)
}

/// Entry point of the child processes; a no-op in a normal test run.
#[test]
fn child_main() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    // spec: <root>|<key>|<prefix>|<count>|<limit>
    let parts: Vec<&str> = spec.split('|').collect();
    let (root, k, prefix, count, limit) = (
        parts[0],
        WorkspaceKey::parse(parts[1]).unwrap(),
        parts[2],
        parts[3].parse::<usize>().unwrap(),
        parts[4].parse::<usize>().unwrap(),
    );
    let mut store = HistoryStore::open(root).unwrap().with_limit(limit);
    if let Some(target) = CrashTarget::from_env() {
        assert!(WriteStep::from_name(target.point()).is_some());
        store = store.with_crash_seam(Arc::new(move |step| target.reached(step.name())));
    }
    for i in 0..count {
        store
            .append(&k, entry(&format!("{prefix}-{i}"), prefix, &k, i as u64))
            .unwrap();
    }
}

fn child_spec(root: &Path, k: &WorkspaceKey, prefix: &str, count: usize, limit: usize) -> String {
    format!("{}|{}|{prefix}|{count}|{limit}", root.display(), k.as_str())
}

fn child(root: &Path, k: &WorkspaceKey, prefix: &str, count: usize, limit: usize) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_main", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, child_spec(root, k, prefix, count, limit))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

#[test]
fn append_read_export_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w1");
    assert_eq!(store.read(&k).unwrap(), Partition::empty(&k));
    let mut e = entry("op-1", "s1", &k, 5);
    e.fork = Some(ForkInfo {
        child_session_id: "child".into(),
    });
    store.append(&k, e.clone()).unwrap();
    store.append(&k, entry("op-2", "s1", &k, 6)).unwrap();
    let p = store.read(&k).unwrap();
    assert_eq!(ops(&p), ["op-1", "op-2"]);
    assert_eq!(p.entries[0], e);
    assert_eq!(
        p.newest_first()
            .map(|e| e.op_id.as_str())
            .collect::<Vec<_>>(),
        ["op-2", "op-1"]
    );
    let exported = store.export(&k).unwrap();
    assert_eq!(
        exported.as_bytes(),
        std::fs::read(file(dir.path(), &k)).unwrap()
    );
    let v: serde_json::Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(v["version"], rewind_history::FORMAT_VERSION);
    assert_eq!(v["workspace"], "ws-w1");
    assert_eq!(v["entries"][0]["opId"], "op-1");
    assert_eq!(v["entries"][0]["fork"]["childSessionId"], "child");
    assert_eq!(v["entries"][0]["counts"]["restored"], 1);
    assert!(v["entries"][1].get("fork").is_none());
    assert!(v["entries"][1].get("undoneAt").is_none());
}

#[test]
fn partitions_are_separate() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let (a, b, u) = (key("a"), key("b"), WorkspaceKey::unknown());
    store.append(&a, entry("op-a", "s", &a, 1)).unwrap();
    store.append(&u, entry("op-u", "s", &u, 1)).unwrap();
    assert_eq!(ops(&store.read(&a).unwrap()), ["op-a"]);
    assert!(store.read(&b).unwrap().entries.is_empty());
    assert_eq!(ops(&store.read(&u).unwrap()), ["op-u"]);
    assert!(dir.path().join("_unknown").join(HISTORY_FILE).is_file());
}

#[test]
fn limit_keeps_newest() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    assert_eq!(store.limit(), DEFAULT_HISTORY_LIMIT);
    let k = key("w");
    for i in 0..15u64 {
        let r = store
            .append(&k, entry(&format!("op-{i}"), "s", &k, i))
            .unwrap();
        assert_eq!(
            r.dropped,
            if i >= 10 {
                vec![format!("op-{}", i - 10)]
            } else {
                vec![]
            }
        );
    }
    let expected: Vec<String> = (5..15).map(|i| format!("op-{i}")).collect();
    assert_eq!(ops(&store.read(&k).unwrap()), expected);
    // A lower limit applies at the next write.
    let store = store.with_limit(3);
    store.append(&k, entry("op-15", "s", &k, 15)).unwrap();
    assert_eq!(ops(&store.read(&k).unwrap()), ["op-13", "op-14", "op-15"]);
    assert_eq!(
        HistoryStore::open(dir.path())
            .unwrap()
            .with_limit(0)
            .limit(),
        1
    );
    assert_eq!(
        HistoryStore::open(dir.path())
            .unwrap()
            .with_limit(usize::MAX)
            .limit(),
        MAX_HISTORY_LIMIT
    );
}

#[test]
fn long_path_lists_are_cut_but_counts_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    let paths = Paths {
        deleted: (0..MAX_PATHS_PER_LIST + 50)
            .map(|i| format!("f{i}"))
            .collect(),
        ..Paths::default()
    };
    store
        .append(&k, Entry::new("op", "s", &k, 1, 1, Outcome::Partial, paths))
        .unwrap();
    let e = &store.read(&k).unwrap().entries[0];
    assert_eq!(e.paths.deleted.len(), MAX_PATHS_PER_LIST);
    assert_eq!(e.counts.deleted, (MAX_PATHS_PER_LIST + 50) as u64);
    assert_eq!(e.outcome, Outcome::Partial);
}

#[test]
fn bad_entries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let (k, other) = (key("w"), key("other"));
    store.append(&k, entry("op", "s", &k, 1)).unwrap();
    let e = store.append(&k, entry("op", "s", &k, 2)).unwrap_err();
    assert!(matches!(e, AppendError::DuplicateOp { .. }), "{e}");
    assert_eq!(e.code(), "rewind/bad-request");
    let e = store.append(&k, entry("op2", "s", &other, 2)).unwrap_err();
    assert!(matches!(e, AppendError::WrongWorkspace { .. }), "{e}");
    assert!(matches!(
        store.append(&k, entry("", "s", &k, 2)),
        Err(AppendError::EmptyField { field: "opId" })
    ));
    assert!(matches!(
        store.append(&k, entry("x", "", &k, 2)),
        Err(AppendError::EmptyField { field: "sessionId" })
    ));
    assert_eq!(ops(&store.read(&k).unwrap()), ["op"]);
}

#[test]
fn clear_removes_records_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    std::fs::write(dir.path().join("sibling.txt"), "keep").unwrap();
    for i in 0..3u64 {
        store
            .append(&k, entry(&format!("op-{i}"), "s", &k, i))
            .unwrap();
    }
    let r = store.clear(&k).unwrap();
    assert_eq!(r.cleared, 3);
    assert_eq!(r.notes.quarantined, None);
    assert!(store.read(&k).unwrap().entries.is_empty());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sibling.txt")).unwrap(),
        "keep"
    );
    assert_eq!(store.clear(&k).unwrap().cleared, 0);
}

#[test]
fn mark_undone_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    store.append(&k, entry("op-1", "s", &k, 1)).unwrap();
    let r = store
        .mark_undone(&k, "op-1", UndoOutcome::Ok, UndoMode::Files, 99)
        .unwrap();
    assert_eq!(
        (r.entry.undone_at, r.entry.undo_outcome, r.entry.undo_mode),
        (Some(99), Some(UndoOutcome::Ok), Some(UndoMode::Files))
    );
    let p = store.read(&k).unwrap();
    assert_eq!(p.entries[0].undone_at, Some(99));
    let v: serde_json::Value = serde_json::from_str(&store.export(&k).unwrap()).unwrap();
    assert_eq!(
        (
            v["entries"][0]["undoneAt"].as_u64(),
            v["entries"][0]["undoOutcome"].as_str(),
            v["entries"][0]["undoMode"].as_str()
        ),
        (Some(99), Some("ok"), Some("files"))
    );
    let e = store
        .mark_undone(&k, "op-1", UndoOutcome::Ok, UndoMode::Files, 100)
        .unwrap_err();
    assert!(matches!(
        e,
        MarkUndoneError::AlreadyUndone { undone_at: 99, .. }
    ));
    assert_eq!(e.code(), "rewind/already-undone");
    // The message a user reads names the time, not the clock's milliseconds.
    assert_eq!(
        e.to_string(),
        "history entry op-1 was already undone at 1970-01-01 00:00 UTC"
    );
    let e = store
        .mark_undone(&k, "nope", UndoOutcome::Ok, UndoMode::Files, 100)
        .unwrap_err();
    assert_eq!(e.code(), "rewind/unknown-entry");
    assert_eq!(store.read(&k).unwrap().entries[0].undone_at, Some(99));
}

#[test]
fn corrupt_file_is_kept_aside_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path())
        .unwrap()
        .with_clock(Arc::new(|| 1234));
    let k = key("w");
    store.append(&k, entry("op-0", "s", &k, 0)).unwrap();
    let garbage: &[&[u8]] = &[
        b"{\"version\": 1, \"workspace\": \"ws-w\", \"entries\": [",
        b"\xff\xfe not json",
        b"[]",
        b"{\"version\": \"1\"}",
        b"{\"version\": 0, \"workspace\": \"ws-w\", \"entries\": []}",
        b"{\"version\": 1, \"workspace\": \"ws-other\", \"entries\": []}",
        b"{\"version\": 1, \"workspace\": \"ws-w\", \"entries\": [{\"opId\": 3}]}",
    ];
    for (i, bytes) in garbage.iter().enumerate() {
        std::fs::write(file(dir.path(), &k), bytes).unwrap();
        let e = store.read(&k).unwrap_err();
        assert!(matches!(e, ReadError::Corrupt { .. }), "{i}: {e}");
        assert_eq!(e.code(), "rewind/history-corrupt");
        // Reading changed nothing.
        assert_eq!(&std::fs::read(file(dir.path(), &k)).unwrap(), bytes);
        let r = store
            .append(&k, entry(&format!("op-{}", i + 1), "s", &k, 1))
            .unwrap();
        let aside = r.notes.quarantined.unwrap();
        assert!(aside.starts_with("history.json.corrupt-1234"), "{aside}");
        assert_eq!(
            &std::fs::read(dir.path().join(k.as_str()).join(&aside)).unwrap(),
            bytes,
            "corrupt bytes kept"
        );
        assert_eq!(ops(&store.read(&k).unwrap()), [format!("op-{}", i + 1)]);
    }
    let kept = std::fs::read_dir(dir.path().join(k.as_str()))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("history.json.corrupt-")
        })
        .count();
    assert_eq!(kept, garbage.len());
}

#[test]
fn newer_version_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = key("w");
    store.append(&k, entry("op-0", "s", &k, 0)).unwrap();
    let newer = br#"{"version": 4, "workspace": "ws-w", "entries": [{"something": "new"}]}"#;
    std::fs::write(file(dir.path(), &k), newer).unwrap();
    let e = store.read(&k).unwrap_err();
    assert!(
        matches!(
            e,
            ReadError::NewerVersion {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        store.export(&k),
        Err(ReadError::NewerVersion { .. })
    ));
    assert!(matches!(
        store.append(&k, entry("op-1", "s", &k, 1)),
        Err(AppendError::Write(WriteError::NewerVersion {
            found: 4,
            ..
        }))
    ));
    assert!(matches!(
        store.clear(&k),
        Err(WriteError::NewerVersion { .. })
    ));
    assert!(matches!(
        store.mark_undone(&k, "op-0", UndoOutcome::Ok, UndoMode::Files, 1),
        Err(MarkUndoneError::Write(WriteError::NewerVersion { .. }))
    ));
    assert_eq!(std::fs::read(file(dir.path(), &k)).unwrap(), newer);
    assert_eq!(
        std::fs::read_dir(dir.path().join(k.as_str()))
            .unwrap()
            .count(),
        2,
        "only history.json and the lock file"
    );
}

#[test]
fn hostile_partition_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path().join("rewind-history");
    let store = HistoryStore::open(&root).unwrap();
    // A partition directory that is a symlink out of the root.
    std::os::unix::fs::symlink(outside.path(), root.join("ws-link")).unwrap();
    let k = key("link");
    assert!(matches!(
        store.read(&k),
        Err(ReadError::NotADirectory { .. })
    ));
    assert!(matches!(
        store.append(&k, entry("op", "s", &k, 1)),
        Err(AppendError::Write(WriteError::NotADirectory { .. }))
    ));
    assert!(matches!(
        store.clear(&k),
        Err(WriteError::NotADirectory { .. })
    ));
    // A partition path that is a file.
    std::fs::write(root.join("ws-file"), "x").unwrap();
    assert!(matches!(
        store.read(&key("file")),
        Err(ReadError::NotADirectory { .. })
    ));
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // Keys that would leave the root cannot even be built.
    for bad in ["../x", "a/../../b", ".."] {
        assert!(WorkspaceKey::for_workspace(bad).is_err());
    }
    // history.json being a symlink out of the root is never followed on write.
    let k = key("w");
    store.append(&k, entry("op", "s", &k, 1)).unwrap();
    let target = outside.path().join("victim.json");
    std::fs::write(&target, "victim").unwrap();
    std::fs::remove_file(file(&root, &k)).unwrap();
    std::os::unix::fs::symlink(&target, file(&root, &k)).unwrap();
    assert!(matches!(store.read(&k), Err(ReadError::Corrupt { .. })));
    // A write renames the symlink itself aside and starts a fresh file.
    let r = store.append(&k, entry("op2", "s", &k, 2)).unwrap();
    let aside = root.join(k.as_str()).join(r.notes.quarantined.unwrap());
    assert!(
        std::fs::symlink_metadata(&aside)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(ops(&store.read(&k).unwrap()), ["op2"]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "victim");
}

fn ws() -> WorkspaceKey {
    key("w")
}

fn sample() -> Partition {
    let k = ws();
    let mut p = Partition::empty(&k);
    p.entries.push(entry("a1", "A", &k, 1));
    p.entries.push(entry("b1", "B", &k, 2));
    p.entries.push(entry("a2", "A", &k, 3));
    let mut undone = entry("a3", "A", &k, 4);
    undone.undone_at = Some(10);
    p.entries.push(undone);
    p
}

fn req<'a>(
    op: &'a str,
    session: &'a str,
    k: &'a WorkspaceKey,
    journal: JournalState,
) -> UndoRequest<'a> {
    UndoRequest {
        op_id: op,
        active_session: session,
        active_workspace: k,
        journal,
    }
}

#[test]
fn undo_eligibility_rules() {
    let p = sample();
    let k = ws();
    // The chain tail of A is a2 (a3 is undone).
    assert_eq!(
        undo_eligibility(&p, &req("a2", "A", &k, JournalState::Completed))
            .unwrap()
            .op_id,
        "a2"
    );
    assert_eq!(
        undo_eligibility(&p, &req("b1", "B", &k, JournalState::Completed))
            .unwrap()
            .op_id,
        "b1"
    );
    let cases: Vec<(UndoRequest<'_>, &str)> = vec![
        (
            req("zz", "A", &k, JournalState::Completed),
            "rewind/unknown-entry",
        ),
        (
            req("b1", "A", &k, JournalState::Completed),
            "rewind/undo-other-session",
        ),
        (
            req("a3", "A", &k, JournalState::Completed),
            "rewind/already-undone",
        ),
        (
            req("a2", "A", &k, JournalState::Open),
            "rewind/not-undoable",
        ),
        (
            req("a2", "A", &k, JournalState::Missing),
            "rewind/not-undoable",
        ),
        (
            req("a2", "A", &k, JournalState::RolledBack),
            "rewind/not-undoable",
        ),
        (
            req("a2", "A", &k, JournalState::Undone),
            "rewind/not-undoable",
        ),
        (
            req("a2", "A", &k, JournalState::Unreadable),
            "rewind/not-undoable",
        ),
    ];
    for (r, code) in cases {
        let e = undo_eligibility(&p, &r).unwrap_err();
        assert_eq!(e.code(), code, "{r:?}: {e}");
    }
    // Any rewind of the session, not only the newest.
    assert_eq!(
        undo_eligibility(&p, &req("a1", "A", &k, JournalState::Completed))
            .unwrap()
            .op_id,
        "a1"
    );
    // Another workspace: the partition passed in is not the active one.
    let other = key("other");
    let e = undo_eligibility(&p, &req("a2", "A", &other, JournalState::Completed)).unwrap_err();
    assert_eq!(e.code(), "rewind/undo-cross-workspace");
    // An entry naming another workspace inside the active partition.
    let mut q = sample();
    q.entries[2].workspace = "ws-other".into();
    let e = undo_eligibility(&q, &req("a2", "A", &k, JournalState::Completed)).unwrap_err();
    assert_eq!(e.code(), "rewind/undo-cross-workspace");
    // Stale paths.
    assert_eq!(require_unchanged(&[]), Ok(()));
    let e = require_unchanged(&["b.txt".into(), "a.txt".into(), "b.txt".into()]).unwrap_err();
    assert_eq!(e.code(), "rewind/stale-undo");
    assert_eq!(
        e,
        UndoRefusal::Stale {
            paths: vec!["a.txt".into(), "b.txt".into()]
        }
    );
    assert!(e.to_string().contains("a.txt, b.txt"));
}

#[test]
fn undo_chain_walks_back_one_entry_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(dir.path()).unwrap();
    let k = ws();
    for op in ["x1", "x2", "x3"] {
        store.append(&k, entry(op, "S", &k, 1)).unwrap();
    }
    for (t, op) in ["x3", "x2", "x1"].into_iter().enumerate() {
        let p = store.read(&k).unwrap();
        assert_eq!(
            undo_eligibility(&p, &req(op, "S", &k, JournalState::Completed))
                .unwrap()
                .op_id,
            op
        );
        store
            .mark_undone(&k, op, UndoOutcome::Ok, UndoMode::Files, t as u64)
            .unwrap();
        let p = store.read(&k).unwrap();
        let e = undo_eligibility(&p, &req(op, "S", &k, JournalState::Completed)).unwrap_err();
        assert_eq!(e.code(), "rewind/already-undone");
    }
    assert!(store.read(&k).unwrap().chain_tail("S").is_none());
}

#[test]
fn concurrent_thread_appends_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let k = ws();
    let (threads, per): (usize, usize) = (8, 20);
    for limit in [1000, 10] {
        let store = Arc::new(
            HistoryStore::open(dir.path().join(format!("l{limit}")))
                .unwrap()
                .with_limit(limit),
        );
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (store, k) = (store.clone(), k.clone());
                std::thread::spawn(move || {
                    for i in 0..per {
                        store
                            .append(
                                &k,
                                entry(&format!("t{t}-{i}"), &format!("t{t}"), &k, i as u64),
                            )
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        store.append(&k, entry("last", "z", &k, 0)).unwrap();
        let p = store.read(&k).unwrap();
        assert_eq!(p.entries.len(), (threads * per + 1).min(limit));
        assert_eq!(p.entries.last().unwrap().op_id, "last");
        // Each thread's entries keep their order.
        for t in 0..threads {
            let seq: Vec<u64> = p
                .entries
                .iter()
                .filter(|e| e.session_id == format!("t{t}"))
                .map(|e| e.target_seq)
                .collect();
            assert!(seq.windows(2).all(|w| w[0] < w[1]), "{seq:?}");
            if limit == 1000 {
                assert_eq!(seq.len(), per);
            }
        }
    }
}

#[test]
fn concurrent_process_appends_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let k = ws();
    let (procs, per): (usize, usize) = (4, 15);
    for limit in [1000, 10] {
        let root = dir.path().join(format!("l{limit}"));
        let mut children: Vec<_> = (0..procs)
            .map(|p| {
                child(&root, &k, &format!("p{p}"), per, limit)
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in &mut children {
            assert!(c.wait().unwrap().success());
        }
        let store = HistoryStore::open(&root).unwrap().with_limit(limit);
        store.append(&k, entry("last", "z", &k, 0)).unwrap();
        let p = store.read(&k).unwrap();
        assert_eq!(p.entries.len(), (procs * per + 1).min(limit));
        assert_eq!(p.entries.last().unwrap().op_id, "last");
        for i in 0..procs {
            let seq: Vec<u64> = p
                .entries
                .iter()
                .filter(|e| e.session_id == format!("p{i}"))
                .map(|e| e.target_seq)
                .collect();
            assert!(seq.windows(2).all(|w| w[0] < w[1]), "{seq:?}");
            if limit == 1000 {
                assert_eq!(seq.len(), per);
            }
        }
    }
}

#[test]
fn killed_writer_leaves_old_or_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let k = ws();
    let cases = each_point(WriteStep::ALL, |step| {
        let root = dir.path().join(step.name());
        let store = HistoryStore::open(&root).unwrap();
        // Old version: one entry written by a completed write.
        store.append(&k, entry("old", "old", &k, 0)).unwrap();
        let old = std::fs::read(file(&root, &k)).unwrap();
        let killed = CrashChild::new("child_main")
            .env(CHILD_ENV, child_spec(&root, &k, "new", 1, 10))
            .run(step.name(), 0);
        assert!(killed.killed(), "child ended before {}", step.name());
        let now = std::fs::read(file(&root, &k)).unwrap();
        let p = store.read(&k).unwrap();
        match step {
            WriteStep::Renamed | WriteStep::DirSynced => {
                assert_eq!(ops(&p), ["old", "new-0"], "{}", step.name())
            }
            _ => {
                assert_eq!(now, old, "{}", step.name());
                assert_eq!(ops(&p), ["old"]);
            }
        }
        // The next write works and removes the dead writer's temp file.
        store.append(&k, entry("after", "x", &k, 1)).unwrap();
        let names: Vec<String> = std::fs::read_dir(root.join(k.as_str()))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != HISTORY_FILE && n != LOCK_FILE)
            .collect();
        assert!(names.is_empty(), "{}: leftovers {names:?}", step.name());
    });
    assert_eq!(cases, WriteStep::ALL.len());
}

fn cases() -> u32 {
    rewind_test_support::cases(24)
}

#[derive(Clone, Debug)]
enum Op {
    Append(u8),
    Undo(usize),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![8 => (0u8..3).prop_map(Op::Append), 2 => (0usize..12).prop_map(Op::Undo), 1 => Just(Op::Clear)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The store matches a simple model: the newest `limit` appends, in order,
    /// with undo marks; the limit always holds.
    #[test]
    fn store_matches_model(limit in 1usize..6, script in proptest::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::open(dir.path()).unwrap().with_limit(limit);
        let k = ws();
        let mut model: Vec<Entry> = Vec::new();
        for (n, o) in script.iter().enumerate() {
            match o {
                Op::Append(s) => {
                    let e = entry(&format!("op{n}"), &format!("s{s}"), &k, n as u64);
                    store.append(&k, e.clone()).unwrap();
                    model.push(e);
                    let excess = model.len().saturating_sub(limit);
                    model.drain(..excess);
                }
                Op::Undo(i) => {
                    let r = store.mark_undone(&k, &format!("op{i}"), UndoOutcome::Ok, UndoMode::Files, n as u64);
                    match model.iter_mut().find(|e| e.op_id == format!("op{i}")) {
                        Some(e) if e.undone_at.is_none() => {
                            prop_assert!(r.is_ok());
                            e.undone_at = Some(n as u64);
                            e.undo_outcome = Some(UndoOutcome::Ok);
                            e.undo_mode = Some(UndoMode::Files);
                        }
                        Some(_) => { let already = matches!(r, Err(MarkUndoneError::AlreadyUndone { .. })); prop_assert!(already) }
                        None => { let unknown = matches!(r, Err(MarkUndoneError::UnknownEntry { .. })); prop_assert!(unknown) }
                    }
                }
                Op::Clear => {
                    prop_assert_eq!(store.clear(&k).unwrap().cleared, model.len());
                    model.clear();
                }
            }
            let p = store.read(&k).unwrap();
            prop_assert!(p.entries.len() <= limit);
            prop_assert_eq!(&p.entries, &model);
        }
    }

    /// For any partition, a session's undoable entries are exactly its
    /// not-yet-undone ones (any of them, not only the newest).
    #[test]
    fn every_not_yet_undone_entry_of_the_session_is_undoable(
        sessions in proptest::collection::vec((0u8..3, any::<bool>()), 0..12),
    ) {
        let k = ws();
        let mut p = Partition::empty(&k);
        for (i, (s, undone)) in sessions.iter().enumerate() {
            let mut e = entry(&format!("op{i}"), &format!("s{s}"), &k, i as u64);
            if *undone { e.undone_at = Some(1); }
            p.entries.push(e);
        }
        for s in 0..3u8 {
            let session = format!("s{s}");
            let ok: Vec<&str> = p.entries.iter()
                .filter(|e| undo_eligibility(&p, &req(&e.op_id, &session, &k, JournalState::Completed)).is_ok())
                .map(|e| e.op_id.as_str())
                .collect();
            let open: Vec<&str> = p.entries.iter()
                .filter(|e| e.session_id == session && e.undone_at.is_none())
                .map(|e| e.op_id.as_str())
                .collect();
            prop_assert_eq!(ok, open);
        }
    }
}

#[test]
fn a_continued_restore_settles_its_entry() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = HistoryStore::open(tmp.path()).expect("open");
    let k = key("a");
    let partial = Entry::new(
        "op-1",
        "s1",
        &k,
        7,
        1,
        Outcome::Partial,
        Paths {
            restored: vec!["a.txt".into()],
            deleted: vec![],
            skipped: vec!["big.bin".into()],
            failed: vec!["locked.txt".into(), "gone.txt".into()],
            kept: Vec::new(),
        },
    );
    store.append(&k, partial).expect("append");

    // Continuing once more still fails one path: partial, with only that failure left.
    let first = Paths {
        restored: vec!["locked.txt".into()],
        failed: vec!["gone.txt".into()],
        ..Paths::default()
    };
    let e = store
        .settle_continued(&k, "op-1", &first)
        .expect("settle")
        .entry;
    assert_eq!(e.outcome, Outcome::Partial);
    assert_eq!(
        e.paths.restored,
        vec!["a.txt".to_string(), "locked.txt".into()]
    );
    assert_eq!(e.paths.failed, vec!["gone.txt".to_string()]);
    assert_eq!(
        (e.counts.restored, e.counts.skipped, e.counts.failed),
        (2, 1, 1)
    );

    // The next continue finishes: done, nothing failed, the entry can be undone later.
    let second = Paths {
        deleted: vec!["gone.txt".into()],
        ..Paths::default()
    };
    let e = store
        .settle_continued(&k, "op-1", &second)
        .expect("settle")
        .entry;
    assert_eq!(e.outcome, Outcome::Done);
    assert_eq!(e.paths.deleted, vec!["gone.txt".to_string()]);
    assert_eq!(e.counts.failed, 0);
    let read = store.read(&k).expect("read");
    assert_eq!(read.find("op-1").expect("entry").outcome, Outcome::Done);

    let err = store.settle_continued(&k, "nope", &second).unwrap_err();
    assert_eq!(err.code(), "rewind/unknown-entry");
}
