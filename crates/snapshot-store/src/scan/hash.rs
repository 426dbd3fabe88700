//! Reading changed files into the content-addressed store, in parallel.
//!
//! Files are opened through the session's workspace handle, one component at a
//! time without following symlinks (as every other workspace read), and streamed
//! into `blobs/` by the blob writer. A file whose size or times change while it
//! is read is read once more; if it changes again it is not covered.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::blob::{LogSink, Stored, store_file};
use crate::error::FsFailure;
use crate::fsio::{DiskMeta, FileKind, StoreFs, Walk, WsDir, WsFs, by_directory};
use crate::path::RelPath;
use crate::seam::Area;

use super::index::{Coverage, IdxEntry, Stat, Uncovered};

/// The outcome for one path.
#[derive(Debug, Clone)]
pub(crate) enum Hashed {
    /// Now in the index as this entry.
    Entry(IdxEntry),
    /// Gone (or its parent is no directory any more).
    Vanished,
}

fn same_content_meta(a: &DiskMeta, b: &DiskMeta) -> bool {
    a.size == b.size
        && a.mtime_s == b.mtime_s
        && a.mtime_ns == b.mtime_ns
        && a.ctime_s == b.ctime_s
        && a.ctime_ns == b.ctime_ns
        && a.ino == b.ino
}

fn errno_of(e: &FsFailure) -> i32 {
    e.source
        .raw_os_error()
        .unwrap_or(rustix::io::Errno::IO.raw_os_error())
}

fn not(stat: Stat, u: Uncovered) -> Hashed {
    Hashed::Entry(IdxEntry {
        stat,
        cov: Coverage::Not(u),
    })
}

/// Reads one file (its parent already opened) into the store.
fn one(
    store: &StoreFs,
    ws: &WsFs,
    dir: &WsDir<'_>,
    rel: &RelPath,
    walked: Stat,
    cap: u64,
    sink: &LogSink<'_>,
) -> Result<Hashed, FsFailure> {
    let (_, name) = rel.split_last();
    for attempt in 0..2 {
        let opened = match ws.open_read(dir, name, rel) {
            Ok(o) => o,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                // Became a symlink since the walk.
                return Ok(match ws.lstat(dir, name, rel)? {
                    Some(m) => not(Stat::from_disk(&m), Uncovered::Symlink),
                    None => Hashed::Vanished,
                });
            }
            Err(e) if e.area == Area::Workspace => {
                return Ok(not(walked, Uncovered::Unreadable(errno_of(&e))));
            }
            Err(e) => return Err(e),
        };
        let Some((mut f, meta)) = opened else {
            return Ok(Hashed::Vanished);
        };
        let stat = Stat::from_disk(&meta);
        match meta.kind {
            FileKind::File if meta.nlink > 1 => return Ok(not(stat, Uncovered::HardLink)),
            FileKind::File => {}
            FileKind::Symlink => return Ok(not(stat, Uncovered::Symlink)),
            FileKind::Dir => return Ok(Hashed::Vanished),
            FileKind::Other => return Ok(not(stat, Uncovered::Special)),
        }
        if cap != 0 && meta.size > cap {
            return Ok(not(stat, Uncovered::OverFileCap));
        }
        let stored = match store_file(store, ws, &mut f, rel, meta.size, cap, Some(sink)) {
            Ok(s) => s,
            Err(e) if e.area == Area::Workspace => {
                return Ok(not(stat, Uncovered::Unreadable(errno_of(&e))));
            }
            Err(e) => return Err(e),
        };
        let after = rustix::fs::fstat(&f)
            .map(|st| DiskMeta::from_stat(&st))
            .ok();
        let steady = after.is_some_and(|a| same_content_meta(&a, &meta));
        let kept = matches!(stored, Stored::Kept { .. });
        match stored {
            Stored::OverCap { .. } if steady => return Ok(not(stat, Uncovered::OverFileCap)),
            Stored::Blob { sha256, size, .. } | Stored::Kept { sha256, size, .. }
                if steady && size == meta.size =>
            {
                let mut sha = [0u8; 32];
                if hex::decode_to_slice(&sha256, &mut sha).is_err() {
                    return Ok(not(stat, Uncovered::Changing));
                }
                let cov = if kept {
                    Coverage::Kept(sha)
                } else {
                    Coverage::Hashed(sha)
                };
                return Ok(Hashed::Entry(IdxEntry { stat, cov }));
            }
            _ if attempt == 0 => continue,
            _ => return Ok(not(stat, Uncovered::Changing)),
        }
    }
    Ok(not(walked, Uncovered::Changing))
}

/// Reads `items` (sorted by path) into the store using up to `threads` threads;
/// results in the same order. Store-side failures abort (the first is returned).
pub(crate) fn hash_all(
    store: &StoreFs,
    ws: &WsFs,
    cap: u64,
    sink: &LogSink<'_>,
    items: &[(Box<[u8]>, Stat)],
    threads: usize,
) -> Result<Vec<Hashed>, FsFailure> {
    let threads = if threads == 0 { crate::cpus() } else { threads };
    // Set by the first store-side failure: the runs not started yet are skipped.
    let failed = AtomicBool::new(false);
    let runs = by_directory(
        items,
        |(p, _)| p,
        threads,
        |run| {
            if failed.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            let r = hash_run(store, ws, cap, sink, run);
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            r
        },
    );
    let mut out = Vec::with_capacity(items.len());
    for r in runs {
        out.extend(r?);
    }
    Ok(out)
}

/// [`hash_all`] of one run of paths of the same parent directory.
fn hash_run(
    store: &StoreFs,
    ws: &WsFs,
    cap: u64,
    sink: &LogSink<'_>,
    run: &[(Box<[u8]>, Stat)],
) -> Result<Vec<Hashed>, FsFailure> {
    let mut local = Vec::with_capacity(run.len());
    let mut dir: Option<Option<WsDir<'_>>> = None;
    for (path, walked) in run {
        let Ok(rel) = RelPath::from_bytes(path) else {
            local.push(Hashed::Vanished);
            continue;
        };
        if dir.is_none() {
            let mut created = Vec::new();
            dir = Some(match ws.walk_parent(&rel, false, &mut created) {
                Ok(Walk::Parent(d)) => Some(d),
                Ok(_) => None,
                Err(e) if e.area == Area::Workspace => {
                    let u = Uncovered::Unreadable(errno_of(&e));
                    local.push(not(*walked, u));
                    continue;
                }
                Err(e) => return Err(e),
            });
        }
        let Some(Some(d)) = dir.as_ref() else {
            local.push(Hashed::Vanished);
            continue;
        };
        local.push(one(store, ws, d, &rel, *walked, cap, sink)?);
    }
    Ok(local)
}
