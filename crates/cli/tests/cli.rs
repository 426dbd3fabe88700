//! `dsh-rewind` over real temporary DSH homes: stores built with the crates' own
//! APIs, real workspace files, the real binary; output checked with insta snapshots
//! (temporary paths, times and op ids redacted).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use snapshot_store::{Area, FaultSeam, FsOp, Store, StoreOptions};

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Home {
    fn store_root(&self) -> PathBuf {
        self.home.join("rewind-snapshots")
    }

    fn store(&self) -> Store {
        Store::open(&self.store_root(), StoreOptions::default()).unwrap()
    }

    fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
            .arg("--home")
            .arg(&self.home)
            .args(args)
            .env_remove("DSH_HOME")
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.join(rel)).ok()
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.ws.join(rel), text).unwrap();
    }

    /// Writes DSH's session log for `id`: a header and one typed message per seq.
    fn log(&self, id: &str, messages: &[&str], extra_header: &str) {
        let dir = self.home.join("sessions").join("--ws--").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = format!(
            "{{\"type\":\"session\",\"version\":0,\"id\":\"{id}\",\"createdAt\":1795977964371,\"cwd\":{}{extra_header}}}\n",
            serde_json::to_string(&self.ws.to_string_lossy()).unwrap()
        );
        for (seq, m) in messages.iter().enumerate() {
            text.push_str(&format!(
                "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":{},\"data\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{m}\"}}],\"source\":{{\"kind\":\"user\"}},\"role\":\"user\",\"id\":\"m{seq}\"}},\"surfaceOp\":\"append\"}}\n",
                1795977964372u64 + seq as u64
            ));
        }
        std::fs::write(dir.join("session.jsonl"), text).unwrap();
    }
}

/// A home with session `s1`: message @0 changed `a.txt` (one → two) and created
/// `new.txt`; message @1 changed `a.txt` (two → three). `b.txt` was never touched.
fn home() -> Home {
    fixture_home(StoreOptions::default())
}

/// [`home`] with every captured content in a blob file of its own (none kept in the log).
fn home_with_blob_files() -> Home {
    fixture_home(StoreOptions {
        keep_in_log_bytes: 0,
        ..StoreOptions::default()
    })
}

fn fixture_home(options: StoreOptions) -> Home {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let h = Home {
        _tmp: tmp,
        home,
        ws,
    };
    h.write("a.txt", "one\nshared line\n");
    h.write("b.txt", "keep\n");
    let store = Store::open(&h.store_root(), options).unwrap();
    let s = store.session("s1", &h.ws).unwrap();
    s.recheck_tracked(0).unwrap();
    s.capture_before("c1", "a.txt".as_ref()).unwrap();
    s.capture_before("c1", "new.txt".as_ref()).unwrap();
    h.write("a.txt", "two\nshared line\n");
    h.write("new.txt", "new\n");
    s.commit("c1", 0, true).unwrap();
    s.recheck_tracked(1).unwrap();
    s.capture_before("c2", "a.txt".as_ref()).unwrap();
    h.write("a.txt", "three\nshared line\n");
    s.commit("c2", 1, true).unwrap();
    h.log("s1", &["create the notes", "edit them again"], "");
    h
}

fn redact(h: &Home, text: &str) -> String {
    let tmp = h.home.parent().unwrap().to_string_lossy().into_owned();
    text.replace(&tmp, "[TMP]")
}

/// Filters for what differs between runs: op ids, times, capture orders, stamps.
fn filters() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"cli-\d+-\d+", "cli-[OP]");
    s.add_filter(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", "[TIME]");
    s.add_filter(r"~recheck-\d+", "~recheck-[ORDER]");
    s.add_filter(r"quarantine/[0-9-]+", "quarantine/[STAMP]");
    s.add_filter(r"ws-cwd\.[0-9a-f]{16}", "ws-cwd.[HASH]");
    s
}

fn snap(h: &Home, r: &Run) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        r.code,
        redact(h, &r.stdout),
        redact(h, &r.stderr)
    )
}

#[test]
fn sessions_checkpoints_and_preview() {
    let _g = filters().bind_to_scope();
    let h = home();
    {
        // Record sizes depend on inode numbers in the tracked cache: sizes are redacted here.
        let mut s = filters();
        s.add_filter(r"\d+(\.\d)? (B|KiB)", "[SIZE]");
        s.bind(|| insta::assert_snapshot!("sessions", snap(&h, &h.run(&["sessions"]))));
    }
    insta::assert_snapshot!("checkpoints", snap(&h, &h.run(&["checkpoints", "s1"])));
    insta::assert_snapshot!("preview_0", snap(&h, &h.run(&["preview", "s1", "@0"])));
    // `2` is the second newest message: @0 again.
    assert_eq!(
        h.run(&["preview", "s1", "2"]).stdout,
        h.run(&["preview", "s1", "@0"]).stdout
    );
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "preview", "s1", "@1"]).stdout).unwrap();
    assert_eq!(v["plan"]["actions"].as_array().unwrap().len(), 1);
    assert_eq!(v["plan"]["actions"][0]["path"], "a.txt");
    // A preview changes nothing.
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
}

#[test]
fn sessions_json_is_machine_readable() {
    let h = home();
    let r = h.run(&["--json", "sessions"]);
    assert_eq!(r.code, 0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let s = &v["sessions"][0];
    assert_eq!(s["session"], "s1");
    assert_eq!(s["checkpoints"], 2);
    assert_eq!(s["held"], false);
    // Listing creates nothing in the store.
    assert!(!h.store_root().join("holds").exists());
    assert_eq!(s["workspace"], h.ws.to_string_lossy().as_ref());
    assert!(s["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn diff_shows_lines_and_summarizes_binary_files() {
    let _g = filters().bind_to_scope();
    let h = home();
    insta::assert_snapshot!("diff_0", snap(&h, &h.run(&["diff", "s1", "@0"])));
    insta::assert_snapshot!("diff_0_a", snap(&h, &h.run(&["diff", "s1", "@0", "a.txt"])));
    // A binary before-state is summarized, not diffed.
    let store = h.store();
    let s = store.session("s1", &h.ws).unwrap();
    std::fs::write(h.ws.join("bin.dat"), [0u8, 1, 2, 3, 0, 9]).unwrap();
    s.recheck_tracked(2).unwrap();
    s.capture_before("c3", "bin.dat".as_ref()).unwrap();
    std::fs::write(h.ws.join("bin.dat"), b"text now\n").unwrap();
    s.commit("c3", 2, true).unwrap();
    h.log("s1", &["create the notes", "edit them again", "binary"], "");
    let r = h.run(&["diff", "s1", "@2", "bin.dat"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("now: text, 9 B; at @2: binary, 6 B"),
        "{}",
        r.stdout
    );
    // A path the restore would not change is named.
    let r = h.run(&["diff", "s1", "@0", "b.txt"]);
    assert_eq!(r.code, 3);
    assert!(
        r.stderr.contains("would not change `b.txt`"),
        "{}",
        r.stderr
    );
}

#[test]
fn restore_then_undo_round_trips_and_is_recorded() {
    let _g = filters().bind_to_scope();
    let h = home();
    let r = h.run(&["restore", "s1", "@0"]);
    insta::assert_snapshot!("restore_0", snap(&h, &r));
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
    assert_eq!(h.read("new.txt"), None);
    assert_eq!(h.read("b.txt").as_deref(), Some("keep\n"));
    insta::assert_snapshot!("history_after_restore", snap(&h, &h.run(&["history"])));
    let v: serde_json::Value = serde_json::from_str(
        &h.run(&["--json", "history", "--workspace", h.ws.to_str().unwrap()])
            .stdout,
    )
    .unwrap();
    let op = v["entries"][0]["opId"].as_str().unwrap().to_string();
    assert_eq!(v["entries"][0]["counts"]["restored"], 1);
    assert_eq!(v["entries"][0]["counts"]["deleted"], 1);
    // Another workspace has no entries.
    let other = tempfile::tempdir().unwrap();
    let v: serde_json::Value = serde_json::from_str(
        &h.run(&[
            "--json",
            "history",
            "--workspace",
            other.path().to_str().unwrap(),
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(v["entries"].as_array().unwrap().len(), 0);

    let r = h.run(&["undo", &op]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
    assert_eq!(h.read("new.txt").as_deref(), Some("new\n"));
    let v: serde_json::Value = serde_json::from_str(&h.run(&["--json", "history"]).stdout).unwrap();
    assert!(v["entries"][0]["undoneAt"].as_u64().is_some());
    // Each rewind is undone at most once.
    let r = h.run(&["undo", &op]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("rewind/already-undone"), "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
}

#[test]
fn undo_is_refused_when_a_restored_file_changed_since() {
    let h = home();
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "restore", "s1", "@1"]).stdout).unwrap();
    let op = v["outcome"]["op"].as_str().unwrap().to_string();
    h.write("a.txt", "my own edit\n");
    let r = h.run(&["undo", &op]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("a.txt"), "{}", r.stderr);
    assert!(r.stderr.contains("rewind/stale-undo"), "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("my own edit\n"));
    // Decided per file: kept as it is, the rest undone.
    let r = h.run(&["undo", &op, "--keep", "a.txt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("Kept as they are (1): a.txt"),
        "{}",
        r.stdout
    );
    assert_eq!(h.read("a.txt").as_deref(), Some("my own edit\n"));
    let r = h.run(&["undo", &op, "--take", "a.txt"]);
    assert_eq!(r.code, 7, "undone once: {}", r.stderr);
    assert!(r.stderr.contains("rewind/already-undone"), "{}", r.stderr);
}

#[test]
fn undo_takes_the_pre_restore_version_when_asked() {
    let h = home();
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "restore", "s1", "@1"]).stdout).unwrap();
    let op = v["outcome"]["op"].as_str().unwrap().to_string();
    let before = h.read("a.txt");
    h.write("a.txt", "my own edit\n");
    let r = h.run(&["undo", &op, "--take", "a.txt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_ne!(h.read("a.txt").as_deref(), Some("my own edit\n"));
    assert_ne!(
        h.read("a.txt"),
        before,
        "the pre-restore version, not the restored one"
    );
}

#[test]
fn restore_only_and_keep_select_paths() {
    let _g = filters().bind_to_scope();
    let h = home();
    let r = h.run(&["restore", "s1", "@0", "--keep", "a.txt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
    assert_eq!(h.read("new.txt"), None);

    let h = home();
    let r = h.run(&["restore", "s1", "@0", "--only", "a.txt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
    assert_eq!(h.read("new.txt").as_deref(), Some("new\n"));

    // A filter that matches nothing is refused before anything changes.
    let h = home();
    let r = h.run(&["restore", "s1", "@0", "--only", "nope.txt"]);
    insta::assert_snapshot!("restore_only_unknown", snap(&h, &r));
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
    assert_eq!(h.read("new.txt").as_deref(), Some("new\n"));
}

#[test]
fn refusals_name_what_is_wrong_and_change_nothing() {
    let _g = filters().bind_to_scope();
    let h = home();
    let before = (h.read("a.txt"), h.read("new.txt"));
    let cases: &[(&str, &[&str], i32)] = &[
        ("unknown_session", &["preview", "nope", "@0"], 3),
        ("unknown_message", &["restore", "s1", "@7"], 3),
        ("bad_target", &["restore", "s1", "yesterday"], 2),
        ("unknown_op", &["undo", "op-nope"], 3),
        ("unknown_restore", &["continue", "op-nope"], 3),
        ("hostile_session", &["restore", "../../etc", "@0"], 3),
    ];
    for (name, args, code) in cases {
        let r = h.run(args);
        assert_eq!(r.code, *code, "{name}: {}", r.stderr);
        insta::assert_snapshot!(format!("refuse_{name}"), snap(&h, &r));
    }
    // JSON errors carry the class and the exit code.
    let r = h.run(&["--json", "restore", "s1", "@7"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["error"]["code"], "not-found");
    assert_eq!(v["error"]["exit"], 3);
    assert_eq!((h.read("a.txt"), h.read("new.txt")), before);
    // A home without a store is not created by the tool.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
        .args(["--home", empty.path().to_str().unwrap(), "sessions"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(!empty.path().join("rewind-snapshots").exists());
}

#[test]
fn a_session_held_by_a_live_host_is_not_changed() {
    let _g = filters().bind_to_scope();
    let h = home();
    let store = h.store();
    let hold = store.hold_session("s1").unwrap().expect("hold");
    let r = h.run(&["restore", "s1", "@0"]);
    insta::assert_snapshot!("refuse_held", snap(&h, &r));
    assert_eq!(r.code, 4);
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
    // Reading still works, and shows the hold.
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "sessions"]).stdout).unwrap();
    assert_eq!(v["sessions"][0]["held"], true);
    // gc never removes a held session, even over the size quota.
    let r = h.run(&["gc", "--max-size", "1", "--apply"]);
    assert!(h.store_root().join("sessions/s1").is_dir(), "{}", r.stdout);
    drop(hold);
    let r = h.run(&["restore", "s1", "@0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
}

#[test]
fn a_store_written_by_a_newer_build_is_refused() {
    let h = home();
    std::fs::write(
        h.store_root().join("store.json"),
        r#"{"store_version": 99}"#,
    )
    .unwrap();
    let r = h.run(&["restore", "s1", "@0"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("newer"), "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
    assert_eq!(h.run(&["verify"]).code, 6);
    assert_eq!(h.run(&["gc", "--apply"]).code, 6);
}

#[test]
fn a_newer_session_log_is_refused() {
    let h = home();
    let log = h.home.join("sessions/--ws--/s1/session.jsonl");
    let text = std::fs::read_to_string(&log)
        .unwrap()
        .replacen("\"version\":0", "\"version\":5", 1);
    std::fs::write(&log, text).unwrap();
    let r = h.run(&["checkpoints", "s1"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("newer"), "{}", r.stderr);
}

#[test]
fn without_a_log_checkpoints_are_listed_by_seq_and_the_workspace_is_asked_for() {
    let _g = filters().bind_to_scope();
    let h = home();
    std::fs::remove_dir_all(h.home.join("sessions")).unwrap();
    insta::assert_snapshot!(
        "checkpoints_no_log",
        snap(&h, &h.run(&["checkpoints", "s1"]))
    );
    let r = h.run(&["restore", "s1", "@0"]);
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("pass --workspace DIR"), "{}", r.stderr);
    let r = h.run(&["restore", "s1", "@0", "--workspace", h.ws.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
}

/// Fails the workspace write of one path (its rename over the path, or its first
/// write when it is rewritten in place): the restore ends with an open journal.
struct FailRename(&'static str);

impl FaultSeam for FailRename {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> std::io::Result<()> {
        if matches!(op, FsOp::Rename | FsOp::Write)
            && area == Area::Workspace
            && path == Path::new(self.0)
        {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        Ok(())
    }
}

#[test]
fn an_interrupted_restore_is_listed_then_continued_or_rolled_back() {
    let _g = filters().bind_to_scope();
    for rollback in [false, true] {
        let h = home();
        let store = Store::open(
            &h.store_root(),
            StoreOptions {
                seam: Arc::new(FailRename("a.txt")),
                ..StoreOptions::default()
            },
        )
        .unwrap();
        let s = store.session("s1", &h.ws).unwrap();
        let plan = s.plan_restore(0).unwrap();
        let o = s.restore(&plan, "op-broken").unwrap();
        assert_eq!(o.failed.len(), 1);
        drop((s, store));
        assert_eq!(h.read("new.txt"), None);
        assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
        if !rollback {
            insta::assert_snapshot!("restores_open", snap(&h, &h.run(&["restores"])));
        }
        let r = h.run(&[if rollback { "rollback" } else { "continue" }, "op-broken"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        if rollback {
            assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
            assert_eq!(h.read("new.txt").as_deref(), Some("new\n"));
        } else {
            assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
            assert_eq!(h.read("new.txt"), None);
        }
        let r = h.run(&["restores"]);
        assert_eq!(r.stdout, "No interrupted restores.\n");
    }
}

fn blob_of(h: &Home, content: &str) -> PathBuf {
    use sha2::Digest;
    let sha = hex::encode(sha2::Sha256::digest(content.as_bytes()));
    h.store_root().join("blobs").join(sha)
}

/// Flips one byte inside the first record frame of session `s1`'s log (a checksum
/// mismatch before the last frame: damage, not a torn tail).
fn damage_log(h: &Home) -> std::path::PathBuf {
    let log = h.store_root().join("sessions/s1/records.log");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&log, &bytes).unwrap();
    log
}

#[test]
fn verify_names_corrupt_and_missing_data_and_repair_quarantines_it() {
    let _g = filters().bind_to_scope();
    let h = home_with_blob_files();
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    insta::assert_snapshot!("verify_clean", snap(&h, &r));

    // Flip the bytes of one blob, delete another, damage the session's record log.
    std::fs::write(blob_of(&h, "one\nshared line\n"), "tampered").unwrap();
    std::fs::remove_file(blob_of(&h, "two\nshared line\n")).unwrap();
    let log = damage_log(&h);
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 5);
    insta::assert_snapshot!("verify_broken", snap(&h, &r));

    let r = h.run(&["repair"]);
    {
        // The log's size depends on inode numbers in the tracked cache.
        let mut s = filters();
        s.add_filter(
            r"\d+ byte\(s\) of its records.log",
            "[N] byte(s) of its records.log",
        );
        s.bind(|| insta::assert_snapshot!("repair", snap(&h, &r)));
    }
    // Nothing was deleted: the corrupt files are in the quarantine.
    let q = std::fs::read_dir(h.store_root().join("quarantine"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::read_to_string(
            q.join("blobs")
                .join(blob_of(&h, "one\nshared line\n").file_name().unwrap())
        )
        .unwrap(),
        "tampered"
    );
    assert!(
        q.join("sessions/s1")
            .join(log.file_name().unwrap())
            .is_file()
    );
    assert!(
        !log.exists(),
        "the damaged log is in the quarantine, not in the session"
    );
    // What is left to report names only missing blobs (a restore names them per path
    // instead of writing wrong bytes); the damaged log is no longer read.
    let r = h.run(&["verify"]);
    assert!(
        r.stdout
            .lines()
            .filter(|l| l.starts_with("- "))
            .all(|l| l.starts_with("- missing blob")
                || l.starts_with("- warning: records of session s1 were lost at a repair")),
        "{}",
        r.stdout
    );
}

#[test]
fn verify_and_repair_cover_the_workspace_index() {
    let h = home();
    {
        // The session's workspace scan writes the index a shell call's before-states come from.
        let store = h.store();
        let s = store.session("s1", &h.ws).unwrap();
        s.scan(&snapshot_store::ScanRequest::new(
            snapshot_store::ScanPhase::Boundary,
            2,
        ))
        .unwrap();
    }
    assert_eq!(h.run(&["verify"]).code, 0);
    let dir = std::fs::read_dir(h.store_root().join("workspaces"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let index = dir.join("index.bin");
    let rel = format!(
        "workspaces/{}/index.bin",
        dir.file_name().unwrap().to_string_lossy()
    );
    let mut bytes = std::fs::read(&index).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&index, &bytes).unwrap();
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 5, "{}", r.stdout);
    assert!(r.stdout.contains(&rel), "{}", r.stdout);
    let r = h.run(&["repair"]);
    assert!(r.stdout.contains(&rel), "{}", r.stdout);
    assert!(!index.exists(), "moved into the quarantine");
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
}

#[test]
fn du_and_gc_by_age_and_by_size() {
    let h = home();
    // A second, older session in another workspace.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("x.txt"), "x1").unwrap();
    let store = h.store();
    let s2 = store.session("s2", other.path()).unwrap();
    // Its workspace scan keeps x1 in the workspace's baseline too.
    s2.scan(&snapshot_store::ScanRequest::new(
        snapshot_store::ScanPhase::Boundary,
        0,
    ))
    .unwrap();
    s2.recheck_tracked(0).unwrap();
    s2.capture_before("k1", "x.txt".as_ref()).unwrap();
    std::fs::write(other.path().join("x.txt"), "x2").unwrap();
    s2.commit("k1", 0, true).unwrap();
    drop(s2);
    // Make s2 idle for 40 days (every file and directory under it).
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86_400);
    fn age(p: &Path, t: std::time::SystemTime) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                age(&e.unwrap().path(), t);
            }
        }
        std::fs::File::open(p).unwrap().set_modified(t).unwrap();
    }
    age(&h.store_root().join("sessions/s2"), old);
    let key = snapshot_store::workspace_key(&other.path().canonicalize().unwrap());
    let space = h.store_root().join("workspaces").join(key);
    age(&space, old);

    let r = h.run(&["du"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("2 session(s)"), "{}", r.stdout);
    let v: serde_json::Value = serde_json::from_str(&h.run(&["--json", "du"]).stdout).unwrap();
    assert_eq!(v["inventory"]["sessions"].as_array().unwrap().len(), 2);

    // Dry run by default: lists s2 (idle 40 days), removes nothing.
    let r = h.run(&["gc"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("- s2"), "{}", r.stdout);
    assert!(!r.stdout.contains("- s1"), "{}", r.stdout);
    assert!(h.store_root().join("sessions/s2").is_dir());
    // By size, the oldest idle sessions go first until the quota fits.
    let r = h.run(&["--json", "gc", "--max-age-days", "365", "--max-size", "1"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let ids: Vec<_> = v["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["s2", "s1"]);
    assert!(h.store_root().join("sessions/s1").is_dir());
    // Applied by age: s2 goes, and with it its workspace's scan state (no session names it
    // any more) and the blobs only they kept.
    let r = h.run(&["gc", "--apply"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("1 workspace scan state(s) no session uses any more removed"),
        "{}",
        r.stdout
    );
    assert!(!space.exists());
    assert!(!h.store_root().join("sessions/s2").exists());
    assert!(h.store_root().join("sessions/s1").is_dir());
    assert!(!blob_of(&h, "x1").exists());
    assert_eq!(h.run(&["verify"]).code, 0);
    // s1 still restores.
    assert_eq!(h.run(&["restore", "s1", "@0"]).code, 0);
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
}

#[test]
fn help_lists_every_command() {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for c in [
        "sessions",
        "checkpoints",
        "preview",
        "diff",
        "restore",
        "undo",
        "history",
        "restores",
        "continue",
        "rollback",
        "du",
        "gc",
        "verify",
        "repair",
    ] {
        assert!(
            text.contains(&format!("  {c} ")),
            "{c} missing from\n{text}"
        );
    }
}

#[test]
fn a_fork_restores_from_its_parents_checkpoints() {
    let h = home();
    // DSH's fork of s1 at its first message: the child's log repeats the seeded events.
    h.log(
        "child",
        &["create the notes", "a new direction"],
        ",\"parentSession\":\"s1\",\"seedLength\":1",
    );
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "preview", "child", "@0"]).stdout).unwrap();
    let paths: Vec<_> = v["plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap().to_string())
        .collect();
    // Only the parent's records up to the fork point count: a.txt back to "one", new.txt deleted.
    assert_eq!(paths, ["a.txt", "new.txt"]);
    let r = h.run(&["restore", "child", "@0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
    assert_eq!(h.read("new.txt"), None);
    // A session that is neither stored nor a fork of a stored one stays unknown.
    h.log("stranger", &["hello"], "");
    assert_eq!(h.run(&["preview", "stranger", "@0"]).code, 3);
}

/// Rewrites s1's log in DSH's default encoding: one zstd frame per line (ruzstd's encoder),
/// optionally followed by a torn frame.
fn compress_log(h: &Home, torn: bool) -> PathBuf {
    let dir = h.home.join("sessions/--ws--/s1");
    let text = std::fs::read_to_string(dir.join("session.jsonl")).unwrap();
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        out.extend(ruzstd::encoding::compress_to_vec(
            line.as_bytes(),
            ruzstd::encoding::CompressionLevel::Fastest,
        ));
    }
    if torn {
        let f = ruzstd::encoding::compress_to_vec(
            &b"{\"type\":\"user/message\"}\n"[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        out.extend_from_slice(&f[..f.len() / 2]);
    }
    std::fs::remove_file(dir.join("session.jsonl")).unwrap();
    std::fs::write(dir.join("session.jsonl.zstd"), &out).unwrap();
    dir.join("session.jsonl.zstd")
}

#[test]
fn a_zstd_log_is_read_like_a_plain_one() {
    let _g = filters().bind_to_scope();
    let h = home();
    let plain = h.run(&["checkpoints", "s1"]).stdout;
    compress_log(&h, true);
    // The same messages; the torn final frame is ignored.
    assert_eq!(h.run(&["checkpoints", "s1"]).stdout, plain);
    let r = h.run(&["restore", "s1", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("one\nshared line\n"));
}

#[test]
fn a_zstd_log_written_by_dsh_encoding_is_read() {
    let _g = filters().bind_to_scope();
    let h = home();
    // Written by Node's zlib, as DSH's persistence writes it (see tests/fixtures/README.md).
    let dir = h.home.join("sessions/--nonexistent-zstd-ws--/zs1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/session.jsonl.zstd"),
        dir.join("session.jsonl.zstd"),
    )
    .unwrap();
    let store = h.store();
    let s = store.session("zs1", &h.ws).unwrap();
    s.recheck_tracked(1).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "sessions"]).stdout).unwrap();
    let zs1 = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"] == "zs1")
        .cloned();
    assert_eq!(
        zs1.map(|s| s["workspace"].clone()),
        Some(serde_json::json!("/nonexistent/zstd-ws"))
    );
    insta::assert_snapshot!(
        "checkpoints_zstd",
        snap(&h, &h.run(&["checkpoints", "zs1"]))
    );
}

#[test]
fn a_damaged_zstd_log_is_named() {
    let h = home();
    let path = compress_log(&h, false);
    let mut bytes = std::fs::read(&path).unwrap();
    // Damage the first frame (the header) past its frame header: not a torn tail.
    let i = 8.min(bytes.len() - 1);
    bytes[i] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let r = h.run(&["checkpoints", "s1"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("session.jsonl.zstd: zstd frame at byte 0"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_record_from_a_newer_build_is_named_and_never_quarantined() {
    let h = home();
    // A log written by a newer build: its header carries a newer log version.
    let group = h.store_root().join("sessions/s1/records.log");
    let mut bytes = std::fs::read(&group).unwrap();
    bytes[4..8].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&group, &bytes).unwrap();
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 6, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("newer record sessions/s1/records.log: version 99"),
        "{}",
        r.stdout
    );
    let r = h.run(&["restore", "s1", "@1"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert_eq!(h.read("a.txt").as_deref(), Some("three\nshared line\n"));
    let r = h.run(&["repair"]);
    assert_eq!(r.code, 5, "{}", r.stdout);
    assert!(
        r.stdout.contains("left as is: newer record"),
        "{}",
        r.stdout
    );
    assert!(group.is_file(), "a newer record stays where it is");
}

#[test]
fn repair_does_not_move_the_records_of_a_held_session() {
    let h = home();
    let group = damage_log(&h);
    let store = h.store();
    let _hold = store.hold_session("s1").unwrap().expect("hold");
    let r = h.run(&["repair"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("held by a running DSH host"),
        "{}",
        r.stderr
    );
    assert!(group.is_file());
    assert!(!h.store_root().join("quarantine").exists());
}

#[test]
fn gc_by_size_leaves_a_store_verify_finds_whole() {
    // The session whose log keeps content the workspace index names goes by the size quota
    // while the index stays for its grace hour: nothing the index names may be lost.
    let h = home();
    {
        let store = h.store();
        let s = store.session("s1", &h.ws).unwrap();
        s.scan(&snapshot_store::ScanRequest::new(
            snapshot_store::ScanPhase::Boundary,
            2,
        ))
        .unwrap();
        s.capture_before_at("w1", "made.txt".as_ref(), 2).unwrap();
        h.write("made.txt", "written by the tool\n");
        s.commit("w1", 2, true).unwrap();
        s.recheck_tracked(3).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(80));
        s.scan(&snapshot_store::ScanRequest::new(
            snapshot_store::ScanPhase::Boundary,
            3,
        ))
        .unwrap();
    }
    assert_eq!(h.run(&["verify"]).code, 0);
    let r = h.run(&["gc", "--max-size", "1", "--apply"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!h.store_root().join("sessions/s1").exists(), "{}", r.stdout);
    assert!(
        h.store_root()
            .join("workspaces")
            .read_dir()
            .unwrap()
            .next()
            .is_some()
    );
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(h.run(&["repair"]).code, 0);
}

#[test]
fn after_a_repair_that_lost_records_commands_say_so() {
    let h = home_with_blob_files();
    let log = h.store_root().join("sessions/s1/records.log");
    let bytes = std::fs::read(&log).unwrap();
    // Damage the last frame but one: the frames before it are kept.
    let mut starts = Vec::new();
    let mut o = 8;
    while o + 12 <= bytes.len() {
        starts.push(o);
        o += 12 + u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize;
    }
    let mut damaged = bytes.clone();
    damaged[starts[starts.len() - 2] + 13] ^= 0x40;
    std::fs::write(&log, &damaged).unwrap();
    let r = h.run(&["repair"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("records.log"), "{}", r.stdout);
    assert!(r.stdout.contains("lost"), "{}", r.stdout);
    assert!(log.is_file(), "the readable frames stay");
    // Every command that reads the session's checkpoints names the loss; a restore that finds
    // nothing to do does not claim the files are as they were.
    for args in [
        &["checkpoints", "s1"][..],
        &["preview", "s1", "@1"],
        &["restore", "s1", "@1"],
        &["verify"],
    ] {
        let r = h.run(args);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(all.contains("lost at a repair"), "{args:?}: {all}");
        assert!(!all.contains("already are as they were"), "{args:?}: {all}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "preview", "s1", "@1"]).stdout).unwrap();
    assert_eq!(v["recordsLost"][0]["sessionId"], "s1");
}

#[test]
fn a_log_cut_mid_frame_is_named_and_damage_fails_every_reading_command() {
    let h = home();
    let log = h.store_root().join("sessions/s1/records.log");
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 3]).unwrap();
    let r = h.run(&["verify"]);
    assert_eq!(
        r.code, 0,
        "a torn tail is what a crash leaves: {}",
        r.stdout
    );
    assert!(!r.stdout.contains("No problems found"), "{}", r.stdout);
    assert!(r.stdout.contains("warning"), "{}", r.stdout);
    assert!(r.stdout.contains("not a whole frame"), "{}", r.stdout);
    let v: serde_json::Value = serde_json::from_str(&h.run(&["--json", "verify"]).stdout).unwrap();
    assert_eq!(v["report"]["warnings"][0]["kind"], "ignored-tail");
    // Damage (not a tail): every command that reads the log says so and exits 5.
    std::fs::write(&log, &bytes).unwrap();
    damage_log(&h);
    for args in [
        &["checkpoints", "s1"][..],
        &["du"],
        &["sessions"],
        &["preview", "s1", "@0"],
    ] {
        let r = h.run(args);
        assert_eq!(r.code, 5, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(
            format!("{}{}", r.stdout, r.stderr).contains("records.log"),
            "{args:?}: {}{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn bad_arguments_exit_2_and_an_unknown_workspace_exits_3() {
    let h = home();
    let r = h.run(&["gc", "--max-age-days", "0"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let r = h.run(&["history", "--workspace", "/nonexistent/dir"]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("/nonexistent/dir"), "{}", r.stderr);
}

#[test]
fn undo_choices_that_match_no_changed_file_or_both_keep_and_take_are_refused() {
    let h = home();
    let r = h.run(&["--json", "restore", "s1", "@0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let op = serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()["outcome"]["op"]
        .as_str()
        .unwrap()
        .to_string();
    h.write("a.txt", "mine\n");
    // The same refusal as a restore's `--keep` of a path no action matches (exit 3).
    let r = h.run(&["undo", &op, "--keep", "a.txt", "--keep", "nonexistent.txt"]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("nonexistent.txt"), "{}", r.stderr);
    let r = h.run(&["undo", &op, "--keep", "a.txt", "--take", "a.txt"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("both kept and taken"), "{}", r.stderr);
    assert_eq!(
        h.read("a.txt").as_deref(),
        Some("mine\n"),
        "nothing changed"
    );
    assert_eq!(h.run(&["undo", &op, "--keep", "a.txt"]).code, 0);
}

/// Two files whose names are not valid UTF-8 and read alike on screen (`n\xff.txt`,
/// `n\xfe.txt`, both `n\u{fffd}.txt`): each is listed so it can be told apart, in `--json` in
/// the `{hex, lossy}` form, and chosen exactly by its `hex:` spelling; the shared display form
/// is refused as ambiguous with nothing changed.
#[test]
fn names_that_are_not_utf8_are_told_apart_and_chosen_by_hex() {
    use std::os::unix::ffi::OsStrExt;
    let ff: &Path = std::ffi::OsStr::from_bytes(b"n\xff.txt").as_ref();
    let fe: &Path = std::ffi::OsStr::from_bytes(b"n\xfe.txt").as_ref();
    let tmp = tempfile::tempdir().unwrap();
    let h = Home {
        home: tmp.path().join("home"),
        ws: tmp.path().join("ws"),
        _tmp: tmp,
    };
    std::fs::create_dir_all(&h.ws).unwrap();
    let store = h.store();
    let s = store.session("s1", &h.ws).unwrap();
    s.recheck_tracked(0).unwrap();
    s.capture_before("c1", ff).unwrap();
    s.capture_before("c1", fe).unwrap();
    std::fs::write(h.ws.join(ff), "ff\n").unwrap();
    std::fs::write(h.ws.join(fe), "fe\n").unwrap();
    s.commit("c1", 0, true).unwrap();
    drop(s);
    drop(store);
    h.log("s1", &["make two files"], "");

    let r = h.run(&["preview", "s1", "@0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("n\u{fffd}.txt (n\\xff.txt, hex:6eff2e747874)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("n\u{fffd}.txt (n\\xfe.txt, hex:6efe2e747874)"),
        "{}",
        r.stdout
    );
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "preview", "s1", "@0"]).stdout).unwrap();
    let mut paths: Vec<serde_json::Value> = v["plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].clone())
        .collect();
    paths.sort_by_key(|p| p["hex"].as_str().unwrap_or_default().to_owned());
    assert_eq!(
        paths,
        [
            serde_json::json!({"hex": "6efe2e747874", "lossy": "n\u{fffd}.txt"}),
            serde_json::json!({"hex": "6eff2e747874", "lossy": "n\u{fffd}.txt"}),
        ]
    );

    // The display form both share cannot choose one: refused, nothing changed.
    let r = h.run(&["restore", "s1", "@0", "--keep", "n\u{fffd}.txt"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("hex:6eff2e747874"), "{}", r.stderr);
    assert!(r.stderr.contains("hex:6efe2e747874"), "{}", r.stderr);
    assert!(h.ws.join(ff).exists() && h.ws.join(fe).exists());
    let r = h.run(&["restore", "s1", "@0", "--keep", "hex:6eff2e74787"]);
    assert_eq!(r.code, 2, "odd hex: {}{}", r.stdout, r.stderr);

    // Kept by its exact spelling: only that file stays; the other goes.
    let r = h.run(&[
        "--json",
        "restore",
        "s1",
        "@0",
        "--keep",
        "hex:6eff2e747874",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(std::fs::read(h.ws.join(ff)).unwrap(), b"ff\n");
    assert!(!h.ws.join(fe).exists(), "n\\xfe.txt deleted");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["outcome"]["deleted"],
        serde_json::json!([{"hex": "6efe2e747874", "lossy": "n\u{fffd}.txt"}])
    );
    let op = v["outcome"]["op"].as_str().unwrap().to_string();

    // The undo: the file made again since is decided by its `hex:` spelling too.
    std::fs::write(h.ws.join(fe), "again\n").unwrap();
    let r = h.run(&["undo", &op]);
    assert_eq!(r.code, 7, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("n\\xfe.txt (hex:6efe2e747874)"),
        "{}",
        r.stderr
    );
    let r = h.run(&["undo", &op, "--keep", "hex:6efe2e747874"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("Kept as they are (1): n\u{fffd}.txt (n\\xfe.txt, hex:6efe2e747874)"),
        "{}",
        r.stdout
    );
    assert_eq!(std::fs::read(h.ws.join(fe)).unwrap(), b"again\n");
}

#[test]
fn preview_counts_origins_and_a_restore_recorded_as_the_plugin_records_it() {
    let h = home();
    // The engine's preview: `+/−` line counts and who made each change, as `/rewind preview`.
    let v: serde_json::Value =
        serde_json::from_str(&h.run(&["--json", "preview", "s1", "@0"]).stdout).unwrap();
    let a = &v["plan"]["actions"][0];
    assert_eq!(a["path"], "a.txt");
    assert_eq!(
        (a["added"].as_u64(), a["removed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(a["origin"], "agent");
    // The restore is the engine's rewind file half: the entry names the message, the paths it
    // restored and those the selection kept, and ends `done`.
    let r = h.run(&["--json", "restore", "s1", "@0", "--keep", "new.txt"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&h.run(&["--json", "history"]).stdout).unwrap();
    let e = &v["entries"][0];
    assert_eq!(e["outcome"], "done");
    assert_eq!(e["targetSeq"], 0);
    assert_eq!(e["targetText"], "create the notes");
    assert_eq!(e["workspaceName"], "ws");
    assert_eq!(e["paths"]["restored"], serde_json::json!(["a.txt"]));
    assert_eq!(e["paths"]["kept"], serde_json::json!(["new.txt"]));
    assert_eq!(h.read("new.txt").as_deref(), Some("new\n"), "kept as it is");
}

#[test]
fn compact_packs_the_loose_blobs_and_every_command_still_reads_them() {
    let h = home_with_blob_files();
    let loose = || {
        std::fs::read_dir(h.store_root().join("blobs"))
            .map(|rd| rd.count())
            .unwrap_or(0)
    };
    assert!(loose() > 0, "the fixture keeps its backups in blob files");
    let preview_before = h.run(&["--json", "preview", "s1", "@0"]).stdout;

    let r = h.run(&["compact"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("Packed "), "{}", r.stdout);
    assert_eq!(loose(), 0, "every blob packed");
    let r = h.run(&["--json", "compact"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["report"]["blobsPacked"], 0, "nothing left to pack: {v}");

    // du says what the store holds and takes; verify re-reads every packed member.
    let v: serde_json::Value = serde_json::from_str(&h.run(&["--json", "du"]).stdout).unwrap();
    assert!(v["logicalBytes"].as_u64().unwrap() > 0, "{v}");
    assert!(v["diskBytes"].as_u64().unwrap() > 0, "{v}");
    assert!(h.run(&["du"]).stdout.contains("  on disk "));
    let r = h.run(&["verify"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // The plan reads the packed backups as it read the loose ones.
    assert_eq!(
        h.run(&["--json", "preview", "s1", "@0"]).stdout,
        preview_before
    );
    let r = h.run(&["restore", "s1", "@0"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}
