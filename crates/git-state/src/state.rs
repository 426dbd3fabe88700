//! [`GitState`]: what a repository's state is at one point, read natively.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use crate::discover::{Layout, Repo, Untracked, discover};
use crate::error::ReadError;
use crate::index::index_id;
use crate::refs::{is_oid, read_loose, read_opt};

/// The version of the serialized [`GitState`].
pub const STATE_VERSION: u32 = 1;

/// Where HEAD points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Head {
    /// On a branch (`ref: refs/heads/<name>`), with its commit (`None`: an unborn branch).
    Branch {
        /// The full ref name (`refs/heads/main`).
        name: String,
        /// The branch's commit, if it has one.
        oid: Option<String>,
    },
    /// Detached at a commit.
    Detached {
        /// The commit.
        oid: String,
    },
}

impl Head {
    /// The commit HEAD names, if any.
    pub fn oid(&self) -> Option<&str> {
        match self {
            Head::Branch { oid, .. } => oid.as_deref(),
            Head::Detached { oid } => Some(oid),
        }
    }

    /// The branch HEAD is on, if any.
    pub fn branch(&self) -> Option<&str> {
        match self {
            Head::Branch { name, .. } => Some(name),
            Head::Detached { .. } => None,
        }
    }

    /// What is written to the HEAD file for this state.
    pub fn file_text(&self) -> String {
        match self {
            Head::Branch { name, .. } => format!("ref: {name}\n"),
            Head::Detached { oid } => format!("{oid}\n"),
        }
    }
}

/// An operation git has in progress in the work tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// `MERGE_HEAD`.
    Merge,
    /// `rebase-merge/` or `rebase-apply/` (with `rebasing`).
    Rebase,
    /// `rebase-apply/` with `applying`: `git am`.
    Am,
    /// `CHERRY_PICK_HEAD`.
    CherryPick,
    /// `REVERT_HEAD`.
    Revert,
    /// `BISECT_LOG`.
    Bisect,
}

impl Operation {
    /// Its name as git's commands spell it.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Merge => "merge",
            Operation::Rebase => "rebase",
            Operation::Am => "am",
            Operation::CherryPick => "cherry-pick",
            Operation::Revert => "revert",
            Operation::Bisect => "bisect",
        }
    }

    /// The command that abandons it.
    pub fn abort_command(self) -> &'static str {
        match self {
            Operation::Merge => "git merge --abort",
            Operation::Rebase => "git rebase --abort",
            Operation::Am => "git am --abort",
            Operation::CherryPick => "git cherry-pick --abort",
            Operation::Revert => "git revert --abort",
            Operation::Bisect => "git bisect reset",
        }
    }
}

/// The index as a state names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRef {
    /// [`crate::index_id`] of its bytes: the key its bytes are stored under.
    pub id: String,
    /// Its size in bytes.
    pub len: u64,
}

/// The stash list: the reflog of `refs/stash` (`logs/refs/stash`), as `git stash list` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StashLog {
    /// [`packed_id`] of the reflog's bytes: the key its bytes are stored under.
    pub id: String,
    /// The stash commits, `stash@{0}` first.
    pub commits: Vec<String>,
}

impl StashLog {
    /// The stash list of a `logs/refs/stash` file's bytes (`None`: empty).
    pub fn of(bytes: &[u8]) -> Option<StashLog> {
        let text = String::from_utf8_lossy(bytes);
        let mut commits: Vec<String> = text
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|o| is_oid(o))
            .map(str::to_owned)
            .collect();
        if commits.is_empty() {
            return None;
        }
        commits.reverse();
        Some(StashLog {
            id: packed_id(bytes),
            commits,
        })
    }

    /// How many of its commits the repository whose common directory is `common_dir` no
    /// longer holds (an entry dropped, then pruned by `git gc`). A commit that cannot be
    /// looked up counts as gone.
    pub fn commits_gone(&self, common_dir: &Path) -> usize {
        let odb = crate::odb::Odb::open(common_dir);
        self.commits
            .iter()
            .filter(|c| {
                let mut oid = [0u8; 20];
                hex::decode_to_slice(c.as_str(), &mut oid).is_err()
                    || !matches!(odb.contains(&oid), Ok(true))
            })
            .count()
    }
}

/// The state of a workspace's repository at one point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// How the repository is laid out.
    pub layout: Layout,
    /// Where HEAD points.
    pub head: Head,
    /// Branch and tag tips (`refs/heads/*`, `refs/tags/*`) and `refs/stash`: the packed ones
    /// overlaid with the loose ones. Not serialized: [`GitState::hydrate`] rebuilds it from
    /// [`GitState::loose`] and the stored `packed-refs` bytes named by [`GitState::packed`].
    #[serde(skip)]
    pub refs: BTreeMap<String, String>,
    /// The commits annotated tags point at, as `packed-refs` records them (`^<oid>` lines):
    /// tag → commit. Not serialized (rebuilt by [`GitState::hydrate`]); used to name a
    /// detached HEAD after the tag it was checked out from.
    #[serde(skip)]
    pub peeled: Arc<BTreeMap<String, String>>,
    /// The loose refs among them (a handful, usually).
    #[serde(default)]
    pub loose: BTreeMap<String, String>,
    /// The id ([`crate::index_id`]'s SHA-256 form) of the `packed-refs` bytes, when there is
    /// that file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<String>,
    /// The index, when there is one.
    pub index: Option<IndexRef>,
    /// An operation in progress.
    pub operation: Option<Operation>,
    /// Branches checked out in other worktrees of the same repository (never moved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<String>,
    /// The stash list, when it has entries (its bytes stored under its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stash: Option<StashLog>,
}

/// A state with the bytes of its index and of `packed-refs` (to be stored under
/// `state.index.id` and `state.packed`).
#[derive(Debug, Clone)]
pub struct Read {
    /// The state.
    pub state: GitState,
    /// The index file's bytes, when there is one.
    pub index_bytes: Option<Vec<u8>>,
    /// The `packed-refs` file's bytes, when there is one.
    pub packed_bytes: Option<Arc<Vec<u8>>>,
    /// The stash list's bytes (`logs/refs/stash`), when it has entries.
    pub stash_bytes: Option<Vec<u8>>,
    /// The repository's common directory (its object store is under it).
    pub common_dir: PathBuf,
}

/// The stat of a file that tells a rewritten file (git replaces `packed-refs` by rename).
type StatKey = (u64, u64, i64, i64, i64, i64);

struct PackedCache {
    key: StatKey,
    id: String,
    packed: Arc<BTreeMap<String, String>>,
    peeled: Arc<BTreeMap<String, String>>,
    bytes: Arc<Vec<u8>>,
}

/// Parsed `packed-refs` per path, reused while the file's stat is the same.
fn packed_cache() -> &'static Mutex<HashMap<PathBuf, PackedCache>> {
    static C: OnceLock<Mutex<HashMap<PathBuf, PackedCache>>> = OnceLock::new();
    C.get_or_init(Mutex::default)
}

/// The id of `packed-refs` bytes.
pub fn packed_id(bytes: &[u8]) -> String {
    format!("sha256-{}", hex::encode(Sha256::digest(bytes)))
}

/// Parses `packed-refs` bytes into the tracked refs they hold.
pub fn parse_packed_refs(bytes: &[u8]) -> BTreeMap<String, String> {
    crate::refs::parse_packed(bytes)
        .refs
        .into_iter()
        .filter(|(k, _)| tracked_ref(k))
        .collect()
}

/// The peeled commits of the annotated tags `packed-refs` bytes record (tag → commit).
pub fn parse_packed_peeled(bytes: &[u8]) -> BTreeMap<String, String> {
    crate::refs::parse_packed(bytes)
        .peeled
        .into_iter()
        .filter(|(k, _)| k.starts_with("refs/tags/"))
        .collect()
}

/// What reading a workspace found.
#[derive(Debug, Clone)]
pub enum Found {
    /// No repository (or a bare one): nothing to track.
    None,
    /// A repository whose state is not tracked, and why.
    Untracked(Untracked),
    /// The state of the workspace's repository.
    State(Box<Read>),
}

/// Open handles on a repository's directories.
pub struct Handles {
    /// The repository.
    pub repo: Repo,
    /// Its git directory.
    pub git: Dir,
    /// Its common directory.
    pub common: Dir,
}

impl Handles {
    /// Opens the directories of `repo` (the one place this crate takes ambient paths after
    /// discovery).
    pub fn open(repo: Repo) -> Result<Self, ReadError> {
        let open = |p: &Path| {
            Dir::open_ambient_dir(p, ambient_authority()).map_err(|e| ReadError::Io {
                path: p.into(),
                source: e,
            })
        };
        Ok(Handles {
            git: open(&repo.git_dir)?,
            common: open(&repo.common_dir)?,
            repo,
        })
    }

    /// Finds and opens the repository of `workspace`, with the process environment.
    pub fn find(workspace: &Path) -> Result<Option<Result<Self, Untracked>>, ReadError> {
        match discover(workspace, |k| std::env::var_os(k))? {
            None => Ok(None),
            Some(Err(u)) => Ok(Some(Err(u))),
            Some(Ok(repo)) => Ok(Some(Ok(Handles::open(repo)?))),
        }
    }

    /// Reads HEAD.
    pub fn head(&self, refs: &BTreeMap<String, String>) -> Result<Head, ReadError> {
        let bytes = read_opt(&self.git, Path::new("HEAD"))?.unwrap_or_default();
        parse_head(&bytes, refs).ok_or_else(|| ReadError::Malformed {
            path: self.repo.git_dir.join("HEAD"),
            why: "neither `ref: <name>` nor an object id".into(),
        })
    }

    /// The operation in progress, if any.
    pub fn operation(&self) -> Option<Operation> {
        let has = |p: &str| self.git.symlink_metadata(p).is_ok();
        if has("rebase-merge") {
            Some(Operation::Rebase)
        } else if has("rebase-apply") {
            if has("rebase-apply/applying") {
                Some(Operation::Am)
            } else {
                Some(Operation::Rebase)
            }
        } else if has("MERGE_HEAD") {
            Some(Operation::Merge)
        } else if has("CHERRY_PICK_HEAD") {
            Some(Operation::CherryPick)
        } else if has("REVERT_HEAD") {
            Some(Operation::Revert)
        } else if has("BISECT_LOG") {
            Some(Operation::Bisect)
        } else {
            None
        }
    }

    /// Reads the whole state.
    pub fn read(&self) -> Result<Read, ReadError> {
        let (packed, packed_map, packed_bytes, peeled) = self.packed()?;
        let mut loose = BTreeMap::new();
        read_loose(&self.common, "refs/heads", &mut loose)?;
        read_loose(&self.common, "refs/tags", &mut loose)?;
        if let Some(b) = read_opt(&self.common, Path::new("refs/stash"))? {
            let v = String::from_utf8_lossy(&b).trim().to_owned();
            if is_oid(&v) {
                loose.insert("refs/stash".into(), v);
            }
        }
        let mut refs = packed_map.as_deref().cloned().unwrap_or_default();
        refs.extend(loose.iter().map(|(k, v)| (k.clone(), v.clone())));
        let head = self.head(&refs)?;
        let index_bytes = read_opt(&self.git, Path::new("index"))?;
        let index = index_bytes.as_ref().map(|b| crate::state::IndexRef {
            id: index_id(b),
            len: b.len() as u64,
        });
        let elsewhere = self.branches_elsewhere();
        let stash_bytes = read_opt(&self.common, Path::new("logs/refs/stash"))?;
        let stash = stash_bytes.as_deref().and_then(StashLog::of);
        let stash_bytes = stash_bytes.filter(|_| stash.is_some());
        Ok(Read {
            state: GitState {
                version: STATE_VERSION,
                layout: self.repo.layout,
                head,
                refs,
                peeled: peeled.unwrap_or_default(),
                loose,
                packed,
                index,
                operation: self.operation(),
                elsewhere,
                stash,
            },
            index_bytes,
            packed_bytes,
            stash_bytes,
            common_dir: self.repo.common_dir.clone(),
        })
    }

    /// `packed-refs`: its id, parsed refs and bytes (parsed again only when its stat changed).
    #[allow(clippy::type_complexity)]
    fn packed(
        &self,
    ) -> Result<
        (
            Option<String>,
            Option<Arc<BTreeMap<String, String>>>,
            Option<Arc<Vec<u8>>>,
            Option<Arc<BTreeMap<String, String>>>,
        ),
        ReadError,
    > {
        use std::os::unix::fs::MetadataExt;
        let path = self.repo.common_dir.join("packed-refs");
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((None, None, None, None));
            }
            Err(e) => return Err(ReadError::Io { path, source: e }),
        };
        let key: StatKey = (
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        );
        let mut cache = packed_cache().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(&path).filter(|c| c.key == key) {
            return Ok((
                Some(c.id.clone()),
                Some(c.packed.clone()),
                Some(c.bytes.clone()),
                Some(c.peeled.clone()),
            ));
        }
        let Some(bytes) = read_opt(&self.common, Path::new("packed-refs"))? else {
            return Ok((None, None, None, None));
        };
        let id = packed_id(&bytes);
        let packed = Arc::new(parse_packed_refs(&bytes));
        let peeled = Arc::new(parse_packed_peeled(&bytes));
        let bytes = Arc::new(bytes);
        cache.insert(
            path,
            PackedCache {
                key,
                id: id.clone(),
                packed: packed.clone(),
                peeled: peeled.clone(),
                bytes: bytes.clone(),
            },
        );
        Ok((Some(id), Some(packed), Some(bytes), Some(peeled)))
    }

    /// Branches that HEADs of the repository's other worktrees are on.
    fn branches_elsewhere(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut heads: Vec<std::path::PathBuf> = Vec::new();
        if self.repo.layout == Layout::LinkedWorktree {
            heads.push("HEAD".into());
        }
        if let Ok(entries) = self.common.read_dir("worktrees") {
            for e in entries.flatten() {
                heads.push(Path::new("worktrees").join(e.file_name()).join("HEAD"));
            }
        }
        for h in heads {
            // The worktree's own HEAD is not "elsewhere".
            let canon = |p: std::path::PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
            if self.repo.layout == Layout::LinkedWorktree
                && canon(self.repo.common_dir.join(&h)) == canon(self.repo.git_dir.join("HEAD"))
            {
                continue;
            }
            if let Ok(Some(b)) = read_opt(&self.common, &h) {
                if let Some(Head::Branch { name, .. }) = parse_head(&b, &BTreeMap::new()) {
                    out.push(name);
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Whether a ref name is one a state records.
pub fn tracked_ref(name: &str) -> bool {
    name.starts_with("refs/heads/") || name.starts_with("refs/tags/") || name == "refs/stash"
}

fn parse_head(bytes: &[u8], refs: &BTreeMap<String, String>) -> Option<Head> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if let Some(name) = text.strip_prefix("ref:") {
        let name = name.trim().to_owned();
        let oid = refs.get(&name).cloned();
        Some(Head::Branch { name, oid })
    } else if is_oid(text) {
        Some(Head::Detached { oid: text.into() })
    } else {
        None
    }
}

impl GitState {
    /// Reads the state of the repository of `workspace` (environment: the process's).
    pub fn read(workspace: &Path) -> Result<Found, ReadError> {
        match Handles::find(workspace)? {
            None => Ok(Found::None),
            Some(Err(u)) => Ok(Found::Untracked(u)),
            Some(Ok(h)) => Ok(Found::State(Box::new(h.read()?))),
        }
    }

    /// Rebuilds [`GitState::refs`] of a deserialized state from its loose refs and the
    /// `packed-refs` bytes its [`GitState::packed`] names (`None`: not stored; the packed
    /// refs are then missing and the state should not be planned from).
    pub fn hydrate(&mut self, packed_bytes: Option<&[u8]>) {
        let mut refs = packed_bytes.map(parse_packed_refs).unwrap_or_default();
        self.peeled = Arc::new(packed_bytes.map(parse_packed_peeled).unwrap_or_default());
        refs.extend(self.loose.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Head::Branch { name, oid } = &mut self.head {
            if let Some(v) = refs.get(name.as_str()) {
                *oid = Some(v.clone());
            }
        }
        self.refs = refs;
    }

    /// The serialized form (one JSON object).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a git state serializes")
    }

    /// Parses [`GitState::to_json`]'s form; a newer version is refused.
    pub fn from_json(s: &str) -> Result<Self, String> {
        let v: GitState = serde_json::from_str(s).map_err(|e| e.to_string())?;
        if v.version > STATE_VERSION {
            return Err(format!(
                "git state version {} is newer than {STATE_VERSION}",
                v.version
            ));
        }
        Ok(v)
    }

    /// A short name for HEAD's place: `agent-work @ 3fce3b5`, `detached at v2.40.0`,
    /// `detached at 3fce3b5`.
    pub fn describe_head(&self) -> String {
        describe_head(&self.head, &self.refs, &self.peeled)
    }
}

/// See [`GitState::describe_head`].
pub fn describe_head(
    head: &Head,
    refs: &BTreeMap<String, String>,
    peeled: &BTreeMap<String, String>,
) -> String {
    match head {
        Head::Branch { name, oid } => {
            let short = name.strip_prefix("refs/heads/").unwrap_or(name);
            match oid {
                Some(o) => format!("{short} @ {}", &o[..7.min(o.len())]),
                None => format!("{short} (no commit yet)"),
            }
        }
        Head::Detached { oid } => {
            let tag = refs
                .iter()
                .find(|(k, v)| {
                    k.starts_with("refs/tags/")
                        && (*v == oid || peeled.get(k.as_str()).is_some_and(|p| p == oid))
                })
                .map(|(k, _)| k.trim_start_matches("refs/tags/").to_owned());
            match tag {
                Some(t) => format!("detached at {t}"),
                None => format!("detached at {}", &oid[..7.min(oid.len())]),
            }
        }
    }
}
