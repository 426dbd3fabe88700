//! A small command-line front end over the planner, used by the real-host
//! tests and the demo, and handy for looking at a session log by hand.
//!
//! ```text
//! plan-cli fold <file|->                 the surface nodes and replacements
//! plan-cli candidates <file|->           the messages a rewind can target
//! plan-cli plan <file|-> <target>        the marker for `@<seq>` or `<n>`
//! ```
//! Input is a JSONL session file (header + events) or a JSON array of events.
//! Output is JSON on stdout; a refusal prints `{"ok":false,"error":{kind,message}}`
//! (`kind` names the planner's error variant, e.g. `PlanError::NotOnSurface`;
//! `message` is its text) and exits with status 1; a usage error exits with status 2.
//! The planner has no stable codes: the engine (`rewind-engine`) gives each
//! variant its `rewind/...` code.

use std::fmt::{Debug, Display};
use std::io::Read as _;
use std::process::ExitCode;

use rewind_plan::{SessionLog, fold_surface, list_candidates, parse_target, plan_rewind};
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

/// Prints a refusal by the planner's error `e` of type `ty` and returns status 1.
fn refuse(ty: &str, e: &(impl Debug + Display)) -> ExitCode {
    // The variant's name leads its derived `Debug` form (`NotOnSurface { seq: 3 }`).
    let debug = format!("{e:?}");
    let variant = debug
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()
        .unwrap_or_default();
    println!(
        "{}",
        json!({"ok": false, "error": {"kind": format!("{ty}::{variant}"), "message": e.to_string()}})
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
        Err(e) => return refuse("ReadError", &e),
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
            Err(e) => refuse("SurfaceError", &e),
        },
        "candidates" => match list_candidates(&log) {
            Ok(c) => {
                println!("{}", json!({"candidates": c}));
                ExitCode::SUCCESS
            }
            Err(e) => refuse("PlanError", &e),
        },
        "plan" => {
            let target = args[2..].join(" ");
            let target = match parse_target(&target) {
                Ok(t) => t,
                Err(e) => return refuse("TargetError", &e),
            };
            match plan_rewind(&log, target) {
                Ok(plan) => {
                    println!("{}", json!({"ok": true, "plan": plan}));
                    ExitCode::SUCCESS
                }
                Err(e) => refuse("PlanError", &e),
            }
        }
        other => {
            eprintln!("plan-cli: unknown command {other:?}");
            ExitCode::from(2)
        }
    }
}
