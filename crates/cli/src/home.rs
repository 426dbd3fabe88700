//! The DSH home: where it is, and what DSH's session logs say about each session.
//!
//! Each session directory holds its log as `session.jsonl` (format 0) or `session.vN.jsonl`
//! (format N, 1 to 4), plain or zstd-encoded (`.zstd`); the newest generation is read.

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
    /// zstd-encoded (`*.jsonl.zstd`, DSH's default) rather than plain JSONL.
    pub compressed: bool,
}

/// The session format generation a log file name stands for, and whether it is zstd-encoded:
/// `session.jsonl` is format 0, `session.vN.jsonl` format N (no leading zero, never `v0`), each
/// optionally followed by `.zstd` (DSH's `sessionFormatLogFilename` and `logSuffix`:
/// knyazev741/deepseek-harness@1376315f `packages/session/session-persistence-jsonl/src/format.ts`).
/// Temporary and other names are not logs.
pub fn log_generation(name: &str) -> Option<(u64, bool)> {
    let (stem, compressed) = match name.strip_suffix(".zstd") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let middle = stem.strip_prefix("session")?.strip_suffix(".jsonl")?;
    if middle.is_empty() {
        return Some((0, compressed));
    }
    let digits = middle.strip_prefix(".v")?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, compressed))
}

/// The log of one session directory: the newest format generation DSH left there (a newer
/// release migrates `session.jsonl` into `session.v4.jsonl` and keeps the old file), the plain
/// file before the zstd one of the same generation.
fn newest_log(dir: &Path) -> Option<(PathBuf, bool)> {
    let mut best: Option<(u64, bool, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Some((version, compressed)) = name.to_str().and_then(log_generation) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let better = match &best {
            None => true,
            Some((v, c, _)) => version > *v || (version == *v && *c && !compressed),
        };
        if better {
            best = Some((version, compressed, entry.path()));
        }
    }
    best.map(|(_, compressed, path)| (path, compressed))
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
                let Some((path, compressed)) = newest_log(&dir.path()) else {
                    continue;
                };
                let header = match compressed {
                    true => read_zstd_header(&path),
                    false => read_header(&path),
                };
                let file = LogFile {
                    path,
                    header,
                    compressed,
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

    /// Whether the session has a log (plain JSONL, or DSH's default zstd encoding; any format).
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
        let read = match file.compressed {
            true => SessionLog::from_zstd_jsonl(&bytes),
            false => match String::from_utf8(bytes) {
                Ok(text) => SessionLog::from_jsonl(&text),
                Err(e) => Err(rewind_plan::ReadError::NotUtf8(e.to_string())),
            },
        };
        read.map_err(|e| {
            let code = match e {
                rewind_plan::ReadError::NewerHeader { .. } => Code::Newer,
                _ => Code::Corrupt,
            };
            Fail::new(code, format!("{}: {e}", file.path.display()))
        })
    }

    /// The number of events a forked session inherited: `seedLength` in its header (formats 0
    /// and 1), else (format 2 on, header `isSeeded`) the fork cut its log records
    /// ([`SessionLog::seed_boundary`]), which needs the whole log read.
    fn inherited(&self, id: &str, header: &SessionHeader) -> Option<u64> {
        if let Some(seed) = header.seed_length {
            return Some(seed);
        }
        if header.is_seeded != Some(true) {
            return None;
        }
        self.read(id).ok().map(|log| log.seed_boundary())
    }

    /// The fork chain of a session (nearest parent first), from the headers.
    pub fn chain(&self, id: &str) -> Vec<ChainLink> {
        let mut out: Vec<ChainLink> = Vec::new();
        let mut cur = id.to_string();
        while out.len() < MAX_CHAIN {
            let Some(h) = self.by_id.get(&cur).and_then(|f| f.header.as_ref()) else {
                break;
            };
            let (Some(parent), Some(seed)) = (&h.parent_session, self.inherited(&cur, h)) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_name_their_generation() {
        assert_eq!(log_generation("session.jsonl"), Some((0, false)));
        assert_eq!(log_generation("session.jsonl.zstd"), Some((0, true)));
        assert_eq!(log_generation("session.v3.jsonl"), Some((3, false)));
        assert_eq!(log_generation("session.v4.jsonl.zstd"), Some((4, true)));
        assert_eq!(log_generation("session.v12.jsonl"), Some((12, false)));
        for bad in [
            "session.v0.jsonl",
            "session.v04.jsonl",
            "session.v.jsonl",
            "session.vx.jsonl",
            "session.jsonl.tmp",
            "session.v4.jsonl.zstd.tmp",
            "Session.jsonl",
            "other.jsonl",
        ] {
            assert_eq!(log_generation(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_newest_generation_is_read() {
        let dir = std::env::temp_dir().join(format!("dsh-rewind-home-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert!(newest_log(&dir).is_none());
        std::fs::write(dir.join("session.jsonl"), "").expect("write");
        std::fs::write(dir.join("session.v3.jsonl.zstd"), "").expect("write");
        assert_eq!(
            newest_log(&dir),
            Some((dir.join("session.v3.jsonl.zstd"), true))
        );
        std::fs::write(dir.join("session.v3.jsonl"), "").expect("write");
        std::fs::write(dir.join("session.v4.jsonl.tmp"), "").expect("write");
        assert_eq!(
            newest_log(&dir),
            Some((dir.join("session.v3.jsonl"), false))
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_format_4_zstd_log_is_found_and_read() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/formats");
        let home = std::env::temp_dir().join(format!("dsh-rewind-home-v4-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let dir = home.join(SESSIONS).join("--workspace--").join("formats-v4");
        std::fs::create_dir_all(&dir).expect("dir");
        // The format 0 log a newer host migrated from stays next to its successor.
        std::fs::copy(fixtures.join("session.jsonl"), dir.join("session.jsonl")).expect("copy");
        std::fs::copy(
            fixtures.join("session.v4.jsonl.zstd"),
            dir.join("session.v4.jsonl.zstd"),
        )
        .expect("copy");
        let logs = Logs::scan(&home);
        // The header says `formats-v4`; the format 0 file's would say `formats-v0`.
        assert!(logs.readable("formats-v4"), "{:?}", logs.by_id.keys());
        assert_eq!(logs.cwd("formats-v4"), Some(PathBuf::from("/workspace")));
        let log = logs.read("formats-v4").expect("reads");
        assert_eq!(log.header.as_ref().map(|h| h.version), Some(4));
        assert_eq!(
            rewind_plan::list_candidates(&log)
                .expect("candidates")
                .iter()
                .map(|c| c.preview.as_str())
                .collect::<Vec<_>>(),
            vec!["write bye.txt instead", "create hello.txt"]
        );
        // Not a fork: no chain.
        assert!(logs.chain("formats-v4").is_empty());
        std::fs::remove_dir_all(&home).expect("clean up");
    }

    #[test]
    fn a_format_4_fork_chain_comes_from_its_inherited_cut() {
        let home =
            std::env::temp_dir().join(format!("dsh-rewind-home-fork-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let write = |id: &str, text: &str| {
            let dir = home.join(SESSIONS).join("--w--").join(id);
            std::fs::create_dir_all(&dir).expect("dir");
            std::fs::write(dir.join("session.v4.jsonl"), text).expect("write");
        };
        write(
            "parent",
            "{\"type\":\"session\",\"version\":4,\"id\":\"parent\",\"createdAt\":0,\"isSeeded\":false,\"delegationDepth\":0}\n",
        );
        write(
            "child",
            "{\"type\":\"session\",\"version\":4,\"id\":\"child\",\"createdAt\":0,\"parentSession\":\"parent\",\"isSeeded\":true,\"delegationDepth\":0}\n\
             {\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1}}\n\
             {\"type\":\"turn/end\",\"seq\":1,\"time\":0,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n\
             {\"type\":\"session/end-seed\",\"seq\":2,\"time\":0,\"data\":{\"inherited\":true}}\n",
        );
        let logs = Logs::scan(&home);
        let chain = logs.chain("child");
        assert_eq!(chain.len(), 1);
        assert_eq!(chain[0].session_id, "parent");
        assert_eq!(chain[0].max_anchor, 1);
        std::fs::remove_dir_all(&home).expect("clean up");
    }
}
