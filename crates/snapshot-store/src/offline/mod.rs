//! Offline access for tools that work on a store outside the host (the
//! `dsh-rewind` command line): session holds, a storage inventory, a full
//! integrity check, quarantine of what is corrupt, and verified blob reads.
//!
//! Nothing here changes a record. [`Store::quarantine`] only moves corrupt
//! files aside (into `quarantine/`), never deletes them.

mod check;
mod lost;
mod verify;

pub use lost::{LOST_NOTE, RecordsLost};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::{Dir, OpenOptions};
use rewind_durable::ms_since_epoch as ms;
use rustix::fs::FlockOperation;
use sha2::{Digest, Sha256};

use crate::error::{CorruptFile, Fault, FsFailure, PruneError, QueryError};
use crate::format::{
    BeforeState, BoundaryRecord, GroupRecord, Known, PendingLine, SessionMarker, TrackedRecord,
    parse_lines, parse_record,
};
use crate::fsio::unique_suffix;
use crate::journal::JournalIntent;
use crate::path::{decode_id, encode_id, is_hidden, valid_sha};
use crate::records::parse_anchor;
use crate::scan_record::ScanState;
use crate::seam::{Area, FsOp};
use crate::session::Session;
use crate::store::Store;

/// Directory of the per-session hold files, relative to the store root.
pub const HOLDS_DIR: &str = "holds";
/// Directory that [`Store::quarantine`] moves corrupt files into.
pub const QUARANTINE_DIR: &str = "quarantine";

/// A held lock on one session's hold file (`holds/<encoded id>.lock`); released on drop.
///
/// A host takes it shared ([`Store::hold_session`]) for as long as it keeps the
/// session open; an offline tool takes it exclusively ([`Store::claim_session`])
/// before changing anything, so the two never work on one session at once.
///
/// Dropping it unlocks the file explicitly before closing it: a child process forked by
/// another thread holds a copy of the descriptor until it execs (close-on-exec applies only
/// then), and a lock released by the close alone would stay held through that copy.
#[derive(Debug)]
pub struct SessionHold {
    file: cap_std::fs::File,
}

impl Drop for SessionHold {
    fn drop(&mut self) {
        // flock's unlock releases the lock of the open file description, which a forked
        // child's copy of the descriptor shares.
        let _ = rustix::fs::flock(&self.file, FlockOperation::Unlock);
    }
}

/// Storage used by one session of the store (see [`Store::inventory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionUsage {
    /// The session id.
    pub session_id: String,
    /// Files of the session's directory (records, journals), excluding blobs.
    pub record_files: u64,
    /// Their bytes.
    pub record_bytes: u64,
    /// Newest modification time inside the session directory, ms since the Unix epoch.
    pub last_activity_ms: u64,
    /// Per anchor (ascending): how many distinct paths have a before-state there.
    pub anchors: Vec<(u64, usize)>,
    /// Distinct blobs the session's records reference (present ones).
    pub blobs: usize,
    /// Their bytes (shared blobs counted in every session that references them).
    pub blob_bytes: u64,
    /// Bytes of the blobs no other session references (freed if this session went).
    pub exclusive_blob_bytes: u64,
    /// Op ids of restore journals that are still open.
    pub open_journals: Vec<String>,
    /// The workspace (its key) the session's scans name, if it scanned one.
    pub workspace: Option<String>,
    /// The session's scan state (`scan.json`) could not be read (torn, corrupt, newer):
    /// which workspace it uses is not known (not serialized).
    #[serde(skip)]
    pub workspace_unknown: bool,
    /// The present blobs the session references, with their sizes (not serialized).
    #[serde(skip)]
    pub referenced: BTreeMap<String, u64>,
}

/// Storage used by one workspace's scan state, `workspaces/<key>/` (see [`Store::inventory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceUsage {
    /// The workspace key ([`crate::workspace_key`] of its canonical path).
    pub key: String,
    /// Bytes of the workspace directory's own files (the index, its spare and delta, the lock).
    pub index_bytes: u64,
    /// Distinct present blobs the index references (the scan's baseline).
    pub blobs: usize,
    /// Their bytes (shared blobs counted here and in every session that references them).
    pub blob_bytes: u64,
    /// Bytes of the blobs nothing else references.
    pub exclusive_blob_bytes: u64,
    /// Newest modification time of the directory's files, ms since the Unix epoch. The
    /// blob sweep removes the directory of a workspace no session names once this is
    /// [`WORKSPACE_UNUSED_GRACE`](crate::WORKSPACE_UNUSED_GRACE) old.
    pub last_write_ms: u64,
    /// The present blobs the index references, with their sizes (not serialized).
    #[serde(skip)]
    pub referenced: BTreeMap<String, u64>,
}

/// What [`Store::inventory`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Inventory {
    /// Sessions, sorted by id.
    pub sessions: Vec<SessionUsage>,
    /// Workspace scan states (`workspaces/<key>/`), sorted by key.
    pub workspaces: Vec<WorkspaceUsage>,
    /// Blob files in `blobs/`.
    pub blobs: usize,
    /// Their bytes.
    pub blob_bytes: u64,
    /// Blobs no record references (what garbage collection would free).
    pub unreferenced_blobs: usize,
    /// Their bytes.
    pub unreferenced_bytes: u64,
    /// Records that could not be read; the usage of their session is then a lower bound.
    pub problems: Vec<Problem>,
    /// Blobs held by packs only (no loose copy); they are among `blobs`, and their
    /// `blob_bytes` share is their part of the packs' bytes on disk.
    pub packed_blobs: usize,
    /// The uncompressed length of every packed-only blob (by name): what it holds, where
    /// `blob_bytes` and the sessions' sizes count what it takes on disk.
    pub packed_logical: std::collections::BTreeMap<String, u64>,
    /// The bytes on disk counted for every packed-only blob: its share of its pack.
    pub packed_share: std::collections::BTreeMap<String, u64>,
    /// Bytes of every file under the store root as the filesystem allocates them (blocks),
    /// packs, loose blobs, records, indexes, journals and spares alike.
    pub disk_bytes: u64,
}

impl Inventory {
    /// The logical size of the store: what [`Inventory::total_bytes`] counts, with each
    /// packed blob at its uncompressed length.
    pub fn logical_bytes(&self) -> u64 {
        let share: u64 = self.packed_share.values().sum();
        let logical: u64 = self.packed_logical.values().sum();
        self.total_bytes().saturating_sub(share) + logical
    }

    /// The uncompressed length of blob `sha` given the size the inventory counts for it.
    pub fn logical_of(&self, sha: &str, counted: u64) -> u64 {
        self.packed_logical.get(sha).copied().unwrap_or(counted)
    }

    /// Bytes the whole store takes: session records, workspace indexes and every blob
    /// (each counted once).
    pub fn total_bytes(&self) -> u64 {
        self.sessions.iter().map(|s| s.record_bytes).sum::<u64>()
            + self.workspaces.iter().map(|w| w.index_bytes).sum::<u64>()
            + self.blob_bytes
    }
}

/// One integrity problem (see [`Store::verify`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Problem {
    /// A record (store-relative `path`) is malformed or inconsistent.
    CorruptRecord {
        /// Store-relative path.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// A record was written by a newer build: not judged, never quarantined.
    NewerRecord {
        /// Store-relative path.
        path: String,
        /// Version found.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// A blob's bytes do not hash to its name.
    CorruptBlob {
        /// The blob's name.
        sha256: String,
        /// The hash of its bytes.
        actual: String,
        /// Its length.
        size: u64,
    },
    /// A member of a pack does not read back as its name says: its chunk is damaged
    /// (torn, a flipped byte: the checksum or the decompression fails) or its bytes do not
    /// hash to its name. A quarantine copies the pack's sound members into a new pack and
    /// moves the pack and its index aside; a loose copy of the same content, if any, still
    /// serves the damaged one.
    CorruptPackMember {
        /// Store-relative path of the pack (`packs/pack-<id>.pack`).
        pack: String,
        /// The member's name.
        sha256: String,
        /// What is wrong.
        detail: String,
    },
    /// A record references a blob that is not in the store.
    MissingBlob {
        /// The missing blob's name.
        sha256: String,
        /// Store-relative paths of the records naming it (at most 10).
        referenced_by: Vec<String>,
    },
    /// A record references a before-state held as a reference to a git blob
    /// (`gitrefs/<sha256>`) whose object the repository no longer holds (pruned): a rewind
    /// that needs it is refused, naming the file.
    MissingGitObject {
        /// The before-state's name (its SHA-256).
        sha256: String,
        /// The git object id (hex SHA-1).
        oid: String,
        /// The repository's work tree.
        repo: String,
        /// Store-relative paths of the records naming it (at most 10).
        referenced_by: Vec<String>,
    },
    /// A file or directory could not be read at all.
    Unreadable {
        /// Store-relative path.
        path: String,
        /// The error.
        detail: String,
    },
}

impl Problem {
    /// The store-relative path (or blob name) the problem is about.
    pub fn subject(&self) -> String {
        match self {
            Problem::CorruptRecord { path, .. }
            | Problem::NewerRecord { path, .. }
            | Problem::Unreadable { path, .. } => path.clone(),
            Problem::CorruptBlob { sha256, .. } | Problem::MissingBlob { sha256, .. } => {
                format!("blobs/{sha256}")
            }
            Problem::CorruptPackMember { pack, sha256, .. } => format!("{pack}#{sha256}"),
            Problem::MissingGitObject { sha256, .. } => format!("gitrefs/{sha256}"),
        }
    }

    /// Whether [`Store::quarantine`] moves it aside.
    pub fn quarantinable(&self) -> bool {
        matches!(
            self,
            Problem::CorruptRecord { .. }
                | Problem::CorruptBlob { .. }
                | Problem::CorruptPackMember { .. }
        )
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::CorruptRecord { path, detail } => write!(f, "corrupt record {path}: {detail}"),
            Problem::NewerRecord {
                path,
                found,
                supported,
            } => write!(
                f,
                "newer record {path}: version {found}, this build reads up to {supported}"
            ),
            Problem::CorruptBlob {
                sha256,
                actual,
                size,
            } => write!(
                f,
                "corrupt blob blobs/{sha256}: its {size} bytes hash to {actual}"
            ),
            Problem::CorruptPackMember {
                pack,
                sha256,
                detail,
            } => write!(f, "corrupt pack member {sha256} in {pack}: {detail}"),
            Problem::MissingBlob {
                sha256,
                referenced_by,
            } => write!(
                f,
                "missing blob blobs/{sha256}, named by {}",
                referenced_by.join(", ")
            ),
            Problem::MissingGitObject {
                sha256,
                oid,
                repo,
                referenced_by,
            } => write!(
                f,
                "missing git object {oid} of the repository at {repo} (gitrefs/{sha256}), named by {}",
                referenced_by.join(", ")
            ),
            Problem::Unreadable { path, detail } => write!(f, "unreadable {path}: {detail}"),
        }
    }
}

/// Something [`Store::verify`] found that is not damage but that a reader should know:
/// bytes every reader ignores, records a repair could not keep.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Warning {
    /// A record log ends in bytes that are not a whole frame (a torn tail, see
    /// `docs/format.md`): every reader ignores them and the next write cuts them off. A
    /// crash while appending leaves such a tail, and loses nothing that had been written
    /// whole; a log cut short by other means loses the records in them (and any frames
    /// after them, which nothing can tell).
    IgnoredTail {
        /// Store-relative path of the log.
        path: String,
        /// Where the ignored bytes start (the end of the last whole frame, or 0 when not
        /// even the header is whole).
        offset: u64,
        /// How many bytes are ignored.
        bytes: u64,
    },
    /// A repair kept only part of a session's record log (see [`Store::records_lost`]).
    RecordsLost {
        /// Store-relative path of the note.
        note: String,
        /// What was lost.
        loss: RecordsLost,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::IgnoredTail {
                path,
                offset,
                bytes,
            } => write!(
                f,
                "{path}: {bytes} byte(s) from offset {offset} are not a whole frame and are ignored (a crash while appending leaves such a tail, which the next write cuts off; a file cut short otherwise lost the records in them)"
            ),
            Warning::RecordsLost { note, loss } => {
                write!(
                    f,
                    "records of session {} were lost at a repair: {} byte(s) from offset {} are no longer read",
                    loss.session_id, loss.lost_bytes, loss.kept_bytes
                )?;
                if !loss.quarantined.is_empty() {
                    write!(f, " (kept in {})", loss.quarantined)?;
                }
                write!(f, ": {} [{note}]", loss.detail)
            }
        }
    }
}

/// What [`Store::verify`] checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Record files parsed.
    pub records: u64,
    /// Blobs re-hashed.
    pub blobs: u64,
    /// Bytes re-hashed.
    pub blob_bytes: u64,
    /// Everything wrong, in a stable order (records by path, then blobs).
    pub problems: Vec<Problem>,
    /// What is not damage but is not whole either: ignored tails of record logs, records
    /// lost at a repair (by path).
    pub warnings: Vec<Warning>,
}

/// Progress of a long [`Store::verify`]: `(blobs hashed, blobs in total)`.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// What [`Store::quarantine`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QuarantineReport {
    /// Store-relative directory the files were moved into (`quarantine/<stamp>`), when any.
    pub dir: Option<String>,
    /// Store-relative paths moved there (same relative path below `dir`).
    pub moved: Vec<String>,
    /// Blobs a moved record names, linked (or copied) beside it so garbage
    /// collection can no longer lose them.
    pub kept_blobs: Vec<String>,
    /// Problems that were no longer there when re-checked under the lock.
    pub gone: Vec<String>,
    /// Problems quarantine cannot fix (missing blobs, newer records, unreadable paths).
    pub left: Vec<Problem>,
    /// Record logs of which only part was kept (or nothing): what was lost, as noted in
    /// each session's directory ([`Store::records_lost`]).
    pub records_lost: Vec<RecordsLost>,
}

/// A blob read back by [`Store::read_blob`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobRead {
    /// The blob's verified bytes.
    Bytes(Vec<u8>),
    /// The blob is larger than the limit: not read.
    TooLarge {
        /// Its size.
        size: u64,
    },
    /// No such blob.
    Missing,
    /// Its bytes do not hash to its name.
    Corrupt {
        /// The hash of its bytes.
        actual: String,
    },
}

/// Everything one session's records say, read without failing on the first problem.
#[derive(Default)]
struct SessionWalk {
    usage: SessionUsage,
    /// blob → indexes into `sources` of the records naming it.
    refs: HashMap<String, Vec<u32>>,
    /// Store-relative paths of the records read.
    sources: Vec<String>,
    /// Blobs the tracked cache names: live when present, never "missing" (the cache may
    /// name content that was never stored).
    soft: HashSet<String>,
    /// Blobs the session's log keeps (`blob` records): never "missing".
    kept: HashSet<String>,
    records: u64,
    /// Ignored tails, records lost at a repair.
    warnings: Vec<Warning>,
}

impl SessionWalk {
    /// Every blob the session keeps alive, given the set of present blobs.
    fn live<'a>(
        &'a self,
        present: &'a HashMap<String, u64>,
    ) -> impl Iterator<Item = &'a String> + 'a {
        self.refs
            .keys()
            .chain(self.soft.iter().filter(|s| !self.refs.contains_key(*s)))
            .filter(move |s| present.contains_key(*s))
    }
}

fn now_stamp() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{ms}-{}", unique_suffix())
}

fn show(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn fault_problem(f: Fault) -> Problem {
    match f {
        Fault::Corrupt(c) => Problem::CorruptRecord {
            path: c.path,
            detail: c.detail,
        },
        Fault::Newer(n) => Problem::NewerRecord {
            path: n.path,
            found: n.found,
            supported: n.supported,
        },
        Fault::Fs(e) => Problem::Unreadable {
            path: e.path.clone(),
            detail: e.to_string(),
        },
    }
}

fn fs_problem(path: &Path, e: io::Error) -> Problem {
    Problem::Unreadable {
        path: show(path),
        detail: e.to_string(),
    }
}

/// Hashes a reader; `(sha256, size)`.
fn hash_reader(r: &mut impl Read, mut tick: impl FnMut(u64)) -> io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        total += n as u64;
        tick(n as u64);
    }
    Ok((hex::encode(h.finalize()), total))
}

impl Store {
    fn hold_lock(
        &self,
        session_id: &str,
        op: FlockOperation,
    ) -> Result<Option<SessionHold>, QueryError> {
        self.guard_writable().map_err(QueryError::from)?;
        let enc = encode_id(session_id).map_err(|reason| CorruptFile {
            path: format!("{HOLDS_DIR}/…"),
            detail: format!("invalid session id `{session_id}`: {reason}"),
        })?;
        let fs = &self.inner.fs;
        fs.create_dir_all(Path::new(HOLDS_DIR))?;
        let path = Path::new(HOLDS_DIR).join(format!("{enc}.lock"));
        fs.io.check(FsOp::Lock, Area::Store, &path)?;
        let fail = |source: io::Error| FsFailure {
            op: FsOp::Lock,
            area: Area::Store,
            path: show(&path),
            source,
        };
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true);
        let file = fs.dir.open_with(&path, &o).map_err(fail)?;
        match rustix::fs::flock(&file, op) {
            Ok(()) => Ok(Some(SessionHold { file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(fail(e.into()).into()),
        }
    }

    /// Marks session `session_id` as held by a live host (a shared lock on
    /// `holds/<encoded id>.lock`, released when the returned guard is dropped or the
    /// process ends). `Ok(None)` when an offline tool holds the session right now.
    pub fn hold_session(&self, session_id: &str) -> Result<Option<SessionHold>, QueryError> {
        self.hold_lock(session_id, FlockOperation::NonBlockingLockShared)
    }

    /// Claims session `session_id` exclusively for an offline tool. `Ok(None)` when a
    /// live host (or another tool) holds it: the caller must refuse to change it.
    pub fn claim_session(&self, session_id: &str) -> Result<Option<SessionHold>, QueryError> {
        self.hold_lock(session_id, FlockOperation::NonBlockingLockExclusive)
    }

    /// Whether a host or tool holds session `session_id` right now (probes and releases;
    /// `false` for a store written by a newer build, whose holds this build cannot judge).
    /// Creates nothing: a session whose hold file does not exist was never held.
    pub fn session_is_held(&self, session_id: &str) -> Result<bool, QueryError> {
        if self.newer_version().is_some() {
            return Ok(false);
        }
        let Ok(enc) = encode_id(session_id) else {
            return Ok(false);
        };
        let path = Path::new(HOLDS_DIR).join(format!("{enc}.lock"));
        if !self.inner.fs.exists(&path)? {
            return Ok(false);
        }
        Ok(self.claim_session(session_id)?.is_none())
    }

    /// Reads every record of every session and sizes every blob: storage per session,
    /// referenced and unreferenced blobs. Records that cannot be read are listed in
    /// [`Inventory::problems`]; no blob file is hashed (see [`Store::verify`]), only the
    /// small contents a session's log keeps, as its records are read.
    pub fn inventory(&self) -> Result<Inventory, QueryError> {
        let (walks, mut problems) = self.walk_all()?;
        let fs = &self.inner.fs;
        let mut sizes: HashMap<String, u64> = HashMap::new();
        for name in fs.list(Path::new("blobs"))? {
            let sha = name.to_string_lossy().into_owned();
            if let Some(size) = fs.loose_size(&sha)? {
                sizes.insert(sha, size);
            }
        }
        // Packed-only blobs count their share of their pack's bytes on disk.
        let (packed_logical, packed_share) = self.packed_sizes(&sizes)?;
        for (sha, share) in &packed_share {
            sizes.insert(sha.clone(), *share);
        }
        // Workspace indexes keep their baseline blobs alive (garbage collection spares them).
        let spaces = crate::scan::workspace_refs(self)?;
        let mut users: HashMap<&str, usize> = HashMap::new();
        for w in &walks {
            for sha in w.live(&sizes) {
                *users.entry(sha.as_str()).or_default() += 1;
            }
        }
        for w in &spaces {
            let distinct: BTreeSet<&String> =
                w.refs.iter().filter(|s| sizes.contains_key(*s)).collect();
            for sha in distinct {
                *users.entry(sha.as_str()).or_default() += 1;
            }
        }
        let mut inv = Inventory {
            blobs: sizes.len(),
            blob_bytes: sizes.values().sum(),
            packed_blobs: packed_share.len(),
            packed_logical,
            packed_share,
            disk_bytes: crate::usage::disk_bytes(&fs.dir),
            ..Inventory::default()
        };
        for (sha, size) in &sizes {
            if !users.contains_key(sha.as_str()) {
                inv.unreferenced_blobs += 1;
                inv.unreferenced_bytes += size;
            }
        }
        for w in &walks {
            let mut u = w.usage.clone();
            let sdir = encode_id(&u.session_id).map(|e| Path::new("sessions").join(e));
            match sdir.map(|d| ScanState::of(fs, &d)) {
                Ok(Ok(ScanState::Read(s))) => u.workspace = Some(s.workspace),
                Ok(Ok(ScanState::Never)) => {}
                Ok(Ok(ScanState::Unknown)) | Err(_) => u.workspace_unknown = true,
                Ok(Err(e)) => return Err(e.into()),
            }
            for sha in w.live(&sizes) {
                if let Some(size) = sizes.get(sha) {
                    u.referenced.insert(sha.clone(), *size);
                    u.blobs += 1;
                    u.blob_bytes += size;
                    if users.get(sha.as_str()) == Some(&1) {
                        u.exclusive_blob_bytes += size;
                    }
                }
            }
            inv.sessions.push(u);
        }
        for w in &spaces {
            let mut u = WorkspaceUsage {
                key: w.key.clone(),
                index_bytes: w.bytes,
                last_write_ms: w.last_write_ms,
                ..WorkspaceUsage::default()
            };
            for sha in &w.refs {
                if let Some(size) = sizes.get(sha) {
                    if u.referenced.insert(sha.clone(), *size).is_none() {
                        u.blobs += 1;
                        u.blob_bytes += size;
                        if users.get(sha.as_str()) == Some(&1) {
                            u.exclusive_blob_bytes += size;
                        }
                    }
                }
            }
            inv.workspaces.push(u);
        }
        inv.workspaces.sort_by(|a, b| a.key.cmp(&b.key));
        problems.sort_by_key(|p| p.subject());
        inv.problems = problems;
        Ok(inv)
    }

    /// The packed blobs without a loose copy in `loose`: their uncompressed lengths, and
    /// their shares of their packs' bytes (a pack's length spread over its members by
    /// their lengths, at least one byte each).
    #[allow(clippy::type_complexity)]
    fn packed_sizes(
        &self,
        loose: &HashMap<String, u64>,
    ) -> Result<(BTreeMap<String, u64>, BTreeMap<String, u64>), QueryError> {
        let fs = &self.inner.fs;
        let packed = fs.packed_all()?;
        let mut raw_of: HashMap<&str, u64> = HashMap::new();
        for (_, loc) in &packed {
            *raw_of.entry(&loc.pack).or_default() += u64::from(loc.size);
        }
        let mut len_of: HashMap<&str, u64> = HashMap::new();
        for id in raw_of.keys() {
            let len = fs.size(&crate::fsio::pack_path(id))?.unwrap_or(0);
            len_of.insert(id, len);
        }
        let (mut logical, mut share) = (BTreeMap::new(), BTreeMap::new());
        for (sha, loc) in &packed {
            if loose.contains_key(sha) {
                continue;
            }
            let size = u64::from(loc.size);
            let raw = raw_of.get(&*loc.pack).copied().unwrap_or(1).max(1);
            let len = len_of.get(&*loc.pack).copied().unwrap_or(0);
            let part = u64::try_from(u128::from(len) * u128::from(size) / u128::from(raw))
                .unwrap_or(u64::MAX)
                .max(1);
            logical.insert(sha.clone(), size);
            share.insert(sha.clone(), part);
        }
        Ok((logical, share))
    }

    /// Reads blob `sha256` whole when it is at most `limit` bytes, verifying its hash.
    pub fn read_blob(&self, sha256: &str, limit: u64) -> Result<BlobRead, QueryError> {
        let fs = &self.inner.fs;
        let Some(size) = fs.blob_size(sha256)? else {
            return Ok(BlobRead::Missing);
        };
        if size > limit {
            return Ok(BlobRead::TooLarge { size });
        }
        let Some(mut f) = fs.blob_open(sha256)? else {
            return Ok(BlobRead::Missing);
        };
        let mut bytes = Vec::with_capacity(size as usize);
        f.read_to_end(&mut bytes).map_err(|source| FsFailure {
            op: FsOp::Read,
            area: Area::Store,
            path: format!("blobs/{sha256}"),
            source,
        })?;
        let actual = hex::encode(Sha256::digest(&bytes));
        if actual != sha256 {
            return Ok(BlobRead::Corrupt { actual });
        }
        Ok(BlobRead::Bytes(bytes))
    }

    fn hash_blob(&self, sha: &str) -> io::Result<Option<(String, u64)>> {
        let f = match self.inner.fs.blob_open(sha) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.source),
        };
        let mut f = f;
        hash_reader(&mut f, |_| {}).map(Some)
    }
}

#[cfg(test)]
mod tests;
