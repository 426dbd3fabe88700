//! The size quota over a real snapshot store: oldest idle sessions first, shared
//! blobs credited only when their last user goes, the keep rules, fail closed.

use std::fs::{File, FileTimes};
use std::path::Path;
use std::time::{Duration, SystemTime};

use rewind_cleanup::{Cleaner, KeepReason, MemoryPolicy, Pins, Policy, Scope, SweepRequest};
use snapshot_store::{Store, StoreOptions};

struct Fixture {
    _tmp: tempfile::TempDir,
    home: std::path::PathBuf,
    store: Store,
}

fn age(p: &Path, days: u64) {
    let t = SystemTime::now() - Duration::from_secs(days * 86_400);
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            age(&e.unwrap().path(), days);
        }
    }
    File::open(p)
        .unwrap()
        .set_times(FileTimes::new().set_modified(t))
        .unwrap();
}

/// Sessions `old` (10 days idle), `mid` (5 days) and `new` (now), each with one
/// captured 4 KiB file of its own; `mid` and `new` also share one 8 KiB content (in
/// blob files: none kept in a session's log).
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let options = StoreOptions {
        keep_in_log_bytes: 0,
        ..StoreOptions::default()
    };
    let store = Store::open(&home.join("rewind-snapshots"), options).unwrap();
    for (id, days, shared) in [("old", 10, false), ("mid", 5, true), ("new", 0, true)] {
        let ws = tmp.path().join(format!("ws-{id}"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("own.txt"), id.repeat(4096 / id.len())).unwrap();
        if shared {
            std::fs::write(ws.join("shared.txt"), vec![b's'; 8192]).unwrap();
        }
        let s = store.session(id, &ws).unwrap();
        s.recheck_tracked(1).unwrap();
        s.capture_before("c", "own.txt".as_ref()).unwrap();
        if shared {
            s.capture_before("c", "shared.txt".as_ref()).unwrap();
        }
        s.commit("c", 1, true).unwrap();
        if days > 0 {
            age(&home.join("rewind-snapshots/sessions").join(id), days);
        }
    }
    Fixture {
        _tmp: tmp,
        home,
        store,
    }
}

fn policy() -> MemoryPolicy {
    MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: 30,
    })
}

fn ids(r: &rewind_cleanup::QuotaReport) -> Vec<&str> {
    r.items.iter().map(|i| i.session_id.as_str()).collect()
}

#[test]
fn the_oldest_idle_sessions_go_until_the_store_fits() {
    let f = fixture();
    let cleaner = Cleaner::open(&f.home).unwrap();
    let inv = f.store.inventory().unwrap();
    let total: u64 = inv.sessions.iter().map(|s| s.record_bytes).sum::<u64>() + inv.blob_bytes;
    let old = inv.sessions.iter().find(|s| s.session_id == "old").unwrap();
    let old_bytes = old.record_bytes + old.exclusive_blob_bytes;

    // A budget that only `old` has to leave for.
    let max = total - old_bytes;
    let dry = cleaner
        .quota_sweep(
            &policy(),
            &f.store,
            max,
            &SweepRequest::dry_run(Scope::Idle),
            &[],
        )
        .unwrap();
    assert_eq!(ids(&dry), ["old"]);
    assert_eq!(dry.bytes_after, max);
    assert!(
        f.home.join("rewind-snapshots/sessions/old").is_dir(),
        "a dry run removes nothing"
    );

    let applied = cleaner
        .quota_sweep(
            &policy(),
            &f.store,
            max,
            &SweepRequest::dry_run(Scope::Idle).applied(),
            &[],
        )
        .unwrap();
    assert_eq!(ids(&applied), ["old"]);
    assert!(!applied.over_quota(), "{applied:?}");
    assert_eq!(applied.bytes_after, max, "the estimate was exact");
    assert!(!f.home.join("rewind-snapshots/sessions/old").exists());
    assert_eq!(applied.blobs_removed, 1);
    // The others still restore: their blobs are all there.
    assert!(f.store.verify(&mut |_, _| {}).unwrap().problems.is_empty());
}

#[test]
fn a_shared_blob_is_freed_only_with_its_last_user() {
    let f = fixture();
    let cleaner = Cleaner::open(&f.home).unwrap();
    let inv = f.store.inventory().unwrap();
    let mid = inv.sessions.iter().find(|s| s.session_id == "mid").unwrap();
    // Removing `old` and `mid` frees mid's own content, not the 8 KiB shared with `new`.
    let r = cleaner
        .quota_sweep(
            &policy(),
            &f.store,
            1,
            &SweepRequest::dry_run(Scope::Idle).with_active(["new"]),
            &[],
        )
        .unwrap();
    assert_eq!(ids(&r), ["old", "mid"]);
    let freed_mid = r.items[1].freed;
    assert_eq!(freed_mid, mid.record_bytes + mid.exclusive_blob_bytes);
    assert!(
        freed_mid < mid.record_bytes + mid.blob_bytes,
        "the shared blob is not credited"
    );
    assert!(r.over_quota());
    assert_eq!(r.kept.len(), 1);
    assert_eq!(r.kept[0].reason, KeepReason::Active);
}

#[test]
fn active_pinned_and_already_removed_sessions_are_not_listed() {
    let f = fixture();
    let cleaner = Cleaner::open(&f.home).unwrap();
    let req = SweepRequest::dry_run(Scope::Idle)
        .with_active(["old"])
        .with_pins(Pins::from_iter(["mid"]));
    let r = cleaner
        .quota_sweep(&policy(), &f.store, 1, &req, &[])
        .unwrap();
    assert_eq!(ids(&r), ["new"]);
    let kept: Vec<_> = r
        .kept
        .iter()
        .map(|k| (k.session_id.as_str(), k.reason.clone()))
        .collect();
    assert_eq!(
        kept,
        [("old", KeepReason::Active), ("mid", KeepReason::Pinned)]
    );
    // Sessions the age rule already takes are counted as gone, not listed twice.
    let r = cleaner
        .quota_sweep(
            &policy(),
            &f.store,
            1,
            &SweepRequest::dry_run(Scope::Idle),
            &["old".into()],
        )
        .unwrap();
    assert_eq!(ids(&r), ["mid", "new"]);
    // Applied, the keep rules hold too.
    let r = cleaner
        .quota_sweep(&policy(), &f.store, 1, &req.clone().applied(), &[])
        .unwrap();
    assert_eq!(ids(&r), ["new"]);
    assert!(f.home.join("rewind-snapshots/sessions/old").is_dir());
    assert!(f.home.join("rewind-snapshots/sessions/mid").is_dir());
}

#[test]
fn an_unreadable_record_stops_the_quota_before_anything_goes() {
    let f = fixture();
    let cleaner = Cleaner::open(&f.home).unwrap();
    std::fs::write(
        f.home.join("rewind-snapshots/sessions/new/session.json"),
        b"{ not json",
    )
    .unwrap();
    let err = cleaner
        .quota_sweep(
            &policy(),
            &f.store,
            1,
            &SweepRequest::dry_run(Scope::Idle).applied(),
            &[],
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("nothing removed by the size quota"),
        "{err}"
    );
    for id in ["old", "mid", "new"] {
        assert!(f.home.join("rewind-snapshots/sessions").join(id).is_dir());
    }
}

#[test]
fn a_blob_a_workspace_scan_written_within_the_hour_keeps_is_not_counted_as_freed() {
    use snapshot_store::{ScanPhase, ScanRequest, workspace_key};
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let store = Store::open(&home.join("rewind-snapshots"), StoreOptions::default()).unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("kept.txt"), vec![b'k'; 6000]).unwrap();
    std::fs::write(ws.join("own.txt"), vec![b'o'; 3000]).unwrap();
    let s = store.session("scanned", &ws).unwrap();
    // The scan's baseline keeps the contents of every file of the workspace.
    s.scan(&ScanRequest::new(ScanPhase::Boundary, 1)).unwrap();
    s.recheck_tracked(1).unwrap();
    s.capture_before("c", "kept.txt".as_ref()).unwrap();
    s.commit("c", 1, true).unwrap();
    age(&home.join("rewind-snapshots/sessions/scanned"), 3);

    let inv = store.inventory().unwrap();
    assert!(inv.problems.is_empty(), "{:?}", inv.problems);
    let key = workspace_key(&std::fs::canonicalize(&ws).unwrap());
    assert_eq!(inv.workspaces.len(), 1);
    let w = &inv.workspaces[0];
    assert_eq!(w.key, key);
    assert_eq!(
        w.blob_bytes, 9000,
        "the baseline references both files' contents"
    );
    assert_eq!(
        w.exclusive_blob_bytes, 3000,
        "kept.txt's contents are the session's too"
    );
    let index_bytes: u64 = std::fs::read_dir(home.join("rewind-snapshots/workspaces").join(&key))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    assert_eq!(w.index_bytes, index_bytes);
    assert_eq!(
        inv.unreferenced_bytes, 0,
        "what the baseline keeps is not garbage"
    );
    let session = &inv.sessions[0];
    assert_eq!(session.blob_bytes, 6000);
    assert_eq!(session.exclusive_blob_bytes, 0, "the baseline shares it");
    assert_eq!(
        inv.total_bytes(),
        session.record_bytes + index_bytes + inv.blob_bytes
    );

    // Removing the session frees its records only: the baseline, written within the hour
    // (a scan may be on its way to naming it), still needs the blob.
    let cleaner = Cleaner::open(&home).unwrap();
    let r = cleaner
        .quota_sweep(
            &policy(),
            &store,
            1,
            &SweepRequest::dry_run(Scope::Idle).applied(),
            &[],
        )
        .unwrap();
    assert_eq!(ids(&r), ["scanned"]);
    assert_eq!(r.items[0].freed, session.record_bytes);
    assert_eq!(
        r.bytes_after,
        index_bytes + 9000,
        "the estimate and the measure agree"
    );
    assert_eq!(r.blobs_removed, 0);
    assert!(std::fs::metadata(home.join("rewind-snapshots/workspaces").join(&key)).is_ok());
}

#[test]
fn a_workspace_goes_with_the_last_session_that_scanned_it_once_idle_an_hour() {
    use snapshot_store::{ScanPhase, ScanRequest, workspace_key};
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let store = Store::open(&home.join("rewind-snapshots"), StoreOptions::default()).unwrap();
    let (ws, other) = (tmp.path().join("ws"), tmp.path().join("other"));
    for (dir, byte) in [(&ws, b'w'), (&other, b'o')] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("big.txt"), vec![byte; 20_000]).unwrap();
    }
    // Two sessions scanned the first workspace, one the second.
    for (id, dir) in [("a1", &ws), ("a2", &ws), ("b", &other)] {
        let s = store.session(id, dir).unwrap();
        s.scan(&ScanRequest::new(ScanPhase::Boundary, 1)).unwrap();
    }
    age(&home.join("rewind-snapshots/sessions/a1"), 3);
    age(&home.join("rewind-snapshots/sessions/a2"), 2);
    age(&home.join("rewind-snapshots/sessions/b"), 1);
    let wdir = |d: &Path| {
        let key = workspace_key(&std::fs::canonicalize(d).unwrap());
        home.join("rewind-snapshots/workspaces").join(key)
    };
    age(&wdir(&ws), 1);
    age(&wdir(&other), 1);
    let inv = store.inventory().unwrap();
    let named: Vec<_> = inv
        .sessions
        .iter()
        .map(|s| s.workspace.clone().unwrap())
        .collect();
    assert_eq!(named[0], named[1]);
    assert_ne!(named[0], named[2]);
    let w = inv
        .workspaces
        .iter()
        .find(|w| Some(&w.key) == inv.sessions[0].workspace.as_ref())
        .unwrap();
    let (a1, a2) = (&inv.sessions[0], &inv.sessions[1]);

    // A budget the second workspace and its session fit in: the first one's sessions go,
    // and with the last of them its scan state and its baseline's content.
    let keep = inv.total_bytes() - a1.record_bytes - a2.record_bytes - w.index_bytes - 20_000;
    let cleaner = Cleaner::open(&home).unwrap();
    let dry = cleaner
        .quota_sweep(
            &policy(),
            &store,
            keep,
            &SweepRequest::dry_run(Scope::Idle),
            &[],
        )
        .unwrap();
    assert_eq!(ids(&dry), ["a1", "a2"]);
    assert_eq!(
        dry.items[0].freed, a1.record_bytes,
        "a2 still names the workspace"
    );
    assert_eq!(dry.items[1].freed, a2.record_bytes + w.index_bytes + 20_000);
    assert_eq!(dry.bytes_after, keep);
    let r = cleaner
        .quota_sweep(
            &policy(),
            &store,
            keep,
            &SweepRequest::dry_run(Scope::Idle).applied(),
            &[],
        )
        .unwrap();
    assert_eq!(ids(&r), ["a1", "a2"]);
    assert_eq!(r.bytes_after, keep, "the estimate and the measure agree");
    assert!(!r.over_quota());
    assert!(!wdir(&ws).exists(), "no session uses it any more");
    assert!(wdir(&other).is_dir(), "session b still uses it");
}

#[test]
fn the_quota_record_round_trips_and_a_newer_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cleaner = Cleaner::open(&home).unwrap();
    assert_eq!(cleaner.last_quota().unwrap(), None);
    let run = rewind_cleanup::LastQuota {
        version: rewind_cleanup::QUOTA_RECORD_VERSION,
        at: 1_795_977_964_371,
        trigger: rewind_cleanup::Trigger::Auto,
        max_bytes: 4 << 30,
        sessions: vec!["a".into(), "b".into()],
        freed: 1234,
        bytes_after: 99,
    };
    cleaner.record_quota_run(&run).unwrap();
    assert_eq!(cleaner.last_quota().unwrap(), Some(run.clone()));
    let text = std::fs::read_to_string(home.join(rewind_cleanup::LAST_QUOTA_FILE)).unwrap();
    assert!(text.contains("\"maxBytes\"") && text.contains("\"bytesAfter\""), "{text}");
    // A record written by a newer build is not read as this build's.
    std::fs::write(
        home.join(rewind_cleanup::LAST_QUOTA_FILE),
        text.replace("\"version\": 1", "\"version\": 99"),
    )
    .unwrap();
    assert!(matches!(
        cleaner.last_quota(),
        Err(rewind_cleanup::RecordError::NewerVersion { found: 99 })
    ));
    // The quota is on by default: its budget is not zero.
    assert_eq!(rewind_cleanup::DEFAULT_MAX_SIZE_BYTES, 4 << 30);
}
