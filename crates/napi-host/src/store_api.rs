//! Snapshot-store bindings (async: every call touches the disk).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Env, JsValue, ToNapiValue, TypeName, Unknown};
use napi_derive::napi;

use snapshot_store::{CaptureOutcome, PruneOptions, ScanPhase, ScanRequest, Session, SideState};

use rewind_engine::{Engine, EngineOptions};

use crate::error::BindingError;
use crate::task::Job;
use crate::types::{
    BindingCaptureOutcome, BindingChainLink, BindingDiffSide, BindingFailedPath, BindingFileDiff,
    BindingNotCovered, BindingPreview, BindingPreviewFile, BindingRestoreStatus,
    BindingScanRefusal, BindingScanReport, BindingScanRequest, BindingSkippedPath,
    JournalState as BindingJournalState, js_number, seq_from_js,
};

/// The checkpoint store under one root (`<dsh home>/rewind-snapshots`), through the engine's
/// cache of session handles (one per session id and cwd; shared with [`crate::engine_api`]).
/// The per-file cap follows the value passed to `capture` / `recheck` (the host's live
/// setting): a different cap reopens the store.
#[napi]
pub struct BindingStore {
    engine: Arc<Engine>,
}

impl BindingStore {
    /// The store of `engine`.
    pub(crate) fn of(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    fn handle(&self) -> Handle {
        Handle {
            engine: Arc::clone(&self.engine),
        }
    }
}

fn cap_from(value: f64) -> Result<u64, BindingError> {
    seq_from_js(value, "maxFileBytes")
}

/// What a job needs: cheap to clone into a worker thread.
#[derive(Clone)]
struct Handle {
    engine: Arc<Engine>,
}

/// A call whose file is at most this large is captured on the JavaScript thread when
/// nothing is in the way (see [`BindingStore::capture`]); so is a larger file whose capture
/// reads none of its bytes (over the store's per-file cap, or stored by the workspace scan and
/// unchanged since).
const INLINE_CAPTURE_BYTES: u64 = 64 * 1024;
/// A commit of at most this many staged paths runs on the JavaScript thread when nothing
/// is in the way.
const INLINE_COMMIT_PATHS: usize = 64;

impl Handle {
    /// The cached handle of a session, when one is open with this cap and no other call is
    /// opening or replacing handles right now (never waits).
    fn cached(&self, session_id: &str, cwd: &str, cap: Option<u64>) -> Option<Arc<Session>> {
        self.engine.cached_files(session_id, Path::new(cwd), cap)
    }

    fn session(
        &self,
        session_id: &str,
        cwd: &str,
        cap: Option<u64>,
    ) -> Result<Arc<Session>, BindingError> {
        Ok(self.engine.files(session_id, Path::new(cwd), cap)?)
    }
}

/// A promise already settled with `result`: resolved in place (a promise created natively and
/// resolved before it is returned; no thread hop), or rejected through the same async path as a
/// failed job (the rich error).
fn settled<T>(env: &Env, result: Result<T, BindingError>) -> napi::Result<Unknown<'_>>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    match result {
        Ok(value) => resolved(env, value),
        Err(error) => Ok(env
            .spawn(Job::new(move || Err::<T, _>(error)))?
            .promise_object()
            .to_unknown()),
    }
}

/// A promise resolved with `value`: what `Promise.resolve(value)` returns for the values these
/// calls resolve with (plain objects and `undefined`), without looking `Promise` up on the global
/// object and calling into JavaScript. When no promise can be created, the thread pool's.
fn resolved<T>(env: &Env, value: T) -> napi::Result<Unknown<'_>>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    use napi::sys;
    let raw = env.raw();
    let mut deferred: sys::napi_deferred = std::ptr::null_mut();
    let mut promise: sys::napi_value = std::ptr::null_mut();
    // SAFETY: `raw` is the live environment of this call on the JavaScript thread; both out
    // pointers are valid for writes.
    let status = unsafe { sys::napi_create_promise(raw, &mut deferred, &mut promise) };
    if status != sys::Status::napi_ok {
        return queued(env, Job::new(move || Ok(value)));
    }
    // SAFETY: as above; `value` is converted in the environment it is returned to.
    let converted = unsafe { T::to_napi_value(raw, value) };
    let settle = |with: sys::napi_value| -> napi::Result<()> {
        // SAFETY: `deferred` came from `napi_create_promise` above and is settled exactly once
        // (this closure runs once); `with` is a value of this environment.
        let status = unsafe { sys::napi_resolve_deferred(raw, deferred, with) };
        if status == sys::Status::napi_ok {
            Ok(())
        } else {
            Err(napi::Error::new(
                napi::Status::from(status),
                "could not resolve the call's promise",
            ))
        }
    };
    match converted {
        Ok(v) => {
            settle(v)?;
            // SAFETY: `promise` is the promise object created above, in this environment.
            Ok(unsafe { Unknown::from_raw_unchecked(raw, promise) })
        }
        Err(e) => {
            // The value cannot reach JavaScript: the call throws, as when `Promise.resolve`
            // was called with it. The unreachable promise is settled so its deferred is freed
            // (resolved, not rejected: no unhandled rejection).
            let mut undefined: sys::napi_value = std::ptr::null_mut();
            // SAFETY: live environment, valid out pointer.
            if unsafe { sys::napi_get_undefined(raw, &mut undefined) } == sys::Status::napi_ok {
                let _ = settle(undefined);
            }
            Err(e)
        }
    }
}

/// Runs `job` on the libuv thread pool; its promise.
fn queued<T>(env: &Env, job: Job<T>) -> napi::Result<Unknown<'_>>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    Ok(env.spawn(job)?.promise_object().to_unknown())
}

/// A capture's arguments, as the JavaScript call passes them (`anchorSeq` checked).
struct CaptureCall {
    session_id: String,
    cwd: String,
    call_id: String,
    path: String,
    max_file_bytes: f64,
    anchor: Option<u64>,
}

impl CaptureCall {
    fn new(
        env: &Env,
        session_id: String,
        cwd: String,
        call_id: String,
        path: String,
        max_file_bytes: f64,
        anchor_seq: Option<f64>,
    ) -> napi::Result<Self> {
        let anchor = match anchor_seq {
            Some(a) => Some(seq_from_js(a, "anchorSeq").map_err(|e| e.into_napi(env))?),
            None => None,
        };
        Ok(Self {
            session_id,
            cwd,
            call_id,
            path,
            max_file_bytes,
            anchor,
        })
    }

    /// The capture on the calling thread, when nothing is in the way (see
    /// [`BindingStore::capture`]); `None` (nothing done) otherwise.
    fn here(
        &self,
        engine: &Engine,
    ) -> Option<Result<CaptureOutcome, snapshot_store::CaptureError>> {
        let cap = cap_from(self.max_file_bytes).ok()?;
        let session = engine.cached_files(&self.session_id, Path::new(&self.cwd), Some(cap))?;
        let p = Path::new(&self.path);
        match self.anchor {
            Some(a) => session.try_capture_before_at(&self.call_id, p, a, INLINE_CAPTURE_BYTES),
            None => session.try_capture_before(&self.call_id, p, INLINE_CAPTURE_BYTES),
        }
    }

    /// The capture on the thread pool, its outcome mapped by `then`.
    fn job<T: Send + 'static>(self, h: Handle, then: fn(CaptureOutcome) -> T) -> Job<T> {
        Job::new(move || {
            let session = h.session(
                &self.session_id,
                &self.cwd,
                Some(cap_from(self.max_file_bytes)?),
            )?;
            let p = Path::new(&self.path);
            Ok(then(match self.anchor {
                Some(a) => session.capture_before_at(&self.call_id, p, a)?,
                None => session.capture_before(&self.call_id, p)?,
            }))
        })
    }
}

/// A call done on the JavaScript thread: `undefined`, or the error thrown there.
fn done_here(env: &Env, result: Result<(), BindingError>) -> napi::Result<Unknown<'_>> {
    match result {
        Ok(()) => {
            let mut undefined: napi::sys::napi_value = std::ptr::null_mut();
            // SAFETY: `env` is the live environment of this call on the JavaScript thread; the
            // out pointer is valid for writes.
            let status = unsafe { napi::sys::napi_get_undefined(env.raw(), &mut undefined) };
            if status != napi::sys::Status::napi_ok {
                return Err(napi::Error::new(
                    napi::Status::from(status),
                    "could not return undefined",
                ));
            }
            // SAFETY: `undefined` is a value of this environment.
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), undefined) })
        }
        Err(e) => Err(e.into_napi(env)),
    }
}

fn capture_outcome(outcome: CaptureOutcome) -> BindingCaptureOutcome {
    match outcome {
        CaptureOutcome::Captured { path, .. } => BindingCaptureOutcome {
            kind: "captured".into(),
            path: path.spelling(),
            reason: None,
        },
        CaptureOutcome::Absent { path } => BindingCaptureOutcome {
            kind: "absent".into(),
            path: path.spelling(),
            reason: None,
        },
        CaptureOutcome::Uncovered { path, .. } => BindingCaptureOutcome {
            kind: "uncovered".into(),
            path: path.spelling(),
            reason: None,
        },
        CaptureOutcome::Skipped { path, reason } => BindingCaptureOutcome {
            kind: "skipped".into(),
            path,
            reason: Some(reason.to_string()),
        },
        CaptureOutcome::AlreadyStaged { path } => BindingCaptureOutcome {
            kind: "already-staged".into(),
            path: path.spelling(),
            reason: None,
        },
        CaptureOutcome::AlreadyRecorded { path } => BindingCaptureOutcome {
            kind: "already-recorded".into(),
            path: path.spelling(),
            reason: None,
        },
    }
}

fn diff_side(s: &SideState) -> BindingDiffSide {
    let mut side = BindingDiffSide {
        state: String::new(),
        size: None,
        lines: None,
        sha256: None,
        message: None,
    };
    side.state = match s {
        SideState::Absent => "absent",
        SideState::Text { size, lines } => {
            side.size = Some(*size as f64);
            side.lines = Some(*lines as f64);
            "text"
        }
        SideState::Binary { size, sha256 } => {
            side.size = Some(*size as f64);
            side.sha256 = Some(sha256.clone());
            "binary"
        }
        SideState::TooLarge { size } => {
            side.size = Some(*size as f64);
            "too-large"
        }
        SideState::TooManyLines { size, lines } => {
            side.size = Some(*size as f64);
            side.lines = Some(*lines as f64);
            "too-many-lines"
        }
        SideState::NotRegular => "not-regular",
        SideState::Unreadable { message } => {
            side.message = Some(message.clone());
            "unreadable"
        }
        SideState::MissingBackup { sha256 } => {
            side.sha256 = Some(sha256.clone());
            "missing-backup"
        }
        SideState::CorruptBackup { sha256 } => {
            side.sha256 = Some(sha256.clone());
            "corrupt-backup"
        }
    }
    .into();
    side
}

fn not_covered(list: &[snapshot_store::NotCovered]) -> Vec<BindingNotCovered> {
    list.iter()
        .map(|n| BindingNotCovered {
            path: n.path.spelling(),
            reason: n.reason.clone(),
        })
        .collect()
}

/// Paths as they cross to the host: each its exact spelling (`hex:…` for a name that is not
/// valid UTF-8; see `RelPath::spelling`).
fn spellings(paths: &[snapshot_store::RelPath]) -> Vec<String> {
    paths.iter().map(|p| p.spelling()).collect()
}

/// The core request of a binding scan request (validated).
fn scan_request(r: &BindingScanRequest) -> Result<ScanRequest, BindingError> {
    let phase = ScanPhase::parse(&r.phase).ok_or_else(|| {
        BindingError::bad_request(format!(
            "phase must be 'before', 'after' or 'boundary', got `{}`",
            r.phase
        ))
    })?;
    let mut req = ScanRequest::new(phase, seq_from_js(r.anchor_seq, "anchorSeq")?);
    req.call_id = r.call_id.clone();
    req.ok = r.ok.unwrap_or(true);
    req.max_baseline_bytes = seq_from_js(r.max_baseline_bytes, "maxBaselineBytes")?;
    req.max_files = seq_from_js(r.max_files, "maxFiles")?;
    Ok(req)
}

#[napi]
impl BindingStore {
    /// Opens (creating when missing) the store at `root` with the default per-file cap. A store
    /// written by a newer build opens read-only: see [`BindingStore::newer_version`]. (The
    /// plugin opens the store through `BindingEngine.open(dshHome).store()`.)
    #[napi(factory)]
    pub fn open(env: Env, root: String) -> napi::Result<Self> {
        let root = PathBuf::from(root);
        let history = root
            .parent()
            .unwrap_or(Path::new("."))
            .join(rewind_engine::HISTORY_DIR);
        let engine = Engine::open_at(root, history, EngineOptions::default());
        if let Some(e) = engine.store_error() {
            return Err(BindingError::from(e).into_napi(&env));
        }
        Ok(Self::of(engine))
    }

    /// Drops the cached handles of a session (after its snapshot directory was swept away), so
    /// the next call starts from what is on disk.
    #[napi]
    pub fn forget(&self, session_id: String) {
        self.engine.forget(&session_id);
    }

    /// `null` when this build understands the store; otherwise why it refuses to write or restore.
    #[napi]
    pub fn newer_version(&self) -> Option<String> {
        self.engine.newer_version()
    }

    /// Records the before-state of `path` (absolute, inside `cwd`) for tool call `call_id`.
    ///
    /// Runs on the JavaScript thread when the session's handle is open, the file is small
    /// (at most 64 KiB) and no lock is held by anyone else — the work is then shorter than a
    /// hop to the thread pool and back; otherwise on the thread pool. The promise is the same.
    /// `anchorSeq`: the anchor the call's commit will name (see `commit`).
    #[napi(ts_return_type = "Promise<BindingCaptureOutcome>")]
    #[allow(clippy::too_many_arguments)] // the JavaScript call's arguments, in order
    pub fn capture<'env>(
        &self,
        env: &'env Env,
        session_id: String,
        cwd: String,
        call_id: String,
        path: String,
        max_file_bytes: f64,
        anchor_seq: Option<f64>,
    ) -> napi::Result<Unknown<'env>> {
        let call = CaptureCall::new(
            env,
            session_id,
            cwd,
            call_id,
            path,
            max_file_bytes,
            anchor_seq,
        )?;
        if let Some(result) = call.here(&self.engine) {
            return settled(env, result.map(capture_outcome).map_err(Into::into));
        }
        queued(env, call.job(self.handle(), capture_outcome))
    }

    /// `capture` for a caller that needs no outcome (the host plugin, on every write-tool
    /// call): `undefined` when the capture was made on the JavaScript thread (it throws there
    /// when it failed), else the promise of the thread pool's work. No promise and no outcome
    /// object are made when none is needed.
    #[napi(ts_return_type = "Promise<void> | undefined")]
    #[allow(clippy::too_many_arguments)] // the JavaScript call's arguments, in order
    pub fn capture_now<'env>(
        &self,
        env: &'env Env,
        session_id: String,
        cwd: String,
        call_id: String,
        path: String,
        max_file_bytes: f64,
        anchor_seq: Option<f64>,
    ) -> napi::Result<Unknown<'env>> {
        let call = CaptureCall::new(
            env,
            session_id,
            cwd,
            call_id,
            path,
            max_file_bytes,
            anchor_seq,
        )?;
        if let Some(result) = call.here(&self.engine) {
            return done_here(env, result.map(drop).map_err(Into::into));
        }
        queued(env, call.job(self.handle(), drop))
    }

    /// Commits (`ok`) or drops the capture of `call_id` into the group of `anchor_seq`
    /// (on the JavaScript thread when nothing is in the way, as `capture`). A call
    /// captured with this anchor is committed without a write of its own: its records
    /// join the session's next write (or [`BindingStore::flush`]).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit<'env>(
        &self,
        env: &'env Env,
        session_id: String,
        cwd: String,
        call_id: String,
        anchor_seq: f64,
        ok: bool,
    ) -> napi::Result<Unknown<'env>> {
        if let Some(result) = self.commit_here(&session_id, &cwd, &call_id, anchor_seq, ok) {
            return settled(env, result.map(drop).map_err(Into::into));
        }
        queued(
            env,
            self.commit_job(session_id, cwd, call_id, anchor_seq, ok),
        )
    }

    /// `commit` as `captureNow`: `undefined` when the commit was made on the JavaScript thread
    /// (it throws there when it failed), else the promise of the thread pool's work.
    #[napi(ts_return_type = "Promise<void> | undefined")]
    pub fn commit_now<'env>(
        &self,
        env: &'env Env,
        session_id: String,
        cwd: String,
        call_id: String,
        anchor_seq: f64,
        ok: bool,
    ) -> napi::Result<Unknown<'env>> {
        if let Some(result) = self.commit_here(&session_id, &cwd, &call_id, anchor_seq, ok) {
            return done_here(env, result.map(drop).map_err(Into::into));
        }
        queued(
            env,
            self.commit_job(session_id, cwd, call_id, anchor_seq, ok),
        )
    }

    /// The commit on the calling thread, when nothing is in the way (see `commit`).
    fn commit_here(
        &self,
        session_id: &str,
        cwd: &str,
        call_id: &str,
        anchor_seq: f64,
        ok: bool,
    ) -> Option<Result<snapshot_store::CommitOutcome, snapshot_store::CommitError>> {
        let anchor = seq_from_js(anchor_seq, "anchorSeq").ok()?;
        let session = self.engine.cached_files(session_id, Path::new(cwd), None)?;
        session.try_commit(call_id, anchor, ok, INLINE_COMMIT_PATHS)
    }

    /// The commit on the thread pool.
    fn commit_job(
        &self,
        session_id: String,
        cwd: String,
        call_id: String,
        anchor_seq: f64,
        ok: bool,
    ) -> Job<()> {
        let h = self.handle();
        Job::new(move || {
            let anchor = seq_from_js(anchor_seq, "anchorSeq")?;
            h.session(&session_id, &cwd, None)?
                .commit(&call_id, anchor, ok)?;
            Ok(())
        })
    }

    /// Takes, on the thread pool, the locks the session's open handle keeps through a burst
    /// of write-tool calls, ahead of the burst (`Session::take_locks_ahead`): for a host
    /// whose model has just named such a call, so that the call's capture on the host's
    /// thread takes none. Resolves with whether they are held; `false` (nothing done) when
    /// no handle of the session is open or they cannot be taken without waiting.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn take_locks_ahead(&self, session_id: String, cwd: String) -> AsyncTask<Job<bool>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            Ok(h.cached(&session_id, &cwd, None)
                .is_some_and(|s| s.take_locks_ahead()))
        }))
    }

    /// Writes the commits of the session's open handle that wait for its next write;
    /// resolves with whether there were any.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn flush(&self, session_id: String, cwd: String) -> AsyncTask<Job<bool>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || match h.cached(&session_id, &cwd, None) {
            Some(session) => Ok(session.flush()?),
            None => Ok(false),
        }))
    }

    /// Discards a capture still staged for `call_id` (the host's safety net).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn discard(&self, session_id: String, cwd: String, call_id: String) -> AsyncTask<Job<()>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            h.session(&session_id, &cwd, None)?.discard(&call_id)?;
            Ok(())
        }))
    }

    /// Message-boundary re-check: records the state of every tracked path that changed on disk;
    /// resolves with the recorded paths. For a forked session, `ancestors` (nearest parent
    /// first): at its first boundary it takes over the paths they track.
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn recheck(
        &self,
        session_id: String,
        cwd: String,
        anchor_seq: f64,
        max_file_bytes: f64,
        ancestors: Option<Vec<BindingChainLink>>,
    ) -> AsyncTask<Job<Vec<String>>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            let anchor = seq_from_js(anchor_seq, "anchorSeq")?;
            let links = crate::convert::chain(ancestors)?;
            let outcome = h
                .session(&session_id, &cwd, Some(cap_from(max_file_bytes)?))?
                .recheck_tracked_chain(anchor, &links)?;
            Ok(outcome
                .recorded
                .into_iter()
                .map(|c| c.path.spelling())
                .collect())
        }))
    }

    /// What a rewind to `target_seq` would do to the files (no mutation). For a forked session,
    /// `ancestors` (nearest parent first, each with its fork boundary) are read in place.
    #[napi(ts_return_type = "Promise<BindingPreview>")]
    pub fn preview(
        &self,
        session_id: String,
        cwd: String,
        target_seq: f64,
        ancestors: Option<Vec<BindingChainLink>>,
    ) -> AsyncTask<Job<BindingPreview>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            let target = seq_from_js(target_seq, "targetSeq")?;
            let p = h.engine.preview(
                &session_id,
                Path::new(&cwd),
                target,
                &crate::convert::chain(ancestors)?,
            )?;
            Ok(BindingPreview {
                files: p
                    .files
                    .iter()
                    .map(|f| BindingPreviewFile {
                        path: f.action.path.spelling(),
                        action: rewind_engine::action_name(&f.action.action).into(),
                        added: f.added.map(|n| n as f64),
                        removed: f.removed.map(|n| n as f64),
                        origin: f.origin.name().into(),
                        origin_session: f.origin.session().map(str::to_owned),
                    })
                    .collect(),
                uncovered: p.plan.uncovered.iter().map(|u| u.path.spelling()).collect(),
                skipped: p
                    .plan
                    .skipped
                    .iter()
                    .map(|s| BindingSkippedPath {
                        path: s.path.spelling(),
                        reason: s.reason.to_string(),
                    })
                    .collect(),
                outside: spellings(&p.plan.outside),
                not_covered: not_covered(&p.plan.not_covered),
                unreadable: p
                    .unreadable
                    .into_iter()
                    .map(|f| BindingFailedPath {
                        path: f.path.spelling(),
                        message: f.error,
                    })
                    .collect(),
                git_object_gone: p
                    .git_object_gone
                    .into_iter()
                    .map(|f| BindingFailedPath {
                        path: f.path.spelling(),
                        message: f.error,
                    })
                    .collect(),
            })
        }))
    }

    /// What restoring `path` to `targetSeq` would change inside it: a unified line diff
    /// (now → after the restore) with `+/−` counts, or a summary of each side for binary,
    /// oversized or unreadable files. Rejects `rewind/not-planned` when the restore would
    /// not change that path.
    #[napi(ts_return_type = "Promise<BindingFileDiff>")]
    pub fn diff(
        &self,
        session_id: String,
        cwd: String,
        target_seq: f64,
        path: String,
        ancestors: Option<Vec<BindingChainLink>>,
    ) -> AsyncTask<Job<BindingFileDiff>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            let target = seq_from_js(target_seq, "targetSeq")?;
            let (action, d) = h.engine.diff(
                &session_id,
                Path::new(&cwd),
                target,
                &path,
                &crate::convert::chain(ancestors)?,
            )?;
            Ok(BindingFileDiff {
                path: action.path.spelling(),
                action: rewind_engine::action_name(&action.action).into(),
                now: diff_side(&d.now),
                then: diff_side(&d.then),
                added: d.added.map(|n| n as f64),
                removed: d.removed.map(|n| n as f64),
                unified: d.unified,
                truncated: d.truncated,
            })
        }))
    }

    /// Scans the session's workspace around a tool call (`before` / `after`) or at a message
    /// boundary, and records what changed (see `docs/tracking-boundary.md`, "Scan"). A workspace
    /// over the file-count limit resolves with `refused` (`rewind/scan-budget`), never a hang.
    #[napi(ts_return_type = "Promise<BindingScanReport>")]
    pub fn scan(
        &self,
        session_id: String,
        cwd: String,
        request: BindingScanRequest,
    ) -> AsyncTask<Job<BindingScanReport>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            let req = scan_request(&request)?;
            let cap = cap_from(request.max_file_bytes)?;
            let session = h.session(&session_id, &cwd, Some(cap))?;
            let r = session.scan(&req)?;
            // A delta past its bound is folded into a whole index on a thread of its own, so
            // the call that crossed it does not wait for the whole-index write (a scan past
            // the delta's hard cap folds itself). It takes the workspace's lock, as a scan
            // does; a failure leaves the delta to a later fold.
            if session.index_fold_due() {
                let _ = std::thread::Builder::new()
                    .name("rewind-index-fold".into())
                    .spawn(move || {
                        let _ = session.fold_index();
                    });
            }
            Ok(BindingScanReport {
                phase: req.phase.as_str().to_owned(),
                files: js_number(r.files),
                recorded: js_number(r.recorded as u64),
                created: spellings(&r.created),
                modified: spellings(&r.modified),
                deleted: spellings(&r.deleted),
                mode_changed: spellings(&r.mode_changed),
                outside: spellings(&r.outside),
                in_flight: spellings(&r.in_flight),
                not_covered: not_covered(&r.not_covered),
                refused: r.refused.map(|f| BindingScanRefusal {
                    code: f.code.to_owned(),
                    message: f.message,
                }),
                baseline_complete: r.baseline_complete,
                mode: match r.mode {
                    snapshot_store::ScanMode::Full => "full",
                    snapshot_store::ScanMode::Watched => "watched",
                }
                .to_owned(),
                full_reason: r.full_reason,
                elapsed_ms: r.elapsed_ms,
            })
        }))
    }

    /// Records DSH's session format for this session; a different recorded format clears the
    /// session's snapshots. Resolves `true` when it cleared them.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn session_format(
        &self,
        session_id: String,
        cwd: String,
        format: String,
    ) -> AsyncTask<Job<bool>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            let outcome = h
                .session(&session_id, &cwd, None)?
                .reconcile_format(&format)?;
            Ok(matches!(
                outcome,
                snapshot_store::FormatOutcome::Cleared { .. }
            ))
        }))
    }

    /// Keeps the newest 100 anchor groups of the session (what open journals need stays).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn prune(&self, session_id: String, cwd: String) -> AsyncTask<Job<()>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            h.session(&session_id, &cwd, None)?
                .prune(PruneOptions::default())?;
            Ok(())
        }))
    }

    /// Every restore journal of the session with where it stands (after a crash, `open` ones);
    /// a journal that cannot be read is listed as `unreadable` with why.
    #[napi(ts_return_type = "Promise<Array<BindingRestoreStatus>>")]
    pub fn restore_statuses(
        &self,
        session_id: String,
        cwd: String,
    ) -> AsyncTask<Job<Vec<BindingRestoreStatus>>> {
        let h = self.handle();
        AsyncTask::new(Job::new(move || {
            // One unreadable journal is named, never hides the others.
            let (statuses, unreadable) = h
                .session(&session_id, &cwd, None)?
                .restore_statuses_each()?;
            Ok(statuses
                .into_iter()
                .map(crate::convert::restore_status)
                .chain(
                    unreadable
                        .into_iter()
                        .map(|(op_id, error)| BindingRestoreStatus {
                            op_id,
                            target_seq: 0.0,
                            state: BindingJournalState::Unreadable,
                            actions: 0,
                            done: 0,
                            failed: 0,
                            pending: 0,
                            rollback_started: false,
                            error: Some(error),
                        }),
                )
                .collect())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(phase: &str, anchor: f64) -> BindingScanRequest {
        BindingScanRequest {
            phase: phase.into(),
            call_id: Some("c1".into()),
            anchor_seq: anchor,
            ok: None,
            max_file_bytes: 1024.0,
            max_baseline_bytes: 4096.0,
            max_files: 10.0,
        }
    }

    #[test]
    fn the_scan_budget_code_is_in_the_code_table() {
        assert_eq!(
            snapshot_store::SCAN_BUDGET_CODE,
            rewind_engine::ErrorCode::ScanBudget.as_str()
        );
    }

    #[test]
    fn scan_requests_are_validated() {
        let r = scan_request(&request("after", 7.0)).expect("valid");
        assert_eq!(r.phase, ScanPhase::After);
        assert_eq!(
            (r.anchor_seq, r.max_files, r.max_baseline_bytes),
            (7, 10, 4096)
        );
        assert!(r.ok, "ok defaults to true");
        for bad in [
            request("during", 1.0),
            request("before", -1.0),
            request("boundary", 1.5),
        ] {
            let e = scan_request(&bad).expect_err("refused");
            assert_eq!(e.code, "rewind/bad-request");
        }
    }
}
