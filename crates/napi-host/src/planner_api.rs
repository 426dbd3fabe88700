//! Planner bindings (sync: cheap, pure work on the calling thread).

use napi::bindgen_prelude::Env;
use napi_derive::napi;
use rewind_plan::{
    SessionLog, list_candidates as core_list, list_candidates_on as core_list_on, parse_target,
    plan_fork_with as core_fork, plan_rewind_with as core_plan,
};

use crate::error::BindingError;
use crate::types::{BindingCandidate, BindingForkPlan, BindingPlan, seq_from_js};

fn log_from(events_json: &str) -> Result<SessionLog, BindingError> {
    Ok(SessionLog::from_events_json(events_json)?)
}

/// The host's surface nodes (`session.surface.nodes`) as seqs.
fn nodes_from(surface_nodes: Option<Vec<f64>>) -> Result<Option<Vec<u64>>, BindingError> {
    surface_nodes
        .map(|nodes| {
            nodes
                .into_iter()
                .map(|n| seq_from_js(n, "a surface node"))
                .collect()
        })
        .transpose()
}

/// The human messages a rewind can target, newest first, from the live log given as a JSON
/// array of session events. `surfaceNodes`, when given, is the host's own surface
/// (`session.surface.nodes`), which the candidates are then read from.
#[napi]
pub fn list_candidates(
    env: Env,
    events_json: String,
    surface_nodes: Option<Vec<f64>>,
) -> napi::Result<Vec<BindingCandidate>> {
    let run = || -> Result<Vec<BindingCandidate>, BindingError> {
        let log = log_from(&events_json)?;
        let list = match nodes_from(surface_nodes)? {
            Some(nodes) => core_list_on(&log, &nodes)?.candidates,
            None => core_list(&log)?,
        };
        Ok(list.into_iter().map(BindingCandidate::from).collect())
    };
    run().map_err(|e| e.into_napi(&env))
}

/// Plans a rewind of the live log (a JSON array of session events) to `target`
/// (`@<seq>` or `<n>`, 1 = newest). `surfaceNodes`, when given, is the host's own surface
/// (`session.surface.nodes`): the plan is made on it, and `surfaceMismatch` says where the
/// planner's own fold disagrees. Refusals carry their stable codes (the engine's table).
#[napi]
pub fn plan_rewind(
    env: Env,
    events_json: String,
    target: String,
    surface_nodes: Option<Vec<f64>>,
) -> napi::Result<BindingPlan> {
    let run = || -> Result<BindingPlan, BindingError> {
        let target = parse_target(&target)?;
        let log = log_from(&events_json)?;
        let nodes = nodes_from(surface_nodes)?;
        Ok(core_plan(&log, nodes.as_deref(), target)?.into())
    };
    run().map_err(|e| e.into_napi(&env))
}

/// Plans a fork rewind of the live log (a JSON array of session events) to `target`: the
/// inclusive boundary to seed the child with, so that it holds exactly the messages before the
/// target. `surfaceNodes` as for `planRewind`. Refusals carry their stable codes
/// (`rewind/fork-inside-turn`, ...).
#[napi]
pub fn plan_fork(
    env: Env,
    events_json: String,
    target: String,
    surface_nodes: Option<Vec<f64>>,
) -> napi::Result<BindingForkPlan> {
    let run = || -> Result<BindingForkPlan, BindingError> {
        let target = parse_target(&target)?;
        let log = log_from(&events_json)?;
        let nodes = nodes_from(surface_nodes)?;
        Ok(core_fork(&log, nodes.as_deref(), target)?.into())
    };
    run().map_err(|e| e.into_napi(&env))
}

/// Validates a target text without planning (`rewind/bad-target` on refusal); returns its
/// canonical form (`@12` or `3`).
#[napi]
pub fn check_target(env: Env, target: String) -> napi::Result<String> {
    parse_target(&target)
        .map(|t| t.to_string())
        .map_err(|e| BindingError::from(e).into_napi(&env))
}

/// Every stable error code this build knows (the engine's table, in its order).
#[napi]
pub fn error_codes() -> Vec<String> {
    rewind_engine::ErrorCode::all()
        .map(|c| c.as_str().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surface_nodes_convert_to_seqs_or_are_refused() {
        assert_eq!(nodes_from(None).ok(), Some(None));
        assert_eq!(
            nodes_from(Some(vec![0.0, 4.0, 2.0])).ok(),
            Some(Some(vec![0, 4, 2]))
        );
        let e = nodes_from(Some(vec![1.0, -1.0])).expect_err("a negative node");
        assert_eq!(e.code, "rewind/bad-request");
        let e = nodes_from(Some(vec![1.5])).expect_err("a fraction");
        assert_eq!(e.code, "rewind/bad-request");
    }

    #[test]
    fn a_plan_on_the_hosts_surface_reports_a_disagreement() {
        let log = log_from(
            r#"[{"type":"user/message","seq":0,"time":1,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"a"}],"source":{"kind":"user"}},"surfaceOp":"append"},
                {"type":"user/message","seq":1,"time":2,"data":{"id":"m2","role":"user","content":[{"type":"text","text":"b"}],"source":{"kind":"user"}},"surfaceOp":"append"}]"#,
        )
        .expect("log");
        let target = parse_target("@0").expect("target");
        let agreed = BindingPlan::from(core_plan(&log, Some(&[0, 1]), target).expect("plan"));
        assert!(agreed.surface_mismatch.is_none());
        let plan = BindingPlan::from(core_plan(&log, Some(&[0]), target).expect("plan"));
        assert_eq!(plan.shadowed_seqs, vec![0.0]);
        let mismatch = plan.surface_mismatch.expect("a disagreement");
        assert_eq!(mismatch.own_nodes, vec![0.0, 1.0]);
        assert_eq!(mismatch.first_difference, Some(1));
        let e = BindingError::from(core_plan(&log, Some(&[7]), target).expect_err("refused"));
        assert_eq!(e.code, "rewind/invalid-log");
        let e = BindingError::from(
            core_fork(&log, Some(&[0]), parse_target("@1").expect("target"))
                .expect_err("not on the host's surface"),
        );
        assert_eq!(e.code, "rewind/not-on-surface");
    }
}
