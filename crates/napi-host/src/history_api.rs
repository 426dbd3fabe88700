//! History bindings (async: every call touches the disk).

use napi::bindgen_prelude::{AsyncTask, Env};
use napi_derive::napi;
use rewind_history::{
    Entry, HistoryStore, JournalState, Outcome, Paths, UndoMode, UndoOutcome, UndoRequest,
    WorkspaceKey,
};

use crate::error::BindingError;
use crate::task::Job;
use crate::types::{
    BindingHistoryDamage, BindingHistoryEntry, BindingHistoryInput, BindingHistoryList,
    BindingHistoryPaths, seq_from_js,
};

/// The per-workspace rewind history under one root (`<dsh home>/rewind-history`).
#[napi]
pub struct BindingHistory {
    root: String,
}

fn key(key: &str) -> Result<WorkspaceKey, BindingError> {
    Ok(WorkspaceKey::parse(key)?)
}

fn open(root: &str, limit: Option<u32>) -> Result<HistoryStore, BindingError> {
    let store = HistoryStore::open(root)?;
    Ok(match limit {
        Some(limit) => store.with_limit(limit as usize),
        None => store,
    })
}

fn outcome(name: &str) -> Result<Outcome, BindingError> {
    match name {
        "done" => Ok(Outcome::Done),
        "partial" => Ok(Outcome::Partial),
        "failed" => Ok(Outcome::Failed),
        "started" => Ok(Outcome::Started),
        "rolled-back" => Ok(Outcome::RolledBack),
        "abandoned" => Ok(Outcome::Abandoned),
        other => Err(BindingError::bad_request(format!(
            "unknown history outcome {other:?}"
        ))),
    }
}

fn undo_outcome(name: &str) -> Result<UndoOutcome, BindingError> {
    match name {
        "ok" => Ok(UndoOutcome::Ok),
        "partial" => Ok(UndoOutcome::Partial),
        "failed" => Ok(UndoOutcome::Failed),
        other => Err(BindingError::bad_request(format!(
            "unknown undo outcome {other:?}"
        ))),
    }
}

fn journal(name: &str) -> Result<JournalState, BindingError> {
    Ok(match name {
        "completed" => JournalState::Completed,
        "open" => JournalState::Open,
        "rolled-back" => JournalState::RolledBack,
        "undone" => JournalState::Undone,
        "missing" => JournalState::Missing,
        "unreadable" => JournalState::Unreadable,
        other => {
            return Err(BindingError::bad_request(format!(
                "unknown journal state {other:?}"
            )));
        }
    })
}

fn time(value: f64) -> Result<u64, BindingError> {
    seq_from_js(value.floor(), "time")
}

/// The partition key of a workspace id (`ws-<id>`), or `_unknown` without one.
#[napi]
pub fn workspace_key(env: Env, workspace_id: Option<String>) -> napi::Result<String> {
    match workspace_id {
        None => Ok(WorkspaceKey::unknown().as_str().to_owned()),
        Some(id) => WorkspaceKey::for_workspace(&id)
            .map(|k| k.as_str().to_owned())
            .map_err(|e| BindingError::from(e).into_napi(&env)),
    }
}

/// Refuses (`rewind/stale-undo`, `details.paths`) when any applied path changed since the rewind.
#[napi]
pub fn require_unchanged(env: Env, changed_paths: Vec<String>) -> napi::Result<()> {
    rewind_history::require_unchanged(&changed_paths)
        .map_err(|e| BindingError::from(e).into_napi(&env))
}

#[napi]
impl BindingHistory {
    /// A history rooted at `root` (created on first write).
    #[napi(constructor)]
    pub fn new(root: String) -> Self {
        Self { root }
    }

    /// Records a rewind in partition `key`, keeping the newest `limit` entries; resolves with
    /// the op ids dropped by the limit.
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn append(
        &self,
        key: String,
        input: BindingHistoryInput,
        limit: u32,
    ) -> AsyncTask<Job<Vec<String>>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let store = open(&root, Some(limit))?;
            let paths = Paths {
                restored: input.paths.restored,
                deleted: input.paths.deleted,
                skipped: input.paths.skipped,
                failed: input.paths.failed,
                kept: input.paths.kept.unwrap_or_default(),
            };
            let mut entry = Entry::new(
                input.op_id,
                input.session_id,
                &k,
                seq_from_js(input.target_seq, "targetSeq")?,
                time(input.time)?,
                outcome(&input.outcome)?,
                paths,
            );
            entry.fork = input
                .fork_child_session_id
                .map(|child_session_id| rewind_history::ForkInfo { child_session_id });
            entry.marker_id = input.marker_id;
            entry.target_text = input
                .target_text
                .as_deref()
                .map(rewind_history::target_excerpt);
            entry.workspace_name = input.workspace_name;
            entry.redo_of = input.redo_of;
            Ok(store.append(&k, entry)?.dropped)
        }))
    }

    /// The entries of partition `key`, newest first.
    #[napi(ts_return_type = "Promise<Array<BindingHistoryEntry>>")]
    pub fn list(&self, key: String) -> AsyncTask<Job<Vec<BindingHistoryEntry>>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let partition = open(&root, None)?.read(&k)?;
            Ok(partition
                .newest_first()
                .cloned()
                .map(BindingHistoryEntry::from)
                .collect())
        }))
    }

    /// The entries of partition `key` that can be read, newest first, and the damage
    /// when `history.json` is damaged (instead of failing with `rewind/history-corrupt`).
    #[napi(ts_return_type = "Promise<BindingHistoryList>")]
    pub fn list_checked(&self, key: String) -> AsyncTask<Job<BindingHistoryList>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let (partition, damage) = open(&root, None)?.read_salvaged(&k)?;
            Ok(BindingHistoryList {
                entries: partition
                    .newest_first()
                    .cloned()
                    .map(BindingHistoryEntry::from)
                    .collect(),
                damaged: damage.map(|d| BindingHistoryDamage {
                    detail: d.detail,
                    dropped: d.dropped as f64,
                }),
            })
        }))
    }

    /// Ends the `started` entry `op_id` with `outcome` (`done` | `partial` | `failed` |
    /// `rolled-back` | `abandoned`) and, when given, its paths. Refused for a settled entry.
    #[napi(ts_return_type = "Promise<BindingHistoryEntry>")]
    pub fn finish(
        &self,
        key: String,
        op_id: String,
        outcome: String,
        paths: Option<BindingHistoryPaths>,
    ) -> AsyncTask<Job<BindingHistoryEntry>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let paths = paths.map(|p| Paths {
                restored: p.restored,
                deleted: p.deleted,
                skipped: p.skipped,
                failed: p.failed,
                kept: p.kept.unwrap_or_default(),
            });
            let report =
                open(&root, None)?.finish(&k, &op_id, self::outcome(&outcome)?, paths.as_ref())?;
            Ok(BindingHistoryEntry::from(report.entry))
        }))
    }

    /// Records, before an undo changes a file, that the undo of `op_id` began at `time`.
    #[napi(ts_return_type = "Promise<BindingHistoryEntry>")]
    pub fn mark_undo_started(
        &self,
        key: String,
        op_id: String,
        time: f64,
        undo_session_id: Option<String>,
    ) -> AsyncTask<Job<BindingHistoryEntry>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let report = open(&root, None)?.mark_undo_started_in(
                &k,
                &op_id,
                self::time(time)?,
                undo_session_id.as_deref(),
            )?;
            Ok(BindingHistoryEntry::from(report.entry))
        }))
    }

    /// Removes every record of partition `key` (records only); resolves with how many.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn clear(&self, key: String) -> AsyncTask<Job<u32>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let report = open(&root, None)?.clear(&k)?;
            Ok(u32::try_from(report.cleared).unwrap_or(u32::MAX))
        }))
    }

    /// Checks that `op_id` may be undone now by `active_session` in workspace `key`, given the
    /// state of its restore journal (`completed`, `open`, `rolled-back`, `undone`, `missing`,
    /// `unreadable`). Resolves with the entry, or rejects with the refusal's stable code.
    #[napi(ts_return_type = "Promise<BindingHistoryEntry>")]
    pub fn check_undo(
        &self,
        key: String,
        op_id: String,
        active_session: String,
        journal_state: String,
    ) -> AsyncTask<Job<BindingHistoryEntry>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let partition = open(&root, None)?.read(&k)?;
            let request = UndoRequest {
                op_id: &op_id,
                active_session: &active_session,
                active_workspace: &k,
                journal: journal(&journal_state)?,
            };
            let entry = rewind_history::undo_eligibility(&partition, &request)?;
            Ok(BindingHistoryEntry::from(entry.clone()))
        }))
    }

    /// Records that `op_id`'s file changes were undone (`ok` | `partial` | `failed`) at `time`.
    #[napi(ts_return_type = "Promise<BindingHistoryEntry>")]
    pub fn mark_undone(
        &self,
        key: String,
        op_id: String,
        outcome: String,
        time: f64,
    ) -> AsyncTask<Job<BindingHistoryEntry>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let report = open(&root, None)?.mark_undone(
                &k,
                &op_id,
                undo_outcome(&outcome)?,
                UndoMode::Files,
                self::time(time)?,
            )?;
            Ok(BindingHistoryEntry::from(report.entry))
        }))
    }

    /// Records that the interrupted restore of `op_id` was continued: the files it wrote and
    /// deleted join the entry, its failures replace the earlier ones, and the outcome becomes
    /// `done` when nothing failed.
    #[napi(ts_return_type = "Promise<BindingHistoryEntry>")]
    pub fn settle_continued(
        &self,
        key: String,
        op_id: String,
        written: Vec<String>,
        deleted: Vec<String>,
        failed: Vec<String>,
    ) -> AsyncTask<Job<BindingHistoryEntry>> {
        let root = self.root.clone();
        AsyncTask::new(Job::new(move || {
            let k = self::key(&key)?;
            let continued = rewind_history::Paths {
                restored: written,
                deleted,
                skipped: Vec::new(),
                failed,
                kept: Vec::new(),
            };
            let report = open(&root, None)?.settle_continued(&k, &op_id, &continued)?;
            Ok(BindingHistoryEntry::from(report.entry))
        }))
    }
}
