//! Benchmarks of the snapshot store, each next to a raw-disk baseline measured
//! in the same run (see `benches/support/timing.rs`). Results go to
//! `target/bench-results/snapshot-store.md`.
#![allow(unsafe_code)] // the counting global allocator below
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};
use snapshot_store::{Durability, Session, Store, StoreOptions};

/// Counts live heap bytes and their peak.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size > layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak heap growth while running `f`.
fn peak_extra(f: impl FnOnce()) -> usize {
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    f();
    PEAK.load(Ordering::SeqCst).saturating_sub(base)
}

struct Bench {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    cwd: PathBuf,
    raw: PathBuf,
}

impl Bench {
    fn new() -> Self {
        let tmp = tempfile::tempdir_in(
            std::env::var_os("BENCH_TMP")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
        )
        .unwrap();
        let base = tmp.path().to_path_buf();
        let cwd = base.join("ws");
        let raw = base.join("raw");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&raw).unwrap();
        Bench {
            _tmp: tmp,
            base,
            cwd,
            raw,
        }
    }
    fn store(&self, durability: Durability) -> Store {
        Store::open(
            &self.base.join(format!("store-{durability:?}")),
            StoreOptions {
                durability,
                ..StoreOptions::default()
            },
        )
        .unwrap()
    }
    fn session(&self, store: &Store) -> Session {
        store.session("bench", &self.cwd).unwrap()
    }
}

/// Writes back the setup's dirty data (`syncfs`) so the measurement that follows
/// does not pay for it.
fn settle(dir: &Path) {
    let d = std::fs::File::open(dir).unwrap();
    rustix::fs::syncfs(&d).unwrap();
}

/// Distinct content of `size` bytes for index `i`.
fn content(size: usize, i: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..size)
        .map(|k| (k.wrapping_mul(31) ^ (k >> 7)) as u8)
        .collect();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

/// Captures of `rounds` files of `size` bytes, each of content new to the store, against
/// [`raw_capture`]s of other files of the same size (fsyncing in `PowerLoss` mode).
fn capture_pair(
    durability: Durability,
    size: usize,
    rounds: usize,
) -> (std::time::Duration, std::time::Duration) {
    let b = Bench::new();
    let store = b.store(durability);
    let s = b.session(&store);
    for i in 0..=rounds {
        std::fs::write(b.cwd.join(format!("s{i}")), content(size, i)).unwrap();
        std::fs::write(b.cwd.join(format!("r{i}")), content(size, 1_000_000 + i)).unwrap();
    }
    let sync = durability == Durability::PowerLoss;
    let (mut si, mut ri) = (0, 0);
    timing::pair(
        rounds,
        || {
            s.capture_before(&format!("c{si}"), Path::new(&format!("s{si}")))
                .unwrap();
            si += 1;
        },
        || {
            raw_capture(&b.cwd.join(format!("r{ri}")), &b.raw, ri, sync);
            ri += 1;
        },
    )
}

/// Raw baseline of a capture: stat + read + sha256 + write + rename.
fn raw_capture(src: &Path, dst_dir: &Path, i: usize, sync: bool) {
    let _ = std::fs::symlink_metadata(src).unwrap();
    let bytes = std::fs::read(src).unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    let tmp = dst_dir.join(format!("tmp-{i}"));
    let mut f = std::fs::File::create(&tmp).unwrap();
    std::io::Write::write_all(&mut f, &bytes).unwrap();
    if sync {
        f.sync_all().unwrap();
    }
    drop(f);
    std::fs::rename(&tmp, dst_dir.join(sha)).unwrap();
    if sync {
        std::fs::File::open(dst_dir).unwrap().sync_all().unwrap();
    }
}

fn main() {
    let mut report = timing::Report::new(
        "snapshot-store",
        "snapshot-store",
        "Store operations against raw-disk baselines in the same run (medians; alternating subject and baseline). \
         Default durability is `ProcessCrash` (atomic renames, no fsync); `PowerLoss` rows compare with an fsyncing baseline.",
    );

    // One write-tool call (capture before + commit after, 16 KiB, new content each time)
    // as the store grows: the same figure at 100 … 100,000 tracked files.
    // `STORE_BENCH_ONLY=<section>` runs one section; a restore case alone is
    // `restore-1000`, `restore-10000` or `restore-power-loss`.
    let only = std::env::var("STORE_BENCH_ONLY").ok();
    let want = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o == name || o.strip_prefix(name).is_some_and(|r| r.starts_with('-')))
    };
    if want("tool-call") {
        let mut curve = Vec::new();
        for tracked in [100usize, 1_000, 10_000, 100_000] {
            let b = Bench::new();
            let store = b.store(Durability::ProcessCrash);
            let s = b.session(&store);
            // Setup: `tracked` small files, tracked through one bulk call.
            for d in 0..tracked.div_ceil(1000) {
                std::fs::create_dir_all(b.cwd.join(format!("t{d}"))).unwrap();
            }
            for i in 0..tracked {
                let rel = format!("t{}/f{i}", i / 1000);
                std::fs::write(b.cwd.join(&rel), format!("tracked {i}")).unwrap();
                s.capture_before("bulk", Path::new(&rel)).unwrap();
            }
            s.commit("bulk", 1, true).unwrap();
            s.recheck_tracked(2).unwrap();
            settle(&b.base);
            let size = 16 << 10;
            std::fs::write(b.cwd.join("w"), content(size, 0)).unwrap();
            std::fs::write(b.raw.join("w"), content(size, 0)).unwrap();
            let rounds = 300;
            let mut sub = Vec::with_capacity(rounds);
            let mut base = Vec::with_capacity(rounds);
            for i in 0..rounds + 5 {
                let call = format!("w{i}");
                let next = content(size, i + 1);
                let t = std::time::Instant::now();
                s.capture_before(&call, Path::new("w")).unwrap();
                let capture = t.elapsed();
                // The tool's write: new content, so the next capture stores a new blob.
                std::fs::write(b.cwd.join("w"), &next).unwrap();
                let t = std::time::Instant::now();
                s.commit(&call, 3 + (i / 20) as u64, true).unwrap();
                let commit = t.elapsed();
                let t = std::time::Instant::now();
                let bytes = std::fs::read(b.raw.join("w")).unwrap();
                std::hint::black_box(&bytes);
                std::fs::write(b.raw.join("w"), &next).unwrap();
                let raw = t.elapsed();
                if i >= 5 {
                    sub.push(capture + commit);
                    base.push(raw);
                }
            }
            let (subject, baseline) = (timing::median(&mut sub), timing::median(&mut base));
            report.row(
                &format!(
                    "tool call 16 KiB (capture + commit) at {tracked} tracked files vs read + write"
                ),
                subject,
                baseline,
                Some(1.5),
            );
            curve.push((tracked, subject));
        }
        let first = curve[0].1.as_secs_f64();
        let worst = curve
            .iter()
            .map(|(_, d)| d.as_secs_f64())
            .fold(0.0, f64::max);
        let best = curve
            .iter()
            .map(|(_, d)| d.as_secs_f64())
            .fold(f64::MAX, f64::min);
        report.text(&format!(
            "Tool-call curve (100 → 100,000 tracked): {}; max / min = {:.2} (goal ≤ 1.2: {}); first {}.",
            curve
                .iter()
                .map(|(n, d)| format!("{n}: {}", timing::fmt(*d)))
                .collect::<Vec<_>>()
                .join(", "),
            worst / best,
            if worst / best <= 1.2 { "met" } else { "**not met**" },
            timing::fmt(std::time::Duration::from_secs_f64(first)),
        ));
    }

    // Opening a session whose log holds 100,000 tool calls (staged + group + tracked
    // records each; 10,000 paths), as written and after compaction.
    if want("open") {
        let b = Bench::new();
        let root = b.base.join("store-open");
        {
            let store = Store::open(&root, StoreOptions::default()).unwrap();
            let s = b.session(&store);
            for d in 0..10 {
                std::fs::create_dir_all(b.cwd.join(format!("o{d}"))).unwrap();
            }
            for i in 0..10_000 {
                std::fs::write(b.cwd.join(format!("o{}/f{i}", i / 1000)), b"same").unwrap();
            }
            for i in 0..100_000usize {
                let call = format!("c{i}");
                let rel = format!("o{}/f{}", (i % 10_000) / 1000, i % 10_000);
                s.capture_before(&call, Path::new(&rel)).unwrap();
                s.commit(&call, 1 + (i / 100) as u64, true).unwrap();
            }
        }
        let log = root.join("sessions/bench/records.log");
        settle(&b.base);
        let open = || {
            let store = Store::open(&root, StoreOptions::default()).unwrap();
            let s = store.session("bench", &b.cwd).unwrap();
            assert_eq!(s.anchors().unwrap().len(), 1000);
        };
        let written = std::fs::metadata(&log).unwrap().len();
        let (subject, baseline) = timing::pair(10, open, || {
            std::hint::black_box(std::fs::read(&log).unwrap());
        });
        report.row(
            &format!(
                "open a session of 100,000 tool calls, log as written ({:.1} MiB) vs reading it",
                written as f64 / 1048576.0
            ),
            subject,
            baseline,
            None,
        );
        let as_written = subject;
        {
            // Compact: a handle's prune.
            let store = Store::open(&root, StoreOptions::default()).unwrap();
            let s = b.session(&store);
            s.prune(snapshot_store::PruneOptions {
                keep_groups: 100_000,
                keep_journals: 10,
            })
            .unwrap();
        }
        let compacted = std::fs::metadata(&log).unwrap().len();
        let (subject, baseline) = timing::pair(10, open, || {
            std::hint::black_box(std::fs::read(&log).unwrap());
        });
        report.row(
            &format!(
                "open a session of 100,000 tool calls, compacted log ({:.1} MiB) vs reading it",
                compacted as f64 / 1048576.0
            ),
            subject,
            baseline,
            None,
        );
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        report.text(&format!(
            "Open with 100,000 records — goal ≤ 50 ms: as written {:.1} ms ({}), compacted {:.1} ms ({}).",
            ms(as_written),
            if ms(as_written) <= 50.0 { "met" } else { "**not met**" },
            ms(subject),
            if ms(subject) <= 50.0 { "met" } else { "**not met**" },
        ));
    }

    // Plan + journaled restore of 1,000 (and 10,000) × 16 KiB files.
    for (durability, n, rounds, case) in [
        (Durability::ProcessCrash, 1000, 10, "restore-1000"),
        (Durability::ProcessCrash, 10_000, 3, "restore-10000"),
        (Durability::PowerLoss, 1000, 4, "restore-power-loss"),
    ] {
        if !want("restore") {
            break;
        }
        if only.as_deref().is_some_and(|o| o != "restore" && o != case) {
            continue;
        }
        let b = Bench::new();
        let store = b.store(durability);
        let s = b.session(&store);
        let src = b.base.join("copy-src");
        std::fs::create_dir_all(&src).unwrap();
        for i in 0..n {
            std::fs::write(b.cwd.join(format!("f{i}")), content(16 << 10, i)).unwrap();
            std::fs::write(src.join(format!("f{i}")), content(16 << 10, 50_000 + i)).unwrap();
        }
        s.recheck_tracked(1).unwrap();
        for i in 0..n {
            s.capture_before("bulk", Path::new(&format!("f{i}")))
                .unwrap();
        }
        for i in 0..n {
            std::fs::write(b.cwd.join(format!("f{i}")), content(16 << 10, 10_000 + i)).unwrap();
        }
        s.commit("bulk", 1, true).unwrap();
        s.recheck_tracked(2).unwrap();
        let mut k = 0usize;
        let sync = durability == Durability::PowerLoss;
        let (subject, baseline) = timing::pair(
            rounds,
            || {
                let target = if k % 2 == 0 { 1 } else { 2 };
                let plan = s.plan_restore(target).unwrap();
                assert_eq!(plan.actions.len(), n);
                let out = s.restore(&plan, &format!("op{k}")).unwrap();
                assert!(out.failed.is_empty());
                k += 1;
            },
            || {
                for i in 0..n {
                    let dst = b.raw.join(format!("f{i}"));
                    std::fs::copy(src.join(format!("f{i}")), &dst).unwrap();
                    if sync {
                        std::fs::File::open(&dst).unwrap().sync_all().unwrap();
                    }
                }
                if sync {
                    std::fs::File::open(&b.raw).unwrap().sync_all().unwrap();
                }
            },
        );
        let files = if n == 1000 { "1,000" } else { "10,000" };
        let label = if sync {
            format!("plan + journaled restore {files} × 16 KiB, PowerLoss (fsync) vs copy + fsync")
        } else {
            format!("plan + journaled restore {files} × 16 KiB vs plain copy")
        };
        report.row(&label, subject, baseline, Some(1.5));
    }

    // Plan + journaled restore of 1,000 × 16 KiB files whose before-states are packed (a
    // compacted store) vs the same restore from loose blob files, alternated
    // (`STORE_BENCH_ONLY=restore-packed`).
    if want("restore") && only.as_deref().is_none_or(|o| o == "restore" || o == "restore-packed") {
        let n = 1000;
        let setup = |pack: bool| {
            let b = Bench::new();
            let store = Store::open(
                &b.base.join("store"),
                StoreOptions {
                    keep_in_log_bytes: 0,
                    ..StoreOptions::default()
                },
            )
            .unwrap();
            let s = b.session(&store);
            for i in 0..n {
                std::fs::write(b.cwd.join(format!("f{i}")), content(16 << 10, i)).unwrap();
            }
            s.recheck_tracked(1).unwrap();
            for i in 0..n {
                s.capture_before("bulk", Path::new(&format!("f{i}"))).unwrap();
            }
            for i in 0..n {
                std::fs::write(b.cwd.join(format!("f{i}")), content(16 << 10, 10_000 + i)).unwrap();
            }
            s.commit("bulk", 1, true).unwrap();
            s.recheck_tracked(2).unwrap();
            if pack {
                let r = store.compact().unwrap();
                assert!(r.blobs_packed >= n, "{r:?}");
            }
            (b, store, s)
        };
        let (_pb, _ps, packed) = setup(true);
        let (_lb, _ls, loose) = setup(false);
        let (mut kp, mut kl) = (0usize, 0usize);
        let run = |s: &Session, k: &mut usize| {
            let target = if *k % 2 == 0 { 1 } else { 2 };
            let plan = s.plan_restore(target).unwrap();
            assert_eq!(plan.actions.len(), n);
            let out = s.restore(&plan, &format!("op{k}")).unwrap();
            assert!(out.failed.is_empty());
            *k += 1;
        };
        let (subject, baseline) = timing::pair(
            6,
            || run(&packed, &mut kp),
            || run(&loose, &mut kl),
        );
        report.row(
            "plan + journaled restore 1,000 × 16 KiB from packs vs from loose blob files",
            subject,
            baseline,
            Some(1.5),
        );
    }

    // Capture of new content, per size (`STORE_BENCH_ONLY=capture`, with the dedup hits).
    if want("capture") {
        for (label, size, rounds) in [
            ("4 KiB", 4 << 10, 200),
            ("64 KiB", 64 << 10, 100),
            ("1 MiB", 1 << 20, 30),
            ("8 MiB", 8 << 20, 8),
        ] {
            let (subject, baseline) = capture_pair(Durability::ProcessCrash, size, rounds);
            report.row(
                &format!("capture {label} (new content)"),
                subject,
                baseline,
                Some(1.3),
            );
        }

        // Dedup hit: content already in the store.
        for (label, size, rounds) in [("64 KiB", 64 << 10, 200), ("1 MiB", 1 << 20, 40)] {
            let b = Bench::new();
            let store = b.store(Durability::ProcessCrash);
            let s = b.session(&store);
            std::fs::write(b.cwd.join("f"), content(size, 7)).unwrap();
            s.capture_before("warm", Path::new("f")).unwrap();
            let mut i = 0;
            let (subject, baseline) = timing::pair(
                rounds,
                || {
                    s.capture_before(&format!("d{i}"), Path::new("f")).unwrap();
                    i += 1;
                },
                || {
                    let bytes = std::fs::read(b.cwd.join("f")).unwrap();
                    std::hint::black_box(Sha256::digest(&bytes));
                },
            );
            report.row(
                &format!("capture {label} dedup hit"),
                subject,
                baseline,
                Some(2.0),
            );
        }
    }
    if only.is_some() {
        report.write();
        return;
    }

    // Recheck of 10,000 unchanged tracked paths.
    {
        let b = Bench::new();
        let store = b.store(Durability::ProcessCrash);
        let s = b.session(&store);
        let mut paths = Vec::new();
        for d in 0..100 {
            std::fs::create_dir_all(b.cwd.join(format!("d{d}"))).unwrap();
            for f in 0..100 {
                let rel = format!("d{d}/f{f}.txt");
                std::fs::write(b.cwd.join(&rel), format!("file {d} {f}")).unwrap();
                paths.push(rel);
            }
        }
        // One bulk call tracks all paths (setup only).
        for rel in &paths {
            s.capture_before("bulk", Path::new(rel)).unwrap();
        }
        s.commit("bulk", 1, true).unwrap();
        s.recheck_tracked(2).unwrap();
        let abs: Vec<PathBuf> = paths.iter().map(|p| b.cwd.join(p)).collect();
        let mut anchor = 3;
        let (subject, baseline) = timing::pair(
            20,
            || {
                let o = s.recheck_tracked(anchor).unwrap();
                assert!(o.recorded.is_empty() && o.checked == 10_000);
                anchor += 1;
            },
            || {
                for p in &abs {
                    std::hint::black_box(std::fs::symlink_metadata(p).unwrap());
                }
            },
        );
        report.row(
            "recheck 10,000 unchanged tracked paths",
            subject,
            baseline,
            Some(1.5),
        );
    }

    // Durable capture.
    {
        let (subject, baseline) = capture_pair(Durability::PowerLoss, 64 << 10, 30);
        report.row(
            "capture 64 KiB, PowerLoss (fsync) vs fsyncing raw capture",
            subject,
            baseline,
            Some(1.3),
        );
    }

    // Peak extra heap while capturing and restoring one 8 MiB file.
    {
        let b = Bench::new();
        let store = b.store(Durability::ProcessCrash);
        let s = b.session(&store);
        std::fs::write(b.cwd.join("big"), content(8 << 20, 1)).unwrap();
        let cap = peak_extra(|| {
            s.capture_before("big", Path::new("big")).unwrap();
        });
        std::fs::write(b.cwd.join("big"), content(8 << 20, 2)).unwrap();
        s.commit("big", 1, true).unwrap();
        let res = peak_extra(|| {
            let plan = s.plan_restore(1).unwrap();
            let out = s.restore(&plan, "op").unwrap();
            assert_eq!(out.written.len(), 1);
        });
        let mib = |x: usize| x as f64 / (1024.0 * 1024.0);
        let met = |x: usize| if x <= 2 << 20 { "yes" } else { "**no**" };
        report.text(&format!(
            "Peak extra heap (counting allocator), one 8 MiB file — goal ≤ 2 MiB: capture {:.2} MiB (met: {}), plan + restore {:.2} MiB (met: {}).",
            mib(cap),
            met(cap),
            mib(res),
            met(res)
        ));
    }

    report.write();
}
