//! Before-states from git: in a workspace that is a git repository, files identical to their
//! index blob are not copied at the baseline; a shell change of one comes back from the
//! repository's object store (loose or packed with deltas), and a blob the repository lost
//! refuses the rewind naming the file. Real repositories made with the `git` CLI.

use std::path::Path;

use sha2::{Digest, Sha256};
use snapshot_store::{Problem, RestoreError, ScanPhase, ScanRequest, Session, Store};

use crate::common::Env;

use rewind_test_support::git::git_out as git;

fn req(phase: ScanPhase, anchor: u64, call: Option<&str>) -> ScanRequest {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_owned);
    r
}

/// A shell-like tool call: scan before, change the workspace, scan after.
fn call(s: &Session, anchor: u64, id: &str, f: impl FnOnce()) {
    s.scan(&req(ScanPhase::Before, anchor, Some(id)))
        .expect("scan before");
    f();
    let r = s
        .scan(&req(ScanPhase::After, anchor, Some(id)))
        .expect("scan after");
    assert!(r.not_covered.is_empty(), "{:?}", r.not_covered);
}

/// Bytes of every file under `dir` (recursively), leaving out `skip` directories by name.
fn bytes_under(dir: &Path, skip: &[&str]) -> u64 {
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        if skip.iter().any(|s| e.file_name() == *s) {
            continue;
        }
        let m = e.metadata().expect("meta");
        total += if m.is_dir() {
            bytes_under(&e.path(), skip)
        } else {
            m.len()
        };
    }
    total
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// The store holds this content loose, in a pack or in a session's log (blob files only:
/// the stores here keep nothing in logs).
fn stored_loose(env: &Env, content: &[u8]) -> bool {
    env.root.join("blobs").join(sha(content)).exists()
}

/// Deterministic text of about `n` bytes.
fn text(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(n + 64);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(format!("let v{} = {};\n", x % 1000, x % 997).as_bytes());
    }
    out
}

/// A committed, clean repository of `n` files of about 8 KiB in `env.cwd`.
fn clean_repo(env: &Env, n: usize) {
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    for i in 0..n {
        env.write(format!("src/m{}/f{i}.rs", i % 10), &text(i as u64, 8192));
    }
    git(&env.cwd, &["add", "-A"]);
    git(&env.cwd, &["commit", "-q", "-m", "init"]);
}

fn store(env: &Env) -> Store {
    env.store_with_blob_files()
}

#[test]
fn a_clean_checkout_copies_nothing_and_a_shell_edit_of_a_tracked_file_comes_back() {
    let env = Env::new();
    clean_repo(&env, 300);
    let work_tree = bytes_under(&env.cwd, &[".git"]);
    let store = store(&env);
    let s = env.session(&store);
    let first = s
        .scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    assert!(first.baseline && first.baseline_complete, "{first:?}");
    assert_eq!(first.files, 300);
    let content =
        bytes_under(&env.root.join("blobs"), &[]) + bytes_under(&env.root.join("packs"), &[]);
    let whole = bytes_under(&env.root, &[]);
    assert!(
        content * 100 <= work_tree,
        "content {content} of a {work_tree}-byte clean tree"
    );
    assert!(whole * 20 <= work_tree, "store {whole} of {work_tree}");
    assert!(!stored_loose(&env, &text(3, 8192)));

    let before = crate::common::snapshot_dir(&env.cwd);
    let edited = text(999, 100);
    call(&s, 10, "bash-1", || {
        // `sed -i`-like: a new file renamed over the old one; a tracked file removed; an
        // untracked file created.
        let p = env.p("src/m3/f3.rs");
        std::fs::write(p.with_extension("tmp"), &edited).unwrap();
        std::fs::rename(p.with_extension("tmp"), &p).unwrap();
        env.remove("src/m4/f4.rs");
        env.write("notes.txt", b"new");
    });
    // The before-states are references to the git blobs, not copies.
    assert!(!stored_loose(&env, &text(3, 8192)));
    assert!(env.root.join("gitrefs").join(sha(&text(3, 8192))).exists());
    let plan = s.plan_restore(10).expect("plan");
    let out = s.restore(&plan, "op-1").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    let mut after = crate::common::snapshot_dir(&env.cwd);
    after.retain(|k, _| !k.starts_with(b".git/"));
    let mut want = before;
    want.retain(|k, _| !k.starts_with(b".git/"));
    assert_eq!(after, want, "byte-exact");
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn restores_read_packed_objects_with_deltas_after_git_gc() {
    let env = Env::new();
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    // One file of many revisions (so the pack stores deltas), committed each time.
    let mut body = text(1, 20_000);
    for rev in 0..25 {
        body.extend_from_slice(format!("// revision {rev}\n").as_bytes());
        env.write("lib/grow.rs", &body);
        env.write("other.txt", format!("other {rev}\n").as_bytes());
        git(&env.cwd, &["add", "-A"]);
        git(&env.cwd, &["commit", "-q", "-m", &format!("r{rev}")]);
    }
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    assert!(!stored_loose(&env, &body));
    call(&s, 10, "bash-1", || {
        env.write("lib/grow.rs", b"truncated by a shell");
        env.write("other.txt", b"changed too\n");
    });
    // Everything packed, loose objects pruned: the blobs are deltas in a pack now.
    git(&env.cwd, &["gc", "-q", "--aggressive", "--prune=now"]);
    let loose = std::fs::read_dir(env.cwd.join(".git/objects"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().len() == 2)
        .count();
    assert_eq!(loose, 0);
    let plan = s.plan_restore(10).expect("plan");
    let out = s.restore(&plan, "op-1").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_eq!(env.read("lib/grow.rs").unwrap(), body);
    assert_eq!(env.read("other.txt").unwrap(), b"other 24\n");
}

#[test]
fn a_blob_the_repository_lost_refuses_the_rewind_naming_the_file() {
    let env = Env::new();
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    env.write("keep.txt", b"kept\n");
    env.write(
        "f.txt",
        b"first version, only in the commit about to be amended\n",
    );
    git(&env.cwd, &["add", "-A"]);
    git(&env.cwd, &["commit", "-q", "-m", "one"]);
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    call(&s, 10, "bash-1", || {
        env.write("f.txt", b"second version\n");
        env.write("keep.txt", b"changed by the call\n");
    });
    // The user amends the commit and prunes: the first version's blob is gone.
    git(&env.cwd, &["add", "f.txt"]);
    git(&env.cwd, &["commit", "-q", "--amend", "-m", "one"]);
    git(&env.cwd, &["reflog", "expire", "--expire=now", "--all"]);
    git(&env.cwd, &["gc", "-q", "--prune=now"]);
    // The plan (and so the preview) is made; the restore refuses before anything changes.
    let plan = s.plan_restore(10).expect("plan");
    let err = s.restore(&plan, "op-1").expect_err("refused");
    match &err {
        RestoreError::GitObjectGone { path, oid, .. } => {
            assert_eq!(path, "f.txt");
            assert_eq!(oid.len(), 40);
        }
        e => panic!("{e:?}"),
    }
    assert!(err.to_string().contains("f.txt"), "{err}");
    // Nothing was changed, and no journal was started: the op id is still free.
    assert_eq!(env.read("f.txt").unwrap(), b"second version\n");
    assert!(s.restore_status("op-1").is_err());
    // With that file left out, the rest of the rewind runs.
    let mut plan = s.plan_restore(10).expect("plan");
    plan.actions.retain(|a| a.path.display() != "f.txt");
    assert!(s.restore(&plan, "op-2").expect("restore").failed.is_empty());
    assert_eq!(env.read("keep.txt").unwrap(), b"kept\n");
    assert_eq!(env.read("f.txt").unwrap(), b"second version\n");
    // `verify` names the reference and the object.
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| matches!(p, Problem::MissingGitObject { .. })),
        "{:?}",
        report.problems
    );
}

#[test]
fn modified_untracked_and_touched_files_at_the_baseline() {
    let env = Env::new();
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    env.write("clean.txt", b"clean content\n");
    env.write("dirty.txt", b"committed content\n");
    env.write("touched.txt", b"same content, new times\n");
    git(&env.cwd, &["add", "-A"]);
    git(&env.cwd, &["commit", "-q", "-m", "one"]);
    // Modified (not staged), untracked, and rewritten with the same bytes (its stat data
    // no longer matches the index: hashed, found to be the blob).
    env.write("dirty.txt", b"edited, not committed\n");
    env.write("untracked.txt", b"never added\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    env.write("touched.txt", b"same content, new times\n");
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    assert!(stored_loose(&env, b"edited, not committed\n"));
    assert!(stored_loose(&env, b"never added\n"));
    assert!(!stored_loose(&env, b"clean content\n"));
    assert!(!stored_loose(&env, b"same content, new times\n"));
    call(&s, 10, "bash-1", || {
        for f in ["clean.txt", "dirty.txt", "touched.txt", "untracked.txt"] {
            env.write(f, b"overwritten\n");
        }
    });
    let plan = s.plan_restore(10).expect("plan");
    let out = s.restore(&plan, "op-1").expect("restore");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_eq!(env.read("clean.txt").unwrap(), b"clean content\n");
    assert_eq!(env.read("dirty.txt").unwrap(), b"edited, not committed\n");
    assert_eq!(
        env.read("touched.txt").unwrap(),
        b"same content, new times\n"
    );
    assert_eq!(env.read("untracked.txt").unwrap(), b"never added\n");
}

#[test]
fn an_index_of_version_4_is_read() {
    let env = Env::new();
    clean_repo(&env, 40);
    git(&env.cwd, &["update-index", "--index-version", "4"]);
    assert_eq!(
        &std::fs::read(env.cwd.join(".git/index")).unwrap()[4..8],
        &[0, 0, 0, 4]
    );
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    for i in 0..40 {
        assert!(!stored_loose(&env, &text(i, 8192)), "file {i} copied");
    }
    call(&s, 10, "bash-1", || env.write("src/m7/f17.rs", b"x"));
    let plan = s.plan_restore(10).expect("plan");
    assert!(s.restore(&plan, "op-1").expect("restore").failed.is_empty());
    assert_eq!(env.read("src/m7/f17.rs").unwrap(), text(17, 8192));
}

#[test]
fn without_a_repository_everything_is_copied() {
    // No repository: the baseline copies as before.
    let env = Env::new();
    env.write("a.txt", b"plain workspace\n");
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    assert!(stored_loose(&env, b"plain workspace\n"));
    assert!(!env.root.join("gitrefs").exists());
}

#[test]
fn garbage_collection_drops_the_references_no_record_names_and_keeps_the_rest() {
    let env = Env::new();
    clean_repo(&env, 5);
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    call(&s, 10, "bash-1", || env.write("src/m1/f1.rs", b"edited"));
    let r = env.root.join("gitrefs").join(sha(&text(1, 8192)));
    assert!(r.exists());
    store.collect_garbage().expect("gc");
    assert!(r.exists(), "a record names it");
    s.clear_session().expect("clear");
    store.collect_garbage().expect("gc");
    assert!(!r.exists(), "no record names it any more");
    // The repository is untouched.
    git(&env.cwd, &["fsck", "--no-progress"]);
}

#[test]
fn a_file_git_converts_is_copied_and_comes_back_as_it_was_on_disk() {
    // `eol=crlf`: the work-tree file has CRLF line endings, its blob LF. Its stat data match
    // the index, but the blob is not its content: it is hashed, found to differ, and copied.
    let env = Env::new();
    git(&env.cwd, &["init", "-q", "-b", "main"]);
    env.write(".gitattributes", b"*.txt text eol=crlf\n");
    env.write("a.txt", b"one\ntwo\n");
    env.write("b.rs", b"fn main() {}\n");
    git(&env.cwd, &["add", "-A"]);
    git(&env.cwd, &["commit", "-q", "-m", "one"]);
    env.remove("a.txt");
    git(&env.cwd, &["checkout", "--", "a.txt"]);
    assert_eq!(env.read("a.txt").unwrap(), b"one\r\ntwo\r\n");
    // The index written again after the file's clock tick: its entry is not racily clean,
    // and its stat data match the file.
    std::thread::sleep(std::time::Duration::from_millis(30));
    git(&env.cwd, &["update-index", "--really-refresh"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    assert!(
        stored_loose(&env, b"one\r\ntwo\r\n"),
        "the converted file is copied"
    );
    assert!(
        !stored_loose(&env, b"fn main() {}\n"),
        "b.rs is its blob: hashed, not copied"
    );
    call(&s, 10, "bash-1", || {
        env.write("a.txt", b"changed\n");
        env.write("b.rs", b"changed\n");
    });
    let plan = s.plan_restore(10).expect("plan");
    assert!(s.restore(&plan, "op-1").expect("restore").failed.is_empty());
    assert_eq!(env.read("a.txt").unwrap(), b"one\r\ntwo\r\n");
    assert_eq!(env.read("b.rs").unwrap(), b"fn main() {}\n");
}

#[test]
fn a_file_changed_just_before_the_baseline_stays_its_blob_when_read_again() {
    // Files written just before the baseline are read again by the next scan (their
    // timestamps may hide a same-size rewrite): one still its blob is not copied then
    // either, and a shell edit of it names the blob by reference.
    let env = Env::new();
    clean_repo(&env, 3);
    env.write("src/m1/f1.rs", &text(1, 8192));
    let store = store(&env);
    let s = env.session(&store);
    s.scan(&req(ScanPhase::Boundary, 10, None))
        .expect("baseline");
    call(&s, 10, "bash-1", || env.write("src/m1/f1.rs", b"edited"));
    for i in 0..3 {
        assert!(!stored_loose(&env, &text(i, 8192)), "file {i} copied");
    }
    assert!(env.root.join("gitrefs").join(sha(&text(1, 8192))).exists());
    let plan = s.plan_restore(10).expect("plan");
    assert!(s.restore(&plan, "op-1").expect("restore").failed.is_empty());
    assert_eq!(env.read("src/m1/f1.rs").unwrap(), text(1, 8192));
}
