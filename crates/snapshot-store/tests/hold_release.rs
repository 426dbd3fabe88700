//! A session hold is released when its guard drops, even while a child process forked by
//! another thread still has a copy of the hold's descriptor (between fork and exec, before
//! close-on-exec applies). A host spawns processes all the time (shell tools); a copy of the
//! descriptor in such a child must not keep the session held after the host let it go.

#![allow(unsafe_code)] // the pre-exec step that holds the child between fork and exec

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;

use snapshot_store::{Store, StoreOptions};

/// Spawns `true` from another thread with a pre-exec step that waits: the returned
/// function lets the child go on to exec. Returns once the child exists (forked, not exec'd).
fn child_paused_before_exec() -> impl FnOnce() {
    let (mut ready_r, ready_w) = UnixStream::pair().unwrap();
    let (go_r, mut go_w) = UnixStream::pair().unwrap();
    let (rw, gr) = (ready_w.as_raw_fd(), go_r.as_raw_fd());
    let mut cmd = Command::new("true");
    // SAFETY: the closure only calls write(2) and read(2) on descriptors the parent keeps
    // open until the child has exec'd (both socket pairs live until `go` returns).
    unsafe {
        cmd.pre_exec(move || {
            let (w, r) = (BorrowedFd::borrow_raw(rw), BorrowedFd::borrow_raw(gr));
            rustix::io::write(w, b"r")?;
            let mut b = [0u8; 1];
            rustix::io::read(r, &mut b)?;
            Ok(())
        });
    }
    let t = std::thread::spawn(move || cmd.status());
    let mut b = [0u8; 1];
    ready_r.read_exact(&mut b).unwrap();
    move || {
        go_w.write_all(b"g").unwrap();
        let status = t.join().unwrap().unwrap();
        assert!(status.success(), "{status}");
        drop((ready_w, go_r));
    }
}

#[test]
fn a_dropped_hold_is_released_while_a_forked_child_keeps_a_copy_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), StoreOptions::default()).unwrap();
    let hold = store.hold_session("s1").unwrap().expect("hold");
    let go = child_paused_before_exec();
    // The child holds a copy of the hold's descriptor now; it is still held.
    assert!(store.session_is_held("s1").unwrap());
    drop(hold);
    let claim = store.claim_session("s1").unwrap();
    go();
    assert!(
        claim.is_some(),
        "a dropped host hold still blocks a claim while a forked child has a copy of it"
    );
    // And an offline tool's claim, dropped the same way, lets a host hold the session again.
    drop(claim);
    let claim = store.claim_session("s1").unwrap().expect("claim");
    let go = child_paused_before_exec();
    drop(claim);
    let hold = store.hold_session("s1").unwrap();
    go();
    assert!(
        hold.is_some(),
        "a dropped claim still blocks a hold while a forked child has a copy of it"
    );
}
