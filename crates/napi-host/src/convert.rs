//! Conversions shared by the binding modules: core values into `Binding*` values and back.
//! No decisions: each is a field-by-field mapping (the engine decides).

use rewind_engine::ChainLink;
use snapshot_store::JournalState;

use crate::error::BindingError;
use crate::types::{
    BindingChainLink, BindingFailedPath, BindingRestoreOutcome, BindingRestoreStatus,
    BindingSkippedPath, seq_from_js,
};

/// The fork chain a host passes (nearest parent first), validated.
pub(crate) fn chain(links: Option<Vec<BindingChainLink>>) -> Result<Vec<ChainLink>, BindingError> {
    links
        .unwrap_or_default()
        .into_iter()
        .map(|l| {
            Ok(ChainLink {
                max_anchor: seq_from_js(l.max_anchor, "maxAnchor")?,
                session_id: l.session_id,
            })
        })
        .collect()
}

/// The binding of a journal's status.
pub(crate) fn restore_status(s: snapshot_store::RestoreStatus) -> BindingRestoreStatus {
    BindingRestoreStatus {
        target_seq: s.target_seq as f64,
        state: rewind_engine::journal_state(s.state).into(),
        actions: count(s.actions),
        done: count(s.done),
        failed: count(s.failed),
        pending: count(s.pending),
        rollback_started: s.rollback_started,
        op_id: s.op_id,
        error: None,
    }
}

pub(crate) fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn skipped_reason(reason: &impl std::fmt::Display) -> String {
    reason.to_string()
}

pub(crate) fn restore_outcome(o: snapshot_store::RestoreOutcome) -> BindingRestoreOutcome {
    let mut skipped: Vec<BindingSkippedPath> = o
        .skipped
        .iter()
        .map(|s| BindingSkippedPath {
            path: s.path.spelling(),
            reason: skipped_reason(&s.reason),
        })
        .collect();
    skipped.extend(o.uncovered.iter().map(|u| BindingSkippedPath {
        path: u.path.spelling(),
        reason: format!("over the per-file cap ({} bytes), not backed up", u.size),
    }));
    BindingRestoreOutcome {
        written: o.written.iter().map(|p| p.spelling()).collect(),
        deleted: o.deleted.iter().map(|p| p.spelling()).collect(),
        skipped,
        failed: o
            .failed
            .iter()
            .map(|f| BindingFailedPath {
                path: f.path.spelling(),
                message: f.error.clone(),
            })
            .collect(),
        completed: o.state == JournalState::Completed,
        outside: Vec::new(),
        not_covered: Vec::new(),
        kept: Vec::new(),
    }
}
