//! `dsh-rewind preview` names a planned file whose before-state is a git blob the workspace's
//! repository no longer holds (the commit that held it amended away, the object pruned), in its
//! text and its `--json`; `restore` refuses the rewind (`rewind/git-object-gone`) until that
//! file is kept.

use std::path::PathBuf;

use snapshot_store::{ScanPhase, Store, StoreOptions};

use rewind_test_support::git::git;

mod common;
use common::{run, scan};

/// A home whose session `s1` has one message (@0) whose shell call changed `f.txt` and
/// `keep.txt`, both clean in the repository before it; then `f.txt`'s first blob is pruned.
fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("keep.txt"), "kept\n").unwrap();
    std::fs::write(ws.join("f.txt"), "first version, amended away\n").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "one"]);
    let oid = git(&ws, &["rev-parse", "HEAD:f.txt"]);
    let store = Store::open(&home.join("rewind-snapshots"), StoreOptions::default()).unwrap();
    let s = store.session("s1", &ws).unwrap();
    scan(&s, ScanPhase::Boundary, 0, None);
    scan(&s, ScanPhase::Before, 0, Some("c1"));
    std::fs::write(ws.join("f.txt"), "second version\n").unwrap();
    std::fs::write(ws.join("keep.txt"), "changed by the call\n").unwrap();
    scan(&s, ScanPhase::After, 0, Some("c1"));
    drop(s);
    let dir = home.join("sessions").join("--ws--").join("s1");
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "{{\"type\":\"session\",\"version\":0,\"id\":\"s1\",\"createdAt\":1795977964371,\"cwd\":{}}}\n\
         {{\"type\":\"user/message\",\"seq\":0,\"time\":1795977964372,\"data\":{{\"content\":[{{\"type\":\"text\",\"text\":\"edit\"}}],\"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\"id\":\"m0\"}},\"surfaceOp\":\"append\"}}\n",
        serde_json::to_string(&ws.to_string_lossy()).unwrap()
    );
    std::fs::write(dir.join("session.jsonl"), text).unwrap();
    (tmp, home, ws, oid)
}

#[test]
fn preview_names_the_file_whose_git_object_is_gone_and_restore_runs_once_it_is_kept() {
    let (_tmp, home, ws, oid) = fixture();
    // Before the prune: no warning.
    let (code, text) = run(&home, &["preview", "s1", "@0"]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("git object gone"), "{text}");

    git(&ws, &["add", "f.txt"]);
    git(&ws, &["commit", "-q", "--amend", "-m", "one"]);
    git(&ws, &["reflog", "expire", "--expire=now", "--all"]);
    git(&ws, &["gc", "-q", "--prune=now"]);

    let (code, text) = run(&home, &["preview", "s1", "@0"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("git object gone f.txt"), "{text}");
    assert!(text.contains(&oid), "{text}");
    assert!(!text.contains("git object gone keep.txt"), "{text}");
    let (code, text) = run(&home, &["--json", "preview", "s1", "@0"]);
    assert_eq!(code, 0, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let gone = v["plan"]["gitObjectGone"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(gone.len(), 1, "{v}");
    assert_eq!(gone[0]["path"], "f.txt", "{v}");

    let (code, text) = run(&home, &["restore", "s1", "@0"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("git-object-gone"), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "changed by the call\n"
    );
    let (code, text) = run(&home, &["restore", "s1", "@0", "--keep", "f.txt"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("f.txt")).unwrap(),
        "second version\n"
    );
}
