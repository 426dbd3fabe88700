//! `Session::read_ahead`: the content of the files tools wrote, read while the session is
//! quiet, is what the next message's re-check records, and that re-check reads only what
//! changed since.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use snapshot_store::{Area, FaultSeam, FsOp, StoreOptions};

use crate::common::{BLOB, Env, log_records};

/// Counts the reads of workspace files.
#[derive(Default)]
struct CountReads(AtomicUsize);

impl FaultSeam for CountReads {
    fn before(&self, op: FsOp, area: Area, _path: &Path) -> std::io::Result<()> {
        if op == FsOp::Read && area == Area::Workspace {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn blob_frames(env: &Env) -> usize {
    let (recs, _) = log_records(&env.root.join("sessions/s1/records.log"));
    recs.iter().filter(|(k, _)| *k == BLOB).count()
}

#[test]
fn a_recheck_after_a_read_ahead_reads_only_what_changed_since_and_records_the_same() {
    let env = Env::new();
    let reads = Arc::new(CountReads::default());
    let store = env.store_with(StoreOptions {
        seam: reads.clone(),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    s.recheck_tracked(1).expect("first boundary");
    for i in 0..10 {
        let rel = format!("d/f{i}");
        s.capture_before_at(&format!("c{i}"), Path::new(&rel), 1)
            .expect("capture");
        env.write(&rel, format!("written by the tool {i}").as_bytes());
        s.commit(&format!("c{i}"), 1, true).expect("commit");
    }
    // A big file is left to the re-check.
    s.capture_before_at("big", Path::new("big"), 1)
        .expect("capture");
    env.write("big", &vec![7u8; 20_000]);
    s.commit("big", 1, true).expect("commit");

    // In batches: what is left is counted.
    assert_eq!(s.read_ahead(4).expect("read ahead"), 6);
    assert_eq!(s.read_ahead(100).expect("read ahead"), 0);
    assert_eq!(s.read_ahead(100).expect("read ahead"), 0, "nothing left");
    assert_eq!(blob_frames(&env), 10, "the content is in the log");
    // Changed after it was read: read again at the message.
    env.write("d/f3", b"changed by hand");

    let before = reads.0.load(Ordering::SeqCst);
    let out = s.recheck_tracked(5).expect("recheck");
    let mut recorded: Vec<String> = out.recorded.iter().map(|c| c.path.display()).collect();
    recorded.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("d/f{i}")).collect();
    want.push("big".into());
    want.sort();
    assert_eq!(
        recorded, want,
        "every written file is recorded at the message"
    );
    let read = reads.0.load(Ordering::SeqCst) - before;
    assert!(
        read >= 2,
        "the changed file and the big one are read: {read}"
    );
    assert!(read <= 4, "the files read ahead are not read again: {read}");

    // A rewind to the message restores what each file held then (from the content read
    // ahead), also after a restart.
    env.write("d/f0", b"changed in the next turn");
    env.remove("d/f1");
    s.capture_before_at("n1", Path::new("d/f2"), 5)
        .expect("capture");
    env.write("d/f2", b"changed by a tool in the next turn");
    s.commit("n1", 5, true).expect("commit");
    drop(s);
    drop(store);
    let store = env.store();
    let s = env.session(&store);
    s.recheck_tracked(9).expect("recheck");
    let plan = s.plan_restore(5).expect("plan");
    let out = s.restore(&plan, "op").expect("restore");
    assert!(out.failed.is_empty(), "{out:?}");
    assert_eq!(
        env.read("d/f0").as_deref(),
        Some(&b"written by the tool 0"[..])
    );
    assert_eq!(
        env.read("d/f1").as_deref(),
        Some(&b"written by the tool 1"[..])
    );
    assert_eq!(
        env.read("d/f2").as_deref(),
        Some(&b"written by the tool 2"[..])
    );
    assert_eq!(env.read("d/f3").as_deref(), Some(&b"changed by hand"[..]));
}

#[test]
fn a_read_ahead_with_nothing_written_reads_nothing() {
    let env = Env::new();
    env.write("a", b"a0");
    let store = env.store();
    let s = env.session(&store);
    assert_eq!(s.read_ahead(10).expect("no log yet"), 0);
    s.recheck_tracked(1).expect("boundary");
    assert_eq!(s.read_ahead(10).expect("nothing tracked"), 0);
    // A call that failed leaves nothing to read.
    s.capture_before_at("c1", Path::new("a"), 1)
        .expect("capture");
    s.commit("c1", 1, false).expect("drop");
    assert_eq!(s.read_ahead(10).expect("nothing written"), 0);
    assert_eq!(blob_frames(&env), 0);
}

#[test]
fn a_file_changed_after_the_tool_wrote_it_is_left_to_the_recheck_and_not_read_again() {
    let env = Env::new();
    let reads = Arc::new(CountReads::default());
    let store = env.store_with(StoreOptions {
        seam: reads.clone(),
        ..StoreOptions::default()
    });
    let s = env.session(&store);
    s.recheck_tracked(1).expect("boundary");
    s.capture_before_at("c1", Path::new("a"), 1)
        .expect("capture");
    env.write("a", b"by the tool");
    s.commit("c1", 1, true).expect("commit");
    env.write("a", b"by hand, longer than the tool's");
    assert_eq!(s.read_ahead(1).expect("read ahead"), 0);
    assert_eq!(blob_frames(&env), 0, "nothing kept for a changed file");
    let n = reads.0.load(Ordering::SeqCst);
    assert_eq!(s.read_ahead(1).expect("read ahead"), 0);
    assert_eq!(reads.0.load(Ordering::SeqCst), n, "not read again");
    // The re-check reads it and records what it holds now.
    let out = s.recheck_tracked(3).expect("recheck");
    assert_eq!(out.recorded.len(), 1, "{out:?}");
    assert!(reads.0.load(Ordering::SeqCst) > n);
}
