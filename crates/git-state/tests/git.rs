//! The crate against real repositories made with the `git` command line in temp dirs.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use git_state::*;

use rewind_test_support::git::git;

fn repo() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("tmp");
    let d = t.path().join("ws");
    std::fs::create_dir(&d).expect("mkdir");
    git(&d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("a.txt"), "one\n").expect("write");
    git(&d, &["add", "."]);
    git(&d, &["commit", "-qm", "first"]);
    git(&d, &["tag", "v1"]);
    std::fs::write(d.join("a.txt"), "two\n").expect("write");
    std::fs::write(d.join("b.txt"), "b\n").expect("write");
    git(&d, &["add", "."]);
    git(&d, &["commit", "-qm", "second"]);
    (t, d)
}

/// The recorder: states read with their index bytes kept, and the work tree's files (the
/// file half's job, done here by hand).
#[derive(Default)]
struct Rec {
    points: Vec<Point>,
    stored: HashMap<String, Vec<u8>>,
    files: Vec<BTreeMap<String, Vec<u8>>>,
}

fn files(d: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(d).expect("ls") {
        let e = e.expect("entry");
        let n = e.file_name().to_string_lossy().into_owned();
        if n != ".git" && e.file_type().expect("type").is_file() {
            m.insert(n, std::fs::read(e.path()).expect("read"));
        }
    }
    m
}

fn put_files(d: &Path, want: &BTreeMap<String, Vec<u8>>) {
    for (n, _) in files(d) {
        if !want.contains_key(&n) {
            std::fs::remove_file(d.join(n)).expect("rm");
        }
    }
    for (n, b) in want {
        std::fs::write(d.join(n), b).expect("write");
    }
}

fn read(d: &Path) -> Read {
    match GitState::read(d).expect("read") {
        Found::State(r) => *r,
        other => panic!("no state: {other:?}"),
    }
}

impl Rec {
    fn point(&mut self, d: &Path, anchor: u64, phase: Phase) {
        let r = read(d);
        if let (Some(i), Some(b)) = (&r.state.index, r.index_bytes) {
            self.stored.insert(i.id.clone(), b);
        }
        if let (Some(l), Some(b)) = (&r.state.stash, r.stash_bytes) {
            self.stored.insert(l.id.clone(), b);
        }
        self.points.push(Point {
            anchor,
            phase,
            call_id: None,
            state: r.state,
        });
        self.files.push(files(d));
    }

    /// A rewind to message `seq`: the files back, then the git plan applied.
    fn rewind(&mut self, d: &Path, seq: u64, op: &str) -> (GitPlan, Applied) {
        let t = target_point(&self.points, seq).expect("a point");
        let moves = agent_moves(&self.points, t);
        let now = read(d);
        if let (Some(i), Some(b)) = (&now.state.index, now.index_bytes) {
            self.stored.insert(i.id.clone(), b);
        }
        if let (Some(l), Some(b)) = (&now.state.stash, now.stash_bytes) {
            self.stored.insert(l.id.clone(), b);
        }
        let target = self.points[t].state.clone();
        let stored = target
            .index
            .as_ref()
            .is_some_and(|i| self.stored.contains_key(&i.id));
        let plan = plan_git_restore(&now.state, &target, &moves, stored);
        assert!(plan.refusal.is_none(), "{:?}", plan.refusal);
        put_files(d, &self.files[t]);
        let h = Handles::find(d)
            .expect("find")
            .expect("repo")
            .expect("tracked");
        let st = &self.stored;
        let applied = apply(
            &h,
            &plan,
            op,
            &|id| st.get(id).cloned(),
            "dsh-rewind: rewind",
        )
        .expect("apply");
        (plan, applied)
    }
}

fn head(d: &Path) -> String {
    git(d, &["rev-parse", "--abbrev-ref", "HEAD"])
}

#[test]
fn reads_head_refs_index_and_describes() {
    let (_t, d) = repo();
    let r = read(&d);
    assert_eq!(r.state.layout, Layout::Plain);
    let main = git(&d, &["rev-parse", "main"]);
    assert_eq!(
        r.state.head,
        Head::Branch {
            name: "refs/heads/main".into(),
            oid: Some(main.clone())
        }
    );
    assert_eq!(
        r.state.refs.get("refs/tags/v1").map(String::as_str),
        Some(git(&d, &["rev-parse", "v1"]).as_str())
    );
    assert_eq!(r.state.describe_head(), format!("main @ {}", &main[..7]));
    let bytes = std::fs::read(d.join(".git/index")).expect("index");
    assert_eq!(
        r.state.index.as_ref().map(|i| i.id.clone()),
        Some(index_id(&bytes))
    );
    assert_eq!(r.state.operation, None);
    git(&d, &["checkout", "-q", "v1"]);
    let r = read(&d);
    assert!(matches!(r.state.head, Head::Detached { .. }));
    assert_eq!(r.state.describe_head(), "detached at v1");
    // A detached HEAD checked out from an annotated tag is named after it once the tag is
    // packed (git records the commit it peels to).
    git(&d, &["tag", "-a", "-m", "annotated", "v1a", "v1"]);
    git(&d, &["pack-refs", "--all"]);
    let r = read(&d);
    assert!(
        matches!(
            r.state.describe_head().as_str(),
            "detached at v1" | "detached at v1a"
        ),
        "{}",
        r.state.describe_head()
    );
    git(&d, &["tag", "-d", "v1"]);
    assert_eq!(read(&d).state.describe_head(), "detached at v1a");
    git(&d, &["tag", "v1", "v1a^{}"]);
    // Packed refs are read as loose ones.
    git(&d, &["branch", "loose-one"]);
    let r = read(&d);
    assert!(r.state.loose.contains_key("refs/heads/loose-one"));
    git(&d, &["pack-refs", "--all"]);
    let r2 = read(&d);
    assert_eq!(r2.state.refs, r.state.refs);
    let mut back = GitState::from_json(&r2.state.to_json()).expect("json");
    assert!(back.refs.is_empty(), "the full map is not serialized");
    assert!(back.loose.is_empty(), "every ref is packed");
    let packed = r2.packed_bytes.clone().expect("packed-refs");
    assert_eq!(
        r2.state.packed.as_deref(),
        Some(packed_id(&packed).as_str())
    );
    back.hydrate(Some(&packed));
    assert_eq!(back, r2.state);
}

#[test]
fn index_content_ignores_a_status_refresh() {
    let (_t, d) = repo();
    let before = std::fs::read(d.join(".git/index")).expect("index");
    Command::new("touch")
        .args(["-d", "2020-01-01", "a.txt"])
        .current_dir(&d)
        .status()
        .expect("touch");
    git(&d, &["update-index", "--really-refresh"]);
    let after = std::fs::read(d.join(".git/index")).expect("index");
    assert_ne!(before, after, "the refresh rewrote the stat data");
    assert_eq!(index_content(&before), index_content(&after));
    std::fs::write(d.join("a.txt"), "three\n").expect("edit");
    git(&d, &["add", "a.txt"]);
    let staged = std::fs::read(d.join(".git/index")).expect("index");
    assert_ne!(index_content(&before), index_content(&staged));
    // Version 4 (prefix-compressed paths) reads the same entries.
    git(&d, &["update-index", "--index-version", "4"]);
    let v4 = std::fs::read(d.join(".git/index")).expect("index");
    assert_eq!(index_content(&v4), index_content(&staged));
}

#[test]
fn rewind_of_a_branch_switch_commit_and_tag_checkout_then_undo() {
    let (_t, d) = repo();
    let main = git(&d, &["rev-parse", "main"]);
    let mut rec = Rec::default();
    // Turn one (message 10): a branch, an edit, a commit.
    rec.point(&d, 10, Phase::Boundary);
    git(&d, &["switch", "-q", "-c", "agent-work"]);
    std::fs::write(d.join("c.txt"), "agent\n").expect("write");
    git(&d, &["add", "c.txt"]);
    git(&d, &["commit", "-qm", "agent"]);
    rec.point(&d, 10, Phase::After);
    let agent = git(&d, &["rev-parse", "agent-work"]);
    // Turn two (message 20): a tag checked out.
    rec.point(&d, 20, Phase::Boundary);
    git(&d, &["checkout", "-q", "v1"]);
    rec.point(&d, 20, Phase::After);
    let after_two = read(&d).state;

    // Rewind to turn two: back on agent-work at its commit, clean.
    let (plan, applied) = rec.rewind(&d, 20, "op1");
    assert_eq!(
        plan.summary(),
        format!(
            "HEAD: detached at v1 → agent-work @ {}; index restored",
            &agent[..7]
        )
    );
    assert!(applied.head && applied.flagged.is_empty(), "{applied:?}");
    assert_eq!(git(&d, &["status", "--porcelain"]), "");
    assert_eq!(head(&d), "agent-work");
    assert!(
        applied
            .kept
            .contains(&"refs/dsh-rewind/op1/HEAD".to_owned())
            || plan.keep.is_empty()
    );

    // Rewind to turn one: main, the agent's branch removed, its commit kept.
    let (plan, applied) = rec.rewind(&d, 10, "op2");
    assert!(
        plan.summary().contains("branch agent-work removed"),
        "{}",
        plan.summary()
    );
    assert_eq!(git(&d, &["status", "--porcelain"]), "");
    assert_eq!(head(&d), "main");
    assert_eq!(git(&d, &["rev-parse", "HEAD"]), main);
    assert!(git(&d, &["branch", "--list", "agent-work"]).is_empty());
    assert_eq!(
        git(&d, &["rev-parse", "refs/dsh-rewind/op2/heads/agent-work"]),
        agent
    );
    assert!(
        applied
            .kept
            .iter()
            .any(|k| k == "refs/dsh-rewind/op2/heads/agent-work")
    );
    git(&d, &["fsck", "--no-progress"]);

    // Undo of the second rewind: the plan reversed brings agent-work and HEAD back.
    let h = Handles::find(&d)
        .expect("find")
        .expect("repo")
        .expect("tracked");
    let st = &rec.stored;
    let undo = plan.reversed();
    let a = apply(
        &h,
        &undo,
        "op2-undo",
        &|id| st.get(id).cloned(),
        "dsh-rewind: undo",
    )
    .expect("undo");
    assert!(a.flagged.is_empty(), "{a:?}");
    put_files(&d, &rec.files[2]);
    assert_eq!(head(&d), "agent-work");
    assert_eq!(git(&d, &["rev-parse", "agent-work"]), agent);
    assert_eq!(git(&d, &["status", "--porcelain"]), "");
    // Applying it again changes nothing and flags nothing (idempotent after a crash).
    let again = apply(
        &h,
        &undo,
        "op2-undo",
        &|id| st.get(id).cloned(),
        "dsh-rewind: undo",
    )
    .expect("again");
    assert!(
        !again.head && !again.index && again.flagged.is_empty(),
        "{again:?}"
    );
    let _ = after_two;
    // The reflog names the writer.
    assert!(git(&d, &["reflog", "-1", "--format=%gs", "HEAD"]).contains("dsh-rewind"));
}

/// `git stash list`, one `<commit> <subject>` line per entry.
fn stash_list(d: &Path) -> String {
    git(d, &["stash", "list", "--format=%H %gs"])
}

#[test]
fn a_stash_pushed_then_popped_comes_back_as_it_was_and_its_commits_are_kept() {
    let (_t, d) = repo();
    let mut rec = Rec::default();
    // By hand before the session: one stash entry.
    std::fs::write(d.join("a.txt"), "mine\n").expect("write");
    git(&d, &["stash", "push", "-q", "-m", "by hand"]);
    rec.point(&d, 10, Phase::Boundary);
    let at_ten = stash_list(&d);
    // Turn one: the agent stashes an edit.
    rec.point(&d, 10, Phase::Before);
    std::fs::write(d.join("b.txt"), "agent\n").expect("write");
    git(&d, &["stash", "push", "-q", "-m", "agent one"]);
    rec.point(&d, 10, Phase::After);
    let pushed = git(&d, &["rev-parse", "refs/stash"]);
    // Turn two: the agent pops it, and drops the entry made by hand.
    rec.point(&d, 20, Phase::Boundary);
    let at_twenty = stash_list(&d);
    rec.point(&d, 20, Phase::Before);
    git(&d, &["stash", "pop", "-q"]);
    git(&d, &["stash", "drop", "-q"]);
    rec.point(&d, 20, Phase::After);
    assert_eq!(stash_list(&d), "");
    git(&d, &["checkout", "-q", "--", "."]);

    // Rewind to turn two: both entries back, in order.
    let (plan, applied) = rec.rewind(&d, 20, "op1");
    assert!(
        plan.summary().contains("stash list: 0 entries → 2 entries"),
        "{}",
        plan.summary()
    );
    assert!(applied.stash && applied.flagged.is_empty(), "{applied:?}");
    assert!(
        applied
            .kept
            .contains(&format!("refs/dsh-rewind/op1/stash/{pushed}")),
        "{applied:?}"
    );
    assert_eq!(stash_list(&d), at_twenty);
    assert_eq!(git(&d, &["rev-parse", "refs/stash"]), pushed);
    git(&d, &["stash", "show", "-p", "stash@{1}"]);
    git(&d, &["fsck", "--no-progress"]);

    // Its undo: the list empty again, as the agent left it.
    let h = Handles::find(&d)
        .expect("find")
        .expect("repo")
        .expect("tracked");
    let st = rec.stored.clone();
    let a = apply(
        &h,
        &plan.reversed(),
        "op1-undo",
        &|id| st.get(id).cloned(),
        "dsh-rewind: undo",
    )
    .expect("undo");
    assert!(a.stash && a.flagged.is_empty(), "{a:?}");
    assert_eq!(stash_list(&d), "");
    git(&d, &["checkout", "-q", "--", "."]);

    // Rewind to turn one: the agent's entry leaves the list; its commit is kept.
    let (plan, applied) = rec.rewind(&d, 10, "op2");
    assert!(applied.stash, "{applied:?}");
    assert_eq!(stash_list(&d), at_ten);
    // The agent's entry, popped, stays reachable from the keep-ref the first rewind wrote.
    assert_eq!(
        git(
            &d,
            &["rev-parse", &format!("refs/dsh-rewind/op1/stash/{pushed}")]
        ),
        pushed
    );
    // Applying it again changes nothing (idempotent after a crash).
    let st = &rec.stored;
    let again = apply(
        &h,
        &plan,
        "op2",
        &|id| st.get(id).cloned(),
        "dsh-rewind: rewind",
    )
    .expect("again");
    assert!(again.stash && again.flagged.is_empty(), "{again:?}");
    assert_eq!(stash_list(&d), at_ten);

    // Its undo: the list empty again.
    let a = apply(
        &h,
        &plan.reversed(),
        "op2-undo",
        &|id| st.get(id).cloned(),
        "dsh-rewind: undo",
    )
    .expect("undo");
    assert!(a.stash && a.flagged.is_empty(), "{a:?}");
    assert_eq!(stash_list(&d), "");

    // A stash pushed by hand since: the undo of the undo leaves the list, flagged.
    std::fs::write(d.join("a.txt"), "later\n").expect("write");
    git(&d, &["stash", "push", "-q", "-m", "later by hand"]);
    let by_hand = stash_list(&d);
    let a = apply(
        &h,
        &plan,
        "op3",
        &|id| st.get(id).cloned(),
        "dsh-rewind: redo",
    )
    .expect("redo");
    assert!(!a.stash, "{a:?}");
    assert_eq!(
        a.flagged,
        vec![Flag::ChangedOutside {
            name: "refs/stash".into()
        }]
    );
    assert_eq!(stash_list(&d), by_hand);
    git(&d, &["fsck", "--no-progress"]);
}

#[test]
fn a_stash_pushed_by_hand_after_the_agents_is_flagged_and_left() {
    let (_t, d) = repo();
    let mut rec = Rec::default();
    rec.point(&d, 10, Phase::Boundary);
    rec.point(&d, 10, Phase::Before);
    std::fs::write(d.join("b.txt"), "agent\n").expect("write");
    git(&d, &["stash", "push", "-q"]);
    rec.point(&d, 10, Phase::After);
    std::fs::write(d.join("b.txt"), "mine\n").expect("write");
    git(&d, &["stash", "push", "-q", "-m", "mine"]);
    let before = stash_list(&d);
    let (plan, applied) = rec.rewind(&d, 10, "op1");
    assert!(plan.stash.is_none(), "{plan:?}");
    assert!(
        plan.summary()
            .contains("the stash list changed outside the agent"),
        "{}",
        plan.summary()
    );
    assert!(!applied.stash);
    assert_eq!(stash_list(&d), before);
}

#[test]
fn a_commit_made_by_hand_after_the_agents_keeps_its_branch() {
    let (_t, d) = repo();
    let mut rec = Rec::default();
    rec.point(&d, 10, Phase::Boundary);
    std::fs::write(d.join("c.txt"), "agent\n").expect("write");
    git(&d, &["add", "c.txt"]);
    git(&d, &["commit", "-qm", "agent on main"]);
    rec.point(&d, 10, Phase::After);
    // By hand, between turns.
    std::fs::write(d.join("d.txt"), "mine\n").expect("write");
    git(&d, &["add", "d.txt"]);
    git(&d, &["commit", "-qm", "mine"]);
    let mine = git(&d, &["rev-parse", "main"]);
    rec.point(&d, 20, Phase::Boundary);
    let t = target_point(&rec.points, 10).expect("point");
    let plan = plan_git_restore(
        &read(&d).state,
        &rec.points[t].state,
        &agent_moves(&rec.points, t),
        true,
    );
    assert_eq!(
        plan.flagged,
        vec![
            Flag::ChangedOutside {
                name: "refs/heads/main".into()
            },
            Flag::IndexLeft
        ]
    );
    assert!(plan.index.is_none(), "the index stays with HEAD");
    assert!(plan.refs.is_empty());
    assert!(
        plan.summary().contains("main changed outside the agent"),
        "{}",
        plan.summary()
    );
    let (_, applied) = rec.rewind(&d, 10, "op");
    assert!(applied.refs.is_empty());
    assert_eq!(
        git(&d, &["diff", "--cached", "--name-only"]),
        "",
        "the index still matches HEAD"
    );
    assert_eq!(git(&d, &["rev-parse", "main"]), mine);
}

#[test]
fn a_deleted_branch_comes_back_and_packed_refs_are_rewritten() {
    let (_t, d) = repo();
    git(&d, &["branch", "feature"]);
    git(&d, &["branch", "scratch", "v1"]);
    git(&d, &["pack-refs", "--all"]);
    let feature = git(&d, &["rev-parse", "feature"]);
    let mut rec = Rec::default();
    rec.point(&d, 10, Phase::Boundary);
    git(&d, &["branch", "-D", "feature"]);
    git(&d, &["branch", "made"]);
    git(&d, &["pack-refs", "--all"]);
    rec.point(&d, 10, Phase::After);
    let (plan, applied) = rec.rewind(&d, 10, "op");
    assert_eq!(applied.refs.len(), 2, "{plan:?}");
    assert_eq!(git(&d, &["rev-parse", "feature"]), feature);
    assert!(git(&d, &["branch", "--list", "made"]).is_empty());
    assert!(
        !std::fs::read_to_string(d.join(".git/packed-refs"))
            .expect("packed")
            .contains("refs/heads/made")
    );
    assert_eq!(
        git(&d, &["rev-parse", "scratch"]),
        git(&d, &["rev-parse", "v1"])
    );
    git(&d, &["fsck", "--no-progress"]);
}

#[test]
fn a_rebase_in_progress_is_refused() {
    let (_t, d) = repo();
    git(&d, &["switch", "-q", "-c", "side", "v1"]);
    std::fs::write(d.join("a.txt"), "side\n").expect("write");
    git(&d, &["commit", "-qam", "side"]);
    let mut rec = Rec::default();
    rec.point(&d, 10, Phase::Boundary);
    let st = Command::new("git")
        .args(["rebase", "main"])
        .current_dir(&d)
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git");
    assert!(!st.status.success(), "the rebase stops on a conflict");
    rec.point(&d, 10, Phase::After);
    let now = read(&d).state;
    assert_eq!(now.operation, Some(Operation::Rebase));
    let t = target_point(&rec.points, 10).expect("point");
    let plan = plan_git_restore(
        &now,
        &rec.points[t].state,
        &agent_moves(&rec.points, t),
        true,
    );
    let refusal = plan.refusal.expect("refused");
    assert!(
        refusal.message().contains("git rebase --abort"),
        "{}",
        refusal.message()
    );
}

#[test]
fn a_held_lock_fails_the_step_and_leaves_the_file() {
    let (_t, d) = repo();
    let mut rec = Rec::default();
    rec.point(&d, 10, Phase::Boundary);
    git(&d, &["switch", "-q", "-c", "x"]);
    rec.point(&d, 10, Phase::After);
    std::fs::write(d.join(".git/HEAD.lock"), "").expect("lock");
    let t = target_point(&rec.points, 10).expect("point");
    let plan = plan_git_restore(
        &read(&d).state,
        &rec.points[t].state,
        &agent_moves(&rec.points, t),
        true,
    );
    let h = Handles::find(&d)
        .expect("find")
        .expect("repo")
        .expect("tracked");
    let err = apply(&h, &plan, "op", &|_| None, "m").expect_err("locked");
    assert!(matches!(err, ApplyError::Locked { .. }), "{err}");
    assert_eq!(head(&d), "x");
    assert!(
        d.join(".git/HEAD.lock").exists(),
        "someone else's lock is never removed"
    );
}

#[test]
fn layouts_and_the_environment() {
    let (t, d) = repo();
    // A linked worktree: its own HEAD and index; the main worktree's branch is elsewhere.
    let wt = t.path().join("wt");
    git(
        &d,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "wtb",
            wt.to_str().expect("utf8"),
        ],
    );
    let r = read(&wt);
    assert_eq!(r.state.layout, Layout::LinkedWorktree);
    assert_eq!(r.state.head.branch(), Some("refs/heads/wtb"));
    assert_eq!(r.state.elsewhere, vec!["refs/heads/main".to_owned()]);
    assert_eq!(read(&d).state.elsewhere, vec!["refs/heads/wtb".to_owned()]);
    // A `.git` file (separate git dir).
    let sep = t.path().join("sep");
    let gd = t.path().join("sep.git");
    std::fs::create_dir(&sep).expect("mkdir");
    git(
        &sep,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            gd.to_str().expect("utf8"),
        ],
    );
    assert_eq!(read(&sep).state.layout, Layout::GitFile);
    // A subdirectory of a repository is not tracked; no repository is nothing.
    std::fs::create_dir(d.join("sub")).expect("mkdir");
    assert!(matches!(
        GitState::read(&d.join("sub")),
        Ok(Found::Untracked(Untracked::WorkspaceIsSubdirectory { .. }))
    ));
    let plain = tempfile::tempdir().expect("tmp");
    let found = discover(plain.path(), |_| None).expect("discover");
    assert!(
        found.is_none() || matches!(found, Some(Err(Untracked::WorkspaceIsSubdirectory { .. })))
    );
    // GIT_DIR set: git would use another repository.
    let env = discover(&d, |k| (k == "GIT_DIR").then(|| "/elsewhere".into())).expect("discover");
    assert_eq!(
        env,
        Some(Err(Untracked::GitEnv {
            variable: "GIT_DIR".into()
        }))
    );
    // Reftable is not read.
    std::fs::write(
        d.join(".git/config"),
        format!(
            "{}\n[extensions]\n\trefStorage = reftable\n",
            std::fs::read_to_string(d.join(".git/config")).expect("cfg")
        ),
    )
    .expect("cfg");
    assert!(matches!(
        discover(&d, |_| None),
        Ok(Some(Err(Untracked::Reftable)))
    ));
}
