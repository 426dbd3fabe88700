//! Integration tests of the sweep: real directories in temp dirs, an injected clock.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs::{self, File, FileTimes};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;
use rewind_cleanup::*;
use rewind_test_support::{CrashChild, CrashTarget, each_point};

const NOW: u64 = 1_800_000_000_000;

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("dsh-home");
        fs::create_dir_all(home.join(SNAPSHOT_DIR).join(SESSIONS_DIR)).unwrap();
        fs::write(
            home.join(SNAPSHOT_DIR).join(STORE_MARKER),
            br#"{"store_version": 1}"#,
        )
        .unwrap();
        Self { _tmp: tmp, home }
    }
    fn store(&self) -> PathBuf {
        self.home.join(SNAPSHOT_DIR)
    }
    fn session_dir(&self, id: &str) -> PathBuf {
        self.store().join(SESSIONS_DIR).join(encode_session_dir(id))
    }
    fn cleaner(&self, now: u64) -> Cleaner {
        Cleaner::open(&self.home)
            .unwrap()
            .with_clock(Arc::new(move || now))
    }
    /// A session directory shaped like the store's, last touched `days_ago` days before NOW.
    fn session(&self, id: &str, days_ago: u64, bytes: usize) -> PathBuf {
        let dir = self.session_dir(id);
        fs::create_dir_all(dir.join("groups").join("00000000000000000007")).unwrap();
        fs::create_dir_all(dir.join("journals")).unwrap();
        fs::create_dir_all(dir.join("pending")).unwrap();
        fs::write(dir.join("session.json"), br#"{"v":1}"#).unwrap();
        fs::write(
            dir.join("groups")
                .join("00000000000000000007")
                .join("entry.json"),
            vec![b'x'; bytes],
        )
        .unwrap();
        age(&dir, NOW - days_ago * DAY_MS);
        dir
    }
    /// A restore journal in a session: `lines` are the progress lines.
    fn journal(&self, id: &str, op: &str, lines: &[&str], days_ago: u64) {
        let j = self.session_dir(id).join("journals");
        fs::write(
            j.join(format!("{op}.json")),
            br#"{"v":1,"op_id":"x","session_id":"s","target_seq":1,"order":1,"actions":[]}"#,
        )
        .unwrap();
        let mut log = String::new();
        for l in lines {
            log.push_str(l);
            log.push('\n');
        }
        fs::write(j.join(format!("{op}.log")), log).unwrap();
        age(&self.session_dir(id), NOW - days_ago * DAY_MS);
    }
}

/// Sets the mtime of a tree (children first, then the directory).
fn age(path: &Path, ms: u64) {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    let md = fs::symlink_metadata(path).unwrap();
    if md.is_dir() {
        for e in fs::read_dir(path).unwrap() {
            age(&e.unwrap().path(), ms);
        }
    }
    if md.file_type().is_symlink() {
        return;
    }
    File::open(path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(t).set_accessed(t))
        .unwrap();
}

/// Every file under `path` (not following symlinks) with its bytes, for before/after comparisons.
fn snapshot(path: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, p: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let md = fs::symlink_metadata(p).unwrap();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        if md.file_type().is_symlink() {
            out.insert(
                rel,
                fs::read_link(p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
            );
        } else if md.is_dir() {
            out.insert(rel, b"<dir>".to_vec());
            for e in fs::read_dir(p).unwrap() {
                walk(root, &e.unwrap().path(), out);
            }
        } else {
            out.insert(rel, fs::read(p).unwrap());
        }
    }
    if path.exists() {
        walk(path, path, &mut out);
    }
    out
}

fn policy(days: u32) -> MemoryPolicy {
    MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: days,
    })
}

fn ids(items: &[SweepItem]) -> Vec<&str> {
    items.iter().map(|i| i.session_id.as_str()).collect()
}

fn kept<'a>(r: &'a SweepReport, id: &str) -> Option<&'a KeepReason> {
    r.kept
        .iter()
        .find(|k| k.session_id == id)
        .map(|k| &k.reason)
}

#[test]
fn dry_run_lists_without_deleting() {
    let h = Home::new();
    h.session("old", 40, 100);
    h.session("old.dotted/id", 31, 10);
    h.session("fresh", 5, 100);
    h.session("active-old", 90, 100);
    h.session("pinned-old", 90, 100);
    let before = snapshot(&h.home);
    let req = SweepRequest::dry_run(Scope::Idle)
        .with_active(["active-old"])
        .with_pins(Pins::from_iter(["pinned-old"]));
    let r = h.cleaner(NOW).sweep(&policy(30), &req).unwrap();
    assert!(!r.applied);
    assert_eq!(r.max_age_days, Some(30));
    assert_eq!(ids(&r.items), ["old", "old.dotted/id"]);
    let old = &r.items[0];
    assert_eq!(
        (old.bytes, old.files),
        (100 + 7, 2),
        "entry.json + session.json"
    );
    assert_eq!(old.last_activity, NOW - 40 * DAY_MS);
    assert_eq!(r.bytes, 107 + 17);
    assert_eq!(
        kept(&r, "fresh"),
        Some(&KeepReason::Recent {
            last_activity: NOW - 5 * DAY_MS
        })
    );
    assert_eq!(kept(&r, "active-old"), Some(&KeepReason::Active));
    assert_eq!(kept(&r, "pinned-old"), Some(&KeepReason::Pinned));
    assert_eq!(snapshot(&h.home), before, "a dry run changes nothing");
    assert!(
        h.cleaner(NOW).last_sweep().unwrap().is_none(),
        "a dry run records nothing"
    );
}

#[test]
fn cutoff_is_exclusive_of_the_boundary() {
    let h = Home::new();
    h.session("exactly", 30, 1);
    let r = h
        .cleaner(NOW)
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle))
        .unwrap();
    assert_eq!(
        ids(&r.items),
        ["exactly"],
        "idle for exactly the cutoff is swept"
    );
    let r = h
        .cleaner(NOW - 1)
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle))
        .unwrap();
    assert!(r.items.is_empty(), "one ms less idle is kept");
    // A recent file deep inside keeps an old-looking session.
    let d = h.session("deep", 100, 1);
    age(
        &d.join("groups")
            .join("00000000000000000007")
            .join("entry.json"),
        NOW - DAY_MS,
    );
    let r = h
        .cleaner(NOW)
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle))
        .unwrap();
    assert!(matches!(kept(&r, "deep"), Some(KeepReason::Recent { .. })));
}

#[test]
fn apply_removes_only_idle_unpinned_inactive_sessions() {
    let h = Home::new();
    h.session("old-1", 40, 10);
    h.session("old-2", 400, 10);
    h.session("fresh", 1, 10);
    h.session("active", 90, 10);
    h.session("pinned", 90, 10);
    h.session("open-journal", 90, 10);
    h.journal(
        "open-journal",
        "op-open",
        &[r#"{"p":"apply","i":0,"s":"done"}"#],
        90,
    );
    h.session("finished-journal", 90, 10);
    h.journal(
        "finished-journal",
        "op-done",
        &[
            r#"{"p":"apply","i":0,"s":"done"}"#,
            r#"{"p":"apply","s":"completed"}"#,
        ],
        90,
    );
    h.session("newer-journal", 90, 10);
    fs::write(
        h.session_dir("newer-journal")
            .join("journals")
            .join("op.json"),
        br#"{"v":9}"#,
    )
    .unwrap();
    age(&h.session_dir("newer-journal"), NOW - 90 * DAY_MS);
    let keep: Vec<_> = ["fresh", "active", "pinned", "open-journal", "newer-journal"]
        .iter()
        .map(|id| (id.to_string(), snapshot(&h.session_dir(id))))
        .collect();
    let blobs = h.store().join("blobs").join("ab");
    fs::create_dir_all(&blobs).unwrap();
    fs::write(blobs.join("abcdef"), b"blob").unwrap();
    let req = SweepRequest::dry_run(Scope::Idle)
        .with_active(["active"])
        .with_pins(Pins::from_iter(["pinned"]))
        .applied();
    let r = h.cleaner(NOW).sweep(&policy(30), &req).unwrap();
    assert!(r.applied);
    assert_eq!(ids(&r.items), ["finished-journal", "old-1", "old-2"]);
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    assert_eq!(
        kept(&r, "open-journal"),
        Some(&KeepReason::OpenJournal {
            op: "op-open".into()
        })
    );
    assert!(matches!(
        kept(&r, "newer-journal"),
        Some(KeepReason::UnreadableJournal { .. })
    ));
    for id in ["finished-journal", "old-1", "old-2"] {
        assert!(!h.session_dir(id).exists(), "{id} still there");
    }
    for (id, snap) in keep {
        assert_eq!(snapshot(&h.session_dir(&id)), snap, "{id} changed");
    }
    assert_eq!(
        fs::read(blobs.join("abcdef")).unwrap(),
        b"blob",
        "blobs are the store's business"
    );
    assert_eq!(
        fs::read_dir(h.store().join(TRASH_DIR)).unwrap().count(),
        0,
        "trash emptied"
    );
    let last = h.cleaner(NOW).last_sweep().unwrap().unwrap();
    assert_eq!(
        (last.at, last.trigger, last.removed, last.max_age_days),
        (NOW, Trigger::Manual, 3, Some(30))
    );
    assert_eq!(last.bytes, r.bytes);
}

#[test]
fn hostile_entries_are_left_alone() {
    let h = Home::new();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("precious.txt"), b"keep me").unwrap();
    age(outside.path(), NOW - 900 * DAY_MS);
    let sessions = h.store().join(SESSIONS_DIR);
    // A symlink named like a session, pointing outside the store.
    std::os::unix::fs::symlink(outside.path(), sessions.join("evil")).unwrap();
    // A symlink inside an old session pointing outside.
    let d = h.session("old", 90, 5);
    std::os::unix::fs::symlink(outside.path(), d.join("groups").join("link")).unwrap();
    // Files and foreign names.
    fs::write(sessions.join("notes.txt"), b"hi").unwrap();
    fs::create_dir(sessions.join("a.b")).unwrap();
    fs::create_dir(sessions.join("%2e%2e")).unwrap();
    fs::write(h.store().join("unknown-file"), b"x").unwrap();
    age(&sessions, NOW - 900 * DAY_MS);
    let before_outside = snapshot(outside.path());
    let r = h
        .cleaner(NOW)
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle).applied())
        .unwrap();
    assert_eq!(ids(&r.items), ["old"]);
    assert_eq!(
        r.items[0].bytes,
        5 + 7,
        "the symlink is not followed nor counted"
    );
    let mut ignored = r.ignored.clone();
    ignored.sort();
    assert_eq!(ignored, ["%2e%2e", "a.b", "evil", "notes.txt"]);
    assert_eq!(snapshot(outside.path()), before_outside);
    for n in ["evil", "notes.txt", "a.b", "%2e%2e"] {
        assert!(
            fs::symlink_metadata(sessions.join(n)).is_ok(),
            "{n} removed"
        );
    }
    assert!(h.store().join("unknown-file").exists());
    // A `sessions` that is itself a symlink is refused outright.
    let h2 = Home::new();
    fs::remove_dir(h2.store().join(SESSIONS_DIR)).unwrap();
    std::os::unix::fs::symlink(outside.path(), h2.store().join(SESSIONS_DIR)).unwrap();
    let e = h2
        .cleaner(NOW)
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle).applied())
        .unwrap_err();
    assert!(matches!(e, SweepError::NotADirectory { .. }), "{e}");
    assert_eq!(snapshot(outside.path()), before_outside);
}

#[test]
fn current_session_mode() {
    let h = Home::new();
    h.session("me", 0, 10);
    h.session("other-old", 90, 10);
    let other = snapshot(&h.session_dir("other-old"));
    let r = h
        .cleaner(NOW)
        .sweep(
            &policy(30),
            &SweepRequest::dry_run(Scope::OnlySession("me".into())),
        )
        .unwrap();
    assert_eq!(
        ids(&r.items),
        ["me"],
        "age does not matter for the current session"
    );
    assert_eq!(r.max_age_days, None);
    assert!(h.session_dir("me").exists());
    // Still honors active and pins.
    let req = SweepRequest::dry_run(Scope::OnlySession("me".into()))
        .with_active(["me"])
        .applied();
    let r = h.cleaner(NOW).sweep(&policy(30), &req).unwrap();
    assert!(r.items.is_empty());
    assert_eq!(kept(&r, "me"), Some(&KeepReason::Active));
    h.journal("me", "op", &[], 0);
    let r = h
        .cleaner(NOW)
        .sweep(
            &policy(30),
            &SweepRequest::dry_run(Scope::OnlySession("me".into())).applied(),
        )
        .unwrap();
    assert_eq!(
        kept(&r, "me"),
        Some(&KeepReason::OpenJournal { op: "op".into() })
    );
    fs::remove_file(h.session_dir("me").join("journals").join("op.json")).unwrap();
    let r = h
        .cleaner(NOW)
        .sweep(
            &policy(30),
            &SweepRequest::dry_run(Scope::OnlySession("me".into())).applied(),
        )
        .unwrap();
    assert_eq!(ids(&r.items), ["me"]);
    assert!(!h.session_dir("me").exists());
    assert_eq!(snapshot(&h.session_dir("other-old")), other);
    assert!(
        h.cleaner(NOW).last_sweep().unwrap().is_none(),
        "a current-session sweep is not the daily sweep"
    );
    // An unknown session id: nothing.
    let r = h
        .cleaner(NOW)
        .sweep(
            &policy(30),
            &SweepRequest::dry_run(Scope::OnlySession("nobody".into())).applied(),
        )
        .unwrap();
    assert!(r.items.is_empty() && r.kept.is_empty());
}

#[test]
fn without_backend_nothing_is_deleted() {
    let h = Home::new();
    h.session("old", 400, 10);
    let before = snapshot(&h.home);
    let port = NoBackend::default();
    assert!(matches!(
        policy_status(&port),
        PolicyStatus::Unavailable { .. }
    ));
    for req in [
        SweepRequest::dry_run(Scope::Idle),
        SweepRequest::dry_run(Scope::Idle).applied(),
        SweepRequest::dry_run(Scope::OnlySession("old".into())).applied(),
    ] {
        let e = h.cleaner(NOW).sweep(&port, &req).unwrap_err();
        assert!(
            matches!(e, SweepError::Policy(PolicyError::Unavailable { .. })),
            "{e}"
        );
        assert_eq!(e.code(), "rewind/failed");
    }
    let e = h
        .cleaner(NOW)
        .auto_sweep(&port, &[], &Pins::none())
        .unwrap_err();
    assert!(matches!(
        e,
        SweepError::Policy(PolicyError::Unavailable { .. })
    ));
    assert!(set_enabled(&port, true).is_err());
    assert!(set_max_age_days(&port, 7).is_err());
    // A backend holding an out-of-range cutoff fails closed too.
    let bad = MemoryPolicy::new(Policy {
        enabled: true,
        max_age_days: 0,
    });
    assert!(matches!(
        h.cleaner(NOW)
            .sweep(&bad, &SweepRequest::dry_run(Scope::Idle).applied()),
        Err(SweepError::Policy(_))
    ));
    assert!(matches!(
        policy_status(&bad),
        PolicyStatus::Unavailable { .. }
    ));
    assert_eq!(snapshot(&h.home), before);
}

#[test]
fn policy_port_roundtrip() {
    let port = MemoryPolicy::default();
    assert_eq!(
        policy_status(&port),
        PolicyStatus::Available(Policy {
            enabled: false,
            max_age_days: DEFAULT_MAX_AGE_DAYS
        })
    );
    assert_eq!(
        set_enabled(&port, true).unwrap(),
        Policy {
            enabled: true,
            max_age_days: DEFAULT_MAX_AGE_DAYS
        }
    );
    assert_eq!(
        set_max_age_days(&port, 7).unwrap(),
        Policy {
            enabled: true,
            max_age_days: 7
        }
    );
    for bad in [0, MAX_MAX_AGE_DAYS + 1] {
        let e = set_max_age_days(&port, bad).unwrap_err();
        assert_eq!(e.code(), "rewind/bad-request");
    }
    assert_eq!(
        load_policy(&port).unwrap(),
        Policy {
            enabled: true,
            max_age_days: 7
        }
    );
    assert!(!set_enabled(&port, false).unwrap().enabled);
}

#[test]
fn auto_sweep_runs_at_most_daily() {
    let h = Home::new();
    h.session("old", 40, 10);
    let off = MemoryPolicy::new(Policy {
        enabled: false,
        max_age_days: 30,
    });
    assert_eq!(
        h.cleaner(NOW).auto_sweep(&off, &[], &Pins::none()).unwrap(),
        AutoSweep::Disabled
    );
    assert!(h.session_dir("old").exists());
    let on = policy(30);
    let AutoSweep::Ran {
        report,
        quarantined: None,
    } = h.cleaner(NOW).auto_sweep(&on, &[], &Pins::none()).unwrap()
    else {
        panic!()
    };
    assert_eq!(ids(&report.items), ["old"]);
    assert!(!h.session_dir("old").exists());
    let rec: serde_json::Value =
        serde_json::from_slice(&fs::read(h.home.join(LAST_SWEEP_FILE)).unwrap()).unwrap();
    assert_eq!(
        (
            rec["version"].as_u64(),
            rec["at"].as_u64(),
            rec["trigger"].as_str()
        ),
        (Some(1), Some(NOW), Some("auto"))
    );
    // Within a day: not due, even with new idle sessions.
    h.session("old-2", 40, 10);
    assert_eq!(
        h.cleaner(NOW + DAY_MS - 1)
            .auto_sweep(&on, &[], &Pins::none())
            .unwrap(),
        AutoSweep::NotDue { last: NOW }
    );
    assert!(h.session_dir("old-2").exists());
    // A day later it runs, honoring active sessions.
    h.session("old-3", 40, 10);
    let active = vec!["old-3".to_string()];
    let AutoSweep::Ran { report, .. } = h
        .cleaner(NOW + DAY_MS)
        .auto_sweep(&on, &active, &Pins::none())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(ids(&report.items), ["old-2"]);
    assert!(h.session_dir("old-3").exists());
    // A record from the future (clock moved back) does not block forever.
    assert!(matches!(
        h.cleaner(NOW)
            .auto_sweep(&on, &active, &Pins::none())
            .unwrap(),
        AutoSweep::Ran { .. }
    ));
}

#[test]
fn last_sweep_record_corrupt_or_newer() {
    let h = Home::new();
    h.session("old", 40, 10);
    let on = policy(30);
    fs::write(h.home.join(LAST_SWEEP_FILE), b"{not json").unwrap();
    assert!(matches!(
        h.cleaner(NOW).last_sweep(),
        Err(RecordError::Corrupt { .. })
    ));
    let AutoSweep::Ran {
        quarantined: Some(aside),
        ..
    } = h.cleaner(NOW).auto_sweep(&on, &[], &Pins::none()).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        fs::read(h.home.join(&aside)).unwrap(),
        b"{not json",
        "corrupt bytes kept aside"
    );
    assert_eq!(h.cleaner(NOW).last_sweep().unwrap().unwrap().at, NOW);
    // Newer: fails closed, nothing swept.
    h.session("old-2", 40, 10);
    let newer = br#"{"version": 2, "at": 1}"#;
    fs::write(h.home.join(LAST_SWEEP_FILE), newer).unwrap();
    assert!(matches!(
        h.cleaner(NOW + 2 * DAY_MS).last_sweep(),
        Err(RecordError::NewerVersion { found: 2 })
    ));
    let e = h
        .cleaner(NOW + 2 * DAY_MS)
        .auto_sweep(&on, &[], &Pins::none())
        .unwrap_err();
    assert!(
        matches!(e, SweepError::Record(RecordError::NewerVersion { .. })),
        "{e}"
    );
    assert!(h.session_dir("old-2").exists());
    assert_eq!(fs::read(h.home.join(LAST_SWEEP_FILE)).unwrap(), newer);
}

#[test]
fn newer_or_corrupt_store_fails_closed() {
    let h = Home::new();
    h.session("old", 400, 10);
    let before = snapshot(&h.home);
    for (marker, want_newer) in [
        (&br#"{"store_version": 3}"#[..], true),
        (b"garbage", false),
        (b"{}", false),
    ] {
        fs::write(h.store().join(STORE_MARKER), marker).unwrap();
        let e = h
            .cleaner(NOW)
            .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle).applied())
            .unwrap_err();
        if want_newer {
            assert!(matches!(e, SweepError::NewerStore { found: 3 }), "{e}");
        } else {
            assert!(matches!(e, SweepError::CorruptStore { .. }), "{e}");
        }
        fs::write(h.store().join(STORE_MARKER), br#"{"store_version": 1}"#).unwrap();
        assert_eq!(snapshot(&h.home), before);
    }
    // A store not created yet: nothing to sweep, no error.
    let tmp = tempfile::tempdir().unwrap();
    let r = Cleaner::open(tmp.path())
        .unwrap()
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle).applied())
        .unwrap();
    assert!(r.items.is_empty());
}

const CHILD_ENV: &str = "REWIND_CLEANUP_CHILD";

/// Entry point of the child process of the crash test; a no-op in a normal run.
#[test]
fn child_main() {
    let Ok(home) = std::env::var(CHILD_ENV) else {
        return;
    };
    let target = CrashTarget::from_env().unwrap();
    assert!(CleanupStep::from_name(target.point()).is_some());
    let cleaner = Cleaner::open(home)
        .unwrap()
        .with_clock(Arc::new(|| NOW))
        .with_crash_seam(Arc::new(move |step| target.reached(step.name())));
    cleaner
        .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle).applied())
        .unwrap();
}

#[test]
fn killed_sweeper_leaves_whole_sessions_and_a_whole_record() {
    let old_record = br#"{"version":1,"at":1,"trigger":"auto","removed":0,"bytes":0}"#;
    let cases = each_point(CleanupStep::ALL, |step| {
        let h = Home::new();
        let old = snapshot(&h.session("old", 40, 10));
        let fresh = snapshot(&h.session("fresh", 1, 10));
        fs::write(h.home.join(LAST_SWEEP_FILE), old_record).unwrap();
        let killed = CrashChild::new("child_main")
            .env(CHILD_ENV, &h.home)
            .run(step.name(), 0);
        assert!(killed.killed(), "child ended before {}", step.name());

        // The fresh session is untouched; the old one is whole or gone from `sessions/`.
        assert_eq!(snapshot(&h.session_dir("fresh")), fresh, "{}", step.name());
        let old_now = snapshot(&h.session_dir("old"));
        assert!(
            old_now.is_empty() || old_now == old,
            "{}: torn session",
            step.name()
        );
        assert!(
            old_now.is_empty(),
            "{}: every step comes after the move",
            step.name()
        );
        // The record is the old one or the new one, never torn.
        let rec = h.cleaner(NOW).last_sweep().unwrap().unwrap();
        match step {
            CleanupStep::RecordRenamed => assert_eq!((rec.at, rec.removed), (NOW, 1)),
            _ => assert_eq!(
                fs::read(h.home.join(LAST_SWEEP_FILE)).unwrap(),
                old_record,
                "{}",
                step.name()
            ),
        }
        let trash = fs::read_dir(h.store().join(TRASH_DIR)).unwrap().count();
        assert_eq!(
            trash,
            usize::from(step == CleanupStep::SessionMovedToTrash),
            "{}",
            step.name()
        );

        // Recovery: the store empties its trash when it opens, and the next
        // sweep removes the killed writer's temp record.
        drop(
            snapshot_store::Store::open(&h.store(), snapshot_store::StoreOptions::default())
                .unwrap(),
        );
        assert_eq!(fs::read_dir(h.store().join(TRASH_DIR)).unwrap().count(), 0);
        h.cleaner(NOW + 1)
            .sweep(&policy(30), &SweepRequest::dry_run(Scope::Idle).applied())
            .unwrap();
        let leftovers: Vec<_> = fs::read_dir(&h.home)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{}: {leftovers:?}", step.name());
        assert_eq!(h.cleaner(NOW).last_sweep().unwrap().unwrap().at, NOW + 1);
        assert_eq!(snapshot(&h.session_dir("fresh")), fresh);
    });
    assert_eq!(cases, CleanupStep::ALL.len());
}

#[derive(Clone, Debug)]
struct Spec {
    days_ago: u64,
    active: bool,
    pinned: bool,
    journal: u8, // 0 none, 1 open, 2 finished
}

fn spec() -> impl Strategy<Value = Spec> {
    (0u64..120, any::<bool>(), any::<bool>(), 0u8..3).prop_map(
        |(days_ago, active, pinned, journal)| Spec {
            days_ago,
            active: active && days_ago % 3 == 0,
            pinned: pinned && days_ago % 4 == 0,
            journal,
        },
    )
}

fn cases() -> u32 {
    rewind_test_support::cases(32)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// An applied sweep never touches an active, pinned, journal-pinned or
    /// recent session, and removes exactly the others.
    #[test]
    fn sweep_never_touches_protected_sessions(specs in proptest::collection::vec(spec(), 1..12), cutoff in 1u32..90) {
        let h = Home::new();
        let mut active = Vec::new();
        let mut pins = Pins::none();
        for (i, s) in specs.iter().enumerate() {
            let id = format!("s{i}");
            h.session(&id, s.days_ago, i);
            match s.journal {
                1 => h.journal(&id, "op", &[r#"{"p":"apply","i":0,"s":"failed","e":"x"}"#], s.days_ago),
                2 => h.journal(&id, "op", &[r#"{"p":"apply","s":"completed"}"#, r#"{"p":"undo","s":"undone"}"#], s.days_ago),
                _ => {}
            }
            if s.active { active.push(id.clone()); }
            if s.pinned { pins.insert(id.clone()); }
        }
        let before: Vec<_> = (0..specs.len()).map(|i| snapshot(&h.session_dir(&format!("s{i}")))).collect();
        let req = SweepRequest::dry_run(Scope::Idle).with_active(active).with_pins(pins).applied();
        let r = h.cleaner(NOW).sweep(&policy(cutoff), &req).unwrap();
        prop_assert!(r.failed.is_empty());
        for (i, s) in specs.iter().enumerate() {
            let id = format!("s{i}");
            let protected = s.active || s.pinned || s.journal == 1 || s.days_ago < u64::from(cutoff);
            let removed = r.items.iter().any(|it| it.session_id == id);
            prop_assert_eq!(removed, !protected, "{} {:?}", id, s);
            if protected {
                prop_assert_eq!(&snapshot(&h.session_dir(&id)), &before[i]);
            } else {
                prop_assert!(!h.session_dir(&id).exists());
            }
        }
    }
}

#[test]
fn the_quota_result_joins_the_last_sweep_record() {
    let h = Home::new();
    let on = policy(30);
    // Nothing recorded yet: nothing to add to.
    let quota = rewind_cleanup::QuotaRecord {
        max_bytes: 4096,
        removed: 2,
        freed: 1234,
        bytes_after: 4000,
    };
    h.cleaner(NOW).record_quota(quota.clone()).unwrap();
    assert!(h.cleaner(NOW).last_sweep().unwrap().is_none());
    let AutoSweep::Ran { .. } = h.cleaner(NOW).auto_sweep(&on, &[], &Pins::none()).unwrap() else {
        panic!()
    };
    assert_eq!(h.cleaner(NOW).last_sweep().unwrap().unwrap().quota, None);
    h.cleaner(NOW).record_quota(quota.clone()).unwrap();
    let last = h.cleaner(NOW).last_sweep().unwrap().unwrap();
    assert_eq!(last.quota, Some(quota));
    assert_eq!(last.at, NOW, "the sweep's own fields are kept");
    let rec: serde_json::Value =
        serde_json::from_slice(&fs::read(h.home.join(LAST_SWEEP_FILE)).unwrap()).unwrap();
    assert_eq!(
        rec["quota"],
        serde_json::json!({"maxBytes": 4096, "removed": 2, "freed": 1234, "bytesAfter": 4000})
    );
}
