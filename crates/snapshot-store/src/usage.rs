//! A read-only view of a store's session directories for tools that must not
//! open the store (opening empties `trash/` and migrates old layouts): the
//! cleanup sweep reads which session directories exist, how big and how long
//! idle each is, and which of them an open restore journal still needs.
//!
//! Under the store root: `store.json` (`{"store_version": N}`), `lock` (an OS
//! file lock: shared while the store adds references, exclusive while data is
//! removed), `trash/` (directories being removed; emptied when the store opens)
//! and `sessions/<encoded session id>/` with `journals/<op>.json` (a restore's
//! intent) and `journals/<op>.log` (its progress lines, one JSON object per
//! line, `s` being the status). A restore is finished when its log holds a
//! `completed`, `rolled-back` or `undone` line; until then it pins its session.
//! Layout 2 keeps the rest of a session in one `records.log` (layout 1 in
//! several JSON files); nothing here reads either, so both are handled alike.
//!
//! Nothing here changes anything, follows a symlink, or passes the
//! [`FaultSeam`](crate::FaultSeam): it works on a plain `cap-std` handle.

use std::io;

use cap_std::fs::Dir;
use rewind_durable::ms_since_epoch;

use crate::path::{decode_id, encode_unchecked};

/// Directory of the session directories, relative to the store root.
pub const SESSIONS_DIR: &str = "sessions";
/// Directory the store empties when it opens, relative to the store root.
pub const TRASH_DIR: &str = "trash";
/// The store's version marker, relative to the store root.
pub const STORE_MARKER: &str = "store.json";
/// The store's lock file, relative to the store root.
pub const STORE_LOCK: &str = "lock";
/// The newest restore-journal intent version (`v`) this build can judge.
pub const JOURNAL_VERSION: u64 = 1;
/// Deepest directory level [`session_activity`] reads inside a session
/// directory; a deeper tree is not something the store writes.
pub const MAX_SESSION_DEPTH: usize = 32;

/// The directory name the store gives session `id` (`[A-Za-z0-9_-]` as is,
/// every other byte as `%XX`). Unlike [`encode_id`](crate::encode_id) it
/// never refuses (an empty or over-long id is encoded all the same).
pub fn session_dir_name(id: &str) -> String {
    encode_unchecked(id)
}

/// The session id a directory name under `sessions/` stands for; `None` for a
/// name the store cannot produce (left alone by every tool).
pub fn session_id_of_dir(name: &str) -> Option<String> {
    decode_id(name)
}

/// `store.json` could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// It could not be read.
    #[error("read {STORE_MARKER}: {0}")]
    Io(#[source] io::Error),
    /// It is not JSON with a numeric `store_version`.
    #[error("{STORE_MARKER} is corrupt: {0}")]
    Corrupt(String),
}

/// The `store_version` of the store at `root`; `Ok(None)` when it has no
/// marker (a store not created yet).
pub fn store_marker_version(root: &Dir) -> Result<Option<u64>, MarkerError> {
    let bytes = match root.read(STORE_MARKER) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MarkerError::Io(e)),
    };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .map_err(|e| MarkerError::Corrupt(e.to_string()))?
        .get("store_version")
        .and_then(serde_json::Value::as_u64)
        .map(Some)
        .ok_or_else(|| MarkerError::Corrupt("missing store_version".into()))
}

/// One entry of `sessions/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionDirEntry {
    /// The entry's name.
    pub name: String,
    /// The session id, when the entry is a directory whose name the store can
    /// produce; `None` for anything else (files, symlinks, foreign names),
    /// which tools leave alone.
    pub session_id: Option<String>,
}

/// `sessions/` could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// `sessions` is not a plain directory (e.g. a symlink).
    #[error("{SESSIONS_DIR} is not a directory")]
    NotADirectory,
    /// A disk error.
    #[error("{op} {SESSIONS_DIR}: {source}")]
    Io {
        /// What was being done (`stat`, `open`, `list`).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The session directories of a store, listed once (see [`session_dirs`]).
#[derive(Debug)]
pub struct SessionDirs {
    dir: Dir,
    entries: Vec<SessionDirEntry>,
}

impl SessionDirs {
    /// Every entry of `sessions/`, sorted by name.
    pub fn entries(&self) -> &[SessionDirEntry] {
        &self.entries
    }

    /// The handle on `sessions/` (to open or move a session directory).
    pub fn dir(&self) -> &Dir {
        &self.dir
    }
}

/// Lists `sessions/` of the store at `root`; `Ok(None)` when it does not exist.
/// A symlink in its place is refused, never followed.
pub fn session_dirs(root: &Dir) -> Result<Option<SessionDirs>, SessionsError> {
    let dir = match root.symlink_metadata(SESSIONS_DIR) {
        Ok(m) if m.is_dir() => root
            .open_dir(SESSIONS_DIR)
            .map_err(|source| SessionsError::Io { op: "open", source })?,
        Ok(_) => return Err(SessionsError::NotADirectory),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SessionsError::Io { op: "stat", source }),
    };
    let list = |source| SessionsError::Io { op: "list", source };
    let mut entries = Vec::new();
    for entry in dir.entries().map_err(list)? {
        let entry = entry.map_err(list)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let session_id = session_id_of_dir(&name).filter(|_| is_dir);
        entries.push(SessionDirEntry { name, session_id });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Some(SessionDirs { dir, entries }))
}

/// How much a session directory holds and when it was last touched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionActivity {
    /// Bytes of the regular files inside it (blobs are elsewhere).
    pub bytes: u64,
    /// Number of regular files inside it.
    pub files: u64,
    /// Newest modification time of the directory or anything inside it, ms
    /// since the Unix epoch.
    pub last_activity_ms: u64,
}

/// Reads a session directory's size and newest modification time. Symlinks
/// are counted as entries (their own time) but never followed; a tree deeper
/// than [`MAX_SESSION_DEPTH`] is an error (not something the store writes).
pub fn session_activity(session: &Dir) -> io::Result<SessionActivity> {
    let mut acc = SessionActivity::default();
    add_activity(session, 0, &mut acc)?;
    Ok(acc)
}

fn add_activity(dir: &Dir, depth: usize, acc: &mut SessionActivity) -> io::Result<()> {
    if depth > MAX_SESSION_DEPTH {
        return Err(io::Error::other(
            "directory tree deeper than the store writes",
        ));
    }
    let newest = |acc: &mut SessionActivity, t: std::time::SystemTime| {
        acc.last_activity_ms = acc.last_activity_ms.max(ms_since_epoch(t));
    };
    newest(acc, dir.dir_metadata()?.modified()?.into_std());
    for entry in dir.entries()? {
        let entry = entry?;
        let md = entry.metadata()?; // does not follow symlinks
        newest(acc, md.modified()?.into_std());
        if md.is_dir() {
            add_activity(&entry.open_dir()?, depth + 1, acc)?;
        } else if md.is_file() {
            acc.bytes += md.len();
            acc.files += 1;
        }
    }
    Ok(())
}

/// Why a session directory is pinned by its own restore journals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalPin {
    /// A restore journal is still open (interrupted or failed part-way).
    Open {
        /// The journal's file stem (the encoded op id).
        op: String,
    },
    /// A journal could not be read or judged; keep the session (fail closed).
    Unreadable {
        /// What went wrong.
        detail: String,
    },
}

/// Whether a progress log holds a terminal line (`completed`, `rolled-back`,
/// `undone`). A torn last line (no newline) is ignored, as the store does.
fn log_finished(log: &[u8]) -> Result<bool, String> {
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

/// The first restore journal of a session directory that still needs the
/// session (an open one, or one that cannot be judged), if any. Hidden files
/// and anything but `<op>.json` intents are skipped; an intent of an unknown
/// version counts as unreadable.
pub fn journal_pin(session: &Dir) -> Option<JournalPin> {
    let unreadable = |detail: String| Some(JournalPin::Unreadable { detail });
    let journals = match session.symlink_metadata("journals") {
        Ok(m) if m.is_dir() => match session.open_dir("journals") {
            Ok(d) => d,
            Err(e) => return unreadable(format!("journals: {e}")),
        },
        Ok(_) => return unreadable("journals is not a directory".into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return unreadable(format!("journals: {e}")),
    };
    let entries = match journals.entries() {
        Ok(e) => e,
        Err(e) => return unreadable(format!("journals: {e}")),
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => return unreadable(format!("journals: {e}")),
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
            Err(e) => return unreadable(format!("{name}: {e}")),
        };
        let version = serde_json::from_slice::<serde_json::Value>(&intent)
            .ok()
            .and_then(|v| v.get("v").and_then(serde_json::Value::as_u64));
        match version {
            Some(v) if (1..=JOURNAL_VERSION).contains(&v) => {}
            Some(v) => return unreadable(format!("{name}: journal version {v} is not known")),
            None => return unreadable(format!("{name}: unreadable journal intent")),
        }
        let log = match journals.read(format!("{op}.log")) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return unreadable(format!("{op}.log: {e}")),
        };
        match log_finished(&log) {
            Ok(true) => {}
            Ok(false) => return Some(JournalPin::Open { op: op.to_owned() }),
            Err(detail) => return unreadable(format!("{op}.log: {detail}")),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    #[test]
    fn names_roundtrip() {
        for id in ["abc", "a.b/c", "%", "sess-1_2", "ü", "..", "a%41"] {
            let enc = session_dir_name(id);
            assert!(!enc.contains('/') && enc != "." && enc != "..");
            assert_eq!(
                session_id_of_dir(&enc).as_deref(),
                Some(id),
                "{id} -> {enc}"
            );
        }
        for bad in [
            "", ".", "..", "a.b", "%41", "%2", "%2e", "%ZZ", "a b", "%FF",
        ] {
            assert_eq!(session_id_of_dir(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn log_judgement() {
        assert_eq!(log_finished(b""), Ok(false));
        assert_eq!(
            log_finished(b"{\"p\":\"apply\",\"i\":0,\"s\":\"done\"}\n"),
            Ok(false)
        );
        assert_eq!(log_finished(b"{\"p\":\"apply\",\"i\":0,\"s\":\"done\"}\n{\"p\":\"apply\",\"s\":\"completed\"}\n"), Ok(true));
        assert_eq!(
            log_finished(b"{\"p\":\"apply\",\"s\":\"completed\"}"),
            Ok(false),
            "torn line ignored"
        );
        assert!(log_finished(b"{\"p\":\"apply\",\"s\":\"exploded\"}\n").is_err());
        assert!(log_finished(b"not json\n").is_err());
    }

    fn root() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        (t, d)
    }

    #[test]
    fn markers_and_listing() {
        let (t, d) = root();
        assert!(store_marker_version(&d).unwrap().is_none());
        assert!(session_dirs(&d).unwrap().is_none());
        d.write(STORE_MARKER, br#"{"store_version": 2}"#).unwrap();
        assert_eq!(store_marker_version(&d).unwrap(), Some(2));
        d.write(STORE_MARKER, b"{}").unwrap();
        assert!(matches!(
            store_marker_version(&d),
            Err(MarkerError::Corrupt(_))
        ));
        d.create_dir_all("sessions/b%2F").unwrap();
        d.create_dir_all("sessions/a").unwrap();
        d.create_dir_all("sessions/not.valid").unwrap();
        d.write("sessions/file", b"x").unwrap();
        std::os::unix::fs::symlink(t.path().join("sessions/a"), t.path().join("sessions/link"))
            .unwrap();
        let dirs = session_dirs(&d).unwrap().unwrap();
        let got: Vec<_> = dirs
            .entries()
            .iter()
            .map(|e| (e.name.as_str(), e.session_id.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Some("a")),
                ("b%2F", Some("b/")),
                ("file", None),
                ("link", None),
                ("not.valid", None)
            ]
        );
    }

    #[test]
    fn activity_and_pins() {
        let (_t, d) = root();
        d.create_dir_all("s/journals").unwrap();
        d.write("s/records.log", b"12345").unwrap();
        let s = d.open_dir("s").unwrap();
        let a = session_activity(&s).unwrap();
        assert_eq!((a.bytes, a.files), (5, 1));
        assert!(a.last_activity_ms > 0);
        assert_eq!(journal_pin(&s), None);
        s.write("journals/op.json", br#"{"v":1}"#).unwrap();
        assert_eq!(journal_pin(&s), Some(JournalPin::Open { op: "op".into() }));
        s.write("journals/op.log", b"{\"s\":\"completed\"}\n")
            .unwrap();
        assert_eq!(journal_pin(&s), None);
        s.write("journals/op.json", br#"{"v":9}"#).unwrap();
        assert!(matches!(
            journal_pin(&s),
            Some(JournalPin::Unreadable { .. })
        ));
    }
}

/// The bytes the filesystem allocates to everything under `root` (its blocks, `st_blocks`
/// × 512): what the store takes on disk, block rounding included. Symlinks are counted as
/// themselves, never followed; what cannot be read counts nothing. At most 16 levels deep.
pub fn disk_bytes(root: &Dir) -> u64 {
    fn walk(dir: &Dir, depth: usize) -> u64 {
        let Ok(entries) = dir.entries() else {
            return 0;
        };
        let mut total = 0u64;
        for e in entries.flatten() {
            let name = e.file_name();
            let Ok(st) = rustix::fs::statat(dir, &*name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            #[allow(clippy::unnecessary_cast)]
            {
                total = total.saturating_add((st.st_blocks as u64).saturating_mul(512));
            }
            let is_dir =
                rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
            if is_dir && depth < 16 {
                if let Ok(sub) = dir.open_dir(&name) {
                    total = total.saturating_add(walk(&sub, depth + 1));
                }
            }
        }
        total
    }
    walk(root, 0)
}
