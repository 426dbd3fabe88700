//! The history store: partitions on disk, serialized atomic writes.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use rewind_durable::{AtomicOp, process_lock, sync_dir};
use serde::{Deserialize, Serialize};

use crate::entry::{Entry, Outcome, Paths, UndoMode, UndoOutcome};
use crate::error::{
    AppendError, ClearError, MarkUndoneError, OpenError, ReadError, SettleError, WriteError,
};
use crate::key::WorkspaceKey;

/// The newest history format version this build reads and writes (version 2
/// adds the outcomes `started`, `rolled-back`, `abandoned` and the fields
/// `markerId`, `undoStartedAt`; version 3 adds `targetText`, `workspaceName`
/// and the `kept` paths and count; older files are read as they are and
/// written back in this version).
pub const FORMAT_VERSION: u32 = 3;
/// Entries kept per partition unless configured otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 10;
/// The largest accepted `historyLimit`; larger values are clamped to it.
pub const MAX_HISTORY_LIMIT: usize = 1000;
/// File name of a partition's history.
pub const HISTORY_FILE: &str = "history.json";
/// File name of a partition's lock file (an OS lock is taken on it around every write).
pub const LOCK_FILE: &str = ".history.lock";
const TMP_PREFIX: &str = "history.json.tmp-";

/// A step of the atomic write, in order; the crash seam is called after each
/// (the steps of [`rewind_durable::write_atomic`]).
pub use rewind_durable::Step as WriteStep;

/// A hook called after each [`WriteStep`] (tests use it to kill the writer there).
pub type CrashSeam = rewind_durable::CrashSeam<WriteStep>;
pub use rewind_durable::{Clock, system_clock};

/// The content of one partition file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// The format version ([`FORMAT_VERSION`] when written by this build).
    pub version: u32,
    /// The partition key.
    pub workspace: String,
    /// The entries, oldest first.
    pub entries: Vec<Entry>,
}

impl Partition {
    /// An empty partition for `key`.
    pub fn empty(key: &WorkspaceKey) -> Self {
        Self {
            version: FORMAT_VERSION,
            workspace: key.as_str().to_owned(),
            entries: Vec::new(),
        }
    }

    /// The entries, newest first (the order the history page shows).
    pub fn newest_first(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().rev()
    }

    /// The entry with this op id.
    pub fn find(&self, op_id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.op_id == op_id)
    }

    /// The chain tail of a session: its newest entry that is not undone and
    /// not a rewind that was rolled back or abandoned (those changed no file
    /// that an undo could put back).
    pub fn chain_tail(&self, session_id: &str) -> Option<&Entry> {
        self.newest_first().find(|e| {
            e.session_id == session_id
                && !e.is_undone()
                && !matches!(e.outcome, Outcome::RolledBack | Outcome::Abandoned)
        })
    }

    /// Interrupted rewinds and undos of a session, newest first: entries still
    /// `started`, and entries whose undo began and never ended.
    pub fn interrupted<'a>(&'a self, session_id: &'a str) -> impl Iterator<Item = &'a Entry> {
        self.newest_first().filter(move |e| {
            e.session_id == session_id && (e.is_started() || e.is_undo_interrupted())
        })
    }

    /// The partition as pretty JSON (the export format; identical to the file).
    pub fn to_json(&self) -> String {
        // Serializing plain strings and numbers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// What a write did besides its change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteNotes {
    /// A corrupt `history.json` found by the write was renamed to this name
    /// (inside the partition directory) and replaced.
    pub quarantined: Option<String>,
    /// Entries of that corrupt file that could still be read and were kept.
    pub salvaged: usize,
}

/// A damaged `history.json` read leniently: what could be read, and why the
/// file is damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Salvaged {
    /// The entries that could be read (every one valid on its own), oldest first.
    pub partition: Partition,
    /// Why the file is damaged (the strict parser's message).
    pub detail: String,
    /// Entries found in the file but dropped because they could not be read.
    pub dropped: usize,
}

/// Result of [`HistoryStore::append`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendReport {
    /// Entries dropped to keep the limit, oldest first.
    pub dropped: Vec<String>,
    /// What else the write did.
    pub notes: WriteNotes,
}

/// Result of [`HistoryStore::clear`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClearReport {
    /// Number of entries removed.
    pub cleared: usize,
    /// What else the write did.
    pub notes: WriteNotes,
}

/// Result of [`HistoryStore::mark_undone`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkReport {
    /// The entry as written.
    pub entry: Entry,
    /// What else the write did.
    pub notes: WriteNotes,
}

enum ParseFailure {
    Newer(u64),
    Corrupt(String),
}

#[derive(Deserialize)]
struct VersionProbe {
    #[serde(default)]
    version: Option<u64>,
}

fn parse(bytes: &[u8], key: &WorkspaceKey) -> Result<Partition, ParseFailure> {
    // First only the version (a newer file must be refused, not misread as
    // corrupt), then the whole file in the shape of this version.
    let probe: VersionProbe =
        serde_json::from_slice(bytes).map_err(|e| ParseFailure::Corrupt(e.to_string()))?;
    let version = probe
        .version
        .ok_or_else(|| ParseFailure::Corrupt("missing \"version\"".into()))?;
    if version > u64::from(FORMAT_VERSION) {
        return Err(ParseFailure::Newer(version));
    }
    if version == 0 {
        return Err(ParseFailure::Corrupt(
            "version 0 is not a valid history version".into(),
        ));
    }
    let partition: Partition =
        serde_json::from_slice(bytes).map_err(|e| ParseFailure::Corrupt(e.to_string()))?;
    if partition.workspace != key.as_str() {
        return Err(ParseFailure::Corrupt(format!(
            "file names workspace {:?} but lives in partition {:?}",
            partition.workspace,
            key.as_str()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for e in &partition.entries {
        if e.op_id.is_empty() || e.session_id.is_empty() {
            return Err(ParseFailure::Corrupt(
                "an entry has an empty opId or sessionId".into(),
            ));
        }
        if e.workspace != partition.workspace {
            return Err(ParseFailure::Corrupt(format!(
                "entry {} names workspace {:?}",
                e.op_id, e.workspace
            )));
        }
        if !seen.insert(e.op_id.as_str()) {
            return Err(ParseFailure::Corrupt(format!(
                "op id {} appears twice",
                e.op_id
            )));
        }
    }
    Ok(partition)
}

/// Reads what can be read from a damaged partition file: the `entries` array
/// (if the file is JSON with one), each entry parsed on its own and kept when it
/// is valid by itself (non-empty ids, the partition's workspace, first of its
/// op id). Returns `None` for a file of a newer version (never misread).
fn salvage(bytes: &[u8], key: &WorkspaceKey, detail: String) -> Option<Salvaged> {
    let mut out = Salvaged {
        partition: Partition::empty(key),
        detail,
        dropped: 0,
    };
    let Ok(serde_json::Value::Object(root)) = serde_json::from_slice::<serde_json::Value>(bytes)
    else {
        return Some(out);
    };
    if root
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .is_some_and(|v| v > u64::from(FORMAT_VERSION))
    {
        return None;
    }
    let Some(serde_json::Value::Array(items)) = root.get("entries") else {
        return Some(out);
    };
    let mut seen = std::collections::HashSet::new();
    for item in items {
        match serde_json::from_value::<Entry>(item.clone()) {
            Ok(e)
                if !e.op_id.is_empty()
                    && !e.session_id.is_empty()
                    && e.workspace == key.as_str()
                    && seen.insert(e.op_id.clone()) =>
            {
                out.partition.entries.push(e)
            }
            _ => out.dropped += 1,
        }
    }
    Some(out)
}

fn rel(key: &WorkspaceKey, name: &str) -> PathBuf {
    Path::new(key.as_str()).join(name)
}

/// Per-workspace rewind history under one root directory.
///
/// Layout: `<root>/<workspace key>/history.json`, next to a `.history.lock`
/// lock file. The ambient root path enters only in [`HistoryStore::open`];
/// everything else goes through a capability handle on it.
///
/// Writes (`append`, `clear`, `mark_undone`) are serialized per partition by
/// a process-wide lock and an OS file lock (so threads and processes never
/// interleave) and are atomic: the new content goes to a temp file which is
/// synced, renamed over `history.json`, and the directory synced. A reader
/// sees the old file or the new one, never a torn one.
pub struct HistoryStore {
    root: Dir,
    root_path: PathBuf,
    limit: usize,
    clock: Clock,
    crash: Option<CrashSeam>,
}

impl std::fmt::Debug for HistoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryStore")
            .field("root", &self.root_path)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl HistoryStore {
    /// Opens (creating it if missing) the history root, e.g.
    /// `<dsh home>/rewind-history`. The only place an ambient path enters.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, OpenError> {
        let root = root.as_ref();
        let io = |source| OpenError::Io {
            path: root.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(root).map_err(io)?;
        let canonical = std::fs::canonicalize(root).map_err(io)?;
        let dir = Dir::open_ambient_dir(&canonical, ambient_authority()).map_err(io)?;
        Ok(Self {
            root: dir,
            root_path: canonical,
            limit: DEFAULT_HISTORY_LIMIT,
            clock: system_clock(),
            crash: None,
        })
    }

    /// Sets the number of entries kept per partition (`historyLimit`),
    /// clamped to `1..=`[`MAX_HISTORY_LIMIT`]. Applies at the next write.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.clamp(1, MAX_HISTORY_LIMIT);
        self
    }

    /// Replaces the clock (used to name renamed-aside corrupt files).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Installs a hook called after every step of an atomic write.
    pub fn with_crash_seam(mut self, seam: CrashSeam) -> Self {
        self.crash = Some(seam);
        self
    }

    /// The configured entry limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The canonical root path (for messages only).
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    fn partition_dir(&self, key: &WorkspaceKey, create: bool) -> Result<Option<Dir>, WriteError> {
        let path = PathBuf::from(key.as_str());
        match self.root.symlink_metadata(key.as_str()) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(WriteError::NotADirectory { path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !create {
                    return Ok(None);
                }
                match self.root.create_dir(key.as_str()) {
                    Ok(()) => self.sync_root().map_err(|source| WriteError::Io {
                        op: "sync",
                        path: ".".into(),
                        source,
                    })?,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(source) => {
                        return Err(WriteError::Io {
                            op: "create dir",
                            path,
                            source,
                        });
                    }
                }
                if !self
                    .root
                    .symlink_metadata(key.as_str())
                    .map(|m| m.is_dir())
                    .unwrap_or(false)
                {
                    return Err(WriteError::NotADirectory { path });
                }
            }
            Err(source) => {
                return Err(WriteError::Io {
                    op: "stat",
                    path,
                    source,
                });
            }
        }
        self.root
            .open_dir(key.as_str())
            .map(Some)
            .map_err(|source| WriteError::Io {
                op: "open dir",
                path,
                source,
            })
    }

    fn sync_root(&self) -> io::Result<()> {
        sync_dir(&self.root)
    }

    /// Reads a partition. A missing partition reads as empty. Never changes
    /// anything on disk.
    pub fn read(&self, key: &WorkspaceKey) -> Result<Partition, ReadError> {
        let dir = match self.partition_dir(key, false) {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(Partition::empty(key)),
            Err(WriteError::NotADirectory { path }) => {
                return Err(ReadError::NotADirectory { path });
            }
            Err(WriteError::Io { op, path, source }) => {
                return Err(ReadError::Io { op, path, source });
            }
            Err(WriteError::NewerVersion {
                path,
                found,
                supported,
            }) => {
                return Err(ReadError::NewerVersion {
                    path,
                    found,
                    supported,
                });
            }
        };
        let path = rel(key, HISTORY_FILE);
        let bytes = match read_raw(&dir) {
            Ok(Raw::Bytes(b)) => b,
            Ok(Raw::Missing) => return Ok(Partition::empty(key)),
            Ok(Raw::NotRegular) => {
                return Err(ReadError::Corrupt {
                    path,
                    detail: "not a regular file".into(),
                });
            }
            Err(source) => {
                return Err(ReadError::Io {
                    op: "read",
                    path,
                    source,
                });
            }
        };
        parse(&bytes, key).map_err(|f| match f {
            ParseFailure::Newer(found) => ReadError::NewerVersion {
                path,
                found,
                supported: FORMAT_VERSION,
            },
            ParseFailure::Corrupt(detail) => ReadError::Corrupt { path, detail },
        })
    }

    /// The keys of every partition on disk (directories under the root whose names are
    /// valid keys), sorted. Entries that are not directories or not keys are skipped.
    pub fn partition_keys(&self) -> Result<Vec<WorkspaceKey>, ReadError> {
        let entries = self.root.entries().map_err(|source| ReadError::Io {
            op: "list",
            path: ".".into(),
            source,
        })?;
        let mut keys = Vec::new();
        for e in entries.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let is_dir = self
                .root
                .symlink_metadata(&name)
                .map(|m| m.is_dir())
                .unwrap_or(false);
            if let (true, Ok(key)) = (is_dir, WorkspaceKey::parse(&name)) {
                keys.push(key);
            }
        }
        keys.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(keys)
    }

    /// Reads a partition, keeping what can be read of a damaged file: `Ok((p,
    /// None))` for a sound file, `Ok((p, Some(s)))` with the readable entries
    /// when the file is damaged (see [`Salvaged`]). Other failures (a newer
    /// version, a disk error) are errors. Never changes anything on disk.
    pub fn read_salvaged(
        &self,
        key: &WorkspaceKey,
    ) -> Result<(Partition, Option<Salvaged>), ReadError> {
        match self.read(key) {
            Ok(p) => Ok((p, None)),
            Err(ReadError::Corrupt { path, detail }) => {
                let dir = match self.partition_dir(key, false) {
                    Ok(Some(d)) => d,
                    _ => return Err(ReadError::Corrupt { path, detail }),
                };
                let bytes = match read_raw(&dir) {
                    Ok(Raw::Bytes(b)) => b,
                    _ => Vec::new(),
                };
                let salvaged = salvage(&bytes, key, detail.clone())
                    .ok_or(ReadError::Corrupt { path, detail })?;
                Ok((salvaged.partition.clone(), Some(salvaged)))
            }
            Err(e) => Err(e),
        }
    }

    /// The partition as JSON (pretty, the same shape as the file; an empty
    /// partition when none exists).
    pub fn export(&self, key: &WorkspaceKey) -> Result<String, ReadError> {
        self.read(key).map(|p| p.to_json())
    }

    /// Appends an entry, then drops the oldest entries beyond the limit.
    pub fn append(&self, key: &WorkspaceKey, entry: Entry) -> Result<AppendReport, AppendError> {
        if entry.op_id.is_empty() {
            return Err(AppendError::EmptyField { field: "opId" });
        }
        if entry.session_id.is_empty() {
            return Err(AppendError::EmptyField { field: "sessionId" });
        }
        if entry.workspace != key.as_str() {
            return Err(AppendError::WrongWorkspace {
                op_id: entry.op_id,
                entry_workspace: entry.workspace,
                partition: key.as_str().to_owned(),
            });
        }
        let limit = self.limit;
        let (dropped, notes) = self.update(key, move |p| {
            if p.find(&entry.op_id).is_some() {
                return Err(AppendError::DuplicateOp { op_id: entry.op_id });
            }
            let mut entry = entry;
            entry.paths.truncate();
            p.entries.push(entry);
            let excess = p.entries.len().saturating_sub(limit);
            let dropped = p.entries.drain(..excess).map(|e| e.op_id).collect();
            Ok((dropped, true))
        })?;
        Ok(AppendReport { dropped, notes })
    }

    /// Removes every entry of a partition (records only; snapshots and
    /// conversations are elsewhere and untouched).
    pub fn clear(&self, key: &WorkspaceKey) -> Result<ClearReport, ClearError> {
        let (cleared, notes) = self.update(key, |p| {
            let n = p.entries.len();
            p.entries.clear();
            Ok::<_, WriteError>((n, true))
        })?;
        Ok(ClearReport { cleared, notes })
    }

    /// Records that the entry `op_id` was undone at `time` (ms since the epoch).
    pub fn mark_undone(
        &self,
        key: &WorkspaceKey,
        op_id: &str,
        outcome: UndoOutcome,
        mode: UndoMode,
        time: u64,
    ) -> Result<MarkReport, MarkUndoneError> {
        let (entry, notes) = self.update(key, |p| {
            let Some(e) = p.entries.iter_mut().find(|e| e.op_id == op_id) else {
                return Err(MarkUndoneError::UnknownEntry {
                    op_id: op_id.to_owned(),
                });
            };
            if let Some(undone_at) = e.undone_at {
                return Err(MarkUndoneError::AlreadyUndone {
                    op_id: op_id.to_owned(),
                    undone_at,
                });
            }
            e.undone_at = Some(time);
            e.undo_outcome = Some(outcome);
            // An undo that continued the conversation in a new session says so.
            e.undo_mode = Some(if e.undo_session_id.is_some() {
                UndoMode::FilesAndConversation
            } else {
                mode
            });
            Ok((e.clone(), true))
        })?;
        Ok(MarkReport { entry, notes })
    }

    /// Ends a `started` entry: sets its outcome (anything but `started`) and,
    /// when given, its paths (counts from the lists). Refused
    /// ([`SettleError::WrongState`]) when the entry is not `started`, so a
    /// settled entry is never rewritten by a late or repeated finish.
    pub fn finish(
        &self,
        key: &WorkspaceKey,
        op_id: &str,
        outcome: Outcome,
        paths: Option<&Paths>,
    ) -> Result<MarkReport, SettleError> {
        let (entry, notes) = self.update(key, |p| {
            let e = find_mut(p, op_id)?;
            if !e.is_started() || !outcome.is_settled() {
                return Err(wrong_state(e, "only a started entry can be finished"));
            }
            e.outcome = outcome;
            if let Some(paths) = paths {
                e.paths = paths.clone();
                e.counts = paths.counts();
                e.paths.truncate();
            }
            Ok((e.clone(), true))
        })?;
        Ok(MarkReport { entry, notes })
    }

    /// Records, before an undo changes any file, that the undo of `op_id`
    /// began at `time`. Refused when the entry is undone already or not a
    /// settled rewind.
    pub fn mark_undo_started(
        &self,
        key: &WorkspaceKey,
        op_id: &str,
        time: u64,
    ) -> Result<MarkReport, SettleError> {
        self.mark_undo_started_in(key, op_id, time, None)
    }

    /// [`mark_undo_started`](Self::mark_undo_started), naming the session the
    /// conversation as it was before the rewind continues in (created after this
    /// record is durable; a restart that finds it missing creates it).
    pub fn mark_undo_started_in(
        &self,
        key: &WorkspaceKey,
        op_id: &str,
        time: u64,
        undo_session_id: Option<&str>,
    ) -> Result<MarkReport, SettleError> {
        let (entry, notes) = self.update(key, |p| {
            let e = find_mut(p, op_id)?;
            if e.is_undone() || e.is_started() {
                return Err(wrong_state(e, "an undo needs a settled, not undone rewind"));
            }
            if e.undo_started_at.is_none() {
                e.undo_started_at = Some(time);
                e.undo_session_id = undo_session_id.map(str::to_owned);
            }
            Ok((e.clone(), true))
        })?;
        Ok(MarkReport { entry, notes })
    }

    /// Records that the interrupted restore of entry `op_id` was continued: see
    /// [`Entry::merge_continued`].
    pub fn settle_continued(
        &self,
        key: &WorkspaceKey,
        op_id: &str,
        continued: &Paths,
    ) -> Result<MarkReport, SettleError> {
        let (entry, notes) = self.update(key, |p| {
            let Some(e) = p.entries.iter_mut().find(|e| e.op_id == op_id) else {
                return Err(SettleError::UnknownEntry {
                    op_id: op_id.to_owned(),
                });
            };
            e.merge_continued(continued);
            Ok((e.clone(), true))
        })?;
        Ok(MarkReport { entry, notes })
    }

    /// Read-modify-write of one partition under both locks. `f` returns its
    /// result and whether the partition changed.
    fn update<R, E: From<WriteError>>(
        &self,
        key: &WorkspaceKey,
        f: impl FnOnce(&mut Partition) -> Result<(R, bool), E>,
    ) -> Result<(R, WriteNotes), E> {
        let dir = self
            .partition_dir(key, true)?
            .ok_or_else(|| WriteError::NotADirectory {
                path: key.as_str().into(),
            })?;
        let guard = process_lock(&self.root_path.join(key.as_str()));
        let _held = guard.lock().unwrap_or_else(|p| p.into_inner());
        let lock_file = rewind_durable::lock_exclusive(&dir, LOCK_FILE).map_err(|e| {
            WriteError::Io {
                op: if e.op() == "lock" { "lock" } else { "open lock" },
                path: rel(key, LOCK_FILE),
                source: e.into_io(),
            }
        })?;

        // Only under the partition's locks, so no writer is mid-write: any
        // temp file left is from a writer that died.
        rewind_durable::remove_temps(&dir, TMP_PREFIX);
        let mut notes = WriteNotes::default();
        let path = rel(key, HISTORY_FILE);
        let mut partition = match read_raw(&dir) {
            Ok(Raw::NotRegular) => {
                notes.quarantined = Some(self.quarantine(&dir, key)?);
                Partition::empty(key)
            }
            Ok(Raw::Bytes(bytes)) => match parse(&bytes, key) {
                Ok(p) => p,
                Err(ParseFailure::Newer(found)) => {
                    return Err(WriteError::NewerVersion {
                        path,
                        found,
                        supported: FORMAT_VERSION,
                    }
                    .into());
                }
                Err(ParseFailure::Corrupt(detail)) => {
                    // The damaged bytes are kept aside; the entries that can still be
                    // read carry over, so a damaged file never empties the page.
                    let kept = salvage(&bytes, key, detail).map(|s| s.partition);
                    notes.quarantined = Some(self.quarantine(&dir, key)?);
                    let kept = kept.unwrap_or_else(|| Partition::empty(key));
                    notes.salvaged = kept.entries.len();
                    kept
                }
            },
            Ok(Raw::Missing) => Partition::empty(key),
            Err(source) => {
                return Err(WriteError::Io {
                    op: "read",
                    path,
                    source,
                }
                .into());
            }
        };
        let (result, changed) = f(&mut partition)?;
        if changed {
            partition.version = FORMAT_VERSION;
            self.write_atomic(&dir, key, partition.to_json().as_bytes())?;
        }
        drop(lock_file);
        Ok((result, notes))
    }

    fn quarantine(&self, dir: &Dir, key: &WorkspaceKey) -> Result<String, WriteError> {
        let name = rewind_durable::rename_aside(dir, HISTORY_FILE, (self.clock)()).map_err(
            |source| WriteError::Io {
                op: "rename aside",
                path: rel(key, HISTORY_FILE),
                source,
            },
        )?;
        sync_dir(dir).map_err(|source| WriteError::Io {
            op: "sync",
            path: key.as_str().into(),
            source,
        })?;
        Ok(name)
    }

    fn write_atomic(&self, dir: &Dir, key: &WorkspaceKey, bytes: &[u8]) -> Result<(), WriteError> {
        let seam = self.crash.as_deref();
        rewind_durable::write_atomic(dir, HISTORY_FILE, TMP_PREFIX, bytes, &mut |step| {
            if let Some(seam) = seam {
                seam(step);
            }
        })
        .map_err(|e| match e.op {
            // The rename is done; only its durability failed.
            AtomicOp::SyncDir => WriteError::Io {
                op: "sync",
                path: key.as_str().into(),
                source: e.source,
            },
            op => WriteError::Io {
                op: op.name(),
                path: rel(key, &e.temp),
                source: e.source,
            },
        })
    }
}

enum Raw {
    Missing,
    NotRegular,
    Bytes(Vec<u8>),
}

/// Reads `history.json` if it is a regular file. A symlink or anything else
/// in its place is reported, never followed.
fn read_raw(dir: &Dir) -> io::Result<Raw> {
    match dir.symlink_metadata(HISTORY_FILE) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(Raw::NotRegular),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Raw::Missing),
        Err(e) => return Err(e),
    }
    match dir.read(HISTORY_FILE) {
        Ok(b) => Ok(Raw::Bytes(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Raw::Missing),
        Err(e) => Err(e),
    }
}

fn find_mut<'p>(p: &'p mut Partition, op_id: &str) -> Result<&'p mut Entry, SettleError> {
    p.entries
        .iter_mut()
        .find(|e| e.op_id == op_id)
        .ok_or_else(|| SettleError::UnknownEntry {
            op_id: op_id.to_owned(),
        })
}

fn wrong_state(e: &Entry, wanted: &'static str) -> SettleError {
    let state = if e.is_undone() {
        "undone".to_owned()
    } else {
        serde_json::to_value(e.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    SettleError::WrongState {
        op_id: e.op_id.clone(),
        state,
        wanted,
    }
}
