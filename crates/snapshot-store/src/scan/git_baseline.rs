//! Before-states from git: in a workspace that is a git repository's work tree, a file
//! identical to its blob in the repository's index needs no copy in the store.
//!
//! - At the baseline (a path's first read), [`GitBaseline::blob_of`] tells whether the file
//!   is the blob its index entry names — git's own rule: its `lstat` matches the entry's
//!   stat data (size, modification and status-change times, inode) and the entry is not
//!   racily clean (its modification time is before the index file's), or else the file
//!   hashed as a git blob has the entry's id. Such an entry is [`Coverage::Git`]: nothing is
//!   copied. Where git may convert content between a blob and its work-tree file (line
//!   endings, a filter such as Git LFS, `ident`: set by an attributes file or the config),
//!   the stat data are not trusted: every file is hashed, and a converted one is copied.
//! - When a scan records a change of such a file, its before-state is that blob:
//!   [`before_state`] reads it from the object store (checked against its id), names it by
//!   its SHA-256 as every before-state is, and writes a reference `gitrefs/<sha256>` (the
//!   object id, the repository's common directory, the size) instead of a blob file.
//! - A reader of a blob the store does not hold loose or packed falls back to the
//!   reference (`fsio::gitref`: `ref_size`, `ref_bytes`): the object is read from the repository and
//!   checked against its id (the caller checks the SHA-256). An object that is gone (a
//!   `git gc --prune=now` after the commit that held it was dropped) makes the blob missing:
//!   the restore refuses the rewind naming the file (`plan::git_gone::check_plan`), and
//!   `verify` names it.
//!
//! Anything uncertain — no repository, `GIT_DIR` and friends set, a split or sparse index,
//! an unknown required extension, SHA-256 object names — leaves the scan copying as it
//! does without git.

use std::path::{Path, PathBuf};

use git_state::{BlobHasher, IndexEntries};

use crate::error::FsFailure;
use crate::fsio::gitref::{GITREF_VERSION, GITREFS, GitRef, odb_for, ref_path};
use crate::fsio::{FileKind, StoreFs};

use super::index::{Coverage, IdxEntry, Stat};

/// What a workspace's git index says of its files, for one scan's baseline reads.
pub(crate) struct GitBaseline {
    entries: IndexEntries,
    /// The index file's modification time (seconds, nanoseconds): an entry modified at or
    /// after it is racily clean and is hashed.
    index_mtime: (i64, u32),
    root: PathBuf,
    /// Whether a file whose stat data match its entry is taken for its blob without reading
    /// it: only when no conversion between the blob and the work-tree file can apply (see
    /// [`conversions_possible`]). Otherwise every file is hashed: a converted file (line
    /// endings, a filter such as Git LFS, `ident`) does not hash to its blob and is copied.
    trust_stat: bool,
}

/// The attributes that make git convert a file between its blob and the work tree.
const CONVERTING: [&str; 6] = [
    "text",
    "eol",
    "crlf",
    "filter",
    "ident",
    "working-tree-encoding",
];

/// Whether an attributes file's text sets (or defines a macro with) an attribute that may
/// convert content: any of [`CONVERTING`] named other than unset (`-text`).
fn attributes_convert(text: &str) -> bool {
    text.lines().any(|line| {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            return false;
        }
        // The pattern first (a `[attr]` macro name for a definition), then the attributes.
        l.split_whitespace().skip(1).any(|a| {
            if a.starts_with('-') {
                return false;
            }
            let name = a.trim_start_matches('!').split('=').next().unwrap_or("");
            CONVERTING.contains(&name)
        })
    })
}

/// Whether a git config file's text may make git convert content: `core.autocrlf` set to
/// anything but false, an attributes file named (`core.attributesFile`), or an include
/// (what it includes is not read).
fn config_converts(text: &str) -> bool {
    text.lines().any(|line| {
        let l = line.trim().to_ascii_lowercase();
        if l.starts_with("[include") {
            return true;
        }
        let Some((k, v)) = l.split_once('=') else {
            return false;
        };
        let (k, v) = (k.trim(), v.trim());
        (k == "autocrlf" && !matches!(v, "false" | "no" | "off" | "0")) || k == "attributesfile"
    })
}

/// Whether git may convert content between blobs and work-tree files in this repository:
/// a tracked `.gitattributes` or `info/attributes` (or the user's attributes file) that sets
/// a converting attribute, or a config (the repository's, the user's, the system's) that
/// may. Unreadable means possible.
fn conversions_possible(repo: &git_state::Repo, entries: &IndexEntries) -> bool {
    let read = |p: &Path| match std::fs::read_to_string(p) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => Some("[include]".into()),
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut configs = vec![
        repo.common_dir.join("config"),
        repo.git_dir.join("config.worktree"),
    ];
    match std::env::var_os("GIT_CONFIG_GLOBAL") {
        Some(g) => configs.push(PathBuf::from(g)),
        None => {
            configs.extend(home.as_ref().map(|h| h.join(".gitconfig")));
            configs.extend(xdg.as_ref().map(|x| x.join("git").join("config")));
        }
    }
    if std::env::var_os("GIT_CONFIG_NOSYSTEM").is_none() {
        configs.push(PathBuf::from("/etc/gitconfig"));
    }
    // Settings given in the environment (`GIT_CONFIG_COUNT`, `GIT_CONFIG_PARAMETERS`).
    if std::env::var_os("GIT_CONFIG_COUNT").is_some()
        || std::env::var_os("GIT_CONFIG_PARAMETERS").is_some()
    {
        return true;
    }
    if configs
        .iter()
        .filter_map(|p| read(p))
        .any(|t| config_converts(&t))
    {
        return true;
    }
    let mut attributes = vec![repo.common_dir.join("info").join("attributes")];
    attributes.extend(xdg.as_ref().map(|x| x.join("git").join("attributes")));
    for e in &entries.entries {
        if e.path.rsplit(|b| *b == b'/').next() == Some(b".gitattributes".as_slice()) {
            use std::os::unix::ffi::OsStrExt;
            attributes.push(repo.work_tree.join(std::ffi::OsStr::from_bytes(&e.path)));
        }
    }
    attributes
        .iter()
        .filter_map(|p| read(p))
        .any(|t| attributes_convert(&t))
}

/// The repository whose work tree is `root` exactly, when its git state can be read.
fn repo_of(root: &Path) -> Option<git_state::Repo> {
    match git_state::discover(root, |k| std::env::var_os(k)) {
        Ok(Some(Ok(repo))) => Some(repo),
        _ => None,
    }
}

impl GitBaseline {
    /// The index of the repository whose work tree is `root`; `None` when there is none
    /// or it cannot be read with certainty (the scan then copies as without git).
    pub(crate) fn load(root: &Path) -> Option<GitBaseline> {
        let repo = repo_of(root)?;
        let path = repo.git_dir.join("index");
        let meta = std::fs::metadata(&path).ok()?;
        let bytes = std::fs::read(&path).ok()?;
        // The index replaced while it was read (a `git add` now): not trusted.
        let after = std::fs::metadata(&path).ok()?;
        if meta.len() != after.len() || meta.modified().ok()? != after.modified().ok()? {
            return None;
        }
        let entries = git_state::read_entries(&bytes).ok()?;
        let trust_stat = !conversions_possible(&repo, &entries);
        use std::os::unix::fs::MetadataExt;
        Some(GitBaseline {
            entries,
            index_mtime: (
                after.mtime(),
                u32::try_from(after.mtime_nsec()).unwrap_or(0),
            ),
            root: root.to_path_buf(),
            trust_stat,
        })
    }

    /// The blob id of `path` when the file, as the walk saw it (`st`), is that blob.
    pub(crate) fn blob_of(&self, path: &[u8], st: &Stat) -> Option<[u8; 20]> {
        let e = self.entries.get(path)?;
        if st.kind() != FileKind::File || st.nlink != 1 || st.size != u64::from(e.size) {
            return None;
        }
        // Git keeps the low 32 bits of the seconds, the device and the inode.
        let stat_same = st.mtime_s as u32 == e.mtime_s
            && st.mtime_ns == e.mtime_ns
            && st.ctime_s as u32 == e.ctime_s
            && st.ctime_ns == e.ctime_ns
            && st.ino as u32 == e.ino;
        let racy = (i64::from(e.mtime_s), e.mtime_ns) >= self.index_mtime;
        if stat_same && !racy && self.trust_stat {
            return Some(e.oid);
        }
        (self.hash(path, st)? == e.oid).then_some(e.oid)
    }

    /// The git blob id of the file at `path`, read once; `None` when it cannot be read or
    /// its metadata is not what the walk saw, before or after the read.
    fn hash(&self, path: &[u8], st: &Stat) -> Option<[u8; 20]> {
        use rustix::fs::{Mode, OFlags};
        use std::io::Read;
        use std::os::unix::ffi::OsStrExt;
        let full = self.root.join(std::ffi::OsStr::from_bytes(path));
        let fd = rustix::fs::open(
            &full,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .ok()?;
        let same = |s: &rustix::fs::Stat| {
            let now = Stat::from_raw(s);
            now.size == st.size
                && now.mtime_s == st.mtime_s
                && now.mtime_ns == st.mtime_ns
                && now.ctime_s == st.ctime_s
                && now.ctime_ns == st.ctime_ns
                && now.ino == st.ino
        };
        if !same(&rustix::fs::fstat(&fd).ok()?) {
            return None;
        }
        let mut f = std::fs::File::from(fd);
        let mut h = BlobHasher::new(st.size);
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            let n = f.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            total += n as u64;
            h.update(&buf[..n]);
        }
        if total != st.size || !same(&rustix::fs::fstat(&f).ok()?) {
            return None;
        }
        Some(h.finish())
    }
}

/// Whether a path to read is a baseline read (no entry before, or one still pending) that a
/// git blob may stand for.
pub(crate) fn eligible(had_index: bool, old: Option<&IdxEntry>) -> bool {
    !had_index
        || matches!(
            old,
            Some(IdxEntry {
                cov: Coverage::Pending,
                ..
            })
        )
}

/// The before-state of an entry whose content is the git blob `oid` (`size` bytes) of the
/// repository whose work tree is `root`: the content's SHA-256, once the blob was read
/// (checked against its id) and a reference to it written (unless the store holds that
/// content already). `None` when the repository or the blob cannot be read: the
/// before-state is not covered.
pub(crate) fn before_state(
    fs: &StoreFs,
    root: &Path,
    oid: &[u8; 20],
    size: u64,
) -> Result<Option<String>, FsFailure> {
    let Some(repo) = repo_of(root) else {
        return Ok(None);
    };
    let odb = odb_for(&repo.common_dir);
    let bytes = match odb.read_blob(oid) {
        Ok(Some(b)) if b.len() as u64 == size => b,
        _ => return Ok(None),
    };
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    if fs.blob_size(&sha)? == Some(size) {
        return Ok(Some(sha));
    }
    let r = GitRef {
        v: GITREF_VERSION,
        oid: hex::encode(oid),
        size,
        common_dir: std::fs::canonicalize(&repo.common_dir).unwrap_or(repo.common_dir),
        work_tree: repo.work_tree,
    };
    let json = serde_json::to_vec(&r).unwrap_or_default();
    fs.create_dir_all(Path::new(GITREFS))?;
    fs.write_atomic(&ref_path(&sha), &json)?;
    Ok(Some(sha))
}

/// Paths a scan is about to read (path, `lstat`, index entry before), in the scan's order.
pub(crate) type Work = [(Box<[u8]>, Stat, Option<IdxEntry>)];

/// For each path a scan is about to read, its entry when a git blob stands for its content:
/// a baseline read ([`eligible`]) of a regular file with one link that is its blob in the
/// workspace's git index, or a read again of an entry a git blob stood for (one changed just
/// before the previous scan, see `needs_read`) whose file still hashes to that blob (it stays
/// that blob; otherwise it is read into the store). Empty when no path is such a read or the
/// index cannot be read with certainty; otherwise one slot per path. Files that must be
/// hashed are read on up to `threads` threads (0: one per CPU).
pub(crate) fn entries_for(
    root: &Path,
    had_index: bool,
    work: &Work,
    threads: usize,
) -> Vec<Option<IdxEntry>> {
    let candidates: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(_, (_, st, old))| {
            st.kind() == FileKind::File
                && st.nlink == 1
                && (eligible(had_index, old.as_ref())
                    || matches!(old, Some(e) if matches!(e.cov, Coverage::Git(_))))
        })
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let Some(g) = GitBaseline::load(root) else {
        return Vec::new();
    };
    let threads = if threads == 0 { crate::cpus() } else { threads }.max(1);
    let per = candidates.len().div_ceil(threads).max(256);
    let one = |i: usize| {
        let (path, st, old) = &work[i];
        match old.as_ref().map(|e| &e.cov) {
            // Read again: still the blob it was (the git index may name another one now).
            Some(Coverage::Git(was)) => (i, g.hash(path, st).filter(|now| now == was)),
            _ => (i, g.blob_of(path, st)),
        }
    };
    let found: Vec<(usize, Option<[u8; 20]>)> = if candidates.len() <= per {
        candidates.iter().map(|&i| one(i)).collect()
    } else {
        std::thread::scope(|s| {
            let runs: Vec<_> = candidates
                .chunks(per)
                .map(|c| s.spawn(move || c.iter().map(|&i| one(i)).collect::<Vec<_>>()))
                .collect();
            // A run that panicked finds nothing: its files are read into the store.
            runs.into_iter()
                .flat_map(|r| r.join().unwrap_or_default())
                .collect()
        })
    };
    let mut out = vec![None; work.len()];
    for (i, oid) in found {
        if let Some(oid) = oid {
            out[i] = Some(IdxEntry {
                stat: work[i].1,
                cov: Coverage::Git(oid),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converting_attributes_and_config_are_told_apart() {
        assert!(attributes_convert("*.txt text eol=crlf\n"));
        assert!(attributes_convert(
            "*.bin filter=lfs diff=lfs merge=lfs -text\n"
        ));
        assert!(attributes_convert("[attr]mine text\n"));
        assert!(attributes_convert("*.c ident\n"));
        assert!(attributes_convert("* text=auto\n"));
        assert!(!attributes_convert(
            "# *.txt text\n*.rs diff=rust\n*.png -text -diff\n"
        ));
        assert!(!attributes_convert(
            "docs/** linguist-documentation export-ignore\n"
        ));
        assert!(config_converts("[core]\n\tautocrlf = input\n"));
        assert!(config_converts("[core]\n\tattributesFile = ~/.attrs\n"));
        assert!(config_converts(
            "[includeIf \"gitdir:~/w/\"]\n\tpath = w.inc\n"
        ));
        assert!(!config_converts(
            "[core]\n\tautocrlf = false\n\tbare = false\n"
        ));
    }
}
