//! References to git blobs (`gitrefs/<sha256>`): a before-state whose bytes are a blob of the
//! workspace's git repository, read from its object store (checked against the object id) when
//! a reader asks for the blob; a reference whose object the repository lost is a missing blob
//! (fail closed). Written by the scan's baseline (`scan::git_baseline`); read by every blob
//! reader here, by `verify`, the restore's check and garbage collection.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use git_state::Odb;
use serde::{Deserialize, Serialize};

use crate::error::FsFailure;

use super::StoreFs;

/// The store directory holding the references to git blobs.
pub(crate) const GITREFS: &str = "gitrefs";
/// The newest reference version this build reads and writes.
pub(crate) const GITREF_VERSION: u32 = 1;

/// `gitrefs/<sha256>`: a before-state whose bytes are a blob of a git repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GitRef {
    /// Record version ([`GITREF_VERSION`]).
    pub v: u32,
    /// The blob's git object id (hex SHA-1).
    pub oid: String,
    /// The content's length in bytes.
    pub size: u64,
    /// The repository's common directory (its `objects/` is read), absolute.
    pub common_dir: PathBuf,
    /// The work tree the scan found it in (for messages).
    pub work_tree: PathBuf,
}

/// The object stores opened by this process, by common directory: their pack indexes are
/// read once.
pub(crate) fn odb_for(common_dir: &Path) -> Arc<Odb> {
    static ODBS: OnceLock<Mutex<HashMap<PathBuf, Arc<Odb>>>> = OnceLock::new();
    let mut m = ODBS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    m.entry(common_dir.to_path_buf())
        .or_insert_with(|| Arc::new(Odb::open(common_dir)))
        .clone()
}

pub(crate) fn ref_path(sha: &str) -> PathBuf {
    Path::new(GITREFS).join(sha)
}

/// The reference `gitrefs/<sha>`, when there is one this build reads (a torn, corrupt or
/// newer one is none: the blob is missing, fail closed).
pub(crate) fn read_ref(fs: &StoreFs, sha: &str) -> Result<Option<GitRef>, FsFailure> {
    if !crate::path::valid_sha(sha) {
        return Ok(None);
    }
    let Some(bytes) = fs.read_opt(&ref_path(sha))? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<GitRef>(&bytes)
        .ok()
        .filter(|r| r.v <= GITREF_VERSION && git_state::is_oid(&r.oid)))
}

pub(crate) fn oid_bytes(r: &GitRef) -> Option<[u8; 20]> {
    let mut o = [0u8; 20];
    hex::decode_to_slice(&r.oid, &mut o).ok().map(|_| o)
}

/// The size of blob `sha` held as a reference to a git blob that the repository still
/// has; `None` when there is no such reference or the object is gone.
pub(crate) fn ref_size(fs: &StoreFs, sha: &str) -> Result<Option<u64>, FsFailure> {
    let Some(r) = read_ref(fs, sha)? else {
        return Ok(None);
    };
    let Some(oid) = oid_bytes(&r) else {
        return Ok(None);
    };
    Ok(match odb_for(&r.common_dir).contains(&oid) {
        Ok(true) => Some(r.size),
        _ => None,
    })
}

/// The bytes of blob `sha` held as a reference to a git blob, read from the repository and
/// checked against the object id (the caller checks them against `sha`); `None` when there
/// is no such reference or the object is gone or damaged.
pub(crate) fn ref_bytes(fs: &StoreFs, sha: &str) -> Result<Option<Vec<u8>>, FsFailure> {
    let Some(r) = read_ref(fs, sha)? else {
        return Ok(None);
    };
    let Some(oid) = oid_bytes(&r) else {
        return Ok(None);
    };
    Ok(match odb_for(&r.common_dir).read_blob(&oid) {
        Ok(Some(b)) if b.len() as u64 == r.size => Some(b),
        _ => None,
    })
}

/// A blob a plan needs that is a reference to a git object the repository no longer holds:
/// the reference, when `sha` is one (and not held loose or packed).
pub(crate) fn gone(fs: &StoreFs, sha: &str) -> Result<Option<GitRef>, FsFailure> {
    if fs.loose_size(sha)?.is_some() || fs.blob_size(sha)?.is_some() {
        return Ok(None);
    }
    read_ref(fs, sha)
}

/// Every reference of the store, for `verify`: the blob name it stands for, the reference,
/// and whether the repository still holds its object.
pub(crate) fn all_refs(fs: &StoreFs) -> Result<Vec<(String, GitRef, bool)>, FsFailure> {
    let mut out = Vec::new();
    if !fs.exists(Path::new(GITREFS))? {
        return Ok(out);
    }
    for name in fs.list(Path::new(GITREFS))? {
        let Some(sha) = name.to_str() else { continue };
        if !crate::path::valid_sha(sha) {
            continue;
        }
        if let Some(r) = read_ref(fs, sha)? {
            let present = oid_bytes(&r)
                .is_some_and(|o| matches!(odb_for(&r.common_dir).contains(&o), Ok(true)));
            out.push((sha.to_string(), r, present));
        }
    }
    Ok(out)
}

/// Removes the references no record names any more (`live`: every blob name the store's
/// records, journals and workspace indexes name), for garbage collection under the store's
/// exclusive lock. Git objects themselves are never looked at. Returns how many went.
pub(crate) fn sweep_refs(
    fs: &StoreFs,
    live: &std::collections::HashSet<String>,
) -> Result<usize, FsFailure> {
    if !fs.exists(Path::new(GITREFS))? {
        return Ok(0);
    }
    let mut removed = 0;
    for name in fs.list(Path::new(GITREFS))? {
        let Some(sha) = name.to_str() else { continue };
        // Not a name this store wrote (a temporary file): left alone.
        if !crate::path::valid_sha(sha) || live.contains(sha) {
            continue;
        }
        if fs.remove_file(&ref_path(sha))? {
            removed += 1;
        }
    }
    Ok(removed)
}
