//! Reading a DSH session log: the JSONL file (header line + one event per line)
//! or a JSON array of events as a host hands it over.
//!
//! The zstd-compressed form (`session.jsonl.zstd`) is decompressed by the caller
//! (the host plugin reads the live log from memory; offline tools decompress
//! first): this crate does no I/O.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use thiserror::Error;

use crate::event::{MAX_SAFE_INTEGER, SessionEvent, SessionHeader};

/// The header version this build understands.
pub const KNOWN_HEADER_VERSION: u64 = 0;

/// A session log: its header (when read from a file) and its events in seq order.
#[derive(Debug, Clone, Default)]
pub struct SessionLog {
    /// The JSONL header line, if the input had one.
    pub header: Option<SessionHeader>,
    /// Events, `events[i].seq == i`.
    pub events: Vec<SessionEvent>,
}

/// Why a log could not be read.
#[derive(Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum ReadError {
    /// A line is not JSON, or not an event.
    #[error("session log line {line}: {message}")]
    BadLine {
        /// 1-based line number (array index + 1 for a JSON array).
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// The header names a format newer than this build knows.
    #[error("session log header version {found} is newer than this build understands ({known})")]
    NewerHeader {
        /// Version found.
        found: u64,
        /// Version known.
        known: u64,
    },
    /// An event's seq is not its position in the log.
    #[error("session event seq {found} is not contiguous; expected {expected}")]
    NotContiguous {
        /// Seq expected at that position.
        expected: u64,
        /// Seq found.
        found: u64,
    },
}

/// The storage rows DSH uses to pack runs of `assistant/chunk` deltas.
const CHUNK_ROWS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a str>,
    seq: Option<Value>,
}

impl SessionLog {
    /// Reads DSH's JSONL session format: an optional header line
    /// (`{"type":"session","version":0,…}`), then one event per line. Packed
    /// chunk rows are expanded into the `assistant/chunk` events they stand
    /// for. Blank lines are skipped.
    pub fn from_jsonl(text: &str) -> Result<Self, ReadError> {
        let mut log = SessionLog::default();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let probe: Probe<'_> =
                serde_json::from_str(line).map_err(|e| bad(line_no, &e.to_string()))?;
            match probe.kind {
                Some("session") if probe.seq.is_none() => {
                    if log.header.is_some() || !log.events.is_empty() {
                        return Err(bad(line_no, "a header line may only come first"));
                    }
                    let header: SessionHeader =
                        serde_json::from_str(line).map_err(|e| bad(line_no, &e.to_string()))?;
                    if header.version > KNOWN_HEADER_VERSION {
                        return Err(ReadError::NewerHeader {
                            found: header.version,
                            known: KNOWN_HEADER_VERSION,
                        });
                    }
                    log.header = Some(header);
                }
                Some(kind) if CHUNK_ROWS.contains(&kind) => {
                    let row: Value =
                        serde_json::from_str(line).map_err(|e| bad(line_no, &e.to_string()))?;
                    expand_chunk_row(kind, &row, line_no, &mut log.events)?;
                }
                _ => {
                    let event: SessionEvent =
                        serde_json::from_str(line).map_err(|e| bad(line_no, &e.to_string()))?;
                    log.push(event)?;
                }
            }
        }
        Ok(log)
    }

    /// Reads a JSON array of events (the shape of `session.events` in the host).
    pub fn from_events_json(text: &str) -> Result<Self, ReadError> {
        let raw: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| bad(0, &e.to_string()))?;
        let mut log = SessionLog {
            header: None,
            events: Vec::with_capacity(raw.len()),
        };
        for (i, item) in raw.into_iter().enumerate() {
            let event: SessionEvent =
                serde_json::from_str(item.get()).map_err(|e| bad(i + 1, &e.to_string()))?;
            log.push(event)?;
        }
        Ok(log)
    }

    /// Reads either form: a JSON array when the text starts with `[`, JSONL otherwise.
    pub fn parse(text: &str) -> Result<Self, ReadError> {
        if text.trim_start().starts_with('[') {
            Self::from_events_json(text)
        } else {
            Self::from_jsonl(text)
        }
    }

    /// Builds a log from events already in memory, checking seq contiguity.
    pub fn from_events(
        header: Option<SessionHeader>,
        events: Vec<SessionEvent>,
    ) -> Result<Self, ReadError> {
        let mut log = SessionLog {
            header,
            events: Vec::with_capacity(events.len()),
        };
        for e in events {
            log.push(e)?;
        }
        Ok(log)
    }

    /// Appends one event, checking that its seq is the next position.
    pub fn push(&mut self, event: SessionEvent) -> Result<(), ReadError> {
        let expected = self.events.len() as u64;
        if event.seq != expected {
            return Err(ReadError::NotContiguous {
                expected,
                found: event.seq,
            });
        }
        self.events.push(event);
        Ok(())
    }

    /// The event at `seq`, if any.
    pub fn get(&self, seq: u64) -> Option<&SessionEvent> {
        usize::try_from(seq).ok().and_then(|i| self.events.get(i))
    }

    /// The seq the next appended event will get.
    pub fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }
}

fn bad(line: usize, message: &str) -> ReadError {
    ReadError::BadLine {
        line,
        message: message.to_string(),
    }
}

/// Expands a packed chunk row back into its `assistant/chunk` events.
fn expand_chunk_row(
    kind: &str,
    row: &Value,
    line: usize,
    out: &mut Vec<SessionEvent>,
) -> Result<(), ReadError> {
    let int = |v: Option<&Value>, what: &str| -> Result<i64, ReadError> {
        v.and_then(Value::as_i64)
            .filter(|n| n.unsigned_abs() <= MAX_SAFE_INTEGER)
            .ok_or_else(|| {
                bad(
                    line,
                    &format!("malformed {kind} row: {what} must be a safe integer"),
                )
            })
    };
    let seq0 = int(row.get("seq0"), "seq0")?;
    let mut time = int(row.get("time0"), "time0")?;
    let data = row
        .get("data")
        .ok_or_else(|| bad(line, &format!("malformed {kind} row: no data")))?;
    let turn = data.get("turn").cloned().unwrap_or(Value::Null);
    let step = data.get("step").cloned().unwrap_or(Value::Null);
    let index = data.get("index").cloned().unwrap_or(Value::Null);
    let members_key = if kind == "tool-call-chunks" {
        "args"
    } else {
        "texts"
    };
    let members = data
        .get(members_key)
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            bad(
                line,
                &format!("malformed {kind} row: {members_key} must be a non-empty array"),
            )
        })?;
    let dt = data
        .get("dt")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if dt.len() + 1 != members.len() || seq0 < 0 {
        return Err(bad(
            line,
            &format!("malformed {kind} row: dt must have one entry fewer than its members"),
        ));
    }
    for (k, member) in members.iter().enumerate() {
        if k > 0 {
            time += int(dt.get(k - 1), "dt")?;
        }
        let chunk = match kind {
            "tool-call-chunks" => {
                let mut c = serde_json::json!({"type": "tool-call-delta", "index": index, "id": data.get("id")});
                if let Some(name) = data.get("name") {
                    c["name"] = name.clone();
                }
                c["argumentsDelta"] = member.clone();
                c
            }
            "reasoning-chunks" => {
                serde_json::json!({"type": "reasoning-delta", "index": index, "text": member})
            }
            _ => serde_json::json!({"type": "text-delta", "index": index, "text": member}),
        };
        let payload = serde_json::json!({"turn": turn, "step": step, "chunk": chunk});
        let mut event = SessionEvent::new("assistant/chunk", seq0 as u64 + k as u64, &payload);
        event.time = Value::from(time);
        let expected = out.len() as u64;
        if event.seq != expected {
            return Err(ReadError::NotContiguous {
                expected,
                found: event.seq,
            });
        }
        out.push(event);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_header_and_events_and_skips_blank_lines() {
        let text = "{\"type\":\"session\",\"version\":0,\"id\":\"s1\",\"createdAt\":1,\"cwd\":\"/w\"}\n\n\
            {\"type\":\"turn/start\",\"seq\":0,\"time\":5,\"data\":{\"turn\":1}}\n\
            {\"type\":\"probe/custom\",\"seq\":1,\"time\":6,\"data\":{\"x\":[1,2]},\"ignorable\":true}\n";
        let log = SessionLog::from_jsonl(text).expect("reads");
        assert_eq!(log.header.as_ref().map(|h| h.id.as_str()), Some("s1"));
        assert_eq!(log.events.len(), 2);
        assert_eq!(log.events[1].kind, "probe/custom");
        assert_eq!(log.events[1].data.get(), "{\"x\":[1,2]}");
        assert_eq!(log.events[1].ignorable, Some(true));
    }

    #[test]
    fn refuses_newer_header_bad_json_and_gaps() {
        let newer = "{\"type\":\"session\",\"version\":1,\"id\":\"s\"}\n";
        assert_eq!(
            SessionLog::from_jsonl(newer).unwrap_err(),
            ReadError::NewerHeader { found: 1, known: 0 }
        );
        let garbage = "{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{}}\nnot json\n";
        assert!(matches!(
            SessionLog::from_jsonl(garbage).unwrap_err(),
            ReadError::BadLine { line: 2, .. }
        ));
        let gap = "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":{}}\n{\"type\":\"a\",\"seq\":2,\"time\":0,\"data\":{}}\n";
        assert_eq!(
            SessionLog::from_jsonl(gap).unwrap_err(),
            ReadError::NotContiguous {
                expected: 1,
                found: 2
            }
        );
        let late_header = "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":{}}\n{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n";
        assert!(matches!(
            SessionLog::from_jsonl(late_header).unwrap_err(),
            ReadError::BadLine { line: 2, .. }
        ));
        assert!(
            SessionLog::from_jsonl(newer)
                .unwrap_err()
                .to_string()
                .contains("newer than this build understands"),
            "the message says why"
        );
    }

    #[test]
    fn expands_packed_chunk_rows() {
        let text = "{\"type\":\"turn/start\",\"seq\":0,\"time\":10,\"data\":{\"turn\":1}}\n\
            {\"type\":\"text-chunks\",\"seq0\":1,\"time0\":100,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[2,-1],\"texts\":[\"a\",\"b\",\"c\"]}}\n\
            {\"type\":\"tool-call-chunks\",\"seq0\":4,\"time0\":200,\"data\":{\"turn\":1,\"step\":1,\"index\":1,\"id\":\"c1\",\"name\":\"write\",\"dt\":[0],\"args\":[\"{\",\"}\"]}}\n\
            {\"type\":\"turn/end\",\"seq\":6,\"time\":300,\"data\":{\"turn\":1}}\n";
        let log = SessionLog::from_jsonl(text).expect("reads");
        assert_eq!(log.events.len(), 7);
        let third = log.events[3].data_value().expect("json");
        assert_eq!(third["chunk"]["text"], "c");
        assert_eq!(log.events[3].time, Value::from(101));
        let tool = log.events[5].data_value().expect("json");
        assert_eq!(tool["chunk"]["argumentsDelta"], "}");
        assert_eq!(tool["chunk"]["name"], "write");
        let broken = "{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":1,\"data\":{\"dt\":[1,2],\"texts\":[\"a\"]}}\n";
        assert!(matches!(
            SessionLog::from_jsonl(broken).unwrap_err(),
            ReadError::BadLine { line: 1, .. }
        ));
    }

    #[test]
    fn reads_a_json_array() {
        let text = "[{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":null},{\"type\":\"b\",\"seq\":1,\"time\":0,\"data\":1}]";
        let log = SessionLog::parse(text).expect("reads");
        assert_eq!(log.events.len(), 2);
        assert!(log.header.is_none());
        assert!(SessionLog::parse("[{\"seq\":0}]").is_err());
    }
}
