//! Planner bindings (sync: cheap, pure work on the calling thread).

use napi::bindgen_prelude::Env;
use napi_derive::napi;
use rewind_plan::{
    SessionLog, list_candidates as core_list, parse_target, plan_fork as core_fork,
    plan_rewind as core_plan,
};

use crate::error::BindingError;
use crate::types::{BindingCandidate, BindingForkPlan, BindingPlan};

fn log_from(events_json: &str) -> Result<SessionLog, BindingError> {
    Ok(SessionLog::from_events_json(events_json)?)
}

/// The human messages a rewind can target, newest first, from the live log given as a JSON
/// array of session events.
#[napi]
pub fn list_candidates(env: Env, events_json: String) -> napi::Result<Vec<BindingCandidate>> {
    let run = || -> Result<Vec<BindingCandidate>, BindingError> {
        let log = log_from(&events_json)?;
        Ok(core_list(&log)?
            .into_iter()
            .map(BindingCandidate::from)
            .collect())
    };
    run().map_err(|e| e.into_napi(&env))
}

/// Plans a rewind of the live log (a JSON array of session events) to `target`
/// (`@<seq>` or `<n>`, 1 = newest). Refusals carry their stable codes (the engine's table).
#[napi]
pub fn plan_rewind(env: Env, events_json: String, target: String) -> napi::Result<BindingPlan> {
    let run = || -> Result<BindingPlan, BindingError> {
        let target = parse_target(&target)?;
        let log = log_from(&events_json)?;
        Ok(core_plan(&log, target)?.into())
    };
    run().map_err(|e| e.into_napi(&env))
}

/// Plans a fork rewind of the live log (a JSON array of session events) to `target`: the
/// inclusive boundary to seed the child with, so that it holds exactly the messages before the
/// target. Refusals carry their stable codes (`rewind/fork-inside-turn`, ...).
#[napi]
pub fn plan_fork(env: Env, events_json: String, target: String) -> napi::Result<BindingForkPlan> {
    let run = || -> Result<BindingForkPlan, BindingError> {
        let target = parse_target(&target)?;
        let log = log_from(&events_json)?;
        Ok(core_fork(&log, target)?.into())
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
    rewind_engine::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect()
}
