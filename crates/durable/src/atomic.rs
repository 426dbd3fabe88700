//! Atomic replace of one file in a directory: temp file, sync, rename,
//! directory sync.

use std::fmt;
use std::io::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions};

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name suffix unique within this machine at this moment: `<pid>-<n>`, `n`
/// counting up per process.
pub fn unique_suffix() -> String {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// Syncs a directory, making renames and creations inside it durable. The
/// handle cap-std keeps may be a path-only descriptor, so the directory is
/// opened again for reading first. Windows cannot open a directory as a file
/// this way and journals directory metadata itself, so it is a no-op there.
pub fn sync_dir(dir: &Dir) -> io::Result<()> {
    if cfg!(unix) {
        dir.open_with(".", OpenOptions::new().read(true))?
            .sync_all()
    } else {
        Ok(())
    }
}

/// Removes every entry of `dir` whose name starts with `prefix` (temp files
/// a killed writer left); returns how many went. Call it only while holding
/// the lock that serializes the writers, so no live writer's temp file is
/// removed. Errors are ignored: a leftover is harmless and retried next time.
pub fn remove_temps(dir: &Dir, prefix: &str) -> usize {
    let mut removed = 0;
    if let Ok(entries) = dir.entries() {
        for e in entries.flatten() {
            if e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
                && dir.remove_file(e.file_name()).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// Renames `name` aside to `<name>.corrupt-<now>` (or `…-<now>-<n>` when that
/// exists) inside `dir`, keeping a damaged file for the user; returns the new
/// name. The directory is not synced.
pub fn rename_aside(dir: &Dir, name: &str, now: u64) -> io::Result<String> {
    let mut aside = format!("{name}.corrupt-{now}");
    let mut n = 1;
    while dir.symlink_metadata(&aside).is_ok() {
        aside = format!("{name}.corrupt-{now}-{n}");
        n += 1;
    }
    dir.rename(name, dir, &aside)?;
    Ok(aside)
}

/// A step of [`write_atomic`], in order; the caller's hook sees each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The temp file was created, empty.
    TempCreated,
    /// Half of the new bytes are in the temp file.
    TempHalfWritten,
    /// All new bytes are in the temp file, not yet synced.
    TempWritten,
    /// The temp file was synced to disk.
    TempSynced,
    /// The temp file was renamed over the target.
    Renamed,
    /// The directory was synced: the write is durable.
    DirSynced,
}

impl Step {
    /// Every step, in the order a write passes them.
    pub const ALL: [Step; 6] = [
        Self::TempCreated,
        Self::TempHalfWritten,
        Self::TempWritten,
        Self::TempSynced,
        Self::Renamed,
        Self::DirSynced,
    ];

    /// The step's kebab-case name (`temp-created`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::TempCreated => "temp-created",
            Self::TempHalfWritten => "temp-half-written",
            Self::TempWritten => "temp-written",
            Self::TempSynced => "temp-synced",
            Self::Renamed => "renamed",
            Self::DirSynced => "dir-synced",
        }
    }

    /// The step with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What [`write_atomic`] was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Creating the temp file.
    Create,
    /// Writing the temp file.
    Write,
    /// Syncing the temp file.
    Sync,
    /// Renaming the temp file over the target.
    Rename,
    /// Syncing the directory after the rename (the new content is in place).
    SyncDir,
}

impl AtomicOp {
    /// A short lowercase name (`create`, `write`, `sync`, `rename`, `sync dir`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Write => "write",
            Self::Sync => "sync",
            Self::Rename => "rename",
            Self::SyncDir => "sync dir",
        }
    }
}

/// [`write_atomic`] failed. Unless `op` is [`AtomicOp::SyncDir`], the target
/// is unchanged and the temp file was removed (best effort).
#[derive(Debug)]
pub struct AtomicWriteError {
    /// What failed.
    pub op: AtomicOp,
    /// The temp file's name inside the directory.
    pub temp: String,
    /// The underlying error.
    pub source: io::Error,
}

impl fmt::Display for AtomicWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op.name(), self.temp, self.source)
    }
}

impl std::error::Error for AtomicWriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Replaces `name` in `dir` with `bytes` atomically: a new temp file
/// `<temp_prefix><unique suffix>` is written, synced and renamed over `name`,
/// then the directory is synced. A reader sees the old file or the new one,
/// never a torn one; a crash before the rename leaves the old file (and a temp
/// file that [`remove_temps`] with the same prefix clears), a crash after it
/// the new one. `step` is called after each [`Step`].
pub fn write_atomic(
    dir: &Dir,
    name: &str,
    temp_prefix: &str,
    bytes: &[u8],
    step: &mut dyn FnMut(Step),
) -> Result<(), AtomicWriteError> {
    let temp = format!("{temp_prefix}{}", unique_suffix());
    let fail = |op, source| AtomicWriteError {
        op,
        temp: temp.clone(),
        source,
    };
    let mut file = dir
        .open_with(&temp, OpenOptions::new().write(true).create_new(true))
        .map_err(|e| fail(AtomicOp::Create, e))?;
    step(Step::TempCreated);
    let result = (|| {
        let (a, b) = bytes.split_at(bytes.len() / 2);
        file.write_all(a).map_err(|e| fail(AtomicOp::Write, e))?;
        step(Step::TempHalfWritten);
        file.write_all(b).map_err(|e| fail(AtomicOp::Write, e))?;
        step(Step::TempWritten);
        file.sync_all().map_err(|e| fail(AtomicOp::Sync, e))?;
        step(Step::TempSynced);
        drop(file);
        dir.rename(&temp, dir, name)
            .map_err(|e| fail(AtomicOp::Rename, e))
    })();
    if let Err(e) = result {
        let _ = dir.remove_file(&temp);
        return Err(e);
    }
    step(Step::Renamed);
    // After the rename the name points at synced bytes; syncing the directory
    // makes the rename itself durable.
    sync_dir(dir).map_err(|e| fail(AtomicOp::SyncDir, e))?;
    step(Step::DirSynced);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    fn tmpdir() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        (t, d)
    }

    fn names(d: &Dir) -> Vec<String> {
        let mut v: Vec<String> = d
            .entries()
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_and_reports_every_step() {
        let (_t, d) = tmpdir();
        d.write("f", b"old").unwrap();
        let mut steps = Vec::new();
        write_atomic(&d, "f", "f.tmp-", b"new bytes", &mut |s| steps.push(s)).unwrap();
        assert_eq!(steps, Step::ALL);
        assert_eq!(d.read("f").unwrap(), b"new bytes");
        assert_eq!(names(&d), ["f"]);
    }

    #[test]
    fn the_target_is_old_until_the_rename() {
        let (_t, d) = tmpdir();
        d.write("f", b"old").unwrap();
        let mut seen = Vec::new();
        write_atomic(&d, "f", "f.tmp-", b"0123456789", &mut |s| {
            seen.push((s, d.read("f").unwrap()));
        })
        .unwrap();
        for (s, content) in seen {
            let want: &[u8] = if matches!(s, Step::Renamed | Step::DirSynced) {
                b"0123456789"
            } else {
                b"old"
            };
            assert_eq!(content, want, "{s:?}");
        }
    }

    #[test]
    fn a_failed_rename_removes_the_temp_file() {
        let (_t, d) = tmpdir();
        d.create_dir("f").unwrap();
        d.write("f/inside", b"x").unwrap(); // a non-empty directory cannot be replaced
        let e = write_atomic(&d, "f", "f.tmp-", b"new", &mut |_| {}).unwrap_err();
        assert_eq!(e.op, AtomicOp::Rename);
        assert!(e.temp.starts_with("f.tmp-"), "{e}");
        assert_eq!(names(&d), ["f"]);
    }

    #[test]
    fn leftover_temps_are_removed_by_prefix_only() {
        let (_t, d) = tmpdir();
        for n in ["f.tmp-1-0", "f.tmp-2-3", "f", "g.tmp-1-0"] {
            d.write(n, b"x").unwrap();
        }
        assert_eq!(remove_temps(&d, "f.tmp-"), 2);
        assert_eq!(names(&d), ["f", "g.tmp-1-0"]);
    }

    #[test]
    fn a_damaged_file_is_renamed_aside_without_overwriting() {
        let (_t, d) = tmpdir();
        d.write("h.json", b"one").unwrap();
        assert_eq!(rename_aside(&d, "h.json", 7).unwrap(), "h.json.corrupt-7");
        d.write("h.json", b"two").unwrap();
        assert_eq!(rename_aside(&d, "h.json", 7).unwrap(), "h.json.corrupt-7-1");
        assert_eq!(d.read("h.json.corrupt-7").unwrap(), b"one");
        assert_eq!(d.read("h.json.corrupt-7-1").unwrap(), b"two");
        assert!(rename_aside(&d, "h.json", 7).is_err(), "nothing to rename");
    }

    #[test]
    fn step_names_roundtrip() {
        for s in Step::ALL {
            assert_eq!(Step::from_name(s.name()), Some(s));
        }
        assert_eq!(Step::from_name("nope"), None);
    }

    #[test]
    fn suffixes_are_unique_and_name_the_process() {
        let a = unique_suffix();
        let b = unique_suffix();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", std::process::id())));
    }

    #[test]
    fn a_directory_syncs() {
        let (_t, d) = tmpdir();
        sync_dir(&d).unwrap();
    }
}
