//! `dsh-rewind preview` / `restore` / `undo` on a workspace that is a git repository: the
//! repository comes back with the files (HEAD, the index, the agent's branch), `--keep-git`
//! leaves it, the undo returns it.

use std::path::{Path, PathBuf};
use std::process::Command;

use snapshot_store::{ScanPhase, ScanRequest, Session, Store, StoreOptions};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn run(home: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("DSH_HOME")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn scan(s: &Session, phase: ScanPhase, anchor: u64, call: Option<&str>) {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_owned);
    r.threads = 1;
    s.scan(&r).unwrap();
}

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
    let dir = home.join("sessions").join("--ws--").join("s1");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        "{{\"type\":\"session\",\"version\":0,\"id\":\"s1\",\"createdAt\":1795977964371,\"cwd\":{}}}\n",
        serde_json::to_string(&ws.to_string_lossy()).unwrap()
    );
    for (seq, m) in ["make a branch", "check out v1"].iter().enumerate() {
        text.push_str(&format!(
            "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":{},\"data\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{m}\"}}],\"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\"id\":\"m{seq}\"}},\"surfaceOp\":\"append\"}}\n",
            1795977964372u64 + seq as u64
        ));
    }
    std::fs::write(dir.join("session.jsonl"), text).unwrap();
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
