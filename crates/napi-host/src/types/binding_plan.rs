//! `BindingPlan`: what a rewind does to the conversation.

use napi_derive::napi;

/// The replace operation of the marker: `{op:'replace', start, end}`.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSurfaceOp {
    /// Always `replace`.
    pub op: String,
    /// First replaced surface node (the target seq).
    pub start: f64,
    /// Last replaced surface node.
    pub end: f64,
}

/// The `user/message` marker to append with `session.append`.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingMarker {
    /// Message data (`role`, `content`, `source`); the host adds a fresh `id`.
    pub data: serde_json::Value,
    /// The surface operation.
    pub surface_op: BindingSurfaceOp,
    /// Every shadowed surface node.
    pub source_event_seqs: Vec<f64>,
}

/// The planned rewind.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingPlan {
    /// The seq rewound to.
    pub target_seq: f64,
    /// The marker; `null` when the target is pending steering (nothing on the surface moves).
    pub marker: Option<BindingMarker>,
    /// Surface nodes the marker hides, in surface order.
    pub shadowed_seqs: Vec<f64>,
    /// Ids of unread steering messages to withdraw from the inbox.
    pub withdraw_pending: Vec<String>,
    /// The target message's text.
    pub target_text: String,
}

impl From<rewind_plan::RewindPlan> for BindingPlan {
    fn from(p: rewind_plan::RewindPlan) -> Self {
        let marker = p.marker.map(|m| {
            let (start, end) = match m.surface_op {
                rewind_plan::SurfaceOp::Replace { start, end } => (start, end),
                // The planner only builds replace markers; anything else would be a planner bug,
                // surfaced as an impossible range the host refuses to append.
                _ => (u64::MAX, 0),
            };
            BindingMarker {
                data: m.data,
                surface_op: BindingSurfaceOp {
                    op: "replace".into(),
                    start: super::js_number(start),
                    end: super::js_number(end),
                },
                source_event_seqs: m
                    .source_event_seqs
                    .into_iter()
                    .map(super::js_number)
                    .collect(),
            }
        });
        Self {
            target_seq: super::js_number(p.target_seq),
            marker,
            shadowed_seqs: p.shadowed_seqs.into_iter().map(super::js_number).collect(),
            withdraw_pending: p.withdraw_pending,
            target_text: p.target_text,
        }
    }
}
