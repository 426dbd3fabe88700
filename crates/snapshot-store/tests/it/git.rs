//! The git state recorded at each scan of a workspace that is a git repository.

use std::path::Path;

use snapshot_store::{GitBlobKind, ScanPhase, ScanRequest};

use crate::common::Env;

fn git(dir: &Path, args: &[&str]) {
    rewind_test_support::git::git(dir, args);
}

fn req(phase: ScanPhase, anchor: u64, call: Option<&str>) -> ScanRequest {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_owned);
    r.threads = 1;
    r
}

#[test]
fn each_scan_records_head_refs_and_the_index_of_the_repository() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    // No repository: nothing recorded.
    s.scan(&req(ScanPhase::Boundary, 1, None)).expect("scan");
    assert!(s.git_points().expect("points").is_empty());

    git(&env.cwd, &["init", "-q", "-b", "main"]);
    env.write("a.txt", b"a\n");
    git(&env.cwd, &["add", "."]);
    git(&env.cwd, &["commit", "-qm", "one"]);
    git(&env.cwd, &["pack-refs", "--all"]);
    s.scan(&req(ScanPhase::Boundary, 10, None)).expect("scan");
    s.scan(&req(ScanPhase::Before, 10, Some("c1")))
        .expect("scan");
    git(&env.cwd, &["switch", "-q", "-c", "agent-work"]);
    env.write("b.txt", b"b\n");
    git(&env.cwd, &["add", "b.txt"]);
    git(&env.cwd, &["commit", "-qm", "two"]);
    s.scan(&req(ScanPhase::After, 10, Some("c1")))
        .expect("scan");

    let points = s.git_known_points().expect("points");
    assert_eq!(points.len(), 3);
    assert_eq!(points[0].state.head.branch(), Some("refs/heads/main"));
    assert_eq!(points[2].state.head.branch(), Some("refs/heads/agent-work"));
    assert_eq!(points[2].call_id.as_deref(), Some("c1"));
    // The packed `main` comes back through the stored packed-refs.
    assert!(points[0].state.refs.contains_key("refs/heads/main"));
    assert!(points[2].state.refs.contains_key("refs/heads/main"));
    // Every index a point names is stored, byte for byte.
    for p in &points {
        let i = p.state.index.as_ref().expect("an index");
        let bytes = s.git_blob(GitBlobKind::Index, &i.id).expect("stored");
        assert_eq!(git_state::index_id(&bytes), i.id);
    }
    let now = std::fs::read(env.p(".git/index")).expect("index");
    assert_eq!(
        s.git_blob(GitBlobKind::Index, &git_state::index_id(&now)),
        Some(now)
    );
    // A hostile id never leaves the store's directory.
    assert_eq!(s.git_blob(GitBlobKind::Index, "../../store.json"), None);

    let moves = git_state::agent_moves(&points, 1);
    assert!(moves.head);
    assert!(moves.refs.contains_key("refs/heads/agent-work"));

    // A torn last line is skipped, the points before it kept.
    let path = env.root.join("sessions/s1/git/points.jsonl");
    let mut bytes = std::fs::read(&path).expect("points file");
    bytes.extend_from_slice(b"{\"v\":1,\"anch");
    std::fs::write(&path, bytes).expect("write");
    assert_eq!(s.git_points().expect("points").len(), 3);
}

#[test]
fn a_workspace_inside_a_repository_records_why_it_is_not_tracked() {
    let env = Env::new();
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(env.p("sub")).expect("mkdir");
    let store = env.store();
    let s = store.session("s2", &env.p("sub")).expect("session");
    s.scan(&req(ScanPhase::Boundary, 1, None)).expect("scan");
    let recs = s.git_points().expect("points");
    assert_eq!(recs.len(), 1);
    assert!(
        recs[0]
            .untracked
            .as_deref()
            .is_some_and(|m| m.contains("not its root")),
        "{recs:?}"
    );
    assert!(s.git_known_points().expect("points").is_empty());
}

#[test]
fn a_new_index_is_kept_as_a_link_to_the_file_git_replaced_and_read_back_only_while_it_checks() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    env.write("a.txt", b"a\n");
    git(&env.cwd, &["add", "."]);
    git(&env.cwd, &["commit", "-qm", "one"]);
    s.scan(&req(ScanPhase::Boundary, 10, None)).expect("scan");
    let first = std::fs::read(env.p(".git/index")).expect("index");
    let id = git_state::index_id(&first);
    let stored = |id: &str| {
        walkdir(&env.root)
            .into_iter()
            .find(|p| p.ends_with(format!("git/index/{id}")))
            .expect("stored index file")
    };
    // The same file as git's index (no copy), while git has not replaced it.
    let linked = stored(&id);
    assert_eq!(
        std::fs::metadata(&linked).expect("meta").ino(),
        std::fs::metadata(env.p(".git/index")).expect("meta").ino()
    );
    // git writes a new index by renaming a new file over it: the stored one keeps the old bytes.
    env.write("b.txt", b"b\n");
    git(&env.cwd, &["add", "b.txt"]);
    s.scan(&req(ScanPhase::Boundary, 11, None)).expect("scan");
    assert_eq!(s.git_blob(GitBlobKind::Index, &id), Some(first.clone()));
    let second = std::fs::read(env.p(".git/index")).expect("index");
    assert_ne!(second, first);
    assert_eq!(
        s.git_blob(GitBlobKind::Index, &git_state::index_id(&second)),
        Some(second)
    );
    // A stored index whose bytes no longer end with its id's checksum is not handed out.
    let mut changed = first.clone();
    changed[12] ^= 1;
    let n = changed.len();
    changed[n - 1] ^= 1;
    std::fs::remove_file(&linked).expect("rm");
    std::fs::write(&linked, &changed).expect("write");
    assert_eq!(s.git_blob(GitBlobKind::Index, &id), None);
}

/// Every file under `dir`.
fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}
