//! After a crash: what an interrupted rewind or undo left ([`EngineSession::judge`]), and how
//! the user finishes it ([`EngineSession::resolve`]: continue or roll back).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rewind_history::{Entry, Outcome, Paths};
use snapshot_store::{
    ChainLink, JournalState as StoreState, RelPath, RestoreOutcome, RestoreStatus,
};

use crate::JournalState;
use crate::error::{EngineError, ErrorCode};
use crate::session::{EngineSession, history_paths};
use crate::undo::{FilesDone, touched_files};

/// What was interrupted. Its name (`rewind`, `fork`, `undo`) is derived (`strum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "kebab-case")]
pub enum InterruptedKind {
    /// An in-place rewind.
    Rewind,
    /// A fork rewind (its child session named in the entry).
    Fork,
    /// An undo of a finished rewind.
    Undo,
}

impl InterruptedKind {
    /// The kind's name (`rewind`, `fork`, `undo`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The kind of a rewind that is over but left its journal open (never an undo).
    pub fn of_partial(entry: &Entry) -> Self {
        if entry.fork.is_some() {
            Self::Fork
        } else {
            Self::Rewind
        }
    }

    /// The kind of an interrupted entry.
    pub fn of(entry: &Entry) -> Self {
        if !entry.is_started() {
            Self::Undo
        } else if entry.fork.is_some() {
            Self::Fork
        } else {
            Self::Rewind
        }
    }
}

/// Whether an entry is interrupted: a rewind still `started`, or an undo begun and never ended.
pub fn is_interrupted(entry: &Entry) -> bool {
    entry.is_started() || entry.is_undo_interrupted()
}

/// What [`EngineSession::judge`] decided.
#[derive(Debug, Clone)]
pub enum Judgement {
    /// Settled on its own: the entry now has this outcome.
    Settled(Outcome),
    /// An interrupted undo the host finishes: it creates the undo's session if missing, then
    /// calls [`EngineSession::undo_finish_interrupted`].
    FinishUndo,
    /// Left for the user to continue or roll back.
    Open,
}

/// What an interrupted entry left, without changing anything.
#[derive(Debug, Clone)]
pub struct Interrupted {
    /// What was interrupted.
    pub kind: InterruptedKind,
    /// The state of its restore journal.
    pub journal: JournalState,
    /// Where the restore stands, when it has a journal.
    pub restore: Option<RestoreStatus>,
}

/// How the user finishes an interrupted rewind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Finish restoring the files.
    Continue,
    /// Put every file back as it was before the rewind.
    Rollback,
}

/// What [`EngineSession::resolve`] did.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What was interrupted.
    pub kind: InterruptedKind,
    /// The files: what the pass wrote, deleted, left, and failed.
    pub outcome: RestoreOutcome,
    /// The history outcome written: `done`, `partial`, `rolled-back` or `undone`.
    pub entry_outcome: &'static str,
    /// Leftover restore temp files removed, workspace-relative.
    pub temps_removed: Vec<String>,
}

fn empty_outcome(op_id: &str) -> RestoreOutcome {
    RestoreOutcome {
        state: StoreState::Completed,
        ..RestoreOutcome::new(op_id)
    }
}

/// A path as the reports name it to people: as it is when valid UTF-8, else its escaped form
/// and its spelling (`n\xff.txt (hex:6eff2e747874)`), so no two read alike.
fn told(path: &RelPath) -> String {
    if path.is_utf8() {
        path.display()
    } else {
        format!("{} ({})", path.escaped(), path.spelling())
    }
}

/// `.<first 100 bytes of the name>.rewind-tmp-<pid>-<n>`: the name part, when `entry` has the
/// store's exact temp shape.
fn temp_name_part(entry: &[u8]) -> Option<&[u8]> {
    let rest = entry.strip_prefix(b".")?;
    let at = rest.windows(12).rposition(|w| w == b".rewind-tmp-")?;
    let (name, tail) = (&rest[..at], &rest[at + 12..]);
    let mut parts = tail.split(|b| *b == b'-');
    let digits =
        |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
    (!name.is_empty() && digits(parts.next()) && digits(parts.next()) && parts.next().is_none())
        .then_some(name)
}

impl EngineSession {
    /// What the interrupted entry left: its kind, its journal, where its restore stands.
    pub fn describe(&self, entry: &Entry) -> Interrupted {
        let journal = self.journal_state(&self.id, &entry.op_id);
        let restore = if journal == JournalState::Missing {
            None
        } else {
            self.restore_status(&entry.op_id)
        };
        Interrupted {
            kind: InterruptedKind::of(entry),
            journal,
            restore,
        }
    }

    /// Settles what can be judged whole — nothing changed (no conversation, no journal) →
    /// `abandoned`; a redo killed before its restore → `abandoned`; files rolled back →
    /// `rolled-back`; conversation and files both done → `done` — and says what is left:
    /// an interrupted undo the host finishes ([`Judgement::FinishUndo`]), or an entry for the
    /// user to continue or roll back. `conversation`: whether the conversation half happened
    /// (the marker is in the log, the fork's child exists; the host knows).
    pub fn judge(
        &self,
        entry: &Entry,
        conversation: bool,
    ) -> Result<(Judgement, Interrupted), EngineError> {
        let found = self.describe(entry);
        let has_cwd = self.cwd.is_some();
        let settle = |outcome: Outcome| -> Result<(Judgement, Interrupted), EngineError> {
            self.settle(&entry.op_id, outcome, None)?;
            Ok((Judgement::Settled(outcome), found.clone()))
        };
        let j = found.journal;
        if found.kind == InterruptedKind::Undo {
            let finish = j == JournalState::Undone
                || (j == JournalState::Completed && has_cwd)
                || (j == JournalState::Missing && !touched_files(entry));
            return Ok((
                if finish {
                    Judgement::FinishUndo
                } else {
                    Judgement::Open
                },
                found,
            ));
        }
        if entry.redo_of.is_some() && j == JournalState::Missing {
            return settle(Outcome::Abandoned);
        }
        if !conversation && j == JournalState::Missing {
            return settle(Outcome::Abandoned);
        }
        if j == JournalState::RolledBack {
            return settle(Outcome::RolledBack);
        }
        if conversation
            && (j == JournalState::Completed || (!has_cwd && j == JournalState::Missing))
        {
            // The paths of such an entry are in its journal, not known here; counts stay 0.
            // A git step killed before or while it ran is finished first (idempotent).
            if j == JournalState::Completed {
                self.continue_git(&entry.op_id);
            }
            return settle(Outcome::Done);
        }
        Ok((Judgement::Open, found))
    }

    /// Continue or roll back the interrupted entry `op_id` of this session. Continue finishes
    /// restoring the files (the journal's remaining actions, or the whole restore when it
    /// never began; an interrupted undo is finished); roll back puts every file back exactly
    /// as before the rewind (nothing to do when the restore never began; refused for an
    /// undo). Both remove the restore's leftover temp files and settle the history entry.
    pub fn resolve(
        &self,
        op_id: &str,
        how: Resolution,
        ancestors: &[ChainLink],
    ) -> Result<Resolved, EngineError> {
        let entry = self.entry(op_id)?;
        if !is_interrupted(&entry) || entry.session_id != self.id {
            return Err(EngineError::new(
                ErrorCode::UnknownEntry,
                format!("no interrupted rewind {op_id} in this session"),
            ));
        }
        self.files_usable()?;
        let found = self.describe(&entry);
        // The paths the restore plans: a kill mid-write left a temp file beside one of them.
        let planned: Vec<String> = self
            .plan(entry.target_seq, ancestors)
            .map(|p| p.actions.iter().map(|a| a.path.spelling()).collect())
            .unwrap_or_default();
        let session = self.files_of(&self.id)?;
        let open = found.journal == JournalState::Open;
        let (outcome, entry_outcome) = match (found.kind, how) {
            (InterruptedKind::Undo, Resolution::Rollback) => {
                return Err(EngineError::bad_request(
                    "an interrupted undo can only be continued",
                ));
            }
            (InterruptedKind::Undo, Resolution::Continue) => {
                // Killed after its files were undone (in its git step): the files are done.
                let o = if found.journal == JournalState::Undone {
                    empty_outcome(op_id)
                } else {
                    session.undo_restore_with(op_id, &[], &[])?
                };
                self.undo_git(&self.id, op_id);
                self.mark_undone(op_id, &FilesDone::of(&o))?;
                (o, "undone")
            }
            (_, Resolution::Continue) => {
                // Killed after its file restore completed (in its git step): the files are
                // done; their paths are in the journal, the entry's counts stay as they are.
                let completed = found.journal == JournalState::Completed;
                let o = if open {
                    session.continue_restore(op_id)?
                } else if completed {
                    empty_outcome(op_id)
                } else {
                    let plan = self.plan(entry.target_seq, ancestors)?;
                    session.restore(&plan, op_id)?
                };
                self.continue_git(op_id);
                let (outcome, name) = if o.failed.is_empty() {
                    (Outcome::Done, "done")
                } else {
                    (Outcome::Partial, "partial")
                };
                let paths = history_paths(&o, &[], &[], &[]);
                self.settle(op_id, outcome, (!completed).then_some(&paths))?;
                (o, name)
            }
            (_, Resolution::Rollback) => {
                let o = if open {
                    session.rollback_restore(op_id)?
                } else if found.journal == JournalState::Completed {
                    // Killed after its file restore completed: every file put back as it was
                    // (a path changed since refuses it, naming the path).
                    session.undo_restore_with(op_id, &[], &[])?
                } else {
                    empty_outcome(op_id)
                };
                self.undo_git(&self.id, op_id);
                if !o.failed.is_empty() {
                    let mut left = planned.clone();
                    left.extend(o.failed.iter().map(|f| f.path.spelling()));
                    self.remove_restore_temps(&left);
                    // Named so that no two read alike (`n\xff.txt (hex:6eff2e747874)`), as
                    // every report names them; `details.paths` in the JSON path form.
                    let list: Vec<String> = o
                        .failed
                        .iter()
                        .map(|f| format!("{}: {}", told(&f.path), f.error))
                        .collect();
                    return Err(EngineError::new(
                        ErrorCode::RestoreFailed,
                        format!(
                            "the rollback left {} file(s) as they are: {}",
                            o.failed.len(),
                            list.join("; ")
                        ),
                    )
                    .with_details(serde_json::json!({
                        "paths": o.failed.iter().map(|f| &f.path).collect::<Vec<_>>()
                    })));
                }
                self.settle(
                    op_id,
                    Outcome::RolledBack,
                    Some(&history_paths(&o, &[], &[], &[])),
                )?;
                (o, "rolled-back")
            }
        };
        let mut touched = planned;
        touched.extend(outcome.written.iter().map(RelPath::spelling));
        touched.extend(outcome.deleted.iter().map(RelPath::spelling));
        touched.extend(outcome.failed.iter().map(|f| f.path.spelling()));
        let temps_removed = self.remove_restore_temps(&touched);
        Ok(Resolved {
            kind: found.kind,
            outcome,
            entry_outcome,
            temps_removed,
        })
    }

    /// Continue or roll back the open restore journal `op_id` of a rewind that is over (a
    /// `partial` one, or a journal without an interrupted entry): the files, the leftover
    /// temp files, then the history entry — a continued restore joins the entry (done once
    /// nothing failed), a rolled-back one counts as undone. A history entry that cannot be
    /// updated does not fail the pass (`Resolved::entry_outcome` is then empty).
    pub fn resolve_journal(&self, op_id: &str, how: Resolution) -> Result<Resolved, EngineError> {
        self.files_usable()?;
        let session = self.files_of(&self.id)?;
        let outcome = match how {
            Resolution::Continue => session.continue_restore(op_id)?,
            Resolution::Rollback => session.rollback_restore(op_id)?,
        };
        match how {
            Resolution::Continue => self.continue_git(op_id),
            Resolution::Rollback => self.undo_git(&self.id, op_id),
        }
        let mut touched: Vec<String> = outcome.written.iter().map(RelPath::spelling).collect();
        touched.extend(outcome.deleted.iter().map(RelPath::spelling));
        touched.extend(outcome.failed.iter().map(|f| f.path.spelling()));
        let temps_removed = self.remove_restore_temps(&touched);
        let recorded = match how {
            Resolution::Continue => self
                .history(None)
                .and_then(|h| {
                    Ok(h.settle_continued(&self.key, op_id, &continued_paths(&outcome))?)
                })
                .map(|_| "continued")
                .ok(),
            Resolution::Rollback => self
                .mark_undone(op_id, &FilesDone::of(&outcome))
                .map(|_| "undone")
                .ok(),
        };
        Ok(Resolved {
            kind: InterruptedKind::Rewind,
            outcome,
            entry_outcome: recorded.unwrap_or(""),
            temps_removed,
        })
    }

    /// This session's interrupted entries, newest first ([`is_interrupted`]: a rewind still
    /// `started`, or an undo begun and never ended): what a reconcile pass judges.
    pub fn interrupted_entries(&self) -> Result<Vec<Entry>, EngineError> {
        Ok(self
            .entries()?
            .into_iter()
            .filter(|e| e.session_id == self.id && is_interrupted(e))
            .collect())
    }

    /// This session's rewinds that ran to their end but could not restore some files (`partial`,
    /// or `failed` when none could be), not undone, whose journal is still open — newest first,
    /// with their kind ([`InterruptedKind::of_partial`]) and where the restore stands. They are
    /// settled as interrupted ones are ([`EngineSession::resolve_entry`]); a new rewind is not
    /// refused over them.
    pub fn partial_entries(&self) -> Result<Vec<(Entry, Interrupted)>, EngineError> {
        if self.files_usable().is_err() {
            return Ok(Vec::new());
        }
        let mine: Vec<Entry> = self
            .entries()?
            .into_iter()
            .filter(|e| {
                e.session_id == self.id
                    && matches!(e.outcome, Outcome::Partial | Outcome::Failed)
                    && e.undone_at.is_none()
            })
            .collect();
        if mine.is_empty() {
            return Ok(Vec::new());
        }
        let open: BTreeMap<String, RestoreStatus> = self
            .files_of(&self.id)?
            .reconcile_restores()?
            .into_iter()
            .filter(|st| st.state == StoreState::Open)
            .map(|st| (st.op_id.clone(), st))
            .collect();
        Ok(mine
            .into_iter()
            .filter_map(|e| {
                let restore = open.get(&e.op_id)?.clone();
                let kind = InterruptedKind::of_partial(&e);
                Some((
                    e,
                    Interrupted {
                        kind,
                        journal: JournalState::Open,
                        restore: Some(restore),
                    },
                ))
            })
            .collect())
    }

    /// Continue or roll back the entry `op_id`, the engine choosing how it is settled: an
    /// interrupted rewind or undo of this session as a whole ([`EngineSession::resolve`]),
    /// anything else — a rewind that is over but left its journal open, a journal without an
    /// entry — through its journal ([`EngineSession::resolve_journal`]). The one call every
    /// front end makes for "continue" and "roll back".
    pub fn resolve_entry(
        &self,
        op_id: &str,
        how: Resolution,
        ancestors: &[ChainLink],
    ) -> Result<Resolved, EngineError> {
        match self.entry(op_id) {
            Ok(e) if e.session_id == self.id && is_interrupted(&e) => {
                self.resolve(op_id, how, ancestors)
            }
            _ => self.resolve_journal(op_id, how),
        }
    }

    /// Removes the temp files a killed restore left beside `paths` (workspace-relative, each
    /// its spelling — [`RelPath::spelling`]: `hex:…` for a name that is not valid UTF-8; a
    /// spelling that names no path is skipped): only names of the store's exact temp shape
    /// whose name part is the start of one of those paths' names. Returns the removed paths,
    /// spelled the same way. Never fails; a directory that cannot be read is skipped.
    pub fn remove_restore_temps(&self, paths: &[String]) -> Vec<String> {
        let Some(cwd) = self.cwd.as_deref() else {
            return Vec::new();
        };
        let mut by_dir: BTreeMap<PathBuf, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for path in paths {
            let Ok(rel) = RelPath::from_spelling(path) else {
                continue;
            };
            let path = rel.as_path();
            let (Some(name), dir) = (path.file_name(), path.parent().unwrap_or(Path::new("")))
            else {
                continue;
            };
            let bytes = name.as_bytes();
            by_dir
                .entry(dir.to_path_buf())
                .or_default()
                .insert(bytes[..bytes.len().min(100)].to_vec());
        }
        let mut removed = Vec::new();
        let Ok(root) = cap_std::fs::Dir::open_ambient_dir(cwd, cap_std::ambient_authority()) else {
            return removed;
        };
        for (dir, names) in by_dir {
            let listed = if dir.as_os_str().is_empty() {
                root.entries()
            } else {
                root.read_dir(&dir)
            };
            let Ok(listed) = listed else { continue };
            for item in listed.flatten() {
                let entry = item.file_name();
                let Some(part) = temp_name_part(entry.as_bytes()) else {
                    continue;
                };
                if !names.contains(part) {
                    continue;
                }
                let rel = dir.join(&entry);
                let is_file = item.file_type().is_ok_and(|t| t.is_file());
                if is_file && root.remove_file(&rel).is_ok() {
                    removed.extend(
                        RelPath::from_bytes(rel.as_os_str().as_bytes())
                            .map(|r| r.spelling())
                            .ok(),
                    );
                }
            }
        }
        removed
    }
}

/// What continuing an interrupted restore did, as history paths (see
/// [`rewind_history::Entry::merge_continued`]).
pub fn continued_paths(o: &RestoreOutcome) -> Paths {
    history_paths(o, &[], &[], &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_as_the_host_names_them() {
        use strum::IntoEnumIterator;
        let names: Vec<&str> = InterruptedKind::iter().map(InterruptedKind::name).collect();
        assert_eq!(names, ["rewind", "fork", "undo"]);
    }

    #[test]
    fn temp_names_are_recognized_exactly() {
        assert_eq!(
            temp_name_part(b".a.txt.rewind-tmp-12-3"),
            Some(&b"a.txt"[..])
        );
        assert_eq!(
            temp_name_part(b".a.rewind-tmp-1.rewind-tmp-12-3"),
            Some(&b"a.rewind-tmp-1"[..])
        );
        for not in [
            &b"a.txt.rewind-tmp-12-3"[..],
            b".a.txt.rewind-tmp-12",
            b".a.txt.rewind-tmp-12-3-4",
            b".a.txt.rewind-tmp-x-3",
            b"..rewind-tmp-1-2",
            b".a.txt",
        ] {
            assert_eq!(
                temp_name_part(not),
                None,
                "{}",
                String::from_utf8_lossy(not)
            );
        }
    }
}
