//! Undoing a restore when some restored files changed since: refused until every
//! such file is decided, then each is kept as it is now or given its pre-restore
//! state, as asked.

use snapshot_store::{JournalError, RelPath};

use crate::common::{Env, tool_edit};

fn rel(p: &str) -> RelPath {
    RelPath::from_bytes(p.as_bytes()).expect("path")
}

fn restored_session(env: &Env) -> (snapshot_store::Store, snapshot_store::Session) {
    let store = env.store();
    let s = env.session(&store);
    for f in ["a.txt", "b.txt", "c.txt"] {
        env.write(f, format!("{f} before\n").as_bytes());
    }
    for (i, f) in ["a.txt", "b.txt", "c.txt"].iter().enumerate() {
        tool_edit(
            env,
            &s,
            &format!("c{i}"),
            1,
            f,
            Some(format!("{f} by the agent\n").as_bytes()),
        );
    }
    let plan = s.plan_restore(1).expect("plan");
    s.restore(&plan, "op1").expect("restore");
    (store, s)
}

#[test]
fn changed_files_are_kept_or_taken_as_decided() {
    let env = Env::new();
    let (_store, s) = restored_session(&env);
    // After the rewind the user edits a.txt and deletes b.txt.
    env.write("a.txt", b"a edited later\n");
    env.remove("b.txt");

    let e = s.undo_restore("op1").expect_err("stale");
    let JournalError::Stale { paths, .. } = e else {
        panic!("stale expected: {e}")
    };
    assert_eq!(paths, [rel("a.txt"), rel("b.txt")]);
    // Deciding only one of them still refuses, naming the other, and changes nothing.
    let e = s
        .undo_restore_with("op1", &[], &[rel("a.txt")])
        .expect_err("stale");
    let JournalError::Stale { paths, .. } = e else {
        panic!("stale expected: {e}")
    };
    assert_eq!(paths, [rel("b.txt")]);
    assert_eq!(env.read("c.txt").as_deref(), Some(&b"c.txt before\n"[..]));

    let out = s
        .undo_restore_with("op1", &[rel("b.txt")], &[rel("a.txt")])
        .expect("undo");
    assert_eq!(out.kept, [rel("a.txt")]);
    assert_eq!(
        env.read("a.txt").as_deref(),
        Some(&b"a edited later\n"[..]),
        "kept"
    );
    assert_eq!(
        env.read("b.txt").as_deref(),
        Some(&b"b.txt by the agent\n"[..]),
        "taken back"
    );
    assert_eq!(
        env.read("c.txt").as_deref(),
        Some(&b"c.txt by the agent\n"[..]),
        "unchanged since: undone"
    );
    // Undone once.
    assert!(s.undo_restore("op1").is_err());
}

#[test]
fn an_undo_keeping_what_changed_decides_nothing_and_keeps_every_changed_file() {
    let env = Env::new();
    let (_store, s) = restored_session(&env);
    env.write("a.txt", b"a edited later\n");
    env.remove("b.txt");
    let out = s.undo_restore_keeping_changed("op1").expect("undo");
    assert_eq!(out.kept, [rel("a.txt"), rel("b.txt")]);
    assert_eq!(env.read("a.txt").as_deref(), Some(&b"a edited later\n"[..]));
    assert_eq!(env.read("b.txt"), None, "kept deleted");
    assert_eq!(
        env.read("c.txt").as_deref(),
        Some(&b"c.txt by the agent\n"[..]),
        "unchanged since: undone"
    );
    // Only a completed restore can be undone, and only once.
    let e = s.undo_restore_keeping_changed("op1").expect_err("undone");
    assert!(matches!(e, JournalError::WrongState { .. }), "{e}");
}

#[test]
fn an_undo_with_nothing_changed_needs_no_decision() {
    let env = Env::new();
    let (_store, s) = restored_session(&env);
    let out = s
        .undo_restore_with("op1", &[rel("a.txt")], &[])
        .expect("undo");
    assert!(out.kept.is_empty());
    for f in ["a.txt", "b.txt", "c.txt"] {
        assert_eq!(
            env.read(f).unwrap(),
            format!("{f} by the agent\n").into_bytes()
        );
    }
}

#[test]
fn a_redo_plans_what_the_undone_restore_did_and_is_undoable_in_turn() {
    let env = Env::new();
    let (_store, s) = restored_session(&env);
    s.undo_restore("op1").expect("undo");
    // Nothing to redo before an undo: refused by state.
    assert!(s.plan_redo("op2-unknown", &[], &[]).is_err());
    // The user edits c.txt after the undo: the redo asks about it.
    env.write("c.txt", b"c edited after the undo\n");
    let e = s.plan_redo("op1", &[], &[]).expect_err("stale");
    let JournalError::Stale { paths, .. } = e else {
        panic!("stale expected: {e}")
    };
    assert_eq!(paths, [rel("c.txt")]);
    let plan = s.plan_redo("op1", &[], &[rel("c.txt")]).expect("plan");
    assert_eq!(plan.actions.len(), 2, "a.txt and b.txt; c.txt kept");
    let out = s.restore(&plan, "redo1").expect("redo");
    assert_eq!(out.written.len(), 2);
    for f in ["a.txt", "b.txt"] {
        assert_eq!(
            env.read(f).unwrap(),
            format!("{f} before\n").into_bytes(),
            "as the rewind left it"
        );
    }
    assert_eq!(
        env.read("c.txt").as_deref(),
        Some(&b"c edited after the undo\n"[..])
    );
    // The redo is a restore of its own: undoing it puts the undo's state back.
    s.undo_restore("redo1").expect("undo the redo");
    assert_eq!(
        env.read("a.txt").as_deref(),
        Some(&b"a.txt by the agent\n"[..])
    );
}
