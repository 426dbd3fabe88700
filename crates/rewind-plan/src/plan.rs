//! Candidates and the rewind plan.

use serde::Serialize;
use serde_json::{Value, json};
use thiserror::Error;

use crate::event::{
    DEVELOPER_MESSAGE, INBOX_SPLICED, InboxSplice, SYSTEM_MESSAGE, SessionEvent, SurfaceOp,
    USER_MESSAGE, UserMessage, is_surface_eligible,
};
use crate::log::SessionLog;
use crate::surface::{Surface, SurfaceError, SurfaceFold, fold_surface};
use crate::target::Target;

/// The text a rewind marker carries. An empty content would still reach the
/// model as an empty user message, so the marker says what it is instead.
pub const MARKER_TEXT: &str = "(empty message)";
/// `data.source.kind` of the rewind markers this build writes. Its own name, because another
/// rewind plugin (SiriLee/dsh-rewind) writes `dsh-rewind` markers. Format 4 admits any
/// non-empty kind other than `plugin` (knyazev741/deepseek-harness@8173fb8d
/// `packages/session/session-format-v3-to-v4/src/message-sources.ts`).
pub const MARKER_SOURCE_KIND: &str = "dsh-prompt-rewind";
/// `data.source.kind` of the markers earlier builds wrote; still recognised as rewind markers.
pub const LEGACY_MARKER_SOURCE_KIND: &str = "dsh-rewind";

/// Whether a `source.kind` names a rewind marker (this build's or an earlier build's).
pub fn is_marker_kind(kind: &str) -> bool {
    kind == MARKER_SOURCE_KIND || kind == LEGACY_MARKER_SOURCE_KIND
}
/// Longest preview, in characters.
pub const PREVIEW_CHARS: usize = 80;

/// A message the conversation can be rewound to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// 1-based recency index (1 = newest).
    pub index: u32,
    /// The message's seq; for a pending steering message, the seq of the inbox event that queued it.
    pub seq: u64,
    /// A short one-line preview of the message text.
    pub preview: String,
    /// `true` for steering the model has not read yet.
    pub pending: bool,
    /// The message id.
    pub message_id: Option<String>,
    /// The event time (epoch ms) as written, when numeric.
    pub time: Option<serde_json::Number>,
}

/// The event that performs an in-place rewind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    /// Always `user/message`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `{role:'user', content:[{type:'text', text:'(empty message)'}], source:{kind:'dsh-prompt-rewind'}}`;
    /// the host adds a fresh `id`.
    pub data: Value,
    /// The replaced range, neutral: `start` = the target, `end` = the last surface node. It
    /// serialises as `{op:'replace', start, end}`; a host of session format 3 or later writes it
    /// as `{op:'replace', startSeq, endSeq}` ([`SurfaceOp::to_json`] with
    /// [`crate::ReplaceSpelling::for_format`]).
    pub surface_op: SurfaceOp,
    /// Every shadowed surface node.
    pub source_event_seqs: Vec<u64>,
}

impl Marker {
    /// The marker as a session event at `seq` (for validation against a fold).
    pub fn to_event(&self, seq: u64) -> SessionEvent {
        SessionEvent::new(self.kind, seq, &self.data).with_surface(
            self.surface_op.clone(),
            Some(self.source_event_seqs.clone()),
        )
    }
}

/// What a rewind does to the conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindPlan {
    /// The seq rewound to (the human message, or the inbox event of a pending steering message).
    pub target_seq: u64,
    /// The marker to append; `None` when the target is pending steering (nothing on the surface moves).
    pub marker: Option<Marker>,
    /// Surface nodes the marker shadows, in surface order.
    pub shadowed_seqs: Vec<u64>,
    /// Ids of unread steering messages to withdraw from the inbox.
    pub withdraw_pending: Vec<String>,
    /// The target message's text (for refilling the composer).
    pub target_text: String,
    /// Where the planner's own fold disagrees with the host's surface the plan was made on
    /// (only for the `*_on` functions; `None` when they agree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surface_mismatch: Option<SurfaceMismatch>,
}

/// The host's own fold disagrees with the planner's. The plan is made on the host's surface
/// (DSH's `session.surface.nodes` is authoritative); this records the disagreement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceMismatch {
    /// The planner's own surface nodes (empty when its fold refused the log).
    pub own_nodes: Vec<u64>,
    /// Why the planner's own fold refused the log, when it did.
    pub own_error: Option<String>,
    /// The first surface position where the two differ (`None` when the own fold refused the
    /// log); the shorter length when one is a prefix of the other.
    pub first_difference: Option<usize>,
}

impl SurfaceMismatch {
    fn compare(host: &[u64], own: Result<&Surface, &SurfaceError>) -> Option<Self> {
        match own {
            Ok(s) if s.nodes == host => None,
            Ok(s) => Some(SurfaceMismatch {
                own_nodes: s.nodes.clone(),
                own_error: None,
                first_difference: Some(
                    host.iter()
                        .zip(&s.nodes)
                        .position(|(a, b)| a != b)
                        .unwrap_or(host.len().min(s.nodes.len())),
                ),
            }),
            Err(e) => Some(SurfaceMismatch {
                own_nodes: Vec::new(),
                own_error: Some(e.to_string()),
                first_difference: None,
            }),
        }
    }
}

/// The candidate list, with the fold cross-check of [`list_candidates_on`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateList {
    /// The candidates, newest first, numbered from 1.
    pub candidates: Vec<Candidate>,
    /// Where the planner's own fold disagrees with the host's surface (`None` when they agree).
    pub surface_mismatch: Option<SurfaceMismatch>,
}

/// Why a rewind cannot be planned.
#[derive(Debug, Clone, Error, PartialEq)]
#[non_exhaustive]
pub enum PlanError {
    /// The log breaks a surface rule.
    #[error("the session log is not valid: {0}")]
    InvalidLog(#[from] SurfaceError),
    /// No event has this seq.
    #[error("no event with seq {seq} in this session (it has {len} events)")]
    UnknownSeq {
        /// Requested seq.
        seq: u64,
        /// Log length.
        len: u64,
    },
    /// The event is not a human prompt.
    #[error(
        "seq {seq} is {what}, not a message you typed; only your own messages can be rewound to"
    )]
    NotHumanMessage {
        /// Requested seq.
        seq: u64,
        /// What it is instead.
        what: String,
    },
    /// The message is no longer on the surface.
    #[error(
        "message at seq {seq} is no longer in the conversation (an earlier rewind or a compaction removed it)"
    )]
    NotOnSurface {
        /// Requested seq.
        seq: u64,
    },
    /// Index past the candidate list.
    #[error("there is no message number {index}: only {count} can be rewound to")]
    IndexOutOfRange {
        /// Requested index.
        index: u32,
        /// Number of candidates.
        count: usize,
    },
    /// No candidates at all.
    #[error("there is no message to rewind to yet")]
    NoCandidates,
    /// A subagent session.
    #[error("this is a subagent session; subagent sessions are never rewound")]
    SubagentSession,
    /// An inbox event cannot be replayed.
    #[error("the inbox record at seq {seq} cannot be replayed: {problem}")]
    BadInbox {
        /// Inbox event seq.
        seq: u64,
        /// What is wrong.
        problem: String,
    },
    /// The host's surface names nodes the log cannot back (a seq past the log, a repeated node,
    /// or an event that is not a message).
    #[error("the host's surface does not match the session log: {problem}")]
    HostSurface {
        /// What is wrong.
        problem: String,
    },
}

/// An unread steering message still in the `next-step` inbox.
#[derive(Debug, Clone)]
struct Pending {
    splice_seq: u64,
    message: UserMessage,
    time: Option<serde_json::Number>,
}

/// Replays the inbox splices (from the seed boundary on, as DSH does) and
/// returns the `next-step` messages still pending, oldest first.
fn pending_steering(log: &SessionLog) -> Result<Vec<Pending>, PlanError> {
    let from = log.seed_boundary();
    let mut next_step: Vec<Pending> = Vec::new();
    let mut next_turn_len: u64 = 0;
    for event in log
        .events
        .iter()
        .skip(usize::try_from(from).unwrap_or(usize::MAX))
    {
        if event.kind != INBOX_SPLICED {
            continue;
        }
        let bad = |problem: &str| PlanError::BadInbox {
            seq: event.seq,
            problem: problem.to_string(),
        };
        let splice: InboxSplice =
            serde_json::from_str(event.data.get()).map_err(|e| bad(&e.to_string()))?;
        let removed = splice.removed_count.unwrap_or(0);
        match splice.target.as_str() {
            "next-step" => {
                let len = next_step.len() as u64;
                if splice.start > len || splice.start + removed > len {
                    return Err(bad("splice range outside the pending list"));
                }
                let start = splice.start as usize;
                let inserted = splice.inserted.into_iter().map(|message| Pending {
                    splice_seq: event.seq,
                    message,
                    time: number(&event.time),
                });
                next_step.splice(start..start + removed as usize, inserted);
            }
            "next-turn" => {
                if splice.start > next_turn_len || splice.start + removed > next_turn_len {
                    return Err(bad("splice range outside the pending list"));
                }
                next_turn_len = next_turn_len - removed + splice.inserted.len() as u64;
            }
            other => return Err(bad(&format!("unknown inbox target \"{other}\""))),
        }
    }
    Ok(next_step)
}

fn number(v: &Value) -> Option<serde_json::Number> {
    match v {
        Value::Number(n) => Some(n.clone()),
        _ => None,
    }
}

/// A one-line preview of a message.
pub fn preview(message: &UserMessage) -> String {
    let text = message.text();
    let collapsed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return match message.image_count() {
            0 => String::new(),
            1 => "[image]".to_string(),
            n => format!("[{n} images]"),
        };
    }
    if collapsed.chars().count() <= PREVIEW_CHARS {
        return collapsed;
    }
    let mut cut: String = collapsed.chars().take(PREVIEW_CHARS - 1).collect();
    cut.push('…');
    cut
}

struct Analysis {
    /// The surface the plan is made on (the host's when given, else the planner's own).
    nodes: Vec<u64>,
    /// Whether the planner's own fold produced `nodes` (so the marker can be checked against it).
    own_fold: bool,
    surface_mismatch: Option<SurfaceMismatch>,
    pending: Vec<Pending>,
    candidates: Vec<Candidate>,
}

impl Analysis {
    fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().position(|n| *n == seq)
    }
}

/// Checks that every node of the host's surface is a distinct message event of the log.
fn check_host_surface(log: &SessionLog, nodes: &[u64]) -> Result<(), PlanError> {
    let mut seen = std::collections::HashSet::with_capacity(nodes.len());
    for &seq in nodes {
        let problem = |p: String| PlanError::HostSurface { problem: p };
        let event = log.get(seq).ok_or_else(|| {
            problem(format!(
                "node {seq} is past the end of the log ({} events)",
                log.next_seq()
            ))
        })?;
        if !seen.insert(seq) {
            return Err(problem(format!("node {seq} appears twice")));
        }
        if !is_surface_eligible(&event.kind) {
            return Err(problem(format!(
                "node {seq} is a {} event, not a message",
                event.kind
            )));
        }
    }
    Ok(())
}

fn analyse(log: &SessionLog, host: Option<&[u64]>) -> Result<Analysis, PlanError> {
    let (nodes, own_fold, surface_mismatch) = match host {
        None => (fold_surface(&log.events)?.nodes, true, None),
        Some(host) => {
            check_host_surface(log, host)?;
            let own = fold_surface(&log.events);
            let mismatch = SurfaceMismatch::compare(host, own.as_ref());
            (host.to_vec(), mismatch.is_none(), mismatch)
        }
    };
    let pending = pending_steering(log)?;
    let mut candidates = Vec::new();
    for p in pending.iter().rev().filter(|p| p.message.is_human()) {
        candidates.push(Candidate {
            index: 0,
            seq: p.splice_seq,
            preview: preview(&p.message),
            pending: true,
            message_id: p.message.id.clone(),
            time: p.time.clone(),
        });
    }
    for &seq in nodes.iter().rev() {
        let Some(event) = log.get(seq) else { continue };
        if event.kind != USER_MESSAGE {
            continue;
        }
        let Some(message) = event.user_message().filter(UserMessage::is_human) else {
            continue;
        };
        candidates.push(Candidate {
            index: 0,
            seq,
            preview: preview(&message),
            pending: false,
            message_id: message.id.clone(),
            time: number(&event.time),
        });
    }
    for (i, c) in candidates.iter_mut().enumerate() {
        c.index = u32::try_from(i + 1).unwrap_or(u32::MAX);
    }
    Ok(Analysis {
        nodes,
        own_fold,
        surface_mismatch,
        pending,
        candidates,
    })
}

/// The messages a rewind can target, newest first, numbered from 1: human
/// messages still on the surface and unread steering. Injected context,
/// compaction checkpoints, rewind markers, the system prompt and developer
/// messages, and shadowed messages are left out.
pub fn list_candidates(log: &SessionLog) -> Result<Vec<Candidate>, PlanError> {
    Ok(analyse(log, None)?.candidates)
}

/// [`list_candidates`] on the host's own surface (`host_nodes`: the seqs of DSH's
/// `session.surface.nodes`, in order), which is authoritative; the planner's own fold is a
/// cross-check whose disagreement is returned as data, not refused.
pub fn list_candidates_on(
    log: &SessionLog,
    host_nodes: &[u64],
) -> Result<CandidateList, PlanError> {
    let analysis = analyse(log, Some(host_nodes))?;
    Ok(CandidateList {
        candidates: analysis.candidates,
        surface_mismatch: analysis.surface_mismatch,
    })
}

/// Describes an event for a refusal message.
fn describe(event: &SessionEvent) -> String {
    match event.user_message() {
        Some(m) => match m.source.kind.as_str() {
            "plugin" if m.source.plugin.as_deref() == Some("compact") => {
                "a compaction checkpoint".into()
            }
            // Format 4 renames `{kind:'plugin', plugin:'compact'}` to `compact-checkpoint` and
            // other plugins to `plugin:<name>` (knyazev741/deepseek-harness@8173fb8d
            // `packages/session/session-format-v3-to-v4/src/sources.ts`, `producerKind`).
            "compact-checkpoint" => "a compaction checkpoint".into(),
            "plugin" => format!(
                "context injected by {}",
                m.source.plugin.as_deref().unwrap_or("a plugin")
            ),
            kind if is_marker_kind(kind) => "a rewind marker".into(),
            kind if kind.starts_with("plugin:") => {
                format!("context injected by {}", &kind["plugin:".len()..])
            }
            other => format!("a user/message from \"{other}\""),
        },
        None if event.kind == SYSTEM_MESSAGE => "the system prompt".into(),
        None if event.kind == DEVELOPER_MESSAGE => "a developer message of the host".into(),
        None => format!("an event of type {}", event.kind),
    }
}

/// Plans a rewind of `log` to `target`.
///
/// For a message on the surface, the plan's marker replaces the target and
/// every surface node after it; appending it leaves exactly the surface nodes
/// before the target (plus the marker). For unread steering, nothing on the
/// surface moves: the plan withdraws that message and the steering queued
/// after it.
pub fn plan_rewind(log: &SessionLog, target: Target) -> Result<RewindPlan, PlanError> {
    plan_rewind_with(log, None, target)
}

/// [`plan_rewind`] on the host's own surface (`host_nodes`: the seqs of DSH's
/// `session.surface.nodes`, in order). The host's fold is authoritative: the target must be on
/// it and the marker replaces the host's nodes from the target on. The planner's own fold is a
/// cross-check; a disagreement is recorded in [`RewindPlan::surface_mismatch`], not refused. A
/// host surface the log cannot back is [`PlanError::HostSurface`].
pub fn plan_rewind_on(
    log: &SessionLog,
    host_nodes: &[u64],
    target: Target,
) -> Result<RewindPlan, PlanError> {
    plan_rewind_with(log, Some(host_nodes), target)
}

/// [`plan_rewind`] (`host_nodes: None`) or [`plan_rewind_on`] (`Some`).
pub fn plan_rewind_with(
    log: &SessionLog,
    host_nodes: Option<&[u64]>,
    target: Target,
) -> Result<RewindPlan, PlanError> {
    if log.header.as_ref().is_some_and(|h| h.is_subagent()) {
        return Err(PlanError::SubagentSession);
    }
    let analysis = analyse(log, host_nodes)?;
    let seq = match target {
        Target::Index(index) => {
            if analysis.candidates.is_empty() {
                return Err(PlanError::NoCandidates);
            }
            let i = usize::try_from(index)
                .unwrap_or(usize::MAX)
                .saturating_sub(1);
            match analysis.candidates.get(i) {
                Some(c) if c.pending => {
                    return Ok(plan_pending(&analysis, c.message_id.as_deref(), c.seq));
                }
                Some(c) => c.seq,
                None => {
                    return Err(PlanError::IndexOutOfRange {
                        index,
                        count: analysis.candidates.len(),
                    });
                }
            }
        }
        Target::Seq(seq) => seq,
    };
    let event = log.get(seq).ok_or(PlanError::UnknownSeq {
        seq,
        len: log.next_seq(),
    })?;
    if event.kind == INBOX_SPLICED {
        if let Some(p) = analysis
            .pending
            .iter()
            .find(|p| p.splice_seq == seq && p.message.is_human())
        {
            return Ok(plan_pending(&analysis, p.message.id.as_deref(), seq));
        }
    }
    let message = event
        .user_message()
        .filter(UserMessage::is_human)
        .ok_or_else(|| PlanError::NotHumanMessage {
            seq,
            what: describe(event),
        })?;
    let position = analysis
        .position(seq)
        .ok_or(PlanError::NotOnSurface { seq })?;
    let shadowed = analysis.nodes[position..].to_vec();
    let end = *shadowed.last().unwrap_or(&seq);
    let marker = Marker {
        kind: USER_MESSAGE,
        data: json!({
            "role": "user",
            "content": [{"type": "text", "text": MARKER_TEXT}],
            "source": {"kind": MARKER_SOURCE_KIND},
        }),
        surface_op: SurfaceOp::Replace { start: seq, end },
        source_event_seqs: shadowed.clone(),
    };
    // The marker must pass the same validation the host's Session.append runs. On a host
    // surface the own fold disagrees with, the range is the host's by construction.
    if analysis.own_fold {
        let mut fold = SurfaceFold::default();
        for e in &log.events {
            fold.apply(e, &log.events)?;
        }
        fold.check(&marker.to_event(log.next_seq()), &log.events)?;
    }
    Ok(RewindPlan {
        target_seq: seq,
        marker: Some(marker),
        shadowed_seqs: shadowed,
        withdraw_pending: analysis
            .pending
            .iter()
            .filter_map(|p| p.message.id.clone())
            .collect(),
        target_text: message.text(),
        surface_mismatch: analysis.surface_mismatch,
    })
}

fn plan_pending(analysis: &Analysis, id: Option<&str>, seq: u64) -> RewindPlan {
    let position = analysis
        .pending
        .iter()
        .position(|p| p.message.id.as_deref() == id && p.splice_seq == seq);
    let from = position.unwrap_or(analysis.pending.len());
    RewindPlan {
        target_seq: seq,
        marker: None,
        shadowed_seqs: Vec::new(),
        withdraw_pending: analysis.pending[from..]
            .iter()
            .filter_map(|p| p.message.id.clone())
            .collect(),
        target_text: analysis
            .pending
            .get(from)
            .map(|p| p.message.text())
            .unwrap_or_default(),
        surface_mismatch: analysis.surface_mismatch.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SessionHeader;

    fn msg(seq: u64, kind: &str, text: &str) -> SessionEvent {
        let source = if kind == "user" {
            json!({"kind": "user"})
        } else {
            json!({"kind": kind, "plugin": "p"})
        };
        SessionEvent::new(USER_MESSAGE, seq, &json!({"id": format!("m{seq}"), "role": "user", "content": [{"type": "text", "text": text}], "source": source}))
            .with_surface(SurfaceOp::Append, None)
    }

    fn log(events: Vec<SessionEvent>) -> SessionLog {
        SessionLog::from_events(None, events).expect("contiguous")
    }

    #[test]
    fn candidates_are_human_messages_newest_first() {
        let l = log(vec![
            msg(0, "user", "first"),
            msg(1, "plugin", "context"),
            msg(2, "user", "second"),
        ]);
        let c = list_candidates(&l).expect("candidates");
        assert_eq!(
            c.iter().map(|c| (c.index, c.seq)).collect::<Vec<_>>(),
            vec![(1, 2), (2, 0)]
        );
        assert_eq!(c[0].preview, "second");
        assert_eq!(c[0].message_id.as_deref(), Some("m2"));
    }

    #[test]
    fn previews_are_one_short_line() {
        let long = "word ".repeat(40);
        let m: UserMessage = serde_json::from_value(json!({"content": [{"type": "text", "text": format!("a\n\n  b\t{long}")}], "source": {"kind": "user"}})).expect("message");
        let p = preview(&m);
        assert!(p.starts_with("a b word"));
        assert_eq!(p.chars().count(), PREVIEW_CHARS);
        assert!(p.ends_with('…'));
        let img: UserMessage = serde_json::from_value(
            json!({"content": [{"type": "image"}, {"type": "image"}], "source": {"kind": "user"}}),
        )
        .expect("message");
        assert_eq!(preview(&img), "[2 images]");
    }

    #[test]
    fn plan_shadows_the_target_and_everything_after() {
        let l = log(vec![
            msg(0, "user", "a"),
            msg(1, "user", "b"),
            msg(2, "plugin", "ctx"),
            msg(3, "user", "c"),
        ]);
        let plan = plan_rewind(&l, Target::Seq(1)).expect("plans");
        let marker = plan.marker.as_ref().expect("marker");
        assert_eq!(marker.surface_op, SurfaceOp::Replace { start: 1, end: 3 });
        assert_eq!(marker.source_event_seqs, vec![1, 2, 3]);
        assert_eq!(plan.target_text, "b");
        let v = serde_json::to_value(marker).expect("json");
        assert_eq!(v["type"], "user/message");
        assert_eq!(v["data"]["content"][0]["text"], MARKER_TEXT);
        assert_eq!(v["data"]["source"]["kind"], MARKER_SOURCE_KIND);
        assert!(
            v["data"].get("turn").is_none(),
            "the marker carries no turn number"
        );
        assert_eq!(
            v["surfaceOp"],
            json!({"op": "replace", "start": 1, "end": 3})
        );
    }

    #[test]
    fn refusals_have_their_variants() {
        let l = log(vec![msg(0, "user", "a"), msg(1, "plugin", "ctx")]);
        let err = plan_rewind(&l, Target::Seq(1)).unwrap_err();
        assert!(
            matches!(err, PlanError::NotHumanMessage { seq: 1, .. }),
            "{err:?}"
        );
        let err = plan_rewind(&l, Target::Seq(5)).unwrap_err();
        assert!(
            matches!(err, PlanError::UnknownSeq { seq: 5, len: 2 }),
            "{err:?}"
        );
        let err = plan_rewind(&l, Target::Index(2)).unwrap_err();
        assert!(
            matches!(err, PlanError::IndexOutOfRange { index: 2, count: 1 }),
            "{err:?}"
        );
        let empty = log(vec![msg(0, "plugin", "ctx")]);
        let err = plan_rewind(&empty, Target::Index(1)).unwrap_err();
        assert!(matches!(err, PlanError::NoCandidates), "{err:?}");
        let mut sub = log(vec![msg(0, "user", "a")]);
        sub.header = Some(SessionHeader {
            kind: "session".into(),
            version: 0,
            id: "s".into(),
            created_at: Value::Null,
            cwd: None,
            parent_session: None,
            seed_length: None,
            is_seeded: None,
            inherited_event_count: None,
            origin: Some("subagent".into()),
            delegation_depth: Some(1),
        });
        let err = plan_rewind(&sub, Target::Index(1)).unwrap_err();
        assert!(matches!(err, PlanError::SubagentSession), "{err:?}");
        let bad_inbox = log(vec![
            msg(0, "user", "a"),
            SessionEvent::new(
                INBOX_SPLICED,
                1,
                &json!({"target": "next-step", "start": 3, "inserted": []}),
            ),
        ]);
        let err = plan_rewind(&bad_inbox, Target::Index(1)).unwrap_err();
        assert!(matches!(err, PlanError::BadInbox { seq: 1, .. }), "{err:?}");
    }

    #[test]
    fn markers_of_both_kinds_and_format_4_sources_are_described() {
        let with_source = |seq: u64, source: Value| {
            SessionEvent::new(USER_MESSAGE, seq, &json!({"id": format!("m{seq}"), "role": "user", "content": [{"type": "text", "text": "x"}], "source": source}))
                .with_surface(SurfaceOp::Append, None)
        };
        let l = log(vec![
            msg(0, "user", "a"),
            with_source(1, json!({"kind": MARKER_SOURCE_KIND})),
            with_source(2, json!({"kind": LEGACY_MARKER_SOURCE_KIND})),
            with_source(
                3,
                json!({"kind": "compact-checkpoint", "compactionId": "c"}),
            ),
            with_source(4, json!({"kind": "plugin:file-watch"})),
            with_source(5, json!({"kind": "agent-instructions"})),
        ]);
        let what = |seq| match plan_rewind(&l, Target::Seq(seq)).unwrap_err() {
            PlanError::NotHumanMessage { what, .. } => what,
            other => panic!("{other:?}"),
        };
        assert_eq!(what(1), "a rewind marker");
        assert_eq!(what(2), "a rewind marker");
        assert_eq!(what(3), "a compaction checkpoint");
        assert_eq!(what(4), "context injected by file-watch");
        assert_eq!(what(5), "a user/message from \"agent-instructions\"");
        assert!(is_marker_kind("dsh-rewind") && is_marker_kind("dsh-prompt-rewind"));
        assert!(!is_marker_kind("user"));
    }
}
