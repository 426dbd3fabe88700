//! The engine's object surface: `BindingEngine.open(dshHome)` → `engine.session(id, cwd, key)`
//! → the sequences of undo, redo and recovery, each one async call. States and outcomes are
//! generated string enums (`types/binding_engine.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Either, Env, ToNapiValue, TypeName};
use napi_derive::napi;

use rewind_engine::{
    Choices, Engine, EngineOptions, EngineSession, ErrorCode, Judgement as EngineJudgement,
    NotRestored, Outcome, Pick, Resolution as EngineResolution, RestoreRequest, Start,
    WorkspaceKey,
};

use crate::cleanup_api::BindingCleanup;
use crate::convert::{chain, restore_outcome, restore_status};
use crate::error::{BindingError, js_numbers};
use crate::store_api::BindingStore;
use crate::task::Job;
use crate::types::{
    BindingChainLink, BindingEntryActions, BindingFailedPath, BindingHistoryEntry,
    BindingInterruptedState, BindingJudged, BindingNotCovered, BindingPrepared, BindingRedoDone,
    BindingRefusal, BindingResolved, BindingRestoreSelection, BindingRewindFiles,
    BindingRewindRestore, BindingRewindStart, BindingUndoCheck, BindingUndoChoices,
    BindingUndoDone, BindingUndoOutcome, JournalState, Judgement, seq_from_js,
};

/// The crash seam of the host's crash tests: when `DSH_REWIND_CRASH` names the step, one line
/// on stderr names it and the process is killed with SIGKILL right there.
fn crash_seam() -> rewind_engine::CrashSeam {
    Arc::new(|step: &'static str| {
        if std::env::var("DSH_REWIND_CRASH").as_deref() == Ok(step) {
            eprintln!("@@rewind-crash {step}");
            // SAFETY: kill(2) on this very process; no memory is touched.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    })
}

/// The rewind engine over one DSH home (`<home>/rewind-snapshots`, `<home>/rewind-history`).
#[napi]
pub struct BindingEngine {
    engine: Arc<Engine>,
}

#[napi]
impl BindingEngine {
    /// Opens the engine over `dsh_home`. Never throws for the store: `store()` says why the
    /// store cannot open, and the history half works without it.
    #[napi(factory)]
    pub fn open(dsh_home: String) -> Self {
        let options = EngineOptions {
            crash: Some(crash_seam()),
            ..EngineOptions::default()
        };
        Self {
            engine: Engine::open(PathBuf::from(dsh_home), options),
        }
    }

    /// The snapshot store's calls (capture, scan, preview, diff, restore, ...), sharing this
    /// engine's session handles. Throws why the store cannot open, if it cannot.
    #[napi]
    pub fn store(&self, env: Env) -> napi::Result<BindingStore> {
        if let Some(e) = self.engine.store_error() {
            return Err(BindingError::from(e).into_napi(&env));
        }
        Ok(BindingStore::of(Arc::clone(&self.engine)))
    }

    /// The snapshot auto-cleanup of this home: its sweeps free the backups only removed sessions
    /// referenced and forget those sessions' handles.
    #[napi]
    pub fn cleanup(&self) -> BindingCleanup {
        BindingCleanup::of(Arc::clone(&self.engine))
    }

    /// The session `session_id` working in `cwd` (none: its rewinds touch no file), whose
    /// history is the workspace partition `key`.
    #[napi]
    pub fn session(
        &self,
        env: Env,
        session_id: String,
        cwd: Option<String>,
        key: String,
    ) -> napi::Result<BindingEngineSession> {
        let key = WorkspaceKey::parse(&key).map_err(|e| BindingError::from(e).into_napi(&env))?;
        Ok(BindingEngineSession {
            session: self
                .engine
                .session(&session_id, cwd.as_deref().map(Path::new), key),
        })
    }
}

/// One session's sequences.
#[napi]
pub struct BindingEngineSession {
    session: EngineSession,
}

fn choices(c: Option<BindingUndoChoices>) -> Choices {
    let c = c.unwrap_or_default();
    Choices {
        take: c.take.unwrap_or_default(),
        keep: c.keep.unwrap_or_default(),
    }
}

/// A rewind's restore request as the host passes it, validated.
fn restore_request(req: BindingRewindRestore) -> Result<RestoreRequest, BindingError> {
    let selection = req.selection.unwrap_or_default();
    Ok(RestoreRequest {
        target_seq: seq_from_js(req.target_seq, "targetSeq")?,
        op_id: req.op_id,
        ancestors: chain(req.ancestors)?,
        only: selection.only.unwrap_or_default(),
        keep: selection.keep.unwrap_or_default(),
        not_covered: req
            .not_covered
            .unwrap_or_default()
            .into_iter()
            .map(|n| (n.path, n.reason))
            .collect(),
        keep_git: req.keep_git.unwrap_or(false),
    })
}

/// A step's result, or the refusal that stopped it (see [`BindingRefusal`]).
type Step<T> = Either<T, BindingRefusal>;

/// Runs an engine step on the thread pool: an expected refusal resolves as data, a fault
/// rejects.
fn step<T>(
    work: impl FnOnce() -> Result<T, BindingError> + Send + 'static,
) -> AsyncTask<Job<Step<T>>>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    AsyncTask::new(Job::new(move || match work() {
        Ok(value) => Ok(Either::A(value)),
        Err(e) if ErrorCode::parse(&e.code).is_some_and(ErrorCode::is_refusal) => {
            Ok(Either::B(BindingRefusal {
                refused: true,
                code: e.code,
                message: e.message,
                details: js_numbers(e.details),
            }))
        }
        Err(e) => Err(e),
    }))
}

fn resolution(how: &str) -> Result<EngineResolution, BindingError> {
    match how {
        "continue" => Ok(EngineResolution::Continue),
        "rollback" => Ok(EngineResolution::Rollback),
        other => Err(BindingError::bad_request(format!(
            "`how` must be 'continue' or 'rollback', got `{other}`"
        ))),
    }
}

fn resolved(r: rewind_engine::Resolved) -> BindingResolved {
    BindingResolved {
        kind: r.kind.into(),
        outcome: restore_outcome(r.outcome),
        entry_outcome: r.entry_outcome.to_owned(),
        temps_removed: r.temps_removed,
    }
}

fn undo_outcome(f: &rewind_engine::FilesDone) -> BindingUndoOutcome {
    BindingUndoOutcome {
        kind: if f.ok() {
            "ok".into()
        } else {
            "partial".into()
        },
        restored: f.restored.clone(),
        deleted: f.deleted.clone(),
        failed: f
            .failed
            .iter()
            .map(|(path, message)| BindingFailedPath {
                path: path.clone(),
                message: message.clone(),
            })
            .collect(),
        kept: f.kept.clone(),
    }
}

#[napi]
impl BindingEngineSession {
    /// For every entry of the partition, whether this session may undo or redo it now.
    #[napi(ts_return_type = "Promise<Array<BindingEntryActions> | BindingRefusal>")]
    pub fn entry_actions(&self) -> AsyncTask<Job<Step<Vec<BindingEntryActions>>>> {
        let s = self.session.clone();
        step(move || {
            Ok(s.entry_actions()?
                .into_iter()
                .map(|a| BindingEntryActions {
                    op_id: a.op_id,
                    undoable: a.undoable,
                    redoable: a.redoable,
                })
                .collect())
        })
    }

    /// Crash order, first step: the rewind's history entry `started`, durable before anything
    /// changes; `limit`: the entries kept per workspace.
    #[napi(ts_return_type = "Promise<BindingHistoryEntry | BindingRefusal>")]
    pub fn begin(
        &self,
        start: BindingRewindStart,
        history_limit: u32,
    ) -> AsyncTask<Job<Step<BindingHistoryEntry>>> {
        let s = self.session.clone();
        step(move || {
            let start = Start {
                op_id: start.op_id,
                target_seq: seq_from_js(start.target_seq, "targetSeq")?,
                target_text: start.target_text,
                marker_id: start.marker_id,
                fork_child: start.fork_child_session_id,
            };
            Ok(s.begin(&start, history_limit as usize)?.into())
        })
    }

    /// The first half of the rewind's restore, before the host changes anything: the plan,
    /// its checks and the rescue copies, the workspace untouched. Refused (nothing changed)
    /// when the store cannot serve the rewind; `restoreFiles` with the same op id, on this
    /// object, runs what was prepared.
    #[napi(ts_return_type = "Promise<BindingPrepared | BindingRefusal>")]
    pub fn prepare_restore(
        &self,
        req: BindingRewindRestore,
    ) -> AsyncTask<Job<Step<BindingPrepared>>> {
        let s = self.session.clone();
        step(move || {
            let p = s.prepare_restore(&restore_request(req)?)?;
            Ok(BindingPrepared {
                refused: p
                    .refused
                    .into_iter()
                    .map(|f| BindingFailedPath {
                        path: f.path.spelling(),
                        message: f.error,
                    })
                    .collect(),
                actions: p.actions as f64,
            })
        })
    }

    /// What the git half of a rewind to `targetSeq` would do (`keepGit`: git kept as it
    /// is), changing nothing. `ancestors`: the session's fork chain, as for its restore (a
    /// fork's rewind to a message from before the fork leaves git as it is, and the report says
    /// so).
    #[napi(ts_return_type = "Promise<BindingGitReport | BindingRefusal>")]
    pub fn git_preview(
        &self,
        target_seq: f64,
        keep_git: Option<bool>,
        ancestors: Option<Vec<BindingChainLink>>,
    ) -> AsyncTask<Job<Step<crate::types::BindingGitReport>>> {
        let s = self.session.clone();
        step(move || {
            let seq = seq_from_js(target_seq, "targetSeq")?;
            Ok(
                s.git_preview(seq, keep_git.unwrap_or(false), &chain(ancestors)?)
                    .into(),
            )
        })
    }

    /// What the git step of rewind `opId` (its journal in session `owner`'s store) did;
    /// `null` when the rewind changed nothing of git.
    #[napi(ts_return_type = "Promise<BindingGitReport | null | BindingRefusal>")]
    pub fn git_report(
        &self,
        owner: String,
        op_id: String,
    ) -> AsyncTask<Job<Step<Option<crate::types::BindingGitReport>>>> {
        let s = self.session.clone();
        step(move || Ok(s.git_report(&owner, &op_id).map(Into::into)))
    }

    /// Forgets the restore prepared for `op_id` (the rewind was given up before it ran).
    #[napi]
    pub fn discard_prepared(&self, op_id: String) {
        self.session.discard_prepared(&op_id);
    }

    /// The rewind's journaled restore (what `prepareRestore` prepared for its op id, else
    /// planned now), then its entry finished with what happened.
    #[napi(ts_return_type = "Promise<BindingRewindFiles | BindingRefusal>")]
    pub fn restore_files(
        &self,
        req: BindingRewindRestore,
    ) -> AsyncTask<Job<Step<BindingRewindFiles>>> {
        let s = self.session.clone();
        step(move || {
            let request = restore_request(req)?;
            let r = s.restore_files(&request)?;
            let mut outcome = restore_outcome(r.outcome);
            outcome.outside = r.outside.iter().map(|p| p.spelling()).collect();
            outcome.not_covered = r
                .not_covered
                .iter()
                .map(|n| BindingNotCovered {
                    path: n.path.spelling(),
                    reason: n.reason.clone(),
                })
                .collect();
            outcome.kept = r.kept;
            Ok(BindingRewindFiles {
                outcome,
                not_recorded: r.not_recorded.map(Into::into),
                git: r.git.map(Into::into),
            })
        })
    }

    /// Finishes the entry of a rewind whose files were not restored (`code`: why; a
    /// `rewind/...` failure makes it `failed`, `no-cwd` makes it `done`).
    #[napi(ts_return_type = "Promise<BindingHistoryEntry | BindingRefusal>")]
    pub fn finish_not_restored(
        &self,
        op_id: String,
        code: String,
        message: String,
    ) -> AsyncTask<Job<Step<BindingHistoryEntry>>> {
        let s = self.session.clone();
        step(move || {
            Ok(
                s.finish_not_restored(&op_id, &NotRestored { code, message })?
                    .into(),
            )
        })
    }

    /// Ends the `started` entry `op_id` with `outcome` (`abandoned`, `rolled-back`, `done`,
    /// `partial`, `failed`); refused for a settled entry.
    #[napi(
        ts_args_type = "opId: string, outcome: 'done' | 'partial' | 'failed' | 'rolled-back' | 'abandoned'",
        ts_return_type = "Promise<BindingHistoryEntry | BindingRefusal>"
    )]
    pub fn settle(
        &self,
        op_id: String,
        outcome: String,
    ) -> AsyncTask<Job<Step<BindingHistoryEntry>>> {
        let s = self.session.clone();
        step(move || {
            let outcome: Outcome =
                serde_json::from_value(serde_json::Value::String(outcome.clone()))
                    .ok()
                    .filter(|o: &Outcome| o.is_settled())
                    .ok_or_else(|| {
                        BindingError::bad_request(format!("unknown outcome `{outcome}`"))
                    })?;
            Ok(s.settle(&op_id, outcome, None)?.into())
        })
    }

    /// The state of the restore journal `op_id` of session `owner` (this one, or e.g. a
    /// fork's parent).
    #[napi(ts_return_type = "Promise<JournalState | BindingRefusal>")]
    pub fn journal_state(
        &self,
        owner: String,
        op_id: String,
    ) -> AsyncTask<Job<Step<JournalState>>> {
        let s = self.session.clone();
        step(move || Ok(s.journal_state(&owner, &op_id).into()))
    }

    /// Checks, changing nothing, that this session may undo `op_id` now; every file changed
    /// since the rewind must be decided in `choices` (else `rewind/stale-undo`, `details.paths`).
    #[napi(ts_return_type = "Promise<BindingUndoCheck | BindingRefusal>")]
    pub fn undo_check(
        &self,
        op_id: String,
        choices: Option<BindingUndoChoices>,
    ) -> AsyncTask<Job<Step<BindingUndoCheck>>> {
        let s = self.session.clone();
        step(move || {
            let c = s.undo_check(&op_id, &self::choices(choices))?;
            Ok(BindingUndoCheck {
                entry: BindingHistoryEntry::from(c.entry),
                owner: c.owner,
                files: c.files,
            })
        })
    }

    /// Records durably that the undo of `op_id` began, naming the session the conversation
    /// continues in (created next by the host).
    #[napi(ts_return_type = "Promise<BindingHistoryEntry | BindingRefusal>")]
    pub fn undo_start(
        &self,
        op_id: String,
        undo_session_id: Option<String>,
    ) -> AsyncTask<Job<Step<BindingHistoryEntry>>> {
        let s = self.session.clone();
        step(move || Ok(s.undo_start(&op_id, undo_session_id.as_deref())?.into()))
    }

    /// The undo's file step and its end (`undoneAt`); checks again first, so a file changed
    /// since the check refuses it with nothing changed.
    #[napi(ts_return_type = "Promise<BindingUndoDone | BindingRefusal>")]
    pub fn undo_files(
        &self,
        op_id: String,
        choices: Option<BindingUndoChoices>,
    ) -> AsyncTask<Job<Step<BindingUndoDone>>> {
        let s = self.session.clone();
        step(move || {
            let choices = self::choices(choices);
            let check = s.undo_check_started(&op_id)?;
            let done = s.undo_files(&check, &choices)?;
            Ok(BindingUndoDone {
                files: undo_outcome(&done.files),
                not_recorded: done.not_recorded.map(Into::into),
            })
        })
    }

    /// Finishes an undo a restart found started (files changed since are kept).
    #[napi(ts_return_type = "Promise<BindingUndoOutcome | BindingRefusal>")]
    pub fn undo_finish_interrupted(
        &self,
        op_id: String,
    ) -> AsyncTask<Job<Step<BindingUndoOutcome>>> {
        let s = self.session.clone();
        step(move || {
            let entry = s.entry(&op_id)?;
            Ok(undo_outcome(&s.undo_finish_interrupted(&entry)?))
        })
    }

    /// Redo of the undone rewind `op_id` as the journaled restore `new_op_id` (its own entry).
    #[napi(ts_return_type = "Promise<BindingRedoDone | BindingRefusal>")]
    pub fn redo(
        &self,
        op_id: String,
        new_op_id: String,
        choices: Option<BindingUndoChoices>,
        history_limit: u32,
    ) -> AsyncTask<Job<Step<BindingRedoDone>>> {
        let s = self.session.clone();
        step(move || {
            let done = s.redo(
                &op_id,
                &new_op_id,
                &self::choices(choices),
                history_limit as usize,
            )?;
            Ok(BindingRedoDone {
                op_id: done.op_id,
                target_seq: done.redone.target_seq as f64,
                owner: done.redone.session_id,
                outcome: restore_outcome(done.outcome),
                not_recorded: done.not_recorded.map(Into::into),
            })
        })
    }

    /// The reconcile pass's judgement of the interrupted entry `op_id`: settles what can be
    /// settled alone. `conversation`: whether its conversation half happened (the host knows).
    #[napi(ts_return_type = "Promise<BindingJudged | BindingRefusal>")]
    pub fn judge(&self, op_id: String, conversation: bool) -> AsyncTask<Job<Step<BindingJudged>>> {
        let s = self.session.clone();
        step(move || {
            let entry = s.entry(&op_id)?;
            let (judgement, found) = s.judge(&entry, conversation)?;
            let (judgement, outcome) = match judgement {
                EngineJudgement::Settled(o) => (Judgement::Settled, Some(o)),
                EngineJudgement::FinishUndo => (Judgement::FinishUndo, None),
                EngineJudgement::Open => (Judgement::Open, None),
            };
            Ok(BindingJudged {
                judgement,
                outcome: outcome.map(|o| {
                    serde_json::to_value(o)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                }),
                kind: found.kind.into(),
                journal: found.journal.into(),
                restore: found.restore.map(restore_status),
            })
        })
    }

    /// Continue or roll back the entry `op_id`, the engine choosing how (an interrupted rewind
    /// or undo of this session as a whole; a rewind that is over, or a journal without an
    /// entry, through its journal): `entryOutcome` is `done`, `partial`, `rolled-back`,
    /// `undone`, `continued`, or empty when the history entry could not be updated.
    /// `ancestors` as for a restore.
    #[napi(
        ts_args_type = "opId: string, how: 'continue' | 'rollback', ancestors?: Array<BindingChainLink> | undefined | null",
        ts_return_type = "Promise<BindingResolved | BindingRefusal>"
    )]
    pub fn resolve_entry(
        &self,
        op_id: String,
        how: String,
        ancestors: Option<Vec<BindingChainLink>>,
    ) -> AsyncTask<Job<Step<BindingResolved>>> {
        let s = self.session.clone();
        step(move || {
            let r = s.resolve_entry(&op_id, resolution(&how)?, &chain(ancestors)?)?;
            Ok(resolved(r))
        })
    }

    /// The op ids of this session's interrupted entries, newest first (what a reconcile pass
    /// judges).
    #[napi(ts_return_type = "Promise<Array<string> | BindingRefusal>")]
    pub fn interrupted_entries(&self) -> AsyncTask<Job<Step<Vec<String>>>> {
        let s = self.session.clone();
        step(move || {
            Ok(s.interrupted_entries()?
                .into_iter()
                .map(|e| e.op_id)
                .collect())
        })
    }

    /// What the interrupted entry `op_id` left, changing nothing: its kind, its journal,
    /// where its restore stands.
    #[napi(ts_return_type = "Promise<BindingInterruptedState | BindingRefusal>")]
    pub fn describe(&self, op_id: String) -> AsyncTask<Job<Step<BindingInterruptedState>>> {
        let s = self.session.clone();
        step(move || {
            let found = s.describe(&s.entry(&op_id)?);
            Ok(BindingInterruptedState {
                op_id,
                kind: found.kind.into(),
                journal: found.journal.into(),
                restore: found.restore.map(restore_status),
                partial: false,
            })
        })
    }

    /// This session's rewinds that are over but left their journal open (`partial` or
    /// `failed`), newest first.
    #[napi(ts_return_type = "Promise<Array<BindingInterruptedState> | BindingRefusal>")]
    pub fn partials(&self) -> AsyncTask<Job<Step<Vec<BindingInterruptedState>>>> {
        let s = self.session.clone();
        step(move || {
            Ok(s.partial_entries()?
                .into_iter()
                .map(|(e, found)| BindingInterruptedState {
                    op_id: e.op_id,
                    kind: found.kind.into(),
                    journal: found.journal.into(),
                    restore: found.restore.map(restore_status),
                    partial: true,
                })
                .collect())
        })
    }

    /// The op id `reference` names for `/rewind undo` (`action` `undo`) or `/rewind redo`
    /// (`redo`): none is the newest, `<n>` the n-th newest entry `entryActions` offers that
    /// action for; `@<op id>` or an op id as it is.
    #[napi(
        ts_args_type = "action: 'undo' | 'redo', reference?: string | undefined | null",
        ts_return_type = "Promise<string | BindingRefusal>"
    )]
    pub fn pick_entry(
        &self,
        action: String,
        reference: Option<String>,
    ) -> AsyncTask<Job<Step<String>>> {
        let s = self.session.clone();
        step(move || {
            let pick = match action.as_str() {
                "undo" => Pick::Undo,
                "redo" => Pick::Redo,
                other => {
                    return Err(BindingError::bad_request(format!(
                        "`action` must be 'undo' or 'redo', got `{other}`"
                    )));
                }
            };
            Ok(s.pick_entry(pick, reference.as_deref())?)
        })
    }

    /// Checks a `--only` / `--keep` selection against the plan of a rewind to `targetSeq`
    /// (the store's path matcher): `rewind/bad-selection` naming a filter that matches no
    /// planned file; resolves with the planned paths the selection leaves as they are.
    #[napi(ts_return_type = "Promise<Array<string> | BindingRefusal>")]
    pub fn check_selection(
        &self,
        target_seq: f64,
        selection: BindingRestoreSelection,
        ancestors: Option<Vec<BindingChainLink>>,
    ) -> AsyncTask<Job<Step<Vec<String>>>> {
        let s = self.session.clone();
        step(move || {
            Ok(s.check_selection(
                seq_from_js(target_seq, "targetSeq")?,
                &chain(ancestors)?,
                &selection.only.unwrap_or_default(),
                &selection.keep.unwrap_or_default(),
            )?)
        })
    }

    /// Removes the temp files a killed restore left beside `paths`; resolves with the removed.
    #[napi(ts_return_type = "Promise<Array<string> | BindingRefusal>")]
    pub fn remove_restore_temps(&self, paths: Vec<String>) -> AsyncTask<Job<Step<Vec<String>>>> {
        let s = self.session.clone();
        step(move || Ok(s.remove_restore_temps(&paths)))
    }
}
