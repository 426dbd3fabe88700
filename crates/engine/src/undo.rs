//! Undo and redo of a rewind's file half, with the history bookkeeping around them.
//!
//! An undo is three steps, because the host creates the session the conversation continues
//! in between them: [`EngineSession::undo_check`] (nothing changes), then
//! [`EngineSession::undo_start`] (`undoStartedAt` durable, naming that session), then
//! [`EngineSession::undo_files`] (the store's journaled undo, then `undoneAt`). A redo has no
//! conversation step and is one call: [`EngineSession::redo`].

use rewind_history::{Entry, Outcome, UndoMode, UndoOutcome, UndoRequest};
use serde_json::json;
use snapshot_store::{RelPath, RestoreOutcome};

use crate::JournalState;
use crate::error::{EngineError, ErrorCode};
use crate::session::{EngineSession, history_paths, rel_paths};

/// Per path changed since the rewind: `take` the version from before the rewind, or `keep`
/// it as it is now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choices {
    /// Paths given their pre-rewind state all the same.
    pub take: Vec<String>,
    /// Paths left as they are.
    pub keep: Vec<String>,
}

impl Choices {
    /// Refuses a path both kept and taken ([`ErrorCode::BadRequest`], naming the paths):
    /// the undo or redo could not do both, and must not silently do neither.
    pub fn check(&self) -> Result<(), EngineError> {
        let both: Vec<&String> = self.take.iter().filter(|p| self.keep.contains(p)).collect();
        if both.is_empty() {
            return Ok(());
        }
        Err(EngineError::bad_request(format!(
            "{} path(s) both kept and taken: {}; choose one for each — nothing was changed",
            both.len(),
            both.iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .with_details(json!({ "paths": both })))
    }
}

/// What [`EngineSession::undo_check`] found: the undo may run.
#[derive(Debug, Clone)]
pub struct UndoCheck {
    /// The entry to undo.
    pub entry: Entry,
    /// The session whose journal holds the files (a fork's parent, else the entry's session).
    pub owner: String,
    /// Whether the undo restores files (the rewind's journal is completed); `false` for a
    /// rewind that changed no file.
    pub files: bool,
    /// The choices as checked, with the paths (bytes) each list named: what the file step
    /// passes to the store for the same choices.
    pub resolved: Option<(Choices, Vec<RelPath>, Vec<RelPath>)>,
}

/// The paths a list of choices names among `changed` (the files changed since the rewind),
/// byte-exact: a choice is a path's spelling (its text, or `hex:` and its bytes — see
/// [`RelPath::spelling`]), or — for a name that is not valid UTF-8, which a person or a client
/// may only have seen in its display form (an invalid byte shown as U+FFFD) — that display
/// form when exactly one changed path shows so ([`snapshot_store::choose`]). A choice naming no
/// changed path is refused ([`ErrorCode::BadSelection`]) unless `lenient` (then it stands for
/// the path it spells); one whose display form several changed paths share is refused as
/// ambiguous ([`ErrorCode::BadRequest`], the paths' spellings in `details.paths`).
fn choice_paths(
    list: &[String],
    changed: &[RelPath],
    lenient: bool,
) -> Result<Vec<RelPath>, EngineError> {
    let mut out = Vec::with_capacity(list.len());
    for choice in list {
        // Not a path at all (`../x`, a `hex:` spelling that is not hex): a bad request.
        rel_paths(std::slice::from_ref(choice))?;
        match snapshot_store::choose(choice, changed.iter(), false) {
            Ok(bytes) => out.push(
                changed
                    .iter()
                    .find(|p| p.as_bytes() == bytes.as_slice())
                    .cloned()
                    .ok_or_else(|| snapshot_store::SelectionError::no_match(choice))?,
            ),
            Err(snapshot_store::SelectionFault::NoMatch) if lenient => {
                out.extend(rel_paths(std::slice::from_ref(choice))?)
            }
            Err(fault) => {
                return Err(snapshot_store::SelectionError {
                    filter: choice.clone(),
                    fault,
                }
                .into());
            }
        }
    }
    Ok(out)
}

/// What an undo (or a redo) did to the files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesDone {
    /// Paths written back. Every path here is its spelling ([`RelPath::spelling`]): exact,
    /// `hex:…` for a name that is not valid UTF-8.
    pub restored: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Paths that failed, with why.
    pub failed: Vec<(String, String)>,
    /// Paths changed since that were left as they are, as asked.
    pub kept: Vec<String>,
}

impl FilesDone {
    /// Whether every file was done.
    pub fn ok(&self) -> bool {
        self.failed.is_empty()
    }

    pub(crate) fn of(o: &RestoreOutcome) -> Self {
        Self {
            restored: o.written.iter().map(RelPath::spelling).collect(),
            deleted: o.deleted.iter().map(RelPath::spelling).collect(),
            failed: o
                .failed
                .iter()
                .map(|f| (f.path.spelling(), f.error.clone()))
                .collect(),
            kept: o.kept.iter().map(RelPath::spelling).collect(),
        }
    }
}

/// What an undo's last step did.
#[derive(Debug, Clone)]
pub struct UndoDone {
    /// The files.
    pub files: FilesDone,
    /// The store's outcome, when files came back.
    pub outcome: Option<RestoreOutcome>,
    /// Why `undoneAt` could not be recorded, if it could not (the next reconcile finishes it).
    pub not_recorded: Option<EngineError>,
}

/// What a redo did.
#[derive(Debug, Clone)]
pub struct RedoDone {
    /// The redo's own op id (its history entry, undoable in turn).
    pub op_id: String,
    /// The entry that was redone.
    pub redone: Entry,
    /// The files, and the full store outcome.
    pub files: FilesDone,
    /// The store's outcome.
    pub outcome: RestoreOutcome,
    /// Why the redo's entry could not be finished, if it could not.
    pub not_recorded: Option<EngineError>,
}

/// Whether a rewind's file half changed (or tried to change) any file: else it has no journal.
pub fn touched_files(entry: &Entry) -> bool {
    entry.counts.restored + entry.counts.deleted + entry.counts.failed > 0
}

/// The redo of `op_id` that still stands (not undone, not abandoned or rolled back).
pub fn standing_redo<'e>(entries: &'e [Entry], op_id: &str) -> Option<&'e Entry> {
    entries.iter().find(|e| {
        e.redo_of.as_deref() == Some(op_id)
            && e.undone_at.is_none()
            && !matches!(e.outcome, Outcome::Abandoned | Outcome::RolledBack)
    })
}

fn undo_outcome(files: &FilesDone) -> UndoOutcome {
    if files.ok() {
        UndoOutcome::Ok
    } else {
        UndoOutcome::Partial
    }
}

/// Which action [`EngineSession::pick_entry`] numbers entries for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Undo a rewind.
    Undo,
    /// Redo an undone rewind.
    Redo,
}

/// What this session may do with one history entry now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryActions {
    /// The entry's op id.
    pub op_id: String,
    /// "Undo this rewind" is offered.
    pub undoable: bool,
    /// "Redo this rewind" is offered.
    pub redoable: bool,
}

impl EngineSession {
    /// Whether this session may take `pick` on `e` now — the rules [`EngineSession::undo_check`]
    /// and [`EngineSession::redo`] apply, read without changing anything. Every rule the entry
    /// itself decides is judged first; the entry's restore journal is read last, and only when
    /// it decides — at most once per call, never for the other action — and then only the state
    /// its progress log ends with ([`EngineSession::journal_state_quick`]). A journal damaged
    /// before that line is judged by it; the undo or redo then reads it whole and says why not.
    fn offers(&self, pick: Pick, e: &Entry, entries: &[Entry], usable: bool) -> bool {
        let me = self.id.as_str();
        let mine = e.session_id == me || e.fork.as_ref().is_some_and(|f| f.child_session_id == me);
        match pick {
            Pick::Undo => {
                let settled = matches!(
                    e.outcome,
                    Outcome::Done | Outcome::Partial | Outcome::Failed
                );
                settled
                    && mine
                    && e.undone_at.is_none()
                    && e.undo_started_at.is_none()
                    && (!touched_files(e)
                        || (usable
                            && self.journal_state_quick(&e.session_id, &e.op_id)
                                == JournalState::Completed))
            }
            Pick::Redo => {
                let near = mine || e.undo_session_id.as_deref() == Some(me);
                e.undone_at.is_some()
                    && near
                    && usable
                    && e.counts.restored + e.counts.deleted > 0
                    && standing_redo(entries, &e.op_id).is_none()
                    && self.journal_state_quick(&e.session_id, &e.op_id) == JournalState::Undone
            }
        }
    }

    /// For every entry of the partition (newest first), whether this session may undo or redo
    /// it now — the rules [`EngineSession::undo_check`] and [`EngineSession::redo`] apply,
    /// read without changing anything (the journal's state decides where files are involved;
    /// an entry's journal is read at most once: an entry that may be undone is not undone, so
    /// never judged by its journal for both).
    pub fn entry_actions(&self) -> Result<Vec<EntryActions>, EngineError> {
        let entries = self.entries()?;
        let usable = self.files_usable().is_ok();
        Ok(entries
            .iter()
            .map(|e| EntryActions {
                op_id: e.op_id.clone(),
                undoable: self.offers(Pick::Undo, e, &entries, usable),
                redoable: self.offers(Pick::Redo, e, &entries, usable),
            })
            .collect())
    }

    /// The entry `reference` names for an undo ([`Pick::Undo`]) or a redo ([`Pick::Redo`]):
    /// none is the newest, `<n>` the n-th newest, of the entries [`EngineSession::entry_actions`]
    /// offers that action for — the very list whose entries the history page offers it on, so
    /// `/rewind undo <n>` and the page never disagree about an entry. `@<op id>` (or an op id)
    /// names the entry as it is; the undo or redo itself then applies its rules and says why
    /// not. [`ErrorCode::UnknownEntry`] when there is no n-th such entry.
    ///
    /// Only the action asked for is judged, newest entry first, stopping at the n-th entry
    /// offering it: no entry older than the one picked is judged (its journal is not read).
    pub fn pick_entry(&self, pick: Pick, reference: Option<&str>) -> Result<String, EngineError> {
        if let Some(r) =
            reference.filter(|r| r.is_empty() || !r.bytes().all(|b| b.is_ascii_digit()))
        {
            return Ok(r.strip_prefix('@').unwrap_or(r).to_owned());
        }
        let n: usize = match reference {
            None => 1,
            Some(r) => r.parse().unwrap_or(usize::MAX),
        };
        let entries = self.entries()?;
        let usable = self.files_usable().is_ok();
        // Newest first; with no n-th entry, the error counts them all (every entry judged once).
        let mut count = 0;
        for e in &entries {
            if self.offers(pick, e, &entries, usable) {
                count += 1;
                if count == n {
                    return Ok(e.op_id.clone());
                }
            }
        }
        let what = match pick {
            Pick::Undo => "rewind(s) to undo",
            Pick::Redo => "undone rewind(s) to redo",
        };
        let message = if count == 0 {
            match pick {
                Pick::Undo => "this session has no rewind to undo".to_owned(),
                Pick::Redo => "no undone rewind to redo here".to_owned(),
            }
        } else {
            format!(
                "there are {count} {what} here; #{} is not one of them",
                reference.unwrap_or("1")
            )
        };
        Err(EngineError::new(ErrorCode::UnknownEntry, message)
            .with_details(json!({ "count": count })))
    }

    /// Checks that this session may undo the rewind `op_id` now, changing nothing: the
    /// history's rules (its session or the fork it created, not undone, settled, journal
    /// completed or no file touched) and, when files come back, that every file changed
    /// since the rewind is decided in `choices` — else [`ErrorCode::StaleUndo`] naming the
    /// undecided ones (`details.paths`).
    pub fn undo_check(&self, op_id: &str, choices: &Choices) -> Result<UndoCheck, EngineError> {
        choices.check()?;
        let partition = self.history(None)?.read(&self.key)?;
        // The journal lives with the session that was rewound (a fork's parent).
        let owner = partition
            .find(op_id)
            .map_or_else(|| self.id.clone(), |e| e.session_id.clone());
        let journal = self.journal_state(&owner, op_id);
        let entry = rewind_history::undo_eligibility(
            &partition,
            &UndoRequest {
                op_id,
                active_session: &self.id,
                active_workspace: &self.key,
                journal,
            },
        )
        .map_err(|refusal| {
            // A journal that is only missing because files cannot be restored here says so.
            match (&refusal, self.files_usable()) {
                (rewind_history::UndoRefusal::NotUndoable { .. }, Err(unusable))
                    if partition.find(op_id).is_some_and(touched_files) =>
                {
                    unusable
                }
                _ => EngineError::from(refusal),
            }
        })?
        .clone();
        if entry.is_undo_interrupted() {
            // As the history page, which offers no "Undo" on it: the undo begun is finished
            // (the next reconcile, or `--continue`), never begun again over it.
            return Err(EngineError::new(
                ErrorCode::Interrupted,
                format!(
                    "the undo of rewind {op_id} began and did not finish; it is finished when the session is reconciled (or continue it) — nothing was changed"
                ),
            )
            .with_details(json!({ "opId": op_id })));
        }
        let files = journal == JournalState::Completed;
        let mut resolved = None;
        if !files && touched_files(&entry) {
            self.files_usable()?;
        }
        if files {
            let changed = self.files_of(&owner)?.undo_changed_paths(op_id)?;
            // A choice must name a file changed since the rewind, as a rewind's selection must
            // match a planned path: a typo is refused, never silently ignored. Compared as the
            // store compares, byte for byte.
            let take = choice_paths(&choices.take, &changed, false)?;
            let keep = choice_paths(&choices.keep, &changed, false)?;
            // Two spellings of one file (its `hex:` form and its display form) kept and taken.
            let both: Vec<String> = take
                .iter()
                .filter(|p| keep.contains(p))
                .map(RelPath::spelling)
                .collect();
            if !both.is_empty() {
                return Err(EngineError::bad_request(format!(
                    "{} path(s) both kept and taken: {}; choose one for each — nothing was changed",
                    both.len(),
                    both.iter()
                        .map(|p| format!("`{p}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .with_details(json!({ "paths": both })));
            }
            let open: Vec<&RelPath> = changed
                .iter()
                .filter(|p| !take.contains(p) && !keep.contains(p))
                .collect();
            resolved = Some((choices.clone(), take, keep));
            if !open.is_empty() {
                // Named so that no two read alike (`n\xff.txt`); `details.paths` in the JSON
                // path form (`{hex, lossy}` for a name that is not valid UTF-8).
                return Err(EngineError::new(
                    ErrorCode::StaleUndo,
                    format!(
                        "{} file(s) changed since this rewind: choose for each whether to keep it as it is or take the version from before the rewind: {}",
                        open.len(),
                        open.iter()
                            .map(|p| if p.is_utf8() {
                                p.display()
                            } else {
                                format!("{} ({})", p.escaped(), p.spelling())
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .with_details(json!({ "opId": op_id, "paths": open })));
            }
        }
        let check = UndoCheck {
            entry,
            owner,
            files,
            resolved,
        };
        *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(check.clone());
        Ok(check)
    }

    /// The [`UndoCheck`] of an undo already started ([`EngineSession::undo_start`]): the
    /// entry, the session owning its journal, whether files come back. The check this handle
    /// (or a clone) made of `op_id` is taken as it is, read once; else (another handle, a
    /// restart) it is read again from the history and the journal. The store's undo itself
    /// refuses a file changed since and left undecided, and a journal no longer completed.
    pub fn undo_check_started(&self, op_id: &str) -> Result<UndoCheck, EngineError> {
        let mut slot = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(check) = slot.take_if(|c| c.entry.op_id == op_id) {
            return Ok(check);
        }
        drop(slot);
        let entry = self.entry(op_id)?;
        let owner = entry.session_id.clone();
        let files = self.journal_state(&owner, op_id) == JournalState::Completed;
        Ok(UndoCheck {
            entry,
            owner,
            files,
            resolved: None,
        })
    }

    /// Records, durably and before anything changes, that the undo of `op_id` began, naming
    /// the session the conversation continues in (created next by the host).
    pub fn undo_start(
        &self,
        op_id: &str,
        undo_session: Option<&str>,
    ) -> Result<Entry, EngineError> {
        Ok(self
            .history(None)?
            .mark_undo_started_in(&self.key, op_id, self.engine.now(), undo_session)?
            .entry)
    }

    /// The undo's file step and its end: the store's journaled undo of `check.owner`'s
    /// journal (when `check.files`), then `undoneAt`. A file that changed between the check
    /// and now refuses the undo with nothing changed (the entry stays started; the next
    /// reconcile finishes it, keeping what changed).
    pub fn undo_files(
        &self,
        check: &UndoCheck,
        choices: &Choices,
    ) -> Result<UndoDone, EngineError> {
        choices.check()?;
        let op_id = check.entry.op_id.as_str();
        let mut files = FilesDone::default();
        let mut undone = None;
        if check.files {
            let store = self.files_of(&check.owner)?;
            // The paths the check found for these choices; else (another handle, a restart)
            // found again, leniently: the store's own undo refuses what is left undecided.
            let (take, keep) = match &check.resolved {
                Some((c, take, keep)) if c == choices => (take.clone(), keep.clone()),
                _ if choices.take.is_empty() && choices.keep.is_empty() => (Vec::new(), Vec::new()),
                _ => {
                    let changed = store.undo_changed_paths(op_id).unwrap_or_default();
                    (
                        choice_paths(&choices.take, &changed, true)?,
                        choice_paths(&choices.keep, &changed, true)?,
                    )
                }
            };
            let outcome = store.undo_restore_with(op_id, &take, &keep).map_err(|e| {
                let e = EngineError::from(e);
                if e.code == ErrorCode::StaleUndo {
                    e
                } else {
                    EngineError {
                        code: ErrorCode::UndoFailed,
                        ..e
                    }
                }
            })?;
            files = FilesDone::of(&outcome);
            undone = Some(outcome);
            self.engine.crash("undo:files");
        }
        self.undo_git(&check.owner, op_id);
        let not_recorded = self.mark_undone(op_id, &files).err();
        if not_recorded.is_none() {
            self.engine.crash("undo:done");
        }
        Ok(UndoDone {
            files,
            outcome: undone,
            not_recorded,
        })
    }

    pub(crate) fn mark_undone(&self, op_id: &str, files: &FilesDone) -> Result<Entry, EngineError> {
        Ok(self
            .history(None)?
            .mark_undone(
                &self.key,
                op_id,
                undo_outcome(files),
                UndoMode::Files,
                self.engine.now(),
            )?
            .entry)
    }

    /// Finishes an undo a restart found started (the host has created its session if it
    /// was missing): the files are undone when the journal is still completed — every file
    /// changed since is kept, never overwritten — the restore's leftover temp files are
    /// removed, and the entry is marked undone.
    pub fn undo_finish_interrupted(&self, entry: &Entry) -> Result<FilesDone, EngineError> {
        let op_id = entry.op_id.as_str();
        let journal = self.journal_state(&self.id, op_id);
        let mut files = FilesDone::default();
        if journal == JournalState::Completed {
            let outcome = self
                .files_of(&self.id)?
                .undo_restore_keeping_changed(op_id)?;
            files = FilesDone::of(&outcome);
            let mut touched = files.restored.clone();
            touched.extend(files.deleted.iter().cloned());
            touched.extend(files.failed.iter().map(|(p, _)| p.clone()));
            self.remove_restore_temps(&touched);
        }
        self.undo_git(&self.id, op_id);
        self.mark_undone(op_id, &files)?;
        Ok(files)
    }

    /// Redo: do again what the undone rewind `op_id` did to the files, as a journaled restore
    /// of its own (a new entry `new_op` naming it with `redoOf`, undoable in turn). From the
    /// rewound session, the session its undo continued in, or a fork's child. A file changed
    /// since the undo is decided like an undo's; undecided, [`ErrorCode::StaleUndo`] and
    /// nothing changes. Crash order: the new entry `started` → the restore → the entry
    /// finished.
    pub fn redo(
        &self,
        op_id: &str,
        new_op: &str,
        choices: &Choices,
        limit: usize,
    ) -> Result<RedoDone, EngineError> {
        choices.check()?;
        let cwd = self.files_usable().map_err(|e| EngineError {
            code: ErrorCode::NotRedoable,
            ..e
        })?;
        let entries = self.entries()?;
        let entry = entries
            .iter()
            .find(|e| e.op_id == op_id)
            .cloned()
            .ok_or_else(|| {
                EngineError::new(
                    ErrorCode::UnknownEntry,
                    format!("no rewind {op_id} in this workspace's history"),
                )
            })?;
        let owner = entry.session_id.clone();
        let fork_child = entry.fork.as_ref().map(|f| f.child_session_id.as_str());
        if owner != self.id
            && entry.undo_session_id.as_deref() != Some(self.id.as_str())
            && fork_child != Some(self.id.as_str())
        {
            return Err(EngineError::new(
                ErrorCode::UndoOtherSession,
                format!("rewind {op_id} belongs to another session"),
            ));
        }
        if let Some(by) = standing_redo(&entries, op_id) {
            return Err(EngineError::new(
                ErrorCode::NotRedoable,
                format!(
                    "rewind {op_id} was redone already ({}); undo that redo first",
                    by.op_id
                ),
            ));
        }
        let journal = self.journal_state(&owner, op_id);
        if entry.undone_at.is_none() || journal != JournalState::Undone {
            let why = if entry.undone_at.is_none() {
                format!("rewind {op_id} is not undone")
            } else {
                format!(
                    "rewind {op_id} changed no file to redo (its journal is {})",
                    journal.name()
                )
            };
            return Err(EngineError::new(ErrorCode::NotRedoable, why));
        }
        let mut started = Entry::new(
            new_op,
            owner.clone(),
            &self.key,
            entry.target_seq,
            self.engine.now(),
            Outcome::Started,
            rewind_history::Paths::default(),
        );
        started.target_text = entry.target_text.clone();
        started.redo_of = Some(op_id.to_owned());
        started.workspace_name = cwd.file_name().map(|n| n.to_string_lossy().into_owned());
        self.history(Some(limit))?.append(&self.key, started)?;
        self.engine.crash("redo:started");
        let take = rel_paths(&choices.take)?;
        let keep = rel_paths(&choices.keep)?;
        let session = self.files_of(&owner)?;
        let outcome = session
            .plan_redo(op_id, &take, &keep)
            .map_err(EngineError::from)
            .and_then(|plan| session.restore(&plan, new_op).map_err(EngineError::from));
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                // Refused before any change (a file changed since the undo, undecided).
                let _ = self.settle(new_op, Outcome::Abandoned, None);
                return Err(if e.code == ErrorCode::Failed {
                    EngineError {
                        code: ErrorCode::RestoreFailed,
                        ..e
                    }
                } else {
                    e
                });
            }
        };
        self.engine.crash("redo:files");
        self.redo_git(&owner, op_id, new_op);
        let files = FilesDone::of(&outcome);
        let result = if files.ok() {
            Outcome::Done
        } else {
            Outcome::Partial
        };
        let paths = history_paths(&outcome, &[], &[], &[]);
        let not_recorded = self.settle(new_op, result, Some(&paths)).err();
        if not_recorded.is_none() {
            self.engine.crash("redo:done");
        }
        Ok(RedoDone {
            op_id: new_op.to_owned(),
            redone: entry,
            files,
            outcome,
            not_recorded,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::Path;

    use crate::session::JOURNAL_READS;
    use crate::{Engine, EngineOptions, RestoreRequest, Start, WorkspaceKey};

    fn journal_reads() -> usize {
        JOURNAL_READS.with(std::cell::Cell::get)
    }

    /// A rewind of `es` to `seq` that changes a file (its journal `completed`).
    fn rewind(es: &EngineSession, op: &str, seq: u64) {
        let request = RestoreRequest {
            target_seq: seq,
            op_id: op.into(),
            ..RestoreRequest::default()
        };
        es.prepare_restore(&request).expect("prepare");
        let start = Start {
            op_id: op.into(),
            target_seq: seq,
            ..Start::default()
        };
        es.begin(&start, 100).expect("begin");
        let r = es.restore_files(&request).expect("restore");
        assert!(r.outcome.failed.is_empty() && r.outcome.written.len() == 1);
    }

    /// `/rewind undo` picks the newest undoable rewind reading that rewind's journal alone:
    /// an older rewind's journal is not read, nor is any journal read for the redo the undo
    /// did not ask about.
    #[test]
    fn picking_reads_only_the_journals_it_needs() {
        let home = tempfile::tempdir().expect("home");
        let ws = tempfile::tempdir().expect("ws");
        let key = WorkspaceKey::for_workspace("w").expect("key");
        let engine = Engine::open(home.path(), EngineOptions::default());
        let es = engine.session("s", Some(ws.path()), key);
        let write = |text: &str| std::fs::write(ws.path().join("a.txt"), text).expect("write");
        write("one");
        let files = es.files_of("s").expect("files");
        files.recheck_tracked(1).expect("boundary");
        files
            .capture_before("c1", Path::new("a.txt"))
            .expect("capture");
        write("two");
        files.commit("c1", 1, true).expect("commit");
        rewind(&es, "r-old", 1);
        write("three");
        rewind(&es, "r-new", 1);

        let before = journal_reads();
        assert_eq!(es.pick_entry(Pick::Undo, None).expect("pick"), "r-new");
        assert_eq!(
            journal_reads() - before,
            1,
            "only the picked rewind's journal"
        );

        let before = journal_reads();
        assert_eq!(
            es.pick_entry(Pick::Undo, Some("2")).expect("pick 2"),
            "r-old"
        );
        assert_eq!(journal_reads() - before, 2);

        // No undone rewind: no journal decides a redo.
        let before = journal_reads();
        let e = es
            .pick_entry(Pick::Redo, None)
            .expect_err("nothing to redo");
        assert_eq!(e.code, ErrorCode::UnknownEntry);
        assert_eq!(journal_reads() - before, 0);

        // No third rewind: every entry judged once, and counted.
        let before = journal_reads();
        let e = es.pick_entry(Pick::Undo, Some("3")).expect_err("no #3");
        assert_eq!(e.code, ErrorCode::UnknownEntry);
        assert_eq!(e.details["count"], 2);
        assert_eq!(journal_reads() - before, 2);

        // The page's list reads each entry's journal once (undo or redo, never both).
        let before = journal_reads();
        let actions = es.entry_actions().expect("actions");
        assert_eq!(actions.iter().filter(|a| a.undoable).count(), 2);
        assert_eq!(journal_reads() - before, 2);
    }

    #[test]
    fn choices_default_to_none() {
        let c = Choices::default();
        assert!(c.take.is_empty() && c.keep.is_empty());
    }
}
