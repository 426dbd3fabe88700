//! The git half of a rewind, its undo and redo, through the engine on real repositories: a
//! branch made and committed to, a tag checked out, rewinds to each turn, the undo, a commit
//! made by hand, a rebase left in progress.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rewind_engine::{
    ChainLink, Choices, Engine, EngineOptions, EngineSession, ErrorCode, GitReport, RestoreRequest,
    Restored, Start, WorkspaceKey,
};
use snapshot_store::{ScanPhase, ScanRequest};

use rewind_test_support::git::git;

struct Fixture {
    _home: tempfile::TempDir,
    _tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    engine: Arc<Engine>,
}

impl Fixture {
    fn new() -> Self {
        let home = tempfile::tempdir().expect("home");
        let tmp = tempfile::tempdir().expect("ws");
        let ws = tmp.path().join("repo");
        std::fs::create_dir(&ws).expect("mkdir");
        git(&ws, &["init", "-q", "-b", "main"]);
        for i in 0..20 {
            std::fs::write(ws.join(format!("f{i}.txt")), format!("v1 {i}\n")).expect("write");
        }
        git(&ws, &["add", "."]);
        git(&ws, &["commit", "-qm", "one"]);
        git(&ws, &["tag", "v1"]);
        for i in 0..20 {
            std::fs::write(ws.join(format!("f{i}.txt")), format!("v2 {i}\n")).expect("write");
        }
        std::fs::write(ws.join("new.txt"), "v2\n").expect("write");
        git(&ws, &["commit", "-qam", "two"]);
        git(&ws, &["add", "new.txt"]);
        git(&ws, &["commit", "-qm", "three"]);
        let engine = Engine::open(home.path(), EngineOptions::default());
        Fixture {
            _home: home,
            _tmp: tmp,
            ws,
            engine,
        }
    }

    fn session(&self) -> EngineSession {
        self.engine.session(
            "s1",
            Some(&self.ws),
            WorkspaceKey::for_workspace("w").expect("key"),
        )
    }

    fn scan(&self, es: &EngineSession, phase: ScanPhase, anchor: u64, call: Option<&str>) {
        let mut r = ScanRequest::new(phase, anchor);
        r.call_id = call.map(str::to_owned);
        r.threads = 1;
        es.files_of("s1").expect("files").scan(&r).expect("scan");
    }

    /// A call of the agent at message `anchor`: before-scan, `run`, after-scan.
    fn call(&self, es: &EngineSession, anchor: u64, id: &str, run: impl FnOnce(&Path)) {
        self.scan(es, ScanPhase::Before, anchor, Some(id));
        run(&self.ws);
        self.scan(es, ScanPhase::After, anchor, Some(id));
    }

    fn rewind(
        &self,
        es: &EngineSession,
        op: &str,
        target: u64,
        keep_git: bool,
    ) -> Result<Restored, rewind_engine::EngineError> {
        self.rewind_with(es, op, target, keep_git, Vec::new())
    }

    /// [`Fixture::rewind`] of a session whose fork chain is `ancestors`.
    fn rewind_with(
        &self,
        es: &EngineSession,
        op: &str,
        target: u64,
        keep_git: bool,
        ancestors: Vec<ChainLink>,
    ) -> Result<Restored, rewind_engine::EngineError> {
        let req = RestoreRequest {
            target_seq: target,
            op_id: op.into(),
            keep_git,
            ancestors,
            ..RestoreRequest::default()
        };
        es.prepare_restore(&req)?;
        es.begin(
            &Start {
                op_id: op.into(),
                target_seq: target,
                marker_id: Some(format!("m-{op}")),
                ..Start::default()
            },
            100,
        )?;
        let r = es.restore_files(&req)?;
        assert!(r.outcome.failed.is_empty(), "{:?}", r.outcome.failed);
        Ok(r)
    }

    fn status(&self) -> String {
        git(&self.ws, &["status", "--porcelain"])
    }

    fn head(&self) -> String {
        git(&self.ws, &["rev-parse", "--abbrev-ref", "HEAD"])
    }
}

/// Turn one (message 10): `git switch -c agent-work`, an edit, a commit. Turn two (message
/// 20): `git checkout v1`.
fn two_turns(f: &Fixture, es: &EngineSession) -> String {
    f.scan(es, ScanPhase::Boundary, 1, None);
    f.scan(es, ScanPhase::Boundary, 10, None);
    f.call(es, 10, "c1", |d| {
        git(d, &["switch", "-q", "-c", "agent-work"]);
        std::fs::write(d.join("agent.txt"), "agent\n").expect("write");
        git(d, &["add", "agent.txt"]);
        git(d, &["commit", "-qm", "agent"]);
    });
    f.scan(es, ScanPhase::Boundary, 20, None);
    f.call(es, 20, "c2", |d| {
        git(d, &["checkout", "-q", "v1"]);
    });
    git(&f.ws, &["rev-parse", "agent-work"])
}

#[test]
fn rewinds_to_each_turn_bring_head_index_and_branches_back_and_undo_returns_them() {
    let f = Fixture::new();
    let es = f.session();
    let main = git(&f.ws, &["rev-parse", "main"]);
    let agent = two_turns(&f, &es);
    assert_eq!(f.head(), "HEAD");

    // The preview says what happens to git.
    let p = es.git_preview(20, false, &[]);
    assert_eq!(
        p.summary,
        format!(
            "HEAD: detached at v1 → agent-work @ {}; index restored",
            &agent[..7]
        )
    );
    assert!(p.changes && p.refusal.is_none());
    assert!(es.git_preview(20, true, &[]).kept);

    f.rewind(&es, "op-2", 20, false)
        .expect("rewind to turn two");
    assert_eq!(f.status(), "");
    assert_eq!(f.head(), "agent-work");
    assert_eq!(git(&f.ws, &["rev-parse", "HEAD"]), agent);
    let r = es.git_report("s1", "op-2").expect("a git journal");
    assert!(r.error.is_none() && r.flagged.is_empty(), "{r:?}");

    f.rewind(&es, "op-1", 10, false)
        .expect("rewind to turn one");
    assert_eq!(f.status(), "");
    assert_eq!(f.head(), "main");
    assert_eq!(git(&f.ws, &["rev-parse", "HEAD"]), main);
    // The agent's commit stays reachable from a ref of the plugin's own.
    assert_eq!(
        git(
            &f.ws,
            &["rev-parse", "refs/dsh-rewind/op-1/heads/agent-work"]
        ),
        agent
    );
    assert!(git(&f.ws, &["branch", "--list", "agent-work"]).is_empty());

    // Undo of the rewind to turn one: agent-work, its commit and its files are back.
    let check = es
        .undo_check("op-1", &Choices::default())
        .expect("undo check");
    es.undo_start("op-1", None).expect("undo start");
    es.undo_files(&check, &Choices::default()).expect("undo");
    assert_eq!(f.head(), "agent-work");
    assert_eq!(git(&f.ws, &["rev-parse", "HEAD"]), agent);
    assert_eq!(f.status(), "");
    // Undo of the rewind to turn two: the state after turn two (detached at v1).
    let check = es
        .undo_check("op-2", &Choices::default())
        .expect("undo check");
    es.undo_start("op-2", None).expect("undo start");
    es.undo_files(&check, &Choices::default()).expect("undo");
    assert_eq!(f.head(), "HEAD");
    assert_eq!(
        git(&f.ws, &["rev-parse", "HEAD"]),
        git(&f.ws, &["rev-parse", "v1"])
    );
    assert_eq!(f.status(), "");
    git(&f.ws, &["fsck", "--no-progress"]);
}

#[test]
fn keep_git_restores_the_files_alone() {
    let f = Fixture::new();
    let es = f.session();
    two_turns(&f, &es);
    let r = f.rewind(&es, "op-k", 20, true).expect("rewind");
    assert_eq!(
        r.git,
        Some(GitReport::kept_by_choice()),
        "the report says git was kept"
    );
    assert_eq!(f.head(), "HEAD", "HEAD left detached");
    assert!(es.git_report("s1", "op-k").is_none());
    assert!(
        !f.status().is_empty(),
        "the files are back, git is not: git sees them changed"
    );
}

/// A fork's rewind to a message from before the fork leaves git as it is (the git states there
/// are its parent's): the engine's preview and the restore's report say so, for the host and the
/// CLI alike. A rewind to one of the fork's own messages restores git from its own states.
#[test]
fn a_fork_leaves_git_before_the_fork_and_restores_it_after() {
    let f = Fixture::new();
    let es = f.session();
    two_turns(&f, &es);
    // The fork's parent is a session with nothing stored: the chain adds no record. Forked after
    // message 25, message 20 is from before the fork.
    let before = vec![ChainLink {
        session_id: "parent".into(),
        max_anchor: 25,
    }];
    assert!(
        es.git_preview(20, false, &[]).changes,
        "without the chain git would change"
    );
    let p = es.git_preview(20, false, &before);
    assert_eq!(p, GitReport::before_fork());
    assert!(
        !p.changes && p.summary.contains("from before this session was forked"),
        "{p:?}"
    );
    assert_eq!(es.git_preview(20, true, &before), GitReport::before_fork());
    let r = f
        .rewind_with(&es, "op-f", 20, false, before)
        .expect("rewind");
    assert_eq!(r.git, Some(GitReport::before_fork()));
    assert_eq!(f.head(), "HEAD", "HEAD left detached");
    assert!(es.git_report("s1", "op-f").is_none(), "no git journal");
    assert!(!f.status().is_empty(), "the files came back, git did not");

    // Forked after message 5: messages 10 and 20 are the fork's own, and git comes back.
    let after = vec![ChainLink {
        session_id: "parent".into(),
        max_anchor: 5,
    }];
    assert!(es.git_preview(10, false, &after).changes);
    let r = f
        .rewind_with(&es, "op-a", 10, false, after)
        .expect("rewind");
    let g = r.git.expect("a git report");
    assert!(g.changes && g.error.is_none(), "{g:?}");
    assert_eq!(f.head(), "main");
    assert_eq!(f.status(), "", "files and git agree");
}

/// Stash list at message 10: one entry, made by hand. The agent drops it in turn 10 and `git gc`
/// prunes its commit (`prune`; without it the entry is still there when the rewind runs).
fn dropped_stash(prune: bool) -> (Fixture, EngineSession, String) {
    let f = Fixture::new();
    let es = f.session();
    f.scan(&es, ScanPhase::Boundary, 1, None);
    std::fs::write(f.ws.join("f0.txt"), "stashed by hand\n").expect("write");
    git(&f.ws, &["stash", "push", "-q"]);
    let entry = git(&f.ws, &["rev-parse", "stash@{0}"]);
    f.scan(&es, ScanPhase::Boundary, 10, None);
    f.call(&es, 10, "c1", |d| {
        git(d, &["stash", "drop", "-q"]);
    });
    if prune {
        git(
            &f.ws,
            &["reflog", "expire", "--expire-unreachable=now", "--all"],
        );
        git(&f.ws, &["gc", "-q", "--prune=now"]);
        let gone = Command::new("git")
            .args(["cat-file", "-e", entry.trim()])
            .current_dir(&f.ws)
            .status()
            .expect("git cat-file");
        assert!(!gone.success(), "the dropped entry's commit is pruned");
    }
    (f, es, entry)
}

#[test]
fn a_stash_entry_whose_commit_was_pruned_leaves_the_stash_list_and_says_why() {
    // Not pruned: the rewind puts the entry back.
    let (f, es, entry) = dropped_stash(false);
    let r = f.rewind(&es, "op-s", 10, false).expect("rewind");
    let g = r.git.expect("a git report");
    assert!(g.flagged.is_empty() && g.error.is_none(), "{g:?}");
    assert_eq!(git(&f.ws, &["rev-parse", "stash@{0}"]), entry);

    // Pruned: the stash list is left empty rather than naming a commit git no longer has, and
    // the preview and the report say why.
    let (f, es, _) = dropped_stash(true);
    let p = es.git_preview(10, false, &[]);
    assert!(
        p.flagged
            .iter()
            .any(|m| m.contains("1 commit git has since pruned")),
        "{p:?}"
    );
    let r = f.rewind(&es, "op-p", 10, false).expect("rewind");
    let g = r.git.expect("a git report");
    assert!(g.error.is_none(), "{g:?}");
    assert!(
        g.flagged
            .iter()
            .any(|m| m.contains("1 commit git has since pruned")),
        "{g:?}"
    );
    assert_eq!(
        git(&f.ws, &["stash", "list"]),
        "",
        "the stash list is left as it was"
    );
    assert!(!f.ws.join(".git/logs/refs/stash").exists());
}

#[test]
fn a_commit_by_hand_after_the_agents_keeps_its_branch_and_is_flagged() {
    let f = Fixture::new();
    let es = f.session();
    f.scan(&es, ScanPhase::Boundary, 10, None);
    f.call(&es, 10, "c1", |d| {
        std::fs::write(d.join("agent.txt"), "agent\n").expect("write");
        git(d, &["add", "agent.txt"]);
        git(d, &["commit", "-qm", "agent"]);
    });
    // By hand between turns.
    std::fs::write(f.ws.join("mine.txt"), "mine\n").expect("write");
    git(&f.ws, &["add", "mine.txt"]);
    git(&f.ws, &["commit", "-qm", "mine"]);
    let mine = git(&f.ws, &["rev-parse", "main"]);
    f.scan(&es, ScanPhase::Boundary, 20, None);
    let p = es.git_preview(10, false, &[]);
    assert!(
        p.flagged
            .iter()
            .any(|l| l.contains("main changed outside the agent")),
        "{p:?}"
    );
    f.rewind(&es, "op-1", 10, false).expect("rewind");
    assert_eq!(
        git(&f.ws, &["rev-parse", "main"]),
        mine,
        "the hand-made commit stays on main"
    );
}

#[test]
fn a_rebase_in_progress_refuses_the_rewind_with_nothing_changed() {
    let f = Fixture::new();
    let es = f.session();
    f.scan(&es, ScanPhase::Boundary, 10, None);
    f.call(&es, 10, "c1", |d| {
        git(d, &["switch", "-q", "-c", "side", "v1"]);
        std::fs::write(d.join("f1.txt"), "side\n").expect("write");
        git(d, &["commit", "-qam", "side"]);
        let st = Command::new("git")
            .args(["rebase", "main"])
            .current_dir(d)
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git");
        assert!(!st.status.success(), "the rebase stops on a conflict");
    });
    let before = std::fs::read(f.ws.join("f1.txt")).expect("read");
    let e = f.rewind(&es, "op-1", 10, false).expect_err("refused");
    assert_eq!(e.code, ErrorCode::GitInProgress);
    assert!(e.message.contains("git rebase --abort"), "{}", e.message);
    assert_eq!(
        std::fs::read(f.ws.join("f1.txt")).expect("read"),
        before,
        "files untouched"
    );
    assert!(es.entries().expect("entries").is_empty(), "no entry began");
}

/// A rewind whose process stops at a seam of the git step: the seam panics there (what is on
/// disk is what a kill leaves: every write before it is synced), and a new engine over the same
/// home settles it.
mod crash {
    use super::*;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    fn engine_crashing_at(home: &Path, at: &'static str) -> Arc<Engine> {
        let o = EngineOptions {
            crash: Some(Arc::new(move |step: &'static str| {
                if step == at {
                    panic!("crash at {step}");
                }
            })),
            ..EngineOptions::default()
        };
        Engine::open(home, o)
    }

    fn fixture_at(at: &'static str) -> (Fixture, EngineSession, String) {
        let mut f = Fixture::new();
        let home = f._home.path().to_path_buf();
        f.engine = engine_crashing_at(&home, at);
        let es = f.session();
        let agent = two_turns(&f, &es);
        (f, es, agent)
    }

    fn restart(f: &mut Fixture) -> EngineSession {
        f.engine = Engine::open(f._home.path(), EngineOptions::default());
        f.session()
    }

    #[test]
    fn killed_before_or_after_the_git_step_the_reconcile_finishes_it() {
        for at in ["rewind:git-planned", "rewind:git-done"] {
            let (mut f, es, agent) = fixture_at(at);
            let r = catch_unwind(AssertUnwindSafe(|| f.rewind(&es, "op-c", 20, false)));
            assert!(r.is_err(), "{at}: the seam was reached");
            if at == "rewind:git-planned" {
                assert_eq!(f.head(), "HEAD", "{at}: the git step had not begun");
            }
            let es = restart(&mut f);
            let entry = es.entry("op-c").expect("entry");
            let (j, _) = es.judge(&entry, true).expect("judge");
            assert!(
                matches!(
                    j,
                    rewind_engine::Judgement::Settled(rewind_engine::Outcome::Done)
                ),
                "{at}: {j:?}"
            );
            assert_eq!(f.head(), "agent-work", "{at}");
            assert_eq!(git(&f.ws, &["rev-parse", "HEAD"]), agent, "{at}");
            assert_eq!(f.status(), "", "{at}");
        }
    }

    #[test]
    fn an_undo_killed_in_its_git_step_is_finished_after_a_restart() {
        let (mut f, es, agent) = fixture_at("undo:git-planned");
        f.rewind(&es, "op-1", 10, false).expect("rewind");
        assert_eq!(f.head(), "main");
        let check = es.undo_check("op-1", &Choices::default()).expect("check");
        es.undo_start("op-1", None).expect("start");
        let r = catch_unwind(AssertUnwindSafe(|| {
            es.undo_files(&check, &Choices::default())
        }));
        assert!(r.is_err(), "the seam was reached");
        assert_eq!(f.head(), "main", "the git step of the undo had not begun");
        let es = restart(&mut f);
        let entry = es.entry("op-1").expect("entry");
        es.undo_finish_interrupted(&entry).expect("finish");
        assert_eq!(f.head(), "HEAD", "the state after turn two");
        assert_eq!(git(&f.ws, &["rev-parse", "agent-work"]), agent);
        assert_eq!(f.status(), "");
    }
}
