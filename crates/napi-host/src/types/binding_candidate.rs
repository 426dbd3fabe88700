//! `BindingCandidate`: one message a rewind can target.

use napi_derive::napi;

/// One message a rewind can target (newest first; `index` 1 = newest).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingCandidate {
    /// 1-based recency index.
    pub index: u32,
    /// The message seq (for pending steering: the seq of the inbox event that queued it).
    pub seq: f64,
    /// One-line preview of the message text.
    pub preview: String,
    /// `true` for steering the model has not read yet.
    pub pending: bool,
    /// The message id, when the log has one.
    pub message_id: Option<String>,
    /// Event time (epoch ms), when numeric.
    pub time: Option<f64>,
}

impl From<rewind_plan::Candidate> for BindingCandidate {
    fn from(c: rewind_plan::Candidate) -> Self {
        Self {
            index: c.index,
            seq: super::js_number(c.seq),
            preview: c.preview,
            pending: c.pending,
            message_id: c.message_id,
            time: c.time.and_then(|t| t.as_f64()),
        }
    }
}
