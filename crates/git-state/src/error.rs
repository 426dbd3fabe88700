//! The crate's errors: one enum per operation, each naming the path it concerns.

use std::path::PathBuf;

/// Why the state of a repository could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file of the repository could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file (relative to the git directory, or absolute for discovery).
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A file of the repository does not have the shape git writes.
    #[error("{path} is not a valid git file: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// Why a planned git change could not be applied (the step that failed; the steps before it
/// stay applied, the ones after it were not tried).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A file of the repository could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file (relative to the git directory).
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// Git (or another program) holds the lock of the file.
    #[error("{path} is locked ({path}.lock exists): is git running in this repository?")]
    Locked {
        /// The file whose lock exists.
        path: PathBuf,
    },
    /// The stored bytes of the index the plan names are missing.
    #[error("the stored index {id} is missing")]
    MissingIndex {
        /// The index's id.
        id: String,
    },
    /// The stored bytes of the stash list the plan names are missing.
    #[error("the stored stash list {id} is missing")]
    MissingStash {
        /// The stash list's id.
        id: String,
    },
    /// The repository could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}
