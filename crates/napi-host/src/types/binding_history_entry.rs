//! `BindingHistoryEntry`: one rewind in a workspace's history.

use napi_derive::napi;

/// Paths of one history entry, per outcome (each list capped by the history crate).
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct BindingHistoryPaths {
    /// Paths written back.
    pub restored: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths skipped (with their reason in the host report).
    pub skipped: Vec<String>,
    /// Paths that failed.
    pub failed: Vec<String>,
    /// Planned paths the user kept as they were (not restored).
    pub kept: Option<Vec<String>>,
}

/// The fork a rewind created, when it forked.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingForkInfo {
    /// The child session id.
    pub child_session_id: String,
}

/// One rewind in a workspace's history.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingHistoryEntry {
    /// Op id, shared with the restore journal.
    pub op_id: String,
    /// Session rewound.
    pub session_id: String,
    /// Partition key (`ws-<id>` or `_unknown`).
    pub workspace: String,
    /// Target seq.
    pub target_seq: f64,
    /// Time of the rewind (epoch ms).
    pub time: f64,
    /// `done` | `partial` | `failed` | `started` | `rolled-back` | `abandoned`.
    #[napi(ts_type = "'done' | 'partial' | 'failed' | 'started' | 'rolled-back' | 'abandoned'")]
    pub outcome: String,
    /// Number of restored paths.
    pub restored: f64,
    /// Number of deleted paths.
    pub deleted: f64,
    /// Number of skipped paths.
    pub skipped: f64,
    /// Number of failed paths.
    pub failed: f64,
    /// Number of planned paths kept as they were.
    pub kept: f64,
    /// The target message's text (cut), when recorded.
    pub target_text: Option<String>,
    /// The workspace's folder name, when recorded.
    pub workspace_name: Option<String>,
    /// The session the conversation as it was before the rewind continues in, once undone.
    pub undo_session_id: Option<String>,
    /// On a redo: the undone rewind whose file changes it made again.
    pub redo_of: Option<String>,
    /// The paths.
    pub paths: BindingHistoryPaths,
    /// When the rewind's file changes were undone (epoch ms).
    pub undone_at: Option<f64>,
    /// `ok` | `partial` | `failed`.
    #[napi(ts_type = "'ok' | 'partial' | 'failed'")]
    pub undo_outcome: Option<String>,
    /// `files`, or `files-and-conversation` (the conversation continued in `undoSessionId`).
    #[napi(ts_type = "'files' | 'files-and-conversation'")]
    pub undo_mode: Option<String>,
    /// The fork, if any.
    pub fork: Option<BindingForkInfo>,
    /// The id of the marker message of an in-place rewind.
    pub marker_id: Option<String>,
    /// When an undo began (epoch ms); with no `undone_at`, an interrupted undo.
    pub undo_started_at: Option<f64>,
}

fn name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

impl From<rewind_history::Entry> for BindingHistoryEntry {
    fn from(e: rewind_history::Entry) -> Self {
        Self {
            outcome: name(&e.outcome),
            restored: e.counts.restored as f64,
            deleted: e.counts.deleted as f64,
            skipped: e.counts.skipped as f64,
            failed: e.counts.failed as f64,
            kept: e.counts.kept as f64,
            target_text: e.target_text,
            workspace_name: e.workspace_name,
            undo_session_id: e.undo_session_id,
            redo_of: e.redo_of,
            paths: BindingHistoryPaths {
                restored: e.paths.restored,
                deleted: e.paths.deleted,
                skipped: e.paths.skipped,
                failed: e.paths.failed,
                kept: Some(e.paths.kept),
            },
            undone_at: e.undone_at.map(|t| t as f64),
            undo_started_at: e.undo_started_at.map(|t| t as f64),
            marker_id: e.marker_id,
            undo_outcome: e.undo_outcome.as_ref().map(name),
            undo_mode: e.undo_mode.as_ref().map(name),
            fork: e.fork.map(|f| BindingForkInfo {
                child_session_id: f.child_session_id,
            }),
            target_seq: e.target_seq as f64,
            time: e.time as f64,
            op_id: e.op_id,
            session_id: e.session_id,
            workspace: e.workspace,
        }
    }
}

/// A damaged history file: why, and how many entries could not be read.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingHistoryDamage {
    /// What is wrong with the file.
    pub detail: String,
    /// Entries found but not readable.
    pub dropped: f64,
}

/// A partition as the history page shows it: the entries that can be read,
/// newest first, and the damage when the file is damaged.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingHistoryList {
    /// The entries, newest first.
    pub entries: Vec<BindingHistoryEntry>,
    /// Set when `history.json` is damaged (`rewind/history-corrupt`).
    pub damaged: Option<BindingHistoryDamage>,
}
