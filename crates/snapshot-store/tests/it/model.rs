//! Property test: random sequences of messages, tool edits, external edits,
//! rewinds, undos, prunes and reopens, checked after every step against a small
//! in-memory model of what the workspace must contain.
//!
//! Default: 24 cases. Long run: `PROPTEST_CASES=10000 cargo test -p snapshot-store --release --test it model`.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::Config;
use snapshot_store::{JournalState, PruneOptions, Session, Store};

use crate::common::Env;

const FILES: [&str; 5] = ["a", "b", "d/c", "d/e/f", "z.bin"];

fn content(i: usize) -> Vec<u8> {
    match i {
        0 => Vec::new(),
        1 => b"x".to_vec(),
        2 => b"hello".to_vec(),
        3 => b"hello world, a little longer".to_vec(),
        4 => (0..=255u8).collect(),
        5 => vec![0u8; 70_000],
        _ => b"x".to_vec(),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Message,
    Tool {
        file: usize,
        content: Option<usize>,
        ok: bool,
    },
    External {
        file: usize,
        content: Option<usize>,
    },
    Rewind {
        pick: usize,
    },
    Undo,
    Prune {
        keep: usize,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Message),
        6 => (0..FILES.len(), proptest::option::weighted(0.8, 0..7usize), proptest::bool::weighted(0.85))
            .prop_map(|(file, content, ok)| Op::Tool { file, content, ok }),
        2 => (0..FILES.len(), proptest::option::weighted(0.7, 0..7usize)).prop_map(|(file, content)| Op::External { file, content }),
        2 => any::<usize>().prop_map(|pick| Op::Rewind { pick }),
        1 => Just(Op::Undo),
        1 => (1..4usize).prop_map(|keep| Op::Prune { keep }),
        1 => Just(Op::Reopen),
    ]
}

use rewind_test_support::model::{Disk, Restorable};

struct Model {
    disk: Disk,
    seq: u64,
    anchor: u64,
    /// Rewind candidates: (seq, disk at that message's boundary).
    boundaries: Vec<(u64, Disk)>,
    /// Which files a rewind restores (from the first successful tool call on each), and to what.
    restorable: Restorable,
    /// Last restore: op id and the pre-restore disk, while undo is valid.
    undo: Option<(String, Disk)>,
    min_anchor: u64,
    ops: usize,
}

fn apply_disk(env: &Env, file: &str, c: Option<&Vec<u8>>) {
    match c {
        Some(c) => env.write(file, c),
        None => env.remove(file),
    }
}

fn actual(env: &Env) -> Disk {
    let snap = env.snapshot();
    FILES
        .iter()
        .filter_map(|f| snap.get(f.as_bytes()).map(|c| (*f, c.clone())))
        .collect()
}

fn config() -> Config {
    Config {
        cases: rewind_test_support::cases(24),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops, false);
    }

    /// The same with the host's way of calling: captures name their anchor, so their
    /// commits join the handle's next write.
    #[test]
    fn store_matches_model_with_commits_joining_the_next_write(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops, true);
    }
}

fn run(ops: Vec<Op>, anchored: bool) {
    let env = Env::new();
    let mut store: Store = env.store_with(snapshot_store::StoreOptions {
        compact_min_bytes: 2048,
        ..snapshot_store::StoreOptions::default()
    });
    let mut s: Session = env.session(&store);
    let mut m = Model {
        disk: Disk::new(),
        seq: 0,
        anchor: 0,
        boundaries: Vec::new(),
        restorable: Restorable::default(),
        undo: None,
        min_anchor: 0,
        ops: 0,
    };
    // The conversation starts with a message.
    let mut all = vec![Op::Message];
    all.extend(ops);
    for op in all {
        m.ops += 1;
        let step = format!("step {} {op:?}", m.ops);
        match op {
            Op::Message => {
                m.seq += 1 + (m.ops as u64 % 3);
                m.anchor = m.seq;
                s.recheck_tracked(m.seq)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                m.boundaries.push((m.seq, m.disk.clone()));
            }
            Op::Tool {
                file,
                content: c,
                ok,
            } => {
                let f = FILES[file];
                let call = format!("call-{}", m.ops);
                if anchored {
                    s.capture_before_at(&call, Path::new(f), m.anchor)
                } else {
                    s.capture_before(&call, Path::new(f))
                }
                .unwrap_or_else(|e| panic!("{step}: {e}"));
                if ok {
                    let new = c.map(content);
                    apply_disk(&env, f, new.as_ref());
                    m.restorable.track(f, m.anchor, m.disk.get(f).cloned());
                    match new {
                        Some(n) => m.disk.insert(f, n),
                        None => m.disk.remove(f),
                    };
                    m.undo = None;
                }
                s.commit(&call, m.anchor, ok)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
            }
            Op::External { file, content: c } => {
                let f = FILES[file];
                let new = c.map(content);
                apply_disk(&env, f, new.as_ref());
                match new {
                    Some(n) => m.disk.insert(f, n),
                    None => m.disk.remove(f),
                };
                m.undo = None;
            }
            Op::Rewind { pick } => {
                let candidates: Vec<usize> = (0..m.boundaries.len())
                    .filter(|i| m.boundaries[*i].0 >= m.min_anchor)
                    .collect();
                if candidates.is_empty() {
                    continue;
                }
                let idx = candidates[pick % candidates.len()];
                let (target, at) = m.boundaries[idx].clone();
                // The rewind marker is a user message too: a boundary (changes since the last
                // message are recorded) and the anchor of any call until the next message.
                m.seq += 1;
                m.anchor = m.seq;
                s.recheck_tracked(m.seq)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                let plan = s
                    .plan_restore(target)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                let op_id = format!("op-{}", m.ops);
                let out = s
                    .restore(&plan, &op_id)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                assert!(out.failed.is_empty(), "{step}: {out:?}");
                assert_eq!(out.state, JournalState::Completed, "{step}");
                let want = m.restorable.rewound(&m.disk, target, &at);
                assert_eq!(actual(&env), want, "{step}: rewind to {target}");
                let again = s
                    .plan_restore(target)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                assert!(
                    again.is_empty(),
                    "{step}: repeated rewind plans nothing: {again:?}"
                );
                m.undo = Some((op_id, m.disk.clone()));
                m.disk = want;
                m.boundaries.truncate(idx);
            }
            Op::Undo => {
                let Some((op_id, pre)) = m.undo.take() else {
                    continue;
                };
                let out = s
                    .undo_restore(&op_id)
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                assert_eq!(out.state, JournalState::Undone, "{step}: {out:?}");
                assert_eq!(actual(&env), pre, "{step}: undo");
                m.disk = pre;
            }
            Op::Prune { keep } => {
                let rep = s
                    .prune(PruneOptions {
                        keep_groups: keep,
                        keep_journals: 3,
                    })
                    .unwrap_or_else(|e| panic!("{step}: {e}"));
                if rep.groups_removed > 0 {
                    let first = s
                        .anchors()
                        .unwrap_or_else(|e| panic!("{step}: {e}"))
                        .first()
                        .copied();
                    m.min_anchor = m.min_anchor.max(first.unwrap_or(u64::MAX));
                }
            }
            Op::Reopen => {
                drop(s);
                drop(store);
                store = env.store_with(snapshot_store::StoreOptions {
                    compact_min_bytes: 2048,
                    ..snapshot_store::StoreOptions::default()
                });
                s = env.session(&store);
            }
        }
        assert_eq!(actual(&env), m.disk, "{step}: model and disk agree");
    }
}
