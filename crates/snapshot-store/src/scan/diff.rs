//! One scan of a locked workspace: walk, compare with the index, read what changed
//! into the store, update the index, and list the changes.

use std::collections::HashSet;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Fault;
use crate::fsio::{FileKind, WsFs};

use super::hash::{Hashed, hash_all};
use super::index::{Coverage, IdxEntry, Index, Stat, Uncovered};
use super::walk::{Sink, WalkOptions, walk, walk_some};
use super::watch::{Plan, ScanMode, Watcher};
use super::workspace::{Loaded, Locked};

/// Entries whose status changed less than this before the previous scan started are
/// re-read even when their metadata looks unchanged: file timestamps come from a
/// coarse clock, so a same-size rewrite within one tick would otherwise be missed.
pub(crate) const RACY_NS: u64 = 50_000_000;

/// What changed at one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Created,
    Modified,
    Deleted,
    ModeChanged,
}

/// One change found by a scan.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub path: Box<[u8]>,
    pub kind: ChangeKind,
    /// The index entry before the change (`None` for a creation).
    pub old: Option<IdxEntry>,
    /// The entry now (`None` for a deletion).
    pub new: Option<IdxEntry>,
}

/// What the scanning session's record log keeps (see [`Coverage::Kept`]).
#[derive(Clone, Copy)]
pub(crate) struct Keep<'a> {
    /// The scanning session.
    pub me: &'a str,
    /// The content its log keeps.
    pub kept: &'a crate::records::Kept,
    /// The index's entries kept in this log were checked against `kept` already (by an
    /// earlier scan, against the same log's content or less of it).
    pub checked: bool,
    /// Its tracked paths: a file read with content the log keeps for that path is not
    /// written to a blob file (the entry is [`Coverage::Kept`]).
    pub tracked: &'a std::collections::BTreeMap<crate::path::RelPath, crate::records::Tracked>,
    /// The content another session's log keeps, by name (empty when it cannot be read):
    /// the index's entries kept by that session are written to blob files first.
    pub fetch: &'a (dyn Fn(&str) -> std::collections::HashMap<String, crate::codec::Shared> + Sync),
    /// Where the new content of the changes this scan finds goes instead of a blob file
    /// each: the session's log, as a capture's does (`Session::log_sink`). Set for a scan
    /// after a tool call, whose every change the session then tracks with that content
    /// (see [`Outcome::kept`]).
    pub changes: Option<&'a crate::blob::LogSink<'a>>,
}

/// Limits of one scan.
#[derive(Clone, Copy)]
pub(crate) struct Limits<'a> {
    /// The scanning session's log (see [`Keep`]).
    pub keep: Keep<'a>,
    pub cap: u64,
    pub max_baseline_bytes: u64,
    pub max_files: u64,
    pub progress_batch: usize,
    pub threads: usize,
    /// What the walk of the scan before this one saw (its directories listed to their
    /// end and the names in them), with the `scanned_at` of the index it left; used only
    /// when the index loaded is that one (see [`change_kind`]).
    pub prev: Option<(u64, &'a super::Absence)>,
    /// The workspace's change watcher, or why there is none.
    pub watch: Result<&'a Watcher, &'a str>,
}

/// The result of [`run`].
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// In-scope entries.
    pub files: u64,
    pub changes: Vec<Change>,
    /// Not covered: path and reason text.
    pub not_covered: Vec<(Box<[u8]>, String)>,
    /// The file-count limit stopped the walk (nothing was changed).
    pub refused: Option<String>,
    pub baseline_complete: bool,
    /// There was no usable index before this scan (no changes can be listed).
    pub baseline: bool,
    /// The index was torn or corrupt and rebuilt (the detail).
    pub rebuilt: Option<String>,
    /// The updated index, to be saved once the changes are recorded (`None`: unchanged).
    pub save: Option<Index>,
    /// What the walk tells of the paths the index has no entry for.
    pub absence: Option<super::Absence>,
    /// The `blob` records of the changes' new content kept in the log (with
    /// [`Keep::changes`]): to be written ahead of the records that name it, in the same
    /// write. Only content a change's new entry names is kept so: any other file the scan
    /// read goes to a blob file, as the index alone would name it.
    pub kept: Vec<crate::codec::Record>,
    /// A partial scan's walk tells nothing of what was absent: what the walk of the scan
    /// before it saw (`Limits::prev`, valid for the index this scan started from) stays
    /// the session handle's, now for the index this scan leaves.
    pub keep_absence: bool,
    /// How the scan looked at the workspace.
    pub mode: ScanMode,
    /// Why it walked the workspace in full (with [`ScanMode::Full`]).
    pub full_reason: Option<String>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(crate) fn reason_text(u: &Uncovered, size: u64, cap: u64) -> String {
    match u {
        Uncovered::OverFileCap => {
            format!("{size} bytes, over the per-file cap of {cap} bytes")
        }
        Uncovered::OverBudget => {
            format!("{size} bytes, over the workspace's baseline byte budget")
        }
        Uncovered::Unreadable(e) => {
            format!("unreadable: {}", std::io::Error::from_raw_os_error(*e))
        }
        Uncovered::Changing => "changed while it was read, twice".into(),
        Uncovered::Symlink => crate::format::SkipReason::Symlink.to_string(),
        Uncovered::HardLink => "has more than one hard link".into(),
        Uncovered::Special => crate::format::SkipReason::Special.to_string(),
    }
}

fn under(path: &[u8], dir: &[u8]) -> bool {
    dir.is_empty() || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

fn direct(stat: Stat) -> Option<Uncovered> {
    match stat.kind() {
        FileKind::File if stat.nlink > 1 => Some(Uncovered::HardLink),
        FileKind::File => None,
        FileKind::Symlink => Some(Uncovered::Symlink),
        _ => Some(Uncovered::Special),
    }
}

/// The change from `old` to `new`, both entries of one path (`None`: no change).
pub(crate) fn classify(old: &IdxEntry, new: &IdxEntry) -> Option<ChangeKind> {
    if old.stat.kind() != new.stat.kind() {
        return Some(ChangeKind::Modified);
    }
    let perm = old.stat.perm() != new.stat.perm();
    match (old.cov.sha(), new.cov.sha()) {
        (Some(a), Some(b)) if a == b => perm.then_some(ChangeKind::ModeChanged),
        (Some(_), Some(_)) => Some(ChangeKind::Modified),
        _ => {
            let (o, n) = (&old.stat, &new.stat);
            let same = o.size == n.size
                && o.mtime_s == n.mtime_s
                && o.mtime_ns == n.mtime_ns
                && o.ino == n.ino;
            if same {
                perm.then_some(ChangeKind::ModeChanged)
            } else {
                Some(ChangeKind::Modified)
            }
        }
    }
}

/// The change from `old` to `new` of a path the scan read (`None`: no change to record).
fn change_kind(
    old: Option<&IdxEntry>,
    new: Option<&IdxEntry>,
    racy_before: u64,
    moved_in: bool,
) -> Option<ChangeKind> {
    match (old, new) {
        (None, Some(n)) => {
            // Out of scope before (e.g. un-ignored) rather than created: its status has not
            // changed since before the previous scan. Unless it `moved_in`: the previous
            // walk listed the directory that would have held it, and it was not there (a
            // directory renamed or moved in since: its files keep their status times).
            if n.stat.ctime_total() < racy_before && !moved_in {
                None
            } else {
                Some(ChangeKind::Created)
            }
        }
        (Some(_), None) => Some(ChangeKind::Deleted),
        (Some(o), Some(n)) => classify(o, n),
        (None, None) => None,
    }
}

/// Whether an indexed entry must be read again: its metadata changed, its content is
/// not known yet (or was changing, or was over a per-file cap `cap` no longer excludes),
/// or it changed so shortly before the previous scan started (`racy_before`) that a
/// same-size rewrite within one clock tick would keep its metadata.
fn needs_read(old: &IdxEntry, now: &Stat, had_index: bool, racy_before: u64, cap: u64) -> bool {
    let retry = match &old.cov {
        Coverage::Pending => true,
        Coverage::Not(Uncovered::OverFileCap) => cap == 0 || now.size <= cap,
        Coverage::Not(u) => u.retry(),
        Coverage::Hashed(_) | Coverage::Kept(_) | Coverage::Git(_) => {
            had_index && old.stat.ctime_total() >= racy_before
        }
    };
    old.stat != *now || retry
}

/// One walking thread's comparison with the index.
struct Compare<'a> {
    ix: &'a Index,
    had_index: bool,
    racy_before: u64,
    /// The per-file cap (an entry over an older, smaller cap is read again).
    cap: u64,
    /// Walked paths the index holds.
    found: usize,
    /// New paths and paths to read again: path, `lstat`, index entry.
    work: Vec<(Box<[u8]>, Stat, Option<IdxEntry>)>,
    /// Every path walked, end to end (`ends`: where each one ends).
    seen: Vec<u8>,
    ends: Vec<usize>,
    /// The change watcher: watches each directory before the walk lists it.
    watch: Option<&'a Watcher>,
}

impl Sink for Compare<'_> {
    fn dir(&mut self, rel: &[u8]) -> bool {
        match self.watch {
            Some(w) => w.watch_dir(rel),
            None => true,
        }
    }

    fn file(&mut self, rel: &[u8], stat: Stat) {
        self.seen.extend_from_slice(rel);
        self.ends.push(self.seen.len());
        match self.ix.entries().get(rel) {
            Some(e) => {
                self.found += 1;
                if needs_read(e, &stat, self.had_index, self.racy_before, self.cap) {
                    self.work.push((rel.into(), stat, Some(e.clone())));
                }
            }
            None => self.work.push((rel.into(), stat, None)),
        }
    }
}

/// Entries under which a workspace is walked on one thread (see [`run`]).
const SMALL_WORKSPACE: usize = 512;

/// Runs one scan of the workspace rooted at `root` (read through `ws`).
pub(crate) fn run(
    locked: &mut Locked<'_>,
    ws: &WsFs,
    root: &Path,
    limits: &Limits<'_>,
) -> Result<Outcome, Fault> {
    let loaded = locked.load()?;
    let mut out = Outcome::default();
    if let Loaded::Rebuilt(d) = &loaded {
        out.rebuilt = Some(d.clone());
    }
    let had_index = matches!(loaded, Loaded::Present);
    let mut ix = locked.cached.index.take().unwrap_or_default();
    let taken_over = match take_over(&mut ix, &locked.store.inner.fs, &limits.keep) {
        Ok(t) => t,
        Err(e) => {
            locked.cached.index = None;
            return Err(e.into());
        }
    };
    out.baseline = !had_index;
    let racy_before = ix.scanned_at.saturating_sub(RACY_NS);
    let started = now_ns();

    let store = locked.store;
    let mut wopts = WalkOptions::new(limits.max_files);
    // A workspace the last scan found small is walked on the calling thread alone: starting
    // and joining another thread costs more there than it saves.
    wopts.threads = if limits.threads == 0 && had_index && ix.entries().len() < SMALL_WORKSPACE {
        1
    } else {
        limits.threads
    };
    wopts.skip_dir = rustix::fs::fstat(&store.inner.fs.dir).ok().map(|s| {
        #[allow(clippy::unnecessary_cast)]
        (s.st_dev as u64, s.st_ino as u64)
    });
    // What the change watcher says this scan is to do: walk in full, or look only at the
    // paths it reported.
    let plan = match limits.watch {
        Ok(w) => {
            let unsure = if !had_index {
                Some("no index yet (the baseline)")
            } else if !ix.baseline_complete {
                Some("the baseline is not complete")
            } else if taken_over {
                Some("the index was taken over from another session")
            } else if !limits.prev.is_some_and(|(at, _)| at == ix.scanned_at) {
                // A partial walk tells nothing of what was absent and keeps only what the walk
                // before it saw for this index: without that (a session handle that has not
                // walked yet, as a fork's child or a reopened session, or one whose last walk
                // left another index), a write tool's capture could not tell a file created
                // since from one out of its view (see `Outcome::absence`).
                Some("this session has no walk's listing of the index in place")
            } else {
                None
            };
            w.plan(
                had_index.then_some((ix.scanned_at, locked.cached.edits)),
                unsure,
            )
        }
        Err(why) => Plan::Full(format!("no change watcher: {why}")),
    };
    let watch = limits.watch.ok();
    // A partial scan starts from the tally the last scan left (the bytes the index keeps, its
    // not-covered entries, its entries changed within `RACY_NS` before it: looked at again as
    // the full walk would, see `needs_read`).
    let (plan, tally) = match (plan, watch) {
        (Plan::Partial(mut paths, scope), Some(w)) => {
            match w.take_tally(ix.scanned_at, limits.cap) {
                Some(t) => {
                    add_racy(&mut paths, &t.racy);
                    (Plan::Partial(paths, scope), Some(t))
                }
                None => (
                    Plan::Full("no tally of the index from the last scan".into()),
                    None,
                ),
            }
        }
        (p, _) => (p, None),
    };
    let make = || Compare {
        ix: &ix,
        had_index,
        racy_before,
        cap: limits.cap,
        found: 0,
        work: Vec::new(),
        seen: Vec::new(),
        ends: Vec::new(),
        watch,
    };
    // Each walking thread compares what it sees with the index as it goes: only new
    // and changed entries are copied out.
    let (mut walked, sinks, partial) = match plan {
        Plan::Full(why) => {
            out.full_reason = Some(why);
            let (w, s) = walk(root, &wopts, make);
            (w, s, None)
        }
        Plan::Partial(paths, mut scope) => {
            out.mode = ScanMode::Watched;
            let (w, s) = walk_some(root, &wopts, &mut scope, &paths, make);
            (w, s, Some((paths, scope)))
        }
    };
    let finish = |index_at: Option<(u64, u64)>, clean: bool, scope: Option<super::walk::Scope>| {
        if let Some(w) = watch {
            w.finish(index_at, clean, scope);
        }
    };
    if walked.over_limit {
        drop(sinks);
        finish(None, true, None);
        // An index taken over from another session is not kept unsaved: the blob files it
        // names would be unreferenced on disk until it is (the next scan takes it over again).
        locked.cached.index = (had_index && !taken_over).then_some(ix);
        out.refused = Some(format!(
            "the workspace has more than {} files or directories in scope; the scan stopped there \
             and recorded nothing (raise the file-count limit or narrow the workspace with .gitignore / .ignore)",
            limits.max_files
        ));
        return Ok(out);
    }
    // A partial scan's walk listed no directory to its end but those it walked: it tells
    // nothing of what was absent elsewhere.
    let mut absence = match partial {
        Some(_) => None,
        None => super::Absence::of(&mut walked),
    };
    let found: usize = sinks.iter().map(|c| c.found).sum();
    out.files = sinks.iter().map(|c| c.ends.len() as u64).sum();
    let mut work: Vec<(Box<[u8]>, Stat, Option<IdxEntry>)> = Vec::new();
    let mut seen_paths = Vec::with_capacity(sinks.len());
    for c in sinks {
        work.extend(c.work);
        seen_paths.push((c.seen, c.ends));
    }

    // Paths no longer seen: deleted, unless under an unreadable directory (kept as
    // they were) or still on disk but out of scope now (dropped without a change).
    // A partial scan looks only at the indexed paths it was given and those under the
    // directories it was given to walk.
    let mut deleted: Vec<(Box<[u8]>, IdxEntry)> = Vec::new();
    let mut dropped: Vec<Box<[u8]>> = Vec::new();
    if partial.is_some() || found != ix.entries().len() {
        let mut seen: HashSet<&[u8]> = HashSet::with_capacity(out.files as usize);
        for (bytes, ends) in &seen_paths {
            let mut at = 0;
            for &end in ends {
                seen.insert(&bytes[at..end]);
                at = end;
            }
        }
        let mut gone = |k: &Box<[u8]>, e: &IdxEntry| {
            if seen.contains(&k[..]) {
                return;
            }
            if walked.dir_errors.iter().any(|(d, _)| under(k, d))
                || walked.entry_errors.iter().any(|(p, _)| p == k)
            {
                return;
            }
            // Still there as a file (not a directory that replaced it): out of scope now.
            let on_disk = std::fs::symlink_metadata(root.join(std::ffi::OsStr::from_bytes_ext(k)))
                .is_ok_and(|m| !m.is_dir());
            if on_disk {
                dropped.push(k.clone());
            } else {
                deleted.push((k.clone(), e.clone()));
            }
        };
        match &partial {
            Some((paths, _)) => {
                let subtrees: HashSet<&[u8]> = paths
                    .iter()
                    .filter(|(_, sub)| *sub)
                    .map(|(p, _)| &p[..])
                    .collect();
                let mut asked: Vec<(&Box<[u8]>, &IdxEntry)> = paths
                    .iter()
                    .filter_map(|(p, _)| ix.entries().get_key_value(&p[..]))
                    .collect();
                if !subtrees.is_empty() {
                    // One pass over the index, only when a directory was created, moved or
                    // removed: its entries below such a directory.
                    for (k, e) in ix.entries() {
                        let below = k
                            .iter()
                            .enumerate()
                            .any(|(i, &b)| b == b'/' && subtrees.contains(&k[..i]));
                        if below {
                            asked.push((k, e));
                        }
                    }
                }
                asked.sort_by(|a, b| a.0.cmp(b.0));
                asked.dedup_by(|a, b| a.0 == b.0);
                for (k, e) in asked {
                    gone(k, e);
                }
            }
            None => {
                for (k, e) in ix.entries() {
                    gone(k, e);
                }
            }
        }
    }
    drop(seen_paths);

    // The budget: bytes of content kept in the store for this workspace (kept up to date by
    // the watcher from one partial scan to the next: not summed over the index each time).
    let covered_start: u64 = match &tally {
        Some(t) => t.covered,
        None => ix
            .entries()
            .values()
            .filter_map(|e| e.cov.sha().map(|_| e.stat.size))
            .sum(),
    };
    let mut covered = covered_start;
    for (_, _, old) in &work {
        if let Some(e) = old.as_ref().filter(|e| e.cov.sha().is_some()) {
            covered = covered.saturating_sub(e.stat.size);
        }
    }
    for (_, e) in &deleted {
        if e.cov.sha().is_some() {
            covered = covered.saturating_sub(e.stat.size);
        }
    }
    work.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // The new paths the previous walk saw were absent (see `change_kind`), looked up while
    // the index is still the one that walk left.
    let prev = limits
        .prev
        .filter(|(at, _)| had_index && *at == ix.scanned_at)
        .map(|(_, a)| a);
    out.keep_absence = partial.is_some() && prev.is_some();
    let moved_in: Vec<bool> = work
        .iter()
        .map(|(p, st, old)| {
            // A partial scan's new path is one the watcher saw come: created or moved in
            // (out of scope before would need an ignore file's change, which walks in full).
            old.is_none()
                && st.ctime_total() < racy_before
                && (partial.is_some()
                    || prev.is_some_and(|a| a.absent(p, |q| ix.entries().contains_key(q)).is_some()))
        })
        .collect();
    let mut results: Vec<Option<Hashed>> = vec![None; work.len()];
    let mut to_hash: Vec<usize> = Vec::new();
    // A baseline read of a file that is its blob in the workspace's git index copies
    // nothing (see `git_baseline`).
    let git = super::git_baseline::entries_for(root, had_index, &work, limits.threads);
    for (i, (p, st, _)) in work.iter().enumerate() {
        if let Some(e) = git.get(i).cloned().flatten() {
            ix.insert(p.clone(), e.clone());
            results[i] = Some(Hashed::Entry(e));
            continue;
        }
        let direct = direct(*st).or_else(|| {
            if limits.cap != 0 && st.size > limits.cap {
                Some(Uncovered::OverFileCap)
            } else if covered.saturating_add(st.size) > limits.max_baseline_bytes {
                Some(Uncovered::OverBudget)
            } else {
                None
            }
        });
        match direct {
            Some(u) => {
                results[i] = Some(Hashed::Entry(IdxEntry {
                    stat: *st,
                    cov: Coverage::Not(u),
                }))
            }
            None => {
                covered += st.size;
                to_hash.push(i);
            }
        }
    }

    // A baseline (first scan, or one that was interrupted) persists its progress. Only
    // baseline entries (no index before, or pending ones) are saved before the scan ends:
    // a change (deletion, creation, new content of a known file) enters the index only
    // with the final save, so an interrupted scan loses no record.
    let resumable = !had_index || !ix.baseline_complete;
    let removed_any = !dropped.is_empty() || !deleted.is_empty();
    let early = |i: usize| -> bool {
        !had_index
            || matches!(
                work[i].2,
                Some(IdxEntry {
                    cov: Coverage::Pending,
                    ..
                })
            )
    };
    if resumable && to_hash.len() > limits.progress_batch {
        for &i in to_hash.iter().filter(|&&i| early(i)) {
            ix.insert(
                work[i].0.clone(),
                IdxEntry {
                    stat: work[i].1,
                    cov: Coverage::Pending,
                },
            );
        }
        ix.baseline_complete = false;
        ix.scanned_at = started;
        locked.save(ix)?;
        ix = locked.cached.index.take().unwrap_or_default();
    }
    let batch = if resumable {
        limits.progress_batch.max(1)
    } else {
        usize::MAX
    };
    let sink = crate::blob::LogSink::existing(limits.keep.kept, limits.keep.tracked);
    // The reads of what may be a change, when their content may go to the log (a baseline's
    // reads, which the index alone names, go to blob files).
    let changes_sink = limits.keep.changes.filter(|_| had_index);
    let mut to_log: Vec<usize> = Vec::new();
    let hash = |idx: &[usize], sink: &crate::blob::LogSink<'_>| {
        let items: Vec<(Box<[u8]>, Stat)> = idx
            .iter()
            .map(|&i| (work[i].0.clone(), work[i].1))
            .collect();
        hash_all(
            &store.inner.fs,
            ws,
            limits.cap,
            sink,
            &items,
            limits.threads,
        )
    };
    for chunk in to_hash.chunks(batch) {
        let (later, first): (Vec<usize>, Vec<usize>) = match changes_sink {
            Some(_) => chunk.iter().partition(|&&i| !early(i)),
            None => (Vec::new(), chunk.to_vec()),
        };
        let hashed = hash(&first, &sink).and_then(|mut h| {
            if let Some(cs) = changes_sink {
                h.extend(hash(&later, cs)?);
            }
            Ok(h)
        });
        let hashed = match hashed {
            Ok(h) => h,
            Err(e) => {
                locked.cached.index = None;
                return Err(e.into());
            }
        };
        to_log.extend(&later);
        for (&i, h) in first.iter().chain(&later).zip(hashed) {
            if early(i) {
                match &h {
                    Hashed::Entry(e) => {
                        ix.insert(work[i].0.clone(), e.clone());
                    }
                    Hashed::Vanished => {
                        ix.remove(&work[i].0);
                    }
                }
            }
            results[i] = Some(h);
        }
        if resumable && chunk.len() == batch && to_hash.len() > batch {
            ix.baseline_complete = !ix.entries().values().any(|e| e.cov == Coverage::Pending);
            ix.scanned_at = started;
            locked.save(ix)?;
            ix = locked.cached.index.take().unwrap_or_default();
        }
    }
    // Content the log took for a read that is no change to record (an entry read again
    // whose content is the same, a file out of scope before): no record would name it, so
    // the log may drop it; it is read again, into a blob file.
    if let Some(cs) = changes_sink {
        let fresh = |i: usize| match &results[i] {
            Some(Hashed::Entry(
                e @ IdxEntry {
                    cov: Coverage::Kept(_),
                    ..
                },
            )) => change_kind(work[i].2.as_ref(), Some(e), racy_before, moved_in[i]).is_none(),
            _ => false,
        };
        let redo: Vec<usize> = to_log.iter().copied().filter(|&i| fresh(i)).collect();
        if !redo.is_empty() {
            match hash(&redo, &sink) {
                Ok(h) => {
                    for (&i, h) in redo.iter().zip(h) {
                        results[i] = Some(h);
                    }
                }
                Err(e) => {
                    locked.cached.index = None;
                    return Err(e.into());
                }
            }
        }
        let named: HashSet<String> = to_log
            .iter()
            .filter_map(|&i| match &results[i] {
                Some(Hashed::Entry(e)) if matches!(e.cov, Coverage::Kept(_)) => e.sha_hex(),
                _ => None,
            })
            .collect();
        out.kept = cs
            .records()
            .into_iter()
            .filter(|r| matches!(r, crate::codec::Record::Blob { sha256, .. } if named.contains(sha256)))
            .collect();
    }
    for (i, r) in results.iter().enumerate() {
        match r {
            Some(Hashed::Entry(e)) => {
                ix.insert(work[i].0.clone(), e.clone());
            }
            Some(Hashed::Vanished) => {
                ix.remove(&work[i].0);
                if let Some(a) = absence.as_mut() {
                    a.vanished(&work[i].0);
                }
            }
            None => {}
        }
    }
    let sha_size = |e: &IdxEntry| e.cov.sha().map_or(0, |_| e.stat.size);
    let mut covered_end = covered_start;
    for k in &dropped {
        if let Some(e) = ix.entries().get(k) {
            covered_end = covered_end.saturating_sub(sha_size(e));
        }
        ix.remove(k);
    }
    for (k, e) in &deleted {
        covered_end = covered_end.saturating_sub(sha_size(e));
        ix.remove(k);
    }
    let removed: Vec<Box<[u8]>> = match &tally {
        Some(_) => dropped
            .iter()
            .chain(deleted.iter().map(|(k, _)| k))
            .cloned()
            .collect(),
        None => Vec::new(),
    };

    // The changes (none for a baseline: there is nothing to compare with).
    if had_index {
        for (i, (p, _, old)) in work.iter().enumerate() {
            let new = match &results[i] {
                Some(Hashed::Entry(e)) => Some(e.clone()),
                _ => None,
            };
            if let Some(kind) = change_kind(old.as_ref(), new.as_ref(), racy_before, moved_in[i]) {
                out.changes.push(Change {
                    path: p.clone(),
                    kind,
                    old: old.clone(),
                    new,
                });
            }
        }
        for (p, e) in deleted {
            out.changes.push(Change {
                path: p,
                kind: ChangeKind::Deleted,
                old: Some(e),
                new: None,
            });
        }
        out.changes.sort_by(|a, b| a.path.cmp(&b.path));
    }

    // A partial scan starts from a complete baseline and reads nothing into `Pending`.
    if partial.is_none() {
        ix.baseline_complete = !ix.entries().values().any(|e| e.cov == Coverage::Pending);
    }
    out.baseline_complete = ix.baseline_complete;
    let unreadable = unreadable_dirs(&ix, &walked.dir_errors);
    // The index's not-covered entries and the bytes it keeps: from the tally of the previous
    // scan updated with the paths this one looked at, or counted over the whole index.
    let tally = match tally {
        Some(mut t) => {
            for (p, _, old) in &work {
                if let Some(o) = old {
                    covered_end = covered_end.saturating_sub(sha_size(o));
                }
                t.not_cov.remove(p);
                if let Some(e) = ix.entries().get(p) {
                    covered_end += sha_size(e);
                    if let Coverage::Not(u) = &e.cov {
                        t.not_cov
                            .insert(p.clone(), reason_text(u, e.stat.size, limits.cap));
                    }
                }
            }
            for k in &removed {
                t.not_cov.remove(k);
            }
            t.covered = covered_end;
            t.racy.extend(work.iter().map(|(p, _, _)| p.clone()));
            t
        }
        None => {
            let mut t = super::watch::Tally {
                index_at: 0,
                cap: limits.cap,
                covered: 0,
                not_cov: Default::default(),
                racy: Vec::new(),
            };
            // Racy for the index this scan leaves, whichever `scanned_at` it keeps.
            let racy_from = started.min(ix.scanned_at).saturating_sub(RACY_NS);
            for (k, e) in ix.entries() {
                t.covered += sha_size(e);
                if e.stat.ctime_total() >= racy_from {
                    t.racy.push(k.clone());
                }
                if let Coverage::Not(u) = &e.cov {
                    t.not_cov
                        .insert(k.clone(), reason_text(u, e.stat.size, limits.cap));
                }
            }
            t
        }
    };
    for (k, r) in &tally.not_cov {
        if walked.dir_errors.iter().any(|(d, _)| under(k, d)) {
            continue; // listed with its directory's error below
        }
        out.not_covered.push((k.clone(), r.clone()));
    }
    out.not_covered.extend(unreadable.iter().cloned());
    for (p, err) in &walked.entry_errors {
        out.not_covered
            .push((p.clone(), format!("unreadable: {err}")));
    }
    out.not_covered.sort();
    out.absence = absence;
    // A partial scan whose every read found the entry as the index holds it (files changed
    // just before the last scan, read again) moves the index's `scanned_at` on in memory
    // only: the copy on disk stays as it was (older, so a scan from it reads more again),
    // instead of saving the whole index for no entry changed. The next save writes it.
    let same = partial.is_some()
        && !work.is_empty()
        && work.iter().enumerate().all(|(i, (_, _, old))| {
            matches!((&results[i], old), (Some(Hashed::Entry(e)), Some(o)) if e == o)
        });
    let dirty = !had_index || (!work.is_empty() && !same) || removed_any || taken_over;
    if same && !dirty {
        ix.scanned_at = started;
    }
    if partial.is_some() {
        out.files = ix.entries().len() as u64;
    }
    let clean = walked.dir_errors.is_empty() && walked.entry_errors.is_empty();
    let index_at = if dirty { started } else { ix.scanned_at };
    // The index this scan leaves: saved once its changes are recorded (one more save).
    let edits = locked.cached.edits + u64::from(dirty);
    // The entries the next scan reads again even when their metadata looks unchanged.
    let mut tally = tally;
    let racy_next = index_at.saturating_sub(RACY_NS);
    let mut racy = std::mem::take(&mut tally.racy);
    racy.retain(|p| {
        ix.entries()
            .get(p)
            .is_some_and(|e| e.stat.ctime_total() >= racy_next)
    });
    racy.sort_unstable();
    racy.dedup();
    tally.racy = racy;
    if let Some(w) = watch {
        w.put_tally(super::watch::Tally { index_at, ..tally });
    }
    finish(Some((index_at, edits)), clean, partial.map(|(_, scope)| scope));
    // What the planner lists besides the index's own not-covered entries, for as long as the
    // index this scan leaves is the one in place (see `workspace::Cached::unreadable`).
    let stamp = if dirty { started } else { ix.scanned_at };
    locked.cached.unreadable = Some((stamp, unreadable));
    if dirty {
        ix.scanned_at = started;
        out.save = Some(ix);
    } else {
        locked.cached.index = Some(ix);
    }
    Ok(out)
}

/// Adds the `racy` paths to a partial scan's `paths` (sorted; `true`: walked to its end),
/// except those a given path or a directory walked to its end covers.
fn add_racy(paths: &mut Vec<(Box<[u8]>, bool)>, racy: &[Box<[u8]>]) {
    if racy.is_empty() {
        return;
    }
    let walked: Vec<&[u8]> = paths
        .iter()
        .filter(|(_, sub)| *sub)
        .map(|(p, _)| &p[..])
        .collect();
    let given: HashSet<&[u8]> = paths.iter().map(|(p, _)| &p[..]).collect();
    let extra: Vec<(Box<[u8]>, bool)> = racy
        .iter()
        .filter(|r| !given.contains(&r[..]) && !walked.iter().any(|d| under(r, d)))
        .map(|r| (r.clone(), false))
        .collect();
    paths.extend(extra);
    paths.sort();
}

/// The not-covered entries of the directories a walk could not list (`dir_errors`: the
/// directory, `""` for the workspace itself, and why): each directory, then every file the
/// index holds under it, which the scan could not check (a change to it since the previous
/// scan is not seen; the index keeps it as it was). The workspace itself is no path of its
/// own: only its files are listed.
pub(crate) fn unreadable_dirs(
    ix: &Index,
    dir_errors: &[(Box<[u8]>, String)],
) -> Vec<(Box<[u8]>, String)> {
    let mut out = Vec::new();
    for (d, err) in dir_errors {
        let held: Vec<&Box<[u8]>> = ix.entries().keys().filter(|k| under(k, d)).collect();
        let which = if d.is_empty() {
            "the workspace directory".to_string()
        } else {
            format!("its directory `{}`", String::from_utf8_lossy(d))
        };
        if !d.is_empty() {
            out.push((
                d.clone(),
                format!(
                    "unreadable directory: {err}; {} file(s) in it known from an earlier scan not checked",
                    held.len()
                ),
            ));
        }
        for k in held {
            out.push((
                k.clone(),
                format!("not checked: {which} cannot be read ({err}); a change to it is not seen"),
            ));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// `OsStr` from raw bytes (Unix).
trait FromBytesExt {
    fn from_bytes_ext(b: &[u8]) -> &std::ffi::OsStr;
}

impl FromBytesExt for std::ffi::OsStr {
    fn from_bytes_ext(b: &[u8]) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b)
    }
}

/// Every blob file an index references (for the sweep; a [`Coverage::Kept`] entry's
/// content is in its keeper's log).
pub(crate) fn referenced(ix: &Index) -> impl Iterator<Item = String> + '_ {
    ix.entries().values().filter_map(|e| match &e.cov {
        Coverage::Hashed(sha) => Some(hex::encode(sha)),
        _ => None,
    })
}

/// Makes the index the scanning session's (`keep.me`) before it is used. Its entries kept in
/// a log ([`Coverage::Kept`]) stay so only when they are this session's and its log still
/// keeps their content. Any other such entry is named by its blob file: one that holds the
/// content already, or one written from the keeping session's log (checked against its
/// name), so the before-states this scan and any later one record from it can be restored by
/// every session; failing both, it is read again from the workspace ([`Coverage::Pending`]):
/// if the file changed meanwhile, its before-state is uncovered. `true` when an entry
/// changed (the index is saved).
fn take_over(
    ix: &mut Index,
    fs: &crate::fsio::StoreFs,
    keep: &Keep<'_>,
) -> Result<bool, crate::error::FsFailure> {
    let keeper = ix.keeper.replace(keep.me.to_string());
    let Some(keeper) = keeper else {
        return Ok(false);
    };
    let mine = keeper == keep.me;
    if mine && keep.checked {
        return Ok(false);
    }
    // Another session's log is read once, and only when an entry needs it.
    let mut held: Option<std::collections::HashMap<String, crate::codec::Shared>> = None;
    let mut changed = false;
    for (stat, cov) in ix.coverages_mut() {
        let Coverage::Kept(sha) = *cov else {
            continue;
        };
        let name = hex::encode(sha);
        if mine && keep.kept.contains_key(&name) {
            continue;
        }
        let size = stat.size;
        *cov = if fs.blob_size(&name)? == Some(size) {
            Coverage::Hashed(sha)
        } else {
            let held = held.get_or_insert_with(|| {
                if mine {
                    Default::default()
                } else {
                    (keep.fetch)(&keeper)
                }
            });
            match held.get(&name) {
                Some(bytes)
                    if bytes.len() as u64 == size
                        && <sha2::Sha256 as sha2::Digest>::digest(&**bytes)[..] == sha[..] =>
                {
                    crate::blob::put_bytes(fs, name, bytes)?;
                    Coverage::Hashed(sha)
                }
                _ => Coverage::Pending,
            }
        };
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recently_changed_entries_are_read_again() {
        let stat = Stat {
            mode: 0o100644,
            nlink: 1,
            size: 2,
            mtime_s: 100,
            mtime_ns: 5,
            ctime_s: 100,
            ctime_ns: 5,
            ino: 7,
            dev: 8,
        };
        let e = IdxEntry {
            stat,
            cov: Coverage::Hashed([1; 32]),
        };
        let ctime = stat.ctime_total();
        // Changed well before the previous scan: unchanged metadata means unchanged.
        assert!(!needs_read(&e, &stat, true, ctime + 1, 0));
        // Changed within the racy window before it: read again, although nothing differs.
        assert!(needs_read(&e, &stat, true, ctime, 0));
        assert!(needs_read(&e, &stat, true, ctime - 1, 0));
        // Any metadata difference, pending content and retries are read.
        let mut other = stat;
        other.mtime_ns += 1;
        assert!(needs_read(&e, &other, true, 0, 0));
        let pending = IdxEntry {
            stat,
            cov: Coverage::Pending,
        };
        assert!(needs_read(&pending, &stat, true, u64::MAX, 0));
        let changing = IdxEntry {
            stat,
            cov: Coverage::Not(Uncovered::Changing),
        };
        assert!(needs_read(&changing, &stat, true, u64::MAX, 0));
        let capped = IdxEntry {
            stat,
            cov: Coverage::Not(Uncovered::OverFileCap),
        };
        // Over the cap: read again only once the cap no longer excludes it.
        assert!(!needs_read(&capped, &stat, true, u64::MAX, stat.size - 1));
        assert!(needs_read(&capped, &stat, true, u64::MAX, stat.size));
        assert!(needs_read(&capped, &stat, true, u64::MAX, 0));
    }
}
