//! Workspace scan benchmarks, each against its raw baseline measured in the same
//! run (see `benches/support/timing.rs`). Results go to
//! `target/bench-results/snapshot-store-scan.md`.
//!
//! * re-scan of an unchanged tree (3k / 20k / 100k files) vs a raw parallel stat
//!   walk of the same tree (the `ignore` crate's walker, no ignore rules, one
//!   `lstat` per entry);
//! * the first scan (baseline) of 20k files / 200 MB vs copying those files;
//! * index bytes per file, on disk and held in memory after a re-scan.
//!
//! Arguments that do not start with `--` select cases by substring of their label
//! (`3k`, `20k`, `100k`, `first`); none runs every case.
#![allow(unsafe_code)] // the counting global allocator below

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use snapshot_store::{ScanPhase, ScanRequest, Store, StoreOptions};

/// Counts the net heap growth while `COUNTING` is set (off during the timed rounds,
/// so that the timings pay one relaxed load per allocation and nothing else).
struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static NET: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            NET.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            NET.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            NET.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Net heap growth over `f` (what it leaves allocated, e.g. a cached index).
fn heap_kept(f: impl FnOnce()) -> isize {
    NET.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    f();
    COUNTING.store(false, Ordering::SeqCst);
    NET.load(Ordering::SeqCst)
}

fn selected(filters: &[String], label: &str) -> bool {
    filters.is_empty() || filters.iter().any(|f| label.contains(f.as_str()))
}

fn make_tree(root: &Path, files: usize, size: usize) {
    for i in 0..files {
        let d = root.join(format!("d{}/e{}", i % 40, (i / 40) % 25));
        if i < 1000 || i % 40 == 0 {
            std::fs::create_dir_all(&d).unwrap();
        }
        let mut bytes = format!("file {i}\n").into_bytes();
        bytes.resize(size, b'a' + (i % 26) as u8);
        std::fs::write(d.join(format!("f{i}.txt")), bytes).unwrap();
    }
}

fn raw_walk(root: &Path) -> u64 {
    let n = AtomicU64::new(0);
    let mut b = ignore::WalkBuilder::new(root);
    b.standard_filters(false).hidden(false).follow_links(false);
    b.filter_entry(|e| e.file_name() != ".git");
    b.build_parallel().run(|| {
        let n = &n;
        Box::new(move |r| {
            if let Ok(e) = r {
                if e.metadata().is_ok() {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
            ignore::WalkState::Continue
        })
    });
    n.into_inner()
}

fn copy_tree(src: &Path, dst: &Path) {
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let p = e.path();
        let t = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&t).unwrap();
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

fn index_bytes(store_root: &Path) -> u64 {
    let mut total = 0;
    for d in std::fs::read_dir(store_root.join("workspaces"))
        .unwrap()
        .flatten()
    {
        total += std::fs::metadata(d.path().join("index.bin"))
            .map(|m| m.len())
            .unwrap_or(0);
    }
    total
}

fn request(phase: ScanPhase, anchor: u64) -> ScanRequest {
    let mut r = ScanRequest::new(phase, anchor);
    r.max_files = 1_000_000;
    r.max_baseline_bytes = u64::MAX;
    r
}

fn main() {
    let mut report = timing::Report::new(
        "snapshot-store-scan",
        "snapshot-store: workspace scan",
        "Re-scan of an unchanged tree against a raw parallel stat walk of the same tree (the `ignore` \
         crate's walker without ignore rules, one `lstat` per entry), and the first scan (the \
         baseline: every file hashed into the store) against copying the same files. Medians, \
         subject and baseline alternating; trees of small text files in two directory levels.",
    );
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let mut per_file = Vec::new();
    let mut in_memory = Vec::new();
    for (label, files, rounds) in [
        ("3k", 3_000, 30),
        ("20k", 20_000, 20),
        ("100k", 100_000, 10),
    ] {
        if !selected(&filters, label) {
            continue;
        }
        let ws = tmp.path().join(format!("ws-{label}"));
        make_tree(&ws, files, 64);
        let root = tmp.path().join(format!("store-{label}"));
        let store = Store::open(&root, StoreOptions::default()).unwrap();
        let s = store.session("bench", &ws).unwrap();
        // Let the files age past the scan's "changed just now" window.
        std::thread::sleep(Duration::from_millis(200));
        // The heap the scans leave behind: the workspace index cached in memory.
        let kept = heap_kept(|| {
            let first = s.scan(&request(ScanPhase::Boundary, 1)).unwrap();
            assert_eq!(first.files, files as u64);
            s.scan(&request(ScanPhase::Boundary, 1)).unwrap();
        });
        in_memory.push((label, kept as f64 / files as f64));
        let mut anchor = 1;
        let (subject, baseline) = timing::pair(
            rounds,
            || {
                anchor += 1;
                let r = s.scan(&request(ScanPhase::Boundary, anchor)).unwrap();
                assert_eq!(r.recorded, 0);
            },
            || {
                assert!(raw_walk(&ws) > files as u64);
            },
        );
        let goal = (label != "3k").then_some(1.5);
        report.row(
            &format!(
                "re-scan, unchanged, {label} files (absolute goal: {})",
                match label {
                    "20k" => "≤ 30 ms",
                    "100k" => "≤ 150 ms",
                    _ => "—",
                }
            ),
            subject,
            baseline,
            goal,
        );
        per_file.push((label, index_bytes(&root) as f64 / files as f64));
        drop(s);
        drop(store);
        std::fs::remove_dir_all(&ws).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    // The baseline: 20k files / 200 MB, against copying them.
    if selected(&filters, "first") {
        let ws = tmp.path().join("ws-base");
        make_tree(&ws, 20_000, 10_000);
        let mut sub = Vec::new();
        let mut raw = Vec::new();
        for round in 0..3 {
            let root = tmp.path().join(format!("store-base-{round}"));
            let store = Store::open(&root, StoreOptions::default()).unwrap();
            let s = store.session("bench", &ws).unwrap();
            let t = Instant::now();
            let r = s.scan(&request(ScanPhase::Boundary, 1)).unwrap();
            sub.push(t.elapsed());
            assert!(r.baseline_complete && r.not_covered.is_empty());
            drop(s);
            drop(store);
            std::fs::remove_dir_all(&root).unwrap();
            let dst: PathBuf = tmp.path().join(format!("copy-{round}"));
            std::fs::create_dir_all(&dst).unwrap();
            let t = Instant::now();
            copy_tree(&ws, &dst);
            raw.push(t.elapsed());
            std::fs::remove_dir_all(&dst).unwrap();
        }
        report.row(
            "first scan (baseline), 20k files / 200 MB, vs copying them",
            timing::median(&mut sub),
            timing::median(&mut raw),
            Some(1.5),
        );
    }
    let sizes: Vec<String> = per_file
        .iter()
        .map(|(l, b)| format!("{l}: {b:.0} B/file"))
        .collect();
    let held: Vec<String> = in_memory
        .iter()
        .map(|(l, b)| format!("{l}: {b:.0} B/file"))
        .collect();
    if !sizes.is_empty() {
        report.text(&format!(
            "Index size on disk (paths of about 20 bytes) — goal ≤ ~200 bytes per file: {}.",
            sizes.join(", ")
        ));
        report.text(&format!(
            "Index size in memory (heap the first two scans leave allocated: the cached \
             index; counting allocator) — goal ≤ ~200 bytes per file: {}.",
            held.join(", ")
        ));
    }
    report.write();
}
