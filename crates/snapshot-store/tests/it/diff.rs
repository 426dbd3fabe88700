//! What a planned restore changes inside each file (bounded line diffs), who made the
//! change it undoes, and restoring a selection of the planned files.

use snapshot_store::{
    Action, ChangeOrigin, DiffLimits, PlannedAction, RelPath, ScanPhase, ScanRequest,
    SelectionFault, Session, SideState,
};

use crate::common::{Env, tool_edit};

fn action<'a>(plan: &'a [PlannedAction], path: &str) -> &'a PlannedAction {
    plan.iter()
        .find(|a| a.display == path)
        .unwrap_or_else(|| panic!("{path} is planned"))
}

fn scan(s: &Session, phase: ScanPhase, anchor: u64, call: Option<&str>) {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call.map(str::to_string);
    s.scan(&r).expect("scan");
}

#[test]
fn text_files_get_a_unified_diff_with_counts() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    env.write("a.txt", b"one\ntwo\nthree\n");
    tool_edit(&env, &s, "c1", 1, "a.txt", Some(b"one\n2\nthree\nfour\n"));
    tool_edit(&env, &s, "c2", 1, "new.txt", Some(b"fresh\nfile\n"));
    let plan = s.plan_restore(1).expect("plan");
    let limits = DiffLimits::default();

    let d = s
        .diff_action(action(&plan.actions, "a.txt"), &limits)
        .expect("diff");
    assert_eq!((d.added, d.removed), (Some(1), Some(2)));
    let u = d.unified.expect("text");
    assert!(
        u.contains("-2\n") && u.contains("+two\n") && u.contains("-four\n"),
        "{u}"
    );

    // A file the restore deletes: every line removed, the other side absent.
    let d = s
        .diff_action(action(&plan.actions, "new.txt"), &limits)
        .expect("diff");
    assert_eq!((d.added, d.removed), (Some(0), Some(2)));
    assert_eq!(d.then, SideState::Absent);
}

#[test]
fn binary_and_oversized_files_are_summarized() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    env.write("bin.dat", &[0, 1, 2, 3]);
    env.write("big.txt", "line\n".repeat(50).as_bytes());
    tool_edit(&env, &s, "c1", 1, "bin.dat", Some(b"now text\n"));
    tool_edit(&env, &s, "c2", 1, "big.txt", Some(b"short\n"));
    let plan = s.plan_restore(1).expect("plan");
    let limits = DiffLimits {
        max_lines: 10,
        ..DiffLimits::default()
    };
    let d = s
        .diff_action(action(&plan.actions, "bin.dat"), &limits)
        .expect("diff");
    assert!(d.unified.is_none() && d.added.is_none());
    assert!(
        matches!(d.now, SideState::Text { size: 9, lines: 1 }),
        "{:?}",
        d.now
    );
    match &d.then {
        SideState::Binary { size, sha256 } => {
            assert_eq!(*size, 4);
            assert_eq!(sha256.len(), 64);
        }
        other => panic!("binary expected, got {other:?}"),
    }
    let d = s
        .diff_action(action(&plan.actions, "big.txt"), &limits)
        .expect("diff");
    assert!(
        matches!(d.then, SideState::TooManyLines { lines: 50, .. }),
        "{:?}",
        d.then
    );
    assert!(d.unified.is_none());
}

#[test]
fn a_missing_backup_is_named_not_a_failure() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    env.write("a.txt", b"before\n");
    tool_edit(&env, &s, "c1", 1, "a.txt", Some(b"after\n"));
    let plan = s.plan_restore(1).expect("plan");
    let a = action(&plan.actions, "a.txt");
    let Action::Write { sha256, .. } = &a.action else {
        panic!("write expected")
    };
    let blob = env.root.join("blobs").join(sha256);
    assert!(blob.exists(), "blob at {}", blob.display());
    std::fs::remove_file(&blob).expect("remove blob");
    let d = s.diff_action(a, &DiffLimits::default()).expect("diff");
    assert_eq!(
        d.then,
        SideState::MissingBackup {
            sha256: sha256.clone()
        }
    );
}

#[test]
fn origins_tell_the_agent_from_outside_and_other_sessions() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    for f in ["agent.txt", "user.txt", "other.txt"] {
        env.write(f, b"original\n");
    }
    scan(&s, ScanPhase::Boundary, 1, None);
    tool_edit(&env, &s, "c1", 1, "agent.txt", Some(b"agent\n"));
    tool_edit(&env, &s, "c2", 1, "user.txt", Some(b"agent\n"));
    tool_edit(&env, &s, "c3", 1, "other.txt", Some(b"agent\n"));
    // Between turns: the user edits one file; another session's shell call edits another.
    env.write("user.txt", b"by hand\n");
    let other = store.session("s2", &env.cwd).expect("session 2");
    scan(&other, ScanPhase::Boundary, 1, None);
    scan(&other, ScanPhase::Before, 2, Some("b1"));
    env.write("other.txt", b"session two\n");
    scan(&other, ScanPhase::After, 2, Some("b1"));
    // The next message of this session: the re-check records both.
    s.recheck_tracked(3).expect("recheck");
    let plan = s.plan_restore(1).expect("plan");
    let paths: Vec<RelPath> = plan.actions.iter().map(|a| a.path.clone()).collect();
    assert_eq!(paths.len(), 3);
    let origins = s.change_origins(1, &paths).expect("origins");
    let of = |p: &str| origins[&RelPath::from_bytes(p.as_bytes()).expect("path")].clone();
    assert_eq!(of("agent.txt"), ChangeOrigin::Agent);
    assert_eq!(of("user.txt"), ChangeOrigin::Outside);
    assert_eq!(
        of("other.txt"),
        ChangeOrigin::OtherSession {
            session_id: "s2".into()
        }
    );
    // After the outside edit, the agent writes the file again: the change is the agent's.
    tool_edit(&env, &s, "c4", 3, "user.txt", Some(b"agent again\n"));
    let origins = s.change_origins(1, &paths).expect("origins");
    assert_eq!(of_in(&origins, "user.txt"), ChangeOrigin::Agent);
}

fn of_in(origins: &std::collections::BTreeMap<RelPath, ChangeOrigin>, p: &str) -> ChangeOrigin {
    origins[&RelPath::from_bytes(p.as_bytes()).expect("path")].clone()
}

#[test]
fn a_selection_restores_only_the_chosen_files() {
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    env.write("a.txt", b"a0\n");
    env.write("dir/b.txt", b"b0\n");
    env.write("dir/c.txt", b"c0\n");
    tool_edit(&env, &s, "c1", 1, "a.txt", Some(b"a1\n"));
    tool_edit(&env, &s, "c2", 1, "dir/b.txt", Some(b"b1\n"));
    tool_edit(&env, &s, "c3", 1, "dir/c.txt", Some(b"c1\n"));

    let mut plan = s.plan_restore(1).expect("plan");
    // A filter that matches nothing is refused, the plan untouched.
    let e = plan.select(&[], &["nope.txt".into()]).expect_err("refused");
    assert_eq!(e.filter, "nope.txt");
    assert_eq!(plan.actions.len(), 3);

    let kept = plan
        .select(&["dir".into()], &["dir/c.txt".into()])
        .expect("select");
    let kept: Vec<_> = kept.iter().map(|a| a.display.as_str()).collect();
    assert_eq!(kept, ["a.txt", "dir/c.txt"]);
    let out = s.restore(&plan, "op1").expect("restore");
    assert_eq!(out.written.len(), 1);
    assert_eq!(env.read("dir/b.txt").as_deref(), Some(&b"b0\n"[..]));
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a1\n"[..]));
    assert_eq!(env.read("dir/c.txt").as_deref(), Some(&b"c1\n"[..]));
    // Undo brings back exactly what the restore changed.
    s.undo_restore("op1").expect("undo");
    assert_eq!(env.read("dir/b.txt").as_deref(), Some(&b"b1\n"[..]));
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a1\n"[..]));
}

/// Two names that are not valid UTF-8 and show alike (`n\xff.txt`, `n\xfe.txt`, both
/// `n\u{fffd}.txt`): a selection names one exactly by its `hex:` spelling; the display form
/// both share is refused as ambiguous, naming both spellings; a display form only one planned
/// path shows still names it.
#[test]
fn a_selection_names_a_file_that_is_not_utf8_exactly() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let store = env.store();
    let s = env.session(&store);
    let name = |b: &'static [u8]| std::path::Path::new(std::ffi::OsStr::from_bytes(b));
    for (call, b) in [
        ("c1", &b"n\xff.txt"[..]),
        ("c2", &b"n\xfe.txt"[..]),
        ("c3", &b"d\xfd/x"[..]),
    ] {
        s.capture_before(call, name(b)).expect("capture");
        std::fs::create_dir_all(env.cwd.join(name(b)).parent().expect("parent")).expect("mkdir");
        std::fs::write(env.cwd.join(name(b)), b"made\n").expect("write");
        s.commit(call, 1, true).expect("commit");
    }
    let plan = s.plan_restore(1).expect("plan");
    assert_eq!(plan.actions.len(), 3);

    let mut p = plan.clone();
    let e = p
        .select(&[], &["n\u{fffd}.txt".into()])
        .expect_err("ambiguous");
    let SelectionFault::Ambiguous(paths) = &e.fault else {
        panic!("{e:?}")
    };
    assert_eq!(paths.len(), 2);
    assert!(
        e.to_string().contains("hex:6eff2e747874") && e.to_string().contains("hex:6efe2e747874"),
        "{e}"
    );
    assert_eq!(p.actions.len(), 3, "nothing narrowed");

    let mut p = plan.clone();
    let kept = p.select(&[], &["hex:6eff2e747874".into()]).expect("select");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].path.as_bytes(), b"n\xff.txt");
    assert_eq!(p.actions.len(), 2);

    // A display form one planned directory shows names it (and what is under it).
    let mut p = plan.clone();
    let left = p.select(&["d\u{fffd}".into()], &[]).expect("select");
    assert_eq!(p.actions.len(), 1);
    assert_eq!(p.actions[0].path.as_bytes(), b"d\xfd/x");
    assert_eq!(left.len(), 2);

    let mut p = plan.clone();
    let e = p
        .select(&["hex:6eff"].map(String::from), &[])
        .expect_err("no match");
    assert_eq!(e.fault, SelectionFault::NoMatch);
    let e = p
        .select(&["hex:6ef"].map(String::from), &[])
        .expect_err("bad hex");
    assert_eq!(e.fault, SelectionFault::BadSpelling);
}

#[test]
fn a_file_kept_in_the_place_of_a_directory_keeps_the_directorys_files_out_of_the_selection() {
    let env = Env::new();
    let (pre, at1) = crate::faults::setup_dir_became_file(&env);
    let store = env.store();
    let s = env.session(&store);
    let plan = s.plan_restore(1).expect("plan");
    let planned: Vec<_> = plan.actions.iter().map(|a| a.display.as_str()).collect();
    // The file in the way is deleted first; the directory's files come after every other.
    assert_eq!(planned, ["a", "d", "d/sub/y", "d/x"]);
    assert!(plan.skipped.is_empty(), "{:?}", plan.skipped);

    // The file to recreate under the file in the way: its side now is absent.
    let d = s
        .diff_action(action(&plan.actions, "d/x"), &DiffLimits::default())
        .expect("diff");
    assert_eq!(d.now, SideState::Absent);
    assert_eq!((d.added, d.removed), (Some(1), Some(0)));

    let mut keeping = plan.clone();
    let kept = keeping.select(&[], &["d".into()]).expect("select");
    let kept: Vec<_> = kept.iter().map(|a| a.display.as_str()).collect();
    assert_eq!(kept, ["d", "d/sub/y", "d/x"]);
    let mut only = plan.clone();
    let left = only.select(&["d/x".into()], &[]).expect("select");
    assert_eq!(
        left.len(),
        4,
        "without the file's deletion, its directory's files stay out"
    );
    assert!(only.actions.is_empty());

    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.snapshot(), at1);
    // Undo puts the file back in the place of the directory; redo makes it again.
    s.undo_restore("op").expect("undo");
    assert_eq!(env.snapshot(), pre);
    assert!(env.cwd.join("d").is_file());
    let redo = s.plan_redo("op", &[], &[]).expect("redo plan");
    let out = s.restore(&redo, "redo").expect("redo");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.snapshot(), at1);
}

#[test]
fn a_file_replaced_by_a_directory_comes_back_once_its_files_go_and_not_while_one_is_kept() {
    let env = Env::new();
    let (pre, at1) = crate::faults::setup_file_became_dir(&env);
    let store = env.store();
    let s = env.session(&store);
    let plan = s.plan_restore(1).expect("plan");
    let planned: Vec<_> = plan.actions.iter().map(|a| a.display.as_str()).collect();
    // The directory's files go first; the file comes after every other action.
    assert_eq!(planned, ["a", "f/sub/y", "f/x", "f"]);
    assert!(plan.skipped.is_empty(), "{:?}", plan.skipped);

    // Keeping one of the directory's files keeps the directory, so the file stays out.
    let mut keeping = plan.clone();
    let kept = keeping.select(&[], &["f/x".into()]).expect("select");
    let kept: Vec<_> = kept.iter().map(|a| a.display.as_str()).collect();
    assert_eq!(kept, ["f/x", "f"]);

    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.snapshot(), at1);
    assert!(env.cwd.join("f").is_file());
    s.undo_restore("op").expect("undo");
    assert_eq!(env.snapshot(), pre);
    let redo = s.plan_redo("op", &[], &[]).expect("redo plan");
    let out = s.restore(&redo, "redo").expect("redo");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.snapshot(), at1);
    s.undo_restore("redo").expect("undo of the redo");
    assert_eq!(env.snapshot(), pre);

    // A file in the directory that the plan does not delete (made by hand): skipped.
    env.write("f/mine", b"by hand");
    let plan = s.plan_restore(1).expect("plan");
    let skipped: Vec<_> = plan
        .skipped
        .iter()
        .map(|p| (p.display.as_str(), p.reason.to_string()))
        .collect();
    assert_eq!(skipped, [("f", "is a directory".to_string())]);
}

#[test]
fn a_file_whose_path_a_file_under_it_needs_as_a_directory_is_skipped_not_failed() {
    // `d/c` is the agent's (message 1); `d` came later, a file made outside this session
    // where the directory was, then deleted by the agent (message 2). Nothing is at `d` now.
    let env = Env::new();
    env.write("d/c", b"c0");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    let at1 = env.snapshot();
    tool_edit(&env, &s, "c0", 1, "d/c", None);
    std::fs::remove_dir(env.cwd.join("d")).expect("rmdir");
    env.write("d", b"made elsewhere");
    s.recheck_tracked(2).expect("recheck");
    tool_edit(&env, &s, "c1", 2, "d", None);
    let plan = s.plan_restore(1).expect("plan");
    let planned: Vec<_> = plan.actions.iter().map(|a| a.display.as_str()).collect();
    assert_eq!(planned, ["d/c"]);
    let skipped: Vec<_> = plan
        .skipped
        .iter()
        .map(|p| (p.display.as_str(), p.reason.to_string()))
        .collect();
    assert_eq!(skipped, [("d", "is a directory".to_string())]);
    // The restore runs to its end (before, the file at `d` was written first and `d/c`
    // failed, leaving the restore open).
    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(env.snapshot(), at1);
    s.undo_restore("op").expect("undo");
    assert!(!env.cwd.join("d").exists());
}
