//! `BindingScanRequest`: one workspace scan around a tool call or at a message boundary.

use napi_derive::napi;

/// One workspace scan around a tool call or at a message boundary.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingScanRequest {
    /// `before` (a tool call), `after` (it), or `boundary` (a new human message).
    #[napi(ts_type = "'before' | 'after' | 'boundary'")]
    pub phase: String,
    /// The tool call's id (phases `before` and `after`).
    pub call_id: Option<String>,
    /// The seq of the human message the turn belongs to.
    pub anchor_seq: f64,
    /// Whether the call succeeded (`after`; a failed call's changes are recorded too).
    pub ok: Option<bool>,
    /// Per-file cap in bytes (the host's setting; `0` = none).
    pub max_file_bytes: f64,
    /// The workspace's baseline byte budget.
    pub max_baseline_bytes: f64,
    /// The file-count limit: a larger workspace refuses the scan (`rewind/scan-budget`).
    pub max_files: f64,
}
