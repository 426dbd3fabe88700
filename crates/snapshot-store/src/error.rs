//! Errors: one enum per operation, built from three shared failure shapes.
//!
//! Every variant names the path involved and the operation (the enum itself is
//! the operation; [`FsFailure`] also names the filesystem call).

use std::io;

use crate::seam::{Area, FsOp};

/// A filesystem call failed.
#[derive(Debug, thiserror::Error)]
#[error("{op} {area} path `{path}`: {source}")]
pub struct FsFailure {
    /// The filesystem call.
    pub op: FsOp,
    /// The tree the path is relative to.
    pub area: Area,
    /// The path, relative to the store root or the workspace (lossy text).
    pub path: String,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

impl FsFailure {
    /// The raw OS error number, when there is one (e.g. `ENOSPC`).
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// A store file exists but cannot be understood (truncated, malformed, inconsistent).
#[derive(Debug, Clone, thiserror::Error)]
#[error("corrupt store file `{path}`: {detail}")]
pub struct CorruptFile {
    /// Store-relative path of the file.
    pub path: String,
    /// What is wrong with it.
    pub detail: String,
}

/// A store file or marker was written by a newer build than this one.
#[derive(Debug, Clone, thiserror::Error)]
#[error("store file `{path}` has version {found}, newer than supported version {supported}")]
pub struct NewerVersion {
    /// Store-relative path of the file carrying the version.
    pub path: String,
    /// The version found.
    pub found: u32,
    /// The newest version this build understands.
    pub supported: u32,
}

/// Internal failure shared by all operations; converted into each operation's enum.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Fault {
    #[error(transparent)]
    Fs(#[from] FsFailure),
    #[error(transparent)]
    Corrupt(#[from] CorruptFile),
    #[error(transparent)]
    Newer(#[from] NewerVersion),
}

macro_rules! op_error {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident $body:tt,)* }) => {
        $(#[$m])*
        #[derive(Debug, thiserror::Error)]
        #[non_exhaustive]
        pub enum $name {
            /// A filesystem call failed.
            #[error(transparent)]
            Fs(#[from] FsFailure),
            /// A store file is corrupt.
            #[error(transparent)]
            Corrupt(#[from] CorruptFile),
            /// The store or one of its files is newer than this build: refused (fail closed).
            #[error(transparent)]
            NewerStore(#[from] NewerVersion),
            $($(#[$vm])* $var $body,)*
        }
        impl From<Fault> for $name {
            fn from(f: Fault) -> Self {
                match f {
                    Fault::Fs(e) => Self::Fs(e),
                    Fault::Corrupt(e) => Self::Corrupt(e),
                    Fault::Newer(e) => Self::NewerStore(e),
                }
            }
        }
    };
}

op_error! {
    /// Error of [`Store::open`](crate::Store::open).
    OpenError {
        /// The store root could not be opened or created.
        #[error("cannot open store root `{path}`: {source}")]
        Root { /** Ambient path given. */ path: String, /** Cause. */ #[source] source: io::Error },
    }
}

op_error! {
    /// Error of [`Store::session`](crate::Store::session).
    SessionError {
        /// The session id is not acceptable.
        #[error("invalid session id `{id}`: {reason}")]
        InvalidSessionId { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
        /// The session cwd could not be opened as a directory.
        #[error("cannot open session cwd `{path}`: {source}")]
        Workspace { /** Ambient path given. */ path: String, /** Cause. */ #[source] source: io::Error },
    }
}

op_error! {
    /// Error of [`Session::scan`](crate::Session::scan) (a corrupt workspace index is
    /// rebuilt, never reported here; a newer one is `NewerStore`).
    ScanError {
        /// The call id is not acceptable.
        #[error("invalid call id `{id}`: {reason}")]
        InvalidCallId { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
        /// The session has no workspace directory to scan (an ancestor view).
        #[error("session `{session}` has no workspace to scan")]
        NoWorkspace { /** The session id. */ session: String },
        /// The workspace path cannot be resolved.
        #[error("cannot resolve the workspace `{path}`: {source}")]
        Workspace { /** The path. */ path: String, /** Cause. */ #[source] source: io::Error },
    }
}

op_error! {
    /// Error of [`Session::capture_before`](crate::Session::capture_before).
    CaptureError {
        /// The call id is not acceptable.
        #[error("invalid call id `{id}`: {reason}")]
        InvalidCallId { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
        /// Reading the workspace file failed (nothing was staged).
        #[error("capture of `{path}` failed: {source}")]
        Read { /** Workspace path. */ path: String, /** Cause. */ #[source] source: FsFailure },
    }
}

op_error! {
    /// Error of [`Session::commit`](crate::Session::commit) and [`Session::discard`](crate::Session::discard).
    CommitError {
        /// The call id is not acceptable.
        #[error("invalid call id `{id}`: {reason}")]
        InvalidCallId { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
        /// The same call was already committed to another anchor.
        #[error("call `{call_id}` is already committed at anchor {anchor_seq} (`{path}`)")]
        AlreadyCommitted { /** Call id. */ call_id: String, /** Anchor it is in. */ anchor_seq: u64, /** Store path of the entry. */ path: String },
    }
}

op_error! {
    /// Error of [`Session::recheck_tracked`](crate::Session::recheck_tracked).
    RecheckError {
        /// Reading a tracked workspace file failed.
        #[error("recheck of `{path}` failed: {source}")]
        Read { /** Workspace path. */ path: String, /** Cause. */ #[source] source: FsFailure },
        /// An ancestor id of the fork chain is not acceptable.
        #[error("invalid ancestor session id `{id}`: {reason}")]
        InvalidAncestor { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
    }
}

op_error! {
    /// Error of [`Session::plan_restore`](crate::Session::plan_restore).
    PlanError {
        /// Observing a workspace path failed.
        #[error("planning `{path}` failed: {source}")]
        Observe { /** Workspace path. */ path: String, /** Cause. */ #[source] source: FsFailure },
    }
}

op_error! {
    /// Error of [`Session::restore`](crate::Session::restore).
    RestoreError {
        /// The operation id is not acceptable.
        #[error("invalid operation id `{id}`: {reason}")]
        InvalidOpId { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
        /// A journal with this operation id already exists.
        #[error("restore operation `{op_id}` already exists (`{path}`)")]
        DuplicateOp { /** Operation id. */ op_id: String, /** Store path of its journal. */ path: String },
        /// The plan was made for another session.
        #[error("plan belongs to session `{plan_session}`, not `{session}`")]
        WrongSession { /** Session of the plan. */ plan_session: String, /** This session. */ session: String },
        /// Saving the rescue bytes of a planned path failed; nothing was changed.
        #[error("saving the rescue copy of `{path}` failed: {source}")]
        Rescue { /** Workspace path. */ path: String, /** Cause. */ #[source] source: FsFailure },
        /// A file's before-state is a blob of the workspace's git repository that its object
        /// store no longer holds (pruned, e.g. by `git gc --prune=now` after the commit holding
        /// it was amended away): the rewind is refused, nothing changed. Code
        /// `rewind/git-object-gone`.
        #[error("cannot rewind `{path}`: its before-state is git blob {oid} of the repository at `{repo}`, which is gone from the repository's object store (pruned); the rewind is refused and nothing changed")]
        GitObjectGone { /** Workspace path. */ path: String, /** The blob's object id. */ oid: String, /** The repository's work tree. */ repo: String },
    }
}

op_error! {
    /// Error of [`Session::continue_restore`](crate::Session::continue_restore),
    /// [`Session::rollback_restore`](crate::Session::rollback_restore) and
    /// [`Session::undo_restore`](crate::Session::undo_restore).
    JournalError {
        /// The operation id is not acceptable.
        #[error("invalid operation id `{id}`: {reason}")]
        InvalidOpId { /** The id. */ id: String, /** Why. */ reason: crate::path::IdError },
        /// No journal with this id exists in the session.
        #[error("no restore operation `{op_id}` (`{path}`)")]
        UnknownOp { /** Operation id. */ op_id: String, /** Store path looked at. */ path: String },
        /// The journal is in a state that does not allow this operation.
        #[error("restore operation `{op_id}` is {state}; {operation} needs it {needed}")]
        WrongState {
            /** Operation id. */ op_id: String,
            /** Current state. */ state: crate::outcome::JournalState,
            /** The refused operation. */ operation: &'static str,
            /** The state needed. */ needed: &'static str,
        },
        /// Undo (or, with `redo`, redo) refused: these paths changed since the restore (since
        /// the undo, for a redo) and were not decided.
        #[error("{} of `{op_id}` refused: {} path(s) changed since the {}: {}", if *redo { "redo" } else { "undo" }, paths.len(), if *redo { "undo" } else { "restore" }, crate::path::list_paths(paths))]
        Stale {
            /** Operation id. */ op_id: String,
            /** Paths changed since. */ paths: Vec<crate::path::RelPath>,
            /** Whether a redo (not an undo) was refused. */ redo: bool,
        },
    }
}

op_error! {
    /// Error of [`Session::reconcile_restores`](crate::Session::reconcile_restores).
    ReconcileError {}
}

op_error! {
    /// Error of [`Session::prune`](crate::Session::prune) and [`Store::collect_garbage`](crate::Store::collect_garbage).
    PruneError {}
}

op_error! {
    /// Error of [`Store::compact`](crate::Store::compact).
    CompactError {}
}

op_error! {
    /// Error of [`Session::clear_session`](crate::Session::clear_session) and
    /// [`Session::reconcile_format`](crate::Session::reconcile_format).
    ClearError {}
}

op_error! {
    /// Error of read-only queries such as [`Store::list_sessions`](crate::Store::list_sessions).
    QueryError {}
}

op_error! {
    /// Error of [`Session::diff_action`](crate::Session::diff_action) and
    /// [`Session::change_origins`](crate::Session::change_origins).
    DiffError {}
}
