//! Results of the snapshot-store bindings.

use napi_derive::napi;

/// A path left alone, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingSkippedPath {
    /// Workspace-relative path.
    pub path: String,
    /// Why it was left alone.
    pub reason: String,
}

/// A path that failed, with why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingFailedPath {
    /// Workspace-relative path.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// One planned restore action.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingPreviewFile {
    /// Workspace-relative path.
    pub path: String,
    /// `write` (replace content), `create` (recreate a missing file) or `delete`.
    pub action: String,
}

/// The impact of a rewind on the files; nothing is changed to compute it.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingPreview {
    /// Actions a restore would take (only those that change the disk).
    pub files: Vec<BindingPreviewFile>,
    /// Recorded paths over the per-file cap (known, not backed up).
    pub uncovered: Vec<String>,
    /// Paths refused (symlinks, hard links, ...), with the reason.
    pub skipped: Vec<BindingSkippedPath>,
}

/// The outcome of a journaled restore.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingRestoreOutcome {
    /// Paths written (content replaced or recreated).
    pub written: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths left alone, with the reason (uncovered ones included).
    pub skipped: Vec<BindingSkippedPath>,
    /// Paths that failed.
    pub failed: Vec<BindingFailedPath>,
    /// Whether the journal ended `completed`.
    pub completed: bool,
}

/// The outcome of undoing a restore (files only).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingUndoOutcome {
    /// `ok` or `partial`.
    pub kind: String,
    /// Paths written back.
    pub restored: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths that failed.
    pub failed: Vec<BindingFailedPath>,
}

/// The outcome of a before-state capture.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingCaptureOutcome {
    /// `captured`, `absent`, `uncovered`, `skipped` or `already-staged`.
    pub kind: String,
    /// The path (workspace-relative when resolved).
    pub path: String,
    /// For `skipped`: why.
    pub reason: Option<String>,
}
