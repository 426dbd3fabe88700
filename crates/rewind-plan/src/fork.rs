//! Planning a fork rewind: continue from the target message in a new child
//! session (DSH's `sessions.fork(source, boundary, childId)`), leaving the
//! original conversation intact.
//!
//! DSH forks through an inclusive boundary seq and refuses a boundary inside an
//! open turn. A human message opens its turn (`turn/start` comes just before
//! it), so the boundary is the last event before that `turn/start`: the child
//! then holds every surface node before the target and nothing after it —
//! except injected context (a plugin's `user/message`) delivered in the same
//! step as the target, which belongs to the target's turn and stays behind,
//! and a `system/message` or `developer/message` the host wrote in that turn
//! before the target (formats 3 and 4), which the child's own first step
//! writes again.
//! A human message sent mid-turn (steering read at a later step) cannot be
//! forked before without losing the earlier part of its turn, so it is refused.

use serde::Serialize;
use thiserror::Error;

use crate::event::{TURN_END, TURN_START, UserMessage, is_instruction_node};
use crate::log::SessionLog;
use crate::plan::{PlanError, SurfaceMismatch, plan_rewind_with};
use crate::target::Target;

/// What a fork rewind does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkPlan {
    /// The human message rewound to.
    pub target_seq: u64,
    /// The inclusive fork boundary to hand to DSH's `sessions.fork`.
    pub boundary_seq: u64,
    /// The target message's text (to refill the child's composer).
    pub target_text: String,
    /// Where the planner's own fold disagrees with the host's surface (only for
    /// [`plan_fork_on`]; `None` when they agree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surface_mismatch: Option<SurfaceMismatch>,
}

/// Why a fork rewind cannot be planned.
#[derive(Debug, Clone, Error, PartialEq)]
#[non_exhaustive]
pub enum ForkError {
    /// The target itself is refused (unknown, not human, not on the surface, …).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// No boundary before the target keeps exactly the messages before it.
    #[error("message at seq {seq} cannot be forked before: {reason}")]
    InsideTurn {
        /// The target.
        seq: u64,
        /// Why.
        reason: String,
    },
}

/// Plans a fork rewind of `log` to `target`.
pub fn plan_fork(log: &SessionLog, target: Target) -> Result<ForkPlan, ForkError> {
    plan_fork_with(log, None, target)
}

/// [`plan_fork`] on the host's own surface (`host_nodes`: the seqs of DSH's
/// `session.surface.nodes`, in order); see [`crate::plan_rewind_on`].
pub fn plan_fork_on(
    log: &SessionLog,
    host_nodes: &[u64],
    target: Target,
) -> Result<ForkPlan, ForkError> {
    plan_fork_with(log, Some(host_nodes), target)
}

/// [`plan_fork`] (`host_nodes: None`) or [`plan_fork_on`] (`Some`).
pub fn plan_fork_with(
    log: &SessionLog,
    host_nodes: Option<&[u64]>,
    target: Target,
) -> Result<ForkPlan, ForkError> {
    let plan = plan_rewind_with(log, host_nodes, target)?;
    let seq = plan.target_seq;
    let inside = |reason: &str| ForkError::InsideTurn {
        seq,
        reason: reason.to_string(),
    };
    if plan.marker.is_none() {
        return Err(inside(
            "it is steering the model has not read yet; withdraw it with a plain rewind",
        ));
    }
    let upto = usize::try_from(seq)
        .unwrap_or(usize::MAX)
        .min(log.events.len());
    // The turn the target belongs to opens at the last turn boundary before it.
    let last_boundary = log.events[..upto]
        .iter()
        .rev()
        .find(|e| e.kind == TURN_START || e.kind == TURN_END);
    let boundary = match last_boundary {
        Some(e) if e.kind == TURN_START => {
            // Surface nodes between the turn start and the target would be lost
            // by forking before the turn: that is a message sent mid-turn.
            let earlier_in_turn = log.events[usize::try_from(e.seq).unwrap_or(0)..upto]
                .iter()
                .any(|ev| {
                    ev.surface_op.is_some()
                        && !is_instruction_node(&ev.kind)
                        && ev.user_message().is_none_or(|m: UserMessage| m.is_human())
                });
            if earlier_in_turn {
                return Err(inside(
                    "it was sent while a turn was running, after other messages of that turn",
                ));
            }
            e.seq
                .checked_sub(1)
                .ok_or_else(|| inside("its turn starts the session"))?
        }
        // Not inside a turn (e.g. a queued message not yet claimed): fork just before it.
        _ => seq
            .checked_sub(1)
            .ok_or_else(|| inside("it is the first event of the session"))?,
    };
    Ok(ForkPlan {
        target_seq: seq,
        boundary_seq: boundary,
        target_text: plan.target_text,
        surface_mismatch: plan.surface_mismatch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{SessionEvent, SurfaceOp, USER_MESSAGE};
    use serde_json::json;

    fn user(seq: u64, text: &str) -> SessionEvent {
        SessionEvent::new(USER_MESSAGE, seq, &json!({"id": format!("m{seq}"), "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}}))
            .with_surface(SurfaceOp::Append, None)
    }
    fn ev(kind: &str, seq: u64) -> SessionEvent {
        SessionEvent::new(kind, seq, &json!({"turn": 1}))
    }

    #[test]
    fn forks_just_before_the_targets_turn() {
        let events = vec![
            ev("request/header", 0),
            ev(TURN_START, 1),
            user(2, "first"),
            ev(TURN_END, 3),
            ev("request/header", 4),
            ev(TURN_START, 5),
            ev("step/start", 6),
            user(7, "second"),
            ev(TURN_END, 8),
        ];
        let log = SessionLog::from_events(None, events).expect("log");
        let plan = plan_fork(&log, Target::Seq(7)).expect("forks");
        assert_eq!(plan.boundary_seq, 4);
        assert_eq!(plan.target_text, "second");
        let plan = plan_fork(&log, Target::Seq(2)).expect("forks");
        assert_eq!(plan.boundary_seq, 0);
    }

    #[test]
    fn refuses_mid_turn_messages_and_bad_targets() {
        let events = vec![
            ev("x", 0),
            ev(TURN_START, 1),
            user(2, "a"),
            user(3, "steer"),
            ev(TURN_END, 4),
        ];
        let log = SessionLog::from_events(None, events).expect("log");
        let err = plan_fork(&log, Target::Seq(3)).unwrap_err();
        assert!(
            matches!(err, ForkError::InsideTurn { seq: 3, .. }),
            "{err:?}"
        );
        let err = plan_fork(&log, Target::Seq(9)).unwrap_err();
        assert!(
            matches!(err, ForkError::Plan(PlanError::UnknownSeq { seq: 9, .. })),
            "{err:?}"
        );
        let events = vec![ev(TURN_START, 0), user(1, "a")];
        let log = SessionLog::from_events(None, events).expect("log");
        let err = plan_fork(&log, Target::Seq(1)).unwrap_err();
        assert!(
            matches!(err, ForkError::InsideTurn { seq: 1, .. }),
            "{err:?}"
        );
    }
}
