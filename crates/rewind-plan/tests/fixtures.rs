//! The planner on real session logs recorded from the DSH host
//! (`tests/fixtures/*.jsonl`, made by `scripts/record-fixtures.sh`).

use std::path::PathBuf;

use rewind_plan::{
    ForkError, PlanError, SessionLog, Target, fold_surface, list_candidates, plan_rewind,
};

fn fixture(name: &str) -> SessionLog {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    SessionLog::from_jsonl(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const FIXTURES: [&str; 7] = [
    "edits.jsonl",
    "compaction.jsonl",
    "steering.jsonl",
    "steering-pending.jsonl",
    "rewind.jsonl",
    "rewind-twice.jsonl",
    "injected.jsonl",
];

/// Appends the plan's marker and folds again: the surface must be exactly the
/// nodes before the target plus the marker.
fn check_plan_applies(log: &SessionLog, target: Target) -> rewind_plan::RewindPlan {
    let before = fold_surface(&log.events).expect("fixture folds");
    let plan = plan_rewind(log, target).expect("plans");
    if let Some(marker) = &plan.marker {
        let mut events = log.events.clone();
        events.push(marker.to_event(log.next_seq()));
        let after = fold_surface(&events).expect("marker passes the surface rules");
        let pos = before.position(plan.target_seq).expect("target on surface");
        let mut expected = before.nodes[..pos].to_vec();
        expected.push(log.next_seq());
        assert_eq!(after.nodes, expected);
        assert_eq!(plan.shadowed_seqs, before.nodes[pos..].to_vec());
    }
    plan
}

#[test]
fn candidates_of_every_fixture() {
    for name in FIXTURES {
        let log = fixture(name);
        let candidates = list_candidates(&log).expect("candidates");
        insta::assert_json_snapshot!(format!("candidates-{name}"), candidates);
    }
}

#[test]
fn plans_for_every_candidate_apply_cleanly() {
    for name in FIXTURES {
        let log = fixture(name);
        let candidates = list_candidates(&log).expect("candidates");
        assert!(!candidates.is_empty(), "{name} has candidates");
        for c in &candidates {
            let by_index = check_plan_applies(&log, Target::Index(c.index));
            let by_seq = check_plan_applies(&log, Target::Seq(c.seq));
            assert_eq!(
                by_index, by_seq,
                "{name}: index {} and @{} plan alike",
                c.index, c.seq
            );
        }
        let oldest = candidates.last().map(|c| c.index).unwrap_or(1);
        let plan = check_plan_applies(&log, Target::Index(oldest));
        insta::assert_json_snapshot!(format!("plan-oldest-{name}"), plan);
    }
}

#[test]
fn earlier_rewinds_and_compaction_shadow_messages() {
    for name in ["rewind.jsonl", "rewind-twice.jsonl", "compaction.jsonl"] {
        let log = fixture(name);
        let surface = fold_surface(&log.events).expect("folds");
        assert!(!surface.replacements.is_empty(), "{name} has a replace");
        let shadowed_human: Vec<u64> = surface
            .replacements
            .iter()
            .flat_map(|r| r.shadowed_seqs.iter().copied())
            .filter(|s| log.get(*s).is_some_and(|e| e.is_human_message()))
            .filter(|s| surface.position(*s).is_none())
            .collect();
        assert!(!shadowed_human.is_empty(), "{name} shadows a human message");
        for seq in shadowed_human {
            let err = plan_rewind(&log, Target::Seq(seq)).unwrap_err();
            assert!(
                matches!(err, PlanError::NotOnSurface { .. }),
                "{name} @{seq}: {err:?}"
            );
        }
    }
}

#[test]
fn injected_context_markers_and_checkpoints_are_refused() {
    for name in FIXTURES {
        let log = fixture(name);
        for event in &log.events {
            let Some(message) = event.user_message() else {
                continue;
            };
            if message.is_human() {
                continue;
            }
            let err = plan_rewind(&log, Target::Seq(event.seq)).unwrap_err();
            assert!(
                matches!(err, PlanError::NotHumanMessage { .. }),
                "{name} @{}: {err:?}",
                event.seq
            );
        }
        let first_other = log
            .events
            .iter()
            .find(|e| e.kind == "turn/start")
            .expect("a turn");
        let err = plan_rewind(&log, Target::Seq(first_other.seq)).unwrap_err();
        assert!(
            matches!(err, PlanError::NotHumanMessage { .. }),
            "{name}: {err:?}"
        );
        let err = plan_rewind(&log, Target::Seq(log.next_seq())).unwrap_err();
        assert!(
            matches!(err, PlanError::UnknownSeq { .. }),
            "{name}: {err:?}"
        );
        let count = list_candidates(&log).expect("candidates").len();
        let err = plan_rewind(&log, Target::Index(count as u32 + 1)).unwrap_err();
        assert!(
            matches!(err, PlanError::IndexOutOfRange { .. }),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn pending_steering_is_withdrawn_not_masked() {
    let log = fixture("steering-pending.jsonl");
    let candidates = list_candidates(&log).expect("candidates");
    let pending: Vec<_> = candidates.iter().filter(|c| c.pending).collect();
    assert_eq!(pending.len(), 2, "two unread steering messages");
    // The older pending message: withdrawing it withdraws the newer one too.
    let older = pending.last().expect("older");
    let plan = plan_rewind(&log, Target::Seq(older.seq)).expect("plans");
    assert!(plan.marker.is_none());
    assert_eq!(plan.withdraw_pending.len(), 2);
    let newer = pending.first().expect("newer");
    let plan = plan_rewind(&log, Target::Index(newer.index)).expect("plans");
    assert_eq!(
        plan.withdraw_pending,
        vec![newer.message_id.clone().expect("id")]
    );
    // A surface target drops every unread steering message as well.
    let surface_target = candidates
        .iter()
        .find(|c| !c.pending)
        .expect("surface candidate");
    let plan = plan_rewind(&log, Target::Seq(surface_target.seq)).expect("plans");
    assert!(plan.marker.is_some());
    assert_eq!(plan.withdraw_pending.len(), 2);
}

#[test]
fn fork_boundaries_on_real_logs_keep_exactly_the_nodes_before_the_target() {
    for name in FIXTURES {
        let log = fixture(name);
        let surface = fold_surface(&log.events).expect("folds");
        for c in list_candidates(&log).expect("candidates") {
            match rewind_plan::plan_fork(&log, Target::Seq(c.seq)) {
                Ok(plan) => {
                    let child = fold_surface(&log.events[..=plan.boundary_seq as usize])
                        .expect("prefix folds");
                    let pos = surface.position(c.seq).expect("on surface");
                    // Without a later compaction, the child's surface is the parent's before the target.
                    let later_replace = surface.replacements.iter().any(|r| r.seq > c.seq);
                    if !later_replace {
                        // Injected context delivered in the same step as the target belongs to
                        // the target's turn and stays behind; nothing else is lost.
                        let (kept, dropped): (Vec<u64>, Vec<u64>) = surface.nodes[..pos]
                            .iter()
                            .partition(|n| **n <= plan.boundary_seq);
                        assert_eq!(child.nodes, kept, "{name} @{}", c.seq);
                        for d in dropped {
                            let m = log
                                .get(d)
                                .and_then(|e| e.user_message())
                                .expect("a user message");
                            assert!(!m.is_human(), "{name} @{}: human message {d} lost", c.seq);
                        }
                    }
                    assert!(child.nodes.iter().all(|n| *n < c.seq));
                    // DSH refuses a boundary inside an open turn.
                    let last_turn = log.events[..=plan.boundary_seq as usize]
                        .iter()
                        .rev()
                        .find(|e| e.kind == "turn/start" || e.kind == "turn/end");
                    assert!(
                        last_turn.is_none_or(|e| e.kind == "turn/end"),
                        "{name} @{}",
                        c.seq
                    );
                }
                Err(e) => assert!(
                    matches!(e, ForkError::InsideTurn { .. }),
                    "{name} @{}: {e:?}",
                    c.seq
                ),
            }
        }
    }
}
