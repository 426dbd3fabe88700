//! `BindingChainLink`: one ancestor of a forked session.

use napi_derive::napi;

/// One ancestor of a forked session, nearest parent first: its before-states with anchor
/// `<= maxAnchor` (the fork boundary) are read in place by a rewind inside the child.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingChainLink {
    /// The ancestor session's id.
    pub session_id: String,
    /// The fork boundary seq (inclusive).
    pub max_anchor: f64,
}
