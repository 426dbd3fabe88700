//! Hostile input: escapes, symlinks, hard links, odd names and bytes, hostile ids.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;

use snapshot_store::{CaptureOutcome, JournalState, SkipReason, decode_id};

use crate::common::{Env, tool_edit};

fn skipped(o: CaptureOutcome) -> SkipReason {
    match o {
        CaptureOutcome::Skipped { reason, .. } => reason,
        other => panic!("expected skipped, got {other:?}"),
    }
}

#[test]
fn dotdot_and_outside_absolute_paths_are_skipped() {
    let env = Env::new();
    std::fs::write(env.tmp.path().join("secret"), b"outside").expect("write");
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(
        skipped(s.capture_before("c", Path::new("../secret")).expect("c")),
        SkipReason::OutsideWorkspace
    );
    assert_eq!(
        skipped(
            s.capture_before("c", Path::new("a/../../secret"))
                .expect("c")
        ),
        SkipReason::OutsideWorkspace
    );
    let abs = env.tmp.path().join("secret");
    assert_eq!(
        skipped(s.capture_before("c", &abs).expect("c")),
        SkipReason::OutsideWorkspace
    );
    let sneaky = env.cwd.join("..").join("secret");
    assert_eq!(
        skipped(s.capture_before("c", &sneaky).expect("c")),
        SkipReason::OutsideWorkspace
    );
    // An absolute path inside the cwd is fine.
    env.write("in.txt", b"inside");
    assert!(matches!(
        s.capture_before("c", &env.p("in.txt")).expect("c"),
        CaptureOutcome::Captured { .. }
    ));
    assert!(matches!(
        skipped(s.capture_before("c", Path::new("")).expect("c")),
        SkipReason::InvalidPath { .. }
    ));
    assert_eq!(
        skipped(s.capture_before("c", Path::new(".")).expect("c")),
        SkipReason::Directory
    );
}

#[test]
fn symlinks_are_never_followed() {
    let env = Env::new();
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("f"), b"outside bytes").expect("write");
    symlink(&outside, env.p("linkdir")).expect("symlink");
    symlink(outside.join("f"), env.p("linkfile")).expect("symlink");
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(
        skipped(s.capture_before("c", Path::new("linkdir/f")).expect("c")),
        SkipReason::SymlinkedParent
    );
    assert_eq!(
        skipped(s.capture_before("c", Path::new("linkfile")).expect("c")),
        SkipReason::Symlink
    );
    s.commit("c", 1, true).expect("commit");
    let plan = s.plan_restore(1).expect("plan");
    assert!(plan.actions.is_empty());
    assert_eq!(plan.skipped.len(), 2, "{plan:#?}");
    assert_eq!(
        std::fs::read(outside.join("f")).expect("read"),
        b"outside bytes"
    );
}

#[test]
fn a_symlink_or_a_file_at_any_depth_of_a_long_path_is_seen() {
    // Paths of two or more parent directories are opened in one call on Linux; every
    // position of a symlink or a file among them must still come out as the walk one
    // component at a time gives it.
    let env = Env::new();
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("sub/deeper")).expect("mkdir");
    std::fs::write(outside.join("sub/deeper/f"), b"outside bytes").expect("write");
    std::fs::write(outside.join("sub/f"), b"outside bytes").expect("write");
    std::fs::write(outside.join("f"), b"outside bytes").expect("write");
    env.write("a/b/c/f", b"inside");
    env.write("a/file", b"not a directory");
    symlink(&outside, env.p("link")).expect("symlink");
    symlink(&outside, env.p("a/link")).expect("symlink");
    symlink(&outside, env.p("a/b/link")).expect("symlink");
    symlink("..", env.p("a/b/up")).expect("symlink");
    let store = env.store();
    let s = env.session(&store);
    for (path, reason) in [
        ("link/sub/f", SkipReason::SymlinkedParent),
        ("link/sub/deeper/f", SkipReason::SymlinkedParent),
        ("a/link/sub/f", SkipReason::SymlinkedParent),
        ("a/b/link/f", SkipReason::SymlinkedParent),
        ("a/b/up/b/c/f", SkipReason::SymlinkedParent),
    ] {
        assert_eq!(
            skipped(s.capture_before("c", Path::new(path)).expect("capture")),
            reason,
            "{path}"
        );
    }
    // Under a file, at any depth: nothing can be there, so the path is absent.
    for path in ["a/file/x/f", "a/b/c/f/g"] {
        assert!(
            matches!(
                s.capture_before("c", Path::new(path)).expect("capture"),
                CaptureOutcome::Absent { .. }
            ),
            "{path}"
        );
    }
    assert!(matches!(
        s.capture_before("c", Path::new("a/b/c/f"))
            .expect("capture"),
        CaptureOutcome::Captured { .. }
    ));
    assert!(matches!(
        s.capture_before("c", Path::new("a/missing/c/new"))
            .expect("capture"),
        CaptureOutcome::Absent { .. }
    ));
    std::fs::write(env.p("a/b/c/f"), b"changed").expect("write");
    s.commit("c", 1, true).expect("commit");
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.actions.len(), 1, "{plan:#?}");
    // The directory in the middle swapped for a symlink before the restore: refused, and
    // nothing written outside.
    std::fs::rename(env.p("a/b"), env.p("a/b-moved")).expect("mv");
    std::fs::create_dir_all(outside.join("c")).expect("mkdir");
    std::fs::write(outside.join("c/f"), b"victim").expect("write");
    symlink(&outside, env.p("a/b")).expect("symlink");
    let out = s.restore(&plan, "op").expect("restore");
    assert_eq!(out.failed.len(), 1, "{out:?}");
    assert_eq!(std::fs::read(outside.join("c/f")).expect("read"), b"victim");
    assert_eq!(
        std::fs::read(outside.join("sub/deeper/f")).expect("read"),
        b"outside bytes"
    );
}

#[test]
fn parent_swapped_for_symlink_between_plan_and_apply_is_refused() {
    let env = Env::new();
    env.write("d/f", b"original");
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("f"), b"victim").expect("write");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "d/f", Some(b"changed"));
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.actions.len(), 1);
    // Swap the parent directory for a symlink to the outside.
    std::fs::rename(env.p("d"), env.p("d-moved")).expect("mv");
    symlink(&outside, env.p("d")).expect("symlink");
    let out = s.restore(&plan, "op").expect("restore");
    assert_eq!(out.failed.len(), 1, "{out:?}");
    assert_eq!(
        std::fs::read(outside.join("f")).expect("read"),
        b"victim",
        "nothing written outside"
    );
    assert!(
        out.failed[0].error.contains("changed since the plan"),
        "{out:?}"
    );
    // Refused before any mutation: settled, nothing left to continue.
    assert_eq!(out.state, JournalState::Completed);
    assert!(s.reconcile_restores().expect("reconcile").is_empty());
}

#[test]
fn final_component_swapped_for_symlink_between_plan_and_apply_is_refused() {
    let env = Env::new();
    env.write("f", b"original");
    let victim = env.tmp.path().join("victim");
    std::fs::write(&victim, b"victim").expect("write");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "f", Some(b"changed"));
    tool_edit(&env, &s, "c2", 1, "g", Some(b"created"));
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.actions.len(), 2);
    env.remove("f");
    symlink(&victim, env.p("f")).expect("symlink");
    env.remove("g");
    symlink(&victim, env.p("g")).expect("symlink");
    let out = s.restore(&plan, "op").expect("restore");
    assert_eq!(out.failed.len(), 2, "{out:?}");
    assert_eq!(std::fs::read(&victim).expect("read"), b"victim");
    assert!(
        std::fs::symlink_metadata(env.p("g"))
            .expect("meta")
            .file_type()
            .is_symlink()
    );
}

#[test]
fn hard_links_and_special_files_are_skipped_and_a_directory_is_no_file() {
    let env = Env::new();
    env.write("h1", b"linked");
    std::fs::hard_link(env.p("h1"), env.p("h2")).expect("link");
    std::fs::create_dir(env.p("dir")).expect("mkdir");
    let fifo = env.p("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    );
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(
        skipped(s.capture_before("c", Path::new("h1")).expect("c")),
        SkipReason::HardLink { nlink: 2 }
    );
    // As a file, a directory's path is absent (the files in it are paths of their own).
    assert!(matches!(
        s.capture_before("c", Path::new("dir")).expect("c"),
        CaptureOutcome::Absent { .. }
    ));
    assert_eq!(
        skipped(s.capture_before("c", Path::new("fifo")).expect("c")),
        SkipReason::Special
    );
    // A file that is a plain file at capture but hard-linked at restore time is skipped too.
    env.write("p", b"plain");
    tool_edit(&env, &s, "d", 2, "p", Some(b"edited"));
    std::fs::hard_link(env.p("p"), env.p("p2")).expect("link");
    let plan = s.plan_restore(2).expect("plan");
    assert!(plan.actions.is_empty());
    assert!(
        plan.skipped
            .iter()
            .any(|k| k.display == "p" && matches!(k.reason, SkipReason::HardLink { .. }))
    );
}

#[test]
fn nul_in_name_is_refused() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    let p = Path::new(OsStr::from_bytes(b"a\0b"));
    assert!(matches!(
        skipped(s.capture_before("c", p).expect("c")),
        SkipReason::InvalidPath { .. }
    ));
}

#[test]
fn non_utf8_names_and_every_byte_value_round_trip() {
    let env = Env::new();
    let name = OsStr::from_bytes(b"dir-\xff/\xfe\xfdname.bin");
    let all: Vec<u8> = (0..=255u8).cycle().take(256 * 300).collect();
    std::fs::create_dir_all(env.cwd.join(OsStr::from_bytes(b"dir-\xff"))).expect("mkdir");
    std::fs::write(env.cwd.join(name), &all).expect("write");
    env.write("empty", b"");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c", 1, "empty", Some(b"not empty"));
    s.capture_before("c2", Path::new(name)).expect("capture");
    std::fs::write(env.cwd.join(name), b"x").expect("write");
    s.commit("c2", 1, true).expect("commit");
    let plan = s.plan_restore(1).expect("plan");
    let json = serde_json::to_string(&plan).expect("json");
    assert!(json.contains("\"hex\""), "{json}");
    let back: snapshot_store::RestorePlan = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, plan);
    let out = s.restore(&back, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(std::fs::read(env.cwd.join(name)).expect("read"), all);
    assert_eq!(env.read("empty").as_deref(), Some(&b""[..]));
}

#[test]
fn hostile_session_and_call_ids_stay_inside_the_store() {
    let env = Env::new();
    env.write("a", b"x");
    let store = env.store();
    for id in ["../escape", "..", ".", "a/b", "/abs", "x\0y", "%2E%2E"] {
        let s = store.session(id, &env.cwd).expect("session");
        s.capture_before("../../call", Path::new("a"))
            .expect("capture");
        s.commit("../../call", 1, true).expect("commit");
    }
    assert!(store.session("", &env.cwd).is_err());
    assert!(store.session(&"x".repeat(500), &env.cwd).is_err());
    // Nothing appeared beside the store root; all session dirs decode back.
    let beside: Vec<_> = std::fs::read_dir(env.tmp.path())
        .expect("rd")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(beside.len(), 2, "{beside:?}");
    let names: Vec<String> = std::fs::read_dir(env.root.join("sessions"))
        .expect("rd")
        .flatten()
        .map(|e| decode_id(&e.file_name().to_string_lossy()).expect("decodes"))
        .collect();
    assert_eq!(names.len(), 7);
    let mut listed = store.list_sessions().expect("list");
    listed.sort();
    assert!(listed.contains(&"../escape".to_string()));
}

#[test]
fn a_forged_plan_cannot_name_a_file_outside_the_blob_store() {
    let env = Env::new();
    env.write("a", b"mine");
    std::fs::write(env.tmp.path().join("secret"), b"outside secret").expect("write");
    let store = env.store();
    let s = env.session(&store);
    crate::common::tool_edit(&env, &s, "c", 1, "a", Some(b"edited"));
    let mut plan = s.plan_restore(1).expect("plan");
    let snapshot_store::Action::Write { sha256, size, .. } = &mut plan.actions[0].action else {
        panic!("{plan:?}")
    };
    *sha256 = "../../secret".into();
    *size = 14;
    let out = s.restore(&plan, "op").expect("restore");
    assert_eq!(out.failed.len(), 1, "{out:?}");
    assert!(
        out.failed[0].error.contains("missing"),
        "{}",
        out.failed[0].error
    );
    assert_eq!(env.read("a").as_deref(), Some(&b"edited"[..]));
}

#[test]
fn a_log_planted_in_another_session_or_a_foreign_file_is_refused_and_kept() {
    let env = Env::new();
    env.write("a", b"a0");
    let store = env.store();
    let s = env.session(&store);
    tool_edit(&env, &s, "c1", 1, "a", Some(b"a1"));
    let sessions = env.root.join("sessions");
    // s1's log copied into s2's directory: it names s1, so s2 refuses it.
    std::fs::create_dir_all(sessions.join("s2")).expect("mkdir");
    std::fs::copy(
        sessions.join("s1/records.log"),
        sessions.join("s2/records.log"),
    )
    .expect("cp");
    let s2 = store.session("s2", &env.cwd).expect("s2");
    let e = s2.plan_restore(1).expect_err("foreign log");
    assert!(e.to_string().contains("names session `s1`"), "{e}");
    assert!(s2.capture_before("c", Path::new("a")).is_err());
    // Not a record log at all (e.g. JSON written by something else).
    let planted = br#"{"v":1,"session_id":"s3"}"#;
    std::fs::create_dir_all(sessions.join("s3")).expect("mkdir");
    std::fs::write(sessions.join("s3/records.log"), planted).expect("write");
    let s3 = store.session("s3", &env.cwd).expect("s3");
    let e = s3.plan_restore(1).expect_err("not a log");
    assert!(e.to_string().contains("bad magic"), "{e}");
    assert!(s3.commit("c", 1, true).is_err());
    assert_eq!(
        std::fs::read(sessions.join("s3/records.log")).expect("kept"),
        planted
    );
    assert!(
        store.collect_garbage().is_err(),
        "sweep refuses unreadable logs"
    );
    // The real session is unaffected.
    assert_eq!(s.plan_restore(1).expect("plan").actions.len(), 1);
}
