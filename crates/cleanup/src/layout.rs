//! What the sweep knows about the snapshot store's layout.
//!
//! The snapshot store (crate `snapshot-store`) keeps, under its root:
//! `store.json` (`{"store_version": N}`), `lock` (an OS file lock: shared while
//! the store adds references, exclusive while it removes data), `trash/`
//! (directories being removed; emptied when the store opens) and
//! `sessions/<encoded session id>/` with `journals/<op>.json` (a restore's
//! intent) and `journals/<op>.log` (its progress lines, one JSON object per
//! line, `s` being the status). A restore is finished when its log holds a
//! `completed`, `rolled-back` or `undone` line; until then it pins its session.
//! Layout 2 keeps the rest of a session in one `records.log` (layout 1 in
//! several JSON files); the sweep reads neither, so it handles both alike.

use std::io;

use cap_std::fs::Dir;

/// Directory of the session directories, relative to the store root.
pub const SESSIONS_DIR: &str = "sessions";
/// Directory the store empties when it opens, relative to the store root.
pub const TRASH_DIR: &str = "trash";
/// The store's version marker, relative to the store root.
pub const STORE_MARKER: &str = "store.json";
/// The store's lock file, relative to the store root.
pub const STORE_LOCK: &str = "lock";
/// The newest store version this crate knows the layout of.
pub const KNOWN_STORE_VERSION: u64 = 2;
/// The newest journal intent version (`v`) this crate can judge.
pub const KNOWN_JOURNAL_VERSION: u64 = 1;

/// The session id a store directory name stands for (`[A-Za-z0-9_-]` as is,
/// every other byte as `%XX`); `None` for a name the store cannot produce.
pub fn decode_session_dir(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b);
            i += 1;
        } else if b == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            if hex.bytes().any(|h| h.is_ascii_lowercase()) {
                return None;
            }
            let v = u8::from_str_radix(hex, 16).ok()?;
            if v.is_ascii_alphanumeric() || v == b'_' || v == b'-' {
                return None; // would have been written as is
            }
            out.push(v);
            i += 3;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

/// Encodes a session id the way the store names its directory.
pub fn encode_session_dir(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a session directory is pinned by its own journals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalPin {
    /// A restore journal is still open (interrupted or failed part-way).
    Open {
        /// The journal's file stem (the encoded op id).
        op: String,
    },
    /// A journal could not be read or judged; the session is kept (fail closed).
    Unreadable {
        /// What went wrong.
        detail: String,
    },
}

fn finished(log: &[u8]) -> Result<bool, String> {
    // A torn last line (no newline) is ignored, as the store does.
    let complete = log
        .iter()
        .rposition(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let mut done = false;
    for raw in log[..complete]
        .split(|b| *b == b'\n')
        .filter(|r| !r.is_empty())
    {
        let v: serde_json::Value =
            serde_json::from_slice(raw).map_err(|e| format!("bad progress line: {e}"))?;
        let s = v
            .get("s")
            .and_then(|s| s.as_str())
            .ok_or("progress line without status")?;
        match s {
            "completed" | "rolled-back" | "undone" => done = true,
            "done" | "failed" => {}
            other => return Err(format!("unknown progress status {other:?}")),
        }
    }
    Ok(done)
}

/// The first journal of a session directory that pins it, if any.
pub(crate) fn journal_pin(session: &Dir) -> Option<JournalPin> {
    let journals = match session.symlink_metadata("journals") {
        Ok(m) if m.is_dir() => match session.open_dir("journals") {
            Ok(d) => d,
            Err(e) => {
                return Some(JournalPin::Unreadable {
                    detail: format!("journals: {e}"),
                });
            }
        },
        Ok(_) => {
            return Some(JournalPin::Unreadable {
                detail: "journals is not a directory".into(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(JournalPin::Unreadable {
                detail: format!("journals: {e}"),
            });
        }
    };
    let entries = match journals.entries() {
        Ok(e) => e,
        Err(e) => {
            return Some(JournalPin::Unreadable {
                detail: format!("journals: {e}"),
            });
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                return Some(JournalPin::Unreadable {
                    detail: format!("journals: {e}"),
                });
            }
        };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        let Some(op) = name.strip_suffix(".json") else {
            continue;
        };
        let intent = match journals.read(name) {
            Ok(b) => b,
            Err(e) => {
                return Some(JournalPin::Unreadable {
                    detail: format!("{name}: {e}"),
                });
            }
        };
        let version = serde_json::from_slice::<serde_json::Value>(&intent)
            .ok()
            .and_then(|v| v.get("v").and_then(serde_json::Value::as_u64));
        match version {
            Some(v) if (1..=KNOWN_JOURNAL_VERSION).contains(&v) => {}
            Some(v) => {
                return Some(JournalPin::Unreadable {
                    detail: format!("{name}: journal version {v} is not known"),
                });
            }
            None => {
                return Some(JournalPin::Unreadable {
                    detail: format!("{name}: unreadable journal intent"),
                });
            }
        }
        let log = match journals.read(format!("{op}.log")) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Some(JournalPin::Unreadable {
                    detail: format!("{op}.log: {e}"),
                });
            }
        };
        match finished(&log) {
            Ok(true) => {}
            Ok(false) => return Some(JournalPin::Open { op: op.to_owned() }),
            Err(detail) => {
                return Some(JournalPin::Unreadable {
                    detail: format!("{op}.log: {detail}"),
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        for id in ["abc", "a.b/c", "%", "sess-1_2", "ü", "..", "a%41"] {
            let enc = encode_session_dir(id);
            assert!(!enc.contains('/') && enc != "." && enc != "..");
            assert_eq!(
                decode_session_dir(&enc).as_deref(),
                Some(id),
                "{id} -> {enc}"
            );
        }
        for bad in [
            "", ".", "..", "a.b", "%41", "%2", "%2e", "%ZZ", "a b", "%FF",
        ] {
            assert_eq!(decode_session_dir(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn log_judgement() {
        assert_eq!(finished(b""), Ok(false));
        assert_eq!(
            finished(b"{\"p\":\"apply\",\"i\":0,\"s\":\"done\"}\n"),
            Ok(false)
        );
        assert_eq!(finished(b"{\"p\":\"apply\",\"i\":0,\"s\":\"done\"}\n{\"p\":\"apply\",\"s\":\"completed\"}\n"), Ok(true));
        assert_eq!(
            finished(b"{\"p\":\"apply\",\"s\":\"completed\"}"),
            Ok(false),
            "torn line ignored"
        );
        assert!(finished(b"{\"p\":\"apply\",\"s\":\"exploded\"}\n").is_err());
        assert!(finished(b"not json\n").is_err());
    }
}
