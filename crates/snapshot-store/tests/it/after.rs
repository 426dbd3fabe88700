//! Commits whose after-states are observed on the store's background thread
//! (`Session::observe_after_states_later`) record what commits observing them at once
//! record: the same frames, the same re-check findings, the same restores.

use std::collections::BTreeMap;
use std::path::Path;

use snapshot_store::{Session, Store};

use crate::common::{Env, Snap, log_records};

/// What one run of the scenario shows: each re-check's recorded paths, the count of
/// each kind of frame in the log, and the workspace after each rewind.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    rechecks: Vec<Vec<String>>,
    kinds: BTreeMap<u8, usize>,
    rewinds: Vec<Snap>,
}

fn content(round: u64, i: usize) -> Vec<u8> {
    format!("round {round} call {i}\n").into_bytes()
}

/// Three turns of tool calls (the same paths written again and again, quick and
/// blocking calls mixed, the handle flushed now and then), hand edits between the
/// turns, a reopen, then rewinds to each message.
fn scenario(later: bool) -> Seen {
    let env = Env::new();
    for i in 0..9 {
        env.write(format!("d/f{i}"), b"initial");
    }
    let mut rechecks = Vec::new();
    let recorded = |s: &Session, anchor: u64| -> Vec<String> {
        let mut v: Vec<String> = s
            .recheck_tracked(anchor)
            .expect("recheck")
            .recorded
            .iter()
            .map(|c| c.path.display())
            .collect();
        v.sort();
        v
    };
    {
        let store: Store = env.store();
        let s = env.session(&store);
        s.keep_locks_between_calls(true);
        s.observe_after_states_later(later);
        for anchor in [2u64, 4, 6] {
            rechecks.push(recorded(&s, anchor));
            for i in 0..40usize {
                let call = format!("c{anchor}-{i}");
                let rel = format!("d/f{}", (i * 5) % 9);
                if i % 3 == 0 {
                    s.capture_before_at(&call, Path::new(&rel), anchor)
                        .expect("capture");
                } else {
                    s.try_capture_before_at(&call, Path::new(&rel), anchor, 1 << 20)
                        .unwrap_or_else(|| s.capture_before_at(&call, Path::new(&rel), anchor))
                        .expect("capture");
                }
                if i % 11 == 10 {
                    env.remove(&rel);
                } else {
                    env.write(&rel, &content(anchor, i));
                }
                if i % 2 == 0 {
                    s.commit(&call, anchor, true).expect("commit");
                } else {
                    s.try_commit(&call, anchor, true, 64)
                        .unwrap_or_else(|| s.commit(&call, anchor, true))
                        .expect("commit");
                }
                if i % 13 == 12 {
                    s.flush().expect("flush");
                }
            }
            // One path written by call after call, each captured right after the last
            // commit (only calls that must not wait: none of them waits for the thread).
            for k in 0..6usize {
                let call = format!("q{anchor}-{k}");
                s.try_capture_before_at(&call, Path::new("d/f7"), anchor, 1 << 20)
                    .expect("runs")
                    .expect("capture");
                env.write("d/f7", &content(anchor, 100 + k));
                s.try_commit(&call, anchor, true, 64)
                    .expect("runs")
                    .expect("commit");
            }
            // A hand edit after the turn's calls settled: the next re-check records it.
            // (Settled: `flush` completes the commits whose after-states wait.)
            s.flush().expect("flush");
            env.write(format!("d/f{}", anchor % 9), b"edited by hand");
            env.write(format!("new{anchor}"), b"not tracked");
        }
        // The handle is dropped with commits still waiting for their write.
        s.capture_before_at("last", Path::new("d/f1"), 6)
            .expect("capture");
        env.write("d/f1", b"last");
        s.commit("last", 6, true).expect("commit");
    }
    let mut kinds = BTreeMap::new();
    for (k, _) in log_records(&env.root.join("sessions/s1/records.log")).0 {
        *kinds.entry(k).or_insert(0) += 1;
    }
    let store = env.store();
    let s = env.session(&store);
    rechecks.push(recorded(&s, 8));
    let mut rewinds = Vec::new();
    for target in [6u64, 4, 2] {
        let plan = s.plan_restore(target).expect("plan");
        let out = s.restore(&plan, &format!("op{target}")).expect("restore");
        assert!(out.failed.is_empty(), "{out:?}");
        rewinds.push(env.snapshot());
    }
    Seen {
        rechecks,
        kinds,
        rewinds,
    }
}

#[test]
fn after_states_observed_later_record_what_observing_them_at_the_commit_records() {
    let now = scenario(false);
    // The re-check found the turn's files, and the last rewind brought the first turn's
    // before-states back.
    assert!(now.rechecks[1].contains(&"d/f2".to_string()), "{now:?}");
    assert_eq!(
        now.rewinds[2].get(&b"d/f2"[..]).map(Vec::as_slice),
        Some(&b"initial"[..])
    );
    // The background thread races the next call in every run: run it a few times.
    for _ in 0..5 {
        assert_eq!(scenario(true), now);
    }
}
