//! The engine's session handles keep the store's and the log's locks through a burst of
//! calls that must not wait, and the engine's thread releases them once the burst goes
//! quiet: another handle or process never waits on them for long, and never for ever.

use std::path::Path;
use std::time::Duration;

use rewind_engine::{Engine, EngineOptions};
use snapshot_store::{CaptureOutcome, Store, StoreOptions};

#[test]
fn locks_kept_through_a_burst_are_released_once_it_goes_quiet() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let write = |f: &str, text: &str| std::fs::write(ws.path().join(f), text).expect("write");
    let engine = Engine::open(home.path(), EngineOptions::default());
    let files = engine.files("s1", ws.path(), None).expect("files");
    write("a", "one");
    files.capture_before("c0", Path::new("a")).expect("capture");
    write("a", "two");
    files.commit("c0", 1, true).expect("commit");
    // A burst of calls that must not wait (as the host's thread makes them).
    for i in 0..5 {
        let f = format!("f{i}");
        write(&f, "before");
        let out = files
            .try_capture_before_at(&format!("q{i}"), Path::new(&f), 1, 4096)
            .expect("runs")
            .expect("captured");
        assert!(matches!(out, CaptureOutcome::Captured { .. }), "{out:?}");
        write(&f, "after");
        files
            .try_commit(&format!("q{i}"), 1, true, 64)
            .expect("runs")
            .expect("committed");
    }
    // Another store on the same directory, as another process would open it: its calls
    // wait for the kept locks, which the engine's thread releases once the burst is over.
    let other_store = Store::open(engine.snapshots_root(), StoreOptions::default()).expect("store");
    let other = other_store.session("s1", ws.path()).expect("session");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            write("o", "other before");
            let done = match other.capture_before("o1", Path::new("o")) {
                Ok(_) => {
                    write("o", "other after");
                    other
                        .commit("o1", 1, true)
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            tx.send(done).expect("send");
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the other handle goes on once the burst is over")
            .expect("its capture and commit");
    });
    // Both handles' calls are in the one log.
    let plan = files.plan_restore(1).expect("plan");
    let mut paths: Vec<String> = plan.actions.iter().map(|a| a.path.display()).collect();
    paths.sort();
    assert_eq!(paths, ["a", "f0", "f1", "f2", "f3", "f4", "o"]);
    assert!(
        !files.release_idle_locks(Duration::ZERO),
        "nothing kept after a call that may wait"
    );
}

#[test]
fn the_lock_thread_sleeps_while_no_handle_keeps_a_lock() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let engine = Engine::open(home.path(), EngineOptions::default());
    let files = engine.files("s1", ws.path(), None).expect("files");
    std::fs::write(ws.path().join("a"), "one").expect("write");
    files.capture_before("c0", Path::new("a")).expect("capture");
    files.commit("c0", 1, true).expect("commit");
    let quiet = |what: &str| {
        // Whatever it was doing settles first (a look, then a park).
        std::thread::sleep(Duration::from_millis(100));
        let before = engine.lock_checks();
        std::thread::sleep(Duration::from_millis(400));
        let looks = engine.lock_checks() - before;
        // It looked 20 times in 400 ms when it looked every 20 ms whatever.
        assert!(
            looks <= 1,
            "{what}: the thread looked {looks} times with no lock kept"
        );
    };
    quiet("idle");
    // A call that keeps its locks wakes it; it releases them, then sleeps again.
    std::fs::write(ws.path().join("b"), "two").expect("write");
    let before = engine.lock_checks();
    files
        .try_capture_before_at("q1", Path::new("b"), 1, 4096)
        .expect("runs")
        .expect("captured");
    let released = std::time::Instant::now();
    while files.keeps_locks() {
        assert!(
            released.elapsed() < Duration::from_secs(10),
            "locks never released"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(engine.lock_checks() > before, "woken by the kept locks");
    quiet("after a burst");
    files
        .try_commit("q1", 1, true, 64)
        .expect("runs")
        .expect("committed");
    // Dropping the engine ends the thread (it holds only a weak reference).
    let weak = std::sync::Arc::downgrade(&engine);
    drop(files);
    drop(engine);
    assert!(weak.upgrade().is_none());
}
