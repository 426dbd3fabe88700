//! Undo eligibility: which history entry may be undone, as pure functions.
//!
//! The host reads the active session's partition, asks the snapshot store for
//! the state of the entry's restore journal, and calls [`undo_eligibility`].
//! When that passes it asks the store which applied paths changed since the
//! rewind and calls [`require_unchanged`]; only then does it run the undo and
//! record it with [`HistoryStore::mark_undone`](crate::HistoryStore::mark_undone).

use crate::entry::{Entry, Outcome};
use crate::key::WorkspaceKey;
use crate::store::Partition;

/// The state of an entry's restore journal, as the snapshot store reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum JournalState {
    /// The restore finished without failures; the only undoable state.
    Completed,
    /// The restore is still open (interrupted or partially failed).
    Open,
    /// The restore was rolled back to its pre-restore state.
    RolledBack,
    /// The restore was already undone through the store.
    Undone,
    /// The store has no journal for this op (pruned, never written, or files off).
    Missing,
    /// The journal was written by a newer build and is not understood.
    Unreadable,
}

impl JournalState {
    /// The state's kebab-case name, for messages.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// An undo request, as the host resolved it.
#[derive(Clone, Copy, Debug)]
pub struct UndoRequest<'a> {
    /// The op id of the entry the user asked to undo.
    pub op_id: &'a str,
    /// The session the request came from (resolved host-side).
    pub active_session: &'a str,
    /// The workspace key of that session (resolved host-side).
    pub active_workspace: &'a WorkspaceKey,
    /// The state of the entry's restore journal.
    pub journal: JournalState,
}

/// Why an undo is refused. Each variant maps to one stable code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UndoRefusal {
    /// No entry with this op id in the partition.
    #[error("no history entry for op {op_id}")]
    UnknownEntry {
        /// The requested op id.
        op_id: String,
    },
    /// The entry (or the partition passed in) belongs to another workspace.
    #[error(
        "history entry {op_id} belongs to workspace {entry_workspace}, not to {active_workspace}"
    )]
    CrossWorkspace {
        /// The requested op id.
        op_id: String,
        /// The workspace of the entry.
        entry_workspace: String,
        /// The workspace of the active session.
        active_workspace: String,
    },
    /// The entry was recorded by another session.
    #[error(
        "history entry {op_id} belongs to session {entry_session}, not to the active session {active_session}"
    )]
    OtherSession {
        /// The requested op id.
        op_id: String,
        /// The session of the entry.
        entry_session: String,
        /// The active session.
        active_session: String,
    },
    /// The entry was undone before; each entry is undone at most once.
    #[error("history entry {op_id} was already undone at {}", rewind_durable::utc_minute(*undone_at))]
    AlreadyUndone {
        /// The requested op id.
        op_id: String,
        /// When it was undone.
        undone_at: u64,
    },
    /// The entry's restore journal is not completed.
    #[error(
        "history entry {op_id} cannot be undone: its restore journal is {}{}",
        journal.name(),
        if *journal == JournalState::Open { "; continue or roll it back first" } else { "" }
    )]
    NotUndoable {
        /// The requested op id.
        op_id: String,
        /// The journal state found.
        journal: JournalState,
    },
    /// The rewind (or an undo of it) was interrupted and is not settled yet:
    /// continue or roll it back first.
    #[error("history entry {op_id} is an interrupted rewind; continue or roll it back first")]
    Interrupted {
        /// The requested op id.
        op_id: String,
    },
    /// Files changed after the rewind; undoing would overwrite those changes.
    #[error("undo refused: {} file(s) changed since the rewind: {}", paths.len(), paths.join(", "))]
    Stale {
        /// The changed paths, workspace-relative.
        paths: Vec<String>,
    },
}

impl UndoRefusal {
    /// The stable error code of this refusal (seed 000 §7).
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownEntry { .. } => "rewind/unknown-entry",
            Self::CrossWorkspace { .. } => "rewind/undo-cross-workspace",
            Self::OtherSession { .. } => "rewind/undo-other-session",
            Self::AlreadyUndone { .. } => "rewind/already-undone",
            Self::NotUndoable { .. } => "rewind/not-undoable",
            Self::Interrupted { .. } => "rewind/interrupted",
            Self::Stale { .. } => "rewind/stale-undo",
        }
    }
}

/// Decides whether the entry `req.op_id` may be undone now.
///
/// Rules, checked in this order: the entry exists; the partition and the
/// entry belong to the active workspace; the entry was recorded by the active
/// session (or the active session is the one its fork created); it was not
/// undone before; it is not an interrupted rewind (`started`) and not one that
/// was rolled back or abandoned; its restore journal is completed (or, for a
/// rewind that changed no file, there is none). Any rewind of the session may
/// be undone, not only the newest. Returns the entry.
pub fn undo_eligibility<'p>(
    partition: &'p Partition,
    req: &UndoRequest<'_>,
) -> Result<&'p Entry, UndoRefusal> {
    let op_id = || req.op_id.to_owned();
    let active_ws = req.active_workspace.as_str();
    if partition.workspace != active_ws {
        return match partition.find(req.op_id) {
            Some(e) => Err(UndoRefusal::CrossWorkspace {
                op_id: op_id(),
                entry_workspace: e.workspace.clone(),
                active_workspace: active_ws.to_owned(),
            }),
            None => Err(UndoRefusal::UnknownEntry { op_id: op_id() }),
        };
    }
    let entry = partition
        .find(req.op_id)
        .ok_or_else(|| UndoRefusal::UnknownEntry { op_id: op_id() })?;
    if entry.workspace != active_ws {
        return Err(UndoRefusal::CrossWorkspace {
            op_id: op_id(),
            entry_workspace: entry.workspace.clone(),
            active_workspace: active_ws.to_owned(),
        });
    }
    // The session rewound, or the session a fork rewind created.
    let fork_child = entry
        .fork
        .as_ref()
        .is_some_and(|f| f.child_session_id == req.active_session);
    if entry.session_id != req.active_session && !fork_child {
        return Err(UndoRefusal::OtherSession {
            op_id: op_id(),
            entry_session: entry.session_id.clone(),
            active_session: req.active_session.to_owned(),
        });
    }
    if let Some(undone_at) = entry.undone_at {
        return Err(UndoRefusal::AlreadyUndone {
            op_id: op_id(),
            undone_at,
        });
    }
    if entry.is_started() {
        return Err(UndoRefusal::Interrupted { op_id: op_id() });
    }
    if !matches!(
        entry.outcome,
        Outcome::Done | Outcome::Partial | Outcome::Failed
    ) {
        return Err(UndoRefusal::NotUndoable {
            op_id: op_id(),
            journal: req.journal,
        });
    }
    // Any rewind of the session, not only the newest: the undo is planned against the
    // disk as it is, so a later rewind's files are never overwritten without a choice.
    // A rewind that changed no file has no journal; undoing it brings back the
    // conversation only.
    let no_files = entry.counts.restored + entry.counts.deleted + entry.counts.failed == 0;
    let files_ok = req.journal == JournalState::Completed
        || (no_files && req.journal == JournalState::Missing);
    if !files_ok {
        return Err(UndoRefusal::NotUndoable {
            op_id: op_id(),
            journal: req.journal,
        });
    }
    Ok(entry)
}

/// Refuses the undo with [`UndoRefusal::Stale`] when any applied path changed
/// since the rewind (the list the snapshot store's verification returned).
pub fn require_unchanged(changed_paths: &[String]) -> Result<(), UndoRefusal> {
    if changed_paths.is_empty() {
        Ok(())
    } else {
        let mut paths = changed_paths.to_vec();
        paths.sort();
        paths.dedup();
        Err(UndoRefusal::Stale { paths })
    }
}
