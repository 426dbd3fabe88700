//! The restore's share of the references to git blobs: which planned files need a git
//! object the repository no longer holds.

use std::path::Path;

use crate::error::FsFailure;
use crate::fsio::StoreFs;
use crate::fsio::gitref::{GITREFS, GitRef, gone};

use super::{Action, PlannedAction, RestorePlan};

/// Refuses a restore of a plan that writes a file whose before-state is a reference to a
/// git blob the repository no longer holds, naming the first such file (nothing is changed).
pub(crate) fn check_plan(
    fs: &StoreFs,
    plan: &RestorePlan,
) -> Result<(), crate::error::RestoreError> {
    if let Some((a, r)) = gone_in_plan(fs, plan, true)?.into_iter().next() {
        return Err(crate::error::RestoreError::GitObjectGone {
            path: a.display.clone(),
            oid: r.oid,
            repo: r.work_tree.to_string_lossy().into_owned(),
        });
    }
    Ok(())
}

/// The planned actions of `plan` that write a file whose before-state is a reference to a
/// git blob the repository no longer holds, each with its reference, in the plan's order
/// (`first`: stop at the first). What [`check_plan`] refuses and a preview warns about.
pub(crate) fn gone_in_plan<'p>(
    fs: &StoreFs,
    plan: &'p RestorePlan,
    first: bool,
) -> Result<Vec<(&'p PlannedAction, GitRef)>, FsFailure> {
    let mut out = Vec::new();
    if !fs.exists(Path::new(GITREFS))? {
        return Ok(out);
    }
    for a in &plan.actions {
        let sha = match &a.action {
            Action::Write { sha256, .. } | Action::Recreate { sha256, .. } => sha256,
            Action::Delete => continue,
        };
        if let Some(r) = gone(fs, sha)? {
            out.push((a, r));
            if first {
                break;
            }
        }
    }
    Ok(out)
}
