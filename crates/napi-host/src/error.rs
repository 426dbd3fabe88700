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
pub(crate) fn js_numbers(value: Value) -> Value {
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

impl From<rewind_engine::EngineError> for BindingError {
    fn from(e: rewind_engine::EngineError) -> Self {
        Self::new(e.code.as_str(), e.message).with_details(e.details)
    }
}

/// Every core error reaches JavaScript through the engine's one table of codes.
macro_rules! through_engine {
    ($($path:path),* $(,)?) => {$(
        impl From<$path> for BindingError {
            fn from(e: $path) -> Self {
                rewind_engine::EngineError::from(e).into()
            }
        }
    )*};
}
through_engine!(
    rewind_plan::TargetError,
    rewind_plan::ReadError,
    rewind_plan::PlanError,
    rewind_plan::ForkError,
    snapshot_store::ChainPlanError,
    snapshot_store::OpenError,
    snapshot_store::SessionError,
    snapshot_store::CaptureError,
    snapshot_store::CommitError,
    snapshot_store::RecheckError,
    snapshot_store::PlanError,
    snapshot_store::ScanError,
    snapshot_store::RestoreError,
    snapshot_store::ReconcileError,
    snapshot_store::PruneError,
    snapshot_store::ClearError,
    snapshot_store::QueryError,
    snapshot_store::DiffError,
    snapshot_store::JournalError,
    rewind_history::KeyError,
    rewind_history::UndoRefusal,
    rewind_history::OpenError,
    rewind_history::ReadError,
    rewind_history::AppendError,
    rewind_history::WriteError,
    rewind_history::MarkUndoneError,
    rewind_history::SettleError,
    rewind_cleanup::OpenError,
    rewind_cleanup::SweepError,
    rewind_cleanup::RecordError,
    rewind_cleanup::PolicyError,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_keep_their_codes_and_details() {
        let stale = BindingError::from(rewind_history::UndoRefusal::Stale {
            paths: vec!["b.txt".into(), "a.txt".into()],
        });
        assert_eq!(stale.code, "rewind/stale-undo");
        assert_eq!(stale.details, json!({ "paths": ["b.txt", "a.txt"] }));
        let e = BindingError::from(
            rewind_plan::parse_target("1 extra").expect_err("trailing argument"),
        );
        assert_eq!(e.code, "rewind/bad-target");
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
