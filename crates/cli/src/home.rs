//! The DSH home: where it is, and what DSH's session logs say about each session.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use rewind_plan::{SessionHeader, SessionLog};
use snapshot_store::ChainLink;

use crate::fail::{Code, Fail};

/// The snapshot store, relative to the DSH home (as the plugin opens it).
pub const SNAPSHOTS: &str = "rewind-snapshots";
/// The rewind history root, relative to the DSH home.
pub const HISTORY: &str = "rewind-history";
/// DSH's session logs, relative to the DSH home.
pub const SESSIONS: &str = "sessions";
/// Longest fork chain followed (as the plugin does).
const MAX_CHAIN: usize = 64;

/// The DSH home as the plugin resolves it: `--home`, else `$DSH_HOME` when it is a
/// non-empty absolute path, else `~/.dsh`.
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, Fail> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(v) = std::env::var_os("DSH_HOME") {
        let p = PathBuf::from(&v);
        if !v.is_empty() && p.is_absolute() {
            return Ok(p);
        }
    }
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".dsh")),
        _ => Err(Fail::new(
            Code::Usage,
            "cannot find the DSH home: neither --home, an absolute $DSH_HOME nor $HOME is set",
        )),
    }
}

/// One session log DSH keeps.
#[derive(Debug, Clone)]
pub struct LogFile {
    /// The log file.
    pub path: PathBuf,
    /// Its header, when it could be read.
    pub header: Option<SessionHeader>,
    /// `session.jsonl.zstd` (DSH's default) rather than `session.jsonl`.
    pub compressed: bool,
}

/// The session logs of a DSH home, by session id.
#[derive(Debug, Default)]
pub struct Logs {
    /// Logs by session id.
    pub by_id: BTreeMap<String, LogFile>,
}

/// Decodes DSH's path segment encoding (`~XXXX` = one UTF-16 code unit).
fn decode_segment(name: &str) -> Option<String> {
    let mut units: Vec<u16> = Vec::new();
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            let hex: String = chars.by_ref().take(4).collect();
            units.push(u16::from_str_radix(&hex, 16).ok()?);
        } else {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    String::from_utf16(&units).ok()
}

fn read_header(path: &Path) -> Option<SessionHeader> {
    let f = std::fs::File::open(path).ok()?;
    // Header lines are small; a huge first line is not a header.
    let mut r = BufReader::new(f).take(1 << 20);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

/// The header of a zstd log: the first line of its first frame (DSH writes the header as a
/// frame of its own), decoded without reading the rest of the file.
fn read_zstd_header(path: &Path) -> Option<SessionHeader> {
    let f = std::fs::File::open(path).ok()?;
    let dec = ruzstd::decoding::StreamingDecoder::new(BufReader::new(f)).ok()?;
    let mut r = BufReader::new(dec).take(1 << 20);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

/// Decodes DSH's zstd log: independent frames one after another, each checked against its
/// content checksum when it has one. A final frame cut short (an append torn by a crash) is
/// ignored, as DSH's reader does; damage anywhere else is an error.
pub fn decode_zstd(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use ruzstd::decoding::{FrameDecoder, StreamingDecoder};
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
            Err(e) => return Err(format!("zstd frame at byte {start}: {e}")),
        }
    }
    Ok(out)
}

impl Logs {
    /// Reads the header of every log under `<home>/sessions/<project>/<session>/`.
    pub fn scan(home: &Path) -> Logs {
        let mut logs = Logs::default();
        let Ok(projects) = std::fs::read_dir(home.join(SESSIONS)) else {
            return logs;
        };
        let mut projects: Vec<_> = projects.flatten().collect();
        projects.sort_by_key(|e| e.file_name());
        for project in projects {
            let Ok(dirs) = std::fs::read_dir(project.path()) else {
                continue;
            };
            let mut dirs: Vec<_> = dirs.flatten().collect();
            dirs.sort_by_key(|e| e.file_name());
            for dir in dirs {
                if !dir.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let plain = dir.path().join("session.jsonl");
                let zstd = dir.path().join("session.jsonl.zstd");
                let file = if plain.is_file() {
                    let header = read_header(&plain);
                    LogFile {
                        path: plain,
                        header,
                        compressed: false,
                    }
                } else if zstd.is_file() {
                    let header = read_zstd_header(&zstd);
                    LogFile {
                        path: zstd,
                        header,
                        compressed: true,
                    }
                } else {
                    continue;
                };
                let id = match &file.header {
                    Some(h) => Some(h.id.clone()),
                    None => dir.file_name().to_str().and_then(decode_segment),
                };
                if let Some(id) = id {
                    logs.by_id.entry(id).or_insert(file);
                }
            }
        }
        logs
    }

    /// Whether the session has a log (plain JSONL, or DSH's default zstd encoding).
    pub fn readable(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// The session's working directory, from its log header.
    pub fn cwd(&self, id: &str) -> Option<PathBuf> {
        self.by_id
            .get(id)?
            .header
            .as_ref()?
            .cwd
            .as_ref()
            .map(PathBuf::from)
    }

    /// Reads and parses the session's whole log.
    pub fn read(&self, id: &str) -> Result<SessionLog, Fail> {
        let Some(file) = self.by_id.get(id) else {
            return Err(Fail::new(
                Code::NotFound,
                format!("no DSH session log for session `{id}` under the home's sessions/"),
            ));
        };
        let bytes = std::fs::read(&file.path).map_err(|e| {
            Fail::new(
                Code::Failed,
                format!("cannot read {}: {e}", file.path.display()),
            )
        })?;
        let bytes = match file.compressed {
            true => decode_zstd(&bytes)
                .map_err(|e| Fail::new(Code::Corrupt, format!("{}: {e}", file.path.display())))?,
            false => bytes,
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            Fail::new(
                Code::Corrupt,
                format!("{}: not UTF-8: {e}", file.path.display()),
            )
        })?;
        SessionLog::from_jsonl(&text).map_err(|e| {
            let code = match e {
                rewind_plan::ReadError::NewerHeader { .. } => Code::Newer,
                _ => Code::Corrupt,
            };
            Fail::new(code, format!("{}: {e}", file.path.display()))
        })
    }

    /// The fork chain of a session (nearest parent first), from the headers.
    pub fn chain(&self, id: &str) -> Vec<ChainLink> {
        let mut out: Vec<ChainLink> = Vec::new();
        let mut cur = id.to_string();
        while out.len() < MAX_CHAIN {
            let Some(h) = self.by_id.get(&cur).and_then(|f| f.header.as_ref()) else {
                break;
            };
            let (Some(parent), Some(seed)) = (&h.parent_session, h.seed_length) else {
                break;
            };
            if seed == 0 || parent == id || out.iter().any(|l| &l.session_id == parent) {
                break;
            }
            out.push(ChainLink {
                session_id: parent.clone(),
                max_anchor: seed - 1,
            });
            cur = parent.clone();
        }
        out
    }
}
