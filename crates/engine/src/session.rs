//! [`EngineSession`]: one session of one workspace, and the parts every sequence shares —
//! its store handle, its history partition, the state of a restore journal.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rewind_history::{Entry, HistoryStore, Outcome, Paths, WorkspaceKey};
use snapshot_store::{ChainLink, JournalError, RelPath, RestorePlan, Session};

use crate::JournalState;
use crate::engine::Engine;
use crate::error::{EngineError, ErrorCode};

#[cfg(test)]
thread_local! {
    /// How many journal states this thread read ([`EngineSession::journal_state`]), for the
    /// tests that a judgement reads no more journals than it needs.
    pub(crate) static JOURNAL_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One session as the sequences see it: its id, its working directory (none: its rewinds
/// never touch files), and the history partition of its workspace.
#[derive(Clone)]
pub struct EngineSession {
    pub(crate) engine: Arc<Engine>,
    pub(crate) id: String,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) key: WorkspaceKey,
    /// The last [`EngineSession::undo_check`] that passed, for the undo's later steps on this
    /// handle (shared by its clones).
    pub(crate) checked: Arc<std::sync::Mutex<Option<crate::undo::UndoCheck>>>,
    /// The restore [`EngineSession::prepare_restore`] prepared, until it runs (shared by the
    /// handle's clones).
    pub(crate) prepared: Arc<std::sync::Mutex<Option<crate::rewind::PreparedFiles>>>,
}

impl std::fmt::Debug for EngineSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineSession")
            .field("id", &self.id)
            .field("cwd", &self.cwd)
            .field("key", &self.key.as_str())
            .finish()
    }
}

/// The paths a file operation changed and left, as the history records them: each spelled
/// exactly ([`RelPath::spelling`]; `hex:…` for a name that is not valid UTF-8).
pub fn history_paths(
    o: &snapshot_store::RestoreOutcome,
    outside: &[RelPath],
    not_covered: &[snapshot_store::NotCovered],
    kept: &[String],
) -> Paths {
    let mut skipped: Vec<String> = o.skipped.iter().map(|s| s.path.spelling()).collect();
    skipped.extend(o.uncovered.iter().map(|u| u.path.spelling()));
    skipped.extend(outside.iter().map(RelPath::spelling));
    skipped.extend(not_covered.iter().map(|n| n.path.spelling()));
    Paths {
        restored: o.written.iter().map(RelPath::spelling).collect(),
        deleted: o.deleted.iter().map(RelPath::spelling).collect(),
        skipped,
        failed: o.failed.iter().map(|f| f.path.spelling()).collect(),
        kept: kept.to_vec(),
    }
}

/// Parses workspace-relative paths given by a caller, each its spelling (its text, or `hex:`
/// and its bytes; see [`RelPath::spelling`]) — `bad-request` for one that is not a path.
pub fn rel_paths(list: &[String]) -> Result<Vec<RelPath>, EngineError> {
    list.iter()
        .map(|p| {
            RelPath::from_spelling(p)
                .map_err(|e| EngineError::bad_request(format!("bad path `{p}`: {e}")))
        })
        .collect()
}

impl EngineSession {
    pub(crate) fn new(
        engine: Arc<Engine>,
        id: String,
        cwd: Option<PathBuf>,
        key: WorkspaceKey,
    ) -> Self {
        Self {
            engine,
            id,
            cwd,
            key,
            checked: Arc::default(),
            prepared: Arc::default(),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session's working directory, if it has one.
    pub fn cwd(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// The workspace partition of the session's history.
    pub fn key(&self) -> &WorkspaceKey {
        &self.key
    }

    /// The engine the session belongs to.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Whether this session's files can be restored: it has a working directory and the
    /// store is writable. `Err` says why not.
    pub fn files_usable(&self) -> Result<&Path, EngineError> {
        let unavailable = || -> EngineError {
            let why = self
                .engine
                .files_unavailable()
                .map(|e| format!(": {}", e.message))
                .unwrap_or_default();
            EngineError::new(
                ErrorCode::NotUndoable,
                format!("file restore is unavailable for this session{why}"),
            )
        };
        match &self.cwd {
            Some(cwd) if self.engine.files_unavailable().is_none() => Ok(cwd),
            _ => Err(unavailable()),
        }
    }

    /// The store handle of session `owner` (this session or the one a journal belongs to,
    /// e.g. a fork's parent) in this session's working directory.
    pub fn files_of(&self, owner: &str) -> Result<Arc<Session>, EngineError> {
        let cwd = self.files_usable()?;
        self.engine.files(owner, cwd, None)
    }

    /// The state of the restore journal `op_id` of session `owner`: [`JournalState::Missing`]
    /// when there is none or files are not usable here, [`JournalState::Unreadable`] when it
    /// cannot be read (never guessed).
    pub fn journal_state(&self, owner: &str, op_id: &str) -> JournalState {
        self.judge_journal(owner, |files| {
            files.restore_status(op_id).map(|status| status.state)
        })
    }

    /// [`EngineSession::journal_state`] as the end of the journal's progress log says it
    /// ([`snapshot_store::Session::restore_state`]): neither the journal's intent (every
    /// planned action) nor its earlier lines are read, so a 50,000-file rewind's journal costs
    /// what a one-file one does. For judging which entries an action is offered on; the action
    /// itself reads the whole journal, and names any damage there.
    pub fn journal_state_quick(&self, owner: &str, op_id: &str) -> JournalState {
        self.judge_journal(owner, |files| files.restore_state(op_id))
    }

    /// A journal's state as `read` gives it from session `owner`'s files, in the history's
    /// terms (a missing journal and an unreadable one told apart, never guessed).
    fn judge_journal(
        &self,
        owner: &str,
        read: impl FnOnce(
            &snapshot_store::Session,
        ) -> Result<snapshot_store::JournalState, JournalError>,
    ) -> JournalState {
        #[cfg(test)]
        JOURNAL_READS.with(|n| n.set(n.get() + 1));
        let Ok(files) = self.files_of(owner) else {
            return if self.files_usable().is_ok() {
                JournalState::Unreadable
            } else {
                JournalState::Missing
            };
        };
        match read(&files) {
            Ok(state) => crate::journal_state(state),
            Err(JournalError::UnknownOp { .. }) => JournalState::Missing,
            Err(_) => JournalState::Unreadable,
        }
    }

    /// Where the restore journal `op_id` of this session stands, when it has one.
    pub fn restore_status(&self, op_id: &str) -> Option<snapshot_store::RestoreStatus> {
        self.files_of(&self.id).ok()?.restore_status(op_id).ok()
    }

    /// The history store (`limit`: entries kept per workspace on append).
    pub fn history(&self, limit: Option<usize>) -> Result<HistoryStore, EngineError> {
        self.engine.history(limit)
    }

    /// The partition's readable entries (a damaged file's readable part), newest first.
    pub fn entries(&self) -> Result<Vec<Entry>, EngineError> {
        let (partition, _damage) = self.history(None)?.read_salvaged(&self.key)?;
        Ok(partition.newest_first().cloned().collect())
    }

    /// The entry `op_id` of the partition.
    pub fn entry(&self, op_id: &str) -> Result<Entry, EngineError> {
        self.entries()?
            .into_iter()
            .find(|e| e.op_id == op_id)
            .ok_or_else(|| {
                EngineError::new(
                    ErrorCode::UnknownEntry,
                    format!("no rewind {op_id} in this workspace's history"),
                )
                .with_details(serde_json::json!({ "opId": op_id }))
            })
    }

    /// Ends the `started` entry `op_id` with `outcome` (and its paths).
    pub fn settle(
        &self,
        op_id: &str,
        outcome: Outcome,
        paths: Option<&Paths>,
    ) -> Result<Entry, EngineError> {
        Ok(self
            .history(None)?
            .finish(&self.key, op_id, outcome, paths)?
            .entry)
    }

    /// The plan of a restore of this session to `target_seq` (through the fork chain when
    /// `ancestors` names any).
    pub fn plan(
        &self,
        target_seq: u64,
        ancestors: &[ChainLink],
    ) -> Result<RestorePlan, EngineError> {
        crate::preview::plan_of(&*self.files_of(&self.id)?, target_seq, ancestors)
    }
}
