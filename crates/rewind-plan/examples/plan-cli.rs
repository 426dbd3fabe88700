//! A small command-line front end over the planner, used by the real-host
//! tests and the demo, and handy for looking at a session log by hand.
//!
//! ```text
//! plan-cli fold <file|->                 the surface nodes and replacements
//! plan-cli candidates <file|->           the messages a rewind can target
//! plan-cli plan <file|-> <target>        the marker for `@<seq>` or `<n>`
//! ```
//! Input is a JSONL session file (header + events) or a JSON array of events.
//! Output is JSON on stdout; a refusal prints `{"ok":false,"error":{code,message}}`
//! and exits with status 1; a usage error exits with status 2.

use std::io::Read as _;
use std::process::ExitCode;

use rewind_plan::{
    ErrorCode, SessionLog, fold_surface, list_candidates, parse_target, plan_rewind,
};
use serde_json::json;

fn read_input(path: &str) -> Result<String, String> {
    if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("stdin: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
    }
}

fn refuse(code: ErrorCode, message: String) -> ExitCode {
    println!(
        "{}",
        json!({"ok": false, "error": {"code": code.as_str(), "message": message}})
    );
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, file) = match (args.first(), args.get(1)) {
        (Some(c), Some(f)) => (c.as_str(), f.as_str()),
        _ => {
            eprintln!(
                "usage: plan-cli fold|candidates <file|->  |  plan-cli plan <file|-> <target>"
            );
            return ExitCode::from(2);
        }
    };
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("plan-cli: {e}");
            return ExitCode::from(2);
        }
    };
    let log = match SessionLog::parse(&text) {
        Ok(l) => l,
        Err(e) => return refuse(e.code(), e.to_string()),
    };
    match cmd {
        "fold" => match fold_surface(&log.events) {
            Ok(s) => {
                println!(
                    "{}",
                    json!({"nodes": s.nodes, "replacements": s.replacements})
                );
                ExitCode::SUCCESS
            }
            Err(e) => refuse(e.code(), e.to_string()),
        },
        "candidates" => match list_candidates(&log) {
            Ok(c) => {
                println!("{}", json!({"candidates": c}));
                ExitCode::SUCCESS
            }
            Err(e) => refuse(e.code(), e.to_string()),
        },
        "plan" => {
            let target = args[2..].join(" ");
            let target = match parse_target(&target) {
                Ok(t) => t,
                Err(e) => return refuse(e.code(), e.to_string()),
            };
            match plan_rewind(&log, target) {
                Ok(plan) => {
                    println!("{}", json!({"ok": true, "plan": plan}));
                    ExitCode::SUCCESS
                }
                Err(e) => refuse(e.code(), e.to_string()),
            }
        }
        other => {
            eprintln!("plan-cli: unknown command {other:?}");
            ExitCode::from(2)
        }
    }
}
