//! Reading a DSH session log: the JSONL file (header line + one event per line)
//! or a JSON array of events as a host hands it over.
//!
//! Every session format DSH has written is read: format 0 (0.1.0-rc.8, `session.jsonl`), 1, 2, 3
//! (0.1.5, `session.v3.jsonl`) and 4 (0.1.7 / 0.2.x, `session.v4.jsonl`), in plain JSONL or as
//! DSH's zstd encoding (`*.jsonl.zstd`, [`SessionLog::from_zstd_jsonl`]). The file names follow
//! `sessionFormatLogFilename` (knyazev741/deepseek-harness@1376315f
//! `packages/session/session-persistence-jsonl/src/format.ts`): version 0 keeps `session.jsonl`,
//! version N is `session.vN.jsonl`. The crate takes bytes or text, never paths: it does no I/O.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use thiserror::Error;

use crate::event::{MAX_SAFE_INTEGER, SessionEvent, SessionHeader, SourceSeqs, safe_seq};

/// The newest header version this build understands (DSH's `SESSION_FORMAT_VERSION` in
/// 0.2.1-alpha.2: zq0929/deepseek-harness@5593cc25 `packages/core/session/src/types.ts`).
pub const KNOWN_HEADER_VERSION: u64 = 4;

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
    /// The zstd encoding is damaged (other than a final frame cut short by a torn append);
    /// the message reads `zstd frame at byte <offset>: <what>`.
    #[error("zstd {0}")]
    Zstd(String),
    /// The decompressed log is not UTF-8.
    #[error("session log is not UTF-8: {0}")]
    NotUtf8(String),
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
    /// (`{"type":"session","version":0..=4,…}`), then one event per line. Packed
    /// chunk rows (formats 0 and 1) are expanded into the `assistant/chunk` events they stand
    /// for, and `sourceEventSeqs` written as `[start, end]` ranges are expanded into their seqs.
    /// Blank lines are skipped.
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
                    let mut event: SessionEvent =
                        serde_json::from_str(line).map_err(|e| bad(line_no, &e.to_string()))?;
                    expand_source_ranges(&mut event, line_no)?;
                    log.push(event)?;
                }
            }
        }
        Ok(log)
    }

    /// Reads DSH's zstd-encoded JSONL log (`session.jsonl.zstd`, `session.vN.jsonl.zstd`):
    /// independent zstd frames one after another (DSH writes the header and each appended
    /// batch as frames of their own), each checked against its content checksum when it has
    /// one. A final frame cut short (an append torn by a crash) is dropped, as DSH's reader does
    /// (knyazev741/deepseek-harness@1376315f
    /// `packages/session/session-persistence-jsonl/src/generation.ts`, `scanZstdFrames`); damage
    /// anywhere else is [`ReadError::Zstd`].
    pub fn from_zstd_jsonl(bytes: &[u8]) -> Result<Self, ReadError> {
        let plain = decode_zstd(bytes)?;
        // A torn final frame may end inside a record: keep complete lines only.
        let complete = match plain.iter().rposition(|b| *b == b'\n') {
            Some(i) => &plain[..=i],
            None => &plain[..],
        };
        let text = std::str::from_utf8(complete).map_err(|e| ReadError::NotUtf8(e.to_string()))?;
        Self::from_jsonl(text)
    }

    /// The number of leading events inherited from the parent session (the fork seed), or 0.
    ///
    /// Format 0 and 1 headers carry `seedLength`. From format 2 on the header only says
    /// `isSeeded`, and the cut is the seq of the last `session/end-seed` event with
    /// `inherited: true` (knyazev741/deepseek-harness@1376315f
    /// `packages/session/session-format-v1-to-v2/src/codec.ts`, `createDecoder`; zq0929
    /// /deepseek-harness@5593cc25 `packages/core/session/src/index.ts`, `Session` constructor).
    /// A log handed over without its header (the host's in-memory events) is read the same way.
    pub fn seed_boundary(&self) -> u64 {
        if let Some(h) = &self.header {
            if let Some(n) = h.seed_length.or(h.inherited_event_count) {
                return n;
            }
            if h.is_seeded == Some(false) {
                return 0;
            }
        }
        self.events
            .iter()
            .rev()
            .find(|e| e.is_inherited_cut())
            .map_or(0, |e| e.seq)
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

/// Decodes DSH's zstd log into its JSONL bytes (see [`SessionLog::from_zstd_jsonl`]).
pub fn decode_zstd(bytes: &[u8]) -> Result<Vec<u8>, ReadError> {
    use ruzstd::decoding::{FrameDecoder, StreamingDecoder};
    use std::io::Read;
    let mut out = Vec::new();
    let mut cur = std::io::Cursor::new(bytes);
    let mut dec = FrameDecoder::new();
    while (cur.position() as usize) < bytes.len() {
        let start = cur.position();
        let mut frame = Vec::new();
        let result = StreamingDecoder::new_with_decoder(&mut cur, &mut dec)
            .map_err(|e| e.to_string())
            .and_then(|mut s| s.read_to_end(&mut frame).map_err(|e| e.to_string()))
            .and_then(
                |_| match (dec.get_checksum_from_data(), dec.get_calculated_checksum()) {
                    (Some(want), Some(got)) if want != got => Err(format!(
                        "checksum mismatch ({got:08x}, frame says {want:08x})"
                    )),
                    _ => Ok(()),
                },
            );
        match result {
            Ok(()) => out.extend_from_slice(&frame),
            // Cut short at the end of the file: a torn append.
            Err(_) if cur.position() as usize >= bytes.len() && !out.is_empty() => break,
            Err(e) => return Err(ReadError::Zstd(format!("frame at byte {start}: {e}"))),
        }
    }
    Ok(out)
}

/// Expands `sourceEventSeqs` members written as `[start, end]` pairs (runs of three or more
/// consecutive seqs) into their seqs, as DSH's physical decoders do (knyazev741/deepseek-harness
/// @1376315f `packages/session/session-format-v1-to-v2/src/codec.ts` and
/// `packages/session/session-format-v0-to-v1/src/codec.ts`, `decodeSeqRanges`). Plain lists
/// are left alone; a malformed range is a bad line.
fn expand_source_ranges(event: &mut SessionEvent, line_no: usize) -> Result<(), ReadError> {
    let Some(SourceSeqs::Invalid(Value::Array(items))) = &event.source_event_seqs else {
        return Ok(());
    };
    if !items.iter().any(Value::is_array) {
        return Ok(());
    }
    let malformed = |what: &str| bad(line_no, &format!("sourceEventSeqs {what}"));
    let mut out: Vec<u64> = Vec::new();
    for item in items {
        match item {
            Value::Array(pair) => {
                let [a, b] = pair.as_slice() else {
                    return Err(malformed("range must be a [start, end] pair"));
                };
                let (Some(a), Some(b)) = (safe_seq(a), safe_seq(b)) else {
                    return Err(malformed("range bounds must be non-negative safe integers"));
                };
                if a > b || b >= event.seq {
                    return Err(malformed("range exceeds its event seq"));
                }
                out.extend(a..=b);
            }
            // Anything else is kept for the fold to name (`BadSources`).
            _ => match safe_seq(item) {
                Some(s) => out.push(s),
                None => return Ok(()),
            },
        }
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(malformed("ranges must be strictly increasing"));
    }
    event.source_event_seqs = Some(SourceSeqs::List(out));
    Ok(())
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
        for version in 0..=4 {
            let header = format!("{{\"type\":\"session\",\"version\":{version},\"id\":\"s\"}}\n");
            let log = SessionLog::from_jsonl(&header).expect("a known version");
            assert_eq!(log.header.map(|h| h.version), Some(version));
        }
        let newer = "{\"type\":\"session\",\"version\":5,\"id\":\"s\"}\n";
        assert_eq!(
            SessionLog::from_jsonl(newer).unwrap_err(),
            ReadError::NewerHeader { found: 5, known: 4 }
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

    #[test]
    fn expands_source_ranges_and_refuses_bad_ones() {
        let line = |sources: &str| {
            format!(
                "{{\"type\":\"user/message\",\"seq\":9,\"time\":0,\"data\":{{}},\"surfaceOp\":\"append\",\"sourceEventSeqs\":{sources}}}\n"
            )
        };
        let pad: String = (0..9)
            .map(|i| format!("{{\"type\":\"a\",\"seq\":{i},\"time\":0,\"data\":{{}}}}\n"))
            .collect();
        let read = |sources: &str| SessionLog::from_jsonl(&format!("{pad}{}", line(sources)));
        let log = read("[[0,2],4,[6,8]]").expect("reads");
        assert_eq!(
            log.events[9].source_event_seqs,
            Some(SourceSeqs::List(vec![0, 1, 2, 4, 6, 7, 8]))
        );
        // A plain list is kept as written (even when not increasing).
        let log = read("[5,3]").expect("reads");
        assert_eq!(
            log.events[9].source_event_seqs,
            Some(SourceSeqs::List(vec![5, 3]))
        );
        for bad in ["[[2,1]]", "[[0,9]]", "[[0,1,2]]", "[[0,-1]]", "[3,[0,2]]"] {
            assert!(
                matches!(read(bad).unwrap_err(), ReadError::BadLine { line: 10, .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn seed_boundary_from_seed_length_or_the_inherited_marker() {
        let v0 = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"seedLength\":2}\n";
        assert_eq!(
            SessionLog::from_jsonl(v0).expect("reads").seed_boundary(),
            2
        );
        let events = "{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1}}\n\
            {\"type\":\"session/end-seed\",\"seq\":1,\"time\":0,\"data\":{}}\n\
            {\"type\":\"session/end-seed\",\"seq\":2,\"time\":0,\"data\":{\"inherited\":true}}\n\
            {\"type\":\"session/end-seed\",\"seq\":3,\"time\":0,\"data\":{}}\n";
        let seeded = format!(
            "{{\"type\":\"session\",\"version\":4,\"id\":\"s\",\"isSeeded\":true,\"delegationDepth\":0}}\n{events}"
        );
        assert_eq!(
            SessionLog::from_jsonl(&seeded)
                .expect("reads")
                .seed_boundary(),
            2
        );
        let unseeded = seeded.replace("\"isSeeded\":true", "\"isSeeded\":false");
        assert_eq!(
            SessionLog::from_jsonl(&unseeded)
                .expect("reads")
                .seed_boundary(),
            0
        );
        // The host's events, without a header.
        let bare = SessionLog::from_jsonl(events).expect("reads");
        assert_eq!(bare.seed_boundary(), 2);
    }
}
