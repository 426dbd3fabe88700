//! Putting one path into one state: guarded by what the journal expects there,
//! written in place or through a temporary file and a rename, never through a symlink.

use super::*;

use std::collections::HashSet;

use crate::blob::{CopyFail, copy_blob_to, is_prefix_of_blob, is_write_over, read_blob_verified};
use crate::error::FsFailure;
use crate::fsio::{DiskMeta, FileKind, Walk};
use crate::path::RelPath;
use crate::seam::CrashPoint;

/// The paths of a journal's actions and the directories they may create: where a file
/// and a directory of the same name took each other's place in a restore.
pub(super) struct Shape<'a> {
    /// Every directory the actions may create.
    pub made: HashSet<&'a RelPath>,
    /// Every action's path.
    pub paths: HashSet<&'a RelPath>,
}

impl<'a> Shape<'a> {
    pub(super) fn of(intent: &'a JournalIntent) -> Self {
        Shape {
            made: intent.actions.iter().flat_map(|a| &a.create_dirs).collect(),
            paths: intent.actions.iter().map(|a| &a.path).collect(),
        }
    }
}

/// What a single apply did.
pub(super) enum Applied {
    Written,
    Deleted,
    Already,
}

/// How a mutation checks that the path is still what it expects.
pub(super) enum Guard<'a> {
    /// Current `lstat` must equal this (`None` = absent): the first pass.
    Meta(Option<&'a DiskMeta>),
    /// Current content must be one of these states (or already the target).
    Content(Vec<&'a Desired>),
}

impl Journal<'_> {
    /// Applies `desired` at `rel`, checking `guard` first. Never follows a symlink.
    /// A small file that exists is rewritten in place (the blob read and verified
    /// first; `partial` is the crash point between the two halves of the write): under
    /// a [`Guard::Meta`] (the first pass, the file holds the action's rescue state) and
    /// in `PowerLoss` mode written over its old bytes and then cut to its new length,
    /// otherwise cut to zero first; in `PowerLoss` mode then `fsync`ed (on Linux only:
    /// elsewhere that mode replaces every file, see [`IN_PLACE_DURABLE`]). Any other
    /// file gets its bytes through a temporary file (verified against the blob's
    /// SHA-256 while written) renamed over the path.
    pub(super) fn apply_state(
        &self,
        rel: &RelPath,
        desired: &Desired,
        create: bool,
        guard: Guard<'_>,
        partial: Option<CrashPoint>,
    ) -> Result<Applied, String> {
        let mut created = Vec::new();
        let want_create = create && matches!(desired, Desired::File { .. });
        let walk = self
            .s
            .ws
            .walk_parent(rel, want_create, &mut created)
            .map_err(|e| e.to_string())?;
        let dir = match walk {
            Walk::Blocked(true) => return Err("a parent directory is a symbolic link".into()),
            Walk::Blocked(false) => {
                // A parent is a file: the path is absent (as when the parent is missing).
                return match desired {
                    Desired::Absent => Ok(Applied::Already),
                    _ => Err("a parent component is not a directory".into()),
                };
            }
            Walk::Missing(_) => {
                // Parent missing: the path is absent.
                return match (desired, &guard) {
                    (Desired::Absent, _) => Ok(Applied::Already),
                    _ => Err("parent directory is missing".into()),
                };
            }
            Walk::Parent(d) => d,
        };
        let (_, name) = rel.split_last();
        let cur = self
            .s
            .ws
            .lstat(&dir, name, rel)
            .map_err(|e| e.to_string())?;
        let over = matches!(guard, Guard::Meta(_));
        match &guard {
            Guard::Meta(expected) => {
                if cur.as_ref() != *expected {
                    return Err("changed since the restore began; left as it is".into());
                }
            }
            Guard::Content(allowed) => {
                let now = self
                    .content_state(rel, cur.as_ref())
                    .map_err(|e| e.to_string())?;
                match now {
                    None => return Err("is no longer a regular file; left as it is".into()),
                    Some(now) if &now == desired => return Ok(Applied::Already),
                    Some(now) if allowed.iter().any(|a| **a == now) => {}
                    Some(_) => {
                        // An in-place write of one of these states, interrupted.
                        let states = allowed.iter().copied().chain(std::iter::once(desired));
                        if !self
                            .torn_write(rel, states, &[])
                            .map_err(|e| e.to_string())?
                        {
                            return Err("changed since the restore began; left as it is".into());
                        }
                    }
                }
            }
        }
        match desired {
            Desired::Absent => match cur {
                None => Ok(Applied::Already),
                Some(m) if m.kind == FileKind::File => {
                    self.s
                        .ws
                        .unlink(&dir, name, rel)
                        .map_err(|e| e.to_string())?;
                    Ok(Applied::Deleted)
                }
                Some(_) => Err("is not a regular file; not deleted".into()),
            },
            Desired::File { sha256, size, mode } => {
                if let Some(m) = &cur {
                    if m.kind != FileKind::File {
                        return Err("is not a regular file; not replaced".into());
                    }
                    if (!self.s.ws.io.durable || IN_PLACE_DURABLE)
                        && *size <= IN_PLACE_MAX
                        && m.nlink == 1
                    {
                        let wrote = self
                            .write_in_place(
                                &dir,
                                name,
                                rel,
                                (sha256, *size, *mode),
                                (m, over),
                                partial,
                            )
                            .map_err(|e| e.to_string())?;
                        if wrote {
                            return Ok(Applied::Written);
                        }
                    }
                }
                let (tmp, mut f) = self
                    .s
                    .ws
                    .create_tmp(&dir, name, rel)
                    .map_err(|e| e.to_string())?;
                let r = (|| -> Result<(), CopyFail> {
                    copy_blob_to(
                        &self.s.store.inner.fs,
                        &self.s.ws,
                        sha256,
                        *size,
                        &mut f,
                        rel,
                    )?;
                    self.s.ws.set_mode(&f, rel, *mode)?;
                    self.s.ws.sync_file(&f, rel)?;
                    Ok(())
                })();
                drop(f);
                if let Err(e) = r {
                    self.s.ws.discard_tmp(&dir, &tmp);
                    return Err(e.to_string());
                }
                if let Err(e) = self.s.ws.rename(&dir, &tmp, name, rel) {
                    self.s.ws.discard_tmp(&dir, &tmp);
                    return Err(e.to_string());
                }
                Ok(Applied::Written)
            }
        }
    }

    /// Writes blob `sha256` (`size` bytes, `mode`) over the existing file `name` in
    /// `dir`, keeping its inode: the blob is read and verified first, then the file
    /// (the one `seen` describes: same inode, one link) is written from the start, and
    /// its mode set.
    ///
    /// With `over` (the file holds the action's rescue state, which the intent journal
    /// names: the first pass checked its metadata, checked again here by `fstat`) the
    /// new bytes are written over the old ones and the file is then cut to the new
    /// length: no block is freed and allocated again when the sizes are close. An
    /// interruption leaves the first bytes of the new blob followed by the old bytes
    /// from there on. Without `over` (the file's content was read and is a state of
    /// the action, or an interrupted write of one) the file is cut to zero first and an
    /// interruption leaves a prefix of the new bytes; in `PowerLoss` mode it is written
    /// over its old bytes all the same, and `fsync`ed at the end: a power loss before
    /// that can leave any mix of old and new blocks. Continue and rollback recognise
    /// all of these ([`Journal::torn_write`]) because the intent journal names every
    /// blob before the first write, and the rescue blobs are on disk by then
    /// ([`crate::fsio::StoreFs::sync_filesystem`]). `Ok(false)`, having changed nothing, when the file
    /// cannot be opened for writing (no write permission, a running executable): the
    /// caller replaces it instead.
    fn write_in_place(
        &self,
        dir: &impl rustix::fd::AsFd,
        name: &[u8],
        rel: &RelPath,
        (sha256, size, mode): (&str, u64, u32),
        (seen, over): (&DiskMeta, bool),
        partial: Option<CrashPoint>,
    ) -> Result<bool, CopyFail> {
        let bytes = read_blob_verified(&self.s.store.inner.fs, sha256, size)?;
        let (mut f, now) = match self.s.ws.open_write(dir, name, rel) {
            Ok(o) => o,
            Err(e)
                if e.raw_os_error()
                    .is_some_and(|c| IN_PLACE_REFUSED.contains(&c)) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        if now.kind != FileKind::File
            || now.ino != seen.ino
            || now.dev != seen.dev
            || now.nlink != 1
            || (over && now != *seen)
        {
            return Err(CopyFail::Changed);
        }
        // Durable mode writes over the old bytes whatever they are: a power loss may keep
        // any of the blocks written, and a file cut to zero first could come back as
        // neither state nor a mix of them.
        let over_old = over || self.s.ws.io.durable;
        if !over_old {
            self.s.ws.truncate(&f, rel, 0)?;
        }
        let partial = partial.filter(|_| self.s.ws.io.seam.wants_partial_writes());
        let half = if partial.is_some() {
            bytes.len() / 2
        } else {
            0
        };
        if let Some(p) = partial.filter(|_| half > 0) {
            self.s.ws.write_all(&mut f, rel, &bytes[..half])?;
            self.s.store.inner.fs.io.crash(p);
        }
        self.s.ws.write_all(&mut f, rel, &bytes[half..])?;
        if over_old && now.size > size {
            self.s.ws.truncate(&f, rel, size)?;
        }
        if now.mode & 0o7777 != mode & 0o7777 {
            self.s.ws.set_mode(&f, rel, mode)?;
        }
        self.s.ws.sync_file(&f, rel)?;
        Ok(true)
    }

    /// Whether `rel` holds what an interrupted in-place write of one of `states`
    /// leaves (its mode not yet set): a regular file with one link whose bytes are the
    /// first bytes of that state's blob (a write after cutting the file to zero), or
    /// what writing that state over a file holding another of `states` or of `onto`
    /// (or a mix of them) leaves after a kill or a power loss ([`is_write_over`]).
    pub(super) fn torn_write<'s>(
        &self,
        rel: &RelPath,
        states: impl Iterator<Item = &'s Desired>,
        onto: &[&'s Desired],
    ) -> Result<bool, FsFailure> {
        let blobs = |d: &'s Desired| match d {
            Desired::File { sha256, size, .. } => Some((sha256.as_str(), *size)),
            Desired::Absent => None,
        };
        let mut files: Vec<(&str, u64)> = Vec::new();
        for b in states.filter_map(blobs) {
            if !files.contains(&b) {
                files.push(b);
            }
        }
        if files.is_empty() {
            return Ok(false);
        }
        let mut olds = files.clone();
        for b in onto.iter().filter_map(|d| blobs(d)) {
            if !olds.contains(&b) {
                olds.push(b);
            }
        }
        let mut created = Vec::new();
        let Walk::Parent(dir) = self.s.ws.walk_parent(rel, false, &mut created)? else {
            return Ok(false);
        };
        let (_, name) = rel.split_last();
        let fs = &self.s.store.inner.fs;
        for new in &files {
            for over in [false, true] {
                let opened = match self.s.ws.open_read(&dir, name, rel) {
                    Ok(o) => o,
                    Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                        return Ok(false);
                    }
                    Err(e) => return Err(e),
                };
                let Some((mut f, meta)) = opened else {
                    return Ok(false);
                };
                if meta.kind != FileKind::File || meta.nlink != 1 {
                    return Ok(false);
                }
                let ws = &self.s.ws;
                let torn = if over {
                    is_write_over(fs, ws, &mut f, rel, meta.size, *new, &olds)?
                } else {
                    is_prefix_of_blob(fs, ws, &mut f, rel, meta.size, new.0, new.1)?
                };
                if torn {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The content state of `rel` (`None` when something other than a regular file or absence).
    fn content_state(
        &self,
        rel: &RelPath,
        meta: Option<&DiskMeta>,
    ) -> Result<Option<Desired>, FsFailure> {
        match meta {
            None => Ok(Some(Desired::Absent)),
            Some(m) if m.kind != FileKind::File => Ok(None),
            Some(_) => Ok(self
                .s
                .planner()
                .hash_current(rel)?
                .map(|(sha256, size, m)| Desired::File {
                    sha256,
                    size,
                    mode: m.mode,
                })),
        }
    }

    /// `rel` is a directory now (nothing followed).
    pub(super) fn is_dir_now(&self, rel: &RelPath) -> Result<bool, FsFailure> {
        Ok(matches!(
            self.s.planner().observe(rel)?,
            crate::plan::Observed::Blocked(crate::format::SkipReason::Directory)
        ))
    }

    /// `rel` is a directory that the restore made ([`Shape::made`]): where such a restore
    /// deleted a file to put files under that directory, the directory stands for that
    /// file's absence.
    pub(super) fn made_dir(&self, shape: &Shape<'_>, rel: &RelPath) -> Result<bool, FsFailure> {
        Ok(shape.made.contains(rel) && self.is_dir_now(rel)?)
    }

    pub(super) fn current_content(&self, rel: &RelPath) -> Result<Option<Desired>, FsFailure> {
        match self.s.planner().observe(rel)? {
            crate::plan::Observed::Absent(_) => Ok(Some(Desired::Absent)),
            crate::plan::Observed::Blocked(_) => Ok(None),
            crate::plan::Observed::File { meta } => self.content_state(rel, Some(&meta)),
        }
    }

    /// Durable mode: `fsync` every directory a pass wrote into or deleted from (and
    /// their ancestors), once, before a terminal line claims the pass is complete.
    pub(super) fn sync_touched(&self, out: &RestoreOutcome) -> Result<(), FsFailure> {
        if !self.s.ws.io.durable {
            return Ok(());
        }
        let mut dirs: std::collections::BTreeSet<Vec<u8>> = std::collections::BTreeSet::new();
        for p in out.written.iter().chain(&out.deleted) {
            let (parents, _) = p.split_last();
            for n in 0..=parents.len() {
                dirs.insert(parents[..n].join(&b'/'));
            }
        }
        for d in dirs {
            // A child name under `d` whose parent chain is exactly `d`.
            let mut child = d.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.push(b'_');
            let Ok(probe) = RelPath::from_bytes(&child) else {
                continue;
            };
            let mut created = Vec::new();
            if let Walk::Parent(dir) = self.s.ws.walk_parent(&probe, false, &mut created)? {
                self.s.ws.sync_dir(&dir, &probe)?;
            }
        }
        Ok(())
    }
}
