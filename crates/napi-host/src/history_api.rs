//! History bindings (async: every call touches the disk): the reads and `clear`. Every write
//! of a rewind's entry is a step of an engine sequence (`engine_api.rs`).

use napi::bindgen_prelude::{AsyncTask, Env};
use napi_derive::napi;
use rewind_history::{HistoryStore, WorkspaceKey};

use crate::error::BindingError;
use crate::task::Job;
use crate::types::{BindingHistoryDamage, BindingHistoryEntry, BindingHistoryList};

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

#[napi]
impl BindingHistory {
    /// A history rooted at `root` (created on first write).
    #[napi(constructor)]
    pub fn new(root: String) -> Self {
        Self { root }
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
}
