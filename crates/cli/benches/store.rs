//! `dsh-rewind du` and `dsh-rewind verify` on a store with 100,000 blobs, against a raw walk
//! (`read_dir` + `symlink_metadata` of every store file) and a raw hash (read + SHA-256 of
//! every blob file) of the same files. Both sides are timed in alternation in one run.

#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::fs;
use std::io::Read;
use std::path::Path;

use sha2::Digest;
use snapshot_store::{Store, StoreOptions};

const BLOBS: usize = 100_000;

/// A store with one session whose one tool call captured `BLOBS` distinct small files.
fn build(root: &Path, ws: &Path) -> Store {
    fs::create_dir_all(ws.join("src")).unwrap();
    for i in 0..BLOBS {
        let dir = ws.join("src").join(format!("d{:03}", i % 1000));
        if i < 1000 {
            fs::create_dir_all(&dir).unwrap();
        }
        fs::write(
            dir.join(format!("f{i:06}.txt")),
            format!("file {i}\n{}\n", "x".repeat(i % 200)),
        )
        .unwrap();
    }
    let store = Store::open(root, StoreOptions::default()).unwrap();
    let s = store.session("bench", ws).unwrap();
    s.recheck_tracked(1).unwrap();
    for i in 0..BLOBS {
        let rel = format!("src/d{:03}/f{i:06}.txt", i % 1000);
        s.capture_before("call-1", rel.as_ref()).unwrap();
    }
    s.commit("call-1", 1, true).unwrap();
    store
}

/// Raw walk: every file below `dir`, sizes summed (no symlink followed).
fn raw_walk(dir: &Path) -> (u64, u64) {
    let (mut n, mut bytes) = (0, 0);
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let md = fs::symlink_metadata(e.path()).unwrap();
        if md.is_dir() {
            let (a, b) = raw_walk(&e.path());
            n += a;
            bytes += b;
        } else {
            n += 1;
            bytes += md.len();
        }
    }
    (n, bytes)
}

/// Raw hash: read and SHA-256 every blob file.
fn raw_hash(blobs: &Path) -> usize {
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0;
    for e in fs::read_dir(blobs).unwrap() {
        let mut f = fs::File::open(e.unwrap().path()).unwrap();
        let mut h = sha2::Sha256::new();
        loop {
            let k = f.read(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
        }
        std::hint::black_box(h.finalize());
        n += 1;
    }
    n
}

fn main() {
    let mut report = timing::Report::new(
        "cli-store",
        "dsh-rewind: du and verify of a store with 100,000 blobs",
        "One session whose tool call captured 100,000 distinct files (9 to 208 bytes each). \
         `du`: `Store::inventory` (every record parsed, every blob sized, bytes per session and \
         unreferenced blobs) vs a raw `read_dir` + `symlink_metadata` walk of the store. `verify`: \
         `Store::verify` (every record parsed, every blob re-hashed, missing blobs looked up) vs a raw \
         read + SHA-256 of every blob file.",
    );
    let tmp = tempfile::tempdir().unwrap();
    let (root, ws) = (tmp.path().join("store"), tmp.path().join("ws"));
    let store = build(&root, &ws);
    let inv = store.inventory().unwrap();
    assert_eq!(inv.blobs, BLOBS);
    let (du, walk) = timing::pair(
        5,
        || {
            let inv = store.inventory().unwrap();
            assert_eq!(inv.blobs, BLOBS);
        },
        || {
            let (n, _) = raw_walk(&root);
            assert!(n as usize >= BLOBS);
        },
    );
    report.row("du: 100,000 blobs", du, walk, None);
    let (verify, hash) = timing::pair(
        3,
        || {
            let r = store.verify(&mut |_, _| {}).unwrap();
            assert!(r.problems.is_empty());
            assert_eq!(r.blobs as usize, BLOBS);
        },
        || assert_eq!(raw_hash(&root.join("blobs")), BLOBS),
    );
    report.row("verify: 100,000 blobs", verify, hash, None);
    report.write();
}
