//! Appending to a full history partition vs a raw durable write of the same bytes.
//!
//! Subject: `HistoryStore::append` on a partition already holding `historyLimit`
//! entries (so every append also drops the oldest): locks, read + parse,
//! serialize, temp file, fsync, rename, directory fsync.
//! Baseline: writing the same final bytes to a temp file, fsync, rename, and
//! directory fsync with `std::fs` — the least any crash-safe write can do.

#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::io::Write as _;

use rewind_history::{Entry, HistoryStore, Outcome, Paths, WorkspaceKey};

fn entry(k: &WorkspaceKey, n: u64, paths_per_list: usize) -> Entry {
    let list = |tag: &str| {
        (0..paths_per_list)
            .map(|i| format!("src/{tag}/module_{n}_{i}.rs"))
            .collect()
    };
    let paths = Paths {
        restored: list("r"),
        deleted: list("d"),
        skipped: list("s"),
        failed: Vec::new(),
        kept: Vec::new(),
    };
    Entry::new(
        format!("op-{n:08}"),
        "session-0123456789abcdef",
        k,
        n,
        1_764_000_000_000 + n,
        Outcome::Done,
        paths,
    )
}

fn raw_write(dir: &std::path::Path, bytes: &[u8]) {
    let tmp = dir.join("raw.json.tmp");
    let mut f = std::fs::File::create(&tmp).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    drop(f);
    std::fs::rename(&tmp, dir.join("raw.json")).unwrap();
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
}

fn main() {
    let mut report = timing::Report::new(
        "history-append",
        "History: append to a full partition",
        "`HistoryStore::append` on a partition holding `historyLimit` entries (each append drops the oldest) \
         vs writing the same final bytes with `std::fs` (temp file, fsync, rename, directory fsync). \
         Both are crash-safe; the difference is locking (process + OS file lock), reading and parsing the \
         current file (it grows with the partition), and serializing. fsync times on this machine vary by \
         several milliseconds between runs, so the ratio is noisy; the goal (≤ 2×) is there to catch a \
         regression such as an extra fsync or a full re-read.",
    );
    let tmp = tempfile::tempdir().unwrap();
    let k = WorkspaceKey::for_workspace("bench").unwrap();
    for (limit, per_list) in [(10usize, 3usize), (10, 50), (100, 3)] {
        let root = tmp.path().join(format!("h-{limit}-{per_list}"));
        let store = HistoryStore::open(&root).unwrap().with_limit(limit);
        let mut n = 0u64;
        for _ in 0..limit {
            store.append(&k, entry(&k, n, per_list)).unwrap();
            n += 1;
        }
        let bytes = std::fs::read(root.join(k.as_str()).join("history.json")).unwrap();
        let raw_dir = tmp.path().join(format!("raw-{limit}-{per_list}"));
        std::fs::create_dir_all(&raw_dir).unwrap();
        let rounds = if limit >= 100 { 60 } else { 150 };
        let (s, b) = timing::pair(
            rounds,
            || {
                store.append(&k, entry(&k, n, per_list)).unwrap();
                n += 1;
            },
            || raw_write(&raw_dir, &bytes),
        );
        report.row(
            &format!(
                "limit {limit}, {per_list} paths/list ({} KiB file)",
                bytes.len() / 1024
            ),
            s,
            b,
            Some(2.0),
        );
    }
    report.write();
}
