//! Writer serialization: a lock per process and id, and an OS file lock.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use cap_std::fs::{Dir, OpenOptions};

/// The in-process lock for `id` (e.g. the path of what is written): the same
/// mutex for the same id within this process. OS file locks do not exclude
/// threads of one process from each other; hold this one around them.
pub fn process_lock(id: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let map = LOCKS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(id.to_path_buf()).or_default().clone()
}

/// An exclusive OS lock on a lock file, held until dropped (or the process
/// ends, however it ends).
#[derive(Debug)]
pub struct FileLock {
    _file: std::fs::File,
}

/// [`lock_exclusive`] failed.
#[derive(Debug)]
pub enum LockError {
    /// Something other than a regular file (a symlink, a directory) stands
    /// at the lock file's name; it is never followed.
    NotAFile,
    /// The lock file could not be opened or created.
    Open(io::Error),
    /// The lock could not be taken.
    Lock(io::Error),
}

impl LockError {
    /// A short lowercase name of what failed (`not a file`, `open`, `lock`).
    pub fn op(&self) -> &'static str {
        match self {
            Self::NotAFile => "not a file",
            Self::Open(_) => "open",
            Self::Lock(_) => "lock",
        }
    }

    /// The error as an `io::Error` (for callers that report one).
    pub fn into_io(self) -> io::Error {
        match self {
            Self::NotAFile => io::Error::other("the lock file is not a regular file"),
            Self::Open(e) | Self::Lock(e) => e,
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAFile => f.write_str("the lock file is not a regular file"),
            Self::Open(e) => write!(f, "open lock file: {e}"),
            Self::Lock(e) => write!(f, "lock: {e}"),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::NotAFile => None,
            Self::Open(e) | Self::Lock(e) => Some(e),
        }
    }
}

/// Opens (creating it if missing) the lock file `name` in `dir` and takes an
/// exclusive OS lock on it, waiting for other holders. Anything but a regular
/// file at `name` is refused ([`LockError::NotAFile`]).
pub fn lock_exclusive(dir: &Dir, name: &str) -> Result<FileLock, LockError> {
    match dir.symlink_metadata(name) {
        Ok(m) if !m.is_file() => return Err(LockError::NotAFile),
        _ => {}
    }
    let file = dir
        .open_with(
            name,
            OpenOptions::new().read(true).write(true).create(true),
        )
        .map_err(LockError::Open)?
        .into_std();
    fs4::FileExt::lock(&file).map_err(LockError::Lock)?;
    Ok(FileLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn one_mutex_per_id() {
        let a = process_lock(Path::new("/x/a"));
        let b = process_lock(Path::new("/x/a"));
        let c = process_lock(Path::new("/x/c"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn the_file_lock_excludes_until_dropped() {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        let held = lock_exclusive(&d, "lock").unwrap();
        let (tx, rx) = mpsc::channel();
        let d2 = d.try_clone().unwrap();
        let waiter = std::thread::spawn(move || {
            // A second open file description: the OS lock excludes it.
            let l = lock_exclusive(&d2, "lock").unwrap();
            tx.send(()).unwrap();
            drop(l);
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(held);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        waiter.join().unwrap();
    }

    #[test]
    fn a_symlink_or_directory_is_not_a_lock_file() {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        d.create_dir("dir").unwrap();
        assert!(matches!(lock_exclusive(&d, "dir"), Err(LockError::NotAFile)));
        std::os::unix::fs::symlink(t.path().join("elsewhere"), t.path().join("link")).unwrap();
        let e = lock_exclusive(&d, "link").unwrap_err();
        assert_eq!(e.op(), "not a file");
        assert!(!t.path().join("elsewhere").exists());
    }
}
