//! The full integrity check and the quarantine: every record, journal and blob of
//! the store read and verified, and what is corrupt moved aside (never deleted).

use super::check::{hex_runs, walk_files};
use super::*;

impl Store {
    /// Checks the whole store: every record of every session is parsed (markers,
    /// pending captures, groups, the tracked cache, boundaries, journal intents and
    /// progress logs), every workspace index is read, every blob is re-hashed against
    /// its name, and every blob a record or an index names must exist (content an
    /// index names as kept in a session's log must be in that log, or in a blob file). `progress` is called as blobs are hashed.
    ///
    /// Never changes anything. Problems are named in the report; the call itself fails
    /// only when the store root cannot be listed.
    pub fn verify(&self, progress: Progress<'_>) -> Result<VerifyReport, QueryError> {
        let (walks, mut problems) = self.walk_all()?;
        let fs = &self.inner.fs;
        let mut report = VerifyReport {
            records: walks.iter().map(|w| w.records).sum(),
            ..VerifyReport::default()
        };
        for w in &walks {
            report.warnings.extend(w.warnings.iter().cloned());
        }
        let mut refs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Session id → the content its log keeps.
        let mut kept_by: HashMap<String, HashSet<String>> = HashMap::new();
        let mut unkept: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for w in walks {
            for (sha, by) in w.refs {
                let names = by.iter().map(|i| w.sources[*i as usize].clone());
                refs.entry(sha).or_default().extend(names);
            }
            kept_by.insert(w.usage.session_id, w.kept);
        }
        // Workspace indexes: the baseline a shell call's before-states are taken from. Each
        // content an index names must be in a blob file, or (an entry kept in a log) in the
        // log of the session the index names as its keeper.
        for ix in crate::scan::index_contents(self)? {
            match ix {
                Err(f) => problems.push(fault_problem(f)),
                Ok(ix) => {
                    for sha in ix.hashed {
                        refs.entry(sha).or_default().push(ix.path.clone());
                    }
                    let keeps = ix.keeper.as_ref().and_then(|k| kept_by.get(k));
                    for sha in ix.kept {
                        if !keeps.is_some_and(|k| k.contains(&sha)) {
                            // Missing unless a blob file holds it (checked below): only
                            // the keeper's log is read for it, never another session's.
                            unkept.entry(sha).or_default().push(ix.path.clone());
                        }
                    }
                }
            }
        }
        let names = fs.list(Path::new("blobs"))?;
        let total = names.len() as u64;
        let mut present: BTreeSet<String> = BTreeSet::new();
        let mut blob_problems = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let sha = name.to_string_lossy().into_owned();
            let rel = Path::new("blobs").join(name);
            if !valid_sha(&sha) {
                if !is_hidden(name) {
                    blob_problems.push(Problem::Unreadable {
                        path: show(&rel),
                        detail: "not a blob name (left alone)".into(),
                    });
                }
                continue;
            }
            present.insert(sha.clone());
            match self.hash_blob(&sha) {
                Ok(Some((actual, size))) => {
                    report.blobs += 1;
                    report.blob_bytes += size;
                    if actual != sha {
                        blob_problems.push(Problem::CorruptBlob {
                            sha256: sha,
                            actual,
                            size,
                        });
                    }
                }
                Ok(None) => {
                    present.remove(&sha);
                }
                Err(e) => blob_problems.push(fs_problem(&rel, e)),
            }
            progress(i as u64 + 1, total);
        }
        // Packed members: every chunk read and inflated, every member hashed.
        for (sha, size) in self.verify_packs(&mut blob_problems)? {
            report.blobs += 1;
            report.blob_bytes += size;
            present.insert(sha);
        }
        // Before-states held as references to git blobs: present while the repository holds
        // the object; a reference whose object is gone is named with it.
        let mut gone_git = BTreeMap::new();
        for (sha, r, held) in crate::fsio::gitref::all_refs(fs)? {
            if held {
                present.insert(sha);
            } else {
                gone_git.insert(sha, r);
            }
        }
        let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // The content any log keeps, gathered once (not looked up per session for each ref).
        let kept_any: HashSet<&String> = kept_by.values().flatten().collect();
        for (sha, by) in refs {
            if !present.contains(&sha) && !kept_any.contains(&sha) {
                missing.entry(sha).or_default().extend(by);
            }
        }
        for (sha, by) in unkept {
            if !present.contains(&sha) {
                missing.entry(sha).or_default().extend(by);
            }
        }
        for (sha, mut by) in missing {
            by.sort();
            by.dedup();
            by.truncate(10);
            blob_problems.push(match gone_git.remove(&sha) {
                Some(r) => Problem::MissingGitObject {
                    sha256: sha,
                    oid: r.oid,
                    repo: r.work_tree.to_string_lossy().into_owned(),
                    referenced_by: by,
                },
                None => Problem::MissingBlob {
                    sha256: sha,
                    referenced_by: by,
                },
            });
        }
        problems.sort_by_key(|p| p.subject());
        blob_problems.sort_by_key(|p| p.subject());
        problems.extend(blob_problems);
        report.problems = problems;
        Ok(report)
    }

    /// Moves what `report` names as corrupt (records and blobs) into
    /// `quarantine/<stamp>/`, keeping each file's store-relative path below it.
    /// Each problem is checked again under the store's exclusive lock first (a torn
    /// blob may have been rewritten since); blobs a quarantined record names are
    /// hard-linked (or copied) into the quarantine too, so garbage collection can no
    /// longer remove them. A corrupt journal moves with its progress log. Nothing is
    /// deleted. Newer records, missing blobs and unreadable paths are left and listed.
    pub fn quarantine(&self, report: &VerifyReport) -> Result<QuarantineReport, PruneError> {
        self.guard_writable()?;
        let _g = self.lock_exclusive()?;
        let fs = &self.inner.fs;
        let stamp = Path::new(QUARANTINE_DIR).join(now_stamp());
        let mut out = QuarantineReport::default();
        let mut to_move: Vec<PathBuf> = Vec::new();
        // What was wrong with each record moved (for the note of a damaged log).
        let mut details: HashMap<PathBuf, String> = HashMap::new();
        let mut damaged_packs: BTreeSet<String> = BTreeSet::new();
        for p in &report.problems {
            match p {
                Problem::CorruptRecord { path, detail } => {
                    let rel = PathBuf::from(path);
                    let still = match fs.read_opt(&rel)? {
                        None => false,
                        Some(_) => self.record_still_bad(&rel),
                    };
                    if !still {
                        out.gone.push(path.clone());
                        continue;
                    }
                    to_move.push(rel.clone());
                    details.entry(rel.clone()).or_insert_with(|| detail.clone());
                    if rel.extension() == Some(OsStr::new("json"))
                        && rel.parent().and_then(Path::file_name) == Some(OsStr::new("journals"))
                    {
                        to_move.push(rel.with_extension("log"));
                    } else if rel.extension() == Some(OsStr::new("log"))
                        && rel.parent().and_then(Path::file_name) == Some(OsStr::new("journals"))
                    {
                        to_move.push(rel.with_extension("json"));
                    }
                }
                Problem::CorruptBlob { sha256, .. } => match self.hash_blob(sha256) {
                    Ok(Some((actual, _))) if actual != *sha256 => {
                        to_move.push(Path::new("blobs").join(sha256));
                    }
                    _ => out.gone.push(format!("blobs/{sha256}")),
                },
                Problem::CorruptPackMember { pack, .. } => {
                    damaged_packs.insert(pack.clone());
                }
                other => out.left.push(other.clone()),
            }
        }
        // A damaged pack: the members that read back whole are copied into a new pack
        // (durable first), then the pack and its index move into the quarantine; the
        // damaged members are then missing unless a loose copy holds them.
        for pack in &damaged_packs {
            let Some(id) = pack
                .strip_prefix("packs/pack-")
                .and_then(|r| r.strip_suffix(".pack"))
            else {
                continue;
            };
            let idx = crate::fsio::idx_path(id);
            if !fs.exists(&idx)? {
                out.gone.push(pack.clone());
                continue;
            }
            self.salvage_pack(id)?;
            fs.create_dir_all(&stamp.join(crate::fsio::PACKS_DIR))?;
            fs.rename(&idx, &stamp.join(&idx))?;
            out.moved.push(show(&idx));
            let rel = PathBuf::from(pack);
            if fs.exists(&rel)? {
                fs.rename(&rel, &stamp.join(&rel))?;
                out.moved.push(pack.clone());
            }
        }
        if !damaged_packs.is_empty() {
            fs.refresh_packs(true)?;
        }
        to_move.sort();
        to_move.dedup();
        for rel in to_move {
            let Some(bytes) = fs.read_opt(&rel)? else {
                continue;
            };
            let dest = stamp.join(&rel);
            if let Some(parent) = dest.parent() {
                fs.create_dir_all(parent)?;
            }
            if !rel.starts_with("blobs") {
                // Blobs this record names stay alive: any 64-hex run in its raw bytes (JSON
                // records), and any blob whose 32-byte name appears in them (the binary log).
                let mut named = hex_runs(&bytes);
                if rel.file_name() == Some(OsStr::new(crate::records::LOG_NAME)) {
                    named.extend(self.raw_blob_names(&bytes)?);
                }
                for sha in named {
                    if out.kept_blobs.contains(&sha) || !self.has_blob(&sha) {
                        continue;
                    }
                    let kdir = stamp.join("kept-blobs");
                    fs.create_dir_all(&kdir)?;
                    self.keep_blob(&sha, &kdir.join(&sha))?;
                    out.kept_blobs.push(sha);
                }
            }
            if let Some(loss) = self.salvage_log(&rel, &bytes, &dest, details.get(&rel))? {
                out.records_lost.push(loss);
            } else {
                fs.rename(&rel, &dest)?;
            }
            out.moved.push(show(&rel));
        }
        if !out.moved.is_empty() {
            out.dir = Some(show(&stamp));
        }
        Ok(out)
    }

    /// For a session's damaged record log `rel` (its `bytes`): notes the loss in the
    /// session's directory, then puts all of the file's bytes at `dest` in the quarantine
    /// and, when frames before the damage read whole, keeps them as the session's log (a
    /// new file renamed over the damaged one: a crash leaves one or the other). Returns
    /// what was lost; `None` for any other file (the caller moves it whole).
    fn salvage_log(
        &self,
        rel: &Path,
        bytes: &[u8],
        dest: &Path,
        detail: Option<&String>,
    ) -> Result<Option<RecordsLost>, FsFailure> {
        let fs = &self.inner.fs;
        let sdir = match rel.parent() {
            Some(d) if rel.file_name() == Some(OsStr::new(crate::records::LOG_NAME)) => d,
            _ => return Ok(None),
        };
        let Some(id) = sdir
            .strip_prefix("sessions")
            .ok()
            .and_then(|n| n.to_str())
            .and_then(decode_id)
        else {
            return Ok(None);
        };
        // Only frames beyond the header are worth keeping: a log of a header alone is
        // what a session without records has (none at all).
        let keep = crate::records::readable_prefix(rel, bytes)
            .filter(|n| *n > crate::log::HEADER_LEN)
            .unwrap_or(0);
        let loss = RecordsLost {
            session_id: id,
            at_ms: ms(SystemTime::now()),
            kept_bytes: keep as u64,
            lost_bytes: (bytes.len() - keep) as u64,
            quarantined: show(dest),
            detail: detail.cloned().unwrap_or_else(|| "damaged".into()),
        };
        // The note first: a crash after it leaves the damaged log, which the next repair
        // finds again; never a shorter log without a note.
        self.note_records_lost(sdir, &loss)?;
        if keep == 0 {
            fs.rename(rel, dest)?;
        } else {
            if fs.dir.hard_link(rel, &fs.dir, dest).is_err() {
                let mut f = fs.create_new(dest)?;
                fs.write_all(&mut f, dest, bytes)?;
                fs.sync_file(&f, dest)?;
            }
            fs.write_atomic(rel, &bytes[..keep])?;
        }
        Ok(Some(loss))
    }

    pub(super) fn keep_blob(&self, sha: &str, dest: &Path) -> Result<(), FsFailure> {
        let fs = &self.inner.fs;
        let src = Path::new("blobs").join(sha);
        if fs.dir.hard_link(&src, &fs.dir, dest).is_ok() {
            return Ok(());
        }
        let bytes = fs.read_opt(&src)?.unwrap_or_default();
        let mut f = fs.create_new(dest)?;
        fs.write_all(&mut f, dest, &bytes)
    }

    pub(super) fn record_still_bad(&self, rel: &Path) -> bool {
        let mut problems = Vec::new();
        let mut walk = SessionWalk::default();
        // Re-read this one file the way the session walk does.
        let comps: Vec<_> = rel.components().collect();
        if comps.len() < 3 {
            return false;
        }
        if comps[0].as_os_str() == crate::scan::workspace::WORKSPACES {
            // A workspace index: the next scan rebuilds one that is moved aside.
            return matches!(
                crate::scan::workspace::read_index(self, comps[1].as_os_str()),
                Err(Fault::Corrupt(_))
            );
        }
        let sdir: PathBuf = comps[..2].iter().collect();
        let sid = comps[1]
            .as_os_str()
            .to_str()
            .and_then(decode_id)
            .unwrap_or_default();
        self.check_record(&sdir, &sid, rel, &mut walk, &mut problems);
        problems
            .iter()
            .any(|p| matches!(p, Problem::CorruptRecord { .. }))
    }

    pub(super) fn walk_all(&self) -> Result<(Vec<SessionWalk>, Vec<Problem>), QueryError> {
        let fs = &self.inner.fs;
        let mut walks = Vec::new();
        let mut problems = Vec::new();
        for name in fs.list(Path::new("sessions"))? {
            if is_hidden(&name) {
                continue;
            }
            let sdir = Path::new("sessions").join(&name);
            let Some(id) = name.to_str().and_then(decode_id) else {
                problems.push(Problem::Unreadable {
                    path: show(&sdir),
                    detail: "not an encoded session id (left alone)".into(),
                });
                continue;
            };
            walks.push(self.walk_session(&sdir, &id, &mut problems));
        }
        Ok((walks, problems))
    }

    pub(super) fn walk_session(
        &self,
        sdir: &Path,
        id: &str,
        problems: &mut Vec<Problem>,
    ) -> SessionWalk {
        let mut w = SessionWalk::default();
        w.usage.session_id = id.to_string();
        let mut files = Vec::new();
        match self.inner.fs.dir.open_dir(sdir) {
            Ok(d) => {
                if let Err(e) = walk_files(&d, sdir, 0, &mut files, &mut w.usage) {
                    problems.push(fs_problem(sdir, e));
                }
            }
            Err(e) => problems.push(fs_problem(sdir, e)),
        }
        let mut anchors: BTreeMap<u64, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for rel in &files {
            for rec in self.check_record(sdir, id, rel, &mut w, problems) {
                anchors
                    .entry(rec.anchor_seq)
                    .or_default()
                    .extend(rec.entries.iter().map(|e| e.path.as_bytes().to_vec()));
            }
        }
        w.usage.anchors = anchors.into_iter().map(|(a, p)| (a, p.len())).collect();
        w
    }

    /// Checks every pack: its index (a damaged one is listed as unreadable: its members
    /// are then missing unless loose), every chunk (checksum, decompression, length) and
    /// every member (hashed against its name), each damaged member named with its pack.
    /// Returns the members that read back whole, with their sizes.
    fn verify_packs(&self, problems: &mut Vec<Problem>) -> Result<Vec<(String, u64)>, QueryError> {
        use crate::fsio::{
            CHUNK_HEADER, PACKS_DIR, decode_chunk_header, decode_idx, idx_id, idx_path,
            inflate_chunk, pack_path,
        };
        let fs = &self.inner.fs;
        let mut good = Vec::new();
        for name in fs.list(Path::new(PACKS_DIR))? {
            let Some(id) = idx_id(&name) else { continue };
            let ipath = idx_path(id);
            let entries = match fs.read_opt(&ipath) {
                Ok(Some(b)) => match decode_idx(&b) {
                    Ok((e, _)) => e,
                    Err(detail) => {
                        problems.push(Problem::Unreadable {
                            path: show(&ipath),
                            detail,
                        });
                        continue;
                    }
                },
                Ok(None) => continue,
                Err(e) => {
                    problems.push(fault_problem(e.into()));
                    continue;
                }
            };
            let ppath = pack_path(id);
            let pack = match fs.open_read(&ppath) {
                Ok(Some(f)) => Some(f),
                Ok(None) => None,
                Err(e) => {
                    problems.push(fault_problem(e.into()));
                    continue;
                }
            };
            let mut chunks: BTreeMap<u64, Vec<&crate::fsio::IdxEntry>> = BTreeMap::new();
            for e in &entries {
                chunks.entry(e.chunk).or_default().push(e);
            }
            for (at, members) in chunks {
                let raw = match &pack {
                    None => Err("the pack file is missing".to_string()),
                    Some(f) => fs
                        .read_at(f, &ppath, at, CHUNK_HEADER as u64)
                        .map_err(|e| e.to_string())
                        .and_then(|h| decode_chunk_header(&h))
                        .and_then(|(raw, comp, crc)| {
                            fs.read_at(f, &ppath, at + CHUNK_HEADER as u64, comp)
                                .map_err(|e| e.to_string())
                                .and_then(|c| inflate_chunk(&c, raw, crc))
                        }),
                };
                for m in members {
                    let (from, len) = (m.offset as usize, m.size as usize);
                    let bytes = match &raw {
                        Ok(r) => r.get(from..from + len).ok_or_else(|| {
                            format!("member at {from}+{len} is past its chunk's end")
                        }),
                        Err(d) => Err(format!("its chunk at offset {at}: {d}")),
                    };
                    let detail = match bytes {
                        Ok(b) => {
                            let actual = hex::encode(Sha256::digest(b));
                            if actual == m.sha {
                                good.push((m.sha.clone(), len as u64));
                                continue;
                            }
                            format!("its {len} bytes hash to {actual}")
                        }
                        Err(d) => d,
                    };
                    problems.push(Problem::CorruptPackMember {
                        pack: show(&ppath),
                        sha256: m.sha.clone(),
                        detail,
                    });
                }
            }
        }
        Ok(good)
    }
}
