//! The session's record log: bringing the index up to date, appending, compaction.

#[allow(unused_imports)]
use super::*;
use crate::format::{GroupRecord, RECORD_VERSION};

impl Session {
    /// Refuses when the store (re-checked when `store.json` changed) or this session's
    /// log is newer than this build, or the log is corrupt; brings the index up to
    /// date; creates the session directories once.
    pub(crate) fn prepare(&self, st: &mut State) -> Result<(), Fault> {
        self.store.guard_writable()?;
        self.sync(st)?;
        if st.prepared {
            return Ok(());
        }
        self.store.inner.fs.create_dir_all(&self.p("journals"))?;
        st.prepared = true;
        Ok(())
    }

    /// Brings the index up to date with the session's log (read-only). Migrates a
    /// layout-1 session directory first.
    pub(crate) fn sync(&self, st: &mut State) -> Result<(), Fault> {
        if st.log_held {
            return Ok(()); // folded under the lock this call holds
        }
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        if !st.legacy_checked {
            // Layout-1 files: a session not migrated yet, or leftovers of a migration
            // interrupted after its log was in place.
            if has_legacy(fs, &self.dir)? {
                self.migrate()?;
            }
            st.legacy_checked = true;
        }
        let Some(disk) = fs.stat_id(&path)? else {
            st.idx = Index::default();
            st.log = None;
            return Ok(());
        };
        if let Some(h) = st.log.as_mut() {
            if h.id.same_file(&disk) && disk.size >= h.len && h.len > 0 {
                if disk.size != h.len + h.torn {
                    self.fold_tail(&mut st.idx, h)?;
                }
                return Ok(());
            }
        }
        let file = match fs.open_log(&path) {
            Ok(f) => f,
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => {
                st.idx = Index::default();
                st.log = None;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let id = fs.fstat_id(&file, &path)?;
        let mut h = LogHandle {
            file,
            id,
            len: 0,
            torn: 0,
            version: crate::log::LOG_VERSION,
        };
        let idx = self.fold_all(&mut h)?;
        st.log = Some(h);
        self.adopt(st, idx)
    }

    /// Takes `idx`, freshly folded from the whole log, as the handle's index: staged
    /// calls whose settlement is lost count as committed at their anchor (unless this
    /// handle owns them), and this handle's deferred commits are folded in again while
    /// their call is still staged in the log (otherwise another handle settled or
    /// removed it since, and the deferred commit is dropped); a deferred commit that
    /// carries only after-states (see [`State::recorded`]) is always folded in again.
    pub(crate) fn adopt(&self, st: &mut State, mut idx: Index) -> Result<(), Fault> {
        idx.settle_orphans(|c| st.owns(c));
        let mut kept = Vec::with_capacity(st.deferred.len());
        for d in std::mem::take(&mut st.deferred) {
            if d.settles && !idx.pending.contains_key(&d.call_id) {
                continue;
            }
            for (r, n) in &d.recs {
                idx.apply(r.clone(), *n).map_err(|e| self.damaged(e))?;
            }
            kept.push(d);
        }
        st.deferred = kept;
        st.idx = idx;
        Ok(())
    }

    /// Folds the whole log of `h` into a fresh index.
    pub(crate) fn fold_all(&self, h: &mut LogHandle) -> Result<Index, Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        let bytes = fs.read_from(&h.file, &path, 0)?;
        let version = crate::log::header_version(&bytes).unwrap_or(crate::log::LOG_VERSION);
        let (idx, valid, torn) = fold_log(&path, bytes)?;
        if let Some(named) = &idx.session_id {
            if *named != self.id {
                return Err(CorruptFile {
                    path: path.to_string_lossy().into_owned(),
                    detail: format!("log names session `{named}`"),
                }
                .into());
            }
        }
        h.len = valid;
        h.torn = torn;
        h.version = if valid == 0 {
            crate::log::LOG_VERSION
        } else {
            version
        };
        Ok(idx)
    }

    /// Folds the frames appended after `h.len` (by another handle) into `idx`.
    pub(crate) fn fold_tail(&self, idx: &mut Index, h: &mut LogHandle) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        let tail = fs.read_from(&h.file, &path, h.len)?;
        let (valid, torn) = fold_frames(idx, &path, &std::sync::Arc::new(tail), 0)?;
        h.len += valid;
        h.torn = torn;
        Ok(())
    }

    /// Migrates this session's layout-1 directory under the exclusive store lock.
    pub(crate) fn migrate(&self) -> Result<(), Fault> {
        let _g = self.store.lock_exclusive()?;
        migrate_session(&self.store.inner.fs, &self.dir, &self.id, |p| {
            self.store.remove_tree(p)
        })?;
        Ok(())
    }

    /// Runs `f` holding the log's exclusive lock, the index up to date and any torn
    /// tail cut off (no other writer is mid-append while the lock is held). Opens
    /// (creating) the log first; follows a log replaced by another handle's compaction.
    pub(crate) fn with_log_lock<R>(
        &self,
        st: &mut State,
        f: impl FnOnce(&Self, &mut State) -> Result<R, Fault>,
    ) -> Result<R, Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        if st.log_held {
            let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
            if h.torn > 0 {
                fs.truncate(&h.file, &path, h.len)?;
                h.torn = 0;
            }
            return f(self, st);
        }
        let mut f = Some(f);
        for _ in 0..16 {
            if st.log.is_none() {
                fs.create_dir_all(&self.dir)?;
                let file = fs.open_log(&path)?;
                let id = fs.fstat_id(&file, &path)?;
                st.log = Some(LogHandle {
                    file,
                    id,
                    len: 0,
                    torn: 0,
                    version: crate::log::LOG_VERSION,
                });
                fs.sync_dir(&self.dir)?;
            }
            let Some(h) = st.log.as_ref() else {
                continue;
            };
            fs.flock(&h.file, &path, FlockOperation::LockExclusive)?;
            let r = (|| -> Result<Option<R>, Fault> {
                let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
                // The path still names our file (not replaced by a compaction, not
                // removed by a clear); its size shows appends by other handles.
                let size = match fs.stat_id(&path)? {
                    Some(d) if d.same_file(&h.id) => d.size,
                    _ => return Ok(None),
                };
                if h.len == 0 || size < h.len {
                    let idx = self.fold_all(h)?;
                    self.adopt(st, idx)?;
                } else if size != h.len + h.torn {
                    self.fold_tail(&mut st.idx, h)?;
                }
                let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
                if h.torn > 0 {
                    fs.truncate(&h.file, &path, h.len)?;
                    h.torn = 0;
                }
                match f.take() {
                    Some(f) => f(self, st).map(Some),
                    None => Ok(None),
                }
            })();
            if let Some(h) = st.log.as_ref() {
                let _ = fs.flock(&h.file, &path, FlockOperation::Unlock);
            }
            match r {
                Ok(Some(v)) => return Ok(v),
                // Replaced or removed by another handle: reopen.
                Ok(None) => st.log = None,
                Err(e) => return Err(e),
            }
        }
        Err(lost_log(&path))
    }

    /// Appends `recs` to the session's log in one write (after the commits deferred
    /// until then) and folds them into the index. A log of an older version is first
    /// rewritten in this build's version (a compaction), so that an older build
    /// refuses it instead of misreading it.
    pub(crate) fn append(&self, st: &mut State, recs: Vec<Record>) -> Result<(), Fault> {
        self.with_log_lock(st, |s, st| {
            if st
                .log
                .as_ref()
                .is_some_and(|h| h.len > 0 && h.version < crate::log::LOG_VERSION)
            {
                s.compact_locked(st)?;
            }
            s.write_locked(st, recs)?;
            if !st.compact_checked {
                st.compact_checked = true;
                if s.wants_compaction(st) {
                    s.compact_locked(st)?;
                }
            }
            Ok(())
        })
    }

    /// Where the small files a call reads are kept: this session's log, as far as its
    /// size and the store's limit allow (see [`crate::blob::LogSink`]).
    pub(crate) fn log_sink<'a>(&self, st: &'a State) -> crate::blob::LogSink<'a> {
        let log_len = st.log.as_ref().map_or(0, |h| h.len);
        let keep = self.store.inner.keep_in_log_bytes;
        crate::blob::LogSink::new(&st.idx.inline, log_len, keep)
    }

    /// Every group of before-states (a committed tool call, a re-check, …) is recorded
    /// here: one `group` record at `anchor_seq` with its source, followed in the same
    /// write by `also` (tracked-cache updates, a boundary).
    pub(crate) fn append_group(
        &self,
        st: &mut State,
        anchor_seq: u64,
        source: EntrySource,
        entries: Vec<Entry>,
        also: Vec<Record>,
    ) -> Result<(), Fault> {
        self.append_group_after(st, Vec::new(), anchor_seq, source, entries, also)
    }

    /// [`Session::append_group`] with records `ahead` of the group in the same write (the
    /// `blob` records of content the group names).
    pub(crate) fn append_group_after(
        &self,
        st: &mut State,
        ahead: Vec<Record>,
        anchor_seq: u64,
        source: EntrySource,
        entries: Vec<Entry>,
        also: Vec<Record>,
    ) -> Result<(), Fault> {
        let mut recs = ahead;
        recs.reserve(1 + also.len());
        recs.push(Record::Group {
            anchor_seq,
            source,
            entries,
        });
        recs.extend(also);
        self.append(st, recs)
    }

    /// Encodes `recs` as frames onto `buf`; returns each frame's length. A record over
    /// the frame limit is refused (nothing of it is written).
    pub(crate) fn encode_frames(
        &self,
        recs: &[Record],
        buf: &mut Vec<u8>,
    ) -> Result<Vec<u64>, Fault> {
        recs.iter().map(|r| self.encode_frame(r, buf)).collect()
    }

    /// [`Session::encode_frames`] of one record.
    fn encode_frame(&self, r: &Record, buf: &mut Vec<u8>) -> Result<u64, Fault> {
        let n = encode_into(r, buf);
        if n - FRAME_HEAD > MAX_PAYLOAD as usize {
            return Err(self.damaged(format!(
                "a record of {n} bytes is over the frame limit; not written"
            )));
        }
        Ok(n as u64)
    }

    /// Writes the deferred commits still standing (their group is in the index: not
    /// pruned or settled otherwise since) and `recs` in one write, holding the log's lock.
    pub(crate) fn write_locked(&self, st: &mut State, recs: Vec<Record>) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        let mut all = Vec::with_capacity(recs.len() + 1);
        let new_log = st.log.as_ref().is_some_and(|h| h.len == 0);
        if new_log {
            // A new (or cleared) log: no commit deferred for the old one still holds.
            st.deferred.clear();
        }
        let waiting: usize = st.deferred.iter().map(|d| d.bytes.len()).sum();
        let mut buf = Vec::with_capacity(256 * recs.len() + 64 + waiting);
        if new_log {
            buf.extend_from_slice(&crate::log::header());
            all.push(Record::Session {
                session_id: self.id.clone(),
            });
        }
        let mut flushing = std::mem::take(&mut st.deferred);
        flushing.retain(|d| !d.settles || st.idx.has_tool_group(d.anchor, &d.call_id));
        for d in &flushing {
            buf.extend_from_slice(&d.bytes);
        }
        // A blob the log keeps already is not written again.
        all.extend(recs.into_iter().filter(
            |r| !matches!(r, Record::Blob { sha256, .. } if st.idx.inline.contains_key(sha256)),
        ));
        // Each record's frame: where it starts in this write, and its length. A kept file's
        // content, framed as it was read, is written from its own buffer (`writev`): the
        // frames of the other records go around it in `buf`. Content not framed as it was
        // read (carried from what the log kept, read back unchecked) is checked first.
        let mut sizes = Vec::with_capacity(all.len());
        let mut framed: Vec<(usize, &[u8])> = Vec::new();
        let mut framed_len = 0;
        for r in &all {
            let start = (buf.len() + framed_len) as u64;
            let frame = match r {
                Record::Blob { bytes, .. } => bytes.frame(),
                _ => None,
            };
            if let Some(frame) = frame {
                framed.push((buf.len(), frame));
                framed_len += frame.len();
                sizes.push((start, frame.len() as u64));
                continue;
            }
            let encoded = match r {
                Record::Blob { sha256, bytes } => {
                    self.check_kept(sha256, bytes, " to be written again")
                }
                _ => Ok(()),
            }
            .and_then(|()| self.encode_frame(r, &mut buf));
            match encoded {
                Ok(n) => sizes.push((start, n)),
                Err(e) => {
                    st.deferred = flushing;
                    return Err(e);
                }
            }
        }
        let mut parts = Vec::with_capacity(2 * framed.len() + 1);
        let mut at = 0;
        for (end, frame) in &framed {
            parts.push(&buf[at..*end]);
            parts.push(*frame);
            at = *end;
        }
        parts.push(&buf[at..]);
        parts.retain(|p| !p.is_empty());
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let h = st.log.as_mut().ok_or_else(|| lost_log(&path))?;
        if let Err(e) = fs.append_parts(&mut h.file, &path, &parts) {
            // A short write leaves part of a frame: cut it (we hold the lock).
            let _ = h.file.set_len(h.len);
            st.deferred = flushing;
            return Err(e.into());
        }
        let base = h.len;
        h.len += total as u64;
        drop(parts);
        drop(framed);
        for (r, (start, n)) in all.into_iter().zip(sizes) {
            if let Record::Blob { sha256, bytes } = r {
                // The content ends the frame: the index keeps where it is in the file.
                let len = bytes.len() as u64;
                st.idx
                    .apply_kept_in_file(sha256, base + start + n - len, len, n);
                continue;
            }
            st.idx.apply(r, n).map_err(|detail| CorruptFile {
                path: path.to_string_lossy().into_owned(),
                detail,
            })?;
        }
        Ok(())
    }

    pub(crate) fn wants_compaction(&self, st: &mut State) -> bool {
        let Some(len) = st.log.as_ref().map(|h| h.len) else {
            return false;
        };
        if len <= self.store.inner.compact_min_bytes {
            return false;
        }
        if st.idx.dead * 2 > len {
            return true;
        }
        // A group that does not decode is damage for the operation that reads it to report;
        // it is no reason to compact (nor to fail the write that just succeeded).
        let waste = st.idx.waste().unwrap_or(st.idx.dead);
        waste * 2 > len
    }

    /// Rewrites the log as a snapshot of the index: written to a temporary name and
    /// renamed over the log (a crash leaves either log whole). Holds the log lock.
    pub(crate) fn compact_locked(&self, st: &mut State) -> Result<(), Fault> {
        let fs = &self.store.inner.fs;
        let path = self.log_path();
        st.idx.merge_group_paths().map_err(|d| self.damaged(d))?;
        self.load_kept(st)?;
        let bytes = encode_log(&st.idx.snapshot(&self.id).map_err(|d| self.damaged(d))?);
        let (tmp, mut f) = fs.create_tmp_beside(&path)?;
        let r = (|| {
            fs.write_all(&mut f, &tmp, &bytes)?;
            fs.sync_file(&f, &tmp)?;
            drop(f);
            fs.io.crash(CrashPoint::CompactWritten);
            fs.rename(&tmp, &path)
        })();
        if r.is_err() {
            let _ = fs.remove_file(&tmp);
        }
        r?;
        fs.sync_dir(&self.dir)?;
        fs.io.crash(CrashPoint::CompactReplaced);
        // Follow the new log; the old descriptor (and its lock) is closed.
        let file = fs.open_log(&path)?;
        let id = fs.fstat_id(&file, &path)?;
        let mut h = LogHandle {
            file,
            id,
            len: 0,
            torn: 0,
            version: crate::log::LOG_VERSION,
        };
        let idx = self.fold_all(&mut h)?;
        if let Some(old) = st.log.replace(h) {
            let _ = fs.flock(&old.file, &path, FlockOperation::Unlock);
        }
        // The snapshot carried the deferred commits.
        st.deferred.clear();
        self.adopt(st, idx)
    }

    /// Compacts the log now when it outgrew its live content (at prune).
    pub(crate) fn compact_if_due(&self, st: &mut State) -> Result<bool, Fault> {
        if !self.wants_compaction(st) {
            return Ok(false);
        }
        self.with_log_lock(st, |s, st| {
            if s.wants_compaction(st) {
                s.compact_locked(st)?;
                Ok(true)
            } else {
                Ok(false)
            }
        })
    }

    /// A damaged record of this session's log.
    pub(crate) fn damaged(&self, detail: String) -> Fault {
        CorruptFile {
            path: self.log_path().to_string_lossy().into_owned(),
            detail,
        }
        .into()
    }

    /// Loads the session's index (read-only checks of plans and previews): a corrupt
    /// or newer log fails here.
    pub(crate) fn load(&self) -> Result<(), Fault> {
        let mut st = self.lock_state();
        self.sync(&mut st)
    }

    /// The content this session's log keeps (`blob` records), by name.
    pub(crate) fn kept_blobs(&self) -> Result<Vec<(String, crate::codec::Shared)>, Fault> {
        let st = self.lock_state();
        let mut out = Vec::with_capacity(st.idx.inline.len());
        for sha in st.idx.inline.keys() {
            if let Some(b) = self.kept_content(&st, sha)? {
                out.push((sha.clone(), b));
            }
        }
        Ok(out)
    }

    /// The content the log keeps under `sha`: from memory, or read back from the log
    /// file (where this handle appended it) and checked against its name.
    pub(crate) fn kept_content(
        &self,
        st: &State,
        sha: &str,
    ) -> Result<Option<crate::codec::Shared>, Fault> {
        Ok(self.read_kept(st, sha, true)?.map(|(b, _)| b))
    }

    /// [`Session::kept_content`] with whether it was checked against its name here: content
    /// read back from the log file is, content read with the log at open is not (its frame's
    /// CRC-32 was checked then, not its SHA-256).
    pub(crate) fn kept_content_checked(
        &self,
        st: &State,
        sha: &str,
    ) -> Result<Option<(crate::codec::Shared, bool)>, Fault> {
        self.read_kept(st, sha, true)
    }

    /// [`Session::kept_content`], read back from the file without the check against its
    /// name: for content to be written again only if the log no longer keeps it then
    /// (which [`Session::write_locked`] checks before it writes any).
    pub(crate) fn kept_content_unchecked(
        &self,
        st: &State,
        sha: &str,
    ) -> Result<Option<crate::codec::Shared>, Fault> {
        Ok(self.read_kept(st, sha, false)?.map(|(b, _)| b))
    }

    /// The content the log keeps under `sha`, and whether it was checked against its name
    /// here (`check` and read back from the file).
    fn read_kept(
        &self,
        st: &State,
        sha: &str,
        check: bool,
    ) -> Result<Option<(crate::codec::Shared, bool)>, Fault> {
        let (at, len) = match st.idx.inline.get(sha) {
            None => return Ok(None),
            Some((crate::records::KeptBytes::Mem(b), _)) => return Ok(Some((b.clone(), false))),
            Some((crate::records::KeptBytes::File { at, len }, _)) => (*at, *len),
        };
        let path = self.log_path();
        let h = st.log.as_ref().ok_or_else(|| lost_log(&path))?;
        let bytes = self.store.inner.fs.read_at(&h.file, &path, at, len)?;
        if check {
            self.check_kept(
                sha,
                &bytes,
                &format!(" at offset {at} ({len} bytes) reads back"),
            )?;
        }
        Ok(Some((crate::codec::Shared::copy_of(&bytes), check)))
    }

    /// `bytes`, content the log keeps, hash to their name `sha`; else damage (`how`: where
    /// they were found).
    fn check_kept(&self, sha: &str, bytes: &[u8], how: &str) -> Result<(), Fault> {
        let actual = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes));
        if actual != sha {
            return Err(self.damaged(format!(
                "content kept for blob {sha}{how} hashing to {actual}"
            )));
        }
        Ok(())
    }

    /// Reads back into memory the content the log file keeps that a group or a staged
    /// call still names (what a compaction carries).
    fn load_kept(&self, st: &mut State) -> Result<(), Fault> {
        let named = st.idx.named_blobs().map_err(|d| self.damaged(d))?;
        let in_file: Vec<String> = st
            .idx
            .inline
            .iter()
            .filter(|(sha, (b, _))| {
                named.contains(*sha) && matches!(b, crate::records::KeptBytes::File { .. })
            })
            .map(|(sha, _)| sha.clone())
            .collect();
        for sha in in_file {
            if let Some(b) = self.kept_content(st, &sha)? {
                if let Some(e) = st.idx.inline.get_mut(&sha) {
                    e.0 = crate::records::KeptBytes::Mem(b);
                }
            }
        }
        Ok(())
    }

    /// Every group record with anchor ≥ `min_anchor`, in (anchor, append) order.
    pub(crate) fn load_groups(&self, min_anchor: u64) -> Result<Vec<(u64, GroupRecord)>, Fault> {
        let mut st = self.lock_state();
        self.sync(&mut st)?;
        let mut out = Vec::new();
        for (seq, gs) in st.idx.groups.range(min_anchor..) {
            for g in gs {
                let entries = g.entries().map_err(|d| self.damaged(d))?.into_owned();
                out.push((
                    *seq,
                    GroupRecord {
                        v: RECORD_VERSION,
                        anchor_seq: *seq,
                        source: g.source.clone(),
                        entries,
                    },
                ));
            }
        }
        Ok(out)
    }
}
