//! Property: for random well-formed logs (turns with tool calls, compaction
//! replaces, earlier rewinds, steering, injected context), appending the
//! planned marker leaves exactly the surface nodes before the target, and the
//! marker passes the surface rules. Case count: `PROPTEST_CASES` (default 256).

use proptest::prelude::*;
use rewind_plan::{
    PlanError, SessionEvent, SessionLog, SurfaceOp, Target, fold_surface, list_candidates,
    plan_rewind,
};
use serde_json::json;

#[derive(Debug, Clone)]
enum Action {
    /// A human turn with `tools` tool calls; `steer` adds a steering message mid-turn.
    Turn { tools: u8, steer: bool },
    /// Plugin-injected context (not a candidate).
    Injected,
    /// A compaction-style replace of `len` surface nodes ending `back` nodes before the tail.
    Compaction { len: u8, back: u8 },
    /// A rewind (planned by the crate itself) to candidate `pick` (modulo the count).
    Rewind { pick: u8 },
    /// Steering queued but not read yet.
    PendingSteer,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (0u8..4, any::<bool>()).prop_map(|(tools, steer)| Action::Turn { tools, steer }),
        1 => Just(Action::Injected),
        1 => (1u8..6, 0u8..4).prop_map(|(len, back)| Action::Compaction { len, back }),
        1 => any::<u8>().prop_map(|pick| Action::Rewind { pick }),
        1 => Just(Action::PendingSteer),
    ]
}

struct Builder {
    events: Vec<SessionEvent>,
    turn: u64,
    ids: u64,
    pending: Vec<String>,
}

impl Builder {
    fn seq(&self) -> u64 {
        self.events.len() as u64
    }
    fn push(&mut self, kind: &str, data: serde_json::Value) -> u64 {
        let seq = self.seq();
        self.events.push(SessionEvent::new(kind, seq, &data));
        seq
    }
    fn push_surface(
        &mut self,
        kind: &str,
        data: serde_json::Value,
        op: SurfaceOp,
        sources: Option<Vec<u64>>,
    ) -> u64 {
        let seq = self.seq();
        self.events
            .push(SessionEvent::new(kind, seq, &data).with_surface(op, sources));
        seq
    }
    fn message(&mut self, kind: &str, text: &str) -> serde_json::Value {
        self.ids += 1;
        let source = match kind {
            "user" => json!({"kind": "user"}),
            other => json!({"kind": "plugin", "plugin": other}),
        };
        json!({"id": format!("m{}", self.ids), "role": "user", "content": [{"type": "text", "text": text}], "source": source})
    }
    fn surface(&self) -> Vec<u64> {
        fold_surface(&self.events)
            .expect("builder keeps the log valid")
            .nodes
    }
    fn log(&self) -> SessionLog {
        SessionLog::from_events(None, self.events.clone()).expect("contiguous")
    }

    fn apply(&mut self, action: &Action) {
        match action {
            Action::Turn { tools, steer } => {
                // Pending steering is claimed by the next step.
                if !self.pending.is_empty() {
                    self.push("agent/inbox/spliced", json!({"target": "next-step", "start": 0, "removedCount": self.pending.len(), "inserted": []}));
                    self.pending.clear();
                }
                self.turn += 1;
                let turn = self.turn;
                self.push("turn/start", json!({"turn": turn}));
                let m = self.message("user", &format!("turn {turn}"));
                self.push_surface("user/message", m, SurfaceOp::Append, None);
                for t in 0..*tools {
                    let chunk = self.push("assistant/chunk", json!({"turn": turn, "step": t + 1}));
                    self.push_surface("assistant/message", json!({"turn": turn, "message": {"role": "assistant", "content": [{"type": "tool-call"}]}}), SurfaceOp::Append, Some(vec![chunk]));
                    let call = self.push(
                        "tool/call",
                        json!({"turn": turn, "callId": format!("c{turn}-{t}")}),
                    );
                    self.push_surface("tool/result", json!({"turn": turn, "message": {"role": "user", "content": [{"type": "tool-result", "content": []}]}}), SurfaceOp::Append, Some(vec![call]));
                    if *steer && t == 0 {
                        let m = self.message("user", "steer");
                        self.push_surface("user/message", m, SurfaceOp::Append, None);
                    }
                }
                self.push_surface("assistant/message", json!({"turn": turn, "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}}), SurfaceOp::Append, Some(vec![]));
                self.push(
                    "turn/end",
                    json!({"turn": turn, "reason": {"kind": "completed"}}),
                );
            }
            Action::Injected => {
                let m = self.message("context", "<system-reminder>x</system-reminder>");
                self.push_surface("user/message", m, SurfaceOp::Append, None);
            }
            Action::Compaction { len, back } => {
                let surface = self.surface();
                let len = *len as usize;
                let back = *back as usize;
                if surface.len() < len + back || len == 0 {
                    return;
                }
                let end_i = surface.len() - 1 - back;
                let start_i = end_i + 1 - len;
                let shadowed = surface[start_i..=end_i].to_vec();
                let start_evt = self.push("compaction/start", json!({}));
                let summary = self.push("compaction/summary", json!({"shadowedSeqs": shadowed}));
                let m = self.message("compact", "summary");
                let mut sources = vec![start_evt, summary];
                sources.extend(&shadowed);
                self.push_surface(
                    "user/message",
                    m,
                    SurfaceOp::Replace {
                        start: shadowed[0],
                        end: shadowed[len - 1],
                    },
                    Some(sources),
                );
            }
            Action::Rewind { pick } => {
                let log = self.log();
                let candidates = list_candidates(&log).expect("candidates");
                let surface_candidates: Vec<_> = candidates.iter().filter(|c| !c.pending).collect();
                if surface_candidates.is_empty() {
                    return;
                }
                let c = surface_candidates[*pick as usize % surface_candidates.len()];
                let plan = plan_rewind(&log, Target::Seq(c.seq)).expect("plans");
                let marker = plan.marker.expect("surface target has a marker");
                let seq = self.seq();
                self.events.push(marker.to_event(seq));
                if !plan.withdraw_pending.is_empty() {
                    self.push("agent/inbox/spliced", json!({"target": "next-step", "start": 0, "removedCount": self.pending.len(), "inserted": [], "outcome": "canceled"}));
                    self.pending.clear();
                }
            }
            Action::PendingSteer => {
                let m = self.message("user", "pending steer");
                let id = m["id"].as_str().unwrap_or_default().to_string();
                let start = self.pending.len();
                self.push(
                    "agent/inbox/spliced",
                    json!({"target": "next-step", "start": start, "inserted": [m]}),
                );
                self.pending.push(id);
            }
        }
    }
}

fn build(actions: &[Action]) -> Builder {
    let mut b = Builder {
        events: Vec::new(),
        turn: 0,
        ids: 0,
        pending: Vec::new(),
    };
    for a in actions {
        b.apply(a);
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(rewind_test_support::cases(256)))]

    #[test]
    fn the_marker_leaves_exactly_the_nodes_before_the_target(actions in prop::collection::vec(action(), 1..40), pick in any::<u16>()) {
        let b = build(&actions);
        let log = b.log();
        let before = fold_surface(&log.events).expect("valid log");
        let candidates = list_candidates(&log).expect("candidates");
        // Numbering is 1..=n, newest first, pending steering before surface messages.
        for (i, c) in candidates.iter().enumerate() {
            prop_assert_eq!(c.index as usize, i + 1);
        }
        let surface_seqs: Vec<u64> = candidates.iter().filter(|c| !c.pending).map(|c| c.seq).collect();
        let mut sorted = surface_seqs.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        prop_assert_eq!(&surface_seqs, &sorted);
        prop_assert_eq!(candidates.iter().filter(|c| c.pending).count(), b.pending.len());
        if candidates.is_empty() {
            let err = plan_rewind(&log, Target::Index(1)).unwrap_err();
            prop_assert!(matches!(err, PlanError::NoCandidates), "{:?}", err);
            return Ok(());
        }
        let c = &candidates[pick as usize % candidates.len()];
        let plan = plan_rewind(&log, Target::Index(c.index)).expect("plans");
        prop_assert_eq!(plan.target_seq, c.seq);
        match &plan.marker {
            None => {
                prop_assert!(c.pending);
                prop_assert!(plan.withdraw_pending.contains(c.message_id.as_ref().expect("id")));
            }
            Some(marker) => {
                let mut events = log.events.clone();
                events.push(marker.to_event(log.next_seq()));
                let after = fold_surface(&events).expect("the marker passes the surface rules");
                let pos = before.position(c.seq).expect("candidate is on the surface");
                let mut expected = before.nodes[..pos].to_vec();
                expected.push(log.next_seq());
                prop_assert_eq!(&after.nodes, &expected);
                prop_assert_eq!(&plan.shadowed_seqs, &before.nodes[pos..].to_vec());
                prop_assert_eq!(plan.withdraw_pending.len(), b.pending.len());
                // After the rewind, the target and everything after it are no longer candidates.
                let rewound = SessionLog::from_events(None, events).expect("contiguous");
                let left = list_candidates(&rewound).expect("candidates");
                prop_assert!(left.iter().filter(|l| !l.pending).all(|l| l.seq < c.seq));
                let err = plan_rewind(&rewound, Target::Seq(c.seq)).unwrap_err();
                prop_assert!(matches!(err, PlanError::NotOnSurface { .. }), "{:?}", err);
            }
        }
    }
}
