//! Packs: compaction packs loose blobs into zstd-compressed packs; restore, diff,
//! verify and garbage collection read packed content as they read loose; a SIGKILL at
//! every seam of packing and of a pack's rewrite loses nothing; a fault on every
//! filesystem call of a compaction loses nothing; a torn or flipped pack is named by
//! verify, member by member, and never restored from.

use std::path::Path;
use std::sync::Arc;

use rewind_test_support::{each_hit, each_point};
use snapshot_store::{Problem, Session, Store, StoreOptions};

use crate::common::{Env, Snap, assert_snap, count_files, tool_edit};
use crate::crash::run_child_as;
use crate::faults::FailNth;

/// `n` files of about 3 KiB of source-like text each, distinct.
fn small_files(env: &Env, prefix: &str, n: usize) {
    for i in 0..n {
        let mut text = String::new();
        for line in 0..60 {
            text.push_str(&format!(
                "fn {prefix}_item_{i}_{line}(x: u64) -> u64 {{ x * {line} + {i} }}\n"
            ));
        }
        env.write(format!("{prefix}/f{i}.rs"), text.as_bytes());
    }
}

/// Edits every file under `prefix` by a tool call at anchor 1 (their before-states go
/// to blob files), then once more at anchor 2.
fn edit_all(env: &Env, s: &Session, prefix: &str, n: usize) {
    for i in 0..n {
        let rel = format!("{prefix}/f{i}.rs");
        tool_edit(
            env,
            s,
            &format!("{prefix}-a{i}"),
            1,
            &rel,
            Some(b"changed once"),
        );
    }
    for i in 0..n {
        let rel = format!("{prefix}/f{i}.rs");
        tool_edit(
            env,
            s,
            &format!("{prefix}-b{i}"),
            2,
            &rel,
            Some(b"changed twice"),
        );
    }
}

fn store_blob_files(env: &Env) -> Store {
    env.store_with_blob_files()
}

fn restore_to(s: &Session, anchor: u64, op: &str) {
    let plan = s.plan_restore(anchor).expect("plan");
    let out = s.restore(&plan, op).expect("restore");
    assert!(out.failed.is_empty(), "{op}: {:?}", out.failed);
}

fn clean_verify(store: &Store, what: &str) {
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(report.problems.is_empty(), "{what}: {:?}", report.problems);
}

fn packs(env: &Env) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(env.root.join("packs"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn compaction_packs_every_loose_blob_and_restore_diff_and_verify_read_them() {
    let env = Env::new();
    small_files(&env, "src", 40);
    let pre: Snap = env.snapshot();
    let store = store_blob_files(&env);
    let s = env.session(&store);
    edit_all(&env, &s, "src", 40);
    s.flush().expect("flush");
    let loose = env.blob_count();
    assert!(loose >= 40, "before-states in blob files: {loose}");
    let logical: u64 = pre.values().map(|v| v.len() as u64).sum();

    let report = store.compact().expect("compact");
    assert_eq!(report.blobs_packed, loose, "{report:?}");
    assert_eq!(report.packs_written, 1);
    assert_eq!(env.blob_count(), 0, "no loose blob left");
    assert!(
        report.pack_bytes * 3 < report.bytes_packed,
        "compressed: {} of {} bytes",
        report.pack_bytes,
        report.bytes_packed
    );
    assert!(report.bytes_packed >= logical);
    let files = packs(&env);
    assert_eq!(files.len(), 2, "a pack and its index: {files:?}");
    clean_verify(&store, "after compaction");

    // A second compaction finds nothing to do.
    let again = store.compact().expect("compact again");
    assert_eq!((again.blobs_packed, again.packs_written), (0, 0));

    // The diff of a planned file reads the packed before-state.
    let plan = s.plan_restore(1).expect("plan");
    let action = plan.actions.first().expect("an action");
    let diff = s
        .diff_action(action, &snapshot_store::DiffLimits::default())
        .expect("diff");
    assert!(format!("{diff:?}").contains("item"), "{diff:?}");

    // A restore from packed content, in another handle of the same store too.
    restore_to(&s, 1, "op1");
    assert_snap(&env.snapshot(), &pre, "restored from the pack");
    let other = env.store();
    let s2 = env.session(&other);
    let _ = s2.anchors().expect("anchors");

    // Garbage collection keeps every live packed member.
    let gc = store.collect_garbage().expect("gc");
    assert_eq!(gc.pack_members_dropped, 0, "{gc:?}");
    clean_verify(&store, "after gc");
}

#[test]
fn a_new_capture_of_packed_content_writes_no_loose_blob() {
    let env = Env::new();
    small_files(&env, "src", 5);
    let store = store_blob_files(&env);
    let s = env.session(&store);
    edit_all(&env, &s, "src", 5);
    store.compact().expect("compact");
    assert_eq!(env.blob_count(), 0);
    // The same content again, in another session: found in the pack, not written loose.
    let env2_cwd = env.tmp.path().join("ws2");
    std::fs::create_dir_all(&env2_cwd).expect("mkdir");
    let first = std::fs::read(env.tmp.path().join("ws/src/f0.rs")).unwrap_or_default();
    drop(first);
    let mut text = String::new();
    for line in 0..60 {
        text.push_str(&format!(
            "fn src_item_0_{line}(x: u64) -> u64 {{ x * {line} + 0 }}\n"
        ));
    }
    std::fs::write(env2_cwd.join("g.rs"), &text).expect("write");
    let s2 = store.session("s2", &env2_cwd).expect("session");
    s2.capture_before("c", Path::new("g.rs")).expect("capture");
    std::fs::write(env2_cwd.join("g.rs"), b"x").expect("write");
    s2.commit("c", 1, true).expect("commit");
    assert_eq!(env.blob_count(), 0, "deduplicated against the pack");
    let plan = s2.plan_restore(1).expect("plan");
    s2.restore(&plan, "op").expect("restore");
    assert_eq!(
        std::fs::read(env2_cwd.join("g.rs")).expect("read"),
        text.as_bytes()
    );
}

#[test]
fn dead_members_go_with_garbage_collection() {
    let env = Env::new();
    small_files(&env, "a", 10);
    let store = store_blob_files(&env);
    let s = env.session(&store);
    edit_all(&env, &s, "a", 10);
    // A second session's before-states in the same pack.
    let cwd2 = env.tmp.path().join("ws2");
    std::fs::create_dir_all(&cwd2).expect("mkdir");
    for i in 0..10 {
        std::fs::write(
            cwd2.join(format!("g{i}")),
            format!("other {i} ").repeat(300),
        )
        .expect("write");
    }
    let s2 = store.session("s2", &cwd2).expect("session");
    for i in 0..10 {
        let rel = format!("g{i}");
        s2.capture_before(&format!("c{i}"), Path::new(&rel))
            .expect("capture");
        std::fs::write(cwd2.join(&rel), b"x").expect("write");
        s2.commit(&format!("c{i}"), 1, true).expect("commit");
    }
    store.compact().expect("compact");
    let before = packs(&env);
    assert_eq!(before.len(), 2);
    // The second session goes: about half the pack is dead, so it is rewritten.
    let gc = s2.clear_session().expect("clear");
    assert!(gc.pack_members_dropped >= 10, "{gc:?}");
    let after = packs(&env);
    assert_eq!(after.len(), 2, "one pack again: {after:?}");
    assert_ne!(before, after, "rewritten");
    clean_verify(&store, "after the rewrite");
    restore_to(&s, 1, "op");
    // Every session gone: the pack goes whole.
    s.clear_session().expect("clear");
    store.collect_garbage().expect("gc");
    assert!(packs(&env).is_empty(), "{:?}", packs(&env));
}

#[test]
fn verify_names_each_damaged_member_and_restore_refuses_it() {
    for damage in ["flip", "tear"] {
        let env = Env::new();
        small_files(&env, "src", 12);
        let pre = env.snapshot();
        let store = store_blob_files(&env);
        let s = env.session(&store);
        edit_all(&env, &s, "src", 12);
        store.compact().expect("compact");
        let pack = packs(&env)
            .into_iter()
            .find(|n| n.ends_with(".pack"))
            .expect("a pack");
        let path = env.root.join("packs").join(&pack);
        let mut bytes = std::fs::read(&path).expect("read pack");
        match damage {
            "flip" => {
                let at = bytes.len() / 2;
                bytes[at] ^= 0x20;
            }
            _ => bytes.truncate(bytes.len() - 7),
        }
        std::fs::write(&path, &bytes).expect("write pack");

        let fresh = env.store();
        let report = fresh.verify(&mut |_, _| {}).expect("verify");
        let named: Vec<&Problem> = report
            .problems
            .iter()
            .filter(
                |p| matches!(p, Problem::CorruptPackMember { pack: p, .. } if p.ends_with(&pack)),
            )
            .collect();
        assert!(!named.is_empty(), "{damage}: {:?}", report.problems);
        for p in &named {
            assert!(p.to_string().contains("corrupt pack member"), "{p}");
        }
        // A restore never writes unverified bytes: the damaged members fail alone, named.
        let s = env.session(&fresh);
        let plan = s.plan_restore(1).expect("plan");
        let out = s.restore(&plan, "op").expect("restore");
        assert!(
            !out.failed.is_empty(),
            "{damage}: some files could not be restored"
        );
        let now = env.snapshot();
        for (k, v) in &now {
            if let Some(want) = pre.get(k) {
                assert!(
                    v == want || v.starts_with(b"changed"),
                    "{damage}: no mix written"
                );
            }
        }
        drop(s);
    }
}

/// The fixture of the crash tests: 30 files edited, their before-states in blob files.
fn crash_fixture(env: &Env) -> Snap {
    small_files(env, "src", 30);
    let pre = env.snapshot();
    let store = store_blob_files(env);
    let s = env.session(&store);
    edit_all(env, &s, "src", 30);
    s.flush().expect("flush");
    pre
}

#[test]
fn kill_at_every_seam_of_packing_loses_nothing() {
    each_point(
        ["pack-written", "pack-indexed", "pack-loose-removed"],
        |point| {
            each_hit(point, |hit| {
                let env = Env::new();
                let pre = crash_fixture(&env);
                if !run_child_as(env.tmp.path(), "compact", point, hit, false, true) {
                    return false;
                }
                let store = env.store_with_blob_files();
                clean_verify(&store, &format!("{point}#{hit} after the kill"));
                let s = env.session(&store);
                restore_to(&s, 1, "op");
                assert_snap(&env.snapshot(), &pre, &format!("{point}#{hit}"));
                // A later compaction and collection finish the job.
                store.compact().expect("compact");
                store.collect_garbage().expect("gc");
                assert_eq!(env.blob_count(), 0, "{point}#{hit}: all packed");
                let names = packs(&env);
                assert!(
                    names.iter().all(|n| !n.starts_with('.')),
                    "{point}#{hit}: temporaries swept: {names:?}"
                );
                assert!(
                    names.iter().filter(|n| n.ends_with(".pack")).count()
                        == names.iter().filter(|n| n.ends_with(".idx")).count(),
                    "{point}#{hit}: no pack without its index: {names:?}"
                );
                clean_verify(&store, &format!("{point}#{hit} at the end"));
                true
            });
        },
    );
}

#[test]
fn kill_at_every_seam_of_a_pack_rewrite_loses_nothing() {
    each_point(
        ["pack-written", "pack-indexed", "pack-old-unindexed"],
        |point| {
            each_hit(point, |hit| {
                let env = Env::new();
                let pre = crash_fixture(&env);
                {
                    let store = env.store_with_blob_files();
                    // A second session whose before-states share the pack, then removed.
                    let cwd2 = env.tmp.path().join("ws2");
                    std::fs::create_dir_all(&cwd2).expect("mkdir");
                    let s2 = store.session("s2", &cwd2).expect("session");
                    for i in 0..20 {
                        let rel = format!("g{i}");
                        std::fs::write(cwd2.join(&rel), format!("dead {i} ").repeat(400))
                            .expect("write");
                        s2.capture_before(&format!("c{i}"), Path::new(&rel))
                            .expect("capture");
                        std::fs::write(cwd2.join(&rel), b"x").expect("write");
                        s2.commit(&format!("c{i}"), 1, true).expect("commit");
                    }
                    store.compact().expect("compact");
                }
                // The second session's directory goes by hand: its members are dead for
                // the child's garbage collection to drop.
                std::fs::remove_dir_all(env.root.join("sessions/s2")).expect("rm s2");
                if !run_child_as(env.tmp.path(), "gc", point, hit, false, true) {
                    return false;
                }
                let store = env.store_with_blob_files();
                clean_verify(&store, &format!("{point}#{hit} after the kill"));
                let s = env.session(&store);
                restore_to(&s, 1, "op");
                assert_snap(&env.snapshot(), &pre, &format!("{point}#{hit}"));
                store.collect_garbage().expect("gc");
                clean_verify(&store, &format!("{point}#{hit} at the end"));
                true
            });
        },
    );
}

#[test]
fn a_fault_on_every_filesystem_call_of_a_compaction_loses_nothing() {
    let seam = FailNth::new();
    let mut n = 0;
    loop {
        let env = Env::new();
        let pre = crash_fixture(&env);
        let store = Store::open(
            &env.root,
            StoreOptions {
                seam: Arc::clone(&seam) as Arc<dyn snapshot_store::FaultSeam>,
                keep_in_log_bytes: 0,
                ..StoreOptions::default()
            },
        )
        .expect("open");
        seam.arm(n, [5, 28, 13][n % 3]);
        let r = store.compact();
        let fired = seam.fired();
        let hit = seam.hit.lock().expect("lock").clone();
        seam.disarm();
        if !fired {
            r.expect("a compaction no fault reached succeeds");
            break;
        }
        // A fault reading the workspace indexes costs only the members' order.
        let ordering = hit
            .as_ref()
            .is_some_and(|(_, _, p)| p.starts_with("workspaces"));
        assert!(r.is_err() || ordering, "call {n}: the fault is reported ({hit:?})");
        drop(store);
        let store = env.store_with_blob_files();
        clean_verify(&store, &format!("fault at call {n}"));
        let s = env.session(&store);
        restore_to(&s, 1, "op");
        assert_snap(&env.snapshot(), &pre, &format!("fault at call {n}"));
        store.compact().expect("compact after the fault");
        store.collect_garbage().expect("gc after the fault");
        assert_eq!(env.blob_count(), 0);
        clean_verify(&store, &format!("fault at call {n}, compacted again"));
        n += 1;
    }
    assert!(n > 30, "every call of the compaction was failed once ({n})");
    let _ = count_files;
}

#[test]
fn a_repair_keeps_the_sound_members_of_a_damaged_pack_and_moves_it_aside() {
    let env = Env::new();
    small_files(&env, "src", 200);
    let store = store_blob_files(&env);
    let s = env.session(&store);
    edit_all(&env, &s, "src", 200);
    store.compact().expect("compact");
    let pack = packs(&env)
        .into_iter()
        .find(|n| n.ends_with(".pack"))
        .expect("a pack");
    let path = env.root.join("packs").join(&pack);
    let mut bytes = std::fs::read(&path).expect("read pack");
    // A flipped byte in the first chunk only (the pack holds several).
    bytes[100] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write pack");

    let fresh = env.store();
    let report = fresh.verify(&mut |_, _| {}).expect("verify");
    let damaged: Vec<String> = report
        .problems
        .iter()
        .filter_map(|p| match p {
            Problem::CorruptPackMember { sha256, .. } => Some(sha256.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !damaged.is_empty() && damaged.len() < 200,
        "{}",
        damaged.len()
    );
    let q = fresh.quarantine(&report).expect("quarantine");
    assert!(q.moved.iter().any(|m| m.ends_with(&pack)), "{q:?}");
    assert!(q.dir.is_some());
    assert!(!path.exists(), "the damaged pack moved aside");

    // Afterwards: the damaged members are missing (named), every other one reads back.
    let again = fresh.verify(&mut |_, _| {}).expect("verify");
    assert!(
        again
            .problems
            .iter()
            .all(|p| matches!(p, Problem::MissingBlob { sha256, .. } if damaged.contains(sha256))),
        "{:?}",
        again.problems
    );
    let s = env.session(&fresh);
    let plan = s.plan_restore(1).expect("plan");
    let out = s.restore(&plan, "op").expect("restore");
    assert!(
        !out.failed.is_empty() && out.failed.len() <= damaged.len(),
        "{:?}",
        out.failed.len()
    );
}
