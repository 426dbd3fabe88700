//! The integrity check of one record or journal: decoded as the host would read it,
//! with every blob it names checked; the names a damaged log still carries.

use super::*;

impl Store {
    /// Parses one session file; records problems and blob references. Returns the
    /// group records it holds (a layout-1 group file, or every group of a record log).
    pub(super) fn check_record(
        &self,
        sdir: &Path,
        id: &str,
        rel: &Path,
        w: &mut SessionWalk,
        problems: &mut Vec<Problem>,
    ) -> Vec<GroupRecord> {
        let fs = &self.inner.fs;
        let Ok(inner) = rel.strip_prefix(sdir) else {
            return Vec::new();
        };
        let comps: Vec<&OsStr> = inner.iter().collect();
        let shown = show(rel);
        let bytes = match fs.read_opt(rel) {
            Ok(Some(b)) => b,
            Ok(None) => return Vec::new(),
            Err(e) => {
                problems.push(Problem::Unreadable {
                    path: shown,
                    detail: e.to_string(),
                });
                return Vec::new();
            }
        };
        w.records += 1;
        let source = w.sources.len() as u32;
        w.sources.push(shown.clone());
        let add_ref = |w: &mut SessionWalk, sha: &str| match w.refs.get_mut(sha) {
            Some(v) => v.push(source),
            None => {
                w.refs.insert(sha.to_string(), vec![source]);
            }
        };
        let mut push = |r: Result<(), Fault>| {
            if let Err(f) = r {
                problems.push(fault_problem(f));
            }
        };
        match comps.as_slice() {
            [f] if *f == "session.json" => {
                push(parse_record::<SessionMarker>(rel, &bytes).and_then(|m| {
                    if m.session_id == id {
                        Ok(())
                    } else {
                        Err(CorruptFile {
                            path: shown.clone(),
                            detail: format!("marker names session `{}`", m.session_id),
                        }
                        .into())
                    }
                }))
            }
            [f] if *f == "pending.log" => match parse_lines::<PendingLine>(rel, &bytes) {
                Ok(lines) => {
                    // Only calls not yet settled (settled ones live on in their groups).
                    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    for l in lines {
                        if l.settled {
                            open.remove(&l.call_id);
                        } else if let Some(BeforeState::File { sha256, .. }) =
                            l.entry.map(|e| e.before)
                        {
                            open.entry(l.call_id).or_default().push(sha256);
                        }
                    }
                    for sha in open.values().flatten() {
                        add_ref(w, sha);
                    }
                }
                Err(f) => push(Err(f)),
            },
            [f] if *f == "tracked.json" => match parse_record::<TrackedRecord>(rel, &bytes) {
                Ok(rec) => {
                    for t in rec.paths {
                        if let Known::Present {
                            sha256: Some(sha), ..
                        } = t.known
                        {
                            // The cache names content the next re-check may record; it is
                            // live for garbage collection but its blob may legitimately be
                            // absent (never stored), so it is not a missing-blob reference.
                            w.soft.insert(sha);
                        }
                    }
                }
                Err(f) => push(Err(f)),
            },
            [f] if *f == "boundary.json" => {
                push(parse_record::<BoundaryRecord>(rel, &bytes).map(|_| ()))
            }
            [g, a, f] if *g == "groups" => {
                let gdir = sdir.join("groups");
                let anchor = match parse_anchor(&gdir, a) {
                    Ok(a) => a,
                    Err(e) => {
                        push(Err(e));
                        return Vec::new();
                    }
                };
                let _ = f;
                match parse_record::<GroupRecord>(rel, &bytes) {
                    Ok(rec) if rec.anchor_seq != anchor => push(Err(CorruptFile {
                        path: shown.clone(),
                        detail: format!("anchor_seq {} in group {anchor}", rec.anchor_seq),
                    }
                    .into())),
                    Ok(rec) => {
                        for e in &rec.entries {
                            if let BeforeState::File { sha256, .. } = &e.before {
                                add_ref(w, sha256);
                            }
                        }
                        return vec![rec];
                    }
                    Err(f) => push(Err(f)),
                }
            }
            [j, f] if *j == "journals" => {
                let name = f.to_string_lossy();
                if let Some(stem) = name.strip_suffix(".json") {
                    match parse_record::<JournalIntent>(rel, &bytes) {
                        Ok(intent) => {
                            for sha in intent.blob_refs() {
                                add_ref(w, sha);
                            }
                            self.check_journal(sdir, id, stem, w, problems);
                        }
                        Err(f) => push(Err(f)),
                    }
                } else if name.ends_with(".log") {
                    // Judged with its intent (a log without an intent is never read).
                    w.records -= 1;
                }
            }
            [f] if *f == super::LOST_NOTE => {
                // Not a record: what a repair lost, reported as a warning.
                w.records -= 1;
                w.warnings
                    .extend(super::lost::note_warnings(id, rel, &bytes));
            }
            [f] if *f == crate::records::LOG_NAME => {
                // Layout 2: one record log; a torn tail is what a crash leaves (not damage,
                // but named: its bytes are not read).
                match crate::records::fold_log(rel, bytes.clone()) {
                    Ok((idx, valid, torn)) => {
                        if torn > 0 {
                            w.warnings.push(Warning::IgnoredTail {
                                path: shown.clone(),
                                offset: valid,
                                bytes: torn,
                            });
                        }
                        if idx.session_id.as_deref().is_some_and(|s| s != id) {
                            push(Err(CorruptFile {
                                path: shown.clone(),
                                detail: "the log names another session".into(),
                            }
                            .into()));
                            return Vec::new();
                        }
                        // Content kept in the log: checked against its name (the frame's
                        // checksum guards the bytes, not what they were named).
                        for (sha, (kept, _)) in &idx.inline {
                            // A log folded from its bytes keeps every content in memory.
                            let crate::records::KeptBytes::Mem(bytes) = kept else {
                                continue;
                            };
                            let actual =
                                hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&**bytes));
                            if actual != *sha {
                                push(Err(CorruptFile {
                                    path: shown.clone(),
                                    detail: format!(
                                        "content kept for blob {sha} hashes to {actual}"
                                    ),
                                }
                                .into()));
                            } else {
                                w.kept.insert(sha.clone());
                            }
                        }
                        let mut out = Vec::new();
                        for (anchor, gs) in &idx.groups {
                            for g in gs {
                                match g.entries() {
                                    Ok(entries) => {
                                        for e in entries.iter() {
                                            if let BeforeState::File { sha256, .. } = &e.before {
                                                add_ref(w, sha256);
                                            }
                                        }
                                        out.push(GroupRecord {
                                            v: crate::RECORD_VERSION,
                                            anchor_seq: *anchor,
                                            source: g.source.clone(),
                                            entries: entries.into_owned(),
                                        });
                                    }
                                    Err(detail) => push(Err(CorruptFile {
                                        path: shown.clone(),
                                        detail,
                                    }
                                    .into())),
                                }
                            }
                        }
                        // Calls not yet settled (settled ones live on in their groups).
                        for p in idx.pending.values() {
                            for e in p.entries() {
                                if let BeforeState::File { sha256, .. } = &e.before {
                                    add_ref(w, sha256);
                                }
                            }
                        }
                        for t in idx.tracked.values() {
                            if let Known::Present {
                                sha256: Some(sha), ..
                            } = &t.known
                            {
                                w.soft.insert(sha.clone());
                            }
                        }
                        // Counted as its groups and unsettled calls (the log file itself was
                        // counted once above).
                        w.records += (out.len() + idx.pending.len()).saturating_sub(1) as u64;
                        return out;
                    }
                    Err(f) => push(Err(f)),
                }
            }
            _ => {
                w.records -= 1;
            }
        }
        Vec::new()
    }

    pub(super) fn check_journal(
        &self,
        sdir: &Path,
        id: &str,
        stem: &str,
        w: &mut SessionWalk,
        problems: &mut Vec<Problem>,
    ) {
        let Some(op) = decode_id(stem) else {
            problems.push(Problem::CorruptRecord {
                path: show(&sdir.join("journals").join(format!("{stem}.json"))),
                detail: "not an encoded operation id".into(),
            });
            return;
        };
        let Ok(root) = self.inner.fs.dir.try_clone() else {
            return;
        };
        // Journal status reading never touches the workspace: the store root stands in.
        let session = Session::new(
            self.clone(),
            id.to_string(),
            sdir.to_path_buf(),
            root,
            Vec::new(),
        );
        match session.restore_status(&op) {
            Ok(s) => {
                if s.state == crate::JournalState::Open {
                    w.usage.open_journals.push(op);
                }
            }
            Err(crate::JournalError::Corrupt(c)) => problems.push(Problem::CorruptRecord {
                path: c.path,
                detail: c.detail,
            }),
            Err(crate::JournalError::NewerStore(n)) => problems.push(Problem::NewerRecord {
                path: n.path,
                found: n.found,
                supported: n.supported,
            }),
            Err(e) => problems.push(Problem::Unreadable {
                path: show(&sdir.join("journals").join(format!("{stem}.log"))),
                detail: e.to_string(),
            }),
        }
    }
}

impl Store {
    /// The blobs of the store whose raw 32-byte SHA-256 occurs anywhere in `bytes`
    /// (a damaged binary log: frames past the damage cannot be decoded, but the names
    /// they carry can still be found).
    pub(super) fn raw_blob_names(&self, bytes: &[u8]) -> Result<Vec<String>, FsFailure> {
        let windows: std::collections::HashSet<&[u8]> = bytes.windows(32).collect();
        let mut out = Vec::new();
        for name in self.inner.fs.list(Path::new("blobs"))? {
            let sha = name.to_string_lossy();
            if let Ok(raw) = hex::decode(sha.as_bytes()) {
                if raw.len() == 32 && windows.contains(raw.as_slice()) {
                    out.push(sha.into_owned());
                }
            }
        }
        Ok(out)
    }
}

/// Every 64-character lowercase hex run in `bytes` (candidate blob names).
pub(super) fn hex_runs(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, b) in bytes.iter().chain(std::iter::once(&b' ')).enumerate() {
        let hexch = b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        match (hexch, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s == 64 {
                    out.push(String::from_utf8_lossy(&bytes[s..i]).into_owned());
                }
                start = None;
            }
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Lists the regular files below `dir` (store-relative as `base/...`), adding sizes
/// and the newest modification time to `usage`. Symlinks are never followed.
pub(super) fn walk_files(
    dir: &Dir,
    base: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
    usage: &mut SessionUsage,
) -> io::Result<()> {
    if depth > 8 {
        return Err(io::Error::other(
            "directory tree deeper than the store writes",
        ));
    }
    usage.last_activity_ms = usage
        .last_activity_ms
        .max(ms(dir.dir_metadata()?.modified()?.into_std()));
    let mut entries = Vec::new();
    for e in dir.entries()? {
        entries.push(e?);
    }
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let md = e.metadata()?;
        usage.last_activity_ms = usage.last_activity_ms.max(ms(md.modified()?.into_std()));
        if md.is_dir() {
            walk_files(&e.open_dir()?, &base.join(&name), depth + 1, out, usage)?;
        } else if md.is_file() {
            usage.record_files += 1;
            usage.record_bytes += md.len();
            if !is_hidden(&name) {
                out.push(base.join(&name));
            }
        }
    }
    Ok(())
}
