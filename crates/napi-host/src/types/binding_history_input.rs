//! `BindingHistoryInput`: a rewind to record.

use napi_derive::napi;

use super::BindingHistoryPaths;

/// A rewind to record in the history.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingHistoryInput {
    /// Op id, shared with the restore journal.
    pub op_id: String,
    /// Session rewound.
    pub session_id: String,
    /// Target seq.
    pub target_seq: f64,
    /// Time of the rewind (epoch ms).
    pub time: f64,
    /// `done` | `partial` | `failed` | `started` (before the rewind changes anything).
    pub outcome: String,
    /// The paths per outcome.
    pub paths: BindingHistoryPaths,
    /// The child session, when the rewind forked into one.
    pub fork_child_session_id: Option<String>,
    /// The id of the marker message an in-place rewind appends.
    pub marker_id: Option<String>,
    /// The target message's text (cut to 200 characters when recorded).
    pub target_text: Option<String>,
    /// The workspace's folder name.
    pub workspace_name: Option<String>,
    /// On a redo: the undone rewind it does again.
    pub redo_of: Option<String>,
}
