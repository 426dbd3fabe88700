//! The JavaScript-facing data types, one `Binding*` type per file.

mod binding_candidate;
mod binding_capture_outcome;
mod binding_cleanup_policy;
mod binding_failed_path;
mod binding_history_entry;
mod binding_history_input;
mod binding_plan;
mod binding_preview;
mod binding_preview_file;
mod binding_restore_outcome;
mod binding_restore_status;
mod binding_skipped_path;
mod binding_sweep_item;
mod binding_sweep_report;
mod binding_undo_outcome;

pub use binding_candidate::BindingCandidate;
pub use binding_capture_outcome::BindingCaptureOutcome;
pub use binding_cleanup_policy::BindingCleanupPolicy;
pub use binding_failed_path::BindingFailedPath;
pub use binding_history_entry::{BindingForkInfo, BindingHistoryEntry, BindingHistoryPaths};
pub use binding_history_input::BindingHistoryInput;
pub use binding_plan::{BindingMarker, BindingPlan, BindingSurfaceOp};
pub use binding_preview::BindingPreview;
pub use binding_preview_file::BindingPreviewFile;
pub use binding_restore_outcome::BindingRestoreOutcome;
pub use binding_restore_status::BindingRestoreStatus;
pub use binding_skipped_path::BindingSkippedPath;
pub use binding_sweep_item::BindingSweepItem;
pub use binding_sweep_report::BindingSweepReport;
pub use binding_undo_outcome::BindingUndoOutcome;

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
