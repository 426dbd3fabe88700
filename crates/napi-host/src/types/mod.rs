//! The JavaScript-facing data types, one `Binding*` type per file.

mod binding_candidate;
mod binding_capture_outcome;
mod binding_chain_link;
mod binding_cleanup_policy;
mod binding_engine;
mod binding_failed_path;
mod binding_file_diff;
mod binding_fork_plan;
mod binding_history_entry;
mod binding_last_sweep;
mod binding_not_covered;
mod binding_plan;
mod binding_preview;
mod binding_preview_file;
mod binding_restore_outcome;
mod binding_restore_status;
mod binding_scan_refusal;
mod binding_scan_report;
mod binding_scan_request;
mod binding_skipped_path;
mod binding_storage;
mod binding_sweep_item;
mod binding_sweep_report;
mod binding_undo_outcome;

pub use binding_candidate::BindingCandidate;
pub use binding_capture_outcome::BindingCaptureOutcome;
pub use binding_chain_link::BindingChainLink;
pub use binding_cleanup_policy::BindingCleanupPolicy;
pub use binding_engine::BindingGitReport;
pub use binding_engine::{
    BindingEntryActions, BindingFault, BindingInterruptedState, BindingJudged, BindingPrepared, BindingRedoDone,
    BindingRefusal, BindingResolved, BindingRewindFiles, BindingRewindRestore, BindingRewindStart,
    BindingUndoCheck, BindingUndoDone, InterruptedKind, JournalState, Judgement,
};
pub use binding_failed_path::BindingFailedPath;
pub use binding_file_diff::{BindingDiffSide, BindingFileDiff, BindingRestoreSelection};
pub use binding_fork_plan::BindingForkPlan;
pub use binding_history_entry::{
    BindingForkInfo, BindingHistoryDamage, BindingHistoryEntry, BindingHistoryList,
    BindingHistoryPaths,
};
pub use binding_last_sweep::{
    BindingAutoSweep, BindingLastQuota, BindingLastSweep, BindingQuotaRecord,
};
pub use binding_not_covered::BindingNotCovered;
pub use binding_plan::{BindingMarker, BindingPlan, BindingSurfaceMismatch, BindingSurfaceOp};
pub use binding_preview::BindingPreview;
pub use binding_preview_file::BindingPreviewFile;
pub use binding_restore_outcome::BindingRestoreOutcome;
pub use binding_restore_status::BindingRestoreStatus;
pub use binding_scan_refusal::BindingScanRefusal;
pub use binding_scan_report::BindingScanReport;
pub use binding_scan_request::BindingScanRequest;
pub use binding_skipped_path::BindingSkippedPath;
pub use binding_storage::{BindingCompact, BindingStorage, BindingStorageSession};
pub use binding_sweep_item::BindingSweepItem;
pub use binding_sweep_report::BindingSweepReport;
pub use binding_undo_outcome::{BindingUndoChoices, BindingUndoOutcome};

/// A `u64` seq or count as a JavaScript number (exact up to 2^53).
pub(crate) fn js_number(value: u64) -> f64 {
    value as f64
}

/// A JavaScript number as a `u64` seq, refusing fractions, negatives and unsafe integers.
pub(crate) fn seq_from_js(value: f64, what: &str) -> Result<u64, crate::error::BindingError> {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    if value.is_finite() && (0.0..=MAX_SAFE).contains(&value) && value.fract() == 0.0 {
        Ok(value as u64)
    } else {
        Err(crate::error::BindingError::bad_request(format!(
            "{what} must be a non-negative safe integer, got {value}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqs_from_javascript_are_non_negative_safe_integers() {
        assert_eq!(seq_from_js(0.0, "s").ok(), Some(0));
        assert_eq!(seq_from_js(42.0, "s").ok(), Some(42));
        for bad in [-1.0, 1.5, f64::NAN, f64::INFINITY, 9_007_199_254_740_992.0] {
            let e = seq_from_js(bad, "seq").expect_err("refused");
            assert_eq!(e.code, "rewind/bad-request");
        }
    }

    #[test]
    fn a_plan_crosses_with_its_replace_range() {
        let log = rewind_plan::SessionLog::from_events_json(
            r#"[{"type":"user/message","seq":0,"time":1,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"},
                {"type":"assistant/message","seq":1,"time":2,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}},"surfaceOp":"append","sourceEventSeqs":[]}]"#,
        )
        .expect("log");
        let plan = BindingPlan::from(
            rewind_plan::plan_rewind(&log, rewind_plan::Target::Seq(0)).expect("plan"),
        );
        let marker = plan.marker.expect("marker");
        assert_eq!(
            (
                marker.surface_op.op.as_str(),
                marker.surface_op.start,
                marker.surface_op.end
            ),
            ("replace", 0.0, 1.0)
        );
        assert_eq!(marker.source_event_seqs, vec![0.0, 1.0]);
        assert_eq!(marker.data["source"]["kind"], "dsh-prompt-rewind");
        assert!(plan.surface_mismatch.is_none());
        assert_eq!(plan.target_text, "hi");
    }
}
