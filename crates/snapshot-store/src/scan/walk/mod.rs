//! The parallel stat walk: honours `.gitignore`, `.ignore`, `.git/info/exclude` and the
//! global git excludes (inside a git repository or not, in the workspace and in the
//! directories above it), includes hidden files, never enters `.git`, never follows a
//! symlink.
//!
//! The rules and their precedence are those of the `ignore` crate's walker with
//! `hidden(false)`, `parents(true)` and `require_git(false)` (what the scan used
//! before): for each kind of file (`.ignore`, then `.gitignore`, then
//! `.git/info/exclude`) the deepest directory with a matching pattern decides; the
//! first kind that decides wins, and the global excludes come last. Matchers are
//! built with `ignore::gitignore`, one per directory that holds an ignore file.
//!
//! The walk itself lists each directory once with `getdents64` (the entry type comes
//! from the listing, so directories are never `stat`ed) and `lstat`s each other entry
//! by name relative to its open directory (`fstatat`), on a small pool of threads
//! that share a stack of work: directories still to list, and parts of a large
//! directory's entries still to examine (one directory of 100,000 files is `lstat`ed by
//! every thread, not by the one that listed it).

mod rules;

use rules::{Chain, Outer, ignored, rules_of};

use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use super::index::Stat;

/// Receives every in-scope non-directory entry (files, symlinks, specials) of one
/// walking thread: its path relative to the root and its `lstat`.
pub(crate) trait Sink: Send {
    fn file(&mut self, rel: &[u8], stat: Stat);
    /// Called before the in-scope directory `rel` (empty: the root) is opened and listed
    /// (the change watcher adds its watch here, so that a change made after the listing
    /// is reported). A directory the hook refuses (`false`) is not walked.
    fn dir(&mut self, _rel: &[u8]) -> bool {
        true
    }
}

/// What the walk saw besides the files.
#[derive(Default)]
pub(crate) struct Walked {
    /// Directories (relative; empty = the root) that could not be listed, with the error.
    pub dir_errors: Vec<(Box<[u8]>, String)>,
    /// Entries that could not be examined (not directories), with the error.
    pub entry_errors: Vec<(Box<[u8]>, String)>,
    /// The file-count limit was passed: the walk stopped early.
    pub over_limit: bool,
    /// Directories (relative; empty = the root) listed to their end.
    pub listed: Vec<Box<[u8]>>,
    /// Entries of listed directories that were not walked on: out of scope (ignored, `.git`,
    /// the store's directory), a directory that could not be listed, an entry that could not
    /// be examined or vanished before its `lstat`. With `listed` and the files the walk
    /// passed on, every name the listings held (see [`super::Absence`]).
    pub unlisted: Vec<Box<[u8]>>,
}

/// Options of [`walk`].
pub(crate) struct WalkOptions {
    /// Apply ignore files (`false`: every entry but `.git` is in scope).
    pub filters: bool,
    /// Stop (and set `over_limit`) when more than this many files or directories are seen.
    pub max_entries: u64,
    /// A directory not to enter, by (device, inode): the store root when it is inside the workspace.
    pub skip_dir: Option<(u64, u64)>,
    /// Threads (0 = the number of CPUs, at most 12).
    pub threads: usize,
    /// A directory with more entries than this has them examined in parts of
    /// [`PART`] entries, by whichever threads are free (with more than one thread).
    pub split_at: usize,
}

/// Entries examined by one task when a large directory's entries are shared out.
const PART: usize = 1024;

impl WalkOptions {
    pub fn new(max_entries: u64) -> Self {
        WalkOptions {
            filters: true,
            max_entries,
            skip_dir: None,
            threads: 0,
            split_at: 2 * PART,
        }
    }
}

/// `base` joined with the relative path `rel`, as `Path::join` does.
fn join_into(out: &mut Vec<u8>, base: &[u8], rel: &[u8]) {
    out.clear();
    out.extend_from_slice(base);
    if !base.is_empty() && !base.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(rel);
}

fn as_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
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

/// A directory still to list.
struct Job {
    /// Relative path (empty = the root).
    rel: Box<[u8]>,
    /// Where its name starts in `rel`.
    name_at: usize,
    /// The open parent directory (`None`: the root, opened by path).
    parent: Option<Arc<OwnedFd>>,
    /// The rules in force in the parent directory.
    chain: Option<Arc<Chain>>,
}

/// A listed directory whose entries are examined in parts, by several threads.
struct Listing {
    fd: Arc<OwnedFd>,
    rel: Box<[u8]>,
    names: Vec<u8>,
    entries: Vec<Listed>,
    /// The rules in force in the directory.
    chain: Option<Arc<Chain>>,
}

/// Work for a walking thread.
enum Task {
    /// A directory to list.
    List(Job),
    /// Some of a listed directory's entries to examine.
    Part(Arc<Listing>, std::ops::Range<usize>),
}

/// The stack of work shared by the walking threads.
struct Queue {
    state: Mutex<(Vec<Task>, usize)>,
    more: Condvar,
}

impl Queue {
    /// The next task, or `None` when the walk is over (no task left, none running).
    fn pop(&self, quit: &AtomicBool) -> Option<Task> {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if quit.load(Ordering::Relaxed) {
                self.more.notify_all();
                return None;
            }
            if let Some(j) = g.0.pop() {
                g.1 += 1;
                return Some(j);
            }
            if g.1 == 0 {
                self.more.notify_all();
                return None;
            }
            g = self.more.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Marks a task done and adds the work it found (subdirectories, parts of a listing).
    fn done(&self, children: &mut Vec<Task>) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.1 -= 1;
        let n = children.len();
        g.0.append(children);
        drop(g);
        if n > 1 {
            self.more.notify_all();
        } else {
            self.more.notify_one();
        }
    }
}

/// Shared, read-only state of one walk.
struct Ctx<'a> {
    root: &'a Path,
    opts: &'a WalkOptions,
    outer: &'a Outer,
    queue: Queue,
    files: AtomicU64,
    dirs: AtomicU64,
    over: AtomicBool,
    /// Whether large directories' entries are shared out (more than one thread).
    split: bool,
}

/// One entry of a listing (its name is `names[start..end]`).
struct Listed {
    start: usize,
    end: usize,
    kind: FileType,
    ino: u64,
}

/// A walking thread's buffers and results.
struct Worker<S> {
    sink: S,
    out: Walked,
    dirbuf: Vec<MaybeUninit<u8>>,
    names: Vec<u8>,
    listed: Vec<Listed>,
    rel: Vec<u8>,
    scratch: Vec<u8>,
    children: Vec<Task>,
}

fn io_text(path: &Path, e: impl Into<std::io::Error>) -> String {
    format!("{}: {}", path.display(), e.into())
}

impl<S: Sink> Worker<S> {
    fn new(sink: S) -> Self {
        Worker {
            sink,
            out: Walked::default(),
            dirbuf: vec![MaybeUninit::uninit(); 32 * 1024],
            names: Vec::new(),
            listed: Vec::new(),
            rel: Vec::new(),
            scratch: Vec::new(),
            children: Vec::new(),
        }
    }

    /// `lstat` of entry `name` (at `rel`) in its open directory; `None` when it vanished
    /// since the listing (simply not there) or failed (the failure noted in `errors`).
    fn lstat_entry(
        ctx: &Ctx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        rel: &[u8],
        errors: &mut Vec<(Box<[u8]>, String)>,
    ) -> Option<rustix::fs::Stat> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => Some(s),
            Err(rustix::io::Errno::NOENT) => None,
            Err(e) => {
                errors.push((rel.into(), io_text(&Self::full(ctx, rel), e)));
                None
            }
        }
    }

    fn full(ctx: &Ctx<'_>, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            ctx.root.to_path_buf()
        } else {
            ctx.root.join(OsStr::from_bytes(rel))
        }
    }

    fn push_ignore_errors(&mut self, ctx: &Ctx<'_>, mut errs: Vec<ignore::Error>) {
        let err = match errs.len() {
            0 => return,
            1 => errs.remove(0),
            _ => ignore::Error::Partial(errs),
        };
        let p = err_path(&err).unwrap_or_else(|| ctx.root.to_path_buf());
        let rel = rel_of(ctx.root, &p);
        let is_dir = std::fs::symlink_metadata(&p)
            .map(|m| m.is_dir())
            .unwrap_or(true);
        if is_dir {
            self.out.dir_errors.push((rel, err.to_string()));
        } else {
            self.out.entry_errors.push((rel, err.to_string()));
        }
    }

    /// Lists one directory: files go to the sink, subdirectories to `children`.
    fn list(&mut self, ctx: &Ctx<'_>, job: &Job) {
        if !self.sink.dir(&job.rel) {
            self.out.unlisted.push(job.rel.clone());
            return;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let opened = match &job.parent {
            Some(p) => rustix::fs::openat(
                &**p,
                OsStr::from_bytes(&job.rel[job.name_at..]),
                flags,
                Mode::empty(),
            ),
            None => rustix::fs::open(Self::full(ctx, &job.rel), flags, Mode::empty()),
        };
        let fd = match opened {
            Ok(fd) => Arc::new(fd),
            Err(e) => {
                let text = io_text(&Self::full(ctx, &job.rel), e);
                self.out.dir_errors.push((job.rel.clone(), text));
                self.out.unlisted.push(job.rel.clone());
                return;
            }
        };
        self.names.clear();
        self.listed.clear();
        let mut has = [false; 3];
        let mut rd = RawDir::new(&*fd, &mut self.dirbuf);
        while let Some(r) = rd.next() {
            let e = match r {
                Ok(e) => e,
                Err(e) => {
                    let text = io_text(&Self::full(ctx, &job.rel), e);
                    self.out.dir_errors.push((job.rel.clone(), text));
                    self.out.unlisted.push(job.rel.clone());
                    return;
                }
            };
            let name = e.file_name().to_bytes();
            match name {
                b"." | b".." => continue,
                b".ignore" => has[0] = true,
                b".gitignore" => has[1] = true,
                b".git" => has[2] = true,
                _ => {}
            }
            let start = self.names.len();
            self.names.extend_from_slice(name);
            self.listed.push(Listed {
                start,
                end: self.names.len(),
                kind: e.file_type(),
                ino: e.ino(),
            });
        }
        // This directory's rules (only when it holds an ignore file).
        let mut chain = job.chain.clone();
        if ctx.opts.filters && has.iter().any(|h| *h) {
            let mut errs = Vec::new();
            let dir = Self::full(ctx, &job.rel);
            let rules = rules_of(as_path(&job.rel), &dir, has, &mut errs);
            self.push_ignore_errors(ctx, errs);
            if !rules.is_empty() {
                chain = Some(Arc::new(Chain {
                    rules,
                    parent: chain,
                }));
            }
        }
        let n = self.listed.len();
        if ctx.split && n > ctx.opts.split_at {
            // Shared out: the threads that are free take the parts (this one included).
            let listing = Arc::new(Listing {
                fd,
                rel: job.rel.clone(),
                names: std::mem::take(&mut self.names),
                entries: std::mem::take(&mut self.listed),
                chain,
            });
            for start in (0..n).step_by(PART) {
                self.children
                    .push(Task::Part(Arc::clone(&listing), start..n.min(start + PART)));
            }
            self.out.listed.push(job.rel.clone());
            return;
        }
        let names = std::mem::take(&mut self.names);
        let listed = std::mem::take(&mut self.listed);
        let whole = self.examine(ctx, &fd, &job.rel, &names, &listed[..], chain.as_ref());
        self.names = names;
        self.listed = listed;
        if whole {
            self.out.listed.push(job.rel.clone());
        }
    }

    /// Examines `entries` of the listed directory `rel` (open as `fd`; `names` holds the
    /// entries' names, `chain` the rules in force there): files go to the sink,
    /// subdirectories to `children`. `false` when the walk stopped at its limit on the way.
    fn examine(
        &mut self,
        ctx: &Ctx<'_>,
        fd: &Arc<OwnedFd>,
        rel: &[u8],
        names: &[u8],
        entries: &[Listed],
        chain: Option<&Arc<Chain>>,
    ) -> bool {
        let check = ctx.opts.filters && (chain.is_some() || !ctx.outer.is_empty());
        let max = ctx.opts.max_entries;
        for &Listed {
            start,
            end,
            mut kind,
            ino,
        } in entries
        {
            if ctx.over.load(Ordering::Relaxed) {
                return false;
            }
            let name = &names[start..end];
            let git = name == b".git";
            self.rel.clear();
            self.rel.extend_from_slice(rel);
            if !rel.is_empty() {
                self.rel.push(b'/');
            }
            let name_at = self.rel.len();
            self.rel.extend_from_slice(name);
            if git {
                self.out.unlisted.push(self.rel.as_slice().into());
                continue;
            }
            let name = OsStr::from_bytes(name);
            let mut stat = None;
            if kind == FileType::Unknown {
                let Some(s) =
                    Self::lstat_entry(ctx, fd, name, &self.rel, &mut self.out.entry_errors)
                else {
                    self.out.unlisted.push(self.rel.as_slice().into());
                    continue;
                };
                kind = FileType::from_raw_mode(s.st_mode as _);
                stat = Some(Stat::from_raw(&s));
            }
            let is_dir = kind == FileType::Directory;
            if check && ignored(chain, &ctx.outer, &self.rel, is_dir, &mut self.scratch) {
                self.out.unlisted.push(self.rel.as_slice().into());
                continue;
            }
            if is_dir {
                if let Some((dev, skip_ino)) = ctx.opts.skip_dir {
                    if ino == skip_ino {
                        if let Ok(s) = rustix::fs::statat(&**fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                            #[allow(clippy::unnecessary_cast)]
                            if s.st_dev as u64 == dev && s.st_ino as u64 == skip_ino {
                                self.out.unlisted.push(self.rel.as_slice().into());
                                continue;
                            }
                        }
                    }
                }
                if ctx.dirs.fetch_add(1, Ordering::Relaxed) >= max {
                    ctx.over.store(true, Ordering::Relaxed);
                    return false;
                }
                self.children.push(Task::List(Job {
                    rel: self.rel.as_slice().into(),
                    name_at,
                    parent: Some(Arc::clone(fd)),
                    chain: chain.cloned(),
                }));
                continue;
            }
            if ctx.files.fetch_add(1, Ordering::Relaxed) >= max {
                ctx.over.store(true, Ordering::Relaxed);
                return false;
            }
            let st = match stat {
                Some(s) => s,
                None => {
                    match Self::lstat_entry(ctx, fd, name, &self.rel, &mut self.out.entry_errors) {
                        Some(s) => Stat::from_raw(&s),
                        None => {
                            self.out.unlisted.push(self.rel.as_slice().into());
                            continue;
                        }
                    }
                }
            };
            self.sink.file(&self.rel, st);
        }
        true
    }

    fn run(&mut self, ctx: &Ctx<'_>) {
        while let Some(task) = ctx.queue.pop(&ctx.over) {
            match &task {
                Task::List(job) => self.list(ctx, job),
                Task::Part(l, range) => {
                    self.examine(
                        ctx,
                        &l.fd,
                        &l.rel,
                        &l.names,
                        &l.entries[range.clone()],
                        l.chain.as_ref(),
                    );
                }
            }
            drop(task);
            ctx.queue.done(&mut self.children);
        }
    }
}

/// Walks `root` in parallel and `lstat`s every in-scope entry into the sinks made by
/// `sink` (one per thread); returns what else the walk saw and the sinks.
pub(crate) fn walk<S: Sink>(
    root: &Path,
    opts: &WalkOptions,
    sink: impl Fn() -> S + Sync,
) -> (Walked, Vec<S>) {
    let mut out = Walked::default();
    // The root itself is never followed when it is a symlink (nothing in scope then).
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return (out, Vec::new()),
        Err(e) => {
            out.dir_errors.push((Box::default(), io_text(root, e)));
            return (out, Vec::new());
        }
    }
    let mut errs = Vec::new();
    let outer = if opts.filters {
        Outer::new(root, &mut errs)
    } else {
        Outer {
            root: Vec::new(),
            canonical: Vec::new(),
            parents: Vec::new(),
            global: Gitignore::empty(),
        }
    };
    let first = vec![Task::List(Job {
        rel: Box::default(),
        name_at: 0,
        parent: None,
        chain: None,
    })];
    run_tasks(root, opts, &outer, first, errs, Vec::new(), sink)
}

/// Runs the walk's threads over the tasks `first` (the ignore errors `errs` and the directly
/// examined files `direct` go to the first worker).
fn run_tasks<S: Sink>(
    root: &Path,
    opts: &WalkOptions,
    outer: &Outer,
    first: Vec<Task>,
    errs: Vec<ignore::Error>,
    direct: Vec<(Box<[u8]>, Stat)>,
    sink: impl Fn() -> S + Sync,
) -> (Walked, Vec<S>) {
    let mut out = Walked::default();
    let threads = match opts.threads {
        0 => crate::cpus().min(12),
        n => n,
    };
    let ctx = Ctx {
        root,
        opts,
        outer,
        queue: Queue {
            state: Mutex::new((first, 0)),
            more: Condvar::new(),
        },
        files: AtomicU64::new(0),
        dirs: AtomicU64::new(0),
        over: AtomicBool::new(false),
        split: threads > 1,
    };
    let mut workers: Vec<Worker<S>> = Vec::with_capacity(threads);
    let mut here = Worker::new(sink());
    for (rel, st) in &direct {
        here.sink.file(rel, *st);
    }
    if threads <= 1 {
        here.push_ignore_errors(&ctx, errs);
        here.run(&ctx);
        workers.push(here);
    } else {
        std::thread::scope(|sc| {
            let ctx = &ctx;
            let sink = &sink;
            // The calling thread is one of the workers: one thread fewer to start and join.
            let handles: Vec<_> = (1..threads)
                .map(|_| {
                    sc.spawn(move || {
                        let mut w = Worker::new(sink());
                        w.run(ctx);
                        w
                    })
                })
                .collect();
            here.run(ctx);
            workers.push(here);
            for h in handles {
                match h.join() {
                    Ok(w) => workers.push(w),
                    Err(p) => std::panic::resume_unwind(p),
                }
            }
        });
        if let Some(w) = workers.first_mut() {
            w.push_ignore_errors(&ctx, errs);
        }
    }
    out.over_limit = ctx.over.load(Ordering::Relaxed);
    let mut sinks = Vec::with_capacity(workers.len());
    for w in workers {
        out.dir_errors.extend(w.out.dir_errors);
        out.entry_errors.extend(w.out.entry_errors);
        out.listed.extend(w.out.listed);
        out.unlisted.extend(w.out.unlisted);
        sinks.push(w.sink);
    }
    (out, sinks)
}

/// The ignore rules of a workspace kept between partial walks ([`walk_some`]): the rules
/// from outside it and those in force in each directory asked about. Valid as long as no
/// ignore file changed (the change watcher sends the scan to a full walk then).
pub(crate) struct Scope {
    outer: Outer,
    /// Per directory: `None` when it is out of scope (ignored, `.git`, not a directory),
    /// else the rules in force in it.
    dirs: std::collections::HashMap<Box<[u8]>, Option<Option<Arc<Chain>>>>,
    /// Ignore-file errors met building the rules (reported once by the next partial walk).
    errs: Vec<ignore::Error>,
}

impl Scope {
    /// The rules of workspace `root` from outside it (the directories above, the global
    /// excludes); the directories' own are read when first asked for.
    pub(crate) fn new(root: &Path) -> Scope {
        let mut errs = Vec::new();
        let outer = Outer::new(root, &mut errs);
        Scope {
            outer,
            dirs: std::collections::HashMap::new(),
            errs,
        }
    }

    /// The rules in force in directory `rel` (`None`: out of scope). Its ancestors are
    /// checked as the walk would: each an in-scope directory, never `.git`, never `skip`.
    fn chain(&mut self, root: &Path, rel: &[u8], skip: Option<(u64, u64)>) -> Option<Option<Arc<Chain>>> {
        if let Some(c) = self.dirs.get(rel) {
            return c.clone();
        }
        let here = if rel.is_empty() {
            Some(None)
        } else {
            let (parent, name) = match rel.iter().rposition(|&b| b == b'/') {
                Some(i) => (&rel[..i], &rel[i + 1..]),
                None => (&b""[..], rel),
            };
            match self.chain(root, parent, skip) {
                None => None,
                Some(pchain) => {
                    let mut buf = Vec::new();
                    let full = root.join(OsStr::from_bytes(rel));
                    let is_dir = std::fs::symlink_metadata(&full).map(|m| {
                        use std::os::unix::fs::MetadataExt;
                        (m.is_dir(), (m.dev(), m.ino()))
                    });
                    match is_dir {
                        Ok((true, id))
                            if name != b".git"
                                && Some(id) != skip
                                && !ignored(pchain.as_ref(), &self.outer, rel, true, &mut buf) =>
                        {
                            Some(pchain)
                        }
                        _ => None,
                    }
                }
            }
        };
        // This directory's own rules.
        let out = here.map(|chain| {
            let dir = if rel.is_empty() {
                root.to_path_buf()
            } else {
                root.join(OsStr::from_bytes(rel))
            };
            let has = [
                dir.join(".ignore").exists(),
                dir.join(".gitignore").exists(),
                dir.join(".git").exists(),
            ];
            if !has.iter().any(|h| *h) {
                return chain;
            }
            let rules = rules_of(as_path(rel), &dir, has, &mut self.errs);
            if rules.is_empty() {
                chain
            } else {
                Some(Arc::new(Chain {
                    rules,
                    parent: chain,
                }))
            }
        });
        self.dirs.insert(rel.into(), out.clone());
        out
    }
}

/// A partial walk of workspace `root`: each of `paths` (workspace-relative, sorted, none
/// under another one given with `subtree`) is looked at as the full walk would look at it:
/// out of scope (ignored, `.git`, the store's directory, under a directory out of scope)
/// or gone, it is passed over; an in-scope file goes to the sink; an in-scope directory
/// is walked to its end when its `subtree` flag is set (created or moved in), else passed
/// over (its entries are among `paths` when they changed). Returns what the walk saw and
/// the sinks, as [`walk`] does.
pub(crate) fn walk_some<S: Sink>(
    root: &Path,
    opts: &WalkOptions,
    scope: &mut Scope,
    paths: &[(Box<[u8]>, bool)],
    sink: impl Fn() -> S + Sync,
) -> (Walked, Vec<S>) {
    let mut first = Vec::new();
    let mut direct = Vec::new();
    let mut buf = Vec::new();
    let mut out_errs = Vec::new();
    for (rel, subtree) in paths {
        if rel.is_empty() {
            continue;
        }
        let (parent, name_at) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], i + 1),
            None => (&b""[..], 0),
        };
        if &rel[name_at..] == b".git" {
            continue;
        }
        let Some(chain) = scope.chain(root, parent, opts.skip_dir) else {
            continue;
        };
        let full = root.join(OsStr::from_bytes(rel));
        let st = match rustix::fs::lstat(&full) {
            Ok(s) => s,
            Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => continue,
            Err(e) => {
                out_errs.push((rel.clone(), io_text(&full, e)));
                continue;
            }
        };
        let kind = FileType::from_raw_mode(st.st_mode as _);
        let is_dir = kind == FileType::Directory;
        if opts.filters && ignored(chain.as_ref(), &scope.outer, rel, is_dir, &mut buf) {
            continue;
        }
        if is_dir {
            #[allow(clippy::unnecessary_cast)]
            let id = (st.st_dev as u64, st.st_ino as u64);
            if *subtree && Some(id) != opts.skip_dir {
                first.push(Task::List(Job {
                    rel: rel.clone(),
                    name_at,
                    parent: None,
                    chain,
                }));
            }
            continue;
        }
        direct.push((rel.clone(), Stat::from_raw(&st)));
    }
    let errs = std::mem::take(&mut scope.errs);
    let (mut walked, sinks) = run_tasks(root, opts, &scope.outer, first, errs, direct, sink);
    walked.entry_errors.extend(out_errs);
    (walked, sinks)
}

#[cfg(test)]
mod tests;
