//! Content-addressed blobs: `blobs/<64 hex>`, raw bytes, named by SHA-256.
//!
//! Files up to [`WHOLE`] are read into one buffer and hashed before anything is
//! written, so a dedup hit writes nothing; larger files are streamed in
//! [`CHUNK`]-sized pieces, hashed while copied, so a file is never held in memory
//! twice.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use cap_std::fs::File;
use sha2::{Digest, Sha256};

use crate::error::FsFailure;
use crate::fsio::{CHUNK, StoreFs, WsFs, unique_suffix};
use crate::path::RelPath;
use crate::seam::CrashPoint;

/// Files up to this size are read into this thread's buffer (kept from file to file)
/// before anything is written.
pub(crate) const SMALL: usize = 64 * 1024;

/// Files up to this size are read whole before anything is written: a file over
/// [`SMALL`] into a buffer of its own, freed when it is stored. Its content is hashed
/// first, so content the store has already costs one read and no write (streamed, it
/// would be copied to a temporary file and removed). Larger files are streamed: the
/// most held in memory while capturing one file stays under 2 MiB.
pub(crate) const WHOLE: usize = 1024 * 1024;

/// Files up to this size read by a capture or at a message boundary are kept in the
/// session's record log (`blob` records) instead of a blob file each: a long turn's
/// files then cost one write at the next message, and a capture one append, not one new
/// file each (see `docs/format.md`, "Blobs kept in the log"). The default of
/// [`crate::StoreOptions::keep_in_log_bytes`]; never more than [`SMALL`] is kept.
pub(crate) const KEEP_IN_LOG: usize = 16 * 1024;

/// A log this large keeps no more content: what a boundary reads goes to blob files
/// (the log is read whole when a session opens).
pub(crate) const KEEP_LOG_MAX: u64 = 64 << 20;

/// Where [`store_file`] may keep a small file's content instead of a blob file: the
/// session's record log, whose `blob` records `kept` holds. What it keeps is collected
/// in `taken` (the caller writes it ahead of the records naming it, in one write).
pub(crate) struct LogSink<'a> {
    kept: &'a crate::records::Kept,
    taken: std::sync::Mutex<Vec<(String, crate::codec::Shared)>>,
    /// Bytes of new content the sink may still take (the log stops keeping content once
    /// it reaches [`KEEP_LOG_MAX`]).
    room: std::sync::atomic::AtomicU64,
    /// The largest file it keeps ([`crate::StoreOptions::keep_in_log_bytes`]).
    max: u64,
    /// `Some`: the sink takes nothing new (the workspace scan's reads, which the shared
    /// workspace index names): content the log keeps is left out of the blob files only
    /// for a path this session tracks with that very content (its tracked state keeps
    /// the content in the log for as long as the path holds it).
    tracked: Option<&'a std::collections::BTreeMap<RelPath, crate::records::Tracked>>,
}

impl<'a> LogSink<'a> {
    /// A sink over the blobs a log of `log_len` bytes already keeps, taking files of at
    /// most `max` bytes.
    pub(crate) fn new(kept: &'a crate::records::Kept, log_len: u64, max: u64) -> Self {
        Self {
            kept,
            taken: std::sync::Mutex::new(Vec::new()),
            room: KEEP_LOG_MAX.saturating_sub(log_len).into(),
            max,
            tracked: None,
        }
    }

    /// A sink that takes nothing: a file whose content the log keeps is not written to
    /// a blob file when this session tracks its path with that content (`tracked`); any
    /// other goes to its blob file.
    pub(crate) fn existing(
        kept: &'a crate::records::Kept,
        tracked: &'a std::collections::BTreeMap<RelPath, crate::records::Tracked>,
    ) -> Self {
        Self {
            tracked: Some(tracked),
            // Whatever the log keeps, at whatever size it was kept.
            ..Self::new(kept, KEEP_LOG_MAX, u64::MAX)
        }
    }

    /// Reserves room for `len` bytes of new content; `false` when the log is full.
    fn reserve(&self, len: usize) -> bool {
        use std::sync::atomic::Ordering;
        self.room
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                r.checked_sub(len as u64)
            })
            .is_ok()
    }

    /// Whether the log keeps `sha` for `rel` (see [`LogSink::tracked`]).
    fn keeps_for(&self, rel: &RelPath, sha: &str) -> bool {
        self.kept.contains_key(sha)
            && self.tracked.is_some_and(|t| {
                matches!(
                    t.get(rel).map(|t| &t.known),
                    Some(crate::format::Known::Present { sha256: Some(s), .. }) if s == sha
                )
            })
    }

    /// The `blob` records to write: every content taken (once per name), also those the
    /// log kept already (a compaction by another handle may drop one meanwhile; the
    /// writer leaves out what the log still has when it writes).
    pub(crate) fn records(&self) -> Vec<crate::codec::Record> {
        let mut taken = std::mem::take(&mut *self.taken.lock().unwrap_or_else(|e| e.into_inner()));
        taken.sort_by(|a, b| a.0.cmp(&b.0));
        taken.dedup_by(|a, b| a.0 == b.0);
        taken
            .into_iter()
            .map(|(sha256, bytes)| crate::codec::Record::Blob { sha256, bytes })
            .collect()
    }

    fn take(&self, sha: &str, bytes: crate::codec::Shared) {
        self.taken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((sha.to_string(), bytes));
    }
}

/// Store-relative path of a blob: `blobs/<64 hex>` (one flat directory: fewer
/// directories to touch per write than a fan-out, and fine for the store's scale).
pub(crate) fn blob_path(sha: &str) -> PathBuf {
    Path::new("blobs").join(sha)
}

/// What streaming a file into the blob store produced.
pub(crate) enum Stored {
    /// The content is in the store under `sha256`.
    Blob {
        sha256: String,
        size: u64,
        dedup: bool,
    },
    /// More than `cap` bytes were read: nothing stored.
    OverCap { size: u64 },
    /// The content is kept in the session's log (see [`LogSink`]): taken by the sink
    /// (`dedup`: the log kept it already).
    Kept {
        sha256: String,
        size: u64,
        dedup: bool,
    },
}

/// Streams an open workspace file into the blob store. `cap == 0` means no cap. With
/// `sink`, a file of at most the sink's limit that no blob file holds yet is kept
/// in the log instead ([`LogSink`]).
pub(crate) fn store_file(
    store: &StoreFs,
    ws: &WsFs,
    file: &mut File,
    rel: &RelPath,
    size_hint: u64,
    cap: u64,
    sink: Option<&LogSink<'_>>,
) -> Result<Stored, FsFailure> {
    if size_hint > WHOLE as u64 {
        return stream(store, ws, file, rel, cap, None);
    }
    // One buffer: read it all (a file that grew past the buffer continues on the streaming
    // path).
    let whole = Whole {
        store,
        ws,
        rel,
        cap,
        size_hint,
        sink,
    };
    if size_hint as usize > SMALL {
        // Zeroed by the allocator (fresh pages), not written here.
        return whole.store(
            file,
            &mut vec![0; size_hint as usize + 1],
            size_hint as usize,
        );
    }
    // A small file's buffer is this thread's, allocated and zeroed once (not per file): only
    // the bytes read into it for this file (`..len`) are looked at.
    SMALL_BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => whole.store(file, &mut buf, SMALL),
        Err(_) => whole.store(file, &mut Vec::new(), SMALL),
    })
}

thread_local! {
    /// The read buffer of [`store_file`]'s small files, one per thread.
    static SMALL_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// [`store_file`] of a file expected to be at most [`WHOLE`] bytes.
struct Whole<'a> {
    store: &'a StoreFs,
    ws: &'a WsFs,
    rel: &'a RelPath,
    cap: u64,
    size_hint: u64,
    sink: Option<&'a LogSink<'a>>,
}

impl Whole<'_> {
    /// Reads the file into `buf` (grown to `limit + 1` bytes when shorter; its earlier
    /// contents are never read). `size_hint` is the file's size by its `fstat`: a read that
    /// returns less than asked for and brings the total to exactly that size has met the end
    /// of the file (a regular file's read stops short only there), so no further read is made
    /// to see end-of-file. A file that grew since its `fstat` fills the read or ends past that
    /// size and is read on as before; one that grew past `limit` is streamed, the bytes read
    /// so far first.
    fn store(&self, file: &mut File, buf: &mut Vec<u8>, limit: usize) -> Result<Stored, FsFailure> {
        let (store, rel) = (self.store, self.rel);
        let over = |n: u64| self.cap != 0 && n > self.cap;
        if buf.len() < limit + 1 {
            buf.resize(limit + 1, 0);
        }
        let buf = &mut buf[..=limit];
        let mut len = 0usize;
        loop {
            let asked = buf.len() - len;
            let n = self.ws.read_chunk(file, rel, &mut buf[len..])?;
            if n == 0 {
                break;
            }
            len += n;
            if len == buf.len() || (n < asked && len as u64 == self.size_hint) {
                break;
            }
        }
        if len > limit {
            // Grew while reading: continue streaming with what we have as the first chunk.
            return stream(store, self.ws, file, rel, self.cap, Some(&buf[..len]));
        }
        let data = &buf[..len];
        if over(len as u64) {
            return Ok(Stored::OverCap { size: len as u64 });
        }
        let sha = hex::encode(Sha256::digest(data));
        match self.sink.filter(|s| len as u64 <= s.max) {
            // The scan's reads: left to the log only for a path tracked with this content.
            Some(sink) if sink.tracked.is_some() && sink.keeps_for(rel, &sha) => {
                return Ok(Stored::Kept {
                    sha256: sha,
                    size: len as u64,
                    dedup: true,
                });
            }
            Some(sink) if sink.tracked.is_some() => {}
            Some(sink) => {
                // Kept in the log: already there, or new to it while it has room. A blob file
                // holding the same content is not looked for: that look (a `stat` of a name
                // the store seldom has) cost the capture more than the rare copy it saves,
                // and the two copies are both valid (see `docs/format.md`). Content the log
                // has is taken again, written only if a compaction dropped it meanwhile.
                let dedup = sink.kept.contains_key(&sha);
                if dedup || sink.reserve(len) {
                    sink.take(&sha, crate::log::blob_frame(&sha, data));
                    return Ok(Stored::Kept {
                        sha256: sha,
                        size: len as u64,
                        dedup,
                    });
                }
            }
            None => {}
        }
        put_bytes(store, sha, data)
    }
}

/// Stores `data`, whose SHA-256 is `sha`, as a blob file (unless one holds it already).
pub(crate) fn put_bytes(store: &StoreFs, sha: String, data: &[u8]) -> Result<Stored, FsFailure> {
    let len = data.len();
    let path = blob_path(&sha);
    if !store.io.durable {
        // Process-crash mode: a blob already stored whole is a dedup hit (one `stat`,
        // no failed create). Otherwise write the blob under its final name directly. A
        // blob torn by a crash mid-write is shorter than its content and is replaced
        // below; any other damage is caught by the SHA-256 check on restore.
        if store.blob_size(&sha)? == Some(len as u64) {
            return Ok(Stored::Blob {
                sha256: sha,
                size: len as u64,
                dedup: true,
            });
        }
        let created = match store.write_new(&path, data) {
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => {
                store.create_dir_all(path.parent().unwrap_or(Path::new("blobs")))?;
                store.write_new(&path, data)?
            }
            r => r?,
        };
        if created {
            store.io.crash(CrashPoint::CaptureBlobStored);
            return Ok(Stored::Blob {
                sha256: sha,
                size: len as u64,
                dedup: false,
            });
        }
    }
    if store.blob_size(&sha)? == Some(len as u64) {
        return Ok(Stored::Blob {
            sha256: sha,
            size: len as u64,
            dedup: true,
        });
    }
    let tmp = tmp_path();
    let mut f = store.create_new(&tmp)?;
    let r = store
        .write_all(&mut f, &tmp, data)
        .and_then(|()| store.sync_file(&f, &tmp));
    drop(f);
    finish(store, &tmp, r, sha, len as u64)
}

fn tmp_path() -> PathBuf {
    Path::new("tmp").join(format!("blob-{}", unique_suffix()))
}

fn stream(
    store: &StoreFs,
    ws: &WsFs,
    file: &mut File,
    rel: &RelPath,
    cap: u64,
    first: Option<&[u8]>,
) -> Result<Stored, FsFailure> {
    let tmp = tmp_path();
    let mut out = store.create_new(&tmp)?;
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let r = (|| {
        if let Some(first) = first {
            total += first.len() as u64;
            if cap != 0 && total > cap {
                return Ok(None);
            }
            hasher.update(first);
            store.write_all(&mut out, &tmp, first)?;
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = ws.read_chunk(file, rel, &mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if cap != 0 && total > cap {
                return Ok(None);
            }
            hasher.update(&buf[..n]);
            store.write_all(&mut out, &tmp, &buf[..n])?;
        }
        store.sync_file(&out, &tmp)?;
        Ok(Some(()))
    })();
    drop(out);
    match r {
        Ok(Some(())) => {
            let sha = hex::encode(hasher.finalize());
            finish(store, &tmp, Ok(()), sha, total)
        }
        Ok(None) => {
            let _ = store.dir.remove_file(&tmp);
            Ok(Stored::OverCap { size: total })
        }
        Err(e) => {
            let _ = store.dir.remove_file(&tmp);
            Err(e)
        }
    }
}

fn finish(
    store: &StoreFs,
    tmp: &Path,
    written: Result<(), FsFailure>,
    sha: String,
    size: u64,
) -> Result<Stored, FsFailure> {
    let r = written.and_then(|()| {
        let path = blob_path(&sha);
        if store.blob_size(&sha)? == Some(size) {
            let _ = store.dir.remove_file(tmp);
            return Ok(true);
        }
        match store.rename(tmp, &path) {
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => {
                store.create_dir_all(path.parent().unwrap_or(Path::new("blobs")))?;
                store.rename(tmp, &path)?;
            }
            r => r?,
        }
        store.sync_dir(path.parent().unwrap_or(Path::new("blobs")))?;
        store.io.crash(CrashPoint::CaptureBlobStored);
        Ok(false)
    });
    match r {
        Ok(dedup) => Ok(Stored::Blob {
            sha256: sha,
            size,
            dedup,
        }),
        Err(e) => {
            let _ = store.dir.remove_file(tmp);
            Err(e)
        }
    }
}

/// Why a blob could not be copied into the workspace.
#[derive(Debug)]
pub(crate) enum CopyFail {
    /// A filesystem call failed.
    Fs(FsFailure),
    /// The blob is not in the store.
    Missing(String),
    /// The blob's bytes do not hash to its name (or have the wrong length).
    Corrupt(String),
    /// The target file is not the one the restore checked (nothing was written).
    Changed,
}

impl From<FsFailure> for CopyFail {
    fn from(e: FsFailure) -> Self {
        CopyFail::Fs(e)
    }
}

impl std::fmt::Display for CopyFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyFail::Fs(e) => write!(f, "{e}"),
            CopyFail::Missing(p) => write!(f, "blob `{p}` is missing from the store"),
            CopyFail::Corrupt(d) => write!(f, "corrupt blob: {d}"),
            CopyFail::Changed => write!(f, "changed since the restore began; left as it is"),
        }
    }
}

/// Streams blob `sha` into the open workspace file `out`, verifying length and SHA-256.
/// On `Err` the caller must discard `out` (nothing unverified may be renamed into place).
pub(crate) fn copy_blob_to(
    store: &StoreFs,
    ws: &WsFs,
    sha: &str,
    size: u64,
    out: &mut File,
    rel: &RelPath,
) -> Result<(), CopyFail> {
    let path = blob_path(sha);
    let Some(mut src) = store.blob_open(sha)? else {
        return Err(CopyFail::Missing(path.to_string_lossy().into_owned()));
    };
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = store.read_chunk(&mut src, &path, &mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > size {
            return Err(CopyFail::Corrupt(format!(
                "`{}` is longer than {size} bytes",
                path.display()
            )));
        }
        hasher.update(&buf[..n]);
        ws.write_all(out, rel, &buf[..n])?;
    }
    let got = hex::encode(hasher.finalize());
    if total != size || got != sha {
        return Err(CopyFail::Corrupt(format!(
            "`{}` has {total} bytes hashing to {got}, expected {size} bytes hashing to {sha}",
            path.display()
        )));
    }
    Ok(())
}

/// The bytes of blob `sha` (`size` bytes, small enough to hold), read whole and
/// checked against its name and length before the caller writes any of them.
pub(crate) fn read_blob_verified(
    store: &StoreFs,
    sha: &str,
    size: u64,
) -> Result<Vec<u8>, CopyFail> {
    let path = blob_path(sha);
    let Some(mut src) = store.blob_open(sha)? else {
        return Err(CopyFail::Missing(path.to_string_lossy().into_owned()));
    };
    // One byte more than expected, to see a longer blob.
    let want = usize::try_from(size)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let mut data = vec![0u8; want];
    let mut len = 0usize;
    while len < data.len() {
        let n = store.read_chunk(&mut src, &path, &mut data[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    if len as u64 > size {
        return Err(CopyFail::Corrupt(format!(
            "`{}` is longer than {size} bytes",
            path.display()
        )));
    }
    data.truncate(len);
    let got = hex::encode(Sha256::digest(&data));
    if len as u64 != size || got != sha {
        return Err(CopyFail::Corrupt(format!(
            "`{}` has {len} bytes hashing to {got}, expected {size} bytes hashing to {sha}",
            path.display()
        )));
    }
    Ok(data)
}

/// Whether the current bytes of the open file `file` (`len` bytes) are the first
/// `len` bytes of blob `sha` (of `size` bytes): what an in-place write of that blob
/// leaves when it is interrupted. `false` when the blob cannot be read.
pub(crate) fn is_prefix_of_blob(
    store: &StoreFs,
    ws: &WsFs,
    file: &mut File,
    rel: &RelPath,
    len: u64,
    sha: &str,
    size: u64,
) -> Result<bool, FsFailure> {
    if len > size {
        return Ok(false);
    }
    let path = blob_path(sha);
    let Some(mut src) = store.blob_open(sha)? else {
        return Ok(false);
    };
    let mut a = vec![0u8; CHUNK];
    let mut b = vec![0u8; CHUNK];
    let mut left = len;
    while left > 0 {
        let want = (left.min(CHUNK as u64)) as usize;
        if fill(&mut a[..want], |buf| ws.read_chunk(file, rel, buf))? < want {
            return Ok(false); // the file shrank meanwhile
        }
        if fill(&mut b[..want], |buf| store.read_chunk(&mut src, &path, buf))? < want {
            return Ok(false);
        }
        if a[..want] != b[..want] {
            return Ok(false);
        }
        left -= want as u64;
    }
    Ok(true)
}

/// Fills `buf` from `read` until it is full or the source ends; returns the count.
fn fill(
    buf: &mut [u8],
    mut read: impl FnMut(&mut [u8]) -> Result<usize, FsFailure>,
) -> Result<usize, FsFailure> {
    let mut got = 0;
    while got < buf.len() {
        let n = read(&mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

/// Whether the current bytes of the open file `file` (`len` bytes) can be what writing
/// blob `new` from the start over a file holding one of the blobs `olds` (or a mix of
/// them) leaves when it is interrupted before its end: every byte is the byte of `new`
/// or of one of `olds` at that offset, or zero in an extension (past the shortest of
/// `olds`, before the end of `new`); `len` is the size of `new` or of one of `olds`, or
/// between an old size and a larger `new` size (an extension under way). That covers a
/// process killed mid-write (the first bytes of `new` followed by the old ones) and a
/// power loss, after which the disk may hold some of the new blocks and not others, and
/// an extension's size before its bytes. `false` when a blob cannot be read whole or
/// its bytes do not hash to its name. Blobs are `(sha256, size)`.
pub(crate) fn is_write_over(
    store: &StoreFs,
    ws: &WsFs,
    file: &mut File,
    rel: &RelPath,
    len: u64,
    new: (&str, u64),
    olds: &[(&str, u64)],
) -> Result<bool, FsFailure> {
    let len_ok = len == new.1
        || olds
            .iter()
            .any(|o| o.1 == len || (o.1 < len && len < new.1));
    if !len_ok {
        return Ok(false);
    }
    let zero_from = olds.iter().map(|o| o.1).min().unwrap_or(new.1);
    let mut srcs = Vec::with_capacity(olds.len() + 1);
    for (sha, size) in std::iter::once(&new).chain(olds) {
        let Some(src) = store.blob_open(sha)? else {
            return Ok(false);
        };
        let buf = vec![0u8; CHUNK];
        srcs.push((src, blob_path(sha), *size, buf, 0usize, Sha256::new(), *sha));
    }
    let mut f = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < len {
        let want = (len - off).min(CHUNK as u64) as usize;
        if fill(&mut f[..want], |b| ws.read_chunk(file, rel, b))? < want {
            return Ok(false); // the file shrank meanwhile
        }
        // The bytes of each blob at this offset (`got` of them: a blob may end here).
        for (src, path, size, buf, got, hasher, _) in &mut srcs {
            let n = (size.saturating_sub(off)).min(want as u64) as usize;
            *got = fill(&mut buf[..n], |b| store.read_chunk(src, path, b))?;
            if *got < n {
                return Ok(false); // a blob shorter than its size: damaged
            }
            hasher.update(&buf[..n]);
        }
        for (i, byte) in f[..want].iter().enumerate() {
            let at = off + i as u64;
            let of_a_blob = srcs
                .iter()
                .any(|(_, _, _, buf, got, ..)| i < *got && buf[i] == *byte);
            let extension = *byte == 0 && at >= zero_from && at < new.1;
            if !(of_a_blob || extension) {
                return Ok(false);
            }
        }
        off += want as u64;
    }
    // Only bytes both blobs hold whole can be written over the file again: a blob
    // damaged (by a power loss in process-crash mode) makes the file a change.
    for (mut src, path, size, mut buf, _, mut hasher, sha) in srcs {
        let mut left = size.saturating_sub(len);
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            if fill(&mut buf[..n], |b| store.read_chunk(&mut src, &path, b))? < n {
                return Ok(false);
            }
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        if hex::encode(hasher.finalize()) != sha {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Hashes an open workspace file (streaming); returns `(sha256, size)`.
pub(crate) fn hash_file(
    ws: &WsFs,
    file: &mut File,
    rel: &RelPath,
) -> Result<(String, u64), FsFailure> {
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = ws.read_chunk(file, rel, &mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((hex::encode(hasher.finalize()), total))
}
