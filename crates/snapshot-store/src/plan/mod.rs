//! Planning a restore: the earliest before-state per path at or after the target,
//! compared with the disk. A plan is a preview: it changes nothing in the workspace (it
//! may write into the store, as blob files, content a log keeps that the restore needs).

pub(crate) mod git_gone;
pub(crate) mod scanned;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::blob::hash_file;
use crate::codec::Shared;
use crate::error::{CorruptFile, FsFailure, PlanError};
use crate::format::{BeforeState, SkipReason};
use crate::fsio::{DiskMeta, FileKind, Walk};
use crate::path::RelPath;
use crate::seam::{Area, FsOp};
use crate::session::Session;

/// A restore plan: only actions that would change the disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestorePlan {
    /// The session the plan belongs to.
    pub session_id: String,
    /// The target anchor (user-message seq), inclusive.
    pub target_seq: u64,
    /// Actions, sorted by path.
    pub actions: Vec<PlannedAction>,
    /// Paths whose recorded state is over the cap: known but not restorable.
    pub uncovered: Vec<UncoveredPath>,
    /// Paths that cannot be restored (recorded as skipped, or the disk now has a
    /// symlink, directory, special file or hard link there).
    pub skipped: Vec<SkippedPath>,
    /// Recorded paths that already match the disk.
    pub unchanged: usize,
    /// Paths changed only outside the agent since the target: left as they are.
    #[serde(default)]
    pub outside: Vec<RelPath>,
    /// The workspace's paths the scan does not hold the content of (budgets, unreadable).
    #[serde(default)]
    pub not_covered: Vec<crate::scan::NotCovered>,
    /// Directories to remove when the restore leaves them empty (they hold only
    /// paths that did not exist at the target), deepest first.
    #[serde(default)]
    pub remove_dirs: Vec<RelPath>,
}

/// The session's restore planning: what a rewind to an anchor would do, for the
/// session alone or along its fork chain.
#[derive(Clone, Copy)]
pub(crate) struct Planner<'s> {
    pub(crate) s: &'s Session,
}

impl RestorePlan {
    /// True when the plan would change nothing.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// One planned change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedAction {
    /// Workspace-relative path.
    pub path: RelPath,
    /// Lossy text of the path, for display.
    pub display: String,
    /// The anchor whose before-state is restored.
    pub anchor_seq: u64,
    /// What the restore will do.
    pub action: Action,
    /// What the disk holds now (checked again before the restore changes anything).
    pub current: Current,
}

/// A planned change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Action {
    /// Replace the existing file's bytes.
    Write {
        /// SHA-256 of the bytes to write.
        sha256: String,
        /// Their length.
        size: u64,
        /// Permission bits to set.
        mode: u32,
    },
    /// Create the (absent) file, creating missing parent directories first.
    Recreate {
        /// SHA-256 of the bytes to write.
        sha256: String,
        /// Their length.
        size: u64,
        /// Permission bits to set.
        mode: u32,
        /// Parent directories that do not exist and will be created (outermost first).
        missing_dirs: Vec<RelPath>,
    },
    /// Delete the file (it did not exist at the target).
    Delete,
}

/// The disk state of a planned path when the plan was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Current {
    /// Nothing there.
    Absent,
    /// A regular file.
    File {
        /// Size in bytes.
        size: u64,
        /// Permission bits.
        mode: u32,
        /// SHA-256 when it was computed (same size as the target), else `None`.
        sha256: Option<String>,
        /// `lstat` metadata (the restore refuses the path if this changed).
        meta: DiskMeta,
    },
    /// A directory holding nothing but files the restore deletes (a file replaced by a
    /// directory since the target): the restore removes it, once emptied, before it
    /// writes the file.
    Directory,
}

/// A path whose recorded state is over the cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UncoveredPath {
    /// Workspace-relative path.
    pub path: RelPath,
    /// Lossy text.
    pub display: String,
    /// Anchor of the record.
    pub anchor_seq: u64,
    /// Recorded size.
    pub size: u64,
}

/// A path that cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedPath {
    /// Workspace-relative path.
    pub path: RelPath,
    /// Lossy text.
    pub display: String,
    /// Anchor of the record.
    pub anchor_seq: u64,
    /// Why.
    pub reason: SkipReason,
}

/// A file the plan wants back whose place holds something of another kind (a directory in
/// its place or in place of a parent), decided once the other actions are planned.
struct Wanted {
    path: RelPath,
    anchor_seq: u64,
    sha256: String,
    size: u64,
    mode: u32,
}

impl Wanted {
    fn recreate(self, missing_dirs: Vec<RelPath>, current: Current) -> PlannedAction {
        PlannedAction {
            display: self.path.display(),
            path: self.path,
            anchor_seq: self.anchor_seq,
            action: Action::Recreate {
                sha256: self.sha256,
                size: self.size,
                mode: self.mode,
                missing_dirs,
            },
            current,
        }
    }

    fn skipped(self, reason: SkipReason) -> SkippedPath {
        SkippedPath {
            display: self.path.display(),
            path: self.path,
            anchor_seq: self.anchor_seq,
            reason,
        }
    }
}

impl RestorePlan {
    /// Adds `s` to the skipped paths, then puts them in path order.
    fn skip_sorted(&mut self, s: SkippedPath) {
        self.skipped.push(s);
        self.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    }
}

/// The paths `actions` delete.
pub(crate) fn deleted_paths(actions: &[PlannedAction]) -> std::collections::HashSet<RelPath> {
    actions
        .iter()
        .filter(|a| matches!(a.action, Action::Delete))
        .map(|a| a.path.clone())
        .collect()
}

/// Two files the plan would both bring back where one needs the other's path to be a
/// directory (`d` and `d/c`, with nothing at `d` now: the records of two paths need not
/// describe one moment, e.g. `d` made by another session or by hand, and `d/c` of this
/// one): the file under it keeps it a directory, as a file the plan writes in a directory
/// does (see `Planner::recreate_over_emptied_dirs`), and the file at `d` is skipped
/// ("is a directory") rather than written and then failing the restore of `d/c`.
fn skip_files_over_written_files(plan: &mut RestorePlan) {
    let written: std::collections::HashSet<&RelPath> = plan
        .actions
        .iter()
        .filter(|a| !matches!(a.action, Action::Delete))
        .map(|a| &a.path)
        .collect();
    let mut over: std::collections::HashSet<RelPath> = std::collections::HashSet::new();
    for p in &written {
        let parents = p.components().count() - 1;
        for n in 1..=parents {
            if let Some(q) = p.prefix(n).filter(|q| written.contains(q)) {
                over.insert(q);
            }
        }
    }
    if over.is_empty() {
        return;
    }
    let (kept, skipped): (Vec<_>, Vec<_>) = std::mem::take(&mut plan.actions)
        .into_iter()
        .partition(|a| matches!(a.action, Action::Delete) || !over.contains(&a.path));
    plan.actions = kept;
    for a in skipped {
        plan.skip_sorted(SkippedPath {
            path: a.path,
            display: a.display,
            anchor_seq: a.anchor_seq,
            reason: SkipReason::Directory,
        });
    }
}

/// A workspace path's state, observed for planning.
pub(crate) enum Observed {
    /// Absent; `Some(i)` when parent component `i` is missing too.
    Absent(Option<usize>),
    File {
        meta: DiskMeta,
    },
    Blocked(SkipReason),
}

impl Session {
    /// The session's restore planning.
    pub(crate) fn planner(&self) -> Planner<'_> {
        Planner { s: self }
    }

    /// Plans restoring the workspace to its state at anchor `target_seq` (inclusive):
    /// per path, the earliest recorded before-state anchored at or after the target,
    /// compared with the disk. Changes nothing. A target whose state already
    /// matches the disk plans no actions.
    pub fn plan_restore(&self, target_seq: u64) -> Result<RestorePlan, PlanError> {
        self.planner().plan_restore(target_seq)
    }
}

impl Planner<'_> {
    pub(crate) fn observe(&self, rel: &RelPath) -> Result<Observed, FsFailure> {
        let mut created = Vec::new();
        match self.s.ws.walk_parent(rel, false, &mut created)? {
            Walk::Missing(i) => Ok(Observed::Absent(Some(i))),
            Walk::Blocked(link) => Ok(Observed::Blocked(if link {
                SkipReason::SymlinkedParent
            } else {
                SkipReason::ParentNotDirectory
            })),
            Walk::Parent(dir) => {
                let (_, name) = rel.split_last();
                Ok(match self.s.ws.lstat(&dir, name, rel)? {
                    None => Observed::Absent(None),
                    Some(meta) => match meta.kind {
                        FileKind::File if meta.nlink > 1 => {
                            Observed::Blocked(SkipReason::HardLink { nlink: meta.nlink })
                        }
                        FileKind::File => Observed::File { meta },
                        FileKind::Dir => Observed::Blocked(SkipReason::Directory),
                        FileKind::Symlink => Observed::Blocked(SkipReason::Symlink),
                        FileKind::Other => Observed::Blocked(SkipReason::Special),
                    },
                })
            }
        }
    }

    /// Hashes the current file at `rel` (no symlink followed); `None` if it is not a regular file now.
    pub(crate) fn hash_current(
        &self,
        rel: &RelPath,
    ) -> Result<Option<(String, u64, DiskMeta)>, FsFailure> {
        let mut created = Vec::new();
        let Walk::Parent(dir) = self.s.ws.walk_parent(rel, false, &mut created)? else {
            return Ok(None);
        };
        let (_, name) = rel.split_last();
        let opened = match self.s.ws.open_read(&dir, name, rel) {
            Ok(o) => o,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let Some((mut f, meta)) = opened else {
            return Ok(None);
        };
        if meta.kind != FileKind::File {
            return Ok(None);
        }
        let (sha, size) = hash_file(&self.s.ws, &mut f, rel)?;
        Ok(Some((sha, size, meta)))
    }

    pub(crate) fn plan_restore(&self, target_seq: u64) -> Result<RestorePlan, PlanError> {
        self.s.store.guard_writable()?;
        if let Err(e) = self.s.load() {
            return Err(e.into());
        }
        let mut best: BTreeMap<RelPath, (u64, u64, BeforeState)> = BTreeMap::new();
        let mut noted = std::collections::BTreeSet::new();
        for (seq, rec) in self.s.load_groups(target_seq)? {
            if crate::plan::scanned::is_outside(&rec.source) {
                noted.extend(rec.entries.into_iter().map(|e| e.path));
                continue;
            }
            for e in rec.entries {
                let better = match best.get(&e.path) {
                    Some((a, o, _)) => (seq, e.order) < (*a, *o),
                    None => true,
                };
                if better {
                    best.insert(e.path, (seq, e.order, e.before));
                }
            }
        }
        let outside = crate::plan::scanned::outside_only(noted, &best.keys().collect());
        let picks = best
            .into_iter()
            .map(|(path, (anchor, _, before))| (path, anchor, before))
            .collect();
        let mut plan = self.plan_picks(target_seq, picks)?;
        plan.outside = outside;
        Ok(plan)
    }

    /// Compares the selected before-states (per path: the record that wins, its anchor) with the disk.
    pub(crate) fn plan_picks(
        &self,
        target_seq: u64,
        picks: Vec<(RelPath, u64, BeforeState)>,
    ) -> Result<RestorePlan, PlanError> {
        self.plan_picks_with(target_seq, picks, &HashMap::new())
    }

    /// [`Planner::plan_picks`], where content the plan needs may also be kept in the logs of
    /// other sessions (`elsewhere`: a fork's ancestors). The content a restore will write
    /// and that a session's log keeps is put into blob files first (see
    /// [`Planner::materialize`]), so the restore, its journal and the diff read it as any
    /// blob.
    pub(crate) fn plan_picks_with(
        &self,
        target_seq: u64,
        picks: Vec<(RelPath, u64, BeforeState)>,
        elsewhere: &HashMap<String, Shared>,
    ) -> Result<RestorePlan, PlanError> {
        let plan = self.plan_disk(target_seq, picks)?;
        self.materialize(&plan, elsewhere)?;
        Ok(plan)
    }

    /// Writes out as blob files the content the actions of `plan` write that a log keeps
    /// (this session's, or `elsewhere`) and no blob file holds yet. Each is checked
    /// against its name first: content that does not hash to it is damage of the log.
    fn materialize(
        &self,
        plan: &RestorePlan,
        elsewhere: &HashMap<String, Shared>,
    ) -> Result<(), PlanError> {
        let wanted: Vec<(&str, u64)> = plan
            .actions
            .iter()
            .filter_map(|a| match &a.action {
                Action::Write { sha256, size, .. } | Action::Recreate { sha256, size, .. } => {
                    Some((sha256.as_str(), *size))
                }
                _ => None,
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let st = self.s.lock_state();
        if elsewhere.is_empty()
            && !wanted
                .iter()
                .any(|(sha, _)| st.idx.inline.contains_key(*sha))
        {
            return Ok(());
        }
        let fs = &self.s.store.inner.fs;
        let _g = self.s.lock_shared()?;
        for (sha, size) in wanted {
            if !st.idx.inline.contains_key(sha) && !elsewhere.contains_key(sha) {
                continue;
            }
            if fs.blob_size(sha)? == Some(size) {
                continue;
            }
            // This session's log first (read back from the file when it is only there, and
            // checked against its name then: not hashed a second time here).
            let own = self.s.kept_content_checked(&st, sha)?;
            let (bytes, checked) = match &own {
                Some((b, checked)) => (b, *checked),
                None => match elsewhere.get(sha) {
                    Some(b) => (b, false),
                    None => continue,
                },
            };
            let actual = match checked {
                true => sha.to_string(),
                false => hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&**bytes)),
            };
            if actual != sha || bytes.len() as u64 != size {
                return Err(PlanError::Corrupt(CorruptFile {
                    path: self.s.log_path().to_string_lossy().into_owned(),
                    detail: format!(
                        "content kept for blob {sha} ({size} bytes) has {} bytes hashing to {actual}",
                        bytes.len()
                    ),
                }));
            }
            crate::blob::put_bytes(fs, sha.to_string(), bytes)?;
        }
        Ok(())
    }

    /// The plan of `picks` against the disk (see [`Planner::plan_picks`]).
    fn plan_disk(
        &self,
        target_seq: u64,
        picks: Vec<(RelPath, u64, BeforeState)>,
    ) -> Result<RestorePlan, PlanError> {
        let mut plan = RestorePlan {
            session_id: self.s.id.clone(),
            target_seq,
            actions: Vec::new(),
            uncovered: Vec::new(),
            skipped: Vec::new(),
            unchanged: 0,
            outside: Vec::new(),
            not_covered: self.scan_not_covered()?,
            remove_dirs: Vec::new(),
        };
        let targets: BTreeMap<RelPath, BeforeState> = picks
            .iter()
            .map(|(p, _, b)| (p.clone(), b.clone()))
            .collect();
        let observe_err = |e: FsFailure, rel: &RelPath| -> PlanError {
            if e.area == Area::Workspace {
                PlanError::Observe {
                    path: rel.display(),
                    source: e,
                }
            } else {
                PlanError::Fs(e)
            }
        };
        // Paths that cannot be looked at (a directory on the way, or the workspace itself,
        // refuses access): planned as their before-state asks; the restore refuses each
        // alone, named with why, as a file it cannot read.
        let mut unseen: Vec<PlannedAction> = Vec::new();
        let observe = |rel: &RelPath| -> Result<Option<Observed>, PlanError> {
            match self.observe(rel) {
                Ok(o) => Ok(Some(o)),
                Err(e) if e.area == Area::Workspace && denied(&e) => Ok(None),
                Err(e) => Err(observe_err(e, rel)),
            }
        };
        // Files whose parent is a file now (a directory the agent replaced with a file): they
        // come back when the plan deletes that file (see below).
        let mut under_a_file: Vec<Wanted> = Vec::new();
        // Files replaced by a directory: they come back when the plan empties it.
        let mut over_a_dir: Vec<Wanted> = Vec::new();
        for (path, anchor_seq, before) in picks {
            let display = path.display();
            let skip = |reason: SkipReason| SkippedPath {
                path: path.clone(),
                display: display.clone(),
                anchor_seq,
                reason,
            };
            let action = |action: Action, current: Current| PlannedAction {
                path: path.clone(),
                display: display.clone(),
                anchor_seq,
                action,
                current,
            };
            match before {
                BeforeState::Uncovered { size } => plan.uncovered.push(UncoveredPath {
                    path: path.clone(),
                    display: display.clone(),
                    anchor_seq,
                    size,
                }),
                BeforeState::Skipped { reason } => plan.skipped.push(skip(reason)),
                BeforeState::Absent => {
                    let Some(observed) = observe(&path)? else {
                        unseen.push(action(Action::Delete, Current::Absent));
                        continue;
                    };
                    match observed {
                        // Under a file, nothing can be there; a directory is no file: absent
                        // too (the files in the directory have records of their own).
                        Observed::Absent(_)
                        | Observed::Blocked(
                            SkipReason::ParentNotDirectory | SkipReason::Directory,
                        ) => plan.unchanged += 1,
                        Observed::Blocked(reason) => plan.skipped.push(skip(reason)),
                        Observed::File { meta } => plan.actions.push(action(
                            Action::Delete,
                            Current::File {
                                size: meta.size,
                                mode: meta.mode,
                                sha256: None,
                                meta,
                            },
                        )),
                    }
                }
                BeforeState::File { sha256, size, mode } => {
                    let Some(observed) = observe(&path)? else {
                        unseen.push(action(
                            Action::Write { sha256, size, mode },
                            Current::Absent,
                        ));
                        continue;
                    };
                    match observed {
                        Observed::Blocked(
                            kind @ (SkipReason::ParentNotDirectory | SkipReason::Directory),
                        ) => {
                            let wanted = Wanted {
                                path: path.clone(),
                                anchor_seq,
                                sha256,
                                size,
                                mode,
                            };
                            match kind {
                                SkipReason::Directory => over_a_dir.push(wanted),
                                _ => under_a_file.push(wanted),
                            }
                        }
                        Observed::Blocked(reason) => plan.skipped.push(skip(reason)),
                        Observed::Absent(missing) => {
                            let (parents, _) = path.split_last();
                            let missing_dirs = match missing {
                                Some(i) => (i + 1..=parents.len())
                                    .filter_map(|n| path.prefix(n))
                                    .collect(),
                                None => Vec::new(),
                            };
                            plan.actions.push(action(
                                Action::Recreate {
                                    sha256,
                                    size,
                                    mode,
                                    missing_dirs,
                                },
                                Current::Absent,
                            ));
                        }
                        Observed::File { meta } => {
                            let mut cur_sha = None;
                            let mut same = false;
                            if meta.size == size {
                                // A file that cannot be read is planned as changed: the
                                // restore refuses that path alone when it cannot copy it.
                                let hashed = match self.hash_current(&path) {
                                    Err(e) if e.area == Area::Workspace && e.op != FsOp::Stat => {
                                        None
                                    }
                                    other => other.map_err(|e| observe_err(e, &path))?,
                                };
                                if let Some((sha, _, m2)) = hashed {
                                    // A file that changed while it was hashed is planned; the restore re-checks.
                                    same = sha == sha256 && m2.mode == mode && m2 == meta;
                                    cur_sha = Some(sha);
                                }
                            }
                            if same {
                                plan.unchanged += 1;
                            } else {
                                plan.actions.push(action(
                                    Action::Write { sha256, size, mode },
                                    Current::File {
                                        size: meta.size,
                                        mode: meta.mode,
                                        sha256: cur_sha,
                                        meta,
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
        // Ahead of the files recreated in place of a file or a directory, which depend on
        // the deletions: one of these refused refuses them too.
        plan.actions.extend(unseen);
        self.recreate_under_deleted_files(&mut plan, under_a_file);
        self.recreate_over_emptied_dirs(&mut plan, over_a_dir)
            .map_err(PlanError::Fs)?;
        skip_files_over_written_files(&mut plan);
        plan.remove_dirs = crate::plan::scanned::emptied_dirs(&plan.actions, &targets);
        // A path the plan restores is not listed as not covered too (its line would read as a
        // failure): the restore sets its state, and the next scan looks at it anew.
        let acted: std::collections::HashSet<&RelPath> =
            plan.actions.iter().map(|a| &a.path).collect();
        plan.not_covered.retain(|n| !acted.contains(&n.path));
        Ok(plan)
    }

    /// A file replaced by a directory since the target (`rm f && mkdir f && …`) comes back
    /// when that directory holds nothing but files the plan deletes (they did not exist at
    /// the target) and directories, and the plan writes no file in it: the restore deletes
    /// them, removes the emptied directory and writes the file. Its action comes after
    /// every other, so the deletions run first (and rollback and undo take it back first,
    /// before they put those files back in the directory). A directory holding anything
    /// else is skipped, as before ("is a directory").
    fn recreate_over_emptied_dirs(
        &self,
        plan: &mut RestorePlan,
        over_a_dir: Vec<Wanted>,
    ) -> Result<(), FsFailure> {
        if over_a_dir.is_empty() {
            return Ok(());
        }
        let deleted = deleted_paths(&plan.actions);
        let mut recreated = Vec::new();
        for w in over_a_dir {
            // A file the plan writes under the directory keeps it a directory.
            let keeps_a_file = plan
                .actions
                .iter()
                .any(|a| !matches!(a.action, Action::Delete) && w.path.is_ancestor_of(&a.path));
            if !keeps_a_file && self.holds_only(&w.path, &deleted)? {
                recreated.push(w.recreate(Vec::new(), Current::Directory));
            } else {
                plan.skip_sorted(w.skipped(SkipReason::Directory));
            }
        }
        plan.actions.extend(recreated);
        Ok(())
    }

    /// The directory `rel` holds nothing but paths of `deleted` and directories (`false`
    /// when it is not a directory, or cannot be listed). Nothing is followed.
    pub(crate) fn holds_only(
        &self,
        rel: &RelPath,
        deleted: &std::collections::HashSet<RelPath>,
    ) -> Result<bool, FsFailure> {
        let mut created = Vec::new();
        let Walk::Parent(parent) = self.s.ws.walk_parent(rel, false, &mut created)? else {
            return Ok(false);
        };
        let (_, name) = rel.split_last();
        let Some(dir) = crate::fsio::open_sub(&parent, name) else {
            return Ok(false);
        };
        self.s.ws.walk_tree(
            &dir,
            rel,
            &mut |child| deleted.contains(child),
            &mut |_, _, _| Ok(true),
        )
    }

    /// A file whose parent directory was replaced by a file since the target (`rm -rf d &&
    /// echo > d`) comes back when the plan deletes that file (it did not exist at the
    /// target): it is recreated after the deletion, the directory made again. Its action
    /// comes after every other, so the deletion runs first, and names the directory among
    /// the ones it creates, so rollback and undo remove it before they put the file back.
    /// Any other such file is skipped ("a parent component is not a directory").
    fn recreate_under_deleted_files(&self, plan: &mut RestorePlan, under_a_file: Vec<Wanted>) {
        if under_a_file.is_empty() {
            return;
        }
        let deleted = deleted_paths(&plan.actions);
        let mut recreated = Vec::new();
        for w in under_a_file {
            let parents = w.path.components().count() - 1;
            // The file in the way is the first component that is not a directory; its
            // ancestors are directories, since the plan found it a regular file.
            let blocker =
                (1..=parents).find(|&n| w.path.prefix(n).is_some_and(|p| deleted.contains(&p)));
            match blocker {
                Some(n) => {
                    let missing_dirs = (n..=parents).filter_map(|i| w.path.prefix(i)).collect();
                    recreated.push(w.recreate(missing_dirs, Current::Absent));
                }
                None => plan.skip_sorted(w.skipped(SkipReason::ParentNotDirectory)),
            }
        }
        plan.actions.extend(recreated);
    }
}

/// Whether a failure is a refused access (`EACCES`, `EPERM`): a directory on the way, or the
/// workspace itself, that this process may not search or list.
fn denied(e: &FsFailure) -> bool {
    matches!(
        e.source.raw_os_error(),
        Some(n) if n == rustix::io::Errno::ACCESS.raw_os_error() || n == rustix::io::Errno::PERM.raw_os_error()
    )
}

#[cfg(test)]
mod tests {
    use crate::codec::{Record, Shared};
    use crate::error::PlanError;
    use crate::format::{BeforeState, Entry, EntrySource};
    use crate::path::RelPath;
    use crate::records::encode_log;
    use crate::{Store, StoreOptions};

    #[test]
    fn content_kept_under_another_name_fails_the_plan_closed() {
        // A log whose `blob` record names content that does not hash to the name: the
        // frame is intact (its checksum covers the bytes written), the record is not.
        let tmp = tempfile::tempdir().expect("tempdir");
        let (root, cwd) = (tmp.path().join("store"), tmp.path().join("ws"));
        std::fs::create_dir_all(&cwd).expect("ws");
        let store = Store::open(&root, StoreOptions::default()).expect("store");
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"good"));
        let log = encode_log(&[
            Record::Session {
                session_id: "s1".into(),
            },
            Record::Blob {
                sha256: sha.clone(),
                bytes: Shared::copy_of(b"evil"),
            },
            Record::Group {
                anchor_seq: 5,
                source: EntrySource::Recheck,
                entries: vec![Entry {
                    path: RelPath::from_bytes(b"a.txt").expect("path"),
                    order: 1,
                    before: BeforeState::File {
                        sha256: sha.clone(),
                        size: 4,
                        mode: 0o644,
                    },
                }],
            },
        ]);
        let sdir = root
            .join("sessions")
            .join(crate::path::encode_id("s1").expect("id"));
        std::fs::create_dir_all(&sdir).expect("session dir");
        std::fs::write(sdir.join("records.log"), log).expect("log");
        let s = store.session("s1", &cwd).expect("session");
        match s.plan_restore(5) {
            Err(PlanError::Corrupt(c)) => {
                assert!(c.detail.contains("hashing to"), "{c:?}");
                assert!(c.path.ends_with("records.log"), "{c:?}");
            }
            other => panic!("expected a corrupt log, got {other:?}"),
        }
        // Nothing was written: no blob file under that name, nothing in the workspace.
        assert!(!root.join("blobs").join(&sha).exists());
        assert!(!cwd.join("a.txt").exists());
    }
}
