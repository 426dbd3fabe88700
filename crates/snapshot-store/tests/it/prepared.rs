//! A restore in two halves (`prepare_restore`, `run_prepared`) and a path that cannot be read
//! for its rescue copy.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use snapshot_store::{Area, FaultSeam, FsOp, StoreOptions};

use crate::common::{Env, assert_snap};
use crate::faults::setup_restore;

/// Refuses every open of workspace path `a` with `EACCES` once armed.
struct Unreadable(Arc<AtomicBool>);

impl FaultSeam for Unreadable {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> std::io::Result<()> {
        if self.0.load(Ordering::SeqCst)
            && op == FsOp::Open
            && area == Area::Workspace
            && path == Path::new("a")
        {
            return Err(std::io::Error::from_raw_os_error(libc_eacces()));
        }
        Ok(())
    }
}

fn libc_eacces() -> i32 {
    13
}

#[test]
fn a_path_that_cannot_be_read_for_its_rescue_copy_fails_alone() {
    let env = Env::new();
    let (_, at1) = setup_restore(&env);
    let armed = Arc::new(AtomicBool::new(false));
    let store = env.store_with(StoreOptions {
        seam: Arc::new(Unreadable(armed.clone())),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    armed.store(true, Ordering::SeqCst);
    let plan = s
        .plan_restore(1)
        .expect("the plan does not need to read `a`");
    // A preview can warn first: the path is named, with why.
    let warned = s.unreadable(&plan);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].display, "a");
    assert!(
        warned[0].error.contains("Permission denied"),
        "{}",
        warned[0].error
    );
    let out = s.restore(&plan, "op").expect("the restore runs");
    let failed: Vec<_> = out
        .failed
        .iter()
        .map(|f| (f.display.as_str(), f.error.as_str()))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "a");
    assert!(
        failed[0]
            .1
            .contains("cannot be read to keep a copy of it before the restore")
            && failed[0].1.contains("Permission denied"),
        "{}",
        failed[0].1
    );
    // Every other path is back; `a` is as it was.
    let mut want = at1.clone();
    want.insert(b"a".to_vec(), b"a1".to_vec());
    assert_snap(
        &env.snapshot(),
        &want,
        "all but the unreadable path restored",
    );
}

#[test]
fn a_prepared_restore_changes_nothing_until_it_runs() {
    let env = Env::new();
    let (pre, at1) = setup_restore(&env);
    let store = env.store();
    let s = env.session(&store);
    let plan = s.plan_restore(1).expect("plan");
    let prepared = s.prepare_restore(&plan, "op").expect("prepare");
    assert_eq!(prepared.op_id(), "op");
    assert_eq!(prepared.actions(), plan.actions.len());
    assert!(prepared.refused().is_empty());
    assert_snap(&env.snapshot(), &pre, "the workspace is untouched");
    assert!(
        s.restore_statuses().expect("statuses").is_empty(),
        "no journal yet"
    );
    let out = s.run_prepared(prepared).expect("run");
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_snap(&env.snapshot(), &at1, "restored");
    // The op id is taken now: preparing it again is refused.
    assert!(s.prepare_restore(&plan, "op").is_err());
}

#[test]
fn a_path_changed_between_the_halves_is_refused_alone() {
    let env = Env::new();
    let (_, at1) = setup_restore(&env);
    let store = env.store();
    let s = env.session(&store);
    let plan = s.plan_restore(1).expect("plan");
    let prepared = s.prepare_restore(&plan, "op").expect("prepare");
    env.write("a", b"saved in between");
    let out = s.run_prepared(prepared).expect("run");
    assert_eq!(out.failed.len(), 1, "{:?}", out.failed);
    assert_eq!(out.failed[0].display, "a");
    let mut want = at1.clone();
    want.insert(b"a".to_vec(), b"saved in between".to_vec());
    assert_snap(&env.snapshot(), &want, "the change in between is kept");
}
