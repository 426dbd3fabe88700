//! The commands.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cleanup::{Cleaner, KeepReason, MemoryPolicy, Pins, Policy, Scope, SweepRequest};
use history::{Entry, HistoryStore, Partition, WorkspaceKey};
use indicatif::{ProgressBar, ProgressStyle};
use rewind_engine::{
    Choices, Engine, EngineError, EngineOptions, ErrorCode, NotRestored, Origin, Preview,
    Resolution, RestoreRequest, Start,
};
use rewind_plan::{Candidate, Target, list_candidates, parse_target};
use serde_json::{Value, json};
use snapshot_store::{
    Action, DiffLimits, RestoreOutcome, RestorePlan, Session, SessionHold, SideState, Store,
    StoreOptions,
};

use crate::fail::{Code, Fail};
use crate::home::{self, Logs};
use crate::show::{bytes, json_spelled, safe, shown, shown_spelled, time};
use crate::{Cli, Command};

/// The engine's options. A test seam: when `DSH_REWIND_PAUSE` names a step of the engine's
/// crash order (`rewind:git-planned`, `undo:git-planned`, …), the process writes
/// `@@rewind-pause <step>` on stderr at that step and waits there, for a crash test to kill it
/// (SIGKILL) at exactly that point.
fn engine_options() -> EngineOptions {
    let mut o = EngineOptions::default();
    if let Some(at) = std::env::var_os("DSH_REWIND_PAUSE") {
        o.crash = Some(std::sync::Arc::new(move |step: &'static str| {
            if at.to_str() == Some(step) {
                eprintln!("@@rewind-pause {step}");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
        }));
    }
    o
}

/// Restores with more actions than this show a spinner on a terminal.
const BIG_RESTORE: usize = 200;

struct Ctx {
    home: PathBuf,
    json: bool,
    logs: Logs,
}

fn now_ms() -> u64 {
    rewind_durable::ms_since_epoch(SystemTime::now())
}

fn emit(ctx: &Ctx, value: Value, text: String) {
    if ctx.json {
        let value = crate::show::camel_keys(value);
        crate::out::stdout(&format!("{value:#}\n"));
    } else {
        crate::out::stdout(&text);
    }
}

fn progress_bar(len: u64, what: &str) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    Some(pb)
}

/// Runs the command; returns the exit code of a run that did not fail outright.
pub fn run(cli: Cli) -> Result<u8, Fail> {
    let home = home::resolve(cli.home.as_deref())?;
    let ctx = Ctx {
        logs: Logs::scan(&home),
        home,
        json: cli.json,
    };
    match cli.command {
        Command::Doctor => crate::doctor::run(&ctx.home, &ctx.logs, ctx.json),
        Command::Sessions => sessions(&ctx),
        Command::Checkpoints { session } => checkpoints(&ctx, &session),
        Command::Preview {
            session,
            target,
            workspace,
        } => preview(&ctx, &session, &target, workspace),
        Command::Diff {
            session,
            target,
            path,
            workspace,
        } => diff(&ctx, &session, &target, path.as_deref(), workspace),
        Command::Restore {
            session,
            target,
            only,
            keep,
            keep_git,
            workspace,
        } => restore(&ctx, &session, &target, &only, &keep, keep_git, workspace),
        Command::Undo {
            op,
            workspace,
            keep,
            take,
        } => undo(&ctx, &op, workspace, Choices { take, keep }),
        Command::History { workspace } => history(&ctx, workspace),
        Command::Restores => restores(&ctx),
        Command::Continue { op, workspace } => finish(&ctx, &op, workspace, false),
        Command::Rollback { op, workspace } => finish(&ctx, &op, workspace, true),
        Command::Du => du(&ctx),
        Command::Gc {
            max_age_days,
            max_size,
            apply,
        } => gc(&ctx, max_age_days, max_size, apply),
        Command::Compact => compact(&ctx),
        Command::Verify => verify(&ctx),
        Command::Repair => repair(&ctx),
    }
}

// ---------------------------------------------------------------- store access

impl Ctx {
    fn store_root(&self) -> PathBuf {
        self.home.join(home::SNAPSHOTS)
    }

    /// Opens the existing store (never creates one under a mistyped home).
    fn store(&self) -> Result<Store, Fail> {
        let root = self.store_root();
        if !root.join("store.json").is_file() {
            return Err(Fail::new(
                Code::NotFound,
                format!(
                    "no snapshot store at {} (is --home the DSH home?)",
                    root.display()
                ),
            ));
        }
        Ok(Store::open(&root, StoreOptions::default())?)
    }

    /// A store that will be written: refused when a newer build wrote it.
    fn writable_store(&self) -> Result<Store, Fail> {
        let store = self.store()?;
        if let Some(n) = store.newer_version() {
            return Err(Fail::new(
                Code::Newer,
                format!("{n}; this dsh-rewind changes nothing in it"),
            ));
        }
        Ok(store)
    }

    /// A session with checkpoints of its own, or a fork whose ancestors have some.
    fn known_session(&self, store: &Store, id: &str) -> Result<(), Fail> {
        let stored = store.list_sessions()?;
        let known = |s: &str| stored.iter().any(|x| x == s);
        if known(id) || self.logs.chain(id).iter().any(|l| known(&l.session_id)) {
            Ok(())
        } else {
            Err(Fail::new(
                Code::NotFound,
                format!(
                    "unknown session `{}`: it has no checkpoints in {} (see `dsh-rewind sessions`)",
                    safe(id),
                    self.store_root().display()
                ),
            ))
        }
    }

    fn workspace(&self, id: &str, given: Option<PathBuf>) -> Result<PathBuf, Fail> {
        let cwd = given.or_else(|| self.logs.cwd(id)).ok_or_else(|| {
            Fail::new(
                Code::NotFound,
                format!(
                    "the workspace of session `{}` is unknown (no readable DSH log names it); pass --workspace DIR",
                    safe(id)
                ),
            )
        })?;
        if !cwd.is_dir() {
            return Err(Fail::new(
                Code::NotFound,
                format!(
                    "workspace {} of session `{}` is not a directory",
                    cwd.display(),
                    safe(id)
                ),
            ));
        }
        Ok(cwd)
    }

    fn session(&self, store: &Store, id: &str, cwd: &Path) -> Result<Session, Fail> {
        self.known_session(store, id)?;
        Ok(store.session(id, cwd)?)
    }

    /// Claims a session for a change: refused while a live DSH host holds it.
    fn claim(&self, store: &Store, id: &str) -> Result<SessionHold, Fail> {
        store.claim_session(id)?.ok_or_else(|| {
            Fail::new(
                Code::Busy,
                format!(
                    "session `{}` is held by a running DSH host (or another dsh-rewind); close the session or stop DSH, then try again — nothing was changed",
                    safe(id)
                ),
            )
        })
    }

    /// Resolves `@<seq>` / `<n>` against the session's log (a human message), or, without
    /// a log, an `@<seq>` at or before the newest checkpoint.
    fn target(&self, session: &Session, id: &str, text: &str) -> Result<u64, Fail> {
        let target = parse_target(text).map_err(|e| Fail::new(Code::Usage, e.to_string()))?;
        let cands = match self.logs.readable(id) {
            true => Some(candidates(self, id)?),
            false => None,
        };
        let Some(cands) = cands else {
            return match target {
                Target::Seq(s) if session.anchors()?.last().is_some_and(|a| *a >= s) => Ok(s),
                Target::Seq(s) => Err(Fail::new(
                    Code::NotFound,
                    format!("no checkpoint at or after @{s} in session `{}`", safe(id)),
                )),
                Target::Index(_) => Err(Fail::new(
                    Code::NotFound,
                    format!(
                        "session `{}` has no DSH log to count messages in; use @<seq>",
                        safe(id)
                    ),
                )),
            };
        };
        let found = match target {
            Target::Seq(s) => cands.iter().find(|c| c.seq == s),
            Target::Index(n) => cands.iter().find(|c| c.index == n),
        };
        match found {
            Some(c) if c.pending => Err(Fail::new(
                Code::Refused,
                format!("{text} is steering the model has not read yet: no file changed after it"),
            )),
            Some(c) => Ok(c.seq),
            None => Err(Fail::new(
                Code::NotFound,
                format!(
                    "{text} is not a message you typed in session `{}` (see `dsh-rewind checkpoints {}`)",
                    safe(id),
                    safe(id)
                ),
            )),
        }
    }

    fn plan(&self, session: &Session, id: &str, seq: u64) -> Result<RestorePlan, Fail> {
        Ok(session.plan_restore_chain(seq, &self.logs.chain(id))?)
    }

    fn history_store(&self) -> Result<HistoryStore, Fail> {
        HistoryStore::open(self.home.join(home::HISTORY))
            .map_err(|e| Fail::new(Code::Failed, e.to_string()))
    }

    /// Every readable partition of the history root.
    fn partitions(&self) -> Result<Vec<(WorkspaceKey, Partition)>, Fail> {
        let root = self.home.join(home::HISTORY);
        let Ok(rd) = std::fs::read_dir(&root) else {
            return Ok(Vec::new());
        };
        let mut keys: Vec<WorkspaceKey> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| WorkspaceKey::parse(e.file_name().to_str()?).ok())
            .collect();
        keys.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        let hs = self.history_store()?;
        let mut out = Vec::new();
        for k in keys {
            let p = hs.read(&k).map_err(|e| {
                Fail::new(
                    if e.code() == "rewind/failed" {
                        Code::Corrupt
                    } else {
                        Code::Newer
                    },
                    format!("history partition {}: {e}", k.as_str()),
                )
            })?;
            out.push((k, p));
        }
        Ok(out)
    }

    /// The partition a session's entries go to: the one already holding its entries,
    /// else one holding entries of a session in the same workspace, else the key a
    /// host without a workspace registry uses (`ws-cwd.<sha256(cwd)[0..16]>`).
    fn history_key(&self, id: &str, cwd: &Path) -> Result<WorkspaceKey, Fail> {
        let parts = self.partitions()?;
        if let Some((k, _)) = parts
            .iter()
            .find(|(_, p)| p.entries.iter().any(|e| e.session_id == id))
        {
            return Ok(k.clone());
        }
        if let Some((k, _)) = parts.iter().find(|(_, p)| {
            p.entries
                .iter()
                .any(|e| self.logs.cwd(&e.session_id).as_deref() == Some(cwd))
        }) {
            return Ok(k.clone());
        }
        let digest = sha256_hex(cwd.to_string_lossy().as_bytes());
        WorkspaceKey::for_workspace(&format!("cwd.{}", &digest[..16]))
            .map_err(|e| Fail::new(Code::Failed, e.to_string()))
    }
}

/// The losses repairs noted for session `id` and the fork ancestors it restores from, with
/// one warning line each (empty when none).
fn records_lost(
    ctx: &Ctx,
    store: &Store,
    id: &str,
) -> Result<(Vec<snapshot_store::RecordsLost>, String), Fail> {
    let mut ids = vec![id.to_string()];
    for l in ctx.logs.chain(id) {
        if !ids.contains(&l.session_id) {
            ids.push(l.session_id);
        }
    }
    let mut all = Vec::new();
    let mut text = String::new();
    for i in ids {
        for loss in store.records_lost(&i)? {
            text.push_str(&format!(
                "warning: records of session {} were lost at a repair{}: {} byte(s) of its checkpoints are no longer read ({}){}; what they recorded is not known, and files they covered are not restored\n",
                safe(&loss.session_id),
                if loss.at_ms > 0 { format!(" on {}", time(loss.at_ms)) } else { String::new() },
                loss.lost_bytes,
                safe(&loss.detail),
                if loss.quarantined.is_empty() {
                    String::new()
                } else {
                    format!(", kept in {}", safe(&loss.quarantined))
                },
            ));
            all.push(loss);
        }
    }
    Ok((all, text))
}

/// Fails with the damage the inventory found in session `id`'s own records (exit 5).
fn damaged_session(inv: &snapshot_store::Inventory, id: &str) -> Result<(), Fail> {
    let Ok(enc) = snapshot_store::encode_id(id) else {
        return Ok(());
    };
    let dir = format!("sessions/{enc}/");
    match inv.problems.iter().find(|p| p.subject().starts_with(&dir)) {
        Some(p) => Err(Fail::new(
            Code::Corrupt,
            format!(
                "{}; `dsh-rewind repair` moves the damage into quarantine/",
                p
            ),
        )),
        None => Ok(()),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn candidates(ctx: &Ctx, id: &str) -> Result<Vec<Candidate>, Fail> {
    let log = ctx.logs.read(id)?;
    list_candidates(&log)
        .map_err(|e| Fail::new(Code::Corrupt, format!("session `{}`: {e}", safe(id))))
}

// ---------------------------------------------------------------- sessions, checkpoints

fn sessions(ctx: &Ctx) -> Result<u8, Fail> {
    let store = ctx.store()?;
    let inv = store.inventory()?;
    let mut rows = Vec::new();
    let mut text = String::new();
    for s in &inv.sessions {
        let ws = ctx.logs.cwd(&s.session_id);
        let held = store.session_is_held(&s.session_id)?;
        let total = s.record_bytes + s.blob_bytes;
        rows.push(json!({
            "session": s.session_id,
            "workspace": ws,
            "lastActivityMs": s.last_activity_ms,
            "checkpoints": s.anchors.len(),
            "bytes": total,
            "recordBytes": s.record_bytes,
            "blobBytes": s.blob_bytes,
            "exclusiveBlobBytes": s.exclusive_blob_bytes,
            "openRestores": s.open_journals,
            "held": held,
        }));
        text.push_str(&format!(
            "{}  {}  {} checkpoint(s)  {}{}{}\n    workspace: {}\n",
            safe(&s.session_id),
            time(s.last_activity_ms),
            s.anchors.len(),
            bytes(total),
            if held {
                "  [held by a running DSH]"
            } else {
                ""
            },
            if s.open_journals.is_empty() {
                ""
            } else {
                "  [interrupted restore]"
            },
            ws.map(|p| safe(&p.to_string_lossy()))
                .unwrap_or_else(|| "? (no DSH log)".into()),
        ));
    }
    if inv.sessions.is_empty() {
        text.push_str("No sessions have checkpoints.\n");
    }
    for p in &inv.problems {
        text.push_str(&format!("warning: {}\n", safe(&p.to_string())));
    }
    let ok = inv.problems.is_empty();
    emit(
        ctx,
        json!({"ok": ok, "sessions": rows, "problems": inv.problems}),
        text,
    );
    Ok(if ok { 0 } else { Code::Corrupt.exit() })
}

fn checkpoints(ctx: &Ctx, id: &str) -> Result<u8, Fail> {
    let store = ctx.store()?;
    ctx.known_session(&store, id)?;
    let inv = store.inventory()?;
    damaged_session(&inv, id)?;
    let (lost, lost_text) = records_lost(ctx, &store, id)?;
    let usage = inv
        .sessions
        .iter()
        .find(|s| s.session_id == id)
        .cloned()
        .unwrap_or_default();
    let per_anchor: BTreeMap<u64, usize> = usage.anchors.iter().copied().collect();
    // Files a restore to a message would consider: paths recorded at or after it.
    let paths_from =
        |seq: u64| -> usize { per_anchor.range(seq..).map(|(_, n)| *n).sum::<usize>() };
    let mut rows = Vec::new();
    let mut text = format!("Checkpoints of session {}:\n", safe(id));
    match ctx.logs.readable(id) {
        true => {
            for c in candidates(ctx, id)? {
                let here = per_anchor.get(&c.seq).copied().unwrap_or(0);
                rows.push(json!({
                    "seq": c.seq, "index": c.index, "preview": c.preview, "pending": c.pending,
                    "timeMs": c.time, "filesChangedAfter": here, "filesSinceThen": paths_from(c.seq),
                }));
                text.push_str(&format!(
                    "  @{:<6} {:>3}. {}{}\n          {} file(s) changed answering it, {} recorded since\n",
                    c.seq,
                    c.index,
                    safe(&c.preview),
                    if c.pending { "  (not read yet)" } else { "" },
                    here,
                    paths_from(c.seq),
                ));
            }
        }
        false => {
            text.push_str("  (no DSH log for this session: checkpoints by log seq only)\n");
            for (seq, n) in usage.anchors.iter().rev() {
                rows.push(
                    json!({"seq": seq, "filesChangedAfter": n, "filesSinceThen": paths_from(*seq)}),
                );
                text.push_str(&format!(
                    "  @{seq:<6} {n} file(s) changed answering it, {} recorded since\n",
                    paths_from(*seq)
                ));
            }
        }
    }
    text.push_str(&lost_text);
    emit(
        ctx,
        json!({"ok": true, "session": id, "checkpoints": rows, "recordsLost": lost}),
        text,
    );
    Ok(0)
}

// ---------------------------------------------------------------- preview, diff

fn action_row(a: &snapshot_store::PlannedAction) -> (Value, String) {
    let (kind, detail) = match &a.action {
        Action::Write { size, .. } => ("write", format!("{} from @{}", bytes(*size), a.anchor_seq)),
        Action::Recreate { size, .. } => (
            "recreate",
            format!("{} from @{}", bytes(*size), a.anchor_seq),
        ),
        Action::Delete => ("delete", format!("absent at @{}", a.anchor_seq)),
    };
    (
        json!({"path": a.path, "action": kind, "anchor": a.anchor_seq}),
        format!("  {kind:<9} {}  ({detail})\n", shown(&a.path)),
    )
}

/// A plan as rows and text; with the engine's preview of it, each file's `+/−` line counts and
/// who made the change (as `/rewind preview` shows them), the files that cannot be read, and
/// those whose git object the repository no longer has.
fn plan_text(plan: &RestorePlan, preview: Option<&Preview>) -> (Value, String) {
    let mut text = String::new();
    let mut actions = Vec::new();
    for (i, a) in plan.actions.iter().enumerate() {
        let (mut v, mut t) = action_row(a);
        if let Some(f) = preview.and_then(|p| p.files.get(i)) {
            v["added"] = json!(f.added);
            v["removed"] = json!(f.removed);
            v["origin"] = json!(f.origin.name());
            v["originSession"] = json!(f.origin.session());
            t.truncate(t.trim_end().len());
            if let (Some(added), Some(removed)) = (f.added, f.removed) {
                t.push_str(&format!(" +{added} −{removed}"));
            }
            match &f.origin {
                Origin::Agent => {}
                Origin::Outside => t.push_str(" [changed outside the agent]"),
                Origin::OtherSession(s) => {
                    t.push_str(&format!(" [changed by session {}]", safe(s)));
                }
            }
            t.push('\n');
        }
        actions.push(v);
        text.push_str(&t);
    }
    let unreadable = preview.map(|p| p.unreadable.as_slice()).unwrap_or_default();
    for u in unreadable {
        text.push_str(&format!(
            "  unreadable {}  ({}: the restore will leave it as it is)\n",
            safe(&u.display),
            safe(&u.error)
        ));
    }
    let gone = preview
        .map(|p| p.git_object_gone.as_slice())
        .unwrap_or_default();
    for g in gone {
        text.push_str(&format!(
            "  git object gone {}  ({}; --keep it to restore the rest)\n",
            safe(&g.display),
            safe(&g.error)
        ));
    }
    for u in &plan.uncovered {
        text.push_str(&format!(
            "  uncovered {}  ({} over the per-file cap: not restorable)\n",
            shown(&u.path),
            bytes(u.size)
        ));
    }
    for s in &plan.skipped {
        text.push_str(&format!("  skipped   {}  ({})\n", shown(&s.path), s.reason));
    }
    let v = json!({
        "target": plan.target_seq,
        "actions": actions,
        "uncovered": plan.uncovered.iter().map(|u| json!({"path": u.path, "size": u.size})).collect::<Vec<_>>(),
        "skipped": plan.skipped.iter().map(|s| json!({"path": s.path, "reason": s.reason.to_string()})).collect::<Vec<_>>(),
        "unchanged": plan.unchanged,
        "unreadable": unreadable.iter().map(|u| json!({"path": u.path, "error": u.error})).collect::<Vec<_>>(),
        "gitObjectGone": gone.iter().map(|g| json!({"path": g.path, "error": g.error})).collect::<Vec<_>>(),
    });
    (v, text)
}

/// A known session opened read-only on its workspace, its target resolved and planned.
struct Planned {
    cwd: PathBuf,
    session: Session,
    seq: u64,
    plan: RestorePlan,
}

fn planned(ctx: &Ctx, id: &str, target: &str, ws: Option<PathBuf>) -> Result<Planned, Fail> {
    let store = ctx.store()?;
    ctx.known_session(&store, id)?;
    let cwd = ctx.workspace(id, ws)?;
    let session = ctx.session(&store, id, &cwd)?;
    let seq = ctx.target(&session, id, target)?;
    let plan = ctx.plan(&session, id, seq)?;
    Ok(Planned {
        cwd,
        session,
        seq,
        plan,
    })
}

fn preview(ctx: &Ctx, id: &str, target: &str, ws: Option<PathBuf>) -> Result<u8, Fail> {
    let Planned {
        cwd,
        session,
        seq,
        plan,
    } = planned(ctx, id, target, ws)?;
    let (lost, lost_text) = records_lost(ctx, &ctx.store()?, id)?;
    // The engine's preview, as `/rewind preview` shows it: `+/−` counts and who made each change.
    let preview = rewind_engine::preview_of(&session, plan).map_err(engine_error)?;
    let plan = &preview.plan;
    let (v, body) = plan_text(plan, Some(&preview));
    // What the restore would do to the workspace's git repository (docs/git.md).
    let git = {
        let key = ctx.history_key(id, &cwd)?;
        let engine = Engine::open(&ctx.home, engine_options());
        engine
            .session(id, Some(&cwd), key)
            .git_preview(seq, false, &ctx.logs.chain(id))
    };
    let git_lines = match (
        &git.refusal,
        git.changes || !git.flagged.is_empty(),
        &git.untracked,
    ) {
        (Some(r), _, _) => format!("Git: {}\n", safe(r)),
        // Nothing to keep when git would not change (a fork leaves it as it is, and says why).
        (None, true, _) if git.changes => format!(
            "Git: {}\nKeep git as it is with --keep-git.\n",
            safe(&git.summary)
        ),
        (None, true, _) => format!("Git: {}\n", safe(&git.summary)),
        (None, false, Some(u)) => format!("Git: left as it is: {}\n", safe(u)),
        (None, false, None) => String::new(),
    };
    let text = format!(
        "Restoring session {} to @{seq} in {} would change {} file(s) ({} already as they were):\n{body}{git_lines}{lost_text}",
        safe(id),
        safe(&cwd.to_string_lossy()),
        plan.actions.len(),
        plan.unchanged
    );
    emit(
        ctx,
        json!({"ok": true, "session": id, "workspace": cwd, "plan": v, "recordsLost": lost,
               "git": {"summary": git.summary, "changes": git.changes, "flagged": git.flagged, "refusal": git.refusal, "untracked": git.untracked}}),
        text,
    );
    Ok(0)
}

/// One side of a diff that is not compared line by line, in words.
fn side_text(side: &SideState) -> String {
    match side {
        SideState::Absent => "absent".into(),
        SideState::Text { size, .. } => format!("text, {}", bytes(*size)),
        SideState::Binary { size, .. } => format!("binary, {}", bytes(*size)),
        SideState::TooLarge { size } => format!("{} (too large to diff)", bytes(*size)),
        SideState::TooManyLines { lines, .. } => format!("{lines} lines (too many to diff)"),
        SideState::NotRegular => "not a regular file".into(),
        SideState::Unreadable { message } => format!("unreadable: {}", safe(message)),
        SideState::MissingBackup { sha256 } => format!("backup blob {sha256} is missing"),
        SideState::CorruptBackup { sha256 } => format!("backup blob {sha256} is corrupt"),
    }
}

fn diff(
    ctx: &Ctx,
    id: &str,
    target: &str,
    path: Option<&str>,
    ws: Option<PathBuf>,
) -> Result<u8, Fail> {
    let Planned {
        session, seq, plan, ..
    } = planned(ctx, id, target, ws)?;
    // The planned files at or below the path (the engine decides what it names).
    let actions = rewind_engine::planned_under(&plan, path).map_err(engine_error)?;
    let mut text = String::new();
    let mut files = Vec::new();
    let limits = DiffLimits::default();
    for a in actions {
        let name = shown(&a.path);
        let d = session.diff_action(a, &limits)?;
        text.push_str(&format!("--- {name} (now)\n+++ {name} (@{seq})\n"));
        match &d.unified {
            Some(udiff) => {
                text.push_str(udiff);
                if !udiff.ends_with('\n') && !udiff.is_empty() {
                    text.push('\n');
                }
                if d.truncated {
                    text.push_str("  (diff cut here)\n");
                }
                files.push(
                    json!({"path": a.path, "diff": udiff, "added": d.added, "removed": d.removed}),
                );
            }
            None => {
                let line = format!(
                    "now: {}; at @{seq}: {}",
                    side_text(&d.now),
                    side_text(&d.then)
                );
                text.push_str(&format!("  {line}\n"));
                files.push(json!({"path": a.path, "summary": line}));
            }
        }
    }
    emit(
        ctx,
        json!({"ok": true, "session": id, "target": seq, "files": files}),
        text,
    );
    Ok(0)
}

// ---------------------------------------------------------------- restore, undo, journals

fn outcome_text(o: &RestoreOutcome) -> (Value, String) {
    // Each path shown so that names alike on screen are told apart; in the JSON, each in the
    // JSON path form (`{hex, lossy}` for a name that is not UTF-8).
    let list = |title: &str, items: Vec<String>| -> String {
        let mut s = format!("{title}:\n");
        if items.is_empty() {
            s.push_str("- none\n");
        }
        for i in items {
            s.push_str(&format!("- {i}\n"));
        }
        s
    };
    let skipped: Vec<&snapshot_store::RelPath> = o
        .skipped
        .iter()
        .map(|s| &s.path)
        .chain(o.uncovered.iter().map(|u| &u.path))
        .collect();
    let mut text = String::new();
    text.push_str(&list("Written", o.written.iter().map(shown).collect()));
    text.push_str(&list("Deleted", o.deleted.iter().map(shown).collect()));
    text.push_str(&list("Skipped", skipped.iter().map(|p| shown(p)).collect()));
    text.push_str(&list(
        "Failed",
        o.failed
            .iter()
            .map(|f| format!("{}: {}", shown(&f.path), safe(&f.error)))
            .collect(),
    ));
    let v = json!({
        "op": o.op_id, "state": o.state.to_string(),
        "written": o.written, "deleted": o.deleted, "skipped": skipped,
        "unchanged": o.unchanged,
        "failed": o.failed.iter().map(|f| json!({"path": f.path, "error": f.error})).collect::<Vec<_>>(),
    });
    (v, text)
}

/// The lines a restore's report gives the git repository: what the rewind did (`done`),
/// or why it was left (the preview `planned`).
fn git_text(done: Option<&rewind_engine::GitReport>, planned: &rewind_engine::GitReport) -> String {
    let mut out = String::new();
    match done {
        Some(r) if r.kept => out.push_str("Git: kept as it is (--keep-git)\n"),
        Some(r) => {
            out.push_str(&format!("Git: {}\n", safe(&r.summary)));
            for k in &r.keep_refs {
                out.push_str(&format!("  kept reachable: {}\n", safe(k)));
            }
            if let Some(e) = &r.error {
                out.push_str(&format!("  warning: the git step stopped: {}\n", safe(e)));
            }
        }
        None if planned.kept => out.push_str("Git: kept as it is (--keep-git)\n"),
        None => {
            if let Some(u) = &planned.untracked {
                out.push_str(&format!("Git: left as it is: {}\n", safe(u)));
            }
        }
    }
    out
}

/// [`git_text`] as JSON.
fn git_json(
    done: Option<&rewind_engine::GitReport>,
    planned: &rewind_engine::GitReport,
) -> serde_json::Value {
    match done {
        Some(r) if r.kept => json!({"kept": true, "untracked": planned.untracked}),
        Some(r) => {
            json!({"summary": r.summary, "flagged": r.flagged, "keepRefs": r.keep_refs, "error": r.error})
        }
        None => json!({"kept": planned.kept, "untracked": planned.untracked}),
    }
}

fn restore(
    ctx: &Ctx,
    id: &str,
    target: &str,
    only: &[String],
    keep: &[String],
    keep_git: bool,
    ws: Option<PathBuf>,
) -> Result<u8, Fail> {
    let store = ctx.writable_store()?;
    ctx.known_session(&store, id)?;
    let cwd = ctx.workspace(id, ws)?;
    let session = ctx.session(&store, id, &cwd)?;
    let seq = ctx.target(&session, id, target)?;
    let _hold = ctx.claim(&store, id)?;
    // The engine's rewind file half, as the plugin runs it: the plan narrowed by the store's
    // matcher and prepared (checks, rescue copies; nothing changed), the history entry
    // `started`, the journaled restore, the entry finished with its outcome and paths.
    let chain = ctx.logs.chain(id);
    let mut plan = ctx.plan(&session, id, seq)?;
    rewind_engine::select(&mut plan, only, keep).map_err(|e| match e.code {
        ErrorCode::BadSelection => Fail::new(
            Code::NotFound,
            format!(
                "`{}` matches no file the restore to @{seq} would change (see `dsh-rewind preview`); nothing was changed",
                safe(e.details["path"].as_str().unwrap_or_default())
            ),
        ),
        // A display form several files share (the message names their spellings), a `hex:`
        // spelling that is not hex.
        _ => engine_fail(e),
    })?;
    drop(session);
    let (lost, lost_text) = records_lost(ctx, &store, id)?;
    // What happens to the workspace's git repository (nothing when it is kept as it is).
    let git = {
        let key = ctx.history_key(id, &cwd)?;
        let engine = Engine::open(&ctx.home, engine_options());
        engine
            .session(id, Some(&cwd), key)
            .git_preview(seq, keep_git, &chain)
    };
    if let Some(refusal) = &git.refusal {
        return Err(Fail::new(
            Code::Refused,
            format!("{refusal} ({})", ErrorCode::GitInProgress),
        ));
    }
    if plan.actions.is_empty() && !git.changes {
        let text = if lost.is_empty() {
            format!(
                "Nothing to restore: the files of session {} already are as they were at @{seq}.\n",
                safe(id)
            )
        } else {
            format!(
                "Nothing to restore from the checkpoints of session {} that are left: none of the files they cover changed since @{seq}.\n{lost_text}",
                safe(id)
            )
        };
        emit(
            ctx,
            json!({"ok": true, "op": null, "changed": 0, "recordsLost": lost}),
            text,
        );
        return Ok(0);
    }
    let op = format!("cli-{}-{}", now_ms(), std::process::id());
    let key = ctx.history_key(id, &cwd)?;
    let target_text = ctx
        .logs
        .readable(id)
        .then(|| candidates(ctx, id).ok())
        .flatten()
        .and_then(|c| c.into_iter().find(|c| c.seq == seq))
        .map(|c| c.preview);
    let engine = Engine::open(&ctx.home, engine_options());
    let es = engine.session(id, Some(&cwd), key.clone());
    let request = RestoreRequest {
        target_seq: seq,
        op_id: op.clone(),
        ancestors: chain,
        only: only.to_vec(),
        keep: keep.to_vec(),
        not_covered: Vec::new(),
        keep_git,
    };
    es.prepare_restore(&request).map_err(engine_fail)?;
    // Never trims entries the host's (possibly larger) history limit keeps.
    let have = es.entries().map(|e| e.len()).unwrap_or(0);
    let start = Start {
        op_id: op.clone(),
        target_seq: seq,
        target_text,
        marker_id: None,
        fork_child: None,
    };
    if let Err(e) = es.begin(&start, history::DEFAULT_HISTORY_LIMIT.max(have + 1)) {
        es.discard_prepared(&op);
        return Err(engine_fail(e));
    }
    let spinner =
        (plan.actions.len() > BIG_RESTORE && std::io::stderr().is_terminal()).then(|| {
            let s = ProgressBar::new_spinner();
            s.set_message(format!("restoring {} files", plan.actions.len()));
            s.enable_steady_tick(Duration::from_millis(120));
            s
        });
    let result = es.restore_files(&request);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let restored = match result {
        Ok(r) => r,
        Err(e) => {
            let why = NotRestored {
                code: e.code.to_string(),
                message: e.message.clone(),
            };
            let _ = es.finish_not_restored(&op, &why);
            return Err(Fail::new(
                Code::Failed,
                format!("{} ({})", e.message, e.code),
            ));
        }
    };
    let outcome = &restored.outcome;
    let complete = outcome.failed.is_empty();
    let history_note = match &restored.not_recorded {
        None => format!(
            "Recorded in the rewind history of {} as {op}.\n",
            key.as_str()
        ),
        Some(e) => {
            format!("warning: the restore is done but not recorded in the history: {e}\n")
        }
    };
    let (v, body) = outcome_text(outcome);
    let git_done = restored.git.clone();
    let body = format!("{body}{}", git_text(git_done.as_ref(), &git));
    let text = format!(
        "Restored session {} to @{seq} (op {op}, {}).\n{body}{history_note}{lost_text}{}",
        safe(id),
        outcome.state,
        if complete {
            format!("Undo with: dsh-rewind undo {op}\n")
        } else {
            format!(
                "Some files failed: `dsh-rewind continue {op}` or `dsh-rewind rollback {op}`.\n"
            )
        }
    );
    emit(
        ctx,
        json!({"ok": complete, "session": id, "target": seq, "historyKey": key.as_str(), "outcome": v, "recordsLost": lost, "git": git_json(git_done.as_ref(), &git)}),
        text,
    );
    Ok(if complete { 0 } else { Code::Failed.exit() })
}

/// Finds the history entry of `op` in any partition.
fn find_entry(ctx: &Ctx, op: &str) -> Result<Option<(WorkspaceKey, Partition, Entry)>, Fail> {
    for (k, p) in ctx.partitions()? {
        if let Some(e) = p.find(op).cloned() {
            return Ok(Some((k, p, e)));
        }
    }
    Ok(None)
}

/// A refusal or fault of an engine step, as the tool reports it: the stable code in the message,
/// the exit code by kind (nothing was changed by a refusal).
fn engine_fail(e: EngineError) -> Fail {
    let f = engine_error(e);
    Fail::new(f.code, format!("{}; nothing was changed", f.message))
}

/// An engine error as the tool reports it: the stable code in the message, the exit code by kind.
fn engine_error(e: EngineError) -> Fail {
    let kind = match e.code {
        // A choice matching no file: as `restore --only/--keep` of a path no action matches.
        ErrorCode::UnknownEntry | ErrorCode::BadSelection | ErrorCode::NotPlanned => Code::NotFound,
        ErrorCode::BadRequest => Code::Usage,
        ErrorCode::StoreNewer => Code::Newer,
        ErrorCode::StoreCorrupt => Code::Corrupt,
        ErrorCode::Failed | ErrorCode::RestoreFailed | ErrorCode::UndoFailed => Code::Failed,
        _ => Code::Refused,
    };
    Fail::new(kind, format!("{} ({})", e.message, e.code))
}

fn undo(ctx: &Ctx, op: &str, ws: Option<PathBuf>, choices: Choices) -> Result<u8, Fail> {
    let store = ctx.writable_store()?;
    let Some((key, _, entry)) = find_entry(ctx, op)? else {
        return Err(Fail::new(
            Code::NotFound,
            format!(
                "no rewind with op `{}` in the history (see `dsh-rewind history`)",
                safe(op)
            ),
        ));
    };
    let id = entry.session_id.clone();
    let cwd = ctx.workspace(&id, ws)?;
    ctx.known_session(&store, &id)?;
    let _hold = ctx.claim(&store, &id)?;
    // The engine's undo: its rules, every file changed since decided (`--keep` / `--take`),
    // `undoStartedAt`, the journaled undo, `undoneAt`. The conversation is not touched.
    let engine = Engine::open(&ctx.home, engine_options());
    let es = engine.session(&id, Some(&cwd), key);
    let check = es.undo_check(op, &choices).map_err(engine_fail)?;
    es.undo_start(op, None).map_err(engine_fail)?;
    let done = es.undo_files(&check, &choices).map_err(engine_fail)?;
    let ok = done.files.ok();
    let note = match &done.not_recorded {
        None => String::new(),
        Some(e) => format!("warning: undone, but the history could not record it: {e}\n"),
    };
    let kept = if done.files.kept.is_empty() {
        String::new()
    } else {
        format!(
            "Kept as they are ({}): {}\n",
            done.files.kept.len(),
            done.files
                .kept
                .iter()
                .map(|p| shown_spelled(p))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let (v, body) = match &done.outcome {
        Some(o) => outcome_text(o),
        None => (
            json!(null),
            "No file to put back: the rewind changed none.\n".to_owned(),
        ),
    };
    let text = format!(
        "Undid {} in session {} (files only).\n{body}{kept}{note}",
        safe(op),
        safe(&id)
    );
    emit(
        ctx,
        json!({"ok": ok, "session": id, "outcome": v, "kept": done.files.kept.iter().map(|p| json_spelled(p)).collect::<Vec<_>>()}),
        text,
    );
    Ok(if ok { 0 } else { Code::Failed.exit() })
}

fn history(ctx: &Ctx, ws: Option<PathBuf>) -> Result<u8, Fail> {
    let want = match ws {
        Some(w) => Some(std::fs::canonicalize(&w).map_err(|e| {
            Fail::new(
                Code::NotFound,
                format!("workspace {}: {e}", safe(&w.to_string_lossy())),
            )
        })?),
        None => None,
    };
    let mut rows = Vec::new();
    let mut text = String::new();
    let mut all: Vec<(WorkspaceKey, Entry)> = Vec::new();
    for (k, p) in ctx.partitions()? {
        for e in p.newest_first() {
            all.push((k.clone(), e.clone()));
        }
    }
    all.sort_by(|a, b| {
        b.1.time
            .cmp(&a.1.time)
            .then_with(|| a.1.op_id.cmp(&b.1.op_id))
    });
    for (k, e) in all {
        let cwd = ctx.logs.cwd(&e.session_id);
        if let Some(w) = &want {
            let c = cwd
                .as_ref()
                .map(|c| std::fs::canonicalize(c).unwrap_or(c.clone()));
            if c.as_ref() != Some(w) {
                continue;
            }
        }
        text.push_str(&format!(
            "{}  {}  session {} → @{}  {:?}: {} written, {} deleted, {} skipped, {} failed{}\n    workspace: {}\n",
            time(e.time),
            safe(&e.op_id),
            safe(&e.session_id),
            e.target_seq,
            e.outcome,
            e.counts.restored,
            e.counts.deleted,
            e.counts.skipped,
            e.counts.failed,
            match e.undone_at {
                Some(t) => format!("  (undone {})", time(t)),
                None => String::new(),
            },
            cwd.as_ref()
                .map(|c| safe(&c.to_string_lossy()))
                .unwrap_or_else(|| format!("? ({})", k.as_str())),
        ));
        let git = git_line(ctx, &e);
        if let Some(g) = &git {
            text.push_str(&format!("    git: {}\n", safe(g)));
        }
        let mut v = serde_json::to_value(&e).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("partition".into(), json!(k.as_str()));
            m.insert("cwd".into(), json!(cwd));
            if let Some(g) = git {
                m.insert("git".into(), json!(g));
            }
        }
        rows.push(v);
    }
    if rows.is_empty() {
        text.push_str("No rewinds recorded.\n");
    }
    emit(ctx, json!({"ok": true, "entries": rows}), text);
    Ok(0)
}

/// What a rewind's git step did (what its undo did, once undone), read from its journal
/// `sessions/<id>/git/ops/<op>.json` without opening the store (docs/git.md).
fn git_line(ctx: &Ctx, e: &Entry) -> Option<String> {
    let dir = snapshot_store::encode_id(&e.session_id).ok()?;
    let op = snapshot_store::encode_id(&e.op_id).ok()?;
    let path = ctx
        .store_root()
        .join("sessions")
        .join(dir)
        .join("git")
        .join("ops")
        .join(format!("{op}.json"));
    let op: rewind_engine::GitOp = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    if op.v > rewind_engine::GIT_OP_VERSION {
        return None;
    }
    Some(if op.state == rewind_engine::GitOpState::Undone {
        op.plan.reversed().summary()
    } else {
        op.plan.summary()
    })
}

/// A session handle for reading journals: the workspace when known, else the store
/// root (journal status never touches the workspace).
fn reading_session(ctx: &Ctx, store: &Store, id: &str) -> Result<Session, Fail> {
    let cwd = ctx
        .logs
        .cwd(id)
        .filter(|c| c.is_dir())
        .unwrap_or_else(|| ctx.store_root());
    Ok(store.session(id, &cwd)?)
}

fn restores(ctx: &Ctx) -> Result<u8, Fail> {
    let store = ctx.store()?;
    let mut rows = Vec::new();
    let mut text = String::new();
    for id in store.list_sessions()? {
        let s = reading_session(ctx, &store, &id)?;
        for st in s.reconcile_restores()? {
            text.push_str(&format!(
                "{}  session {} → @{}: {} of {} applied, {} failed, {} pending{}\n",
                safe(&st.op_id),
                safe(&id),
                st.target_seq,
                st.done,
                st.actions,
                st.failed,
                st.pending,
                if st.rollback_started {
                    " (rollback started)"
                } else {
                    ""
                },
            ));
            rows.push(json!({"session": id, "status": st}));
        }
    }
    if rows.is_empty() {
        text.push_str("No interrupted restores.\n");
    } else {
        text.push_str("Finish one with `dsh-rewind continue <op>`, or undo it with `dsh-rewind rollback <op>`.\n");
    }
    emit(ctx, json!({"ok": true, "restores": rows}), text);
    Ok(0)
}

fn finish(ctx: &Ctx, op: &str, ws: Option<PathBuf>, rollback: bool) -> Result<u8, Fail> {
    let store = ctx.writable_store()?;
    let mut owner = None;
    for id in store.list_sessions()? {
        let s = reading_session(ctx, &store, &id)?;
        if s.restore_status(op).is_ok() {
            owner = Some(id);
            break;
        }
    }
    let Some(id) = owner else {
        return Err(Fail::new(
            Code::NotFound,
            format!(
                "no restore `{}` in any session (see `dsh-rewind restores`)",
                safe(op)
            ),
        ));
    };
    let cwd = ctx.workspace(&id, ws)?;
    let _hold = ctx.claim(&store, &id)?;
    let entry = find_entry(ctx, op)?;
    let key = match &entry {
        Some((k, _, _)) => k.clone(),
        None => ctx.history_key(&id, &cwd)?,
    };
    // The engine's recovery: an interrupted rewind (or undo) is settled as a whole; a journal
    // left open by a rewind that is over is finished or rolled back and its entry updated.
    let engine = Engine::open(&ctx.home, engine_options());
    let es = engine.session(&id, Some(&cwd), key);
    let how = if rollback {
        Resolution::Rollback
    } else {
        Resolution::Continue
    };
    // The engine chooses how the entry is settled (an interrupted rewind as a whole, else
    // through its journal), as for the plugin's `--continue` / `--rollback`.
    let r = es
        .resolve_entry(op, how, &ctx.logs.chain(&id))
        .map_err(engine_fail)?;
    let o = &r.outcome;
    let ok = o.failed.is_empty();
    let note = if entry.is_some() && r.entry_outcome.is_empty() {
        "warning: the history could not record it\n".to_owned()
    } else {
        String::new()
    };
    let (v, body) = outcome_text(o);
    let text = format!(
        "{} {} in session {} ({}).\n{body}{note}",
        if rollback { "Rolled back" } else { "Continued" },
        safe(op),
        safe(&id),
        o.state
    );
    emit(ctx, json!({"ok": ok, "session": id, "outcome": v}), text);
    Ok(if ok { 0 } else { Code::Failed.exit() })
}

// ---------------------------------------------------------------- du, gc, verify, repair

fn du(ctx: &Ctx) -> Result<u8, Fail> {
    let store = ctx.store()?;
    let inv = store.inventory()?;
    // The figures are the engine's (the plugin's storage view shows the same ones).
    let st = rewind_engine::storage_of(&inv, &[], &[], inv.sessions.len());
    let records: u64 = inv.sessions.iter().map(|s| s.record_bytes).sum();
    let indexes: u64 = inv.workspaces.iter().map(|w| w.index_bytes).sum();
    let mut text = format!(
        "Store {}\n  total        {}\n  blobs        {} in {} file(s)\n  records      {} in {} session(s)\n  scan indexes {} in {} workspace(s)\n  unreferenced {} in {} blob(s) (freed by `dsh-rewind gc --apply`)\n",
        safe(&ctx.store_root().to_string_lossy()),
        bytes(st.total_bytes),
        bytes(inv.blob_bytes),
        inv.blobs,
        bytes(records),
        st.sessions,
        bytes(indexes),
        inv.workspaces.len(),
        bytes(st.unreferenced_bytes),
        inv.unreferenced_blobs,
    );
    text.push_str(&format!(
        "  logical      {}\n  on disk      {} (blocks; ratio {:.2}; {} blob(s) packed, `dsh-rewind compact` packs the rest)\n",
        bytes(st.logical_bytes),
        bytes(st.disk_bytes),
        st.ratio(),
        st.packed_blobs,
    ));
    if !st.biggest.is_empty() {
        text.push_str("Sessions, biggest first (own = freed if the session went):\n");
    }
    for s in &st.biggest {
        text.push_str(&format!(
            "  {}  {}  (own {})\n",
            safe(&s.session_id),
            bytes(s.bytes),
            bytes(s.own_bytes)
        ));
    }
    for p in &inv.problems {
        text.push_str(&format!(
            "warning: {} (the sizes above leave it out)\n",
            safe(&p.to_string())
        ));
    }
    let ok = inv.problems.is_empty();
    emit(
        ctx,
        json!({"ok": ok, "totalBytes": st.total_bytes, "recordBytes": records, "indexBytes": indexes, "logicalBytes": st.logical_bytes, "diskBytes": st.disk_bytes, "ratio": st.ratio(), "inventory": inv}),
        text,
    );
    Ok(if ok { 0 } else { Code::Corrupt.exit() })
}

fn compact(ctx: &Ctx) -> Result<u8, Fail> {
    let store = ctx.writable_store()?;
    let before = store.inventory()?;
    let r = store.compact().map_err(|e| {
        let code = match e {
            snapshot_store::CompactError::NewerStore(_) => Code::Newer,
            snapshot_store::CompactError::Corrupt(_) => Code::Corrupt,
            _ => Code::Failed,
        };
        Fail::new(code, e.to_string())
    })?;
    let after = store.inventory()?;
    let mut text = format!(
        "Packed {} blob(s) ({}) into {} pack(s) of {}.\nOn disk: {} before, {} after (logical {}).\n",
        r.blobs_packed,
        bytes(r.bytes_packed),
        r.packs_written,
        bytes(r.pack_bytes),
        bytes(before.disk_bytes),
        bytes(after.disk_bytes),
        bytes(after.logical_bytes()),
    );
    if r.duplicates_removed > 0 {
        text.push_str(&format!(
            "Removed {} loose copy(ies) of packed blobs.\n",
            r.duplicates_removed
        ));
    }
    if r.large_left > 0 {
        text.push_str(&format!(
            "Left {} blob(s) over {} loose.\n",
            r.large_left,
            bytes(snapshot_store::PACK_MEMBER_MAX)
        ));
    }
    for sha in &r.corrupt_left {
        text.push_str(&format!(
            "warning: blobs/{sha} does not hash to its name; left loose (see `dsh-rewind verify`)\n"
        ));
    }
    let ok = r.corrupt_left.is_empty();
    emit(
        ctx,
        json!({"ok": ok, "report": r, "diskBytesBefore": before.disk_bytes, "diskBytesAfter": after.disk_bytes, "logicalBytes": after.logical_bytes()}),
        text,
    );
    Ok(if ok { 0 } else { Code::Corrupt.exit() })
}

fn gc(ctx: &Ctx, max_age_days: u32, max_size: Option<u64>, apply: bool) -> Result<u8, Fail> {
    let store = if apply {
        ctx.writable_store()?
    } else {
        ctx.store()?
    };
    let inv = store.inventory()?;
    // Sessions a live host holds, and the fork ancestors they read from, are never swept.
    let mut active = BTreeSet::new();
    let mut pins = Pins::none();
    for s in &inv.sessions {
        if store.session_is_held(&s.session_id)? {
            active.insert(s.session_id.clone());
            for l in ctx.logs.chain(&s.session_id) {
                pins.insert(l.session_id);
            }
        }
    }
    // Sessions an undo or redo listed in the rewind history needs are never swept either.
    let history = HistoryStore::open(ctx.home.join(rewind_engine::HISTORY_DIR))
        .map_err(|e| Fail::new(Code::Failed, e.to_string()))?;
    for id in rewind_engine::undo_pins_of(&history)
        .map_err(|e| Fail::new(Code::Failed, format!("rewind history: {}", e.message)))?
        .iter()
    {
        pins.insert(id.clone());
    }
    let cleaner = Cleaner::open_with(&ctx.home, ctx.store_root())
        .map_err(|e| Fail::new(Code::Failed, e.to_string()))?;
    let policy = MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days,
    });
    let sweep_fail = |e: cleanup::SweepError| {
        let code = match e {
            cleanup::SweepError::NewerStore { .. } => Code::Newer,
            cleanup::SweepError::CorruptStore { .. } => Code::Corrupt,
            _ => Code::Failed,
        };
        Fail::new(code, e.to_string())
    };
    let mut req = SweepRequest::dry_run(Scope::Idle)
        .with_active(active.iter().cloned())
        .with_pins(pins.clone());
    req.apply = apply;
    let age = cleaner.sweep(&policy, &req).map_err(sweep_fail)?;
    let mut removed: Vec<(String, u64, &'static str)> = age
        .items
        .iter()
        .map(|i| (i.session_id.clone(), i.bytes, "idle"))
        .collect();
    let mut failed: Vec<String> = age
        .failed
        .iter()
        .map(|f| format!("{}: {}", f.session_id, f.detail))
        .collect();
    let age_ids: Vec<String> = removed.iter().map(|r| r.0.clone()).collect();
    // By size: the oldest idle sessions next, until the store fits (same keep rules).
    let mut over_kept = Vec::new();
    let mut estimate = None;
    let mut blobs_removed = None;
    let mut workspaces_removed = None;
    let records: u64 = inv.sessions.iter().map(|s| s.record_bytes).sum();
    let age_freed: u64 = inv
        .sessions
        .iter()
        .filter(|s| age_ids.contains(&s.session_id))
        .map(|s| s.record_bytes + s.exclusive_blob_bytes)
        .sum();
    let mut freed_estimate = age_freed + inv.unreferenced_bytes;
    let total_before = records + inv.blob_bytes;
    if let Some(max) = max_size {
        let pb = progress_bar(1, "sizing sessions");
        let q = cleaner
            .quota_sweep(&policy, &store, max, &req, &age_ids)
            .map_err(sweep_fail)?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        for i in &q.items {
            removed.push((i.session_id.clone(), i.freed, "size"));
        }
        over_kept.extend(q.kept.iter().map(|k| k.session_id.clone()));
        failed.extend(
            q.failed
                .iter()
                .map(|f| format!("{}: {}", f.session_id, f.detail)),
        );
        freed_estimate = total_before.saturating_sub(q.bytes_after);
        estimate = Some(q.bytes_after);
        if apply {
            blobs_removed = Some(q.blobs_removed);
            workspaces_removed = Some(q.workspaces_removed);
        }
    }
    if apply && blobs_removed.is_none() {
        let pb = progress_bar(1, "collecting unreferenced blobs");
        let r = store.collect_garbage()?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        blobs_removed = Some(r.blobs_removed);
        workspaces_removed = Some(r.workspaces_removed);
    }
    let mut text = format!(
        "{} (idle cutoff {max_age_days} day(s){}):\n",
        if apply {
            "Removed"
        } else {
            "Would remove (dry run; --apply to remove)"
        },
        max_size
            .map(|m| format!(", size quota {}", bytes(m)))
            .unwrap_or_default()
    );
    if removed.is_empty() {
        text.push_str("- no session\n");
    }
    for (id, b, why) in &removed {
        text.push_str(&format!("- {}  {}  ({why})\n", safe(id), bytes(*b)));
    }
    for k in &age.kept {
        if let KeepReason::OpenJournal { op } = &k.reason {
            text.push_str(&format!(
                "kept {} (interrupted restore {})\n",
                safe(&k.session_id),
                safe(op)
            ));
        }
    }
    if let (Some(max), Some(estimate)) = (max_size, estimate) {
        if estimate > max {
            text.push_str(&format!(
                "warning: still about {} after removing every idle session the rules allow (over the quota of {}); kept: {}\n",
                bytes(estimate),
                bytes(max),
                over_kept.join(", ")
            ));
        }
    }
    for f in &failed {
        text.push_str(&format!("failed: {}\n", safe(f)));
    }
    if let Some(n) = workspaces_removed.filter(|n| *n > 0) {
        text.push_str(&format!(
            "{n} workspace scan state(s) no session uses any more removed.\n"
        ));
    }
    match blobs_removed {
        Some(n) => text.push_str(&format!(
            "{n} unreferenced blob(s) removed; about {} freed.\n",
            bytes(freed_estimate)
        )),
        None => text.push_str(&format!(
            "About {} would be freed.\n",
            bytes(freed_estimate)
        )),
    }
    emit(
        ctx,
        json!({
            "ok": failed.is_empty(), "applied": apply, "maxAgeDays": max_age_days, "maxSize": max_size,
            "removed": removed.iter().map(|(id, b, why)| json!({"session": id, "bytes": b, "rule": why})).collect::<Vec<_>>(),
            "failed": failed, "freedBytesEstimate": freed_estimate, "blobsRemoved": blobs_removed,
            "workspacesRemoved": workspaces_removed, "estimatedBytesAfter": estimate,
        }),
        text,
    );
    Ok(if failed.is_empty() {
        0
    } else {
        Code::Failed.exit()
    })
}

fn verify_report(store: &Store) -> Result<snapshot_store::VerifyReport, Fail> {
    let pb = progress_bar(0, "verifying blobs");
    let mut tick = |done: u64, total: u64| {
        if let Some(pb) = &pb {
            pb.set_length(total);
            pb.set_position(done);
        }
    };
    let r = store.verify(&mut tick)?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    Ok(r)
}

fn verify(ctx: &Ctx) -> Result<u8, Fail> {
    let store = ctx.store()?;
    if let Some(n) = store.newer_version() {
        return Err(Fail::new(
            Code::Newer,
            format!("{n}; this dsh-rewind cannot judge it"),
        ));
    }
    let r = verify_report(&store)?;
    let mut text = format!(
        "Checked {} record(s) and {} blob(s) ({}).\n",
        r.records,
        r.blobs,
        bytes(r.blob_bytes)
    );
    for p in &r.problems {
        text.push_str(&format!("- {}\n", safe(&p.to_string())));
    }
    for w in &r.warnings {
        text.push_str(&format!("- warning: {}\n", safe(&w.to_string())));
    }
    if r.problems.is_empty() && r.warnings.is_empty() {
        text.push_str("No problems found.\n");
    } else if r.problems.is_empty() {
        text.push_str(&format!(
            "No damage found; {} warning(s) above (not damage, but bytes or records no longer read).\n",
            r.warnings.len()
        ));
    } else {
        text.push_str(&format!(
            "{} problem(s). `dsh-rewind repair` moves corrupt files into quarantine/ (nothing is deleted).\n",
            r.problems.len()
        ));
    }
    let newer = r
        .problems
        .iter()
        .any(|p| matches!(p, snapshot_store::Problem::NewerRecord { .. }));
    let only_newer = newer
        && r.problems
            .iter()
            .all(|p| matches!(p, snapshot_store::Problem::NewerRecord { .. }));
    emit(ctx, json!({"ok": r.problems.is_empty(), "report": r}), text);
    Ok(if r.problems.is_empty() {
        0
    } else if only_newer {
        Code::Newer.exit()
    } else {
        Code::Corrupt.exit()
    })
}

fn repair(ctx: &Ctx) -> Result<u8, Fail> {
    let store = ctx.writable_store()?;
    let r = verify_report(&store)?;
    // Records of a session a live host holds are not moved under it.
    let mut holds = Vec::new();
    for p in &r.problems {
        if let snapshot_store::Problem::CorruptRecord { path, .. } = p {
            let mut comps = Path::new(path).iter();
            if comps.next().is_some_and(|c| c == "sessions") {
                if let Some(id) = comps
                    .next()
                    .and_then(|c| c.to_str())
                    .and_then(snapshot_store::decode_id)
                {
                    if !holds.iter().any(|(i, _): &(String, SessionHold)| *i == id) {
                        let h = ctx.claim(&store, &id)?;
                        holds.push((id, h));
                    }
                }
            }
        }
    }
    let q = store.quarantine(&r)?;
    let mut text = String::new();
    match &q.dir {
        Some(d) => {
            text.push_str(&format!(
                "Moved {} file(s) into {}:\n",
                q.moved.len(),
                safe(d)
            ));
            for m in &q.moved {
                text.push_str(&format!("- {}\n", safe(m)));
            }
            if !q.kept_blobs.is_empty() {
                text.push_str(&format!(
                    "{} blob(s) named by those records are kept beside them.\n",
                    q.kept_blobs.len()
                ));
            }
        }
        None => text.push_str("Nothing to quarantine.\n"),
    }
    for l in &q.records_lost {
        text.push_str(&format!(
            "records of session {} lost: {} byte(s) of its records.log from offset {} ({}); {} kept in the session, all of it in {}; noted in the session's {}\n",
            safe(&l.session_id),
            l.lost_bytes,
            l.kept_bytes,
            safe(&l.detail),
            if l.kept_bytes > 0 {
                format!("the {} readable byte(s) before it", l.kept_bytes)
            } else {
                "nothing".to_owned()
            },
            safe(&l.quarantined),
            snapshot_store::LOST_NOTE,
        ));
    }
    for g in &q.gone {
        text.push_str(&format!("no longer corrupt: {}\n", safe(g)));
    }
    for p in &q.left {
        text.push_str(&format!("left as is: {}\n", safe(&p.to_string())));
    }
    emit(ctx, json!({"ok": q.left.is_empty(), "quarantine": q}), text);
    Ok(if q.left.is_empty() {
        0
    } else {
        Code::Corrupt.exit()
    })
}
