//! `BindingPreview`: the impact of a rewind on the files; nothing is changed to compute it.

use super::BindingNotCovered;
use super::BindingPreviewFile;
use super::BindingSkippedPath;
use napi_derive::napi;

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
    /// Paths changed only outside the agent since the target: left as they are.
    pub outside: Vec<String>,
    /// Workspace paths whose content the store does not hold (budgets, unreadable, ...).
    pub not_covered: Vec<BindingNotCovered>,
    /// Planned paths that cannot be read for the restore's copy of them (a refused open):
    /// the restore will leave them as they are and report them as failed.
    pub unreadable: Vec<super::BindingFailedPath>,
    /// Planned files whose before-state is a git blob the workspace's repository no longer
    /// holds (pruned after the commit that held it was dropped): the rewind is refused
    /// (`rewind/git-object-gone`) unless they are left out.
    pub git_object_gone: Vec<super::BindingFailedPath>,
}
