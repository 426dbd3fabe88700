//! One conversation written in every session format DSH has written
//! (`tests/fixtures/formats/`: format 0 of 0.1.0-rc.8, 2, 3 of 0.1.5, 4 of 0.1.7 / 0.2.x) plans
//! to the same targets: the same candidates by text and order, and the same marker ranges once
//! the seqs each format adds (chunk rows, `system/message`, `developer/message`,
//! `assistant/attempt`) are set aside.

use std::path::PathBuf;

use rewind_plan::{
    ForkError, MARKER_SOURCE_KIND, PlanError, ReadError, ReplaceSpelling, SessionEvent, SessionLog,
    SurfaceOp, Target, fold_surface, list_candidates, list_candidates_on, plan_fork, plan_fork_on,
    plan_rewind, plan_rewind_on,
};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/formats")
}

const FILES: [(u64, &str); 4] = [
    (0, "session.jsonl"),
    (2, "session.v2.jsonl"),
    (3, "session.v3.jsonl"),
    (4, "session.v4.jsonl"),
];

fn read(name: &str) -> SessionLog {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    SessionLog::from_jsonl(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A format-neutral name for a surface node: what it says, not where it sits.
fn label(log: &SessionLog, seq: u64) -> Option<String> {
    let event = log.get(seq)?;
    let data = event.data_value().ok()?;
    match event.kind.as_str() {
        // The host's own prompt-like nodes exist only in some formats.
        "system/message" | "developer/message" => None,
        "user/message" => {
            let m = event.user_message()?;
            let kind = m.source.kind.as_str();
            let who = match kind {
                "user" => "human".to_string(),
                k if rewind_plan::is_marker_kind(k) => "marker".to_string(),
                "plugin" => format!("ctx:{}", m.source.plugin.clone().unwrap_or_default()),
                k => format!("ctx:{}", k.trim_start_matches("plugin:")),
            };
            Some(format!("{who}:{}", m.text()))
        }
        "assistant/message" => Some(format!("assistant:{}", data["message"]["content"])),
        "tool/result" => Some(format!(
            "tool:{}",
            data["message"]["source"]["callId"].as_str().unwrap_or("?")
        )),
        other => Some(format!("other:{other}")),
    }
}

fn labels(log: &SessionLog, seqs: &[u64]) -> Vec<String> {
    seqs.iter().filter_map(|s| label(log, *s)).collect()
}

#[test]
fn every_format_is_read_with_its_header() {
    for (version, name) in FILES {
        let log = read(name);
        let header = log.header.as_ref().expect("header");
        assert_eq!(header.version, version, "{name}");
        assert_eq!(header.is_seeded, (version >= 2).then_some(false), "{name}");
        assert_eq!(log.seed_boundary(), 0, "{name}");
        fold_surface(&log.events).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // Format 0 packs chunk runs and cites chunks; format 2 on embeds the stream instead.
    let v0 = read("session.jsonl");
    assert!(v0.events.iter().any(|e| e.kind == "assistant/chunk"));
    for name in ["session.v2.jsonl", "session.v3.jsonl", "session.v4.jsonl"] {
        let log = read(name);
        assert!(
            log.events.iter().all(|e| e.kind != "assistant/chunk"),
            "{name}"
        );
        assert!(
            log.events.iter().any(|e| e.kind == "assistant/attempt"),
            "{name}"
        );
    }
    // Format 3 on: the system prompt is surface node 0; format 4: a developer node too.
    for name in ["session.v3.jsonl", "session.v4.jsonl"] {
        let log = read(name);
        let nodes = fold_surface(&log.events).expect("folds").nodes;
        assert_eq!(
            log.get(nodes[0]).map(|e| e.kind.as_str()),
            Some("system/message")
        );
    }
    // Format 4's developer node joined the surface and the earlier rewind shadowed it.
    let v4 = read("session.v4.jsonl");
    let surface = fold_surface(&v4.events).expect("folds");
    let developer = v4
        .events
        .iter()
        .find(|e| e.kind == "developer/message")
        .expect("a developer message");
    assert!(
        surface.replacements[0]
            .shadowed_seqs
            .contains(&developer.seq)
    );
}

#[test]
fn both_replace_spellings_fold_alike() {
    // Formats 0 and 2 write `{op, start, end}`, 3 and 4 `{op, startSeq, endSeq}`; ranges of
    // three or more seqs are written as `[start, end]` pairs from format 2 on.
    for (version, name) in FILES {
        let text = std::fs::read_to_string(dir().join(name)).expect("fixture");
        let spelled = if version >= 3 {
            "\"startSeq\""
        } else {
            "\"start\""
        };
        assert!(text.contains(spelled), "{name} uses its own spelling");
        let log = read(name);
        let surface = fold_surface(&log.events).expect("folds");
        assert_eq!(surface.replacements.len(), 1, "{name}: the earlier rewind");
        let r = &surface.replacements[0];
        let marker = log.get(r.seq).expect("marker");
        assert_eq!(
            marker.surface_op,
            Some(SurfaceOp::Replace {
                start: r.start,
                end: r.end
            })
        );
    }
    let v4 = std::fs::read_to_string(dir().join("session.v4.jsonl")).expect("fixture");
    assert!(
        v4.contains("\"sourceEventSeqs\":[["),
        "a range-encoded citation"
    );
}

#[test]
fn all_formats_plan_to_the_same_targets() {
    let logs: Vec<(&str, SessionLog)> = FILES.iter().map(|(_, n)| (*n, read(n))).collect();
    let describe = |log: &SessionLog| {
        list_candidates(log)
            .expect("candidates")
            .into_iter()
            .map(|c| (c.index, c.preview, c.pending))
            .collect::<Vec<_>>()
    };
    let expected = describe(&logs[0].1);
    assert_eq!(
        expected.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
        vec!["write bye.txt instead", "create hello.txt"],
        "the earlier rewind hid the second and third messages"
    );
    for (name, log) in &logs {
        assert_eq!(describe(log), expected, "{name}");
    }
    for index in 1..=expected.len() as u32 {
        let mut reference: Option<(String, Vec<String>, Vec<String>)> = None;
        for (name, log) in &logs {
            let plan = plan_rewind(log, Target::Index(index)).expect("plans");
            let marker = plan.marker.as_ref().expect("a surface target");
            assert_eq!(marker.data["source"]["kind"], MARKER_SOURCE_KIND);
            // The marker applies: exactly the nodes before the target remain.
            let before = fold_surface(&log.events).expect("folds");
            let mut events = log.events.clone();
            events.push(marker.to_event(log.next_seq()));
            let after = fold_surface(&events).expect("the marker passes the surface rules");
            let pos = before.position(plan.target_seq).expect("target on surface");
            let mut kept = before.nodes[..pos].to_vec();
            kept.push(log.next_seq());
            assert_eq!(after.nodes, kept, "{name}");
            // The same plan on the host's surface, which agrees here.
            let on_host = plan_rewind_on(log, &before.nodes, Target::Index(index)).expect("plans");
            assert_eq!(on_host, plan, "{name}");
            let mine = (
                plan.target_text.clone(),
                labels(log, &plan.shadowed_seqs),
                labels(log, &before.nodes[..pos]),
            );
            match &reference {
                None => reference = Some(mine),
                Some(r) => assert_eq!(&mine, r, "{name}, candidate {index}"),
            }
            // Fork plans agree on the target; the boundary keeps only earlier human messages.
            match plan_fork(log, Target::Index(index)) {
                Ok(f) => {
                    assert_eq!(f.target_text, plan.target_text, "{name}");
                    let child = fold_surface(&log.events[..=f.boundary_seq as usize])
                        .expect("prefix folds");
                    assert!(child.nodes.iter().all(|n| *n < plan.target_seq));
                    let on_host =
                        plan_fork_on(log, &before.nodes, Target::Index(index)).expect("forks");
                    assert_eq!(on_host, f, "{name}");
                }
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
}

#[test]
fn the_marker_is_spelled_for_the_format() {
    let log = read("session.v4.jsonl");
    let plan = plan_rewind(&log, Target::Index(1)).expect("plans");
    let op = &plan.marker.as_ref().expect("marker").surface_op;
    let SurfaceOp::Replace { start, end } = op.clone() else {
        panic!("a replace")
    };
    let header = log.header.as_ref().expect("header");
    assert_eq!(
        op.to_json(ReplaceSpelling::for_format(header.version)),
        serde_json::json!({"op": "replace", "startSeq": start, "endSeq": end})
    );
    assert_eq!(
        op.to_json(ReplaceSpelling::for_format(0)),
        serde_json::json!({"op": "replace", "start": start, "end": end})
    );
    // The plan's JSON keeps the neutral `start` / `end` the host reads.
    let v = serde_json::to_value(&plan).expect("json");
    assert_eq!(v["marker"]["surfaceOp"]["start"], start);
    assert_eq!(v["marker"]["surfaceOp"]["end"], end);
    assert!(v.get("surfaceMismatch").is_none());
}

#[test]
fn system_and_developer_nodes_are_never_targets() {
    for name in ["session.v3.jsonl", "session.v4.jsonl"] {
        let log = read(name);
        for event in &log.events {
            if event.kind != "system/message" && event.kind != "developer/message" {
                continue;
            }
            let err = plan_rewind(&log, Target::Seq(event.seq)).unwrap_err();
            assert!(
                matches!(err, PlanError::NotHumanMessage { .. }),
                "{name} @{}: {err:?}",
                event.seq
            );
            assert!(!err.to_string().contains("event of type"), "{err}");
        }
    }
}

#[test]
fn the_zstd_log_reads_as_the_plain_one() {
    let bytes = std::fs::read(dir().join("session.v4.jsonl.zstd")).expect("fixture");
    let zstd = SessionLog::from_zstd_jsonl(&bytes).expect("reads");
    let plain = read("session.v4.jsonl");
    assert_eq!(zstd.header, plain.header);
    assert_eq!(
        serde_json::to_string(&zstd.events).expect("json"),
        serde_json::to_string(&plain.events).expect("json")
    );
    // A torn final frame (an append cut short) is dropped with the records it held.
    let torn = SessionLog::from_zstd_jsonl(&bytes[..bytes.len() - 7]).expect("reads the rest");
    assert!(torn.header.is_some());
    assert!(!torn.events.is_empty() && torn.events.len() < plain.events.len());
    // Damage before the end is refused by name.
    let mut broken = bytes.clone();
    broken[20] ^= 0xff;
    broken[21] ^= 0xff;
    assert!(matches!(
        SessionLog::from_zstd_jsonl(&broken).unwrap_err(),
        ReadError::Zstd(_) | ReadError::BadLine { .. } | ReadError::NotUtf8(_)
    ));
    assert!(matches!(
        SessionLog::from_zstd_jsonl(b"not zstd at all").unwrap_err(),
        ReadError::Zstd(_)
    ));
}

#[test]
fn the_hosts_surface_rules_and_disagreements_are_data() {
    let log = read("session.v4.jsonl");
    let own = fold_surface(&log.events).expect("folds").nodes;
    let agreed = list_candidates_on(&log, &own).expect("candidates");
    assert!(agreed.surface_mismatch.is_none());
    assert_eq!(
        agreed.candidates,
        list_candidates(&log).expect("candidates")
    );
    // The host's surface is authoritative: here it still shows the rewound messages (as if the
    // host had not folded the earlier marker), so they are candidates again.
    let marker = fold_surface(&log.events).expect("folds").replacements[0].clone();
    let pos = own
        .iter()
        .position(|n| *n == marker.seq)
        .expect("marker node");
    let mut host = own[..pos].to_vec();
    host.extend(&marker.shadowed_seqs);
    host.extend(&own[pos + 1..]);
    let listed = list_candidates_on(&log, &host).expect("candidates");
    let mismatch = listed.surface_mismatch.expect("a disagreement");
    assert_eq!(mismatch.own_nodes, own);
    assert_eq!(mismatch.first_difference, Some(pos));
    assert_eq!(listed.candidates.len(), 4);
    let plan = plan_rewind_on(&log, &host, Target::Index(3)).expect("plans on the host's fold");
    assert_eq!(plan.target_text, "change hello.txt to v2");
    assert_eq!(
        plan.shadowed_seqs,
        host[host
            .iter()
            .position(|n| *n == plan.target_seq)
            .expect("on host")..]
    );
    assert!(plan.surface_mismatch.is_some());
    // A target the host's surface does not hold is refused, whatever the own fold says.
    let first_human = list_candidates(&log)
        .expect("candidates")
        .last()
        .expect("one")
        .seq;
    let without: Vec<u64> = own.iter().copied().filter(|n| *n != first_human).collect();
    assert!(matches!(
        plan_rewind_on(&log, &without, Target::Seq(first_human)).unwrap_err(),
        PlanError::NotOnSurface { .. }
    ));
    // A surface the log cannot back is a named error.
    for bad in [vec![0u64, 9999], vec![own[0], own[0]], vec![1]] {
        let err = plan_rewind_on(&log, &bad, Target::Index(1)).unwrap_err();
        assert!(
            matches!(err, PlanError::HostSurface { .. }),
            "{bad:?}: {err:?}"
        );
        assert!(matches!(
            plan_fork_on(&log, &bad, Target::Index(1)).unwrap_err(),
            ForkError::Plan(PlanError::HostSurface { .. })
        ));
    }
    // A log the own fold refuses still plans on the host's surface; the refusal is reported.
    let mut events: Vec<SessionEvent> = log.events.clone();
    let last = events.len() - 1;
    events[last].surface_op = Some(SurfaceOp::Append);
    let odd = SessionLog::from_events(log.header.clone(), events).expect("contiguous");
    assert!(plan_rewind(&odd, Target::Index(1)).is_err());
    let plan = plan_rewind_on(&odd, &own, Target::Index(1)).expect("plans on the host's fold");
    let mismatch = plan.surface_mismatch.expect("reported");
    assert!(mismatch.own_error.is_some() && mismatch.own_nodes.is_empty());
}
