//! Writes the layout-1 fixture store used by the migration tests
//! (`tests/fixtures/layout1/`). The committed fixture was written by the layout-1
//! code of this crate (before the record log); running this example with a later
//! build writes that build's layout instead, so it is kept only to document how the
//! fixture was made.
//!
//! ```text
//! cargo run -p snapshot-store --example layout1_fixture -- <out dir>
//! ```
//!
//! Scenario (session `fx-a`, workspace `ws-a`):
//! * a.txt = "a0", keep.txt = "k0" exist before message 10.
//! * message 10: call c1 rewrites a.txt → "a1"; call c2 creates b.txt = "b1".
//! * message 20: a.txt edited outside any tool → "a1x" (the re-check records it);
//!   call c3 rewrites a.txt → "a2"; call c4 creates dir/c.txt = "c2".
//! * message 30: call c5 fails (its capture of b.txt is dropped); call c6 stages
//!   keep.txt and never settles (left pending).
//! * operation op-1: restore to message 20, completed (undoable): a.txt = "a1x",
//!   dir/c.txt deleted, b.txt = "b1".
//!
//! Session `fx/b%` (workspace `ws-b`, format `dsh-session-v0`):
//! * x.txt = "x0"; message 5: call k1 rewrites x.txt → "x1", call k2 rewrites y.txt
//!   ("y0" → "y1").
//! * operation op-open: restore to message 5 whose write of y.txt failed (EIO):
//!   journal left open, x.txt = "x0" already, y.txt still "y1".

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use snapshot_store::{Area, FaultSeam, FsOp, Store, StoreOptions};

struct FailYWrite(AtomicBool);

impl FaultSeam for FailYWrite {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        if self.0.load(Ordering::SeqCst)
            && area == Area::Workspace
            && op == FsOp::Create
            && path.to_string_lossy().contains("y.txt")
        {
            return Err(io::Error::from_raw_os_error(5));
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: layout1_fixture <out dir>")?,
    );
    let root = out.join("store");
    let (wa, wb) = (out.join("ws-a"), out.join("ws-b"));
    std::fs::create_dir_all(&wa)?;
    std::fs::create_dir_all(&wb)?;

    let store = Store::open(&root, StoreOptions::default())?;
    let s = store.session("fx-a", &wa)?;
    s.reconcile_format("dsh-session-v0")?;
    std::fs::write(wa.join("a.txt"), "a0")?;
    std::fs::write(wa.join("keep.txt"), "k0")?;
    s.recheck_tracked(10)?;
    s.capture_before("c1", "a.txt".as_ref())?;
    std::fs::write(wa.join("a.txt"), "a1")?;
    s.commit("c1", 10, true)?;
    s.capture_before("c2", "b.txt".as_ref())?;
    std::fs::write(wa.join("b.txt"), "b1")?;
    s.commit("c2", 10, true)?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(wa.join("a.txt"), "a1x")?;
    s.recheck_tracked(20)?;
    s.capture_before("c3", "a.txt".as_ref())?;
    std::fs::write(wa.join("a.txt"), "a2")?;
    s.commit("c3", 20, true)?;
    s.capture_before("c4", "dir/c.txt".as_ref())?;
    std::fs::create_dir_all(wa.join("dir"))?;
    std::fs::write(wa.join("dir/c.txt"), "c2")?;
    s.commit("c4", 20, true)?;
    s.recheck_tracked(30)?;
    s.capture_before("c5", "b.txt".as_ref())?;
    s.commit("c5", 30, false)?;
    s.capture_before("c6", "keep.txt".as_ref())?;
    let plan = s.plan_restore(20)?;
    s.restore(&plan, "op-1")?;

    let seam = Arc::new(FailYWrite(AtomicBool::new(false)));
    let store_b = Store::open(
        &root,
        StoreOptions {
            seam: seam.clone(),
            ..StoreOptions::default()
        },
    )?;
    let b = store_b.session("fx/b%", &wb)?;
    b.reconcile_format("dsh-session-v0")?;
    std::fs::write(wb.join("x.txt"), "x0")?;
    std::fs::write(wb.join("y.txt"), "y0")?;
    b.recheck_tracked(5)?;
    b.capture_before("k1", "x.txt".as_ref())?;
    std::fs::write(wb.join("x.txt"), "x1")?;
    b.commit("k1", 5, true)?;
    b.capture_before("k2", "y.txt".as_ref())?;
    std::fs::write(wb.join("y.txt"), "y1")?;
    b.commit("k2", 5, true)?;
    let plan = b.plan_restore(5)?;
    seam.0.store(true, Ordering::SeqCst);
    let outcome = b.restore(&plan, "op-open")?;
    assert_eq!(outcome.failed.len(), 1, "{outcome:?}");
    Ok(())
}
