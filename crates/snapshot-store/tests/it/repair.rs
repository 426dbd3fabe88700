//! Damage to a record log as `verify` names it and `quarantine` (the `repair` of the
//! command line) handles it: bytes a reader ignores are named, the readable frames before
//! damage are kept, the damaged bytes go to the quarantine, and the loss is noted where
//! later commands find it.

use snapshot_store::{Problem, Store, Warning};

use crate::common::Env;

/// A session `s1` with two messages: a.txt changed at @1, b.txt created at @2.
fn two_messages(env: &Env) -> Store {
    env.write("a.txt", b"a0");
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(1).expect("recheck");
    s.capture_before("c1", "a.txt".as_ref()).expect("capture");
    env.write("a.txt", b"a1");
    s.commit("c1", 1, true).expect("commit");
    s.recheck_tracked(2).expect("recheck");
    s.capture_before("c2", "b.txt".as_ref()).expect("capture");
    env.write("b.txt", b"b1");
    s.commit("c2", 2, true).expect("commit");
    s.flush().expect("flush");
    drop(s);
    store
}

/// `(start, end)` of every whole frame of a record log.
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut o = 8;
    while o + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4")) as usize;
        if o + 12 + len > bytes.len() {
            break;
        }
        out.push((o, o + 12 + len));
        o += 12 + len;
    }
    out
}

fn log_path(env: &Env) -> std::path::PathBuf {
    env.root.join("sessions/s1/records.log")
}

#[test]
fn verify_names_the_bytes_a_log_cut_mid_frame_loses() {
    let env = Env::new();
    let store = two_messages(&env);
    let log = log_path(&env);
    let bytes = std::fs::read(&log).expect("read");
    let last = *frames(&bytes).last().expect("frames");
    let cut = bytes.len() - 3;
    std::fs::write(&log, &bytes[..cut]).expect("cut");
    let report = store.verify(&mut |_, _| {}).expect("verify");
    // What a crash mid-append leaves too: not damage, but named with where it starts.
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(
        report.warnings,
        [Warning::IgnoredTail {
            path: "sessions/s1/records.log".into(),
            offset: last.0 as u64,
            bytes: (cut - last.0) as u64,
        }]
    );
    assert!(
        report.warnings[0]
            .to_string()
            .contains(&format!("offset {}", last.0)),
        "{}",
        report.warnings[0]
    );
}

#[test]
fn repair_keeps_the_frames_before_the_damage_and_notes_the_loss() {
    let env = Env::new();
    let store = two_messages(&env);
    let log = log_path(&env);
    let bytes = std::fs::read(&log).expect("read");
    let fr = frames(&bytes);
    assert!(fr.len() >= 6, "{fr:?}");
    // One flipped byte in the payload of the frame before the last: damage.
    let (start, _) = fr[fr.len() - 2];
    let mut damaged = bytes.clone();
    damaged[start + 12 + 1] ^= 0x40;
    std::fs::write(&log, &damaged).expect("damage");
    let report = store.verify(&mut |_, _| {}).expect("verify");
    assert!(
        matches!(report.problems.as_slice(), [Problem::CorruptRecord { path, .. }] if path == "sessions/s1/records.log"),
        "{:?}",
        report.problems
    );
    let q = store.quarantine(&report).expect("quarantine");
    assert_eq!(q.moved, ["sessions/s1/records.log"]);
    // The frames before the damage stay in the session; the whole damaged file is in the
    // quarantine.
    assert_eq!(std::fs::read(&log).expect("kept"), &bytes[..start]);
    let qdir = env.root.join(q.dir.as_deref().expect("quarantine dir"));
    assert_eq!(
        std::fs::read(qdir.join("sessions/s1/records.log")).expect("quarantined"),
        damaged
    );
    assert_eq!(q.records_lost.len(), 1, "{q:?}");
    let lost = &q.records_lost[0];
    assert_eq!(
        (lost.session_id.as_str(), lost.kept_bytes, lost.lost_bytes),
        ("s1", start as u64, (damaged.len() - start) as u64)
    );
    assert!(lost.detail.contains("checksum"), "{}", lost.detail);
    // The note is durable: read back by a later process as the repair left it.
    assert_eq!(store.records_lost("s1").expect("note"), q.records_lost);
    // The store is whole again; the loss is reported by verify as a warning.
    let after = store.verify(&mut |_, _| {}).expect("verify");
    assert!(after.problems.is_empty(), "{:?}", after.problems);
    assert!(
        matches!(after.warnings.as_slice(), [Warning::RecordsLost { loss, .. }] if loss == lost),
        "{:?}",
        after.warnings
    );
    // The session reads what was kept: the first message's change is still restorable.
    let s = env.session(&store);
    assert!(s.anchors().expect("anchors").contains(&1));
    let plan = s.plan_restore(1).expect("plan");
    assert!(
        plan.actions.iter().any(|a| a.display == "a.txt"),
        "{plan:?}"
    );
    // A second repair finds nothing; a later loss is noted beside the first.
    drop(s);
    let mut again = std::fs::read(&log).expect("read");
    let fr2 = frames(&again);
    let at = fr2[1].0 + 12;
    again[at] ^= 0x01;
    std::fs::write(&log, &again).expect("damage again");
    let q2 = store
        .quarantine(&store.verify(&mut |_, _| {}).expect("verify"))
        .expect("quarantine");
    assert_eq!(q2.records_lost.len(), 1);
    assert_eq!(store.records_lost("s1").expect("notes").len(), 2);
}

#[test]
fn a_log_whose_header_is_damaged_moves_whole_and_the_loss_is_noted() {
    let env = Env::new();
    let store = two_messages(&env);
    let log = log_path(&env);
    let mut bytes = std::fs::read(&log).expect("read");
    bytes[1] ^= 0xff;
    std::fs::write(&log, &bytes).expect("damage");
    let q = store
        .quarantine(&store.verify(&mut |_, _| {}).expect("verify"))
        .expect("quarantine");
    assert_eq!(q.moved, ["sessions/s1/records.log"]);
    assert!(!log.exists(), "nothing readable to keep");
    let lost = store.records_lost("s1").expect("note");
    assert_eq!(lost.len(), 1);
    assert_eq!(
        (lost[0].kept_bytes, lost[0].lost_bytes),
        (0, bytes.len() as u64)
    );
    assert!(
        store
            .list_sessions()
            .expect("list")
            .contains(&"s1".to_string())
    );
}
