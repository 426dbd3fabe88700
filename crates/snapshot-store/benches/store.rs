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

/// Distinct content of `size` bytes for index `i`.
fn content(size: usize, i: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..size)
        .map(|k| (k.wrapping_mul(31) ^ (k >> 7)) as u8)
        .collect();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
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

    // Capture of new content, per size.
    for (label, size, rounds) in [
        ("4 KiB", 4 << 10, 200),
        ("64 KiB", 64 << 10, 100),
        ("1 MiB", 1 << 20, 30),
        ("8 MiB", 8 << 20, 8),
    ] {
        let b = Bench::new();
        let store = b.store(Durability::ProcessCrash);
        let s = b.session(&store);
        for i in 0..=rounds {
            std::fs::write(b.cwd.join(format!("s{i}")), content(size, i)).unwrap();
            std::fs::write(b.cwd.join(format!("r{i}")), content(size, 1_000_000 + i)).unwrap();
        }
        let (mut si, mut ri) = (0, 0);
        let (subject, baseline) = timing::pair(
            rounds,
            || {
                s.capture_before(&format!("c{si}"), Path::new(&format!("s{si}")))
                    .unwrap();
                si += 1;
            },
            || {
                raw_capture(&b.cwd.join(format!("r{ri}")), &b.raw, ri, false);
                ri += 1;
            },
        );
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

    // Plan + journaled restore of 1,000 × 16 KiB files.
    for (durability, rounds) in [(Durability::ProcessCrash, 10), (Durability::PowerLoss, 4)] {
        let b = Bench::new();
        let store = b.store(durability);
        let s = b.session(&store);
        let n = 1000;
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
        let label = if sync {
            "plan + journaled restore 1,000 × 16 KiB, PowerLoss (fsync) vs copy + fsync"
        } else {
            "plan + journaled restore 1,000 × 16 KiB vs plain copy"
        };
        report.row(label, subject, baseline, Some(2.0));
    }

    // Durable capture.
    {
        let b = Bench::new();
        let store = b.store(Durability::PowerLoss);
        let s = b.session(&store);
        let rounds = 30;
        for i in 0..=rounds {
            std::fs::write(b.cwd.join(format!("s{i}")), content(64 << 10, i)).unwrap();
            std::fs::write(
                b.cwd.join(format!("r{i}")),
                content(64 << 10, 1_000_000 + i),
            )
            .unwrap();
        }
        let (mut si, mut ri) = (0, 0);
        let (subject, baseline) = timing::pair(
            rounds,
            || {
                s.capture_before(&format!("c{si}"), Path::new(&format!("s{si}")))
                    .unwrap();
                si += 1;
            },
            || {
                raw_capture(&b.cwd.join(format!("r{ri}")), &b.raw, ri, true);
                ri += 1;
            },
        );
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
