//! Per-workspace rewind history (the audit trail of rewinds) and the rules
//! that decide whether a rewind may be undone.
//!
//! History is an audit trail, never a restore source. Each workspace has one
//! partition, `<root>/<workspace key>/history.json`, holding its newest
//! `historyLimit` entries (default [`DEFAULT_HISTORY_LIMIT`]). The key
//! ([`WorkspaceKey`]) is `ws-<workspace id>` or `_unknown` and is validated so
//! a partition can never lie outside the root.
//!
//! ```
//! use rewind_history::{Entry, HistoryStore, Outcome, Paths, WorkspaceKey};
//!
//! let root = tempfile::tempdir()?;
//! let store = HistoryStore::open(root.path())?;
//! let key = WorkspaceKey::for_workspace("w1")?;
//! let paths = Paths { restored: vec!["src/main.rs".into()], ..Paths::default() };
//! store.append(&key, Entry::new("op-1", "session-a", &key, 7, 1_700_000_000_000, Outcome::Done, paths))?;
//! let partition = store.read(&key)?;
//! assert_eq!(partition.chain_tail("session-a").map(|e| e.op_id.as_str()), Some("op-1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Writes are serialized per partition (a process-wide lock plus an OS file
//! lock) and atomic (temp file, sync, rename, directory sync). A corrupt file
//! is reported as `rewind/history-corrupt`; [`HistoryStore::read_salvaged`]
//! keeps the entries that can still be read, and the next write renames the
//! file aside (`history.json.corrupt-<ms>`) and carries those entries over;
//! a file of a newer format version is refused by reads and writes
//! ([`ReadError::NewerVersion`], [`WriteError::NewerVersion`]).
//!
//! Undo eligibility is a pure function over a partition and the journal state
//! the caller passes in: [`undo_eligibility`] and [`require_unchanged`]; every
//! refusal is an [`UndoRefusal`] variant with a stable [`UndoRefusal::code`].

mod entry;
mod error;
mod key;
mod store;
mod undo;

pub use entry::{
    Counts, Entry, ForkInfo, MAX_PATHS_PER_LIST, MAX_TARGET_TEXT, Outcome, Paths, UndoMode,
    UndoOutcome, target_excerpt,
};
pub use error::{
    AppendError, CODE_FAILED, CODE_HISTORY_CORRUPT, ClearError, MarkUndoneError, OpenError,
    ReadError, SettleError, WriteError,
};
pub use key::{KeyError, MAX_WORKSPACE_ID_LEN, UNKNOWN_KEY, WORKSPACE_PREFIX, WorkspaceKey};
pub use store::{
    AppendReport, ClearReport, Clock, CrashSeam, DEFAULT_HISTORY_LIMIT, FORMAT_VERSION,
    HISTORY_FILE, HistoryStore, LOCK_FILE, MAX_HISTORY_LIMIT, MarkReport, Partition, Salvaged,
    WriteNotes, WriteStep, system_clock,
};
pub use undo::{JournalState, UndoRefusal, UndoRequest, require_unchanged, undo_eligibility};
