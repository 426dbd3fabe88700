//! The one place where core errors become stable `{code, message, details}` errors.

use napi::bindgen_prelude::{Env, JsObjectValue, Object, Unknown};
use napi::{JsValue, Status};
use serde_json::{Value, json};

/// A failure on its way to JavaScript: a stable `rewind/...` code, the human message, and a
/// JSON object of machine-readable details (paths, seqs, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct BindingError {
    /// Stable code, e.g. `rewind/stale-undo`.
    pub code: String,
    /// Human-readable message (the core error's `Display`).
    pub message: String,
    /// Machine-readable details; always a JSON object.
    pub details: Value,
}

impl BindingError {
    /// A new error with empty details.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            details: json!({}),
        }
    }

    /// The same error with `details` attached.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// `rewind/bad-request` for malformed arguments from the host.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new("rewind/bad-request", message)
    }

    /// `rewind/failed` for an unexpected failure.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new("rewind/failed", message)
    }

    /// Builds the JavaScript `Error` (with `code` and `details` properties) and wraps it so napi
    /// throws or rejects with exactly that object.
    pub fn into_napi(self, env: &Env) -> napi::Error {
        match self.to_js(env) {
            Ok(error) => error,
            Err(fallback) => fallback,
        }
    }

    fn to_js(&self, env: &Env) -> napi::Result<napi::Error> {
        let mut object: Object<'_> = env.create_error(napi::Error::new(
            Status::GenericFailure,
            self.message.clone(),
        ))?;
        object.set_named_property("code", self.code.as_str())?;
        object.set_named_property(
            "details",
            env.to_js_value(&js_numbers(self.details.clone()))?,
        )?;
        let unknown: Unknown<'_> = object.to_unknown();
        Ok(napi::Error::from(unknown))
    }
}

/// Integers become plain JavaScript numbers (napi would turn a `u64` into a `BigInt`, which
/// `JSON.stringify` refuses); seqs, counts and times stay far below 2^53.
fn js_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) if !n.is_f64() => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(js_numbers).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, js_numbers(v))).collect())
        }
        other => other,
    }
}

impl std::fmt::Display for BindingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<rewind_plan::TargetError> for BindingError {
    fn from(e: rewind_plan::TargetError) -> Self {
        Self::new(e.code().as_str(), e.to_string())
    }
}

impl From<rewind_plan::ReadError> for BindingError {
    fn from(e: rewind_plan::ReadError) -> Self {
        Self::new(e.code().as_str(), e.to_string())
    }
}

impl From<rewind_plan::PlanError> for BindingError {
    fn from(e: rewind_plan::PlanError) -> Self {
        let details = match &e {
            rewind_plan::PlanError::UnknownSeq { seq, len } => json!({ "seq": seq, "len": len }),
            rewind_plan::PlanError::NotHumanMessage { seq, what } => {
                json!({ "seq": seq, "what": what })
            }
            rewind_plan::PlanError::NotOnSurface { seq } => json!({ "seq": seq }),
            rewind_plan::PlanError::IndexOutOfRange { index, count } => {
                json!({ "index": index, "count": count })
            }
            _ => json!({}),
        };
        Self::new(e.code().as_str(), e.to_string()).with_details(details)
    }
}

impl From<rewind_plan::ForkError> for BindingError {
    fn from(e: rewind_plan::ForkError) -> Self {
        match e {
            rewind_plan::ForkError::Plan(p) => p.into(),
            other => {
                let details = match &other {
                    rewind_plan::ForkError::InsideTurn { seq, .. } => json!({ "seq": seq }),
                    _ => json!({}),
                };
                Self::new(other.code().as_str(), other.to_string()).with_details(details)
            }
        }
    }
}

impl From<snapshot_store::ChainPlanError> for BindingError {
    fn from(e: snapshot_store::ChainPlanError) -> Self {
        match e {
            snapshot_store::ChainPlanError::Plan(p) => p.into(),
            other => Self::new("rewind/bad-request", other.to_string()),
        }
    }
}

impl From<rewind_history::KeyError> for BindingError {
    fn from(e: rewind_history::KeyError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

impl From<rewind_history::UndoRefusal> for BindingError {
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
        Self::new(e.code(), e.to_string()).with_details(details)
    }
}

macro_rules! history_error {
    ($($ty:ident),*) => {$(
        impl From<rewind_history::$ty> for BindingError {
            fn from(e: rewind_history::$ty) -> Self {
                Self::new(e.code(), e.to_string())
            }
        }
    )*};
}
history_error!(
    OpenError,
    ReadError,
    AppendError,
    WriteError,
    MarkUndoneError,
    SettleError
);

/// The stable code of a store failure shared by every store operation.
fn store_fault_code(newer: bool, corrupt: bool) -> &'static str {
    if newer {
        "rewind/store-newer"
    } else if corrupt {
        "rewind/store-corrupt"
    } else {
        "rewind/failed"
    }
}

macro_rules! store_error {
    ($ty:ident, |$e:ident| { $($pat:pat => $code:expr,)* }) => {
        impl From<snapshot_store::$ty> for BindingError {
            fn from($e: snapshot_store::$ty) -> Self {
                use snapshot_store::$ty as E;
                #[allow(unreachable_patterns)]
                let code: &str = match &$e {
                    E::NewerStore(_) => store_fault_code(true, false),
                    E::Corrupt(_) => store_fault_code(false, true),
                    $($pat => $code,)*
                    _ => store_fault_code(false, false),
                };
                Self::new(code, $e.to_string())
            }
        }
    };
}

store_error!(OpenError, |e| {});
store_error!(SessionError, |e| { E::InvalidSessionId { .. } => "rewind/bad-request", });
store_error!(CaptureError, |e| { E::InvalidCallId { .. } => "rewind/bad-request", });
store_error!(CommitError, |e| { E::InvalidCallId { .. } => "rewind/bad-request", });
store_error!(RecheckError, |e| {});
store_error!(PlanError, |e| {});
store_error!(ScanError, |e| {
    E::InvalidCallId { .. } => "rewind/bad-request",
    E::NoWorkspace { .. } => "rewind/bad-request",
    E::Workspace { .. } => "rewind/bad-request",
});
store_error!(RestoreError, |e| {
    E::InvalidOpId { .. } => "rewind/bad-request",
    E::DuplicateOp { .. } => "rewind/bad-request",
    E::Fs(_) => "rewind/restore-failed",
    E::Rescue { .. } => "rewind/restore-failed",
});
store_error!(ReconcileError, |e| {});
store_error!(PruneError, |e| {});
store_error!(ClearError, |e| {});
store_error!(QueryError, |e| {});

impl From<snapshot_store::JournalError> for BindingError {
    fn from(e: snapshot_store::JournalError) -> Self {
        use snapshot_store::JournalError as E;
        use snapshot_store::JournalState as S;
        let (code, details) = match &e {
            E::NewerStore(_) => ("rewind/store-newer", json!({})),
            E::Corrupt(_) => ("rewind/store-corrupt", json!({})),
            E::InvalidOpId { .. } => ("rewind/bad-request", json!({})),
            E::UnknownOp { op_id, .. } => ("rewind/unknown-entry", json!({ "opId": op_id })),
            E::WrongState {
                op_id,
                state: S::Undone,
                ..
            } => ("rewind/already-undone", json!({ "opId": op_id })),
            E::WrongState { op_id, state, .. } => (
                "rewind/not-undoable",
                json!({ "opId": op_id, "journal": state.to_string() }),
            ),
            E::Stale { op_id, paths } => (
                "rewind/stale-undo",
                json!({ "opId": op_id, "paths": paths.iter().map(|p| p.display()).collect::<Vec<_>>() }),
            ),
            _ => ("rewind/undo-failed", json!({})),
        };
        Self::new(code, e.to_string()).with_details(details)
    }
}

macro_rules! cleanup_error {
    ($($ty:ident),*) => {$(
        impl From<rewind_cleanup::$ty> for BindingError {
            fn from(e: rewind_cleanup::$ty) -> Self {
                Self::new(e.code(), e.to_string())
            }
        }
    )*};
}
cleanup_error!(OpenError, SweepError, RecordError, PolicyError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_refusals_keep_their_codes_and_details() {
        let stale = BindingError::from(rewind_history::UndoRefusal::Stale {
            paths: vec!["b.txt".into(), "a.txt".into()],
        });
        assert_eq!(stale.code, "rewind/stale-undo");
        assert_eq!(stale.details, json!({ "paths": ["b.txt", "a.txt"] }));
    }

    #[test]
    fn planner_refusals_keep_their_codes() {
        let e = BindingError::from(
            rewind_plan::parse_target("1 extra").expect_err("trailing argument"),
        );
        assert_eq!(e.code, "rewind/bad-target");
        let log = rewind_plan::SessionLog::from_events_json("[]").expect("empty log");
        let e = BindingError::from(
            rewind_plan::plan_rewind(&log, rewind_plan::Target::Seq(3)).expect_err("unknown seq"),
        );
        assert_eq!(e.code, "rewind/unknown-seq");
        assert_eq!(e.details, json!({ "seq": 3, "len": 0 }));
    }

    #[test]
    fn fork_refusals_keep_their_codes() {
        let log = rewind_plan::SessionLog::from_events_json(
            r#"[{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}},
                {"type":"user/message","seq":1,"time":2,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}]"#,
        )
        .expect("log");
        let e = BindingError::from(
            rewind_plan::plan_fork(&log, rewind_plan::Target::Seq(1))
                .expect_err("turn starts the session"),
        );
        assert_eq!(e.code, "rewind/fork-inside-turn");
        assert_eq!(e.details, json!({ "seq": 1 }));
        let e = BindingError::from(
            rewind_plan::plan_fork(&log, rewind_plan::Target::Seq(7)).expect_err("unknown seq"),
        );
        assert_eq!(e.code, "rewind/unknown-seq");
    }

    #[test]
    fn history_keys_are_bad_requests() {
        let e = BindingError::from(
            rewind_history::WorkspaceKey::parse("../x").expect_err("hostile key"),
        );
        assert_eq!(e.code, "rewind/bad-request");
    }

    #[test]
    fn integers_become_plain_numbers() {
        let v = js_numbers(
            json!({ "undoneAt": 1_795_978_660_755_u64, "paths": [1, 2], "name": "x", "f": 1.5 }),
        );
        assert!(v["undoneAt"].is_f64());
        assert_eq!(v["undoneAt"].as_f64(), Some(1_795_978_660_755.0));
        assert!(v["paths"][0].is_f64());
        assert_eq!(v["name"], "x");
        assert_eq!(v["f"], 1.5);
    }
}
store_error!(DiffError, |e| {});
