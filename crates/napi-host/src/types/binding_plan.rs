//! `BindingPlan`: what a rewind does to the conversation.

use napi_derive::napi;

/// The replace operation of the marker, its range spelled neutrally: `{op:'replace', start, end}`.
/// A host of session format 3 or later appends it as `{op:'replace', startSeq: start, endSeq: end}`.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSurfaceOp {
    /// Always `replace`.
    #[napi(ts_type = "'replace'")]
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
    /// Where the planner's own fold disagrees with the host's surface the plan was made on
    /// (absent when they agree or no surface was given).
    pub surface_mismatch: Option<BindingSurfaceMismatch>,
}

/// The planner's own fold disagrees with the host's surface (`session.surface.nodes`).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSurfaceMismatch {
    /// The planner's own surface nodes (empty when its fold refused the log).
    pub own_nodes: Vec<f64>,
    /// Why the planner's own fold refused the log, when it did.
    pub own_error: Option<String>,
    /// The first surface position where the two differ (absent when the own fold refused the log).
    pub first_difference: Option<u32>,
}

impl From<rewind_plan::SurfaceMismatch> for BindingSurfaceMismatch {
    fn from(m: rewind_plan::SurfaceMismatch) -> Self {
        Self {
            own_nodes: m.own_nodes.into_iter().map(super::js_number).collect(),
            own_error: m.own_error,
            first_difference: m
                .first_difference
                .map(|i| u32::try_from(i).unwrap_or(u32::MAX)),
        }
    }
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
            surface_mismatch: p.surface_mismatch.map(BindingSurfaceMismatch::from),
        }
    }
}
