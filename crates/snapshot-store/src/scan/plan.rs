//! The scan's share of planning, restoring and sweeping: outside notes, the
//! workspace's not-covered list, directories a restore empties, and the blobs
//! workspace indexes keep alive.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use cap_std::fs::Dir;

use crate::error::{Fault, FsFailure};
use crate::format::{BeforeState, EntrySource};
use crate::fsio::Walk;
use crate::journal::{PathFailure, RestoreOutcome};
use crate::path::RelPath;
use crate::plan::{Action, PlannedAction};
use crate::seam::{Area, FsOp};
use crate::session::Session;
use crate::store::{Store, is_hidden};

use super::NotCovered;
use super::diff::{reason_text, referenced};
use super::index::Coverage;
use super::workspace::{WORKSPACES, peek, read_for_gc, workspace_key};

/// Whether a group's entries are outside notes (listed by a plan, never restored).
pub(crate) fn is_outside(source: &EntrySource) -> bool {
    matches!(source, EntrySource::Outside)
}

/// The paths noted as changed outside the agent that have no restorable record
/// (`picked` holds the paths with one), sorted.
pub(crate) fn outside_only(noted: BTreeSet<RelPath>, picked: &BTreeSet<&RelPath>) -> Vec<RelPath> {
    noted.into_iter().filter(|p| !picked.contains(p)).collect()
}

/// Directories a restore may remove once empty: parents of the paths it deletes
/// that hold no path whose target state is present (a file, or anything not
/// restorable), deepest first. The restore removes each only if it is empty then.
pub(crate) fn emptied_dirs(
    actions: &[PlannedAction],
    picks: &BTreeMap<RelPath, BeforeState>,
) -> Vec<RelPath> {
    let mut keep: HashSet<RelPath> = HashSet::new();
    for (p, b) in picks {
        if matches!(b, BeforeState::Absent) {
            continue;
        }
        let n = p.components().count();
        for i in 1..n {
            if let Some(d) = p.prefix(i) {
                keep.insert(d);
            }
        }
    }
    let mut dirs: BTreeSet<(usize, RelPath)> = BTreeSet::new();
    for a in actions {
        if !matches!(a.action, Action::Delete) {
            continue;
        }
        let n = a.path.components().count();
        for i in 1..n {
            if let Some(d) = a.path.prefix(i) {
                if !keep.contains(&d) {
                    dirs.insert((usize::MAX - i, d));
                }
            }
        }
    }
    dirs.into_iter().map(|(_, d)| d).collect()
}

impl Session {
    /// The workspace's not-covered paths as its index lists them now (empty
    /// without an index).
    pub(crate) fn scan_not_covered(&self) -> Result<Vec<NotCovered>, Fault> {
        let Some(root) = self.workspace_root() else {
            return Ok(Vec::new());
        };
        let Ok(canonical) = std::fs::canonicalize(root) else {
            return Ok(Vec::new());
        };
        let cap = self.store.max_file_bytes();
        let list = peek(&self.store, &workspace_key(&canonical), |ix| {
            let mut v: Vec<NotCovered> = ix
                .entries
                .iter()
                .filter_map(|(k, e)| match &e.cov {
                    Coverage::Not(u) => RelPath::from_bytes(k).ok().map(|path| NotCovered {
                        path,
                        reason: reason_text(u, e.stat.size, cap),
                    }),
                    _ => None,
                })
                .collect();
            v.sort_by(|a, b| a.path.cmp(&b.path));
            v
        })?;
        Ok(list.unwrap_or_default())
    }

    /// Removes the directories of `dirs` (deepest first) that hold nothing now but
    /// empty directories (those go too: they were made after the target as well).
    /// A directory still holding anything else is left; a failure is reported in `out`.
    pub(crate) fn remove_emptied_dirs(&self, dirs: &[RelPath], out: &mut RestoreOutcome) {
        for d in dirs {
            let mut created = Vec::new();
            if let Ok(Walk::Parent(parent)) = self.ws.walk_parent(d, false, &mut created) {
                let (_, name) = d.split_last();
                let r = self.ws.rmdir_if_empty(&parent, name, d).and_then(|gone| {
                    if gone {
                        return Ok(());
                    }
                    let Some(dir) = open_sub(&parent, name) else {
                        return Ok(());
                    };
                    if self.only_empty_dirs(&dir, d, 0)? {
                        self.ws.rmdir_if_empty(&parent, name, d)?;
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    out.failed.push(PathFailure {
                        path: d.clone(),
                        display: d.display(),
                        error: e.to_string(),
                    });
                }
            }
        }
    }

    /// Removes the empty-directory tree inside `dir`; `true` when `dir` is empty then.
    fn only_empty_dirs(&self, dir: &Dir, rel: &RelPath, depth: usize) -> Result<bool, FsFailure> {
        if depth > 64 {
            return Ok(false);
        }
        self.ws
            .io
            .check(FsOp::ReadDir, Area::Workspace, rel.as_path())?;
        let Ok(entries) = dir.entries() else {
            return Ok(false);
        };
        for e in entries {
            let Ok(e) = e else { return Ok(false) };
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if !is_dir {
                return Ok(false);
            }
            let name = e.file_name();
            let Ok(child_rel) =
                RelPath::from_bytes(&[rel.as_bytes(), b"/", name.as_bytes()].concat())
            else {
                return Ok(false);
            };
            let Some(child) = open_sub(dir, name.as_bytes()) else {
                return Ok(false);
            };
            if !self.only_empty_dirs(&child, &child_rel, depth + 1)? {
                return Ok(false);
            }
            if !self.ws.rmdir_if_empty(dir, name.as_bytes(), &child_rel)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Opens subdirectory `name` without following a symlink.
fn open_sub(dir: &impl std::os::fd::AsFd, name: &[u8]) -> Option<Dir> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, OsStr::from_bytes(name), flags, Mode::empty())
        .ok()
        .map(Dir::from)
}

/// Adds every blob a workspace index references to `live`. A corrupt index is
/// skipped (the next scan rebuilds it and stores what it needs again); a newer one
/// fails the sweep (closed: nothing is removed).
pub(crate) fn mark_live(store: &Store, live: &mut HashSet<String>) -> Result<(), Fault> {
    for name in store.inner.fs.list(Path::new(WORKSPACES))? {
        if is_hidden(&name) {
            continue;
        }
        if let Some(ix) = read_for_gc(store, &name)? {
            live.extend(referenced(&ix));
        }
    }
    Ok(())
}

/// Every workspace directory of the store: its key, the bytes of its own files
/// (the index, the lock) and the blobs its index references. A corrupt or missing
/// index references nothing (the next scan rebuilds it).
pub(crate) fn workspace_refs(store: &Store) -> Result<Vec<(String, u64, Vec<String>)>, Fault> {
    let mut out = Vec::new();
    for name in store.inner.fs.list(Path::new(WORKSPACES))? {
        if is_hidden(&name) {
            continue;
        }
        let Some(key) = name.to_str() else { continue };
        let mut bytes = 0;
        if let Ok(d) = store
            .inner
            .fs
            .dir
            .open_dir(Path::new(WORKSPACES).join(&name))
        {
            for e in d.entries().into_iter().flatten().flatten() {
                if let Ok(md) = e.metadata() {
                    if md.is_file() {
                        bytes += md.len();
                    }
                }
            }
        }
        let refs = match read_for_gc(store, &name)? {
            Some(ix) => referenced(&ix).collect(),
            None => Vec::new(),
        };
        out.push((key.to_string(), bytes, refs));
    }
    Ok(out)
}
