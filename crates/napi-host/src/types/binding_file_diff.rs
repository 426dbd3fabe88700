//! `BindingFileDiff`: what restoring one path would change inside it.

use napi_derive::napi;

/// One side of a file diff.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingDiffSide {
    /// What is there.
    #[napi(
        ts_type = "'absent' | 'text' | 'binary' | 'too-large' | 'too-many-lines' | 'not-regular' | 'unreadable' | 'missing-backup' | 'corrupt-backup'"
    )]
    pub state: String,
    /// Size in bytes, when known.
    pub size: Option<f64>,
    /// Number of lines (text).
    pub lines: Option<f64>,
    /// SHA-256 (binary sides and backups).
    pub sha256: Option<String>,
    /// Why it could not be read (`unreadable`).
    pub message: Option<String>,
}

/// What restoring one path would change inside it: a unified diff of its lines (now →
/// after the restore) when both sides are text within the bounds, else a summary of
/// each side.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BindingFileDiff {
    /// Workspace-relative path, spelled exactly (`hex:` and its bytes for a name that is not
    /// valid UTF-8).
    pub path: String,
    /// `write`, `create` or `delete`.
    #[napi(ts_type = "'write' | 'create' | 'delete'")]
    pub action: String,
    /// The file now.
    pub now: BindingDiffSide,
    /// The file as the restore would leave it.
    pub then: BindingDiffSide,
    /// Lines added by the restore (text only).
    pub added: Option<f64>,
    /// Lines removed by the restore (text only).
    pub removed: Option<f64>,
    /// The unified diff's hunks, without a `---`/`+++` header (text only).
    pub unified: Option<String>,
    /// The hunks were cut at the size bound.
    pub truncated: bool,
}

/// Which planned files a restore takes: every one, minus `keep`, limited to `only` when
/// given (a path or a directory prefix each).
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct BindingRestoreSelection {
    /// Restore only these paths (or directories).
    pub only: Option<Vec<String>>,
    /// Leave these paths (or directories) as they are.
    pub keep: Option<Vec<String>>,
}
