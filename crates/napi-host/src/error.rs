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
        Self { code: code.into(), message: message.into(), details: json!({}) }
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
        let mut object: Object<'_> = env.create_error(napi::Error::new(Status::GenericFailure, self.message.clone()))?;
        object.set_named_property("code", self.code.as_str())?;
        object.set_named_property("details", env.to_js_value(&self.details)?)?;
        let unknown: Unknown<'_> = object.to_unknown();
        Ok(napi::Error::from(unknown))
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
            rewind_plan::PlanError::NotHumanMessage { seq, what } => json!({ "seq": seq, "what": what }),
            rewind_plan::PlanError::NotOnSurface { seq } => json!({ "seq": seq }),
            rewind_plan::PlanError::IndexOutOfRange { index, count } => json!({ "index": index, "count": count }),
            _ => json!({}),
        };
        Self::new(e.code().as_str(), e.to_string()).with_details(details)
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
            R::CrossWorkspace { op_id, entry_workspace, active_workspace } => {
                json!({ "opId": op_id, "entryWorkspace": entry_workspace, "activeWorkspace": active_workspace })
            }
            R::OtherSession { op_id, entry_session, active_session } => {
                json!({ "opId": op_id, "entrySession": entry_session, "activeSession": active_session })
            }
            R::AlreadyUndone { op_id, undone_at } => json!({ "opId": op_id, "undoneAt": undone_at }),
            R::NotTop { op_id, tail } => json!({ "opId": op_id, "tail": tail }),
            R::NotUndoable { op_id, journal } => json!({ "opId": op_id, "journal": journal.name() }),
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
history_error!(OpenError, ReadError, AppendError, WriteError, MarkUndoneError);
