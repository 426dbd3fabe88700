//! What a session keeps of the workspace's git repository (`git/`: its points, the index,
//! `packed-refs` and stash-list bytes they name, the journals of its rewinds' git steps) lives
//! in the session's directory: it counts in the session's size and goes with the session.

use std::path::Path;

use snapshot_store::usage::{session_activity, session_dir_name};
use snapshot_store::{GitBlobKind, ScanPhase, ScanRequest};

use crate::common::Env;

fn git(dir: &Path, args: &[&str]) {
    rewind_test_support::git::git(dir, args);
}

fn files_under(dir: &Path) -> (u64, usize) {
    let mut acc = (0, 0);
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let md = e.metadata().expect("meta");
            if md.is_dir() {
                let (b, n) = files_under(&e.path());
                acc = (acc.0 + b, acc.1 + n);
            } else {
                acc = (acc.0 + md.len(), acc.1 + 1);
            }
        }
    }
    acc
}

#[test]
fn stored_git_indexes_count_in_the_session_and_go_with_it() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    env.write("a.txt", b"a\n");
    git(&env.cwd, &["add", "."]);
    git(&env.cwd, &["commit", "-qm", "one"]);
    let mut r = ScanRequest::new(ScanPhase::Boundary, 1);
    r.threads = 1;
    s.scan(&r).expect("scan");
    env.write("a.txt", b"stashed\n");
    git(&env.cwd, &["stash", "-q"]);
    env.write("b.txt", b"b\n");
    git(&env.cwd, &["add", "b.txt"]);
    let mut r = ScanRequest::new(ScanPhase::Boundary, 2);
    r.threads = 1;
    s.scan(&r).expect("scan");
    s.write_git_op("op-1", b"{}").expect("journal");

    let points = s.git_known_points().expect("points");
    assert_eq!(points.len(), 2);
    let ids: Vec<String> = points
        .iter()
        .map(|p| p.state.index.as_ref().expect("index").id.clone())
        .collect();
    assert_ne!(ids[0], ids[1], "two indexes stored");
    for id in &ids {
        assert!(s.git_blob(GitBlobKind::Index, id).is_some());
    }
    let stash = points[1].state.stash.as_ref().expect("a stash list");
    assert!(s.git_blob(GitBlobKind::Stash, &stash.id).is_some());

    // The session's size (what the cleaner's age and size rules weigh) counts them.
    let dir = env.root.join("sessions").join(session_dir_name("s1"));
    assert!(dir.join("git/points.jsonl").is_file(), "{}", dir.display());
    let (git_bytes, git_files) = files_under(&dir.join("git"));
    assert!(
        git_files >= 5,
        "points, two indexes, a stash list, a journal: {git_files}"
    );
    let open =
        cap_std::fs::Dir::open_ambient_dir(&dir, cap_std::ambient_authority()).expect("open");
    let (all_bytes, _) = files_under(&dir);
    let activity = session_activity(&open).expect("activity");
    assert_eq!(activity.bytes, all_bytes);
    assert!(activity.bytes >= git_bytes && git_bytes > 0);

    // Cleared (as a removed session is), nothing of git stays behind.
    s.clear_session().expect("clear");
    assert!(!dir.join("git").exists(), "git/ went with the session");
    assert!(s.git_points().expect("points").is_empty());
    assert!(s.git_blob(GitBlobKind::Index, &ids[0]).is_none());
}

#[test]
fn the_newest_anchor_is_read_without_the_states() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(s.git_newest_anchor().expect("anchor"), None);
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    for anchor in [7, 12, 9] {
        let mut r = ScanRequest::new(ScanPhase::Boundary, anchor);
        r.threads = 1;
        s.scan(&r).expect("scan");
    }
    assert_eq!(s.git_newest_anchor().expect("anchor"), Some(12));
}
