//! The change watcher of a workspace: inotify watches on every in-scope directory and the
//! set of paths changed since the last scan (the dirty set), so that a scan re-examines only
//! those instead of walking the workspace.
//!
//! The full walk stays the fallback and the referee. A scan walks in full when the watcher
//! cannot vouch for its dirty set: its first scan (the watches are added by that walk, each
//! before its directory is listed), after the kernel's queue overflowed (`IN_Q_OVERFLOW`),
//! after an ignore file changed (`.gitignore`, `.ignore`, the workspace's
//! `.git/info/exclude`: the scope may have moved), when the index is not the one its last
//! scan left (another process scanned meanwhile, a rebuilt or unfinished baseline), after a
//! scan that met unreadable directories, and when the workspace directory itself moved.
//! No watcher at all (every scan a full walk, as the report says): inotify could not start,
//! the watch limit (`fs.inotify.max_user_watches`) or the instance limit ran out (the
//! watches are then dropped, giving the user's quota back), the workspace is on a network
//! or FUSE filesystem (changes made elsewhere are never reported there), or
//! `DSH_REWIND_WATCH=0` turned it off.
//!
//! Why the inotify descriptor is read here, on the scanning thread, and not by a crate that
//! reads it on a thread of its own (such as `notify`): the kernel queues an inotify event
//! synchronously, inside the system call that made the change (the fsnotify hook runs
//! before the call returns). A tool call has returned before the host asks for the scan
//! after it, so every event of what it did is already queued then; reading the descriptor
//! until it would block, under the watcher's lock, takes each of them into the dirty set.
//! That is the barrier before the dirty set is trusted, with no sentinel file and no wait.
//! A reader thread would need a round trip (a sentinel written and its event awaited) to
//! give the same guarantee. The watch mask also leaves out opens, reads and closes without
//! a write (a build or a `grep` reading the whole tree would fill the queue with them).
//!
//! Not seen by any watcher, seen by the next full walk: a write through a shared memory
//! mapping, a change through another hard link to a file (such files are never restored),
//! a change of the global git excludes or of an ignore file above the workspace.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use super::walk::Scope;

/// The environment variable that turns the watcher off (`0`, `off` or `false`): every
/// scan is then a full walk.
pub const WATCH_ENV: &str = "DSH_REWIND_WATCH";

/// How one scan looked at the workspace ([`ScanReport::mode`](super::ScanReport::mode)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanMode {
    /// A full walk of the workspace.
    #[default]
    Full,
    /// Only the paths the change watcher reported were examined.
    Watched,
}

/// What a scan is to do, as the watcher tells it.
pub(crate) enum Plan {
    /// Walk in full, for this reason.
    Full(String),
    /// Examine these paths (sorted; `true`: a directory created, moved or removed there, to
    /// be walked to its end and its indexed entries checked), with the rules kept.
    Partial(Vec<(Box<[u8]>, bool)>, Scope),
}

/// The watches: no open/read/close-without-write events, every change of a name, content,
/// metadata; the directory itself removed or moved (its watch then says nothing more).
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::DONT_FOLLOW
}

/// What the index a scan left keeps, for the next partial scan: the bytes of content the
/// store keeps for it (the baseline budget's count) and its not-covered entries with why.
pub(crate) struct Tally {
    /// The `scanned_at` of that index.
    pub index_at: u64,
    /// The per-file cap the reasons were written with.
    pub cap: u64,
    pub covered: u64,
    pub not_cov: HashMap<Box<[u8]>, String>,
    /// Its entries whose status changed within `diff::RACY_NS` before it was scanned.
    pub racy: Vec<Box<[u8]>>,
}

struct Inner {
    root: PathBuf,
    tally: Option<Tally>,
    /// `None` once the watcher gave up (the reason in `gone`).
    ino: Option<Inotify>,
    gone: Option<String>,
    by_wd: HashMap<WatchDescriptor, Box<[u8]>>,
    by_dir: HashMap<Box<[u8]>, WatchDescriptor>,
    /// Changed paths since the last scan (`true`: a directory's structure, see [`Plan`]).
    dirty: HashMap<Box<[u8]>, bool>,
    /// Why the next scan must walk in full (`None`: the dirty set can be trusted).
    resync: Option<String>,
    /// The index the last scan left: its `scanned_at` and the workspace slot's count of
    /// index loads and saves then (`None`: no scan yet, or it did not finish).
    synced_at: Option<(u64, u64)>,
    /// The workspace's `.git/info/exclude` as the last scan saw it (not watched: `.git`
    /// is never entered).
    exclude: Option<(i64, i64, u64)>,
    scope: Option<Scope>,
    buf: Vec<u8>,
}

/// The change watcher of one workspace (see the module doc). Kept alive by the session
/// handles that scan the workspace; the workspace's slot keeps a weak reference.
pub(crate) struct Watcher {
    inner: Mutex<Inner>,
}

/// Filesystem types whose changes made elsewhere inotify never reports.
const REMOTE_FS: &[i64] = &[
    0x6969,              // NFS
    0x517B,              // SMB
    0xFF53_4D42_u32 as i64, // CIFS
    0xFE53_4D42_u32 as i64, // SMB2
    0x6573_5546,         // FUSE
    0x0102_1997,         // 9p
    0x00C3_6400,         // Ceph
    0x5346_414F,         // AFS
];

fn exclude_stamp(root: &Path) -> Option<(i64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(root.join(".git/info/exclude"))
        .ok()
        .map(|m| (m.mtime(), m.mtime_nsec(), m.size()))
}

fn is_rule_file(name: &[u8]) -> bool {
    name == b".gitignore" || name == b".ignore"
}

/// Whether the environment turns the watcher off.
pub(crate) fn turned_off() -> bool {
    std::env::var(WATCH_ENV)
        .is_ok_and(|v| matches!(v.trim(), "0" | "off" | "false" | "no"))
}

impl Watcher {
    /// A watcher of workspace `root` (no watch yet: the first scan's walk adds them). `Err`:
    /// why there is none.
    pub(crate) fn start(root: &Path) -> Result<Watcher, String> {
        if let Ok(fs) = rustix::fs::statfs(root) {
            #[allow(clippy::unnecessary_cast)]
            let t = fs.f_type as i64;
            if REMOTE_FS.contains(&t) {
                return Err(format!(
                    "the workspace is on a network or FUSE filesystem (type {t:#x}), whose changes made elsewhere are not reported"
                ));
            }
        }
        let ino = Inotify::init().map_err(|e| format!("inotify could not start: {e}"))?;
        Ok(Watcher {
            inner: Mutex::new(Inner {
                root: root.to_path_buf(),
                tally: None,
                ino: Some(ino),
                gone: None,
                by_wd: HashMap::new(),
                by_dir: HashMap::new(),
                dirty: HashMap::new(),
                resync: Some("the first scan of the change watcher".into()),
                synced_at: None,
                exclude: None,
                scope: None,
                buf: vec![0; 64 * 1024],
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the next scan walk in full, as after a queue overflow (a test hook too).
    pub(crate) fn mark_overflowed(&self) {
        self.lock().resync = Some("the change queue overflowed".into());
    }

    /// What the scan about to run is to do. `index_at`: the `scanned_at` of the index it
    /// compares with and the slot's count of index loads and saves (`None`: no usable
    /// index); `unsure`: why that index cannot be trusted anyway (an incomplete baseline,
    /// one taken over from another session): walk in full. An index saved or read from
    /// disk by anything but the last scan (a restore's bookkeeping, another process) is not
    /// the one the dirty set is relative to: walk in full. Reads every queued event first (the
    /// barrier, see the module doc). After [`Plan::Full`] the dirty set is empty: the walk
    /// sees what changed so far, the events from now on are the next scan's.
    pub(crate) fn plan(&self, index_at: Option<(u64, u64)>, unsure: Option<&str>) -> Plan {
        let mut g = self.lock();
        g.drain();
        if let Some(why) = &g.gone {
            return Plan::Full(format!("no change watcher: {why}"));
        }
        let stamp = exclude_stamp(&g.root);
        let why = if let Some(r) = g.resync.take() {
            Some(r)
        } else if let Some(u) = unsure {
            Some(u.to_string())
        } else if index_at.is_none() || index_at != g.synced_at {
            Some("the index is not the one this process's last scan left, untouched".into())
        } else if stamp != g.exclude {
            Some("the workspace's .git/info/exclude changed".into())
        } else {
            None
        };
        g.exclude = stamp;
        // Set again by `finish`: a scan that never finishes leaves the next one a full walk.
        g.synced_at = None;
        if let Some(why) = why {
            g.dirty.clear();
            g.scope = None;
            return Plan::Full(why);
        }
        let mut paths: Vec<(Box<[u8]>, bool)> = g.dirty.drain().collect();
        paths.sort();
        // A path under a directory walked to its end is seen by that walk.
        let mut kept: Vec<(Box<[u8]>, bool)> = Vec::with_capacity(paths.len());
        for (p, sub) in paths {
            if let Some((last, true)) = kept.last() {
                if p.len() > last.len() && p.starts_with(last) && p[last.len()] == b'/' {
                    continue;
                }
            }
            kept.push((p, sub));
        }
        let root = g.root.clone();
        let scope = g.scope.take().unwrap_or_else(|| Scope::new(&root));
        Plan::Partial(kept, scope)
    }

    /// Ends a scan: `index_at`: the `scanned_at` of the index it left and the slot's count of
    /// index loads and saves once it is saved (`None`: it failed or stopped, the next scan
    /// walks in full); `clean`: no directory or entry could not be read; `scope`: the rules
    /// a partial scan used, kept for the next one.
    pub(crate) fn finish(&self, index_at: Option<(u64, u64)>, clean: bool, scope: Option<Scope>) {
        let mut g = self.lock();
        g.synced_at = index_at;
        if index_at.is_none() {
            g.resync.get_or_insert_with(|| "the last scan did not finish".into());
        } else if !clean {
            g.resync
                .get_or_insert_with(|| "the last scan met entries it could not read".into());
        }
        if g.scope.is_none() {
            g.scope = scope;
        }
    }

    /// Watches in-scope directory `rel` (a walk calls this before it lists the directory).
    /// A watch that cannot be added for lack of watches gives up the watcher; one that
    /// cannot be added otherwise (the directory went, or cannot be read) sends the next
    /// scan to a full walk. Always `true` (the walk goes on).
    pub(crate) fn watch_dir(&self, rel: &[u8]) -> bool {
        let mut g = self.lock();
        if g.ino.is_none() || g.by_dir.contains_key(rel) {
            return true;
        }
        let full = if rel.is_empty() {
            g.root.clone()
        } else {
            g.root.join(OsStr::from_bytes(rel))
        };
        let Some(ino) = g.ino.as_mut() else {
            return true;
        };
        match ino.watches().add(&full, mask()) {
            Ok(wd) => {
                // The same directory under a new name (a moved one whose old watch is still
                // being removed): the newest name wins.
                if let Some(old) = g.by_wd.insert(wd.clone(), rel.into()) {
                    g.by_dir.remove(&old);
                }
                g.by_dir.insert(rel.into(), wd);
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) => {
                g.give_up(format!(
                    "the inotify watch limit ran out ({e}; raise fs.inotify.max_user_watches)"
                ));
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error()) => {
                g.give_up(format!("the inotify instance limit ran out ({e})"));
            }
            Err(_) => {
                g.resync
                    .get_or_insert_with(|| "a directory could not be watched".into());
            }
        }
        true
    }

    /// The tally the last scan left, when it is that of the index at `index_at` under the
    /// per-file cap `cap`.
    pub(crate) fn take_tally(&self, index_at: u64, cap: u64) -> Option<Tally> {
        self.lock()
            .tally
            .take()
            .filter(|t| t.index_at == index_at && t.cap == cap)
    }

    /// Keeps the tally of the index a scan left.
    pub(crate) fn put_tally(&self, t: Tally) {
        self.lock().tally = Some(t);
    }
}

impl Inner {
    fn give_up(&mut self, why: String) {
        // Closing the descriptor removes every watch, giving the user's quota back.
        self.ino = None;
        self.by_wd.clear();
        self.by_dir.clear();
        self.dirty.clear();
        self.gone.get_or_insert(why);
    }

    /// Reads every queued event into the dirty set.
    fn drain(&mut self) {
        let Some(mut ino) = self.ino.take() else {
            return;
        };
        let mut buf = std::mem::take(&mut self.buf);
        let mut failed = None;
        loop {
            match ino.read_events(&mut buf) {
                Ok(events) => {
                    let mut n = 0;
                    for ev in events {
                        n += 1;
                        self.event(&mut ino, ev.wd, ev.mask, ev.name);
                    }
                    if n == 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    failed = Some(format!("reading the inotify queue failed: {e}"));
                    break;
                }
            }
        }
        self.buf = buf;
        self.ino = Some(ino);
        if let Some(why) = failed {
            self.give_up(why);
        }
    }

    fn event(&mut self, ino: &mut Inotify, wd: WatchDescriptor, mask: EventMask, name: Option<&OsStr>) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            self.resync = Some("the change queue overflowed".into());
            return;
        }
        let Some(dir) = self.by_wd.get(&wd).cloned() else {
            return; // a watch removed meanwhile
        };
        if mask.contains(EventMask::IGNORED) {
            self.by_wd.remove(&wd);
            if self.by_dir.get(&dir) == Some(&wd) {
                self.by_dir.remove(&dir);
            }
            if dir.is_empty() {
                self.resync = Some("the workspace directory's watch was removed".into());
            }
            return;
        }
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            if dir.is_empty()
                && mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
            {
                self.resync = Some("the workspace directory itself moved or was removed".into());
            } else if dir.is_empty() && mask.contains(EventMask::ATTRIB) {
                // Its permissions may have changed (a workspace no longer readable): no
                // watch above it reports that by name.
                self.resync
                    .get_or_insert_with(|| "the workspace directory's status changed".into());
            }
            return; // the directory itself: its parent's watch reports it by name
        };
        let name = name.as_bytes();
        let mut path = Vec::with_capacity(dir.len() + 1 + name.len());
        path.extend_from_slice(&dir);
        if !dir.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        if is_rule_file(name) {
            self.resync = Some(format!(
                "an ignore file changed ({})",
                String::from_utf8_lossy(&path)
            ));
        }
        let structural = mask.contains(EventMask::ISDIR);
        if structural && mask.intersects(EventMask::MOVED_FROM | EventMask::DELETE) {
            // The directory's watches (its own and those below it) name paths that are no
            // longer it: dropped now, added again by the walk of wherever it went.
            let gone: Vec<Box<[u8]>> = self
                .by_dir
                .keys()
                .filter(|k| k.len() >= path.len() && k.starts_with(&path) && (k.len() == path.len() || k[path.len()] == b'/'))
                .cloned()
                .collect();
            for k in gone {
                if let Some(w) = self.by_dir.remove(&k) {
                    self.by_wd.remove(&w);
                    let _ = ino.watches().remove(w);
                }
            }
        }
        let e = self.dirty.entry(path.into_boxed_slice()).or_insert(false);
        *e |= structural;
    }
}

/// The watcher a scan of workspace `root` uses: the one the slot holds (`slot`, a weak
/// reference) while a session handle keeps it alive, else a new one, kept by this
/// handle (`mine`) and the slot. `Err`: why there is none.
pub(crate) fn for_scan(
    slot: &mut Weak<Watcher>,
    mine: &mut Option<Arc<Watcher>>,
    root: &Path,
) -> Result<Arc<Watcher>, String> {
    if turned_off() {
        *mine = None;
        return Err(format!("turned off ({WATCH_ENV}=0)"));
    }
    if let Some(w) = slot.upgrade() {
        if mine.as_ref().is_none_or(|m| !Arc::ptr_eq(m, &w)) {
            *mine = Some(Arc::clone(&w));
        }
        return Ok(w);
    }
    let w = Arc::new(Watcher::start(root)?);
    *slot = Arc::downgrade(&w);
    *mine = Some(Arc::clone(&w));
    Ok(w)
}
