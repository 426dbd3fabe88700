//! Writes the record-log fixture (`tests/fixtures/log-v3/`): a store whose one session's
//! `records.log` was written, checksums included, by the build that committed it (the
//! CRC-32 of every frame computed by that build's own table code). The test
//! `a_log_written_by_an_earlier_build_still_reads` reads it with the current build, so
//! a change of the checksum code that gave another value for any frame would fail it.
//!
//! ```text
//! cargo run -p snapshot-store --example log_v3_fixture -- <out dir>
//! ```
//!
//! Scenario (session `fx-log`, workspace `<out dir>/ws`):
//! * a.txt = "a0" (kept in the log), big.txt = 5,000 bytes (a blob file, and a frame long
//!   enough for the folding checksum path), both before message 1.
//! * message 1: call c1 rewrites a.txt → "a1" and big.txt; call c2 creates new.txt = "n1".
//! * message 2: call c3 rewrites a.txt → "a2".

use std::path::Path;

use snapshot_store::{Store, StoreOptions};

fn main() {
    let out = std::env::args_os()
        .nth(1)
        .expect("usage: log_v3_fixture <out dir>");
    let out = Path::new(&out);
    let ws = out.join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir ws");
    let big: String = (0..5000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    std::fs::write(ws.join("a.txt"), "a0").expect("write");
    std::fs::write(ws.join("big.txt"), &big).expect("write");
    let store = Store::open(
        &out.join("store"),
        StoreOptions {
            keep_in_log_bytes: 16,
            ..StoreOptions::default()
        },
    )
    .expect("open");
    let s = store.session("fx-log", &ws).expect("session");
    s.recheck_tracked(1).expect("recheck");
    s.capture_before("c1", "a.txt".as_ref()).expect("capture");
    s.capture_before("c1", "big.txt".as_ref()).expect("capture");
    std::fs::write(ws.join("a.txt"), "a1").expect("write");
    std::fs::write(ws.join("big.txt"), big.to_uppercase()).expect("write");
    s.commit("c1", 1, true).expect("commit");
    s.capture_before("c2", "new.txt".as_ref()).expect("capture");
    std::fs::write(ws.join("new.txt"), "n1").expect("write");
    s.commit("c2", 1, true).expect("commit");
    s.recheck_tracked(2).expect("recheck");
    s.capture_before("c3", "a.txt".as_ref()).expect("capture");
    std::fs::write(ws.join("a.txt"), "a2").expect("write");
    s.commit("c3", 2, true).expect("commit");
    s.flush().expect("flush");
}
