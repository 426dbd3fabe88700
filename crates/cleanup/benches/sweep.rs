//! A dry-run and an applied sweep over 1,000 session directories vs raw
//! `read_dir` + `stat` / `remove_dir_all` of the same directories.

#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::fs::{self, File, FileTimes};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use rewind_cleanup::{Cleaner, DAY_MS, MemoryPolicy, Policy, SNAPSHOT_DIR, Scope, SweepRequest};

const SESSIONS: usize = 1000;

/// One session directory shaped like the store's: a marker, two groups with
/// an entry record each, and a finished journal.
fn make_session(dir: &Path, old: bool, now: u64) {
    for g in 0..2 {
        let gd = dir.join("groups").join(format!("{g:020}"));
        fs::create_dir_all(&gd).unwrap();
        fs::write(gd.join("entry.json"), [b'e'; 300]).unwrap();
    }
    fs::create_dir_all(dir.join("journals")).unwrap();
    fs::write(dir.join("session.json"), br#"{"v":1}"#).unwrap();
    fs::write(
        dir.join("journals").join("op.json"),
        br#"{"v":1,"actions":[]}"#,
    )
    .unwrap();
    fs::write(
        dir.join("journals").join("op.log"),
        b"{\"p\":\"apply\",\"s\":\"completed\"}\n",
    )
    .unwrap();
    if old {
        set_tree_mtime(dir, now - 90 * DAY_MS);
    }
}

fn set_tree_mtime(path: &Path, ms: u64) {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    if path.is_dir() {
        for e in fs::read_dir(path).unwrap() {
            set_tree_mtime(&e.unwrap().path(), ms);
        }
    }
    File::open(path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(t))
        .unwrap();
}

fn populate(sessions: &Path, old_every: usize, now: u64) {
    fs::create_dir_all(sessions).unwrap();
    for i in 0..SESSIONS {
        make_session(
            &sessions.join(format!("session-{i:05}")),
            i % old_every == 0 && old_every != usize::MAX,
            now,
        );
    }
}

/// The raw baseline of a dry run: walk every session tree with `read_dir` +
/// `symlink_metadata`, summing sizes and the newest mtime.
fn raw_walk(path: &Path) -> (u64, u64) {
    let mut bytes = 0;
    let mut newest = 0;
    for e in fs::read_dir(path).unwrap() {
        let e = e.unwrap();
        let md = fs::symlink_metadata(e.path()).unwrap();
        let m = md
            .modified()
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        newest = newest.max(m);
        if md.is_dir() {
            let (b, n) = raw_walk(&e.path());
            bytes += b;
            newest = newest.max(n);
        } else {
            bytes += md.len();
        }
    }
    (bytes, newest)
}

fn main() {
    let mut report = timing::Report::new(
        "cleanup-sweep",
        "Cleanup: sweep over 1,000 session directories",
        "Each session directory is shaped like the snapshot store's (5 files in 5 directories). \
         Dry run: `Cleaner::sweep` without `--apply` (policy read, store marker check, journal check, \
         a capability-handle walk of every tree, the journals of the idle ones read) vs a raw `read_dir` + `symlink_metadata` walk of the same \
         trees. Applied: `Cleaner::sweep` with `--apply` removing every session (exclusive store lock, \
         rename into `trash/`, delete) vs `remove_dir_all` of each directory; the directories are rebuilt \
         between rounds, outside the timing.",
    );
    let now = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let store = home.join(SNAPSHOT_DIR);
    let sessions = store.join("sessions");
    populate(&sessions, 2, now);
    fs::write(store.join("store.json"), br#"{"store_version": 1}"#).unwrap();
    let cleaner = Cleaner::open(&home)
        .unwrap()
        .with_clock(Arc::new(move || now));
    let policy = MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: 30,
    });

    let dry = SweepRequest::dry_run(Scope::Idle);
    let r = cleaner.sweep(&policy, &dry).unwrap();
    assert_eq!(r.items.len(), SESSIONS / 2);
    let (s, b) = timing::pair(
        15,
        || {
            let r = cleaner.sweep(&policy, &dry).unwrap();
            assert_eq!(r.items.len(), SESSIONS / 2);
        },
        || {
            let mut n = 0;
            for e in fs::read_dir(&sessions).unwrap() {
                let (_, newest) = raw_walk(&e.unwrap().path());
                if newest + 30 * DAY_MS <= now {
                    n += 1;
                }
            }
            assert_eq!(n, SESSIONS / 2);
        },
    );
    report.row("dry run, 1,000 sessions (500 idle)", s, b, Some(2.0));

    // Every session is idle for a clock 90 days ahead: no mtimes to set.
    let later = now + 90 * DAY_MS;
    let cleaner = Cleaner::open(&home)
        .unwrap()
        .with_clock(Arc::new(move || later));
    let apply = SweepRequest::dry_run(Scope::Idle).applied();
    let rounds = 3;
    let mut subject = Vec::new();
    let mut baseline = Vec::new();
    for _ in 0..rounds {
        fs::remove_dir_all(&sessions).unwrap();
        populate(&sessions, usize::MAX, now);
        let t = Instant::now();
        let r = cleaner.sweep(&policy, &apply).unwrap();
        subject.push(t.elapsed());
        assert_eq!(r.items.len(), SESSIONS);

        fs::remove_dir_all(&sessions).unwrap();
        populate(&sessions, usize::MAX, now);
        let t = Instant::now();
        for e in fs::read_dir(&sessions).unwrap() {
            fs::remove_dir_all(e.unwrap().path()).unwrap();
        }
        baseline.push(t.elapsed());
    }
    report.row(
        "applied, 1,000 idle sessions removed",
        timing::median(&mut subject),
        timing::median(&mut baseline),
        Some(2.0),
    );
    report.write();
}
