//! The blob sweep: every blob no session, journal or workspace index references is
//! removed, and first the scan state of every workspace no session uses any more. It
//! fails closed: a record it cannot read, or one from a newer build, stops it before
//! anything is removed.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::error::{CorruptFile, Fault, PruneError};
use crate::format::parse_record;
use crate::journal::JournalIntent;
use crate::path::{decode_id, is_hidden, valid_sha};
use crate::records::{LOG_NAME, has_legacy, migrate_session, read_index};
use crate::scan::mark_live;
use crate::scan::workspace::{drop_unused, settle_kept};
use crate::scan_record::ScanState;
use crate::seam::CrashPoint;
use crate::store::Store;

/// Report of [`Store::collect_garbage`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// Blobs still referenced.
    pub blobs_kept: usize,
    /// Unreferenced blobs removed.
    pub blobs_removed: usize,
    /// Workspace scan states (`workspaces/<key>/`) removed: no session used them any more.
    pub workspaces_removed: usize,
    /// Unreferenced members dropped from packs (a pack all dead removed, or one mostly
    /// dead rewritten with its live members).
    pub pack_members_dropped: usize,
}

impl Store {
    /// Removes every blob no session references (groups, pending captures, journals) and
    /// no workspace index keeps, after removing the scan state of each workspace no
    /// session names any more once it has gone unwritten for
    /// [`WORKSPACE_UNUSED_GRACE`](crate::WORKSPACE_UNUSED_GRACE) and no scan holds it. An
    /// index left naming content kept in a log that no longer keeps it (its session was
    /// removed) is rewritten first to name the blob file holding that content, or to have
    /// the file read again by the next scan: no index is left naming content nothing holds.
    ///
    /// Fails closed: if any record cannot be read or is newer than this build,
    /// nothing is removed.
    pub fn collect_garbage(&self) -> Result<GcReport, PruneError> {
        self.guard_writable()?;
        let _g = self.lock_exclusive()?;
        Ok(self.collect_garbage_locked()?)
    }

    pub(crate) fn collect_garbage_locked(&self) -> Result<GcReport, Fault> {
        self.collect_garbage_locked_with(true)
    }

    /// [`Store::collect_garbage_locked`]; without `rewrite_packs`, a pack with some live
    /// members is left as it is (a prune at a message boundary drops packs wholly dead,
    /// a cheap unlink, and leaves the rewrite, which reads and compresses again, to an
    /// explicit collection: it never holds the exclusive lock for that long).
    pub(crate) fn collect_garbage_locked_with(
        &self,
        rewrite_packs: bool,
    ) -> Result<GcReport, Fault> {
        let fs = &self.inner.fs;
        let mut live: HashSet<String> = HashSet::new();
        // The workspaces the sessions' scans name (`None`: one could not be told).
        let mut named: Option<HashSet<String>> = Some(HashSet::new());
        // Session id → the content its log keeps (what a workspace index may name there).
        let mut kept_by: HashMap<String, HashSet<String>> = HashMap::new();
        for s in fs.list(Path::new("sessions"))? {
            let sdir = Path::new("sessions").join(&s);
            match ScanState::of(fs, &sdir)? {
                ScanState::Read(s) => {
                    if let Some(n) = named.as_mut() {
                        n.insert(s.workspace);
                    }
                }
                ScanState::Never => {}
                ScanState::Unknown => named = None,
            }
            if has_legacy(fs, &sdir)? {
                // Layout 1 not yet migrated: migrate now (or refuse to sweep).
                let id = s.to_str().and_then(decode_id).ok_or_else(|| CorruptFile {
                    path: sdir.to_string_lossy().into_owned(),
                    detail: "layout-1 session directory with an undecodable name".into(),
                })?;
                migrate_session(fs, &sdir, &id, |p| self.remove_tree(p))?;
            }
            if let Some(idx) = read_index(fs, &sdir)? {
                if let Some(id) = s.to_str().and_then(decode_id) {
                    kept_by.insert(id, idx.inline.keys().cloned().collect());
                }
                // Groups, calls not yet settled, and the content the tracked cache last saw
                // per path (recorded at a boundary later if the path changes).
                live.extend(idx.named_blobs().map_err(|detail| CorruptFile {
                    path: sdir.join(LOG_NAME).to_string_lossy().into_owned(),
                    detail,
                })?);
            }
            for f in fs.list(&sdir.join("journals"))? {
                let name = f.to_string_lossy();
                if is_hidden(&f) || !name.ends_with(".json") {
                    continue;
                }
                let p = sdir.join("journals").join(&f);
                let Some(bytes) = fs.read_opt(&p)? else {
                    continue;
                };
                let rec: JournalIntent = parse_record(&p, &bytes)?;
                for sha in rec.blob_refs() {
                    live.insert(sha.to_string());
                }
            }
        }
        // Workspaces no session uses any more go first, with what only their index kept.
        let workspaces_removed = drop_unused(self, named.as_ref(), std::time::SystemTime::now())?;
        // An index naming content kept in a log that no longer keeps it (its session just
        // removed, say) names the blob file holding it instead, or has the file read again.
        settle_kept(self, &|keeper, sha| {
            kept_by.get(keeper).is_some_and(|k| k.contains(sha))
        })?;
        // Workspace indexes: the content of every scanned file (the next call's before-states).
        mark_live(self, &mut live)?;
        let mut report = GcReport {
            workspaces_removed,
            ..GcReport::default()
        };
        let mut first = true;
        for name in fs.list(Path::new("blobs"))? {
            let sha = name.to_string_lossy();
            if live.contains(sha.as_ref()) {
                report.blobs_kept += 1;
                continue;
            }
            if !valid_sha(&sha) {
                // Not a blob this store wrote (e.g. a temporary name): leave it alone.
                continue;
            }
            fs.remove_file(&Path::new("blobs").join(&name))?;
            report.blobs_removed += 1;
            if first {
                fs.io.crash(CrashPoint::PruneBlobRemoved);
                first = false;
            }
        }
        // References to git blobs (`gitrefs/`) no record names any more; the git objects
        // themselves are the repository's.
        crate::fsio::gitref::sweep_refs(fs, &live)?;
        report.pack_members_dropped = self.collect_packs_locked(&live, rewrite_packs)?;
        Ok(report)
    }
}
