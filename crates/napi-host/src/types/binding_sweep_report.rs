//! `BindingSweepReport`: what a sweep removed (or would remove) and what it kept.

use napi_derive::napi;

use super::{BindingSkippedPath, BindingSweepItem};

/// What a sweep removed (or, in a dry run, would remove) and what it kept.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSweepReport {
    /// Whether directories were really removed.
    pub applied: bool,
    /// The removed (or removable) session directories.
    pub items: Vec<BindingSweepItem>,
    /// Their total size in bytes.
    pub bytes: f64,
    /// Sessions kept, with why (`path` is the session id).
    pub kept: Vec<BindingSkippedPath>,
    /// Sessions whose removal failed, with why (`path` is the session id).
    pub failed: Vec<BindingSkippedPath>,
}
