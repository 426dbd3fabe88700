//! What a planned restore would change inside each file, and who made the change it
//! undoes: a bounded line diff between the file as it is now and as the restore would
//! leave it, and the origin of the newest change recorded since the target.
//!
//! Both are read-only views over a [`RestorePlan`](crate::plan::RestorePlan)'s actions; neither changes anything.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{DiffError, Fault, FsFailure};
use crate::format::EntrySource;
use crate::fsio::{FileKind, Walk};
use crate::offline::BlobRead;
use crate::path::RelPath;
use crate::plan::{Action, Current, PlannedAction};
use crate::scan::workspace_key;
use crate::seam::{Area, FsOp};
use crate::session::Session;

/// Bounds of one file's diff: past any of them the file gets a summary, never a hang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffLimits {
    /// Largest side (bytes) that is read and compared.
    pub max_bytes: u64,
    /// Most lines a side may have.
    pub max_lines: usize,
    /// Lines of context around each change in the unified text.
    pub context: usize,
    /// Longest unified text kept (bytes); longer text is cut at a line end.
    pub max_text: usize,
    /// Time the line comparison may take before it settles for a coarser (still
    /// correct) diff.
    pub timeout: Duration,
}

impl Default for DiffLimits {
    fn default() -> Self {
        DiffLimits {
            max_bytes: 1 << 20,
            max_lines: 20_000,
            context: 3,
            max_text: 256 * 1024,
            timeout: Duration::from_millis(500),
        }
    }
}

/// One side of a diff when it is not compared line by line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum SideState {
    /// No file there.
    Absent,
    /// A text file (compared line by line).
    Text {
        /// Its size in bytes.
        size: u64,
        /// Its number of lines.
        lines: usize,
    },
    /// Bytes that are not UTF-8 text, or hold a NUL in their first 8 KiB.
    Binary {
        /// Its size in bytes.
        size: u64,
        /// SHA-256 of its bytes.
        sha256: String,
    },
    /// Larger than [`DiffLimits::max_bytes`].
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// More lines than [`DiffLimits::max_lines`].
    TooManyLines {
        /// Its size in bytes.
        size: u64,
        /// Its number of lines.
        lines: usize,
    },
    /// Something other than a regular file (a directory, a symlink, …).
    NotRegular,
    /// The file could not be read.
    Unreadable {
        /// Why.
        message: String,
    },
    /// The backup blob is missing from the store.
    MissingBackup {
        /// The blob's name.
        sha256: String,
    },
    /// The backup blob's bytes do not hash to its name.
    CorruptBackup {
        /// The blob's name.
        sha256: String,
    },
}

/// What restoring one path would change inside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    /// Workspace-relative path (lossy text).
    pub path: String,
    /// The file now.
    pub now: SideState,
    /// The file as the restore would leave it.
    pub then: SideState,
    /// Lines the restore adds (present when both sides are text).
    pub added: Option<usize>,
    /// Lines the restore removes (present when both sides are text).
    pub removed: Option<usize>,
    /// The unified diff's hunks (now → then, no `---`/`+++` header), present when
    /// both sides are text.
    pub unified: Option<String>,
    /// The unified text was cut at [`DiffLimits::max_text`].
    pub truncated: bool,
}

/// Who made the newest change recorded since the target to a planned path: the
/// change a restore of that path undoes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ChangeOrigin {
    /// This session's agent: a tool call, or a change found during its turn.
    Agent,
    /// Not this session's agent: the user between turns, or another program.
    Outside,
    /// A tool call of another session of the same workspace.
    OtherSession {
        /// That session's id.
        session_id: String,
    },
}

enum Read1 {
    Bytes(Vec<u8>),
    Side(SideState),
}

fn text_side(bytes: Vec<u8>, limits: &DiffLimits) -> Result<String, SideState> {
    let size = bytes.len() as u64;
    if size > limits.max_bytes {
        return Err(SideState::TooLarge { size });
    }
    let binary = |b: &[u8]| SideState::Binary {
        size,
        sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b)),
    };
    if bytes.iter().take(8192).any(|c| *c == 0) {
        return Err(binary(&bytes));
    }
    match String::from_utf8(bytes) {
        Ok(s) => {
            let lines = count_lines(&s);
            if lines > limits.max_lines {
                Err(SideState::TooManyLines { size, lines })
            } else {
                Ok(s)
            }
        }
        Err(e) => Err(binary(e.as_bytes())),
    }
}

fn count_lines(s: &str) -> usize {
    let n = s.bytes().filter(|b| *b == b'\n').count();
    if s.is_empty() || s.ends_with('\n') {
        n
    } else {
        n + 1
    }
}

/// The bounded line diff of two texts (`old` = now, `new` = after the restore), with
/// its `+added / −removed` counts.
pub fn diff_texts(path: &str, old: &str, new: &str, limits: &DiffLimits) -> FileDiff {
    let diff = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .timeout(limits.timeout)
        .diff_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            match change.tag() {
                similar::ChangeTag::Insert => added += 1,
                similar::ChangeTag::Delete => removed += 1,
                similar::ChangeTag::Equal => {}
            }
        }
    }
    let mut text = diff
        .unified_diff()
        .context_radius(limits.context)
        .to_string();
    let mut truncated = false;
    if text.len() > limits.max_text {
        let cut = text[..limits.max_text].rfind('\n').map_or(0, |i| i + 1);
        text.truncate(cut);
        truncated = true;
    }
    FileDiff {
        path: path.to_owned(),
        now: SideState::Text {
            size: old.len() as u64,
            lines: count_lines(old),
        },
        then: SideState::Text {
            size: new.len() as u64,
            lines: count_lines(new),
        },
        added: Some(added),
        removed: Some(removed),
        unified: Some(text),
        truncated,
    }
}

/// The session's file diffs: what a planned action would change, and where each
/// recorded change came from.
#[derive(Clone, Copy)]
pub(crate) struct DiffView<'s> {
    pub(crate) s: &'s Session,
}

impl Session {
    /// The session's file diffs.
    pub(crate) fn diff_view(&self) -> DiffView<'_> {
        DiffView { s: self }
    }

    /// What restoring `action` would change inside its file: a unified line diff
    /// (now → as the restore leaves it) with `+/−` counts when both sides are text
    /// within `limits`, else a summary of each side (binary, sizes and hashes, too
    /// large, absent, …).
    pub fn diff_action(
        &self,
        action: &PlannedAction,
        limits: &DiffLimits,
    ) -> Result<FileDiff, DiffError> {
        self.diff_view().diff_action(action, limits)
    }

    /// For each of `paths`, who made the newest change recorded for it at or after
    /// anchor `target_seq` in this session: this session's agent (a tool call, or a
    /// change found during its turn), or someone else (a re-check or a scan between
    /// turns found it). A change made outside is attributed to another session of
    /// the same workspace when that session's tool calls (or the scans around them)
    /// changed the same path. Paths with no record here (a fork's ancestors hold
    /// them) count as the agent's.
    pub fn change_origins(
        &self,
        target_seq: u64,
        paths: &[RelPath],
    ) -> Result<BTreeMap<RelPath, ChangeOrigin>, DiffError> {
        self.diff_view().change_origins(target_seq, paths)
    }
}

impl DiffView<'_> {
    /// The file at `rel` now, read without following a symlink, up to `limit` bytes.
    fn read_now(&self, rel: &RelPath, limit: u64) -> Result<Read1, FsFailure> {
        let mut created = Vec::new();
        let dir = match self.s.ws.walk_parent(rel, false, &mut created)? {
            Walk::Parent(dir) => dir,
            // A parent missing, or a file (nothing can be under it): absent.
            Walk::Missing(_) | Walk::Blocked(false) => return Ok(Read1::Side(SideState::Absent)),
            Walk::Blocked(true) => return Ok(Read1::Side(SideState::NotRegular)),
        };
        let (_, name) = rel.split_last();
        let (f, meta) = match self.s.ws.open_read(&dir, name, rel) {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(Read1::Side(SideState::Absent)),
            Err(e) if e.source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok(Read1::Side(SideState::NotRegular));
            }
            Err(e) => {
                return Ok(Read1::Side(SideState::Unreadable {
                    message: e.source.to_string(),
                }));
            }
        };
        if meta.kind != FileKind::File {
            return Ok(Read1::Side(SideState::NotRegular));
        }
        if meta.size > limit {
            return Ok(Read1::Side(SideState::TooLarge { size: meta.size }));
        }
        self.s
            .ws
            .io
            .check(FsOp::Read, Area::Workspace, rel.as_path())?;
        let mut bytes = Vec::with_capacity(meta.size as usize);
        match f.take(limit + 1).read_to_end(&mut bytes) {
            Ok(_) => Ok(Read1::Bytes(bytes)),
            Err(e) => Ok(Read1::Side(SideState::Unreadable {
                message: e.to_string(),
            })),
        }
    }

    /// The bytes a planned action leaves, from the store.
    fn read_then(&self, action: &Action, limit: u64) -> Result<Read1, Fault> {
        let sha256 = match action {
            Action::Delete => return Ok(Read1::Side(SideState::Absent)),
            Action::Write { sha256, .. } | Action::Recreate { sha256, .. } => sha256,
        };
        let read = self.s.store.read_blob(sha256, limit).map_err(|e| match e {
            crate::error::QueryError::Fs(f) => Fault::Fs(f),
            crate::error::QueryError::Corrupt(c) => Fault::Corrupt(c),
            crate::error::QueryError::NewerStore(n) => Fault::Newer(n),
        })?;
        Ok(match read {
            BlobRead::Bytes(b) => Read1::Bytes(b),
            BlobRead::TooLarge { size } => Read1::Side(SideState::TooLarge { size }),
            BlobRead::Missing => Read1::Side(SideState::MissingBackup {
                sha256: sha256.clone(),
            }),
            BlobRead::Corrupt { .. } => Read1::Side(SideState::CorruptBackup {
                sha256: sha256.clone(),
            }),
        })
    }

    pub(crate) fn diff_action(
        &self,
        action: &PlannedAction,
        limits: &DiffLimits,
    ) -> Result<FileDiff, DiffError> {
        let side = |r: Read1| match r {
            Read1::Bytes(b) => text_side(b, limits),
            Read1::Side(s) => Err(s),
        };
        let now = side(self.read_now(&action.path, limits.max_bytes)?);
        let then = side(self.read_then(&action.action, limits.max_bytes)?);
        let absent_text = |s: &SideState| matches!(s, SideState::Absent);
        let (old, new) = match (&now, &then) {
            (Ok(a), Ok(b)) => (a.as_str(), b.as_str()),
            (Err(a), Ok(b)) if absent_text(a) => ("", b.as_str()),
            (Ok(a), Err(b)) if absent_text(b) => (a.as_str(), ""),
            _ => {
                let desc = |s: Result<String, SideState>| match s {
                    Ok(t) => SideState::Text {
                        size: t.len() as u64,
                        lines: count_lines(&t),
                    },
                    Err(s) => s,
                };
                return Ok(FileDiff {
                    path: action.display.clone(),
                    now: desc(now),
                    then: desc(then),
                    added: None,
                    removed: None,
                    unified: None,
                    truncated: false,
                });
            }
        };
        let mut d = diff_texts(&action.display, old, new, limits);
        if matches!(now, Err(SideState::Absent)) {
            d.now = SideState::Absent;
        }
        if matches!(then, Err(SideState::Absent)) {
            d.then = SideState::Absent;
        }
        Ok(d)
    }

    pub(crate) fn change_origins(
        &self,
        target_seq: u64,
        paths: &[RelPath],
    ) -> Result<BTreeMap<RelPath, ChangeOrigin>, DiffError> {
        let wanted: BTreeSet<&RelPath> = paths.iter().collect();
        // Per path: the newest record (anchor, order), its source, its before-state.
        let mut newest: BTreeMap<RelPath, ((u64, u64), bool)> = BTreeMap::new();
        for (seq, rec) in self.s.load_groups(target_seq)? {
            let agent = matches!(
                rec.source,
                EntrySource::Tool { .. } | EntrySource::Scan { .. }
            );
            for e in rec.entries {
                if !wanted.contains(&e.path) {
                    continue;
                }
                let at = (seq, e.order);
                if newest.get(&e.path).is_none_or(|(b, _)| at > *b) {
                    newest.insert(e.path, (at, agent));
                }
            }
        }
        let outside: BTreeSet<&RelPath> = newest
            .iter()
            .filter(|(_, (_, agent))| !agent)
            .map(|(p, _)| p)
            .collect();
        let others = if outside.is_empty() {
            BTreeMap::new()
        } else {
            self.other_session_changes(&outside)?
        };
        Ok(paths
            .iter()
            .map(|p| {
                let origin = match newest.get(p) {
                    None | Some((_, true)) => ChangeOrigin::Agent,
                    Some((_, false)) => match others.get(p) {
                        Some(id) => ChangeOrigin::OtherSession {
                            session_id: id.clone(),
                        },
                        None => ChangeOrigin::Outside,
                    },
                };
                (p.clone(), origin)
            })
            .collect())
    }

    /// Among the other sessions that scanned this session's workspace, one whose tool
    /// calls changed each of `outside`.
    fn other_session_changes(
        &self,
        outside: &BTreeSet<&RelPath>,
    ) -> Result<BTreeMap<RelPath, String>, Fault> {
        let mut found = BTreeMap::new();
        let Some(root) = self.s.workspace_root().map(|p| p.to_path_buf()) else {
            return Ok(found);
        };
        let Ok(canonical) = std::fs::canonicalize(&root) else {
            return Ok(found);
        };
        let key = workspace_key(&canonical);
        let Ok(ids) = self.s.store.list_sessions() else {
            return Ok(found);
        };
        for id in ids {
            if id == self.s.id || found.len() == outside.len() {
                continue;
            }
            let Ok(other) = self.s.store.session(&id, &root) else {
                continue;
            };
            // Only sessions that scanned this same workspace.
            if !matches!(other.workspace_scan().scan_state(), Ok(Some(s)) if s.workspace == key) {
                continue;
            }
            let Ok(groups) = other.load_groups(0) else {
                continue;
            };
            for (_, rec) in groups {
                if !matches!(
                    rec.source,
                    EntrySource::Tool { .. } | EntrySource::Scan { .. }
                ) {
                    continue;
                }
                for e in &rec.entries {
                    if found.contains_key(&e.path) {
                        continue;
                    }
                    if outside.contains(&e.path) {
                        found.insert(e.path.clone(), id.clone());
                    }
                }
            }
        }
        Ok(found)
    }
}

/// Whether `path` (lossy text) is `filter` or lies under the directory `filter`.
pub fn path_matches(path: &str, filter: &str) -> bool {
    let f = filter.trim_end_matches('/');
    !f.is_empty()
        && (path == f
            || path
                .strip_prefix(f)
                .is_some_and(|rest| rest.starts_with('/')))
}

/// Why a choice of files was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectionFault {
    /// The choice names no path among those it chooses from.
    NoMatch,
    /// The choice is the display form (an invalid byte shown as U+FFFD) shared by several
    /// paths whose names are not valid UTF-8: these paths, which it cannot tell apart.
    Ambiguous(Vec<RelPath>),
    /// A `hex:` spelling whose digits are not hex.
    BadSpelling,
}

/// A choice of files (a selection filter, an undo's keep or take) that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct SelectionError {
    /// The choice as given.
    pub filter: String,
    /// Why it was refused.
    pub fault: SelectionFault,
}

impl SelectionError {
    /// A choice that names no path (`filter` as given).
    pub fn no_match(filter: &str) -> Self {
        Self {
            filter: filter.to_owned(),
            fault: SelectionFault::NoMatch,
        }
    }

    fn describe(&self) -> String {
        let f = &self.filter;
        match &self.fault {
            SelectionFault::NoMatch => format!("`{f}` matches no file the restore would change"),
            SelectionFault::BadSpelling => {
                format!("`{f}`: `hex:` must be followed by an even number of hex digits")
            }
            SelectionFault::Ambiguous(paths) => format!(
                "`{f}` shows {} files whose names are not valid UTF-8 alike ({}); name one by its exact spelling",
                paths.len(),
                paths
                    .iter()
                    .map(|p| format!("{} = {}", p.escaped(), p.spelling()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Resolves a caller's choice among `paths` to the bytes of the path (or, with `under`, the
/// directory) it names. A choice is a path's spelling ([`RelPath::spelling`]: its text, or
/// `hex:` and its bytes) and matches byte for byte; a choice that is text and matches no path
/// so may be the display form of a name that is not valid UTF-8 (all a person or a client
/// shown only that form can send back): it then names the one path (or directory) whose
/// display form it is, and is refused as [`SelectionFault::Ambiguous`] when several share it.
/// With `under`, a choice also names every path below it (a trailing `/` is ignored).
pub fn choose<'a>(
    choice: &str,
    paths: impl Iterator<Item = &'a RelPath> + Clone,
    under: bool,
) -> Result<Vec<u8>, SelectionFault> {
    let mut bytes = RelPath::spelled_bytes(choice).ok_or(SelectionFault::BadSpelling)?;
    if under {
        while bytes.last() == Some(&b'/') {
            bytes.pop();
        }
    }
    if bytes.is_empty() {
        return Err(SelectionFault::NoMatch);
    }
    if paths.clone().any(|p| names(&bytes, p, under)) {
        return Ok(bytes);
    }
    if choice.starts_with(crate::path::HEX_SPELLING) {
        return Err(SelectionFault::NoMatch);
    }
    let text = if under {
        choice.trim_end_matches('/')
    } else {
        choice
    };
    let depth = text.split('/').count();
    let roots: BTreeSet<RelPath> = paths
        .filter(|p| !p.is_utf8())
        .filter(|p| {
            if under {
                path_matches(&p.display(), text)
            } else {
                p.display() == text
            }
        })
        .filter_map(|p| p.prefix(depth))
        .filter(|root| !root.is_utf8())
        .collect();
    let mut roots: Vec<RelPath> = roots.into_iter().collect();
    match roots.len() {
        0 => Err(SelectionFault::NoMatch),
        1 => Ok(roots.remove(0).as_bytes().to_vec()),
        _ => Err(SelectionFault::Ambiguous(roots)),
    }
}

/// Whether the chosen bytes `root` name `path` (it, or with `under` a directory above it).
fn names(root: &[u8], path: &RelPath, under: bool) -> bool {
    let p = path.as_bytes();
    p == root || (under && p.len() > root.len() && p.starts_with(root) && p[root.len()] == b'/')
}

impl crate::plan::RestorePlan {
    /// Narrows the plan to a selection of its files: with `only`, the actions under one
    /// of its paths; minus those under a `keep` path. Each choice is resolved by [`choose`]
    /// (byte for byte; a display form only when it names one path). Returns the actions left
    /// out (the files the restore keeps as they are). A filter that matches no action is refused
    /// with nothing changed: a typo never restores more than asked. A file to be recreated
    /// under a file the restore would delete (a directory replaced by a file since the
    /// target) is left out with that file when it is left out; a file to be written in the
    /// place of a directory the restore empties, when one of that directory's files is.
    pub fn select(
        &mut self,
        only: &[String],
        keep: &[String],
    ) -> Result<Vec<PlannedAction>, SelectionError> {
        let resolve = |list: &[String]| -> Result<Vec<Vec<u8>>, SelectionError> {
            list.iter()
                .map(|f| {
                    choose(f, self.actions.iter().map(|a| &a.path), true).map_err(|fault| {
                        SelectionError {
                            filter: f.clone(),
                            fault,
                        }
                    })
                })
                .collect()
        };
        let only = resolve(only)?;
        let keep = resolve(keep)?;
        let (taken, mut left): (Vec<_>, Vec<_>) = std::mem::take(&mut self.actions)
            .into_iter()
            .partition(|a| {
                (only.is_empty() || only.iter().any(|r| names(r, &a.path, true)))
                    && !keep.iter().any(|r| names(r, &a.path, true))
            });
        let kept_files: BTreeSet<RelPath> = left
            .iter()
            .filter(|a| matches!(a.action, Action::Delete))
            .map(|a| a.path.clone())
            .collect();
        let (taken, blocked): (Vec<_>, Vec<_>) = taken.into_iter().partition(|a| match &a.action {
            Action::Recreate { .. } if a.current == Current::Directory => {
                // A file put back in the place of a directory: the directory must go whole.
                !kept_files.iter().any(|k| a.path.is_ancestor_of(k))
            }
            Action::Recreate { missing_dirs, .. } => {
                !missing_dirs.first().is_some_and(|d| kept_files.contains(d))
            }
            _ => true,
        });
        left.extend(blocked);
        self.actions = taken;
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> DiffLimits {
        DiffLimits::default()
    }

    #[test]
    fn counts_and_unified_text() {
        let d = diff_texts(
            "a.txt",
            "one\ntwo\nthree\n",
            "one\n2\nthree\nfour\n",
            &limits(),
        );
        assert_eq!((d.added, d.removed), (Some(2), Some(1)));
        let u = d.unified.unwrap();
        assert!(u.starts_with("@@ -1,3 +1,4 @@\n"), "{u}");
        assert!(
            u.contains("-two\n") && u.contains("+2\n") && u.contains("+four\n"),
            "{u}"
        );
        assert!(!d.truncated);
    }

    #[test]
    fn binary_and_oversized_sides_are_summarized() {
        let l = DiffLimits {
            max_bytes: 16,
            max_lines: 2,
            ..limits()
        };
        assert!(matches!(
            text_side(vec![b'a', 0, b'b'], &l),
            Err(SideState::Binary { size: 3, .. })
        ));
        assert!(matches!(
            text_side(vec![0xff, 0xfe], &l),
            Err(SideState::Binary { size: 2, .. })
        ));
        assert!(matches!(
            text_side(vec![b'a'; 17], &l),
            Err(SideState::TooLarge { size: 17 })
        ));
        assert!(matches!(
            text_side(b"1\n2\n3\n".to_vec(), &l),
            Err(SideState::TooManyLines { lines: 3, .. })
        ));
        assert_eq!(text_side(b"1\n2".to_vec(), &l), Ok("1\n2".to_owned()));
    }

    #[test]
    fn long_text_is_cut_at_a_line_end() {
        let old: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let l = DiffLimits {
            max_text: 1000,
            ..limits()
        };
        let d = diff_texts("f", &old, "", &l);
        let u = d.unified.unwrap();
        assert!(d.truncated && u.len() <= 1000 && u.ends_with('\n'));
        assert_eq!(d.removed, Some(2000));
    }

    #[test]
    fn path_filters() {
        assert!(path_matches("a/b.txt", "a"));
        assert!(path_matches("a/b.txt", "a/"));
        assert!(path_matches("a/b.txt", "a/b.txt"));
        assert!(!path_matches("ab/c", "a"));
        assert!(!path_matches("a", ""));
        assert!(!path_matches("a", "/"));
    }

    #[test]
    fn line_counts() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\nb"), 2);
    }
}
