//! The migration of a layout-1 session directory (JSON files) into a record log.

use super::*;

/// The files of a layout-1 session directory (besides `journals/`).
pub(super) const LEGACY: [&str; 5] = [
    "session.json",
    "pending.log",
    "tracked.json",
    "boundary.json",
    "groups",
];

/// Whether `sdir` holds layout-1 files.
pub(crate) fn has_legacy(fs: &StoreFs, sdir: &Path) -> Result<bool, Fault> {
    for name in LEGACY {
        if fs.exists(&sdir.join(name))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Migrates the layout-1 session directory `sdir` into a record log, crash-safely:
/// the log is built from the old files, written to a temporary name and renamed
/// into place (its presence marks the session as migrated), then the old files are
/// removed. After a crash, a present log wins and leftovers are removed again.
/// Nothing is removed when any old record is corrupt or newer (fails closed).
/// The caller holds the store's exclusive lock.
pub(crate) fn migrate_session(
    fs: &StoreFs,
    sdir: &Path,
    session_id: &str,
    trash: impl Fn(&Path) -> Result<bool, crate::error::FsFailure>,
) -> Result<bool, Fault> {
    let log_path = sdir.join(LOG_NAME);
    if !has_legacy(fs, sdir)? {
        return Ok(false);
    }
    if !fs.exists(&log_path)? {
        let records = legacy_records(fs, sdir, session_id)?;
        let bytes = encode_log(&records);
        let (tmp, mut f) = fs.create_tmp_beside(&log_path)?;
        let r = (|| {
            fs.write_all(&mut f, &tmp, &bytes)?;
            fs.sync_file(&f, &tmp)?;
            drop(f);
            fs.rename(&tmp, &log_path)
        })();
        if r.is_err() {
            let _ = fs.remove_file(&tmp);
        }
        r?;
        fs.sync_dir(sdir)?;
        fs.io.crash(CrashPoint::MigrateLogWritten);
    }
    for name in LEGACY {
        let p = sdir.join(name);
        if name == "groups" {
            trash(&p)?;
        } else {
            fs.remove_file(&p)?;
        }
    }
    fs.sync_dir(sdir)?;
    Ok(true)
}

/// The records of a layout-1 session: its marker, boundary, groups, pending calls
/// and tracked cache, in that order.
pub(super) fn legacy_records(
    fs: &StoreFs,
    sdir: &Path,
    session_id: &str,
) -> Result<Vec<Record>, Fault> {
    let mut out = vec![Record::Session {
        session_id: session_id.to_string(),
    }];
    let mpath = sdir.join("session.json");
    if let Some(bytes) = fs.read_opt(&mpath)? {
        let m: SessionMarker = parse_record(&mpath, &bytes)?;
        if m.session_id != session_id {
            return Err(CorruptFile {
                path: mpath.to_string_lossy().into_owned(),
                detail: format!("marker names session `{}`", m.session_id),
            }
            .into());
        }
        if m.session_format.is_some() {
            out.push(Record::Format {
                format: m.session_format,
            });
        }
    }
    let bpath = sdir.join("boundary.json");
    if let Some(bytes) = fs.read_opt(&bpath)? {
        match parse_record::<BoundaryRecord>(&bpath, &bytes) {
            Ok(b) => out.push(Record::Boundary {
                anchor_seq: b.anchor_seq,
            }),
            // Layout 1 treats a torn boundary as "no previous boundary".
            Err(Fault::Corrupt(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let gdir = sdir.join("groups");
    for name in fs.list(&gdir)? {
        if is_hidden(&name) {
            continue;
        }
        let seq = parse_anchor(&gdir, &name)?;
        let adir = gdir.join(&name);
        for f in fs.list(&adir)? {
            if is_hidden(&f) {
                continue;
            }
            let p: PathBuf = adir.join(&f);
            let Some(bytes) = fs.read_opt(&p)? else {
                continue;
            };
            let rec: GroupRecord = parse_record(&p, &bytes)?;
            if rec.anchor_seq != seq {
                return Err(CorruptFile {
                    path: p.to_string_lossy().into_owned(),
                    detail: format!("anchor_seq {} in group {seq}", rec.anchor_seq),
                }
                .into());
            }
            out.push(Record::Group {
                anchor_seq: seq,
                source: rec.source,
                entries: rec.entries,
            });
        }
    }
    let ppath = sdir.join("pending.log");
    if let Some(bytes) = fs.read_opt(&ppath)? {
        let mut calls: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
        for line in parse_lines::<PendingLine>(&ppath, &bytes)? {
            if line.settled {
                calls.remove(&line.call_id);
            } else if let Some(e) = line.entry {
                calls.entry(line.call_id).or_default().push(e);
            }
        }
        for (call_id, entries) in calls {
            for entry in entries {
                out.push(Record::Staged {
                    call_id: call_id.clone(),
                    entry,
                    anchor: None,
                });
            }
        }
    }
    let tpath = sdir.join("tracked.json");
    if let Some(bytes) = fs.read_opt(&tpath)? {
        match parse_record::<TrackedRecord>(&tpath, &bytes) {
            Ok(rec) => {
                let all: Vec<TrackedUpdate> = rec
                    .paths
                    .into_iter()
                    .map(|t| TrackedUpdate {
                        path: t.path,
                        known: t.known,
                        since: t.since,
                    })
                    .collect();
                out.extend(tracked_records(all));
            }
            // A cache: a torn one is dropped (paths become unknown), as layout 1 does.
            Err(Fault::Corrupt(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The anchor of a layout-1 group directory (its name: the seq, 20 digits).
pub(crate) fn parse_anchor(gdir: &Path, name: &std::ffi::OsStr) -> Result<u64, Fault> {
    name.to_str()
        .filter(|s| s.len() == 20)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| {
            CorruptFile {
                path: gdir.join(name).to_string_lossy().into_owned(),
                detail: "not an anchor group directory name".into(),
            }
            .into()
        })
}
