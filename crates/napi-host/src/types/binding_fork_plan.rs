//! `BindingForkPlan`: what a fork rewind does.

use napi_derive::napi;

use super::{BindingSurfaceMismatch, js_number};

/// What a fork rewind does: the target, the inclusive fork boundary for the child's seed, and
/// the target's text (to refill the child's composer).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingForkPlan {
    /// The human message rewound to.
    pub target_seq: f64,
    /// The inclusive boundary seq: the child is seeded with events `0..=boundarySeq`.
    pub boundary_seq: f64,
    /// The target message's text.
    pub target_text: String,
    /// Where the planner's own fold disagrees with the host's surface (absent when they agree or
    /// no surface was given).
    pub surface_mismatch: Option<BindingSurfaceMismatch>,
}

impl From<rewind_plan::ForkPlan> for BindingForkPlan {
    fn from(p: rewind_plan::ForkPlan) -> Self {
        Self {
            target_seq: js_number(p.target_seq),
            boundary_seq: js_number(p.boundary_seq),
            target_text: p.target_text,
            surface_mismatch: p.surface_mismatch.map(BindingSurfaceMismatch::from),
        }
    }
}
