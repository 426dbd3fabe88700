//! `dsh-rewind preview` / `restore` / `undo` on a workspace that is a git repository: the
//! repository comes back with the files (HEAD, the index, the agent's branch), `--keep-git`
//! leaves it, the undo returns it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use snapshot_store::{ScanPhase, Store, StoreOptions};

use rewind_test_support::git::git;

mod common;
use common::{run, scan};

/// A home whose session `s1` has two messages: @0 made branch `agent-work` with a commit,
/// @1 checked out tag `v1`.
fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    for i in 0..10 {
        std::fs::write(ws.join(format!("f{i}.txt")), format!("v1 {i}\n")).unwrap();
    }
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "one"]);
    git(&ws, &["tag", "v1"]);
    for i in 0..10 {
        std::fs::write(ws.join(format!("f{i}.txt")), format!("v2 {i}\n")).unwrap();
    }
    git(&ws, &["commit", "-qam", "two"]);
    let store = Store::open(&home.join("rewind-snapshots"), StoreOptions::default()).unwrap();
    let s = store.session("s1", &ws).unwrap();
    scan(&s, ScanPhase::Boundary, 0, None);
    scan(&s, ScanPhase::Before, 0, Some("c1"));
    git(&ws, &["switch", "-q", "-c", "agent-work"]);
    std::fs::write(ws.join("agent.txt"), "agent\n").unwrap();
    git(&ws, &["add", "agent.txt"]);
    git(&ws, &["commit", "-qm", "agent"]);
    scan(&s, ScanPhase::After, 0, Some("c1"));
    scan(&s, ScanPhase::Boundary, 1, None);
    scan(&s, ScanPhase::Before, 1, Some("c2"));
    git(&ws, &["checkout", "-q", "v1"]);
    scan(&s, ScanPhase::After, 1, Some("c2"));
    drop(s);
    // DSH's session log: two typed messages.
    write_log(&home, &ws, "s1", "", &["make a branch", "check out v1"]);
    (tmp, home, ws)
}

#[test]
fn restore_brings_the_repository_back_and_undo_returns_it() {
    let (_tmp, home, ws) = fixture();
    let agent = git(&ws, &["rev-parse", "agent-work"]);
    let (code, text) = run(&home, &["preview", "s1", "@1"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!(
            "Git: HEAD: detached at v1 → agent-work @ {}",
            &agent[..7]
        )),
        "{text}"
    );
    assert!(text.contains("--keep-git"), "{text}");

    let (code, text) = run(&home, &["--json", "restore", "s1", "@1"]);
    assert_eq!(code, 0, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        v["git"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("HEAD: detached at v1 → agent-work"),
        "{v}"
    );
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "agent-work"
    );

    let (code, text) = run(&home, &["restore", "s1", "@0"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("kept reachable: refs/dsh-rewind/"), "{text}");
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    assert_eq!(git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    let op = text
        .lines()
        .find_map(|l| l.strip_prefix("Undo with: dsh-rewind undo "))
        .expect("the op id")
        .trim()
        .to_owned();
    // The history says what the rewind did to git.
    let (code, text) = run(&home, &["history"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("git: HEAD: agent-work @"), "{text}");
    let (code, text) = run(&home, &["undo", &op]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "agent-work"
    );
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), agent);
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
}

#[test]
fn keep_git_restores_the_files_alone() {
    let (_tmp, home, ws) = fixture();
    let (code, text) = run(&home, &["restore", "s1", "@1", "--keep-git"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Git: kept as it is (--keep-git)"), "{text}");
    assert_eq!(
        git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "HEAD",
        "HEAD left detached"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("f3.txt")).unwrap(),
        "v2 3\n",
        "the files came back"
    );
}

/// What a crash test compares: where HEAD is, every branch and tag (by the subject of its
/// commit: two fixtures made a second apart have other commit ids), the index's entries, what
/// `git status` says, and every file of the work tree.
fn repo_state(ws: &Path) -> String {
    let head = Command::new("git")
        .args(["symbolic-ref", "-q", "HEAD"])
        .current_dir(ws)
        .output()
        .unwrap();
    let head = if head.status.success() {
        String::from_utf8_lossy(&head.stdout).trim().to_owned()
    } else {
        format!(
            "detached {}",
            git(ws, &["log", "-1", "--format=%s", "HEAD"])
        )
    };
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(ws).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            files.insert(
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    format!(
        "HEAD {head}\nrefs:\n{}\nindex:\n{}\nstatus: {:?}\nfiles: {files:?}",
        git(
            ws,
            &[
                "for-each-ref",
                "--format=%(refname) %(subject)",
                "refs/heads",
                "refs/tags"
            ]
        ),
        git(ws, &["ls-files", "-s"]),
        git(ws, &["status", "--porcelain"]),
    )
}

/// Runs `dsh-rewind <args>` paused at crash step `step` and kills it there with SIGKILL.
fn killed_at(home: &Path, step: &str, args: &[&str]) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("DSH_HOME")
        .env("DSH_REWIND_PAUSE", step)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let _ = child.wait();
            panic!("dsh-rewind {args:?} ended before {step}: {seen}");
        }
        seen.push_str(&line);
        if line.trim() == format!("@@rewind-pause {step}") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed");
}

/// The op id of the newest history entry.
fn newest_op(home: &Path) -> String {
    let (code, text) = run(home, &["--json", "history"]);
    assert_eq!(code, 0, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entries = v["entries"].as_array().unwrap_or_else(|| panic!("{v}"));
    entries[0]["opId"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned()
}

#[test]
fn restore_killed_at_each_git_seam_then_continue_or_roll_back_leaves_git_and_files_exact() {
    for step in ["rewind:git-planned", "rewind:git-done"] {
        for rollback in [false, true] {
            let (_tmp, home, ws) = fixture();
            let before = repo_state(&ws);
            // The state a restore that is not killed reaches.
            let after = {
                let (_t2, home2, ws2) = fixture();
                let (code, text) = run(&home2, &["restore", "s1", "@0"]);
                assert_eq!(code, 0, "{text}");
                repo_state(&ws2).replace(&*ws2.to_string_lossy(), &ws.to_string_lossy())
            };
            assert_ne!(before, after);
            killed_at(&home, step, &["restore", "s1", "@0"]);
            let op = newest_op(&home);
            let how = if rollback { "rollback" } else { "continue" };
            let (code, text) = run(&home, &[how, &op]);
            assert_eq!(code, 0, "{step} {how}: {text}");
            let want = if rollback { &before } else { &after };
            assert_eq!(&repo_state(&ws), want, "killed at {step}, then {how}");
            assert!(
                !git(&ws, &["for-each-ref", "refs/heads", "refs/tags"]).contains(".lock"),
                "no lock left"
            );
            git(&ws, &["fsck", "--no-progress"]);
        }
    }
}

#[test]
fn undo_killed_at_its_git_seam_then_continued_leaves_git_and_files_exact() {
    let (_tmp, home, ws) = fixture();
    let before = repo_state(&ws);
    let (code, text) = run(&home, &["restore", "s1", "@0"]);
    assert_eq!(code, 0, "{text}");
    assert_ne!(repo_state(&ws), before);
    let op = newest_op(&home);
    killed_at(&home, "undo:git-planned", &["undo", &op]);
    let (code, text) = run(&home, &["continue", &op]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        repo_state(&ws),
        before,
        "the undo finished: as before the restore"
    );
}

/// Writes DSH's log of session `id` in `ws`: its header (plus `header_extra`, e.g. the fork's
/// parent), then one typed message per entry of `messages`, at seqs 0, 1, …
fn write_log(home: &Path, ws: &Path, id: &str, header_extra: &str, messages: &[&str]) {
    let dir = home.join("sessions").join("--ws--").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        "{{\"type\":\"session\",\"version\":0,\"id\":\"{id}\",\"createdAt\":1795977964371,\"cwd\":{}{header_extra}}}\n",
        serde_json::to_string(&ws.to_string_lossy()).unwrap()
    );
    for (seq, m) in messages.iter().enumerate() {
        text.push_str(&format!(
            "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":{},\"data\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{m}\"}}],\"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\"id\":\"{id}-{seq}\"}},\"surfaceOp\":\"append\"}}\n",
            1795977964372u64 + seq as u64
        ));
    }
    std::fs::write(dir.join("session.jsonl"), text).unwrap();
}

/// A fork's rewind to one of its own messages restores git from the fork's own states; to a
/// message from before the fork it leaves git as it is (the git states there are the parent's),
/// and the preview and the restore say so — without offering `--keep-git` or naming a change of
/// HEAD that would not happen.
#[test]
fn a_fork_restores_git_to_its_own_messages_and_leaves_it_before_the_fork() {
    let (_tmp, home, ws) = fixture();
    // DSH's fork of s1 after both its messages; the child's own turn @2 switches to the agent's
    // branch (from the detached v1) and edits a file, with its own git states recorded.
    let store = Store::open(&home.join("rewind-snapshots"), StoreOptions::default()).unwrap();
    let c = store.session("child", &ws).unwrap();
    scan(&c, ScanPhase::Boundary, 2, None);
    scan(&c, ScanPhase::Before, 2, Some("c3"));
    git(&ws, &["switch", "-q", "agent-work"]);
    std::fs::write(ws.join("f1.txt"), "child\n").unwrap();
    scan(&c, ScanPhase::After, 2, Some("c3"));
    scan(&c, ScanPhase::Boundary, 3, None);
    drop(c);
    drop(store);
    write_log(
        &home,
        &ws,
        "child",
        ",\"parentSession\":\"s1\",\"seedLength\":2",
        &[
            "make a branch",
            "check out v1",
            "back to the branch",
            "more",
        ],
    );
    let fork_line = "Git: left as it is: that message is from before this session was forked";

    // @1 is the parent's message: git is left as it is.
    let (code, text) = run(&home, &["preview", "child", "@1"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(fork_line), "{text}");
    assert!(!text.contains("--keep-git"), "{text}");
    assert!(!text.contains("Git: HEAD"), "{text}");

    // @2 is the fork's own: git comes back with the files, from the fork's own states.
    let agent = git(&ws, &["rev-parse", "agent-work"]);
    let (code, text) = run(&home, &["preview", "child", "@2"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!(
            "Git: HEAD: agent-work @ {} → detached at v1",
            &agent[..7]
        )),
        "{text}"
    );
    assert!(text.contains("--keep-git"), "{text}");
    let (code, text) = run(&home, &["restore", "child", "@2"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("f1.txt")).unwrap(),
        "v1 1\n"
    );
    assert!(!ws.join("agent.txt").exists());
    assert_eq!(git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]), "HEAD");
    assert_eq!(
        git(&ws, &["status", "--porcelain"]),
        "",
        "files and git agree"
    );

    // Back to @1: the files come back alone, and the report says why git stayed.
    let (code, text) = run(&home, &["--json", "restore", "child", "@1"]);
    assert_eq!(code, 0, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        v["git"]["summary"]
            .as_str()
            .is_some_and(|s| s
                .starts_with("left as it is: that message is from before this session was forked")),
        "{v}"
    );
    assert_eq!(
        git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "HEAD",
        "HEAD left where it is"
    );
}
