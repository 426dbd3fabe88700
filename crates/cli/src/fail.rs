//! Failures and exit codes (documented in the crate README).

use std::fmt;

/// The exit code classes of `dsh-rewind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 1: something failed (I/O, a restore that ended with failed paths).
    Failed,
    /// 2: bad arguments.
    Usage,
    /// 3: an unknown session, operation, message or path.
    NotFound,
    /// 4: a live DSH host (or another tool) holds the session or the store.
    Busy,
    /// 5: corrupt data: `verify` found problems, or a record stopped the command.
    Corrupt,
    /// 6: the store, a record or a log was written by a newer build.
    Newer,
    /// 7: refused by a rule (an undo that is not allowed, a file changed since).
    Refused,
}

impl Code {
    /// The process exit code.
    pub fn exit(self) -> u8 {
        match self {
            Code::Failed => 1,
            Code::Usage => 2,
            Code::NotFound => 3,
            Code::Busy => 4,
            Code::Corrupt => 5,
            Code::Newer => 6,
            Code::Refused => 7,
        }
    }

    /// The stable name printed with `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Code::Failed => "failed",
            Code::Usage => "usage",
            Code::NotFound => "not-found",
            Code::Busy => "busy",
            Code::Corrupt => "corrupt",
            Code::Newer => "newer-format",
            Code::Refused => "refused",
        }
    }
}

/// A failure: its class and a message that names what failed.
#[derive(Debug)]
pub struct Fail {
    /// Class (exit code).
    pub code: Code,
    /// What failed.
    pub message: String,
}

impl Fail {
    /// A failure of class `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

macro_rules! from_store_errors {
    ($($t:ident),* $(,)?) => {$(
        impl From<snapshot_store::$t> for Fail {
            fn from(e: snapshot_store::$t) -> Fail {
                let code = match &e {
                    snapshot_store::$t::NewerStore(_) => Code::Newer,
                    snapshot_store::$t::Corrupt(_) => Code::Corrupt,
                    _ => Code::Failed,
                };
                Fail::new(code, e.to_string())
            }
        }
    )*};
}

from_store_errors!(
    OpenError,
    SessionError,
    PlanError,
    RestoreError,
    ReconcileError,
    PruneError,
    QueryError,
    RecheckError,
    DiffError,
);

impl From<snapshot_store::JournalError> for Fail {
    fn from(e: snapshot_store::JournalError) -> Fail {
        use snapshot_store::JournalError as J;
        let code = match &e {
            J::NewerStore(_) => Code::Newer,
            J::Corrupt(_) => Code::Corrupt,
            J::UnknownOp { .. } | J::InvalidOpId { .. } => Code::NotFound,
            J::WrongState { .. } | J::Stale { .. } => Code::Refused,
            _ => Code::Failed,
        };
        Fail::new(code, e.to_string())
    }
}

impl From<snapshot_store::ChainPlanError> for Fail {
    fn from(e: snapshot_store::ChainPlanError) -> Fail {
        match e {
            snapshot_store::ChainPlanError::Plan(p) => p.into(),
            other => Fail::new(Code::Corrupt, other.to_string()),
        }
    }
}
