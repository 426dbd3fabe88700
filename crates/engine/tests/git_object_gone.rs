//! The preview warns about a planned file whose before-state is a git blob the workspace's
//! repository no longer holds (the commit that held it amended away, the object pruned): it
//! lists the file as the restore would refuse it (`rewind/git-object-gone`), before anything
//! runs. A real repository made with the `git` CLI.

use rewind_engine::{Engine, EngineOptions, ErrorCode, RestoreRequest, WorkspaceKey};
use snapshot_store::{ScanPhase, ScanRequest};

use rewind_test_support::git::git;

#[test]
fn the_preview_lists_a_file_whose_git_object_is_gone() {
    let home = tempfile::tempdir().expect("home");
    let tmp = tempfile::tempdir().expect("ws");
    let ws = tmp.path().join("repo");
    std::fs::create_dir(&ws).expect("mkdir");
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("keep.txt"), "kept\n").expect("write");
    std::fs::write(
        ws.join("f.txt"),
        "first version, only in the commit about to be amended\n",
    )
    .expect("write");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    let old_oid = git(&ws, &["rev-parse", "HEAD:f.txt"]).trim().to_owned();
    let engine = Engine::open(home.path(), EngineOptions::default());
    let es = engine.session(
        "s1",
        Some(&ws),
        WorkspaceKey::for_workspace("w").expect("key"),
    );
    let scan = |phase, anchor, call: Option<&str>| {
        let mut r = ScanRequest::new(phase, anchor);
        r.call_id = call.map(str::to_owned);
        r.threads = 1;
        es.files_of("s1").expect("files").scan(&r).expect("scan");
    };
    // The baseline takes both files from the repository's index (no copy in the store).
    scan(ScanPhase::Boundary, 1, None);
    scan(ScanPhase::Boundary, 10, None);
    // A shell-like call changes both: their before-states are references to the git blobs.
    scan(ScanPhase::Before, 10, Some("c1"));
    std::fs::write(ws.join("f.txt"), "second version\n").expect("write");
    std::fs::write(ws.join("keep.txt"), "changed by the call\n").expect("write");
    scan(ScanPhase::After, 10, Some("c1"));

    // While the repository still has the objects, the preview warns about nothing.
    let p = es.preview(10, &[]).expect("preview");
    assert_eq!(p.files.len(), 2, "{:?}", p.files);
    assert!(p.git_object_gone.is_empty(), "{:?}", p.git_object_gone);

    // The user amends the commit and prunes: the first version's blob is gone.
    git(&ws, &["add", "f.txt"]);
    git(&ws, &["commit", "-q", "--amend", "-m", "one"]);
    git(&ws, &["reflog", "expire", "--expire=now", "--all"]);
    git(&ws, &["gc", "-q", "--prune=now"]);
    let missing = std::process::Command::new("git")
        .args(["cat-file", "-e", &old_oid])
        .current_dir(&ws)
        .status()
        .expect("git");
    assert!(!missing.success(), "the object is pruned");

    let p = es.preview(10, &[]).expect("preview");
    let gone: Vec<_> = p
        .git_object_gone
        .iter()
        .map(|g| g.display.as_str())
        .collect();
    assert_eq!(gone, ["f.txt"], "{:?}", p.git_object_gone);
    let why = &p.git_object_gone[0].error;
    assert!(why.contains(&old_oid), "{why}");
    assert!(why.contains("rewind/git-object-gone"), "{why}");
    assert!(p.unreadable.is_empty(), "{:?}", p.unreadable);
    // The file is still planned (the user may keep it out), and nothing was changed.
    assert!(p.files.iter().any(|f| f.action.display == "f.txt"));
    assert_eq!(
        std::fs::read_to_string(ws.join("f.txt")).expect("read"),
        "second version\n"
    );

    // What the preview warned about is what the restore refuses.
    let err = es
        .prepare_restore(&RestoreRequest {
            target_seq: 10,
            op_id: "op-1".into(),
            ..RestoreRequest::default()
        })
        .and_then(|_| {
            es.restore_files(&RestoreRequest {
                target_seq: 10,
                op_id: "op-1".into(),
                ..RestoreRequest::default()
            })
        })
        .expect_err("refused");
    assert_eq!(err.code, ErrorCode::GitObjectGone, "{err}");
    assert!(err.to_string().contains("f.txt"), "{err}");
}
