//! What a rewind to a message would do to the files, before it runs: the plan, every planned
//! file with its `+/−` line counts and who made the change it undoes, the files that cannot be
//! read; the diff of one planned file; the check of a `--only` / `--keep` selection. One call
//! each, for every front end (the plugin's `/rewind preview` and RPC, the command-line tool).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use snapshot_store::{
    Action, ChainLink, ChangeOrigin, DiffLimits, FileDiff, PathFailure, PlannedAction, RestorePlan,
    Session,
};

use crate::engine::Engine;
use crate::error::{EngineError, ErrorCode};
use crate::session::EngineSession;

/// Files whose `+/−` counts a preview computes; past this many (or past
/// [`PREVIEW_COUNT_BUDGET`]) the rest show no counts.
pub const PREVIEW_COUNT_FILES: usize = 500;
/// Time a preview spends on line counts.
pub const PREVIEW_COUNT_BUDGET: Duration = Duration::from_secs(2);

/// Who made the change a planned file's restore undoes. Its name (`agent`, `outside`,
/// `other-session`) is derived (`strum`).
#[derive(Debug, Clone, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Origin {
    /// This session's agent.
    Agent,
    /// Not an agent: the user between turns, or another program.
    Outside,
    /// A tool call of another session of the same workspace.
    OtherSession(String),
}

impl Origin {
    /// The origin's name (`agent`, `outside`, `other-session`).
    pub fn name(&self) -> &'static str {
        self.into()
    }

    /// The other session's id, for [`Origin::OtherSession`].
    pub fn session(&self) -> Option<&str> {
        match self {
            Self::OtherSession(s) => Some(s),
            _ => None,
        }
    }
}

/// The name of a planned action (`write`, `create`, `delete`).
pub fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Write { .. } => "write",
        Action::Recreate { .. } => "create",
        Action::Delete => "delete",
    }
}

/// One planned file of a preview.
#[derive(Debug, Clone)]
pub struct PreviewFile {
    /// The planned action (its path, its anchor, what it writes).
    pub action: PlannedAction,
    /// Lines the restore adds (text on both sides, within the count budget).
    pub added: Option<usize>,
    /// Lines the restore removes.
    pub removed: Option<usize>,
    /// Who made the change the restore undoes.
    pub origin: Origin,
}

/// What a rewind to a message would do to the files (nothing changed).
#[derive(Debug, Clone)]
pub struct Preview {
    /// The plan (its uncovered, skipped, outside and not-covered paths included).
    pub plan: RestorePlan,
    /// Every planned file, in the plan's order, with its counts and origin.
    pub files: Vec<PreviewFile>,
    /// Planned files that cannot be read now (the restore would fail them), with why.
    pub unreadable: Vec<PathFailure>,
    /// Planned files whose before-state is a git blob the workspace's repository no longer
    /// holds, with why: the restore refuses the rewind (`rewind/git-object-gone`) unless they
    /// are left out.
    pub git_object_gone: Vec<PathFailure>,
}

/// The plan of a restore of `session` to `target_seq`, through the fork chain when `ancestors`
/// names any.
pub fn plan_of(
    session: &Session,
    target_seq: u64,
    ancestors: &[ChainLink],
) -> Result<RestorePlan, EngineError> {
    if ancestors.is_empty() {
        Ok(session.plan_restore(target_seq)?)
    } else {
        Ok(session.plan_restore_chain(target_seq, ancestors)?)
    }
}

/// The preview of `plan` on `session`: counts (bounded by [`PREVIEW_COUNT_FILES`] and
/// [`PREVIEW_COUNT_BUDGET`]; a file that cannot be read for them shows without), origins, the
/// planned files that cannot be read, and those whose git object is gone.
pub fn preview_of(session: &Session, plan: RestorePlan) -> Result<Preview, EngineError> {
    let paths: Vec<_> = plan.actions.iter().map(|a| a.path.clone()).collect();
    let origins = session.change_origins(plan.target_seq, &paths)?;
    let limits = DiffLimits::default();
    let start = Instant::now();
    let files = plan
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let (added, removed) =
                if i < PREVIEW_COUNT_FILES && start.elapsed() < PREVIEW_COUNT_BUDGET {
                    match session.diff_action(a, &limits) {
                        Ok(d) => (d.added, d.removed),
                        Err(_) => (None, None),
                    }
                } else {
                    (None, None)
                };
            let origin = match origins.get(&a.path) {
                Some(ChangeOrigin::Outside) => Origin::Outside,
                Some(ChangeOrigin::OtherSession { session_id }) => {
                    Origin::OtherSession(session_id.clone())
                }
                _ => Origin::Agent,
            };
            PreviewFile {
                action: a.clone(),
                added,
                removed,
                origin,
            }
        })
        .collect();
    let unreadable = session.unreadable(&plan);
    let git_object_gone = session
        .git_objects_gone(&plan)
        .map_err(snapshot_store::RestoreError::from)?;
    Ok(Preview {
        plan,
        files,
        unreadable,
        git_object_gone,
    })
}

/// The bytes of the planned path `path` names — its spelling (`hex:…` for a name that is
/// not valid UTF-8), or a display form only one planned path shows (with `dirs`, a
/// directory above planned files too) — `None` when it names none; a display form several
/// share is refused.
fn chosen(plan: &RestorePlan, path: &str, dirs: bool) -> Result<Option<Vec<u8>>, EngineError> {
    let planned = plan.actions.iter().map(|a| &a.path);
    match snapshot_store::choose(path, planned, dirs) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(snapshot_store::SelectionFault::NoMatch) => Ok(None),
        Err(fault) => Err(snapshot_store::SelectionError {
            filter: path.to_owned(),
            fault,
        }
        .into()),
    }
}

fn not_planned(plan: &RestorePlan, path: &str) -> EngineError {
    EngineError::new(
        ErrorCode::NotPlanned,
        format!(
            "restoring to @{} would not change `{path}`",
            plan.target_seq
        ),
    )
    .with_details(json!({ "path": path }))
}

/// The diff of the planned file `path` of `plan` (now → after the restore):
/// [`ErrorCode::NotPlanned`] when the restore leaves that path alone.
pub fn diff_of(
    session: &Session,
    plan: &RestorePlan,
    path: &str,
) -> Result<(PlannedAction, FileDiff), EngineError> {
    let found = chosen(plan, path, false)?
        .and_then(|b| plan.actions.iter().find(|a| a.path.as_bytes() == b));
    let Some(action) = found else {
        return Err(not_planned(plan, path));
    };
    let d = session.diff_action(action, &DiffLimits::default())?;
    Ok((action.clone(), d))
}

/// The planned actions of `plan` at or below `path` (a file, or a directory above planned
/// files; every action without a path), in plan order: [`ErrorCode::NotPlanned`] when the
/// restore changes nothing there.
pub fn planned_under<'p>(
    plan: &'p RestorePlan,
    path: Option<&str>,
) -> Result<Vec<&'p PlannedAction>, EngineError> {
    let Some(path) = path else {
        return Ok(plan.actions.iter().collect());
    };
    let root = chosen(plan, path, true)?.unwrap_or_default();
    let under: Vec<_> = plan
        .actions
        .iter()
        .filter(|a| {
            let b = a.path.as_bytes();
            !root.is_empty()
                && (b == root.as_slice()
                    || (b.starts_with(&root) && b.get(root.len()) == Some(&b'/')))
        })
        .collect();
    if under.is_empty() {
        return Err(not_planned(plan, path));
    }
    Ok(under)
}

/// Narrows `plan` to a `--only` / `--keep` selection, the store's path matcher deciding
/// (byte for byte, a `hex:` spelling for a name that is not UTF-8, a display form when one
/// planned path shows it — see [`snapshot_store::choose`]): [`ErrorCode::BadSelection`]
/// (naming the filter, `details.path`) for a filter that matches no planned file,
/// [`ErrorCode::BadRequest`] for a display form several planned files share. Returns the
/// planned paths the selection leaves as they are, spelled exactly
/// ([`snapshot_store::RelPath::spelling`]).
pub fn select(
    plan: &mut RestorePlan,
    only: &[String],
    keep: &[String],
) -> Result<Vec<String>, EngineError> {
    let target = plan.target_seq;
    let kept = plan.select(only, keep).map_err(|e| match e.fault {
        snapshot_store::SelectionFault::NoMatch => EngineError::new(
            ErrorCode::BadSelection,
            format!(
                "`{}` matches no file the rewind to @{target} would change (see the preview of @{target}); nothing was changed",
                e.filter
            ),
        )
        .with_details(json!({ "path": e.filter })),
        // A display form several files share, a `hex:` spelling that is not hex.
        _ => EngineError::from(e),
    })?;
    // Spelled exactly (`hex:…` for a name that is not valid UTF-8).
    Ok(kept.iter().map(|a| a.path.spelling()).collect())
}

impl Engine {
    /// The plan of a restore of session `session_id` in `cwd` to `target_seq` (through the
    /// fork chain `ancestors`), changing nothing.
    pub fn plan(
        &self,
        session_id: &str,
        cwd: &Path,
        target_seq: u64,
        ancestors: &[ChainLink],
    ) -> Result<RestorePlan, EngineError> {
        plan_of(&*self.files(session_id, cwd, None)?, target_seq, ancestors)
    }

    /// [`preview_of`] the plan of a restore of session `session_id` in `cwd` to `target_seq`.
    pub fn preview(
        &self,
        session_id: &str,
        cwd: &Path,
        target_seq: u64,
        ancestors: &[ChainLink],
    ) -> Result<Preview, EngineError> {
        let session = self.files(session_id, cwd, None)?;
        preview_of(&session, plan_of(&session, target_seq, ancestors)?)
    }

    /// [`diff_of`] the planned file `path` of a restore of session `session_id` to
    /// `target_seq`.
    pub fn diff(
        &self,
        session_id: &str,
        cwd: &Path,
        target_seq: u64,
        path: &str,
        ancestors: &[ChainLink],
    ) -> Result<(PlannedAction, FileDiff), EngineError> {
        let session = self.files(session_id, cwd, None)?;
        diff_of(&session, &plan_of(&session, target_seq, ancestors)?, path)
    }

    /// Checks a `--only` / `--keep` selection against the plan of a restore of session
    /// `session_id` to `target_seq` ([`select`]), changing nothing.
    pub fn check_selection(
        &self,
        session_id: &str,
        cwd: &Path,
        target_seq: u64,
        ancestors: &[ChainLink],
        only: &[String],
        keep: &[String],
    ) -> Result<Vec<String>, EngineError> {
        let mut plan = self.plan(session_id, cwd, target_seq, ancestors)?;
        select(&mut plan, only, keep)
    }
}

impl EngineSession {
    /// [`Engine::preview`] for this session (its files must be usable).
    pub fn preview(
        &self,
        target_seq: u64,
        ancestors: &[ChainLink],
    ) -> Result<Preview, EngineError> {
        let cwd = self.files_usable()?;
        self.engine.preview(&self.id, cwd, target_seq, ancestors)
    }

    /// [`Engine::check_selection`] for this session: [`ErrorCode::BadSelection`] also when its
    /// files cannot be restored here (nothing to choose from).
    pub fn check_selection(
        &self,
        target_seq: u64,
        ancestors: &[ChainLink],
        only: &[String],
        keep: &[String],
    ) -> Result<Vec<String>, EngineError> {
        let cwd = self.files_usable().map_err(|e| EngineError {
            code: ErrorCode::BadSelection,
            message: format!("files cannot be chosen: {}; nothing was changed", e.message),
            details: e.details,
        })?;
        self.engine
            .check_selection(&self.id, cwd, target_seq, ancestors, only, keep)
    }
}
