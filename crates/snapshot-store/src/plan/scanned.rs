//! The workspace scan's share of planning: outside notes, the workspace's
//! not-covered list, and directories a restore empties.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::error::Fault;
use crate::format::{BeforeState, EntrySource};
use crate::path::RelPath;
use crate::plan::{Action, PlannedAction, Planner};

use crate::scan::NotCovered;
use crate::scan::diff::reason_text;
use crate::scan::index::Coverage;
use crate::scan::workspace::{peek, unreadable_seen, workspace_key};

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

impl Planner<'_> {
    /// The workspace's not-covered paths as its index lists them now (empty
    /// without an index).
    pub(crate) fn scan_not_covered(&self) -> Result<Vec<NotCovered>, Fault> {
        let Some(root) = self.s.workspace_root() else {
            return Ok(Vec::new());
        };
        let Ok(canonical) = std::fs::canonicalize(root) else {
            return Ok(Vec::new());
        };
        let cap = self.s.store.max_file_bytes();
        let key = workspace_key(&canonical);
        let Some((mut v, scanned_at)) = peek(&self.s.store, &key, |ix| {
            let v: Vec<NotCovered> = ix
                .entries()
                .iter()
                .filter_map(|(k, e)| match &e.cov {
                    Coverage::Not(u) => RelPath::from_bytes(k).ok().map(|path| NotCovered {
                        path,
                        reason: reason_text(u, e.stat.size, cap),
                    }),
                    _ => None,
                })
                .collect();
            (v, ix.scanned_at)
        })?
        else {
            return Ok(Vec::new());
        };
        // The directories the last scan could not list, and the files in them it could not
        // check, while the index that scan left is the one in place: their line replaces the
        // index's own for the same path.
        if let Some((at, list)) = unreadable_seen(&self.s.store, &key) {
            if at == scanned_at {
                let extra: Vec<NotCovered> = list
                    .iter()
                    .filter_map(|(p, reason)| {
                        RelPath::from_bytes(p).ok().map(|path| NotCovered {
                            path,
                            reason: reason.clone(),
                        })
                    })
                    .collect();
                v.retain(|n| !extra.iter().any(|x| x.path == n.path));
                v.extend(extra);
            }
        }
        v.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(v)
    }
}
