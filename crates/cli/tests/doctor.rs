//! `dsh-rewind doctor` over real temporary DSH homes: session logs of several formats, a store
//! marker, the exit codes.

use std::path::Path;
use std::process::Command;

fn session(home: &Path, id: &str, file: &str, version: u64) {
    let dir = home.join("sessions").join("--ws--").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let seeded = if version >= 2 {
        ",\"isSeeded\":false"
    } else {
        ""
    };
    std::fs::write(
        dir.join(file),
        format!("{{\"type\":\"session\",\"version\":{version},\"id\":\"{id}\",\"createdAt\":1,\"cwd\":\"/w\"{seeded}}}\n"),
    )
    .unwrap();
}

fn doctor(home: &Path, json: bool) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh-rewind"));
    cmd.arg("--home")
        .arg(home)
        .arg("doctor")
        .env_remove("DSH_HOME");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn doctor_names_each_session_format_and_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    session(home, "old", "session.jsonl", 0);
    session(home, "mid", "session.v3.jsonl", 3);
    session(home, "new", "session.v4.jsonl", 4);
    std::fs::create_dir_all(home.join("rewind-snapshots")).unwrap();
    std::fs::write(
        home.join("rewind-snapshots/store.json"),
        r#"{"store_version": 2}"#,
    )
    .unwrap();

    let (code, text) = doctor(home, false);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("✓ format 0 (DSH 0.1.0 / 0.1.1): 1 session(s)"),
        "{text}"
    );
    assert!(
        text.contains("✓ format 3 (DSH 0.1.5 / 0.1.6): 1 session(s)"),
        "{text}"
    );
    assert!(
        text.contains("✓ format 4 (DSH 0.1.7 to 0.2.x): 1 session(s)"),
        "{text}"
    );
    assert!(text.contains("✓ layout 2"), "{text}");
    assert!(text.contains("Rewind history: none yet"), "{text}");

    let (code, json) = doctor(home, true);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["sessionFormats"].as_array().unwrap().len(), 3);
    assert_eq!(v["store"]["version"], 2);
}

#[test]
fn doctor_exits_6_for_a_newer_format_and_5_for_an_unreadable_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    session(home, "s", "session.jsonl", 0);
    std::fs::create_dir_all(home.join("rewind-snapshots")).unwrap();
    std::fs::write(home.join("rewind-snapshots/store.json"), "not json").unwrap();
    let (code, text) = doctor(home, false);
    assert_eq!(code, 5, "{text}");
    assert!(text.contains("store.json is corrupt"), "{text}");

    session(home, "future", "session.v9.jsonl", 9);
    let (code, text) = doctor(home, false);
    assert_eq!(code, 6, "{text}");
    assert!(text.contains("✗ format 9"), "{text}");
}

#[test]
fn doctor_on_an_empty_home_says_so_and_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, text) = doctor(tmp.path(), false);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Session logs (0):\n- none"), "{text}");
    assert!(
        text.contains("none yet (created at the first backup)"),
        "{text}"
    );
}
