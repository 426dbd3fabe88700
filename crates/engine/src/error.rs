//! The one place where every core error becomes a stable `{code, message, details}` error.
//!
//! Each core crate keeps its own `thiserror` enums; this module maps every one of them onto
//! a code of the table ([`ErrorCode`], in `codes.rs`) with machine-readable details (paths,
//! seqs, op ids). The planner's errors carry no code at all: each of their variants is given
//! its code here, by an explicit `match`. The napi layer and the CLI report an
//! [`EngineError`] as it is.

use serde_json::{Value, json};

// The sibling modules name the table through this module.
pub(crate) use crate::codes::ErrorCode;

/// A refusal or a fault, on its way to a user or a client: a stable code, the human message
/// (the core error's `Display`), and a JSON object of details.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineError {
    /// Stable code, e.g. [`ErrorCode::StaleUndo`].
    pub code: ErrorCode,
    /// Human-readable message.
    pub message: String,
    /// Machine-readable details; always a JSON object.
    pub details: Value,
}

impl EngineError {
    /// A new error with empty details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: json!({}),
        }
    }

    /// The same error with `details` attached.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// [`ErrorCode::BadRequest`] for malformed arguments.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// [`ErrorCode::Failed`] for an unexpected failure.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }

    /// An error whose code a core crate gave as a string: looked up in the table, and
    /// [`ErrorCode::Failed`] when the table does not know it (never guessed).
    pub fn from_code_str(code: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::parse(code).unwrap_or(ErrorCode::Failed), message)
    }

    /// The paths named in the details (`details.paths`), if any.
    pub fn paths(&self) -> Vec<String> {
        self.details
            .get("paths")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for EngineError {}

// --- the planner: its error enums know no codes; each variant gets its code here. They are
// `#[non_exhaustive]`, so a variant added later falls to the wildcard arm: the one code every
// variant of that enum shares, or `Failed` for `PlanError`, whose variants differ (never
// guessed). `planner_variants_have_their_codes` below names every variant there is today.

/// The code of a refused target text: every variant is [`ErrorCode::BadTarget`].
fn target_code(e: &rewind_plan::TargetError) -> ErrorCode {
    use rewind_plan::TargetError as T;
    match e {
        T::Empty | T::MissingSeq | T::BadSeq(_) | T::BadIndex(_) | T::TrailingArgument(_) => {
            ErrorCode::BadTarget
        }
        _ => ErrorCode::BadTarget,
    }
}

/// The code of a log that could not be read: every variant is [`ErrorCode::InvalidLog`].
fn read_code(e: &rewind_plan::ReadError) -> ErrorCode {
    use rewind_plan::ReadError as R;
    match e {
        R::BadLine { .. } | R::NewerHeader { .. } | R::NotContiguous { .. } => {
            ErrorCode::InvalidLog
        }
        _ => ErrorCode::InvalidLog,
    }
}

/// The code of a log that breaks a surface rule (reached through
/// [`rewind_plan::PlanError::InvalidLog`]): every variant is [`ErrorCode::InvalidLog`].
fn surface_code(e: &rewind_plan::SurfaceError) -> ErrorCode {
    use rewind_plan::SurfaceError as S;
    match e {
        S::NotContiguous { .. }
        | S::IneligibleSurfaceOp { .. }
        | S::IneligibleSources { .. }
        | S::MissingSurfaceOp { .. }
        | S::InvalidSurfaceOp { .. }
        | S::BadSources { .. }
        | S::StartNotOnSurface { .. }
        | S::EndNotOnSurface { .. }
        | S::StartAfterEnd { .. }
        | S::MissingShadowed { .. }
        | S::BadToolResultRewrite { .. } => ErrorCode::InvalidLog,
        _ => ErrorCode::InvalidLog,
    }
}

/// The code of a rewind the planner refused.
fn plan_code(e: &rewind_plan::PlanError) -> ErrorCode {
    use rewind_plan::PlanError as P;
    match e {
        P::InvalidLog(s) => surface_code(s),
        P::BadInbox { .. } | P::HostSurface { .. } => ErrorCode::InvalidLog,
        P::UnknownSeq { .. } => ErrorCode::UnknownSeq,
        P::NotHumanMessage { .. } => ErrorCode::NotHumanMessage,
        P::NotOnSurface { .. } => ErrorCode::NotOnSurface,
        P::IndexOutOfRange { .. } => ErrorCode::IndexOutOfRange,
        P::NoCandidates => ErrorCode::NoCandidates,
        P::SubagentSession => ErrorCode::SubagentSession,
        _ => ErrorCode::Failed,
    }
}

/// The code of a fork rewind the planner refused.
fn fork_code(e: &rewind_plan::ForkError) -> ErrorCode {
    use rewind_plan::ForkError as F;
    match e {
        F::Plan(p) => plan_code(p),
        F::InsideTurn { .. } => ErrorCode::ForkInsideTurn,
        _ => ErrorCode::Failed,
    }
}

impl From<rewind_plan::TargetError> for EngineError {
    fn from(e: rewind_plan::TargetError) -> Self {
        Self::new(target_code(&e), e.to_string())
    }
}

impl From<rewind_plan::ReadError> for EngineError {
    fn from(e: rewind_plan::ReadError) -> Self {
        Self::new(read_code(&e), e.to_string())
    }
}

impl From<rewind_plan::SurfaceError> for EngineError {
    fn from(e: rewind_plan::SurfaceError) -> Self {
        Self::new(surface_code(&e), e.to_string())
    }
}

impl From<rewind_plan::PlanError> for EngineError {
    fn from(e: rewind_plan::PlanError) -> Self {
        use rewind_plan::PlanError as P;
        let details = match &e {
            P::UnknownSeq { seq, len } => json!({ "seq": seq, "len": len }),
            P::NotHumanMessage { seq, what } => json!({ "seq": seq, "what": what }),
            P::NotOnSurface { seq } => json!({ "seq": seq }),
            P::IndexOutOfRange { index, count } => json!({ "index": index, "count": count }),
            _ => json!({}),
        };
        Self::new(plan_code(&e), e.to_string()).with_details(details)
    }
}

impl From<rewind_plan::ForkError> for EngineError {
    fn from(e: rewind_plan::ForkError) -> Self {
        match e {
            rewind_plan::ForkError::Plan(p) => p.into(),
            other => {
                let details = match &other {
                    rewind_plan::ForkError::InsideTurn { seq, .. } => json!({ "seq": seq }),
                    _ => json!({}),
                };
                Self::new(fork_code(&other), other.to_string()).with_details(details)
            }
        }
    }
}

impl From<snapshot_store::ChainPlanError> for EngineError {
    fn from(e: snapshot_store::ChainPlanError) -> Self {
        match e {
            snapshot_store::ChainPlanError::Plan(p) => p.into(),
            other => Self::bad_request(other.to_string()),
        }
    }
}

impl From<rewind_history::KeyError> for EngineError {
    fn from(e: rewind_history::KeyError) -> Self {
        Self::from_code_str(e.code(), e.to_string())
    }
}

impl From<rewind_history::UndoRefusal> for EngineError {
    fn from(e: rewind_history::UndoRefusal) -> Self {
        use rewind_history::UndoRefusal as R;
        let details = match &e {
            R::UnknownEntry { op_id } => json!({ "opId": op_id }),
            R::CrossWorkspace {
                op_id,
                entry_workspace,
                active_workspace,
            } => {
                json!({ "opId": op_id, "entryWorkspace": entry_workspace, "activeWorkspace": active_workspace })
            }
            R::OtherSession {
                op_id,
                entry_session,
                active_session,
            } => {
                json!({ "opId": op_id, "entrySession": entry_session, "activeSession": active_session })
            }
            R::AlreadyUndone { op_id, undone_at } => {
                json!({ "opId": op_id, "undoneAt": undone_at })
            }
            R::NotUndoable { op_id, journal } => {
                json!({ "opId": op_id, "journal": journal.name() })
            }
            R::Interrupted { op_id } => json!({ "opId": op_id }),
            R::Stale { paths } => json!({ "paths": paths }),
        };
        Self::from_code_str(e.code(), e.to_string()).with_details(details)
    }
}

macro_rules! coded_error {
    ($krate:ident: $($ty:ident),*) => {$(
        impl From<$krate::$ty> for EngineError {
            fn from(e: $krate::$ty) -> Self {
                Self::from_code_str(e.code(), e.to_string())
            }
        }
    )*};
}
coded_error!(rewind_history: OpenError, ReadError, AppendError, WriteError, MarkUndoneError, SettleError);
coded_error!(rewind_cleanup: OpenError, SweepError, RecordError, PolicyError);

macro_rules! store_error {
    ($ty:ident, |$e:ident| { $($pat:pat => $code:expr,)* }) => {
        impl From<snapshot_store::$ty> for EngineError {
            fn from($e: snapshot_store::$ty) -> Self {
                use snapshot_store::$ty as E;
                #[allow(unreachable_patterns)]
                let code = match &$e {
                    E::NewerStore(_) => ErrorCode::StoreNewer,
                    E::Corrupt(_) => ErrorCode::StoreCorrupt,
                    $($pat => $code,)*
                    _ => ErrorCode::Failed,
                };
                Self::new(code, $e.to_string())
            }
        }
    };
}

store_error!(OpenError, |e| {});
store_error!(SessionError, |e| { E::InvalidSessionId { .. } => ErrorCode::BadRequest, });
store_error!(CaptureError, |e| { E::InvalidCallId { .. } => ErrorCode::BadRequest, });
store_error!(CommitError, |e| { E::InvalidCallId { .. } => ErrorCode::BadRequest, });
store_error!(RecheckError, |e| { E::InvalidAncestor { .. } => ErrorCode::BadRequest, });
store_error!(PlanError, |e| {});
store_error!(ScanError, |e| {
    E::InvalidCallId { .. } => ErrorCode::BadRequest,
    E::NoWorkspace { .. } => ErrorCode::BadRequest,
    E::Workspace { .. } => ErrorCode::BadRequest,
});
store_error!(RestoreError, |e| {
    E::InvalidOpId { .. } => ErrorCode::BadRequest,
    E::DuplicateOp { .. } => ErrorCode::BadRequest,
    E::Fs(_) => ErrorCode::RestoreFailed,
    E::Rescue { .. } => ErrorCode::RestoreFailed,
    E::GitObjectGone { .. } => ErrorCode::GitObjectGone,
});
store_error!(ReconcileError, |e| {});
store_error!(PruneError, |e| {});
store_error!(CompactError, |e| {});
store_error!(ClearError, |e| {});
store_error!(QueryError, |e| {});
store_error!(DiffError, |e| {});

impl From<snapshot_store::JournalError> for EngineError {
    fn from(e: snapshot_store::JournalError) -> Self {
        use snapshot_store::JournalError as E;
        use snapshot_store::JournalState as S;
        let (code, details) = match &e {
            E::NewerStore(_) => (ErrorCode::StoreNewer, json!({})),
            E::Corrupt(_) => (ErrorCode::StoreCorrupt, json!({})),
            E::InvalidOpId { .. } => (ErrorCode::BadRequest, json!({})),
            E::UnknownOp { op_id, .. } => (ErrorCode::UnknownEntry, json!({ "opId": op_id })),
            E::WrongState {
                op_id,
                state: S::Undone,
                ..
            } => (ErrorCode::AlreadyUndone, json!({ "opId": op_id })),
            E::WrongState { op_id, state, .. } => (
                ErrorCode::NotUndoable,
                json!({ "opId": op_id, "journal": crate::journal_state(*state).name() }),
            ),
            E::Stale { op_id, paths, redo } => (
                ErrorCode::StaleUndo,
                json!({ "opId": op_id, "paths": paths, "redo": redo }),
            ),
            _ => (ErrorCode::UndoFailed, json!({})),
        };
        Self::new(code, e.to_string()).with_details(details)
    }
}

/// A refused choice of files: [`ErrorCode::BadSelection`] for one that names no file;
/// [`ErrorCode::BadRequest`] for a display form several files share (`details.paths`: their
/// JSON path forms, `details.spellings`: the exact spellings to choose one by) or a `hex:`
/// spelling that is not hex. `details.path` is the choice as given.
impl From<snapshot_store::SelectionError> for EngineError {
    fn from(e: snapshot_store::SelectionError) -> Self {
        use snapshot_store::SelectionFault as F;
        let filter = e.filter.clone();
        let message = format!("{e}; nothing was changed");
        match &e.fault {
            F::NoMatch => Self::new(ErrorCode::BadSelection, message)
                .with_details(json!({ "path": filter })),
            F::BadSpelling => Self::bad_request(message).with_details(json!({ "path": filter })),
            F::Ambiguous(paths) => Self::bad_request(message).with_details(json!({
                "path": filter,
                "paths": paths,
                "spellings": paths.iter().map(snapshot_store::RelPath::spelling).collect::<Vec<_>>(),
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_string_of_the_core_crates_is_in_the_table() {
        for code in [
            rewind_history::CODE_FAILED,
            rewind_history::CODE_HISTORY_CORRUPT,
            snapshot_store::SCAN_BUDGET_CODE,
        ] {
            assert!(
                ErrorCode::parse(code).is_some(),
                "{code} is not in the table"
            );
        }
        let unknown = EngineError::from_code_str("rewind/no-such-code", "x");
        assert_eq!(unknown.code, ErrorCode::Failed, "never guessed");
    }

    #[test]
    fn undo_refusals_keep_their_codes_and_details() {
        let stale = EngineError::from(rewind_history::UndoRefusal::Stale {
            paths: vec!["b.txt".into(), "a.txt".into()],
        });
        assert_eq!(stale.code, ErrorCode::StaleUndo);
        assert_eq!(stale.details, json!({ "paths": ["b.txt", "a.txt"] }));
        assert_eq!(stale.paths(), ["b.txt", "a.txt"]);
    }

    #[test]
    fn planner_refusals_keep_their_codes() {
        let e =
            EngineError::from(rewind_plan::parse_target("1 extra").expect_err("trailing argument"));
        assert_eq!(e.code, ErrorCode::BadTarget);
        let log = rewind_plan::SessionLog::from_events_json("[]").expect("empty log");
        let e = EngineError::from(
            rewind_plan::plan_rewind(&log, rewind_plan::Target::Seq(3)).expect_err("unknown seq"),
        );
        assert_eq!(e.code, ErrorCode::UnknownSeq);
        assert_eq!(e.details, json!({ "seq": 3, "len": 0 }));
    }

    #[test]
    fn fork_refusals_keep_their_codes() {
        let log = rewind_plan::SessionLog::from_events_json(
            r#"[{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}},
                {"type":"user/message","seq":1,"time":2,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}]"#,
        )
        .expect("log");
        let e = EngineError::from(
            rewind_plan::plan_fork(&log, rewind_plan::Target::Seq(1))
                .expect_err("turn starts the session"),
        );
        assert_eq!(e.code, ErrorCode::ForkInsideTurn);
        assert_eq!(e.details, json!({ "seq": 1 }));
    }

    #[test]
    fn planner_variants_have_their_codes() {
        use rewind_plan::{ForkError, PlanError, ReadError, SurfaceError, TargetError};
        let text = || "x".to_owned();
        let targets = [
            TargetError::Empty,
            TargetError::MissingSeq,
            TargetError::BadSeq(text()),
            TargetError::BadIndex(text()),
            TargetError::TrailingArgument(text()),
        ];
        for e in targets {
            assert_eq!(
                EngineError::from(e.clone()).code,
                ErrorCode::BadTarget,
                "{e:?}"
            );
        }
        let reads = [
            ReadError::BadLine {
                line: 1,
                message: text(),
            },
            ReadError::NewerHeader { found: 1, known: 0 },
            ReadError::NotContiguous {
                expected: 0,
                found: 1,
            },
        ];
        for e in reads {
            let what = format!("{e:?}");
            assert_eq!(EngineError::from(e).code, ErrorCode::InvalidLog, "{what}");
        }
        let surfaces = [
            SurfaceError::NotContiguous {
                expected: 0,
                found: 1,
            },
            SurfaceError::IneligibleSurfaceOp {
                kind: text(),
                seq: 0,
            },
            SurfaceError::IneligibleSources {
                kind: text(),
                seq: 0,
            },
            SurfaceError::MissingSurfaceOp {
                kind: text(),
                seq: 0,
            },
            SurfaceError::InvalidSurfaceOp {
                kind: text(),
                seq: 0,
                value: text(),
            },
            SurfaceError::BadSources {
                seq: 0,
                problem: text(),
            },
            SurfaceError::StartNotOnSurface { seq: 0, start: 1 },
            SurfaceError::EndNotOnSurface { seq: 0, end: 1 },
            SurfaceError::StartAfterEnd {
                start: 2,
                start_index: 1,
                end: 1,
                end_index: 0,
            },
            SurfaceError::MissingShadowed {
                seq: 0,
                missing: vec![1],
            },
            SurfaceError::BadToolResultRewrite {
                seq: 0,
                problem: text(),
            },
        ];
        for e in surfaces {
            assert_eq!(
                EngineError::from(e.clone()).code,
                ErrorCode::InvalidLog,
                "{e:?}"
            );
            // The planner hands a surface error on inside `PlanError::InvalidLog`.
            let plan = EngineError::from(PlanError::InvalidLog(e.clone()));
            assert_eq!(plan.code, ErrorCode::InvalidLog, "{e:?}");
        }
        let plans = [
            (
                PlanError::BadInbox {
                    seq: 0,
                    problem: text(),
                },
                ErrorCode::InvalidLog,
            ),
            (
                PlanError::UnknownSeq { seq: 3, len: 0 },
                ErrorCode::UnknownSeq,
            ),
            (
                PlanError::NotHumanMessage {
                    seq: 0,
                    what: text(),
                },
                ErrorCode::NotHumanMessage,
            ),
            (PlanError::NotOnSurface { seq: 0 }, ErrorCode::NotOnSurface),
            (
                PlanError::IndexOutOfRange { index: 2, count: 1 },
                ErrorCode::IndexOutOfRange,
            ),
            (PlanError::NoCandidates, ErrorCode::NoCandidates),
            (PlanError::SubagentSession, ErrorCode::SubagentSession),
        ];
        for (e, code) in plans {
            assert_eq!(EngineError::from(e.clone()).code, code, "{e:?}");
            // A fork refused for the planner's reason keeps the planner's code and details.
            assert_eq!(
                EngineError::from(ForkError::Plan(e.clone())),
                EngineError::from(e.clone()),
                "{e:?}"
            );
        }
        let inside = ForkError::InsideTurn {
            seq: 4,
            reason: text(),
        };
        assert_eq!(EngineError::from(inside).code, ErrorCode::ForkInsideTurn);
    }

    #[test]
    fn history_keys_are_bad_requests() {
        let e = EngineError::from(
            rewind_history::WorkspaceKey::parse("../x").expect_err("hostile key"),
        );
        assert_eq!(e.code, ErrorCode::BadRequest);
    }
}
