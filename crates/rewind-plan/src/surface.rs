//! The model-visible surface: DSH's `foldSurface`, with the same validation.
//!
//! Only the message-producing types join the surface (`user/message`,
//! `assistant/message`, `tool/result`; `system/message` from session format 3;
//! `developer/message` in 0.2.x), and each of them must say how: `"append"`
//! pushes its seq; a replace (`{op:'replace', start, end}` up to format 2,
//! `{op:'replace', startSeq, endSeq}` from format 3) splices the surface from
//! the position of its start through the position of its end (inclusive) and
//! puts its own seq in their place. A replacement must cite every node it
//! shadows in `sourceEventSeqs`; one that covers a `system/message` at node 0
//! must itself be a `system/message` over exactly that node.
//!
//! Where releases differ, the fold takes the more permissive rule, so that
//! every format folds as its own release folds it: an `assistant/message` may
//! cite sources (required in format 0, refused from format 2 on), and an
//! unknown event type marked `ignorable` may carry surface metadata that is
//! then ignored (format 2 on).

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use crate::event::{
    ASSISTANT_MESSAGE, SYSTEM_MESSAGE, SessionEvent, SourceSeqs, SurfaceOp, TOOL_RESULT,
    is_known_type, is_surface_eligible,
};

/// One replacement seen while folding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replacement {
    /// Seq of the replacing event.
    pub seq: u64,
    /// Declared first replaced node.
    pub start: u64,
    /// Declared last replaced node.
    pub end: u64,
    /// The surface nodes actually removed, in surface order.
    pub shadowed_seqs: Vec<u64>,
}

/// The folded surface of a log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Surface {
    /// Current surface seqs in model-visible order.
    pub nodes: Vec<u64>,
    /// Every replacement, in log order.
    pub replacements: Vec<Replacement>,
}

impl Surface {
    /// Position of `seq` on the surface.
    pub fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().position(|n| *n == seq)
    }
}

/// A surface rule the log breaks. Messages follow DSH's wording.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SurfaceError {
    /// An event's seq is not its position.
    #[error("session event seq {found} is not contiguous; expected {expected}")]
    NotContiguous {
        /// Expected seq.
        expected: u64,
        /// Seq found.
        found: u64,
    },
    /// A type that may not carry `surfaceOp` carries one.
    #[error(
        "session event \"{kind}\" (seq {seq}) is not surface-eligible and cannot carry surfaceOp"
    )]
    IneligibleSurfaceOp {
        /// Event type.
        kind: String,
        /// Event seq.
        seq: u64,
    },
    /// A type that may not carry `sourceEventSeqs` carries them.
    #[error(
        "session event \"{kind}\" (seq {seq}) is not surface-eligible and cannot carry sourceEventSeqs"
    )]
    IneligibleSources {
        /// Event type.
        kind: String,
        /// Event seq.
        seq: u64,
    },
    /// A surface-eligible event has no `surfaceOp`.
    #[error(
        "session event \"{kind}\" (seq {seq}) is surface-eligible and requires a surfaceOp marker"
    )]
    MissingSurfaceOp {
        /// Event type.
        kind: String,
        /// Event seq.
        seq: u64,
    },
    /// The surface op is not `"append"` nor an exact replace object.
    #[error("session event \"{kind}\" (seq {seq}) carries an invalid replace surfaceOp: {value}")]
    InvalidSurfaceOp {
        /// Event type.
        kind: String,
        /// Event seq.
        seq: u64,
        /// The value found.
        value: String,
    },
    /// `sourceEventSeqs` is malformed (not an array, empty, duplicates, not earlier).
    #[error("sourceEventSeqs on event at seq {seq}: {problem}")]
    BadSources {
        /// Event seq.
        seq: u64,
        /// What is wrong.
        problem: String,
    },
    /// The replace start is not on the surface.
    #[error("surface replace: start seq {start} not found in surface")]
    StartNotOnSurface {
        /// Replacing event.
        seq: u64,
        /// Declared start.
        start: u64,
    },
    /// The replace end is not on the surface.
    #[error("surface replace: end seq {end} not found in surface")]
    EndNotOnSurface {
        /// Replacing event.
        seq: u64,
        /// Declared end.
        end: u64,
    },
    /// The start comes after the end on the surface.
    #[error(
        "surface replace: start seq {start} (index {start_index}) is after end seq {end} (index {end_index})"
    )]
    StartAfterEnd {
        /// Declared start.
        start: u64,
        /// Its surface index.
        start_index: usize,
        /// Declared end.
        end: u64,
        /// Its surface index.
        end_index: usize,
    },
    /// A shadowed node is not cited.
    #[error(
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing {missing:?}"
    )]
    MissingShadowed {
        /// Replacing event.
        seq: u64,
        /// Shadowed nodes not cited.
        missing: Vec<u64>,
    },
    /// A tool-result replacement breaks the rewrite rule.
    #[error("tool/result surface replacement (seq {seq}): {problem}")]
    BadToolResultRewrite {
        /// Replacing event.
        seq: u64,
        /// What is wrong.
        problem: String,
    },
    /// A replacement covers the system prompt at node 0 without being a `system/message` over
    /// exactly that node (format 3 on: knyazev741/deepseek-harness@1376315f
    /// `packages/core/session/src/surface.ts`, `assertSystemHeadRewrite`).
    #[error(
        "surface replace (seq {seq}): node 0 holds the system prompt and may be rewritten only by a system/message over exactly that node"
    )]
    SystemHeadRewrite {
        /// Replacing event.
        seq: u64,
    },
}

/// Folds a complete log (events in seq order from 0) into its surface.
pub fn fold_surface(events: &[SessionEvent]) -> Result<Surface, SurfaceError> {
    let mut fold = SurfaceFold::default();
    for event in events {
        fold.apply(event, events)?;
    }
    Ok(fold.finish())
}

/// An incremental fold: feed events in order; check a candidate without applying it.
#[derive(Debug, Clone, Default)]
pub struct SurfaceFold {
    surface: Surface,
    next_seq: u64,
}

/// What one event does to the surface, once validated.
enum Step {
    None,
    Append(u64),
    Replace {
        start_index: usize,
        end_index: usize,
        replacement: Replacement,
    },
}

impl SurfaceFold {
    /// The current surface nodes.
    pub fn nodes(&self) -> &[u64] {
        &self.surface.nodes
    }

    /// Validates `event` as the next event of `log` (the events folded so far)
    /// without changing the fold.
    pub fn check(&self, event: &SessionEvent, log: &[SessionEvent]) -> Result<(), SurfaceError> {
        self.plan(event, log).map(|_| ())
    }

    /// Validates and applies the next event; returns the replacement it made, if any.
    pub fn apply(
        &mut self,
        event: &SessionEvent,
        log: &[SessionEvent],
    ) -> Result<Option<Replacement>, SurfaceError> {
        let step = self.plan(event, log)?;
        self.next_seq += 1;
        Ok(match step {
            Step::None => None,
            Step::Append(seq) => {
                self.surface.nodes.push(seq);
                None
            }
            Step::Replace {
                start_index,
                end_index,
                replacement,
            } => {
                self.surface
                    .nodes
                    .splice(start_index..=end_index, [replacement.seq]);
                self.surface.replacements.push(replacement.clone());
                Some(replacement)
            }
        })
    }

    /// The folded surface.
    pub fn finish(self) -> Surface {
        self.surface
    }

    fn plan(&self, event: &SessionEvent, log: &[SessionEvent]) -> Result<Step, SurfaceError> {
        if event.seq != self.next_seq {
            return Err(SurfaceError::NotContiguous {
                expected: self.next_seq,
                found: event.seq,
            });
        }
        let kind = || event.kind.clone();
        if !is_surface_eligible(&event.kind) {
            // Unknown ignorable records keep opaque metadata without affecting the surface
            // (knyazev741/deepseek-harness@1376315f `packages/core/session/src/surface.ts`,
            // `surfaceOpOf`).
            if event.ignorable == Some(true) && !is_known_type(&event.kind) {
                return Ok(Step::None);
            }
            if event.surface_op.is_some() {
                return Err(SurfaceError::IneligibleSurfaceOp {
                    kind: kind(),
                    seq: event.seq,
                });
            }
            if event.source_event_seqs.is_some() {
                return Err(SurfaceError::IneligibleSources {
                    kind: kind(),
                    seq: event.seq,
                });
            }
            return Ok(Step::None);
        }
        match &event.surface_op {
            None => Err(SurfaceError::MissingSurfaceOp {
                kind: kind(),
                seq: event.seq,
            }),
            Some(SurfaceOp::Invalid(v)) => Err(SurfaceError::InvalidSurfaceOp {
                kind: kind(),
                seq: event.seq,
                value: v.to_string(),
            }),
            Some(SurfaceOp::Append) => {
                check_sources(event, &[])?;
                Ok(Step::Append(event.seq))
            }
            Some(SurfaceOp::Replace { start, end }) => {
                let nodes = &self.surface.nodes;
                let start_index = nodes.iter().position(|n| n == start).ok_or(
                    SurfaceError::StartNotOnSurface {
                        seq: event.seq,
                        start: *start,
                    },
                )?;
                let end_index =
                    nodes
                        .iter()
                        .position(|n| n == end)
                        .ok_or(SurfaceError::EndNotOnSurface {
                            seq: event.seq,
                            end: *end,
                        })?;
                if start_index > end_index {
                    return Err(SurfaceError::StartAfterEnd {
                        start: *start,
                        start_index,
                        end: *end,
                        end_index,
                    });
                }
                let shadowed = nodes[start_index..=end_index].to_vec();
                check_sources(event, &shadowed)?;
                check_tool_result_rewrite(event, &shadowed, log)?;
                check_system_head(event, start_index, nodes, &shadowed, log)?;
                Ok(Step::Replace {
                    start_index,
                    end_index,
                    replacement: Replacement {
                        seq: event.seq,
                        start: *start,
                        end: *end,
                        shadowed_seqs: shadowed,
                    },
                })
            }
        }
    }
}

fn check_sources(event: &SessionEvent, shadowed: &[u64]) -> Result<(), SurfaceError> {
    let bad = |problem: &str| SurfaceError::BadSources {
        seq: event.seq,
        problem: problem.to_string(),
    };
    let sources: &[u64] = match &event.source_event_seqs {
        None => &[],
        Some(SourceSeqs::Invalid(Value::Array(_))) => {
            return Err(bad("must densely contain non-negative safe integers"));
        }
        Some(SourceSeqs::Invalid(_)) => return Err(bad("must be an array when present")),
        Some(SourceSeqs::List(list)) => {
            if list.is_empty() && event.kind != ASSISTANT_MESSAGE {
                return Err(bad("must not be empty except on assistant/message"));
            }
            list
        }
    };
    let set: HashSet<u64> = sources.iter().copied().collect();
    if set.len() != sources.len() {
        return Err(bad("must not contain duplicates"));
    }
    if let Some(late) = sources.iter().find(|s| **s >= event.seq) {
        return Err(bad(&format!(
            "must reference earlier events: {late} >= current seq {}",
            event.seq
        )));
    }
    let missing: Vec<u64> = shadowed
        .iter()
        .copied()
        .filter(|s| !set.contains(s))
        .collect();
    if !missing.is_empty() {
        return Err(SurfaceError::MissingShadowed {
            seq: event.seq,
            missing,
        });
    }
    Ok(())
}

/// A replacement starting at node 0 while node 0 is a `system/message` must be a
/// `system/message` over exactly that node (knyazev741/deepseek-harness@1376315f
/// `packages/core/session/src/surface.ts`, `assertSystemHeadRewrite`). Older formats never hold a
/// `system/message`, so the rule never fires there.
fn check_system_head(
    event: &SessionEvent,
    start_index: usize,
    nodes: &[u64],
    shadowed: &[u64],
    log: &[SessionEvent],
) -> Result<(), SurfaceError> {
    if start_index != 0 {
        return Ok(());
    }
    let head = nodes
        .first()
        .and_then(|s| usize::try_from(*s).ok())
        .and_then(|i| log.get(i));
    if head.is_none_or(|h| h.kind != SYSTEM_MESSAGE) {
        return Ok(());
    }
    if event.kind != SYSTEM_MESSAGE || shadowed.len() != 1 {
        return Err(SurfaceError::SystemHeadRewrite { seq: event.seq });
    }
    Ok(())
}

/// A `tool/result` replacement may rewrite exactly one current tool result, and only its content.
///
/// DSH compares the two events with `message.content` cut to its first block and that block's
/// own `content` nulled (rc.8 `assertToolResultRewrite`; unchanged for the tool-role messages of
/// format 4, knyazev741/deepseek-harness@1376315f `packages/core/session/src/surface.ts`): the
/// rule reads the shape, not the role, so the same comparison serves both.
fn check_tool_result_rewrite(
    event: &SessionEvent,
    shadowed: &[u64],
    log: &[SessionEvent],
) -> Result<(), SurfaceError> {
    if event.kind != TOOL_RESULT {
        return Ok(());
    }
    let bad = |problem: &str| SurfaceError::BadToolResultRewrite {
        seq: event.seq,
        problem: problem.to_string(),
    };
    let [original_seq] = shadowed else {
        return Err(bad("must rewrite exactly one current node"));
    };
    let original = usize::try_from(*original_seq).ok().and_then(|i| log.get(i));
    let Some(original) = original.filter(|o| o.kind == TOOL_RESULT) else {
        return Err(bad("must target a current tool/result"));
    };
    let strip = |e: &SessionEvent| -> Option<Value> {
        let mut data = e.data_value().ok()?;
        let message = data.get_mut("message")?.as_object_mut()?;
        // `{...content[0], content: null}`: an absent or non-object first block spreads to nothing.
        let mut first = match message.get("content").and_then(|c| c.get(0)) {
            Some(Value::Object(block)) => block.clone(),
            _ => serde_json::Map::new(),
        };
        first.insert("content".into(), Value::Null);
        message.insert("content".into(), Value::Array(vec![Value::Object(first)]));
        Some(data)
    };
    match (strip(original), strip(event)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => Err(bad("may change only content")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(seq: u64, op: SurfaceOp, sources: Option<Vec<u64>>) -> SessionEvent {
        SessionEvent::new(
            "user/message",
            seq,
            &json!({"content": [], "source": {"kind": "user"}}),
        )
        .with_surface(op, sources)
    }
    fn plain(seq: u64) -> SessionEvent {
        SessionEvent::new("turn/start", seq, &json!({"turn": 1}))
    }
    fn replace(start: u64, end: u64) -> SurfaceOp {
        SurfaceOp::Replace { start, end }
    }

    #[test]
    fn append_and_replace_splice_by_surface_position() {
        let events = vec![
            plain(0),
            user(1, SurfaceOp::Append, None),
            user(2, SurfaceOp::Append, None),
            user(3, SurfaceOp::Append, None),
            user(4, replace(2, 3), Some(vec![2, 3])),
            user(5, SurfaceOp::Append, None),
            user(6, replace(4, 5), Some(vec![4, 5, 0])),
        ];
        let s = fold_surface(&events).expect("folds");
        assert_eq!(s.nodes, vec![1, 6]);
        assert_eq!(s.replacements.len(), 2);
        assert_eq!(s.replacements[1].shadowed_seqs, vec![4, 5]);
    }

    #[test]
    fn every_validation_rule_refuses() {
        let base = vec![
            plain(0),
            user(1, SurfaceOp::Append, None),
            user(2, SurfaceOp::Append, None),
        ];
        let with = |e: SessionEvent| {
            let mut v = base.clone();
            v.push(e);
            fold_surface(&v).unwrap_err()
        };
        assert!(matches!(
            with(user(3, replace(9, 2), Some(vec![2]))),
            SurfaceError::StartNotOnSurface { .. }
        ));
        assert!(matches!(
            with(user(3, replace(1, 9), Some(vec![1]))),
            SurfaceError::EndNotOnSurface { .. }
        ));
        assert!(matches!(
            with(user(3, replace(2, 1), Some(vec![1, 2]))),
            SurfaceError::StartAfterEnd { .. }
        ));
        assert_eq!(
            with(user(3, replace(1, 2), Some(vec![1]))),
            SurfaceError::MissingShadowed {
                seq: 3,
                missing: vec![2]
            }
        );
        assert!(matches!(
            with(user(3, replace(1, 2), Some(vec![1, 2, 2]))),
            SurfaceError::BadSources { .. }
        ));
        assert!(matches!(
            with(user(3, replace(1, 2), Some(vec![1, 2, 3]))),
            SurfaceError::BadSources { .. }
        ));
        assert!(matches!(
            with(user(3, SurfaceOp::Append, Some(vec![]))),
            SurfaceError::BadSources { .. }
        ));
        let mut no_op = user(3, SurfaceOp::Append, None);
        no_op.surface_op = None;
        assert!(matches!(with(no_op), SurfaceError::MissingSurfaceOp { .. }));
        let mut ineligible = plain(3);
        ineligible.surface_op = Some(SurfaceOp::Append);
        assert!(matches!(
            with(ineligible),
            SurfaceError::IneligibleSurfaceOp { .. }
        ));
        let mut ineligible = plain(3);
        ineligible.source_event_seqs = Some(SourceSeqs::List(vec![1]));
        assert!(matches!(
            with(ineligible),
            SurfaceError::IneligibleSources { .. }
        ));
        assert!(matches!(
            with(plain(7)),
            SurfaceError::NotContiguous {
                expected: 3,
                found: 7
            }
        ));
    }

    #[test]
    fn invalid_shapes_from_json_are_refused() {
        for raw in [
            r#"{"op":"replace","start":1,"endSeq":2}"#,
            r#"{"op":"replace","startSeq":1,"end":2}"#,
            r#"{"op":"replace","startSeq":1,"endSeq":2,"extra":0}"#,
            r#"{"op":"replace","start":1,"end":2,"extra":0}"#,
            r#"{"op":"replace","start":-1,"end":2}"#,
            r#"{"op":"replace","start":1.5,"end":2}"#,
            r#"{"op":"replace","start":9007199254740992,"end":2}"#,
            r#""prepend""#,
            "null",
        ] {
            let line = format!(
                r#"{{"type":"user/message","seq":1,"time":0,"data":{{"content":[],"source":{{"kind":"user"}}}},"surfaceOp":{raw},"sourceEventSeqs":[0]}}"#
            );
            let event: SessionEvent = serde_json::from_str(&line).expect("parses");
            let err = fold_surface(&[plain(0), event]).unwrap_err();
            assert!(
                matches!(err, SurfaceError::InvalidSurfaceOp { .. }),
                "{raw}: {err}"
            );
        }
        let line = r#"{"type":"user/message","seq":1,"time":0,"data":{},"surfaceOp":"append","sourceEventSeqs":[0.5]}"#;
        let event: SessionEvent = serde_json::from_str(line).expect("parses");
        assert!(matches!(
            fold_surface(&[plain(0), event]).unwrap_err(),
            SurfaceError::BadSources { .. }
        ));
        let line = r#"{"type":"user/message","seq":1,"time":0,"data":{},"surfaceOp":"append","sourceEventSeqs":3}"#;
        let event: SessionEvent = serde_json::from_str(line).expect("parses");
        assert!(matches!(
            fold_surface(&[plain(0), event]).unwrap_err(),
            SurfaceError::BadSources { .. }
        ));
    }

    #[test]
    fn assistant_message_may_cite_nothing() {
        let mut a = SessionEvent::new("assistant/message", 1, &json!({"message": {"content": []}}));
        a = a.with_surface(SurfaceOp::Append, Some(vec![]));
        assert_eq!(fold_surface(&[plain(0), a]).expect("folds").nodes, vec![1]);
    }

    #[test]
    fn tool_result_rewrite_rule() {
        let tr = |seq: u64, text: &str, id: &str| {
            SessionEvent::new(
                "tool/result",
                seq,
                &json!({"turn": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": id, "content": [{"type": "text", "text": text}]}]}}),
            )
        };
        let base = vec![
            plain(0),
            tr(1, "a", "c1").with_surface(SurfaceOp::Append, Some(vec![0])),
        ];
        let ok = tr(2, "shorter", "c1").with_surface(replace(1, 1), Some(vec![1]));
        let mut events = base.clone();
        events.push(ok);
        assert_eq!(fold_surface(&events).expect("folds").nodes, vec![2]);
        let other_id = tr(2, "x", "c2").with_surface(replace(1, 1), Some(vec![1]));
        let mut events = base.clone();
        events.push(other_id);
        assert!(matches!(
            fold_surface(&events).unwrap_err(),
            SurfaceError::BadToolResultRewrite { .. }
        ));
        let mut events = vec![plain(0), user(1, SurfaceOp::Append, None)];
        events.push(tr(2, "x", "c1").with_surface(replace(1, 1), Some(vec![1])));
        assert!(matches!(
            fold_surface(&events).unwrap_err(),
            SurfaceError::BadToolResultRewrite { .. }
        ));
    }

    #[test]
    fn check_does_not_mutate() {
        let events = vec![user(0, SurfaceOp::Append, None)];
        let mut fold = SurfaceFold::default();
        fold.apply(&events[0], &events).expect("applies");
        let next = user(1, replace(0, 0), Some(vec![0]));
        fold.check(&next, &events).expect("valid");
        assert_eq!(fold.nodes(), &[0]);
    }

    #[test]
    fn both_replace_spellings_parse_to_the_same_op() {
        for raw in [
            r#"{"op":"replace","start":1,"end":2}"#,
            r#"{"op":"replace","startSeq":1,"endSeq":2}"#,
            r#"{"endSeq":2,"op":"replace","startSeq":1}"#,
        ] {
            let op: SurfaceOp = serde_json::from_str(raw).expect("parses");
            assert_eq!(op, replace(1, 2), "{raw}");
        }
    }

    #[test]
    fn system_head_is_rewritten_only_by_a_system_message_over_it() {
        let system = |seq: u64, op: SurfaceOp, sources: Option<Vec<u64>>| {
            SessionEvent::new(
                "system/message",
                seq,
                &json!({"turn": 1, "step": 1, "message": {"id": "s", "role": "system", "content": [], "source": {"kind": "system-prompt"}}}),
            )
            .with_surface(op, sources)
        };
        let base = vec![
            system(0, SurfaceOp::Append, None),
            user(1, SurfaceOp::Append, None),
            user(2, SurfaceOp::Append, None),
        ];
        let with = |e: SessionEvent| {
            let mut v = base.clone();
            v.push(e);
            fold_surface(&v)
        };
        // A user/message over node 0 (even alone) is refused; one starting after it is fine.
        assert_eq!(
            with(user(3, replace(0, 2), Some(vec![0, 1, 2]))).unwrap_err(),
            SurfaceError::SystemHeadRewrite { seq: 3 }
        );
        assert!(matches!(
            with(user(3, replace(0, 0), Some(vec![0]))).unwrap_err(),
            SurfaceError::SystemHeadRewrite { .. }
        ));
        assert!(matches!(
            with(system(3, replace(0, 1), Some(vec![0, 1]))).unwrap_err(),
            SurfaceError::SystemHeadRewrite { .. }
        ));
        assert_eq!(
            with(user(3, replace(1, 2), Some(vec![1, 2])))
                .expect("folds")
                .nodes,
            vec![0, 3]
        );
        assert_eq!(
            with(system(3, replace(0, 0), Some(vec![0])))
                .expect("folds")
                .nodes,
            vec![3, 1, 2]
        );
        // Without a system prompt at node 0 the rule does not apply (formats 0 to 2).
        let old = vec![
            user(0, SurfaceOp::Append, None),
            user(1, replace(0, 0), Some(vec![0])),
        ];
        assert_eq!(fold_surface(&old).expect("folds").nodes, vec![1]);
    }

    #[test]
    fn developer_and_system_messages_are_surface_nodes() {
        let events = vec![
            SessionEvent::new("system/message", 0, &json!({}))
                .with_surface(SurfaceOp::Append, None),
            user(1, SurfaceOp::Append, None),
            SessionEvent::new("developer/message", 2, &json!({}))
                .with_surface(SurfaceOp::Append, None),
            SessionEvent::new(
                "assistant/attempt",
                3,
                &json!({"turn": 1, "step": 1, "stream": []}),
            ),
        ];
        assert_eq!(fold_surface(&events).expect("folds").nodes, vec![0, 1, 2]);
    }

    #[test]
    fn unknown_ignorable_events_keep_their_metadata_unread() {
        let mut unknown = SessionEvent::new("plugin:x/record", 1, &json!({}));
        unknown.ignorable = Some(true);
        unknown.surface_op = Some(replace(7, 9));
        unknown.source_event_seqs = Some(SourceSeqs::List(vec![0]));
        let events = vec![user(0, SurfaceOp::Append, None), unknown.clone()];
        assert_eq!(fold_surface(&events).expect("folds").nodes, vec![0]);
        // Not ignorable, or a known type: the metadata is refused as before.
        let mut required = unknown.clone();
        required.ignorable = None;
        assert!(matches!(
            fold_surface(&[user(0, SurfaceOp::Append, None), required]).unwrap_err(),
            SurfaceError::IneligibleSurfaceOp { .. }
        ));
        let mut known = unknown;
        known.kind = "turn/start".into();
        assert!(matches!(
            fold_surface(&[user(0, SurfaceOp::Append, None), known]).unwrap_err(),
            SurfaceError::IneligibleSurfaceOp { .. }
        ));
    }

    #[test]
    fn tool_role_results_follow_the_same_rewrite_rule() {
        // Format 4: the result is the tool-role message itself (no tool-result wrapper).
        let tr = |seq: u64, blocks: serde_json::Value, id: &str| {
            SessionEvent::new(
                "tool/result",
                seq,
                &json!({"turn": 1, "step": 1, "message": {"id": "r", "role": "tool", "source": {"kind": "tool", "callId": id}, "toolCallId": id, "content": blocks, "isError": false}}),
            )
        };
        let first = json!([{"type": "text", "text": "a"}]);
        let base = vec![
            plain(0),
            tr(1, first.clone(), "c1").with_surface(SurfaceOp::Append, Some(vec![0])),
        ];
        let fold_with = |e: SessionEvent| {
            let mut v = base.clone();
            v.push(e);
            fold_surface(&v)
        };
        // Later blocks may change (DSH compares only the first block, its `content` nulled).
        let more = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "more"}]);
        assert_eq!(
            fold_with(tr(2, more, "c1").with_surface(replace(1, 1), Some(vec![1])))
                .expect("folds")
                .nodes,
            vec![2]
        );
        for (blocks, id) in [
            (json!([{"type": "text", "text": "changed"}]), "c1"),
            (first, "c2"),
            (json!([]), "c1"),
        ] {
            assert!(
                matches!(
                    fold_with(tr(2, blocks.clone(), id).with_surface(replace(1, 1), Some(vec![1])))
                        .unwrap_err(),
                    SurfaceError::BadToolResultRewrite { .. }
                ),
                "{blocks} {id}"
            );
        }
    }
}
