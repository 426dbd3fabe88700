//! One error enum per operation of the history store.

use std::io;
use std::path::PathBuf;

/// The code of every storage failure (disk error, newer file).
pub const CODE_FAILED: &str = "rewind/failed";
/// The code of a damaged `history.json` (reads keep the entries that can be read).
pub const CODE_HISTORY_CORRUPT: &str = "rewind/history-corrupt";

/// Opening the history root failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The root could not be created or opened.
    #[error("cannot open history root {path}: {source}")]
    Io {
        /// The ambient root path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl OpenError {
    /// The stable error code (`rewind/failed`).
    pub fn code(&self) -> &'static str {
        CODE_FAILED
    }
}

/// Reading a partition failed. Reads never change anything on disk.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A disk error.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`read`, `open`, …).
        op: &'static str,
        /// The path, relative to the history root.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file is not valid history JSON; the next write renames it aside.
    #[error("history file {path} is corrupt: {detail}")]
    Corrupt {
        /// The path, relative to the history root.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The file was written by a newer build; this build neither reads nor writes it.
    #[error(
        "history file {path} has format version {found}; this build understands up to {supported}"
    )]
    NewerVersion {
        /// The path, relative to the history root.
        path: PathBuf,
        /// The version found in the file.
        found: u64,
        /// The newest version this build understands.
        supported: u32,
    },
    /// The partition path exists but is not a plain directory (a symlink, a file).
    #[error("history partition {path} is not a directory")]
    NotADirectory {
        /// The path, relative to the history root.
        path: PathBuf,
    },
}

impl ReadError {
    /// The stable error code (`rewind/history-corrupt` for a damaged file,
    /// `rewind/failed` otherwise).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Corrupt { .. } => CODE_HISTORY_CORRUPT,
            _ => CODE_FAILED,
        }
    }
}

/// Writing a partition failed; the file on disk is unchanged (old version or
/// none). A corrupt file found by a write is not an error: it is renamed aside
/// and reported in the write's result.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A disk error.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`lock`, `write`, `sync`, `rename`, …).
        op: &'static str,
        /// The path, relative to the history root.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file was written by a newer build; writes refuse it.
    #[error(
        "history file {path} has format version {found}; this build understands up to {supported} and will not overwrite it"
    )]
    NewerVersion {
        /// The path, relative to the history root.
        path: PathBuf,
        /// The version found in the file.
        found: u64,
        /// The newest version this build understands.
        supported: u32,
    },
    /// The partition path exists but is not a plain directory (a symlink, a file).
    #[error("history partition {path} is not a directory")]
    NotADirectory {
        /// The path, relative to the history root.
        path: PathBuf,
    },
}

impl WriteError {
    /// The stable error code (`rewind/failed`).
    pub fn code(&self) -> &'static str {
        CODE_FAILED
    }
}

/// Clearing a partition failed.
pub type ClearError = WriteError;

/// Appending an entry failed; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The entry names another partition than the one it is appended to.
    #[error("entry {op_id} belongs to workspace {entry_workspace}, not to partition {partition}")]
    WrongWorkspace {
        /// The entry's op id.
        op_id: String,
        /// The entry's workspace field.
        entry_workspace: String,
        /// The partition key appended to.
        partition: String,
    },
    /// The partition already holds an entry with this op id.
    #[error("history already holds an entry for op {op_id}")]
    DuplicateOp {
        /// The op id.
        op_id: String,
    },
    /// The op id or the session id is empty.
    #[error("entry field {field} is empty")]
    EmptyField {
        /// The empty field (`opId` or `sessionId`).
        field: &'static str,
    },
    /// The write failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl AppendError {
    /// The stable error code (`rewind/bad-request` for a refused entry, `rewind/failed` otherwise).
    pub fn code(&self) -> &'static str {
        match self {
            Self::WrongWorkspace { .. } | Self::DuplicateOp { .. } | Self::EmptyField { .. } => {
                "rewind/bad-request"
            }
            Self::Write(e) => e.code(),
        }
    }
}

/// Marking an entry undone failed; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum MarkUndoneError {
    /// No entry with this op id in the partition.
    #[error("no history entry for op {op_id}")]
    UnknownEntry {
        /// The op id.
        op_id: String,
    },
    /// The entry is already marked undone.
    #[error("history entry {op_id} was already undone at {}", rewind_durable::utc_minute(*undone_at))]
    AlreadyUndone {
        /// The op id.
        op_id: String,
        /// When it was undone.
        undone_at: u64,
    },
    /// The write failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl MarkUndoneError {
    /// The stable error code (`rewind/unknown-entry`, `rewind/already-undone`, `rewind/failed`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownEntry { .. } => "rewind/unknown-entry",
            Self::AlreadyUndone { .. } => "rewind/already-undone",
            Self::Write(e) => e.code(),
        }
    }
}

/// Settling the entry of a continued restore failed; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    /// No entry with this op id in the partition.
    #[error("no history entry for op {op_id}")]
    UnknownEntry {
        /// The op id.
        op_id: String,
    },
    /// The entry is not in the state the change needs (e.g. finishing an
    /// entry that is not `started`, or one already undone).
    #[error("history entry {op_id} is {state}; {wanted}")]
    WrongState {
        /// The op id.
        op_id: String,
        /// The entry's state (`outcome`, or `undone`).
        state: String,
        /// What the change needed.
        wanted: &'static str,
    },
    /// The write failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl SettleError {
    /// The stable error code (`rewind/unknown-entry`, `rewind/not-undoable`, `rewind/failed`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownEntry { .. } => "rewind/unknown-entry",
            Self::WrongState { .. } => "rewind/not-undoable",
            Self::Write(e) => e.code(),
        }
    }
}
