//! The records kept in a history partition.

use serde::{Deserialize, Serialize};

use crate::key::WorkspaceKey;

/// Most paths kept per list (`restored`, `deleted`, `skipped`, `failed`) of
/// one entry. The counts always hold the full numbers; when a list is longer
/// than this, its first paths are kept and the rest dropped, so one huge
/// rewind cannot blow up the history file.
pub const MAX_PATHS_PER_LIST: usize = 200;

/// How a rewind's file half ended.
///
/// `Started`, `RolledBack` and `Abandoned` are new in format version 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Outcome {
    /// Every planned file action succeeded (the restore journal completed).
    Done,
    /// Some file actions failed; the journal stays open.
    Partial,
    /// The file half failed as a whole (the conversation half may still have run).
    Failed,
    /// Written before the rewind changes anything; replaced when it ends. An
    /// entry still `started` when no rewind runs is an interrupted rewind.
    Started,
    /// An interrupted rewind whose files were put back exactly as they were
    /// before it (the conversation half, if it ran, stays).
    RolledBack,
    /// An interrupted rewind that had changed nothing: no marker reached the
    /// session log and no file was touched.
    Abandoned,
}

impl Outcome {
    /// The outcome's name as written in the history file (`done`, `rolled-back`, …).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the rewind is over (anything but [`Outcome::Started`]).
    pub fn is_settled(self) -> bool {
        self != Self::Started
    }
}

/// How an undo of a rewind ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum UndoOutcome {
    /// Every file was put back.
    Ok,
    /// Some files were put back, some failed.
    Partial,
    /// The undo ran and failed.
    Failed,
}

impl UndoOutcome {
    /// The outcome's name as written in the history file (`ok`, `partial`, `failed`).
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// What an undo put back.
///
/// Adding a mode is a format change: it comes with a new
/// [`FORMAT_VERSION`](crate::FORMAT_VERSION), so an older build refuses the
/// file instead of misreading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UndoMode {
    /// Files only; the conversation stays rewound.
    Files,
    /// The files, and the conversation as it was before the rewind, continued in the
    /// session `undo_session_id` names (version 3).
    #[serde(rename = "files-and-conversation")]
    FilesAndConversation,
}

/// Numbers of paths per action of a rewind's file half.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Files written back from a backup.
    pub restored: u64,
    /// Files deleted because they did not exist at the target.
    pub deleted: u64,
    /// Paths left alone (already matching, links, over the cap, …).
    pub skipped: u64,
    /// Paths whose action failed.
    pub failed: u64,
    /// Planned paths the user chose to keep as they were (not restored).
    #[serde(default)]
    pub kept: u64,
}

/// The paths per action of a rewind's file half (workspace-relative strings,
/// each list at most [`MAX_PATHS_PER_LIST`] long).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paths {
    /// Files written back from a backup.
    #[serde(default)]
    pub restored: Vec<String>,
    /// Files deleted.
    #[serde(default)]
    pub deleted: Vec<String>,
    /// Paths left alone.
    #[serde(default)]
    pub skipped: Vec<String>,
    /// Paths whose action failed.
    #[serde(default)]
    pub failed: Vec<String>,
    /// Planned paths the user chose to keep as they were (not restored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}

impl Paths {
    /// The counts of these lists (use it when the lists are complete).
    pub fn counts(&self) -> Counts {
        let n = |v: &Vec<String>| v.len() as u64;
        Counts {
            restored: n(&self.restored),
            deleted: n(&self.deleted),
            skipped: n(&self.skipped),
            failed: n(&self.failed),
            kept: n(&self.kept),
        }
    }

    pub(crate) fn truncate(&mut self) {
        for list in [
            &mut self.restored,
            &mut self.deleted,
            &mut self.skipped,
            &mut self.failed,
            &mut self.kept,
        ] {
            list.truncate(MAX_PATHS_PER_LIST);
        }
    }
}

/// Fork information of a rewind whose files went into a forked child session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkInfo {
    /// The id of the child session the fork created.
    pub child_session_id: String,
}

/// One rewind in the audit trail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The rewind's operation id (shared with its restore journal).
    pub op_id: String,
    /// The session the rewind ran in.
    pub session_id: String,
    /// The partition key of the session's workspace.
    pub workspace: String,
    /// The log seq of the user message the rewind went back to.
    pub target_seq: u64,
    /// When the rewind ran, milliseconds since the Unix epoch.
    pub time: u64,
    /// How the file half ended.
    pub outcome: Outcome,
    /// Full numbers of paths per action.
    pub counts: Counts,
    /// Paths per action (each list possibly cut to [`MAX_PATHS_PER_LIST`]).
    #[serde(default)]
    pub paths: Paths,
    /// Set when the rewind forked into a child session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkInfo>,
    /// The `id` of the marker message an in-place rewind appends (version 2),
    /// so a restart can tell whether the marker reached the session log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker_id: Option<String>,
    /// When an undo of this entry began (version 2): written before the undo
    /// changes a file; an entry with this and no `undone_at` is an
    /// interrupted undo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_started_at: Option<u64>,
    /// When the rewind was undone, milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone_at: Option<u64>,
    /// How the undo ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_outcome: Option<UndoOutcome>,
    /// What the undo put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_mode: Option<UndoMode>,
    /// The text of the target message (cut to [`MAX_TARGET_TEXT`] characters), so the
    /// history names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_text: Option<String>,
    /// The workspace's folder name, so the history names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_name: Option<String>,
    /// The session the conversation as it was just before the rewind continues
    /// in, once the rewind is undone (written with `undo_started_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_session_id: Option<String>,
    /// Set on a redo: the op id of the undone rewind whose file changes this entry
    /// made again (version 3). Its conversation is that rewind's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redo_of: Option<String>,
}

/// Longest target text an entry keeps, in characters.
pub const MAX_TARGET_TEXT: usize = 200;

/// `text` cut to [`MAX_TARGET_TEXT`] characters (an ellipsis marks a cut).
pub fn target_excerpt(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(MAX_TARGET_TEXT).collect();
    if chars.next().is_some() {
        let mut cut: String = head.chars().take(MAX_TARGET_TEXT - 1).collect();
        cut.push('…');
        cut
    } else {
        head
    }
}

impl Entry {
    /// A new, not-yet-undone entry; the counts are taken from `paths`.
    pub fn new(
        op_id: impl Into<String>,
        session_id: impl Into<String>,
        workspace: &WorkspaceKey,
        target_seq: u64,
        time: u64,
        outcome: Outcome,
        paths: Paths,
    ) -> Self {
        Self {
            op_id: op_id.into(),
            session_id: session_id.into(),
            workspace: workspace.as_str().to_owned(),
            target_seq,
            time,
            outcome,
            counts: paths.counts(),
            paths,
            fork: None,
            marker_id: None,
            undo_started_at: None,
            undone_at: None,
            undo_outcome: None,
            undo_mode: None,
            target_text: None,
            workspace_name: None,
            undo_session_id: None,
            redo_of: None,
        }
    }

    /// Whether the entry was undone.
    pub fn is_undone(&self) -> bool {
        self.undone_at.is_some()
    }

    /// Whether the entry is an interrupted (or still running) rewind.
    pub fn is_started(&self) -> bool {
        self.outcome == Outcome::Started
    }

    /// Whether an undo of the entry began and was never recorded as ended.
    pub fn is_undo_interrupted(&self) -> bool {
        self.undo_started_at.is_some() && self.undone_at.is_none()
    }

    /// Folds in what continuing an interrupted restore did: the files it wrote and
    /// deleted join the lists, its failures replace the earlier ones, and the
    /// outcome becomes `done` when nothing failed (`partial` otherwise).
    pub fn merge_continued(&mut self, continued: &Paths) {
        for (list, more) in [
            (&mut self.paths.restored, &continued.restored),
            (&mut self.paths.deleted, &continued.deleted),
        ] {
            for p in more {
                if !list.contains(p) {
                    list.push(p.clone());
                }
            }
        }
        self.paths.failed = continued.failed.clone();
        let mut counts = self.paths.counts();
        counts.restored = counts.restored.max(self.counts.restored);
        counts.deleted = counts.deleted.max(self.counts.deleted);
        counts.skipped = self.counts.skipped;
        self.counts = counts;
        self.paths.truncate();
        self.outcome = if continued.failed.is_empty() {
            Outcome::Done
        } else {
            Outcome::Partial
        };
    }
}
