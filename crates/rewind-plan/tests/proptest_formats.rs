//! Property: a random conversation rendered in each session format DSH has written (0, 2, 3, 4;
//! see `tests/fixtures/formats/README.md` for the field-by-field sources) and read back from its
//! JSONL text gives the same candidates and the same plans: the same targets, the same shadowed
//! messages once the seqs a format adds are set aside, and the same fork outcome. Rewinds inside
//! the conversation are planned by the crate in each format and written in that format's
//! spelling. Case count: `PROPTEST_CASES` (default 256).

use proptest::prelude::*;
use rewind_plan::{
    ReplaceSpelling, SessionEvent, SessionLog, SurfaceOp, Target, fold_surface, list_candidates,
    list_candidates_on, plan_fork, plan_rewind, plan_rewind_on,
};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Action {
    /// A human turn with `tools` tool calls; `steer` adds a human message mid-turn; `extra`
    /// adds format-specific log-only or prompt-like events (an `assistant/attempt` from format 2,
    /// a `developer/message` in format 4).
    Turn { tools: u8, steer: bool, extra: bool },
    /// Plugin-injected context (not a candidate).
    Injected,
    /// A rewind (planned in each format) to surface candidate `pick` (modulo the count).
    Rewind { pick: u8 },
    /// Steering queued but not read yet.
    PendingSteer,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (0u8..3, any::<bool>(), any::<bool>())
            .prop_map(|(tools, steer, extra)| Action::Turn { tools, steer, extra }),
        1 => Just(Action::Injected),
        1 => any::<u8>().prop_map(|pick| Action::Rewind { pick }),
        1 => Just(Action::PendingSteer),
    ]
}

struct Render {
    version: u64,
    events: Vec<SessionEvent>,
    turn: u64,
    ids: u64,
    system_written: bool,
    pending: usize,
}

impl Render {
    fn new(version: u64) -> Self {
        Render {
            version,
            events: Vec::new(),
            turn: 0,
            ids: 0,
            system_written: false,
            pending: 0,
        }
    }
    fn push(&mut self, kind: &str, data: Value) -> u64 {
        let seq = self.events.len() as u64;
        self.events.push(SessionEvent::new(kind, seq, &data));
        seq
    }
    fn node(&mut self, kind: &str, data: Value, sources: Option<Vec<u64>>) -> u64 {
        let seq = self.events.len() as u64;
        self.events
            .push(SessionEvent::new(kind, seq, &data).with_surface(SurfaceOp::Append, sources));
        seq
    }
    /// A user-role message; ids count the same in every format.
    fn message(&mut self, human: bool, text: &str) -> Value {
        self.ids += 1;
        let source = match (human, self.version) {
            (true, _) => json!({"kind": "user"}),
            (false, v) if v < 4 => json!({"kind": "plugin", "plugin": "context"}),
            (false, _) => json!({"kind": "plugin:context"}),
        };
        json!({"id": format!("m{}", self.ids), "role": "user", "content": [{"type": "text", "text": text}], "source": source})
    }
    fn assistant(&mut self, turn: u64, step: u64, content: Value) {
        let message = json!({"role": "assistant", "content": content, "source": {"kind": "model", "provider": "p", "model": "m"}, "id": format!("a{turn}-{step}")});
        if self.version == 0 {
            let chunk = self.push(
                "assistant/chunk",
                json!({"turn": turn, "step": step, "chunk": {"type": "finish"}}),
            );
            self.node(
                "assistant/message",
                json!({"turn": turn, "step": step, "message": message}),
                Some(vec![chunk]),
            );
        } else {
            self.node(
                "assistant/message",
                json!({"turn": turn, "step": step, "message": message, "stream": []}),
                None,
            );
        }
    }
    fn tool_result(&mut self, turn: u64, step: u64, call: &str, cited: u64) {
        let message = if self.version < 4 {
            json!({"source": {"kind": "tool", "callId": call}, "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": "ok"}], "isError": false}], "role": "user", "id": format!("r-{call}")})
        } else {
            json!({"role": "tool", "source": {"kind": "tool", "callId": call}, "toolCallId": call, "content": [{"type": "text", "text": "ok"}], "isError": false, "id": format!("r-{call}")})
        };
        self.node(
            "tool/result",
            json!({"turn": turn, "step": step, "message": message}),
            Some(vec![cited]),
        );
    }
    fn log(&self) -> SessionLog {
        SessionLog::from_events(None, self.events.clone()).expect("contiguous")
    }

    fn apply(&mut self, action: &Action) {
        match action {
            Action::Turn {
                tools,
                steer,
                extra,
            } => {
                if self.pending > 0 {
                    let n = self.pending;
                    self.push(
                        "agent/inbox/spliced",
                        json!({"target": "next-step", "start": 0, "removedCount": n, "inserted": []}),
                    );
                    self.pending = 0;
                }
                self.turn += 1;
                let turn = self.turn;
                self.push("turn/start", json!({"turn": turn}));
                self.push("step/start", json!({"turn": turn, "step": 1}));
                if self.version >= 3 && !self.system_written {
                    let source = if self.version == 3 {
                        json!({"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"})
                    } else {
                        json!({"kind": "system-prompt"})
                    };
                    self.node("system/message", json!({"turn": turn, "step": 1, "message": {"id": "sys", "role": "system", "content": [{"type": "text", "text": "prompt"}], "source": source}}), None);
                    self.system_written = true;
                }
                let m = self.message(true, &format!("turn {turn}"));
                self.node("user/message", m, None);
                if *extra && self.version >= 4 {
                    self.node("developer/message", json!({"turn": turn, "step": 1, "message": {"id": format!("d{turn}"), "role": "developer", "content": [{"type": "text", "text": "changed"}], "source": {"kind": "plan-mode"}}}), None);
                }
                if *extra && self.version >= 2 {
                    self.push(
                        "assistant/attempt",
                        json!({"turn": turn, "step": 1, "stream": []}),
                    );
                }
                let mut step = 1;
                for t in 0..*tools {
                    let call = format!("c{turn}-{t}");
                    self.assistant(turn, step, json!([{"type": "tool-call", "id": call}]));
                    let c = self.push(
                        "tool/call",
                        json!({"turn": turn, "step": step, "callId": call}),
                    );
                    self.tool_result(turn, step, &call, c);
                    self.push("step/end", json!({"turn": turn, "step": step}));
                    step += 1;
                    self.push("step/start", json!({"turn": turn, "step": step}));
                    if *steer && t == 0 {
                        let m = self.message(true, &format!("steer {turn}"));
                        self.node("user/message", m, None);
                    }
                }
                self.assistant(
                    turn,
                    step,
                    json!([{"type": "text", "text": format!("done {turn}")}]),
                );
                self.push("step/end", json!({"turn": turn, "step": step}));
                self.push(
                    "turn/end",
                    json!({"turn": turn, "reason": {"kind": "completed"}}),
                );
            }
            Action::Injected => {
                let m = self.message(false, "<system-reminder>x</system-reminder>");
                self.node("user/message", m, None);
            }
            Action::Rewind { pick } => {
                let log = self.log();
                let candidates = list_candidates(&log).expect("candidates");
                let surface: Vec<_> = candidates.iter().filter(|c| !c.pending).collect();
                if surface.is_empty() {
                    return;
                }
                let c = surface[*pick as usize % surface.len()];
                let plan = plan_rewind(&log, Target::Index(c.index)).expect("plans");
                let marker = plan.marker.expect("surface target has a marker");
                let seq = self.events.len() as u64;
                let mut event = marker.to_event(seq);
                let mut data = event.data_value().expect("json");
                data["id"] = json!(format!("marker{seq}"));
                event = SessionEvent::new("user/message", seq, &data)
                    .with_surface(marker.surface_op, Some(marker.source_event_seqs));
                self.events.push(event);
                if !plan.withdraw_pending.is_empty() {
                    let n = self.pending;
                    self.push(
                        "agent/inbox/spliced",
                        json!({"target": "next-step", "start": 0, "removedCount": n, "inserted": []}),
                    );
                    self.pending = 0;
                }
            }
            Action::PendingSteer => {
                let m = self.message(true, "pending steer");
                let start = self.pending;
                self.push(
                    "agent/inbox/spliced",
                    json!({"target": "next-step", "start": start, "inserted": [m]}),
                );
                self.pending += 1;
            }
        }
    }

    /// The log as DSH's JSONL file of this format: header line, the replace spelling of the
    /// format, and `sourceEventSeqs` runs of three or more as `[start, end]` from format 2 on.
    fn jsonl(&self) -> String {
        let header = if self.version == 0 {
            json!({"type": "session", "version": 0, "id": "p", "createdAt": 0, "delegationDepth": 0})
        } else {
            json!({"type": "session", "version": self.version, "id": "p", "createdAt": 0, "isSeeded": false, "delegationDepth": 0})
        };
        let mut out = format!("{header}\n");
        for e in &self.events {
            let mut v = serde_json::to_value(e).expect("json");
            if let Some(op) = &e.surface_op {
                v["surfaceOp"] = op.to_json(ReplaceSpelling::for_format(self.version));
            }
            if self.version >= 2 {
                if let Some(list) = v.get("sourceEventSeqs").and_then(Value::as_array) {
                    let seqs: Vec<u64> = list.iter().filter_map(Value::as_u64).collect();
                    v["sourceEventSeqs"] = encode_ranges(&seqs);
                }
            }
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out
    }
}

/// DSH's `encodeSeqRanges` (knyazev741/deepseek-harness@1376315f
/// `packages/session/session-format-v1-to-v2/src/codec.ts`).
fn encode_ranges(values: &[u64]) -> Value {
    if values.windows(2).any(|w| w[1] <= w[0]) {
        return json!(values);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let start = values[i];
        let mut end = start;
        while i + 1 < values.len() && values[i + 1] == end + 1 {
            i += 1;
            end += 1;
        }
        if end - start >= 2 {
            out.push(json!([start, end]));
        } else {
            out.push(json!(start));
            if end - start == 1 {
                out.push(json!(end));
            }
        }
        i += 1;
    }
    Value::Array(out)
}

/// A format-neutral name for a surface node (`None` for the host's prompt-like nodes).
fn label(log: &SessionLog, seq: u64) -> Option<String> {
    let event = log.get(seq)?;
    let data = event.data_value().ok()?;
    match event.kind.as_str() {
        "system/message" | "developer/message" => None,
        "user/message" => {
            let m = event.user_message()?;
            let who = if rewind_plan::is_marker_kind(&m.source.kind) {
                "marker"
            } else {
                m.source.kind.as_str()
            };
            // `{kind:'plugin', plugin:'context'}` up to format 3, `plugin:context` in format 4.
            let who = if who == "plugin" || who == "plugin:context" {
                "ctx"
            } else {
                who
            };
            Some(format!("{who}:{}", m.text()))
        }
        "assistant/message" => Some(format!("assistant:{}", data["message"]["id"])),
        "tool/result" => Some(format!("tool:{}", data["message"]["source"]["callId"])),
        other => Some(other.to_string()),
    }
}

const FORMATS: [u64; 4] = [0, 2, 3, 4];

/// A candidate as compared across formats: index, preview, pending, message id.
type Described = (u32, String, bool, Option<String>);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(rewind_test_support::cases(256)))]

    #[test]
    fn every_format_plans_alike(actions in prop::collection::vec(action(), 1..30), pick in any::<u16>()) {
        let mut logs = Vec::new();
        for version in FORMATS {
            let mut r = Render::new(version);
            for a in &actions {
                r.apply(a);
            }
            let log = SessionLog::from_jsonl(&r.jsonl()).expect("reads its own format");
            prop_assert_eq!(log.events.len(), r.events.len());
            prop_assert_eq!(log.header.as_ref().map(|h| h.version), Some(version));
            logs.push(log);
        }
        let described: Vec<Vec<Described>> = logs
            .iter()
            .map(|log| {
                list_candidates(log)
                    .expect("candidates")
                    .into_iter()
                    .map(|c| (c.index, c.preview, c.pending, c.message_id))
                    .collect()
            })
            .collect();
        for d in &described[1..] {
            prop_assert_eq!(d, &described[0]);
        }
        if described[0].is_empty() {
            return Ok(());
        }
        let index = described[0][pick as usize % described[0].len()].0;
        let mut reference = None;
        for (version, log) in FORMATS.iter().zip(&logs) {
            let surface = fold_surface(&log.events).expect("folds");
            let plan = plan_rewind(log, Target::Index(index)).expect("plans");
            // The host's surface agrees here, so planning on it changes nothing.
            prop_assert_eq!(&plan_rewind_on(log, &surface.nodes, Target::Index(index)).expect("plans"), &plan);
            prop_assert!(list_candidates_on(log, &surface.nodes).expect("candidates").surface_mismatch.is_none());
            let shadowed: Vec<String> = plan.shadowed_seqs.iter().filter_map(|s| label(log, *s)).collect();
            if let Some(marker) = &plan.marker {
                let mut events = log.events.clone();
                events.push(marker.to_event(log.next_seq()));
                let after = fold_surface(&events).expect("the marker passes the surface rules");
                let pos = surface.position(plan.target_seq).expect("on surface");
                let mut kept = surface.nodes[..pos].to_vec();
                kept.push(log.next_seq());
                prop_assert_eq!(&after.nodes, &kept, "format {}", version);
            }
            let fork = plan_fork(log, Target::Index(index)).map(|f| f.target_text).map_err(|e| e.to_string());
            let mine = (plan.target_text.clone(), plan.marker.is_some(), plan.withdraw_pending.clone(), shadowed, fork.is_ok());
            match &reference {
                None => reference = Some(mine),
                Some(r) => prop_assert_eq!(&mine, r, "format {}", version),
            }
        }
    }
}
