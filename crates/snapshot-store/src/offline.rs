//! Offline access for tools that work on a store outside the host (the
//! `dsh-rewind` command line): session holds, a storage inventory, a full
//! integrity check, quarantine of what is corrupt, and verified blob reads.
//!
//! Nothing here changes a record. [`Store::quarantine`] only moves corrupt
//! files aside (into `quarantine/`), never deletes them.

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
#[derive(Debug)]
pub struct SessionHold {
    _file: cap_std::fs::File,
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
    /// The present blobs the session references, with their sizes (not serialized).
    #[serde(skip)]
    pub referenced: BTreeMap<String, u64>,
}

/// Storage used by one workspace's scan state, `workspaces/<key>/` (see [`Store::inventory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceUsage {
    /// The workspace key ([`crate::workspace_key`] of its canonical path).
    pub key: String,
    /// Bytes of the workspace directory's own files (the index, the lock).
    pub index_bytes: u64,
    /// Distinct present blobs the index references (the scan's baseline).
    pub blobs: usize,
    /// Their bytes (shared blobs counted here and in every session that references them).
    pub blob_bytes: u64,
    /// Bytes of the blobs nothing else references.
    pub exclusive_blob_bytes: u64,
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
}

impl Inventory {
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
    /// A record references a blob that is not in the store.
    MissingBlob {
        /// The missing blob's name.
        sha256: String,
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
        }
    }

    /// Whether [`Store::quarantine`] moves it aside.
    pub fn quarantinable(&self) -> bool {
        matches!(
            self,
            Problem::CorruptRecord { .. } | Problem::CorruptBlob { .. }
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
            Problem::MissingBlob {
                sha256,
                referenced_by,
            } => write!(
                f,
                "missing blob blobs/{sha256}, named by {}",
                referenced_by.join(", ")
            ),
            Problem::Unreadable { path, detail } => write!(f, "unreadable {path}: {detail}"),
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
    records: u64,
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
            Ok(()) => Ok(Some(SessionHold { _file: file })),
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
    /// [`Inventory::problems`]; nothing is hashed (see [`Store::verify`]).
    pub fn inventory(&self) -> Result<Inventory, QueryError> {
        let (walks, mut problems) = self.walk_all()?;
        let fs = &self.inner.fs;
        let mut sizes: HashMap<String, u64> = HashMap::new();
        for name in fs.list(Path::new("blobs"))? {
            let sha = name.to_string_lossy().into_owned();
            if let Some(size) = fs.blob_size(&sha)? {
                sizes.insert(sha, size);
            }
        }
        // Workspace indexes keep their baseline blobs alive (garbage collection spares them).
        let spaces = crate::scan::workspace_refs(self)?;
        let mut users: HashMap<&str, usize> = HashMap::new();
        for w in &walks {
            for sha in w.live(&sizes) {
                *users.entry(sha.as_str()).or_default() += 1;
            }
        }
        for (_, _, refs) in &spaces {
            let distinct: BTreeSet<&String> =
                refs.iter().filter(|s| sizes.contains_key(*s)).collect();
            for sha in distinct {
                *users.entry(sha.as_str()).or_default() += 1;
            }
        }
        let mut inv = Inventory {
            blobs: sizes.len(),
            blob_bytes: sizes.values().sum(),
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
        for (key, index_bytes, refs) in &spaces {
            let mut u = WorkspaceUsage {
                key: key.clone(),
                index_bytes: *index_bytes,
                ..WorkspaceUsage::default()
            };
            for sha in refs {
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

    /// Checks the whole store: every record of every session is parsed (markers,
    /// pending captures, groups, the tracked cache, boundaries, journal intents and
    /// progress logs), every blob is re-hashed against its name, and every blob a
    /// record names must exist. `progress` is called as blobs are hashed.
    ///
    /// Never changes anything. Problems are named in the report; the call itself fails
    /// only when the store root cannot be listed.
    pub fn verify(&self, progress: Progress<'_>) -> Result<VerifyReport, QueryError> {
        let (walks, mut problems) = self.walk_all()?;
        let fs = &self.inner.fs;
        let mut report = VerifyReport {
            records: walks.iter().map(|w| w.records).sum(),
            ..VerifyReport::default()
        };
        let mut refs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for w in walks {
            for (sha, by) in w.refs {
                let names = by.iter().map(|i| w.sources[*i as usize].clone());
                refs.entry(sha).or_default().extend(names);
            }
        }
        let names = fs.list(Path::new("blobs"))?;
        let total = names.len() as u64;
        let mut present: BTreeSet<String> = BTreeSet::new();
        let mut blob_problems = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let sha = name.to_string_lossy().into_owned();
            let rel = Path::new("blobs").join(name);
            if !valid_sha(&sha) {
                if !is_hidden(name) {
                    blob_problems.push(Problem::Unreadable {
                        path: show(&rel),
                        detail: "not a blob name (left alone)".into(),
                    });
                }
                continue;
            }
            present.insert(sha.clone());
            match self.hash_blob(&sha) {
                Ok(Some((actual, size))) => {
                    report.blobs += 1;
                    report.blob_bytes += size;
                    if actual != sha {
                        blob_problems.push(Problem::CorruptBlob {
                            sha256: sha,
                            actual,
                            size,
                        });
                    }
                }
                Ok(None) => {
                    present.remove(&sha);
                }
                Err(e) => blob_problems.push(fs_problem(&rel, e)),
            }
            progress(i as u64 + 1, total);
        }
        for (sha, mut by) in refs {
            if !present.contains(&sha) {
                by.sort();
                by.dedup();
                by.truncate(10);
                blob_problems.push(Problem::MissingBlob {
                    sha256: sha,
                    referenced_by: by,
                });
            }
        }
        problems.sort_by_key(|p| p.subject());
        blob_problems.sort_by_key(|p| p.subject());
        problems.extend(blob_problems);
        report.problems = problems;
        Ok(report)
    }

    /// Moves what `report` names as corrupt (records and blobs) into
    /// `quarantine/<stamp>/`, keeping each file's store-relative path below it.
    /// Each problem is checked again under the store's exclusive lock first (a torn
    /// blob may have been rewritten since); blobs a quarantined record names are
    /// hard-linked (or copied) into the quarantine too, so garbage collection can no
    /// longer remove them. A corrupt journal moves with its progress log. Nothing is
    /// deleted. Newer records, missing blobs and unreadable paths are left and listed.
    pub fn quarantine(&self, report: &VerifyReport) -> Result<QuarantineReport, PruneError> {
        self.guard_writable()?;
        let _g = self.lock_exclusive()?;
        let fs = &self.inner.fs;
        let stamp = Path::new(QUARANTINE_DIR).join(now_stamp());
        let mut out = QuarantineReport::default();
        let mut to_move: Vec<PathBuf> = Vec::new();
        for p in &report.problems {
            match p {
                Problem::CorruptRecord { path, .. } => {
                    let rel = PathBuf::from(path);
                    let still = match fs.read_opt(&rel)? {
                        None => false,
                        Some(_) => self.record_still_bad(&rel),
                    };
                    if !still {
                        out.gone.push(path.clone());
                        continue;
                    }
                    to_move.push(rel.clone());
                    if rel.extension() == Some(OsStr::new("json"))
                        && rel.parent().and_then(Path::file_name) == Some(OsStr::new("journals"))
                    {
                        to_move.push(rel.with_extension("log"));
                    } else if rel.extension() == Some(OsStr::new("log"))
                        && rel.parent().and_then(Path::file_name) == Some(OsStr::new("journals"))
                    {
                        to_move.push(rel.with_extension("json"));
                    }
                }
                Problem::CorruptBlob { sha256, .. } => match self.hash_blob(sha256) {
                    Ok(Some((actual, _))) if actual != *sha256 => {
                        to_move.push(Path::new("blobs").join(sha256));
                    }
                    _ => out.gone.push(format!("blobs/{sha256}")),
                },
                other => out.left.push(other.clone()),
            }
        }
        to_move.sort();
        to_move.dedup();
        for rel in to_move {
            let Some(bytes) = fs.read_opt(&rel)? else {
                continue;
            };
            let dest = stamp.join(&rel);
            if let Some(parent) = dest.parent() {
                fs.create_dir_all(parent)?;
            }
            if !rel.starts_with("blobs") {
                // Blobs this record names stay alive: any 64-hex run in its raw bytes (JSON
                // records), and any blob whose 32-byte name appears in them (the binary log).
                let mut named = hex_runs(&bytes);
                if rel.file_name() == Some(OsStr::new(crate::records::LOG_NAME)) {
                    named.extend(self.raw_blob_names(&bytes)?);
                }
                for sha in named {
                    if out.kept_blobs.contains(&sha) || !self.has_blob(&sha) {
                        continue;
                    }
                    let kdir = stamp.join("kept-blobs");
                    fs.create_dir_all(&kdir)?;
                    self.keep_blob(&sha, &kdir.join(&sha))?;
                    out.kept_blobs.push(sha);
                }
            }
            fs.rename(&rel, &dest)?;
            out.moved.push(show(&rel));
        }
        if !out.moved.is_empty() {
            out.dir = Some(show(&stamp));
        }
        Ok(out)
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
        let mut f = f.into_std();
        hash_reader(&mut f, |_| {}).map(Some)
    }

    fn keep_blob(&self, sha: &str, dest: &Path) -> Result<(), FsFailure> {
        let fs = &self.inner.fs;
        let src = Path::new("blobs").join(sha);
        if fs.dir.hard_link(&src, &fs.dir, dest).is_ok() {
            return Ok(());
        }
        let bytes = fs.read_opt(&src)?.unwrap_or_default();
        let mut f = fs.create_new(dest)?;
        fs.write_all(&mut f, dest, &bytes)
    }

    fn record_still_bad(&self, rel: &Path) -> bool {
        let mut problems = Vec::new();
        let mut walk = SessionWalk::default();
        // Re-read this one file the way the session walk does.
        let comps: Vec<_> = rel.components().collect();
        if comps.len() < 3 {
            return false;
        }
        let sdir: PathBuf = comps[..2].iter().collect();
        let sid = comps[1]
            .as_os_str()
            .to_str()
            .and_then(decode_id)
            .unwrap_or_default();
        self.check_record(&sdir, &sid, rel, &mut walk, &mut problems);
        problems
            .iter()
            .any(|p| matches!(p, Problem::CorruptRecord { .. }))
    }

    fn walk_all(&self) -> Result<(Vec<SessionWalk>, Vec<Problem>), QueryError> {
        let fs = &self.inner.fs;
        let mut walks = Vec::new();
        let mut problems = Vec::new();
        for name in fs.list(Path::new("sessions"))? {
            if is_hidden(&name) {
                continue;
            }
            let sdir = Path::new("sessions").join(&name);
            let Some(id) = name.to_str().and_then(decode_id) else {
                problems.push(Problem::Unreadable {
                    path: show(&sdir),
                    detail: "not an encoded session id (left alone)".into(),
                });
                continue;
            };
            walks.push(self.walk_session(&sdir, &id, &mut problems));
        }
        Ok((walks, problems))
    }

    fn walk_session(&self, sdir: &Path, id: &str, problems: &mut Vec<Problem>) -> SessionWalk {
        let mut w = SessionWalk::default();
        w.usage.session_id = id.to_string();
        let mut files = Vec::new();
        match self.inner.fs.dir.open_dir(sdir) {
            Ok(d) => {
                if let Err(e) = walk_files(&d, sdir, 0, &mut files, &mut w.usage) {
                    problems.push(fs_problem(sdir, e));
                }
            }
            Err(e) => problems.push(fs_problem(sdir, e)),
        }
        let mut anchors: BTreeMap<u64, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for rel in &files {
            for rec in self.check_record(sdir, id, rel, &mut w, problems) {
                anchors
                    .entry(rec.anchor_seq)
                    .or_default()
                    .extend(rec.entries.iter().map(|e| e.path.as_bytes().to_vec()));
            }
        }
        w.usage.anchors = anchors.into_iter().map(|(a, p)| (a, p.len())).collect();
        w
    }

    /// Parses one session file; records problems and blob references. Returns the
    /// group records it holds (a layout-1 group file, or every group of a record log).
    fn check_record(
        &self,
        sdir: &Path,
        id: &str,
        rel: &Path,
        w: &mut SessionWalk,
        problems: &mut Vec<Problem>,
    ) -> Vec<GroupRecord> {
        let fs = &self.inner.fs;
        let Ok(inner) = rel.strip_prefix(sdir) else {
            return Vec::new();
        };
        let comps: Vec<&OsStr> = inner.iter().collect();
        let shown = show(rel);
        let bytes = match fs.read_opt(rel) {
            Ok(Some(b)) => b,
            Ok(None) => return Vec::new(),
            Err(e) => {
                problems.push(Problem::Unreadable {
                    path: shown,
                    detail: e.to_string(),
                });
                return Vec::new();
            }
        };
        w.records += 1;
        let source = w.sources.len() as u32;
        w.sources.push(shown.clone());
        let add_ref = |w: &mut SessionWalk, sha: &str| match w.refs.get_mut(sha) {
            Some(v) => v.push(source),
            None => {
                w.refs.insert(sha.to_string(), vec![source]);
            }
        };
        let mut push = |r: Result<(), Fault>| {
            if let Err(f) = r {
                problems.push(fault_problem(f));
            }
        };
        match comps.as_slice() {
            [f] if *f == "session.json" => {
                push(parse_record::<SessionMarker>(rel, &bytes).and_then(|m| {
                    if m.session_id == id {
                        Ok(())
                    } else {
                        Err(CorruptFile {
                            path: shown.clone(),
                            detail: format!("marker names session `{}`", m.session_id),
                        }
                        .into())
                    }
                }))
            }
            [f] if *f == "pending.log" => match parse_lines::<PendingLine>(rel, &bytes) {
                Ok(lines) => {
                    // Only calls not yet settled (settled ones live on in their groups).
                    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    for l in lines {
                        if l.settled {
                            open.remove(&l.call_id);
                        } else if let Some(BeforeState::File { sha256, .. }) =
                            l.entry.map(|e| e.before)
                        {
                            open.entry(l.call_id).or_default().push(sha256);
                        }
                    }
                    for sha in open.values().flatten() {
                        add_ref(w, sha);
                    }
                }
                Err(f) => push(Err(f)),
            },
            [f] if *f == "tracked.json" => match parse_record::<TrackedRecord>(rel, &bytes) {
                Ok(rec) => {
                    for t in rec.paths {
                        if let Known::Present {
                            sha256: Some(sha), ..
                        } = t.known
                        {
                            // The cache names content the next re-check may record; it is
                            // live for garbage collection but its blob may legitimately be
                            // absent (never stored), so it is not a missing-blob reference.
                            w.soft.insert(sha);
                        }
                    }
                }
                Err(f) => push(Err(f)),
            },
            [f] if *f == "boundary.json" => {
                push(parse_record::<BoundaryRecord>(rel, &bytes).map(|_| ()))
            }
            [g, a, f] if *g == "groups" => {
                let gdir = sdir.join("groups");
                let anchor = match parse_anchor(&gdir, a) {
                    Ok(a) => a,
                    Err(e) => {
                        push(Err(e));
                        return Vec::new();
                    }
                };
                let _ = f;
                match parse_record::<GroupRecord>(rel, &bytes) {
                    Ok(rec) if rec.anchor_seq != anchor => push(Err(CorruptFile {
                        path: shown.clone(),
                        detail: format!("anchor_seq {} in group {anchor}", rec.anchor_seq),
                    }
                    .into())),
                    Ok(rec) => {
                        for e in &rec.entries {
                            if let BeforeState::File { sha256, .. } = &e.before {
                                add_ref(w, sha256);
                            }
                        }
                        return vec![rec];
                    }
                    Err(f) => push(Err(f)),
                }
            }
            [j, f] if *j == "journals" => {
                let name = f.to_string_lossy();
                if let Some(stem) = name.strip_suffix(".json") {
                    match parse_record::<JournalIntent>(rel, &bytes) {
                        Ok(intent) => {
                            for sha in intent.blob_refs() {
                                add_ref(w, sha);
                            }
                            self.check_journal(sdir, id, stem, w, problems);
                        }
                        Err(f) => push(Err(f)),
                    }
                } else if name.ends_with(".log") {
                    // Judged with its intent (a log without an intent is never read).
                    w.records -= 1;
                }
            }
            [f] if *f == crate::records::LOG_NAME => {
                // Layout 2: one record log; a torn tail is what a crash leaves (not a problem).
                match crate::records::fold_log(rel, bytes.clone()) {
                    Ok((idx, _, _)) => {
                        if idx.session_id.as_deref().is_some_and(|s| s != id) {
                            push(Err(CorruptFile {
                                path: shown.clone(),
                                detail: "the log names another session".into(),
                            }
                            .into()));
                            return Vec::new();
                        }
                        let mut out = Vec::new();
                        for (anchor, gs) in &idx.groups {
                            for g in gs {
                                match g.entries() {
                                    Ok(entries) => {
                                        for e in entries.iter() {
                                            if let BeforeState::File { sha256, .. } = &e.before {
                                                add_ref(w, sha256);
                                            }
                                        }
                                        out.push(GroupRecord {
                                            v: crate::RECORD_VERSION,
                                            anchor_seq: *anchor,
                                            source: g.source.clone(),
                                            entries: entries.into_owned(),
                                        });
                                    }
                                    Err(detail) => push(Err(CorruptFile {
                                        path: shown.clone(),
                                        detail,
                                    }
                                    .into())),
                                }
                            }
                        }
                        // Calls not yet settled (settled ones live on in their groups).
                        for (entries, _) in idx.pending.values() {
                            for e in entries {
                                if let BeforeState::File { sha256, .. } = &e.before {
                                    add_ref(w, sha256);
                                }
                            }
                        }
                        for t in idx.tracked.values() {
                            if let Known::Present {
                                sha256: Some(sha), ..
                            } = &t.known
                            {
                                w.soft.insert(sha.clone());
                            }
                        }
                        // Counted as its groups and unsettled calls (the log file itself was
                        // counted once above).
                        w.records += (out.len() + idx.pending.len()).saturating_sub(1) as u64;
                        return out;
                    }
                    Err(f) => push(Err(f)),
                }
            }
            _ => {
                w.records -= 1;
            }
        }
        Vec::new()
    }

    fn check_journal(
        &self,
        sdir: &Path,
        id: &str,
        stem: &str,
        w: &mut SessionWalk,
        problems: &mut Vec<Problem>,
    ) {
        let Some(op) = decode_id(stem) else {
            problems.push(Problem::CorruptRecord {
                path: show(&sdir.join("journals").join(format!("{stem}.json"))),
                detail: "not an encoded operation id".into(),
            });
            return;
        };
        let Ok(root) = self.inner.fs.dir.try_clone() else {
            return;
        };
        // Journal status reading never touches the workspace: the store root stands in.
        let session = Session::new(
            self.clone(),
            id.to_string(),
            sdir.to_path_buf(),
            root,
            Vec::new(),
        );
        match session.restore_status(&op) {
            Ok(s) => {
                if s.state == crate::JournalState::Open {
                    w.usage.open_journals.push(op);
                }
            }
            Err(crate::JournalError::Corrupt(c)) => problems.push(Problem::CorruptRecord {
                path: c.path,
                detail: c.detail,
            }),
            Err(crate::JournalError::NewerStore(n)) => problems.push(Problem::NewerRecord {
                path: n.path,
                found: n.found,
                supported: n.supported,
            }),
            Err(e) => problems.push(Problem::Unreadable {
                path: show(&sdir.join("journals").join(format!("{stem}.log"))),
                detail: e.to_string(),
            }),
        }
    }
}

impl Store {
    /// The blobs of the store whose raw 32-byte SHA-256 occurs anywhere in `bytes`
    /// (a damaged binary log: frames past the damage cannot be decoded, but the names
    /// they carry can still be found).
    fn raw_blob_names(&self, bytes: &[u8]) -> Result<Vec<String>, FsFailure> {
        let windows: std::collections::HashSet<&[u8]> = bytes.windows(32).collect();
        let mut out = Vec::new();
        for name in self.inner.fs.list(Path::new("blobs"))? {
            let sha = name.to_string_lossy();
            if let Ok(raw) = hex::decode(sha.as_bytes()) {
                if raw.len() == 32 && windows.contains(raw.as_slice()) {
                    out.push(sha.into_owned());
                }
            }
        }
        Ok(out)
    }
}

/// Every 64-character lowercase hex run in `bytes` (candidate blob names).
fn hex_runs(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, b) in bytes.iter().chain(std::iter::once(&b' ')).enumerate() {
        let hexch = b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        match (hexch, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s == 64 {
                    out.push(String::from_utf8_lossy(&bytes[s..i]).into_owned());
                }
                start = None;
            }
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Lists the regular files below `dir` (store-relative as `base/...`), adding sizes
/// and the newest modification time to `usage`. Symlinks are never followed.
fn walk_files(
    dir: &Dir,
    base: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
    usage: &mut SessionUsage,
) -> io::Result<()> {
    if depth > 8 {
        return Err(io::Error::other(
            "directory tree deeper than the store writes",
        ));
    }
    usage.last_activity_ms = usage
        .last_activity_ms
        .max(ms(dir.dir_metadata()?.modified()?.into_std()));
    let mut entries = Vec::new();
    for e in dir.entries()? {
        entries.push(e?);
    }
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let md = e.metadata()?;
        usage.last_activity_ms = usage.last_activity_ms.max(ms(md.modified()?.into_std()));
        if md.is_dir() {
            walk_files(&e.open_dir()?, &base.join(&name), depth + 1, out, usage)?;
        } else if md.is_file() {
            usage.record_files += 1;
            usage.record_bytes += md.len();
            if !is_hidden(&name) {
                out.push(base.join(&name));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreOptions;

    fn store_with_session() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), b"before").unwrap();
        let store = Store::open(&tmp.path().join("store"), StoreOptions::default()).unwrap();
        let s = store.session("s1", &ws).unwrap();
        s.recheck_tracked(1).unwrap();
        s.capture_before("c1", "a.txt".as_ref()).unwrap();
        std::fs::write(ws.join("a.txt"), b"after").unwrap();
        s.commit("c1", 1, true).unwrap();
        (tmp, store)
    }

    #[test]
    fn a_host_hold_and_a_tool_claim_exclude_each_other() {
        let (_tmp, store) = store_with_session();
        let host = store.hold_session("s1").unwrap().expect("host hold");
        assert!(store.session_is_held("s1").unwrap());
        assert!(store.claim_session("s1").unwrap().is_none());
        // Another session is not affected.
        assert!(store.claim_session("s2").unwrap().is_some());
        drop(host);
        assert!(!store.session_is_held("s1").unwrap());
        let tool = store.claim_session("s1").unwrap().expect("tool claim");
        assert!(store.hold_session("s1").unwrap().is_none());
        drop(tool);
        assert!(store.hold_session("s1").unwrap().is_some());
    }

    #[test]
    fn quarantine_keeps_the_blobs_a_corrupt_record_names() {
        let (tmp, store) = store_with_session();
        let root = tmp.path().join("store");
        let sha = hex::encode(Sha256::digest(b"before"));
        // The session's log, damaged in its first frame: it still carries the blob's
        // name (raw bytes) further on, but no longer decodes.
        let group = root.join("sessions/s1/records.log");
        let mut bytes = std::fs::read(&group).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&group, &bytes).unwrap();
        let report = store.verify(&mut |_, _| {}).unwrap();
        assert!(
            report.problems.iter().any(
                |p| matches!(p, Problem::CorruptRecord { path, .. } if path.ends_with("records.log"))
            ),
            "{report:?}"
        );
        let q = store.quarantine(&report).unwrap();
        assert_eq!(q.moved, ["sessions/s1/records.log"]);
        assert_eq!(q.kept_blobs.as_slice(), std::slice::from_ref(&sha));
        let dir = root.join(q.dir.unwrap());
        assert_eq!(
            std::fs::read(dir.join("kept-blobs").join(&sha)).unwrap(),
            b"before"
        );
        assert!(dir.join("sessions/s1/records.log").is_file());
        // Garbage collection may now drop the blob from blobs/, never the kept copy.
        store.collect_garbage().unwrap();
        assert_eq!(
            std::fs::read(dir.join("kept-blobs").join(&sha)).unwrap(),
            b"before"
        );
    }

    #[test]
    fn read_blob_verifies_and_bounds() {
        let (tmp, store) = store_with_session();
        let sha = hex::encode(Sha256::digest(b"before"));
        assert_eq!(
            store.read_blob(&sha, 100).unwrap(),
            BlobRead::Bytes(b"before".to_vec())
        );
        assert_eq!(
            store.read_blob(&sha, 3).unwrap(),
            BlobRead::TooLarge { size: 6 }
        );
        assert_eq!(
            store.read_blob(&"0".repeat(64), 100).unwrap(),
            BlobRead::Missing
        );
        assert_eq!(
            store.read_blob("../store.json", 100).unwrap(),
            BlobRead::Missing
        );
        std::fs::write(tmp.path().join("store/blobs").join(&sha), b"BEFORE").unwrap();
        assert!(matches!(
            store.read_blob(&sha, 100).unwrap(),
            BlobRead::Corrupt { .. }
        ));
    }
}
