//! Plain result types shared by several operations (the journal's state, a per-path
//! failure inside a pass). They depend on nothing but paths, so errors and outcomes
//! of every layer can name them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::path::RelPath;

/// The state of a restore operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum JournalState {
    /// Interrupted, or finished with failures: can be continued or rolled back.
    Open,
    /// Every action applied: can be undone.
    Completed,
    /// Returned to the exact pre-restore state.
    RolledBack,
    /// A completed restore that was undone.
    Undone,
}

impl JournalState {
    /// The state's name, as written in messages and on the napi boundary.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl fmt::Display for JournalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A per-path failure inside a pass (the pass continued).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathFailure {
    /// Workspace-relative path.
    pub path: RelPath,
    /// Lossy text of the path.
    pub display: String,
    /// What went wrong (names the filesystem call or the integrity problem).
    pub error: String,
}
