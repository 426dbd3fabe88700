//! Applying a [`GitPlan`]: keep-refs first (nothing the plan moves away from can be lost),
//! then HEAD, the index and the refs, each under git's own lock file and checked, under that
//! lock, to be as planned. Every step is idempotent: a plan applied again after a crash
//! finds what is done done, and flags what someone else changed meanwhile.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ApplyError;
use crate::index::index_content;
use crate::plan::{Flag, GitPlan, StashEdit};
use crate::refs::{Lock, Update, append_reflog, read_opt, resolve, update_ref, update_ref_with};
use crate::state::{Handles, Head, StashLog};

/// The namespace of the keep-refs: `refs/dsh-rewind/<op>/…`.
pub const KEEP_NAMESPACE: &str = "refs/dsh-rewind";

/// What [`apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// The keep-refs written (full names).
    pub kept: Vec<String>,
    /// Whether HEAD was set.
    pub head: bool,
    /// Whether the index was written.
    pub index: bool,
    /// Refs set or removed.
    pub refs: Vec<String>,
    /// Whether the stash list was written.
    #[serde(default)]
    pub stash: bool,
    /// What was left as it is because it changed since the plan.
    pub flagged: Vec<Flag>,
}

/// A ref-name component made from an op id (`[A-Za-z0-9._-]`, others as `-`).
pub fn ref_component(op: &str) -> String {
    let s: String = op
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() { "op".into() } else { s }
}

fn content_of(bytes: &[u8]) -> String {
    index_content(bytes).unwrap_or_else(|| crate::index::index_id(bytes))
}

/// Applies `plan` to the repository of `h`. `op` names the keep-refs; `stored` gives the
/// bytes of a stored index by id; `message` ends each reflog line. An error stops at the
/// step that failed (the ones before stay applied; applying again continues).
pub fn apply(
    h: &Handles,
    plan: &GitPlan,
    op: &str,
    stored: &dyn Fn(&str) -> Option<Vec<u8>>,
    message: &str,
) -> Result<Applied, ApplyError> {
    let mut out = Applied::default();
    let ns = format!("{KEEP_NAMESPACE}/{}", ref_component(op));
    for (suffix, oid) in &plan.keep {
        let name = format!("{ns}/{suffix}");
        let now = resolve(&h.common, &name)?;
        if now.as_deref() != Some(oid.as_str()) {
            update_ref(&h.common, &name, now.as_deref(), Some(oid), message)?;
        }
        out.kept.push(name);
    }
    if let Some((from, to)) = &plan.head {
        let lock = Lock::take(&h.git, Path::new("HEAD"))?;
        let refs = std::collections::BTreeMap::new();
        let cur = h.head(&refs)?;
        let place = |x: &Head| match x {
            Head::Branch { name, .. } => Head::Branch {
                name: name.clone(),
                oid: None,
            },
            d => d.clone(),
        };
        if place(&cur) == place(to) {
            drop(lock);
        } else if place(&cur) != place(from) {
            drop(lock);
            out.flagged.push(Flag::ChangedOutside {
                name: "HEAD".into(),
            });
        } else {
            let old = head_oid(h, &cur)?;
            lock.commit(to.file_text().as_bytes())?;
            let new = head_oid(h, to)?;
            let what = |x: &Head| match x {
                Head::Branch { name, .. } => name.trim_start_matches("refs/heads/").to_owned(),
                Head::Detached { oid } => oid.clone(),
            };
            append_reflog(
                &h.git,
                "HEAD",
                old.as_deref(),
                new.as_deref(),
                &format!(
                    "checkout: moving from {} to {} ({message})",
                    what(&cur),
                    what(to)
                ),
                true,
            );
            out.head = true;
        }
    }
    if let Some(edit) = &plan.index {
        let bytes = stored(&edit.to.id).ok_or_else(|| ApplyError::MissingIndex {
            id: edit.to.id.clone(),
        })?;
        let lock = Lock::take(&h.git, Path::new("index"))?;
        let cur = read_opt(&h.git, Path::new("index"))?;
        let want = content_of(&bytes);
        let cur_content = cur.as_deref().map(content_of);
        let from_content = edit.from.as_ref().map(|f| match stored(&f.id) {
            Some(b) => content_of(&b),
            None => f.id.clone(),
        });
        let cur_id = cur.as_deref().map(crate::index::index_id);
        if cur_content.as_deref() == Some(want.as_str()) {
            drop(lock);
        } else if cur_content != from_content && cur_id != edit.from.as_ref().map(|f| f.id.clone())
        {
            drop(lock);
            out.flagged.push(Flag::ChangedOutside {
                name: "index".into(),
            });
        } else {
            lock.commit(&bytes)?;
            out.index = true;
        }
    }
    if let Some(edit) = &plan.stash {
        match apply_stash(h, edit, stored)? {
            true => out.stash = true,
            false => out.flagged.push(Flag::ChangedOutside {
                name: "refs/stash".into(),
            }),
        }
    }
    for r in &plan.refs {
        match update_ref(
            &h.common,
            &r.name,
            r.from.as_deref(),
            r.to.as_deref(),
            message,
        )? {
            Update::Done => out.refs.push(r.name.clone()),
            Update::Moved(_) => out.flagged.push(Flag::ChangedOutside {
                name: r.name.clone(),
            }),
        }
    }
    Ok(out)
}

/// Writes the stash list of `edit`: its reflog (`logs/refs/stash`, under its lock, or
/// removed), then `refs/stash` without a reflog line of its own. Both are checked first to be
/// as planned or already as wanted (a crash between the two: applying again finishes it);
/// `false`: the stash list changed since the plan and is left.
fn apply_stash(
    h: &Handles,
    edit: &StashEdit,
    stored: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<bool, ApplyError> {
    const LOG: &str = "logs/refs/stash";
    let id = |l: &Option<StashLog>| l.as_ref().map(|l| l.id.clone());
    let cur_log = read_opt(&h.common, Path::new(LOG))?
        .as_deref()
        .and_then(StashLog::of)
        .map(|l| l.id);
    let cur_ref = resolve(&h.common, "refs/stash")?;
    let (want_log, from_log) = (id(&edit.to), id(&edit.from));
    if cur_log == want_log && cur_ref == edit.ref_to {
        return Ok(true);
    }
    if (cur_log != want_log && cur_log != from_log)
        || (cur_ref != edit.ref_to && cur_ref != edit.ref_from)
    {
        return Ok(false);
    }
    if cur_log != want_log {
        match &edit.to {
            Some(to) => {
                let bytes =
                    stored(&to.id).ok_or_else(|| ApplyError::MissingStash { id: to.id.clone() })?;
                Lock::take(&h.common, Path::new(LOG))?.commit(&bytes)?;
            }
            None => {
                let lock = Lock::take(&h.common, Path::new(LOG))?;
                match h.common.remove_file(LOG) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(ApplyError::Io {
                            path: LOG.into(),
                            source: e,
                        });
                    }
                }
                drop(lock);
            }
        }
    }
    Ok(
        match update_ref_with(
            &h.common,
            "refs/stash",
            edit.ref_from.as_deref(),
            edit.ref_to.as_deref(),
            None,
        )? {
            Update::Done => true,
            Update::Moved(_) => false,
        },
    )
}

fn head_oid(h: &Handles, head: &Head) -> Result<Option<String>, ApplyError> {
    Ok(match head {
        Head::Branch { name, .. } => resolve(&h.common, name)?,
        Head::Detached { oid } => Some(oid.clone()),
    })
}
