//! fold + candidates + plan over a 50,000-event log, next to the plain JSON
//! parse of the same log, measured in the same run.

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::hint::black_box;

use rewind_plan::{SessionLog, Target, list_candidates, plan_rewind};

/// A realistic log: turns of user message, request records, streamed chunks,
/// tool calls and results, with a compaction-style replace every 50 turns.
fn synth_log(target_events: usize) -> String {
    let mut out = String::from(
        "{\"type\":\"session\",\"version\":0,\"id\":\"bench\",\"createdAt\":0,\"cwd\":\"/w\"}\n",
    );
    let mut seq = 0u64;
    let mut surface: Vec<u64> = Vec::new();
    let mut turn = 0u64;
    let line = |out: &mut String, body: String| {
        out.push_str(&body);
        out.push('\n');
    };
    while (seq as usize) < target_events {
        turn += 1;
        line(
            &mut out,
            format!(
                "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn}}}}}"
            ),
        );
        seq += 1;
        line(
            &mut out,
            format!(
                "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"id\":\"m{seq}\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"please change file number {turn} so that it does the thing we discussed earlier\"}}],\"source\":{{\"kind\":\"user\"}}}},\"surfaceOp\":\"append\"}}"
            ),
        );
        surface.push(seq);
        seq += 1;
        line(
            &mut out,
            format!(
                "{{\"type\":\"request/header\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn},\"step\":1,\"model\":\"m\",\"tools\":[\"write\",\"edit\",\"read\"]}}}}"
            ),
        );
        seq += 1;
        let first_chunk = seq;
        for i in 0..8 {
            line(
                &mut out,
                format!(
                    "{{\"type\":\"assistant/chunk\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn},\"step\":1,\"chunk\":{{\"type\":\"text-delta\",\"index\":0,\"text\":\"token{i} \"}}}}}}"
                ),
            );
            seq += 1;
        }
        let chunks: Vec<String> = (first_chunk..seq).map(|s| s.to_string()).collect();
        line(
            &mut out,
            format!(
                "{{\"type\":\"assistant/message\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn},\"step\":1,\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"tool-call\",\"id\":\"c{turn}\",\"name\":\"write\",\"arguments\":\"{{\\\"file_path\\\":\\\"f{turn}.txt\\\",\\\"content\\\":\\\"x\\\"}}\"}}]}}}},\"surfaceOp\":\"append\",\"sourceEventSeqs\":[{}]}}",
                chunks.join(",")
            ),
        );
        surface.push(seq);
        seq += 1;
        let call = seq;
        line(
            &mut out,
            format!(
                "{{\"type\":\"tool/call\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn},\"step\":1,\"callId\":\"c{turn}\",\"name\":\"write\",\"arguments\":\"{{}}\"}}}}"
            ),
        );
        seq += 1;
        line(
            &mut out,
            format!(
                "{{\"type\":\"tool/result\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn},\"step\":1,\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool-result\",\"toolCallId\":\"c{turn}\",\"content\":[{{\"type\":\"text\",\"text\":\"Created file\"}}],\"isError\":false}}],\"source\":{{\"kind\":\"tool\",\"callId\":\"c{turn}\"}}}},\"meta\":{{\"diffs\":[]}}}},\"surfaceOp\":\"append\",\"sourceEventSeqs\":[{call}]}}"
            ),
        );
        surface.push(seq);
        seq += 1;
        line(
            &mut out,
            format!(
                "{{\"type\":\"turn/end\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}"
            ),
        );
        seq += 1;
        if turn % 50 == 0 && surface.len() > 40 {
            let start = surface[surface.len() - 40];
            let end = *surface.last().unwrap_or(&start);
            let shadowed: Vec<String> = surface[surface.len() - 40..]
                .iter()
                .map(|s| s.to_string())
                .collect();
            line(
                &mut out,
                format!(
                    "{{\"type\":\"user/message\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"id\":\"k{seq}\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"summary\"}}],\"source\":{{\"kind\":\"plugin\",\"plugin\":\"compact\",\"compactionId\":\"x\"}}}},\"surfaceOp\":{{\"op\":\"replace\",\"start\":{start},\"end\":{end}}},\"sourceEventSeqs\":[{}]}}",
                    shadowed.join(",")
                ),
            );
            let keep = surface.len() - 40;
            surface.truncate(keep);
            surface.push(seq);
            seq += 1;
        }
    }
    out
}

fn main() {
    let text = synth_log(50_000);
    let events = text.lines().count() - 1;
    let mut report = timing::Report::new(
        "rewind-plan",
        "rewind-plan: fold + candidates + plan",
        &format!(
            "A synthetic {events}-event JSONL log ({} KiB; turns with streamed chunks, tool calls and results, a \
             compaction-style replace every 50 turns). Measured: read the JSONL into events, fold the surface, list \
             the candidates, plan a rewind to the 10th newest message. Baseline: `serde_json` parse of every line \
             into a `serde_json::Value`, nothing else. Goal: ≤ 2×.",
            text.len() / 1024
        ),
    );
    let (subject, baseline) = timing::pair(
        15,
        || {
            let log = SessionLog::from_jsonl(black_box(&text)).expect("log reads");
            let candidates = list_candidates(&log).expect("candidates");
            let plan = plan_rewind(&log, Target::Index(10)).expect("plan");
            black_box((candidates.len(), plan.shadowed_seqs.len()));
        },
        || {
            let mut n = 0usize;
            for line in black_box(&text).lines() {
                let v: serde_json::Value = serde_json::from_str(line).expect("json");
                n += usize::from(v.is_object());
            }
            black_box(n);
        },
    );
    report.row(
        &format!("{events} events: read + fold + candidates + plan"),
        subject,
        baseline,
        Some(2.0),
    );
    let log = SessionLog::from_jsonl(&text).expect("log reads");
    let only_logic = timing::time(15, || {
        let candidates = list_candidates(black_box(&log)).expect("candidates");
        let plan = plan_rewind(&log, Target::Index(10)).expect("plan");
        black_box((candidates.len(), plan.shadowed_seqs.len()));
    });
    report.row(
        "fold + candidates + plan on an already-read log",
        only_logic,
        baseline,
        None,
    );
    report.write();
}
