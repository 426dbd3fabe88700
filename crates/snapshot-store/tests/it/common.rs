//! Shared helpers: a temp store + workspace, workspace snapshots, tool edits.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use snapshot_store::{Area, FaultSeam, FsOp, Session, Store, StoreOptions};

/// Path bytes → content of every regular file.
pub type Snap = BTreeMap<Vec<u8>, Vec<u8>>;

/// A seam that shows every filesystem call the store makes to `F` and fails none.
pub struct Watch<F>(pub F);

impl<F: Fn(FsOp, Area, &Path) + Send + Sync> FaultSeam for Watch<F> {
    fn before(&self, op: FsOp, area: Area, path: &Path) -> std::io::Result<()> {
        (self.0)(op, area, path);
        Ok(())
    }
}

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub cwd: PathBuf,
}

impl Env {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("store");
        let cwd = tmp.path().join("ws");
        std::fs::create_dir_all(&cwd).expect("mkdir ws");
        Env { tmp, root, cwd }
    }

    pub fn store(&self) -> Store {
        self.store_with(StoreOptions::default())
    }

    pub fn store_with(&self, opts: StoreOptions) -> Store {
        Store::open(&self.root, opts).expect("open store")
    }

    /// A store that puts every content it stores in a blob file of its own (none kept in
    /// a session's log): for tests of the blob files themselves.
    pub fn store_with_blob_files(&self) -> Store {
        self.store_with(StoreOptions {
            keep_in_log_bytes: 0,
            ..StoreOptions::default()
        })
    }

    pub fn session(&self, store: &Store) -> Session {
        store.session("s1", &self.cwd).expect("session")
    }

    pub fn p(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.cwd.join(rel)
    }

    pub fn write(&self, rel: impl AsRef<Path>, bytes: &[u8]) {
        let p = self.p(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(p, bytes).expect("write");
    }

    pub fn read(&self, rel: impl AsRef<Path>) -> Option<Vec<u8>> {
        std::fs::read(self.p(rel)).ok()
    }

    pub fn remove(&self, rel: impl AsRef<Path>) {
        let _ = std::fs::remove_file(self.p(rel));
    }

    /// Every regular file under the workspace: path bytes → content.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        snapshot_dir(&self.cwd)
    }

    /// Number of blob files in the store.
    pub fn blob_count(&self) -> usize {
        std::fs::read_dir(self.root.join("blobs"))
            .map(|rd| rd.count())
            .unwrap_or(0)
    }
}

pub fn snapshot_dir(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ft = e.file_type().expect("file type");
        if ft.is_dir() {
            walk(base, &p, out);
        } else if ft.is_file() {
            let rel = p
                .strip_prefix(base)
                .expect("prefix")
                .as_os_str()
                .as_bytes()
                .to_vec();
            out.insert(rel, std::fs::read(&p).expect("read"));
        }
    }
}

/// A successful tool call that writes `content` (or deletes with `None`) at `rel`.
pub fn tool_edit(
    env: &Env,
    s: &Session,
    call: &str,
    anchor: u64,
    rel: &str,
    content: Option<&[u8]>,
) {
    s.capture_before(call, Path::new(rel)).expect("capture");
    match content {
        Some(c) => env.write(rel, c),
        None => env.remove(rel),
    }
    s.commit(call, anchor, true).expect("commit");
}

/// Recursively copies a directory tree (regular files and directories only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let ft = e.file_type().expect("ft");
        let dst = to.join(e.file_name());
        if ft.is_dir() {
            copy_tree(&e.path(), &dst);
        } else if ft.is_file() {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// Asserts two snapshots are equal, printing only the differing paths (short).
#[track_caller]
pub fn assert_snap(got: &Snap, want: &Snap, what: &str) {
    if got == want {
        return;
    }
    let short = |v: Option<&Vec<u8>>| {
        v.map(|b| String::from_utf8_lossy(&b[..b.len().min(24)]).into_owned())
    };
    let mut diff = Vec::new();
    for k in got.keys().chain(want.keys()) {
        if got.get(k) != want.get(k)
            && !diff
                .iter()
                .any(|(p, _, _): &(String, _, _)| p.as_bytes() == &k[..])
        {
            diff.push((
                String::from_utf8_lossy(k).into_owned(),
                short(got.get(k)),
                short(want.get(k)),
            ));
        }
    }
    panic!("{what}: workspace differs (path, got, want): {diff:?}");
}

/// Walks a record log as `docs/format.md` describes it (header, then frames of
/// `len`, `!len`, CRC-32, payload): the (kind byte, payload) of each complete frame,
/// and the bytes after the last complete frame.
pub fn log_records(path: &Path) -> (Vec<(u8, Vec<u8>)>, usize) {
    let bytes = std::fs::read(path).expect("read log");
    assert!(bytes.len() >= 8, "log header");
    assert_eq!(&bytes[..4], b"RWLG");
    let mut out = Vec::new();
    let mut o = 8;
    while o + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4")) as usize;
        let inv = u32::from_le_bytes(bytes[o + 4..o + 8].try_into().expect("4"));
        if inv != !(len as u32) || len == 0 || o + 12 + len > bytes.len() {
            break;
        }
        let payload = bytes[o + 12..o + 12 + len].to_vec();
        out.push((payload[0], payload));
        o += 12 + len;
    }
    (out, bytes.len() - o)
}

/// Record kinds (the first payload byte).
pub const SESSION: u8 = 1;
pub const DROPPED: u8 = 4;
pub const GROUP: u8 = 5;
/// Content kept in the log (log version 3).
pub const BLOB: u8 = 10;

/// Whether `hay` contains `needle`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every file (not directory) under `dir`, counted.
pub fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let ft = e.file_type().expect("ft");
            if ft.is_dir() {
                n += count_files(&e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}
