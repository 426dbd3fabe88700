//! Serde types for DSH session events and the few event payloads the planner reads.
//!
//! The envelope is `{type, seq, time, data, ignorable?, surfaceOp?, sourceEventSeqs?}`.
//! `data` stays raw JSON ([`RawValue`]) until a typed view asks for it, so an
//! event type this crate does not know is carried as an opaque value and never
//! rejected, and a large log is read without building a tree for every payload.

use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The largest integer JavaScript represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Event type of a user-role message (human prompt, injected context, compaction checkpoint, rewind marker).
pub const USER_MESSAGE: &str = "user/message";
/// Event type of a model reply.
pub const ASSISTANT_MESSAGE: &str = "assistant/message";
/// Event type of a tool result.
pub const TOOL_RESULT: &str = "tool/result";
/// Event type of the rendered system prompt: surface node 0 from session format 3 on
/// (zq0929/deepseek-harness@5593cc25 `packages/core/session/src/types.ts`, `SessionEventMap['system/message']`).
pub const SYSTEM_MESSAGE: &str = "system/message";
/// Event type of an incremental developer-role change, a surface node in 0.2.x
/// (zq0929/deepseek-harness@5593cc25 `packages/core/session/src/types.ts`, `SurfaceEventType`).
pub const DEVELOPER_MESSAGE: &str = "developer/message";
/// Event type of a model attempt that committed no surface message (format 2 on; never on the
/// surface). zq0929/deepseek-harness@5593cc25 `packages/core/session/src/types.ts`.
pub const ASSISTANT_ATTEMPT: &str = "assistant/attempt";
/// Event type separating inherited (fork-seed) history from the session's own events (format 2
/// on); `{inherited: true}` marks the fork cut. zq0929/deepseek-harness@5593cc25
/// `packages/core/session/src/types.ts`, `SessionEventMap['session/end-seed']`.
pub const SESSION_END_SEED: &str = "session/end-seed";
/// Event type of an inbox mutation (queued prompts and steering).
pub const INBOX_SPLICED: &str = "agent/inbox/spliced";
/// Event type opening a turn.
pub const TURN_START: &str = "turn/start";
/// Event type closing a turn.
pub const TURN_END: &str = "turn/end";
/// Event type recording a command invocation.
pub const COMMAND_RUN: &str = "command/run";
/// Event type recording a command outcome.
pub const COMMAND_DONE: &str = "command/done";

/// Whether an event type may carry a surface operation (DSH's `isSurfaceEligibleType`).
///
/// The union of every release: `user/message`, `assistant/message` and `tool/result` (rc.8,
/// toninfo/deepseek-harness `packages/core/session/src/surface.ts`), `system/message` (format 3,
/// knyazev741/deepseek-harness@1376315f `packages/core/session/src/surface.ts`,
/// `SURFACE_EVENT_TYPES`) and `developer/message` (0.2.x, zq0929/deepseek-harness@5593cc25
/// `packages/core/session/src/types.ts`, `SurfaceEventType`). An older log never holds the newer
/// types, so the union folds every format as its own release does.
pub fn is_surface_eligible(kind: &str) -> bool {
    matches!(
        kind,
        USER_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT | SYSTEM_MESSAGE | DEVELOPER_MESSAGE
    )
}

/// Whether a surface node is a prompt-like node of the host (the system prompt or a developer
/// change): on the surface, never a rewind target, and never the reason a plan is refused.
pub fn is_instruction_node(kind: &str) -> bool {
    matches!(kind, SYSTEM_MESSAGE | DEVELOPER_MESSAGE)
}

/// Every event type DSH 0.2.1-alpha.2 knows (zq0929/deepseek-harness@5593cc25
/// `packages/core/session/src/known-event-types.ts`, `KNOWN_SESSION_EVENT_TYPES`), plus rc.8's
/// `assistant/chunk`. An event of another type marked `ignorable` keeps whatever surface metadata
/// it carries without affecting the surface (knyazev741/deepseek-harness@1376315f
/// `packages/core/session/src/surface.ts`, `surfaceOpOf`).
pub const KNOWN_EVENT_TYPES: &[&str] = &[
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/attempt",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "deliverables/presented",
    "developer/message",
    "feedback/message-delete",
    "feedback/message-put",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "image/offload",
    "llm/retry",
    "llm/retry-started",
    "model/selection",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session-log-deepseek/delivery-accepted",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/catalog",
    "subagent/descriptor",
    "subagent/model-selection-policy",
    "system/message",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/ptc-dispatch",
    "tool/ptc-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
    "working-directory/change",
    "workspace/changes",
];

/// Whether DSH knows this event type (see [`KNOWN_EVENT_TYPES`]).
pub fn is_known_type(kind: &str) -> bool {
    KNOWN_EVENT_TYPES.contains(&kind)
}

/// How a replace surface op spells its range when written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReplaceSpelling {
    /// `{op:'replace', start, end}`: session formats 0 to 2 (rc.8
    /// toninfo/deepseek-harness `packages/core/session/src/surface.ts`, `isReplaceOp`).
    StartEnd,
    /// `{op:'replace', startSeq, endSeq}`: session format 3 on (knyazev741/deepseek-harness@1376315f
    /// `packages/core/session/src/surface.ts`, `isReplaceOp`; zq0929/deepseek-harness@5593cc25
    /// `packages/core/session/src/types.ts`, `SurfaceOp`).
    StartSeqEndSeq,
}

impl ReplaceSpelling {
    /// The spelling a host of this session format version accepts.
    pub fn for_format(version: u64) -> Self {
        if version >= 3 {
            ReplaceSpelling::StartSeqEndSeq
        } else {
            ReplaceSpelling::StartEnd
        }
    }
}

/// How a surface-eligible event enters the model-visible surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SurfaceOp {
    /// `"append"`: the event's seq is pushed onto the surface.
    Append,
    /// A replace: the surface nodes from `start` through `end` (inclusive, by position on the
    /// surface) are replaced by this event's seq. Read from either spelling,
    /// `{op:'replace', start, end}` (formats 0 to 2) or `{op:'replace', startSeq, endSeq}` (format
    /// 3 on); written as `{op:'replace', start, end}` unless [`SurfaceOp::to_json`] is asked for
    /// the newer spelling.
    Replace {
        /// First replaced surface node.
        start: u64,
        /// Last replaced surface node.
        end: u64,
    },
    /// A value DSH would refuse (wrong keys, negative or unsafe numbers, another shape).
    /// Kept verbatim so [`crate::fold_surface`] can name the problem.
    Invalid(Value),
}

impl SurfaceOp {
    fn from_value(value: Value) -> Self {
        match &value {
            Value::String(s) if s == "append" => return SurfaceOp::Append,
            Value::Object(map) if map.len() == 3 => {
                let op = map.get("op").and_then(Value::as_str);
                // Exactly three keys, one of the two spellings, never a mix (each release's
                // `isReplaceOp` requires its own pair; knyazev741/deepseek-harness@1376315f
                // `packages/core/session/src/surface.ts`).
                let (start, end) = if map.contains_key("start") {
                    (map.get("start"), map.get("end"))
                } else {
                    (map.get("startSeq"), map.get("endSeq"))
                };
                if let (Some("replace"), Some(start), Some(end)) =
                    (op, start.and_then(safe_seq), end.and_then(safe_seq))
                {
                    return SurfaceOp::Replace { start, end };
                }
            }
            _ => {}
        }
        SurfaceOp::Invalid(value)
    }

    fn to_value(&self) -> Value {
        self.to_json(ReplaceSpelling::StartEnd)
    }

    /// The op as JSON, a replace written in `spelling` (see [`ReplaceSpelling::for_format`]).
    pub fn to_json(&self, spelling: ReplaceSpelling) -> Value {
        match (self, spelling) {
            (SurfaceOp::Append, _) => Value::String("append".into()),
            (SurfaceOp::Replace { start, end }, ReplaceSpelling::StartEnd) => {
                serde_json::json!({"op": "replace", "start": start, "end": end})
            }
            (SurfaceOp::Replace { start, end }, ReplaceSpelling::StartSeqEndSeq) => {
                serde_json::json!({"op": "replace", "startSeq": start, "endSeq": end})
            }
            (SurfaceOp::Invalid(v), _) => v.clone(),
        }
    }
}

/// A JSON number that is a non-negative safe integer, as DSH's `isEventSeq` requires.
pub(crate) fn safe_seq(v: &Value) -> Option<u64> {
    v.as_u64().filter(|n| *n <= MAX_SAFE_INTEGER)
}

impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for SurfaceOp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(SurfaceOp::from_value(Value::deserialize(d)?))
    }
}

/// `sourceEventSeqs` as written: normally a list of seqs, kept verbatim when it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSeqs {
    /// A list of non-negative safe integers.
    List(Vec<u64>),
    /// Anything else (not an array, or an element that is not a non-negative safe integer).
    Invalid(Value),
}

impl Serialize for SourceSeqs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SourceSeqs::List(v) => v.serialize(s),
            SourceSeqs::Invalid(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SourceSeqs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        if let Value::Array(items) = &value {
            let seqs: Option<Vec<u64>> = items.iter().map(safe_seq).collect();
            if let Some(seqs) = seqs {
                return Ok(SourceSeqs::List(seqs));
            }
        }
        Ok(SourceSeqs::Invalid(value))
    }
}

/// A field that is present is `Some`, even when it holds `null` (JavaScript
/// tells `null` from a missing key, and DSH refuses a `null` surface op).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// One session event, with its payload kept as raw JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionEvent {
    /// The event type, e.g. `user/message`; unknown types are kept as they are.
    #[serde(rename = "type")]
    pub kind: String,
    /// Position in the log, contiguous from 0.
    pub seq: u64,
    /// Wall-clock time in epoch milliseconds, as written.
    #[serde(default)]
    pub time: Value,
    /// The payload, unparsed.
    pub data: Box<RawValue>,
    /// `true` when a reader that does not know the type may skip it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignorable: Option<bool>,
    /// The surface operation (surface-eligible types only).
    #[serde(
        default,
        rename = "surfaceOp",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub surface_op: Option<SurfaceOp>,
    /// Events this one derives from (for a replacement: every shadowed node).
    #[serde(
        default,
        rename = "sourceEventSeqs",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub source_event_seqs: Option<SourceSeqs>,
}

impl SessionEvent {
    /// Builds an event from parts; `data` must be valid JSON.
    pub fn new(kind: &str, seq: u64, data: &Value) -> Self {
        let raw = RawValue::from_string(data.to_string()).unwrap_or_else(|_| empty_object());
        SessionEvent {
            kind: kind.to_string(),
            seq,
            time: Value::from(0),
            data: raw,
            ignorable: None,
            surface_op: None,
            source_event_seqs: None,
        }
    }

    /// Sets the surface operation (builder style).
    pub fn with_surface(mut self, op: SurfaceOp, sources: Option<Vec<u64>>) -> Self {
        self.surface_op = Some(op);
        self.source_event_seqs = sources.map(SourceSeqs::List);
        self
    }

    /// The payload parsed into a JSON tree.
    pub fn data_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(self.data.get())
    }

    /// The payload of a `user/message`, or `None` for any other type or a payload
    /// that is not a message.
    pub fn user_message(&self) -> Option<UserMessage> {
        if self.kind != USER_MESSAGE {
            return None;
        }
        serde_json::from_str(self.data.get()).ok()
    }

    /// Whether this is a human prompt: a `user/message` whose `source.kind` is `user`.
    pub fn is_human_message(&self) -> bool {
        self.user_message().is_some_and(|m| m.is_human())
    }

    /// Whether this is a `session/end-seed` marking the fork cut (`data.inherited === true`).
    pub fn is_inherited_cut(&self) -> bool {
        self.kind == SESSION_END_SEED
            && self
                .data_value()
                .is_ok_and(|d| d.get("inherited") == Some(&Value::Bool(true)))
    }
}

fn empty_object() -> Box<RawValue> {
    // `{}` is valid JSON, so this cannot fail.
    RawValue::from_string("{}".to_string()).unwrap_or_else(|_| unreachable!("literal JSON"))
}

/// Where a user-role message came from (`data.source`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageSource {
    /// `user` for a human prompt; `plugin` (formats up to 3), a producer's own kind (format 4, e.g.
    /// `agent-instructions`, `compact-checkpoint`, `plugin:<name>`), rewind markers and others for
    /// injected messages.
    pub kind: String,
    /// The injecting plugin, for `kind == "plugin"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
}

/// The payload of a `user/message` event (DSH's `UserMessage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Message identity.
    #[serde(default)]
    pub id: Option<String>,
    /// Always `user`.
    #[serde(default)]
    pub role: Option<String>,
    /// Content blocks (`{type:'text', text}`, images, …), kept as JSON.
    #[serde(default)]
    pub content: Vec<Value>,
    /// Where the message came from.
    pub source: MessageSource,
}

impl UserMessage {
    /// Whether a human typed this message.
    pub fn is_human(&self) -> bool {
        self.source.kind == "user"
    }

    /// The text blocks joined with newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if block.get("type").and_then(Value::as_str) == Some("text") {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(t);
                }
            }
        }
        out
    }

    /// Number of image blocks.
    pub fn image_count(&self) -> usize {
        self.content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("image"))
            .count()
    }
}

/// The payload of an `agent/inbox/spliced` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxSplice {
    /// `next-step` (steering) or `next-turn` (queued prompts).
    pub target: String,
    /// Splice position.
    pub start: u64,
    /// How many pending messages were removed.
    #[serde(default, rename = "removedCount")]
    pub removed_count: Option<u64>,
    /// Messages inserted at `start`.
    #[serde(default)]
    pub inserted: Vec<UserMessage>,
}

/// The header line of a DSH JSONL session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Header format version; this build reads versions 0 to 4.
    pub version: u64,
    /// Session id.
    pub id: String,
    /// Creation time.
    #[serde(default, rename = "createdAt")]
    pub created_at: Value,
    /// Absolute working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session this one was forked from.
    #[serde(
        default,
        rename = "parentSession",
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_session: Option<String>,
    /// Number of events seeded from the parent (formats 0 and 1; refused from format 2 on,
    /// zq0929/deepseek-harness@5593cc25 `packages/core/session/src/index.ts`,
    /// `validateSessionHeader`).
    #[serde(
        default,
        rename = "seedLength",
        skip_serializing_if = "Option::is_none"
    )]
    pub seed_length: Option<u64>,
    /// Whether the session holds a fork-inherited prefix (format 2 on; required there). The
    /// prefix length is then the seq of the last `session/end-seed {inherited: true}` event
    /// (knyazev741/deepseek-harness@1376315f `packages/session/session-format-v1-to-v2/src/codec.ts`;
    /// see [`crate::SessionLog::seed_boundary`]).
    #[serde(default, rename = "isSeeded", skip_serializing_if = "Option::is_none")]
    pub is_seeded: Option<bool>,
    /// The inherited prefix length, when a logical header carries it (DSH's
    /// `RestoredSessionOptions.inheritedEventCount`; the JSONL header line does not).
    #[serde(
        default,
        rename = "inheritedEventCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub inherited_event_count: Option<u64>,
    /// `subagent` for a delegated session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Delegation depth (0 for a top-level session).
    #[serde(
        default,
        rename = "delegationDepth",
        skip_serializing_if = "Option::is_none"
    )]
    pub delegation_depth: Option<u64>,
}

impl SessionHeader {
    /// Whether the session is a subagent's (never tracked, never rewound).
    pub fn is_subagent(&self) -> bool {
        self.origin.as_deref() == Some("subagent") || self.delegation_depth.is_some_and(|d| d > 0)
    }
}
