//! The after-states of a deferred commit, observed off the committing thread.
//!
//! A commit that joins the handle's next write ([`Session::flush`]) still records what
//! the tool left at its paths (their `lstat` metadata), so that the next capture or
//! re-check can tell a later outside change from the tool's own write. With
//! [`Session::observe_after_states_later`] on, the commit hands those `lstat`s to a
//! process-wide observer thread and returns; the handle's next call that reads or writes
//! its state first completes every such commit in order (taking the observer's result,
//! or making the observation itself when the observer has not got to it yet).

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use crate::codec::TrackedUpdate;
use crate::error::FsFailure;
use crate::format::Known;
use crate::fsio::{Walk, WsFs};
use crate::path::RelPath;
use crate::records::tracked_records;

use super::{Session, State};

/// The paths of one deferred commit and, once observed, what the workspace shows there.
pub(crate) struct AfterStates {
    ws: Arc<WsFs>,
    paths: Vec<RelPath>,
    known: OnceLock<Vec<Known>>,
}

impl AfterStates {
    pub(crate) fn new(ws: Arc<WsFs>, paths: Vec<RelPath>) -> Arc<Self> {
        Arc::new(Self {
            ws,
            paths,
            known: OnceLock::new(),
        })
    }

    /// The observation, made now unless made already (by whichever thread comes first;
    /// a second caller waits for the first). A path that cannot be looked at is unknown.
    pub(crate) fn observe(&self) -> &[Known] {
        self.known.get_or_init(|| {
            self.paths
                .iter()
                .map(|p| observe_meta(&self.ws, p).unwrap_or(Known::Unknown))
                .collect()
        })
    }

    fn updates(&self) -> Vec<TrackedUpdate> {
        self.paths
            .iter()
            .zip(self.observe())
            .map(|(path, known)| TrackedUpdate {
                path: path.clone(),
                known: known.clone(),
                since: None,
            })
            .collect()
    }
}

/// The observer thread's queue (started on first use; it lives as long as the process,
/// asleep while there is nothing to observe).
fn observer() -> Option<&'static Mutex<Sender<Arc<AfterStates>>>> {
    static OBSERVER: OnceLock<Option<Mutex<Sender<Arc<AfterStates>>>>> = OnceLock::new();
    OBSERVER
        .get_or_init(|| {
            let (tx, rx) = channel::<Arc<AfterStates>>();
            std::thread::Builder::new()
                .name("rewind-after-states".into())
                .spawn(move || {
                    for job in rx {
                        job.observe();
                    }
                })
                .ok()?;
            Some(Mutex::new(tx))
        })
        .as_ref()
}

/// Hands `job` to the observer thread. Without one (it could not be started), the
/// observation is made when the commit is completed.
pub(crate) fn post(job: &Arc<AfterStates>) {
    if let Some(tx) = observer() {
        let tx = tx.lock().unwrap_or_else(|p| p.into_inner());
        let _ = tx.send(Arc::clone(job));
    }
}

impl Session {
    /// Completes, oldest first, the deferred commits whose after-states were left to the
    /// observer: their tracked records join the commit's frames and the index. Every call
    /// that reads the handle's state or writes its log does this first, so the records
    /// keep the order of the calls. (Tracked records are batched to fit a frame; should
    /// one not fit all the same, its paths stay unknown, as after a crash before the
    /// commit's write.)
    pub(crate) fn complete_after_states(&self, st: &mut State) {
        if !st.deferred.iter().any(|d| d.after.is_some()) {
            return;
        }
        let mut deferred = std::mem::take(&mut st.deferred);
        for d in deferred.iter_mut() {
            let Some(after) = d.after.take() else {
                continue;
            };
            let recs = tracked_records(after.updates());
            let before = d.bytes.len();
            match self.encode_frames(&recs, &mut d.bytes) {
                Ok(sizes) => {
                    for (r, n) in recs.into_iter().zip(sizes) {
                        // A tracked record always applies.
                        let _ = st.idx.apply(r.clone(), n);
                        d.recs.push((r, n));
                    }
                }
                Err(_) => {
                    d.bytes.truncate(before);
                    for p in &after.paths {
                        st.idx.forget_known(p);
                    }
                }
            }
        }
        st.deferred = deferred;
    }
}

/// What the workspace shows at `rel` without reading it (`lstat`-level): absent, present
/// with its metadata, or unknown behind a symlinked or non-directory parent.
pub(crate) fn observe_meta(ws: &WsFs, rel: &RelPath) -> Result<Known, FsFailure> {
    let mut created = Vec::new();
    match ws.walk_parent(rel, false, &mut created)? {
        Walk::Missing(_) => Ok(Known::Absent),
        Walk::Blocked(..) => Ok(Known::Unknown),
        Walk::Parent(dir) => {
            let (_, name) = rel.split_last();
            Ok(match ws.lstat(&dir, name, rel)? {
                None => Known::Absent,
                Some(meta) => Known::Present {
                    meta,
                    sha256: None,
                    recorded: false,
                },
            })
        }
    }
}
