//! The parallel stat walk (the `ignore` crate): honours `.gitignore`, `.ignore`,
//! `.git/info/exclude` and the global git excludes (inside a git repository or not),
//! includes hidden files, never enters `.git`, never follows a symlink.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ignore::{WalkBuilder, WalkState};

use super::index::Stat;

/// What the walk saw.
#[derive(Default)]
pub(crate) struct Walked {
    /// Every in-scope non-directory entry (files, symlinks, specials), relative path → `lstat`.
    pub files: Vec<(Box<[u8]>, Stat)>,
    /// Directories (relative; empty = the root) that could not be listed, with the error.
    pub dir_errors: Vec<(Box<[u8]>, String)>,
    /// Entries that could not be examined (not directories), with the error.
    pub entry_errors: Vec<(Box<[u8]>, String)>,
    /// The file-count limit was passed: the walk stopped early.
    pub over_limit: bool,
}

/// Options of [`walk`].
pub(crate) struct WalkOptions<'a> {
    /// Apply ignore files (`false` = the raw walk of the benchmarks).
    pub filters: bool,
    /// Stop (and set `over_limit`) when more than this many files or directories are seen.
    pub max_entries: u64,
    /// A directory not to enter, by (device, inode): the store root when it is inside the workspace.
    pub skip_dir: Option<(u64, u64)>,
    /// Threads (0 = the number of CPUs).
    pub threads: usize,
    _p: std::marker::PhantomData<&'a ()>,
}

impl WalkOptions<'_> {
    pub fn new(max_entries: u64) -> Self {
        WalkOptions {
            filters: true,
            max_entries,
            skip_dir: None,
            threads: 0,
            _p: std::marker::PhantomData,
        }
    }
}

fn rel_of(root: &Path, p: &Path) -> Box<[u8]> {
    p.strip_prefix(root)
        .unwrap_or(p)
        .as_os_str()
        .as_bytes()
        .into()
}

/// The path an `ignore` error is about, if it names one.
fn err_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            err_path(err)
        }
        ignore::Error::Partial(v) => v.iter().find_map(err_path),
        _ => None,
    }
}

/// Per-thread results, merged when the thread's visitor is dropped.
struct Local<'s> {
    out: Walked,
    sink: &'s Mutex<Vec<Walked>>,
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        let w = std::mem::take(&mut self.out);
        self.sink.lock().unwrap_or_else(|p| p.into_inner()).push(w);
    }
}

/// Walks `root` in parallel and `lstat`s every entry.
pub(crate) fn walk(root: &Path, opts: &WalkOptions<'_>) -> Walked {
    let mut b = WalkBuilder::new(root);
    b.hidden(false)
        .follow_links(false)
        .same_file_system(false)
        .threads(opts.threads);
    if opts.filters {
        b.git_ignore(true)
            .git_exclude(true)
            .git_global(true)
            .ignore(true)
            .parents(true)
            .require_git(false);
    } else {
        b.standard_filters(false);
    }
    let skip = opts.skip_dir;
    b.filter_entry(move |e| {
        if e.file_name() == ".git" {
            return false;
        }
        if let (Some((dev, ino)), Some(true)) = (skip, e.file_type().map(|t| t.is_dir())) {
            if e.ino() == Some(ino) {
                use std::os::unix::fs::MetadataExt;
                if let Ok(m) = std::fs::symlink_metadata(e.path()) {
                    if m.dev() == dev && m.ino() == ino {
                        return false;
                    }
                }
            }
        }
        true
    });
    let sink: Mutex<Vec<Walked>> = Mutex::new(Vec::new());
    let files = AtomicU64::new(0);
    let dirs = AtomicU64::new(0);
    let over = AtomicBool::new(false);
    let max = opts.max_entries;
    b.build_parallel().run(|| {
        let mut local = Local {
            out: Walked::default(),
            sink: &sink,
        };
        let (files, dirs, over) = (&files, &dirs, &over);
        Box::new(move |res| {
            let entry = match res {
                Ok(e) => e,
                Err(err) => {
                    let p = err_path(&err).unwrap_or_else(|| root.to_path_buf());
                    let rel = rel_of(root, &p);
                    // The error of a directory listing comes with the directory's path.
                    let is_dir = std::fs::symlink_metadata(&p)
                        .map(|m| m.is_dir())
                        .unwrap_or(true);
                    if is_dir {
                        local.out.dir_errors.push((rel, err.to_string()));
                    } else {
                        local.out.entry_errors.push((rel, err.to_string()));
                    }
                    return WalkState::Continue;
                }
            };
            if entry.depth() == 0 {
                return WalkState::Continue;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            let counter = if is_dir { dirs } else { files };
            if counter.fetch_add(1, Ordering::Relaxed) >= max {
                over.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            if is_dir {
                return WalkState::Continue;
            }
            match entry.metadata() {
                Ok(m) => local
                    .out
                    .files
                    .push((rel_of(root, entry.path()), Stat::from_meta(&m))),
                Err(e) => {
                    // Vanished between listing and lstat: simply not there.
                    let gone = e
                        .io_error()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound);
                    if !gone {
                        local
                            .out
                            .entry_errors
                            .push((rel_of(root, entry.path()), e.to_string()));
                    }
                }
            }
            WalkState::Continue
        })
    });
    let mut all = Walked {
        over_limit: over.load(Ordering::Relaxed),
        ..Walked::default()
    };
    for w in sink.into_inner().unwrap_or_else(|p| p.into_inner()) {
        all.files.extend(w.files);
        all.dir_errors.extend(w.dir_errors);
        all.entry_errors.extend(w.entry_errors);
    }
    all
}
