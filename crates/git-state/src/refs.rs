//! Refs as git keeps them on disk: loose files under `refs/`, the `packed-refs` file, and
//! their crash-safe update (`<ref>.lock` created exclusively, written, synced, renamed over
//! the ref; a reflog line appended), the way git itself writes them.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};

use crate::error::{ApplyError, ReadError};

/// Whether `s` is a full SHA-1 object name in lowercase hex.
pub fn is_oid(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(crate) fn read_opt(dir: &Dir, path: &Path) -> Result<Option<Vec<u8>>, ReadError> {
    match dir.open(path) {
        Ok(mut f) => {
            let mut v = Vec::new();
            f.read_to_end(&mut v).map_err(|e| ReadError::Io {
                path: path.into(),
                source: e,
            })?;
            Ok(Some(v))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc_enotdir()) => Ok(None),
        Err(e) => Err(ReadError::Io {
            path: path.into(),
            source: e,
        }),
    }
}

const fn libc_enotdir() -> i32 {
    20 // ENOTDIR on Linux and macOS
}

/// The `packed-refs` file: name → object id (peeled lines `^<oid>` give the commit an
/// annotated tag points at, in `peeled`).
#[derive(Debug, Default, Clone)]
pub struct Packed {
    /// Each packed ref's object id.
    pub refs: BTreeMap<String, String>,
    /// The peeled object id of an annotated tag, when git recorded it.
    pub peeled: BTreeMap<String, String>,
}

/// Reads `packed-refs` of the common directory (empty when there is none).
pub fn read_packed(common: &Dir) -> Result<Packed, ReadError> {
    Ok(match read_opt(common, Path::new("packed-refs"))? {
        Some(bytes) => parse_packed(&bytes),
        None => Packed::default(),
    })
}

/// Parses the bytes of a `packed-refs` file.
pub fn parse_packed(bytes: &[u8]) -> Packed {
    let mut p = Packed::default();
    let text = String::from_utf8_lossy(bytes);
    let mut last: Option<String> = None;
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(peeled) = line.strip_prefix('^') {
            if let Some(name) = &last {
                p.peeled.insert(name.clone(), peeled.trim().to_owned());
            }
            continue;
        }
        let Some((oid, name)) = line.split_once(' ') else {
            continue;
        };
        if is_oid(oid) {
            p.refs.insert(name.to_owned(), oid.to_owned());
            last = Some(name.to_owned());
        }
    }
    p
}

/// Adds every loose ref under `prefix` (e.g. `refs/heads`) to `out`, overriding packed ones.
pub fn read_loose(
    common: &Dir,
    prefix: &str,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ReadError> {
    let dir = match common.open_dir(prefix) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ReadError::Io {
                path: prefix.into(),
                source: e,
            });
        }
    };
    let entries = dir.entries().map_err(|e| ReadError::Io {
        path: prefix.into(),
        source: e,
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| ReadError::Io {
            path: prefix.into(),
            source: e,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".lock") {
            continue;
        }
        let full = format!("{prefix}/{name}");
        let ft = entry.file_type().map_err(|e| ReadError::Io {
            path: full.clone().into(),
            source: e,
        })?;
        if ft.is_dir() {
            read_loose(common, &full, out)?;
        } else if ft.is_file() {
            if let Some(bytes) = read_opt(common, Path::new(&full))? {
                let v = String::from_utf8_lossy(&bytes);
                let v = v.trim();
                if is_oid(v) {
                    out.insert(full, v.to_owned());
                }
            }
        }
    }
    Ok(())
}

/// The current object id of one ref (loose first, then packed).
pub fn resolve(common: &Dir, name: &str) -> Result<Option<String>, ReadError> {
    if let Some(bytes) = read_opt(common, Path::new(name))? {
        let v = String::from_utf8_lossy(&bytes).trim().to_owned();
        if is_oid(&v) {
            return Ok(Some(v));
        }
    }
    Ok(read_packed(common)?.refs.get(name).cloned())
}

/// Who a reflog line names as the writer.
pub const IDENT: &str = "dsh-rewind <dsh-rewind@localhost>";

/// The null object id reflogs use for "none".
pub const ZERO: &str = "0000000000000000000000000000000000000000";

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn werr(path: &Path, source: std::io::Error) -> ApplyError {
    ApplyError::Io {
        path: path.into(),
        source,
    }
}

/// A held `<file>.lock`: created exclusively, removed on drop unless committed.
pub(crate) struct Lock<'a> {
    dir: &'a Dir,
    target: PathBuf,
    lock: PathBuf,
    file: Option<cap_std::fs::File>,
    done: bool,
}

impl<'a> Lock<'a> {
    pub(crate) fn take(dir: &'a Dir, target: &Path) -> Result<Self, ApplyError> {
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            dir.create_dir_all(parent).map_err(|e| werr(parent, e))?;
        }
        let lock = PathBuf::from(format!("{}.lock", target.display()));
        let file = dir
            .open_with(&lock, OpenOptions::new().write(true).create_new(true))
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ApplyError::Locked {
                        path: target.into(),
                    }
                } else {
                    werr(&lock, e)
                }
            })?;
        Ok(Lock {
            dir,
            target: target.into(),
            lock,
            file: Some(file),
            done: false,
        })
    }

    /// Writes `bytes` to the lock file, syncs it and renames it over the target.
    pub(crate) fn commit(mut self, bytes: &[u8]) -> Result<(), ApplyError> {
        let mut f = self.file.take().expect("lock file open");
        f.write_all(bytes).map_err(|e| werr(&self.lock, e))?;
        f.sync_all().map_err(|e| werr(&self.lock, e))?;
        drop(f);
        self.dir
            .rename(&self.lock, self.dir, &self.target)
            .map_err(|e| werr(&self.target, e))?;
        self.done = true;
        sync_parent(self.dir, &self.target);
        Ok(())
    }
}

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.file.take();
            let _ = self.dir.remove_file(&self.lock);
        }
    }
}

fn sync_parent(dir: &Dir, path: &Path) {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let d = match parent {
        Some(p) => dir.open_dir(p).ok(),
        None => dir.try_clone().ok(),
    };
    if let Some(d) = d {
        if let Ok(f) = d.open(".") {
            let _ = f.sync_all();
        }
    }
}

/// Appends one reflog line to `logs/<name>` in `dir`; `create` makes the log when it does not
/// exist (branches and HEAD, as `core.logAllRefUpdates` does by default in a work tree).
pub(crate) fn append_reflog(
    dir: &Dir,
    name: &str,
    old: Option<&str>,
    new: Option<&str>,
    message: &str,
    create: bool,
) {
    let path = PathBuf::from("logs").join(name);
    let exists = dir.symlink_metadata(&path).is_ok();
    if !exists && !create {
        return;
    }
    if let Some(parent) = path.parent() {
        let _ = dir.create_dir_all(parent);
    }
    let line = format!(
        "{} {} {} {} +0000\t{}\n",
        old.unwrap_or(ZERO),
        new.unwrap_or(ZERO),
        IDENT,
        now_secs(),
        message.replace('\n', " ")
    );
    if let Ok(mut f) = dir.open_with(&path, OpenOptions::new().append(true).create(true)) {
        let _ = f.write_all(line.as_bytes());
        let _ = f.sync_all();
    }
}

/// What one ref update found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// The ref was set (or removed).
    Done,
    /// The ref was not as expected: left as it is (its value now).
    Moved(Option<String>),
}

/// Sets ref `name` in `common` from `old` to `new` (`None`: absent / delete), checking under
/// its lock that it still is `old`. A deletion also rewrites `packed-refs` without it (under
/// `packed-refs.lock`).
pub fn update_ref(
    common: &Dir,
    name: &str,
    old: Option<&str>,
    new: Option<&str>,
    message: &str,
) -> Result<Update, ApplyError> {
    update_ref_with(common, name, old, new, Some(message))
}

/// [`update_ref`], with a reflog line only when `message` is given (`refs/stash`, whose
/// reflog is the stash list, is written without one).
pub(crate) fn update_ref_with(
    common: &Dir,
    name: &str,
    old: Option<&str>,
    new: Option<&str>,
    message: Option<&str>,
) -> Result<Update, ApplyError> {
    let lock = Lock::take(common, Path::new(name))?;
    let now = resolve(common, name)?;
    if now.as_deref() == new {
        return Ok(Update::Done);
    }
    if now.as_deref() != old {
        return Ok(Update::Moved(now));
    }
    match new {
        Some(oid) => lock.commit(format!("{oid}\n").as_bytes())?,
        None => {
            let packed = read_packed(common)?;
            if packed.refs.contains_key(name) {
                let plock = Lock::take(common, Path::new("packed-refs"))?;
                let bytes = read_opt(common, Path::new("packed-refs"))?.unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                let mut out = String::new();
                let mut skipping = false;
                for line in text.split_inclusive('\n') {
                    if line.starts_with('^') {
                        if !skipping {
                            out.push_str(line);
                        }
                        continue;
                    }
                    skipping = line
                        .trim_end()
                        .split_once(' ')
                        .is_some_and(|(_, n)| n == name);
                    if !skipping {
                        out.push_str(line);
                    }
                }
                plock.commit(out.as_bytes())?;
            }
            match common.remove_file(name) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(werr(Path::new(name), e)),
            }
            drop(lock);
            sync_parent(common, Path::new(name));
        }
    }
    if let Some(message) = message {
        append_reflog(
            common,
            name,
            old,
            new,
            message,
            name.starts_with("refs/heads/") && new.is_some(),
        );
    }
    Ok(Update::Done)
}
