//! The git state of the workspace's repository beside the files: one point per scan
//! (`sessions/<id>/git/points.jsonl`, a JSON line each), the bytes of each index,
//! `packed-refs` and stash list a point names (`git/index/<id>`, `git/packed/<id>`,
//! `git/stash/<id>`, written once), and
//! the journal of each rewind's git step (`git/ops/<op>.json`). See `docs/git.md`.

use std::io::Write;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};
use git_state::{GitState, Handles, Phase, Point};
use serde::{Deserialize, Serialize};

use crate::error::FsFailure;
use crate::scan::{ScanPhase, ScanRequest};
use crate::seam::{Area, FsOp};
use crate::session::Session;

/// The version of a point line.
pub const GIT_POINT_VERSION: u32 = 1;

/// One line of `git/points.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitPointRecord {
    /// [`GIT_POINT_VERSION`].
    pub v: u32,
    /// The message the point belongs to.
    pub anchor: u64,
    /// Around which call, or at a message.
    pub phase: Phase,
    /// The tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The state, when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<GitState>,
    /// Why the state is not known at this point (not tracked, not readable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untracked: Option<String>,
}

/// What the store keeps for a point: the index, `packed-refs`, or the stash list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitBlobKind {
    /// `git/index/<id>`.
    Index,
    /// `git/packed/<id>`.
    Packed,
    /// `git/stash/<id>`: the bytes of `logs/refs/stash`.
    Stash,
}

fn git_dir(s: &Session) -> PathBuf {
    s.dir.join("git")
}

fn blob_path(s: &Session, kind: GitBlobKind, id: &str) -> Option<PathBuf> {
    let ok = !id.is_empty()
        && id.len() <= 80
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    ok.then(|| {
        git_dir(s)
            .join(match kind {
                GitBlobKind::Index => "index",
                GitBlobKind::Packed => "packed",
                GitBlobKind::Stash => "stash",
            })
            .join(id)
    })
}

fn phase_of(p: ScanPhase) -> Phase {
    match p {
        ScanPhase::Before => Phase::Before,
        ScanPhase::After => Phase::After,
        ScanPhase::Boundary => Phase::Boundary,
    }
}

impl Session {
    /// Records the git state of the workspace's repository at a scan (nothing when the
    /// workspace is in no repository). A state that cannot be read is recorded as unknown
    /// with why; only a store that cannot be written is an error (the scan goes on).
    pub fn record_git(&self, req: &ScanRequest) -> Result<(), FsFailure> {
        let Some(root) = self.workspace_root() else {
            return Ok(());
        };
        let found = Handles::find(root).and_then(|h| match h {
            None => Ok(None),
            Some(Err(u)) => Ok(Some(Err(u))),
            Some(Ok(h)) => h.read().map(|r| Some(Ok((h, r)))),
        });
        let (state, untracked) = match found {
            Ok(None) => return Ok(()),
            Ok(Some(Err(u))) => (None, Some(u.message())),
            Ok(Some(Ok((h, read)))) => {
                if let (Some(i), Some(b)) = (&read.state.index, &read.index_bytes) {
                    self.put_git_index(&h.git, &i.id, b)?;
                }
                if let (Some(id), Some(b)) = (&read.state.packed, &read.packed_bytes) {
                    self.put_git_blob(GitBlobKind::Packed, id, b)?;
                }
                if let (Some(l), Some(b)) = (&read.state.stash, &read.stash_bytes) {
                    self.put_git_blob(GitBlobKind::Stash, &l.id, b)?;
                }
                (Some(read.state), None)
            }
            Err(e) => (None, Some(e.to_string())),
        };
        let rec = GitPointRecord {
            v: GIT_POINT_VERSION,
            anchor: req.anchor_seq,
            phase: phase_of(req.phase),
            call_id: req.call_id.clone(),
            state,
            untracked,
        };
        let mut line = serde_json::to_vec(&rec).expect("a point serializes");
        line.push(b'\n');
        let fs = &self.store.inner.fs;
        let path = git_dir(self).join("points.jsonl");
        fs.create_dir_all(&git_dir(self))?;
        let fail = |op, e| FsFailure {
            op,
            area: Area::Store,
            path: path.to_string_lossy().into_owned(),
            source: e,
        };
        let mut f = fs
            .dir
            .open_with(&path, OpenOptions::new().append(true).create(true))
            .map_err(|e| fail(FsOp::Open, e))?;
        // One write of a whole line; a line torn by a crash is skipped when read.
        f.write_all(&line).map_err(|e| fail(FsOp::Write, e))
    }

    /// Stores the index whose bytes are `bytes` under its id (once): as a hard link to the
    /// repository's `index` file when that file still is those bytes (git replaces its index
    /// by renaming a new file over it, never by writing into it, so the linked file keeps them;
    /// no copy of its few hundred KiB at each point that staged something), else — another
    /// file system, links refused, the index replaced since it was read, a store kept durable
    /// against power loss, an id that is not git's trailing checksum — as a copy of `bytes`.
    /// [`Session::git_blob`] checks the stored index's checksum against its id when read.
    fn put_git_index(&self, git: &Dir, id: &str, bytes: &[u8]) -> Result<(), FsFailure> {
        let Some(path) = blob_path(self, GitBlobKind::Index, id) else {
            return Ok(());
        };
        let fs = &self.store.inner.fs;
        if fs.exists(&path)? {
            return Ok(());
        }
        if !fs.io.durable && !id.starts_with("sha256-") {
            if let Some(parent) = path.parent() {
                fs.create_dir_all(parent)?;
            }
            let tmp = path.with_extension("link");
            let _ = fs.dir.remove_file(&tmp);
            if git.hard_link("index", &fs.dir, &tmp).is_ok() {
                let same = fs.dir.open(&tmp).is_ok_and(|f| trailer_is(f, bytes, id));
                // Linked only when the file is the bytes the state was read from.
                if same && fs.dir.rename(&tmp, &fs.dir, &path).is_ok() {
                    return Ok(());
                }
                let _ = fs.dir.remove_file(&tmp);
            }
        }
        self.put_git_blob(GitBlobKind::Index, id, bytes)
    }

    /// Stores the bytes of an index, `packed-refs` or a stash list under its id (once).
    pub fn put_git_blob(&self, kind: GitBlobKind, id: &str, bytes: &[u8]) -> Result<(), FsFailure> {
        let Some(path) = blob_path(self, kind, id) else {
            return Ok(());
        };
        let fs = &self.store.inner.fs;
        if fs.exists(&path)? {
            return Ok(());
        }
        if let Some(parent) = path.parent() {
            fs.create_dir_all(parent)?;
        }
        let tmp = path.with_extension("tmp");
        let _ = fs.dir.remove_file(&tmp);
        fs.write_new(&tmp, bytes)?;
        fs.dir.rename(&tmp, &fs.dir, &path).map_err(|e| FsFailure {
            op: FsOp::Rename,
            area: Area::Store,
            path: path.to_string_lossy().into_owned(),
            source: e,
        })
    }

    /// The stored bytes of an index, `packed-refs` or a stash list (`None`: not stored, or an
    /// index whose checksum is not its id any more).
    pub fn git_blob(&self, kind: GitBlobKind, id: &str) -> Option<Vec<u8>> {
        let path = blob_path(self, kind, id)?;
        let bytes = self.store.inner.fs.read_opt(&path).ok().flatten()?;
        (kind != GitBlobKind::Index || id.starts_with("sha256-") || index_checks(&bytes, id))
            .then_some(bytes)
    }

    /// The session's recorded git points, oldest first (torn or newer lines skipped), each
    /// known state with its full ref map rebuilt.
    pub fn git_points(&self) -> Result<Vec<GitPointRecord>, FsFailure> {
        let path = git_dir(self).join("points.jsonl");
        let Some(bytes) = self.store.inner.fs.read_opt(&path)? else {
            return Ok(Vec::new());
        };
        let mut out: Vec<GitPointRecord> = Vec::new();
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(mut rec) = serde_json::from_slice::<GitPointRecord>(line) else {
                continue;
            };
            if rec.v > GIT_POINT_VERSION {
                continue;
            }
            if let Some(st) = &mut rec.state {
                if st.version > git_state::STATE_VERSION {
                    rec.state = None;
                    rec.untracked = Some("recorded by a newer build".into());
                    out.push(rec);
                    continue;
                }
                let packed = st
                    .packed
                    .clone()
                    .map(|id| self.git_blob(GitBlobKind::Packed, &id));
                match packed {
                    Some(None) => {
                        rec.state = None;
                        rec.untracked = Some("its packed refs are not stored".into());
                    }
                    Some(Some(b)) => st.hydrate(Some(&b)),
                    None => st.hydrate(None),
                }
            }
            out.push(rec);
        }
        Ok(out)
    }

    /// The message the newest recorded point belongs to (the largest anchor; `None`: no point),
    /// read without rebuilding any state.
    pub fn git_newest_anchor(&self) -> Result<Option<u64>, FsFailure> {
        #[derive(Deserialize)]
        struct Anchor {
            anchor: u64,
        }
        let path = git_dir(self).join("points.jsonl");
        let Some(bytes) = self.store.inner.fs.read_opt(&path)? else {
            return Ok(None);
        };
        Ok(bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Anchor>(l).ok())
            .map(|a| a.anchor)
            .max())
    }

    /// The known points among [`Session::git_points`], as the planner takes them. A point
    /// whose state is unknown ends the run: only the points after the last unknown one
    /// are returned, with the offset of the first of them in the full list.
    pub fn git_known_points(&self) -> Result<Vec<Point>, FsFailure> {
        let recs = self.git_points()?;
        let last_unknown = recs.iter().rposition(|r| r.state.is_none());
        Ok(recs
            .into_iter()
            .skip(last_unknown.map_or(0, |i| i + 1))
            .filter_map(|r| {
                Some(Point {
                    anchor: r.anchor,
                    phase: r.phase,
                    call_id: r.call_id,
                    state: r.state?,
                })
            })
            .collect())
    }

    /// Writes the journal of a rewind's git step (`git/ops/<op>.json`, atomically).
    pub fn write_git_op(&self, op_id: &str, json: &[u8]) -> Result<(), FsFailure> {
        let fs = &self.store.inner.fs;
        let dir = git_dir(self).join("ops");
        fs.create_dir_all(&dir)?;
        fs.write_atomic(&op_path(&dir, op_id), json)
    }

    /// The journal of a rewind's git step, if it has one.
    pub fn read_git_op(&self, op_id: &str) -> Result<Option<Vec<u8>>, FsFailure> {
        self.store
            .inner
            .fs
            .read_opt(&op_path(&git_dir(self).join("ops"), op_id))
    }
}

/// Whether the index file `f` is as long as `bytes` and ends with the checksum `id` names
/// (its last 20 bytes read, not the whole file).
fn trailer_is(mut f: cap_std::fs::File, bytes: &[u8], id: &str) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut tail = [0u8; 20];
    f.metadata().is_ok_and(|m| m.len() == bytes.len() as u64)
        && bytes.len() >= 32
        && f.seek(SeekFrom::End(-20)).is_ok()
        && f.read_exact(&mut tail).is_ok()
        && hex::encode(tail) == id
}

/// Whether index bytes end with the checksum `id` names (git's trailing SHA-1, in hex).
fn index_checks(bytes: &[u8], id: &str) -> bool {
    bytes.len() >= 32 && git_state::index_id(bytes) == id
}

fn op_path(dir: &Path, op_id: &str) -> PathBuf {
    let name = crate::path::encode_id(op_id).unwrap_or_else(|_| git_state::ref_component(op_id));
    dir.join(format!("{name}.json"))
}
