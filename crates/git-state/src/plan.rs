//! What a rewind, an undo or a redo does to a repository: [`GitPlan`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::{GitState, Head, IndexRef, Operation, StashLog, describe_head};

/// When a state was recorded, relative to a scanned tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Before a tool call.
    Before,
    /// After a tool call: what changed since the previous point is the call's.
    After,
    /// At a human message (or when a session opens): what changed since the previous point
    /// was done outside the agent's calls.
    Boundary,
}

/// One recorded state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// The seq of the message the point belongs to.
    pub anchor: u64,
    /// When it was recorded.
    pub phase: Phase,
    /// The tool call, for `before` and `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The state.
    pub state: GitState,
}

/// The index of the point a rewind to message `target_seq` goes back to: the first point
/// recorded at or after that message (the state before its turn's first call changed
/// anything). `None`: nothing was recorded since, so the agent changed nothing.
pub fn target_point(points: &[Point], target_seq: u64) -> Option<usize> {
    points.iter().position(|p| p.anchor >= target_seq)
}

/// The refs (and HEAD, the index) the agent's calls changed from point `from` on, each with
/// the value the agent last left it at (`None`: deleted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentMoves {
    /// Ref name → the value the agent's last change of it left.
    pub refs: BTreeMap<String, Option<String>>,
    /// Whether a call moved HEAD.
    pub head: bool,
    /// Whether a call changed the index.
    pub index: bool,
    /// The stash list a call last left (its [`StashLog::id`]; `Some(None)`: emptied), when a
    /// call changed it.
    pub stash: Option<Option<String>>,
}

/// Folds the points after `from`: a change between a point and the `after` point that
/// follows it is the call's; any other change was made outside the agent.
pub fn agent_moves(points: &[Point], from: usize) -> AgentMoves {
    let mut m = AgentMoves::default();
    for w in points.get(from..).unwrap_or(&[]).windows(2) {
        let (a, b) = (&w[0].state, &w[1].state);
        if w[1].phase != Phase::After {
            continue;
        }
        let names: std::collections::BTreeSet<&String> =
            a.refs.keys().chain(b.refs.keys()).collect();
        for n in names {
            let (x, y) = (a.refs.get(n), b.refs.get(n));
            if x != y {
                m.refs.insert(n.clone(), y.cloned());
            }
        }
        if a.head != b.head {
            m.head = true;
        }
        if a.index != b.index {
            m.index = true;
        }
        let id = |s: &GitState| s.stash.as_ref().map(|l| l.id.clone());
        if id(a) != id(b) {
            m.stash = Some(id(b));
        }
    }
    m
}

/// One ref to set: `from` (its value when planned) → `to` (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefEdit {
    /// The full ref name.
    pub name: String,
    /// Its value when planned.
    pub from: Option<String>,
    /// Its value after.
    pub to: Option<String>,
}

/// The index to write: from the one now (by content) to the stored one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexEdit {
    /// The index now (its bytes are stored under its id before anything is written).
    pub from: Option<IndexRef>,
    /// The index to write (stored bytes).
    pub to: IndexRef,
}

/// The stash list to write: `refs/stash` and its reflog (`logs/refs/stash`), from what they
/// are now to what they were at the target (`None`: no stash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StashEdit {
    /// The stash list now (its bytes are stored under its id before anything is written).
    pub from: Option<StashLog>,
    /// The stash list to write (stored bytes).
    pub to: Option<StashLog>,
    /// `refs/stash` now.
    pub ref_from: Option<String>,
    /// `refs/stash` after.
    pub ref_to: Option<String>,
}

impl StashEdit {
    /// The edit that undoes this one.
    pub fn reversed(&self) -> StashEdit {
        StashEdit {
            from: self.to.clone(),
            to: self.from.clone(),
            ref_from: self.ref_to.clone(),
            ref_to: self.ref_from.clone(),
        }
    }
}

/// Why something of the repository is left as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "why")]
pub enum Flag {
    /// Moved since the agent last left it (a commit made outside the agent, a reset): left.
    ChangedOutside {
        /// The ref (or `HEAD`, `index`).
        name: String,
    },
    /// The branch is checked out in another worktree: left.
    CheckedOutElsewhere {
        /// The ref.
        name: String,
    },
    /// The branch HEAD should go back to no longer exists: HEAD is left.
    BranchGone {
        /// The ref.
        name: String,
    },
    /// The stored bytes of the index to restore are missing: the index is left.
    IndexNotStored,
    /// HEAD does not go back to the target's commit (its branch was left): the index is left
    /// with it, so it still matches HEAD.
    IndexLeft,
    /// The stored bytes of the stash list to restore are missing: the stash list is left.
    StashNotStored,
    /// Entries of the stash list to restore name commits the repository no longer holds
    /// (`git gc` pruned them after they were dropped): the stash list is left.
    StashCommitsGone {
        /// How many of its entries do.
        count: usize,
    },
}

impl Flag {
    /// A short line saying what is left and why.
    pub fn message(&self) -> String {
        let short = |n: &str| n.strip_prefix("refs/heads/").unwrap_or(n).to_owned();
        match self {
            Flag::ChangedOutside { name } if name == "refs/stash" => {
                "the stash list changed outside the agent: left as is".into()
            }
            Flag::ChangedOutside { name } => {
                format!("{} changed outside the agent: left as is", short(name))
            }
            Flag::CheckedOutElsewhere { name } => {
                format!(
                    "branch {} is checked out in another worktree: left as is",
                    short(name)
                )
            }
            Flag::BranchGone { name } => {
                format!("branch {} no longer exists: HEAD left as is", short(name))
            }
            Flag::IndexNotStored => "the index of that point was not stored: left as is".into(),
            Flag::IndexLeft => "the index is left as is, with HEAD".into(),
            Flag::StashNotStored => {
                "the stash list of that point was not stored: left as is".into()
            }
            Flag::StashCommitsGone { count } => format!(
                "the stash list of that point names {count} commit{} git has since pruned: left as is",
                if *count == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Why a plan cannot run at all (the rewind is refused whole, unless git is kept as it is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Refusal {
    /// An operation is in progress in the repository.
    InProgress {
        /// The operation.
        operation: Operation,
    },
}

impl Refusal {
    /// The refusal as a sentence.
    pub fn message(&self) -> String {
        match self {
            Refusal::InProgress { operation } => format!(
                "a git {} is in progress in the workspace's repository: finish it or run `{}`, or rewind with git kept as it is (--keep-git); nothing was changed",
                operation.name(),
                operation.abort_command()
            ),
        }
    }
}

/// What happens to a repository.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitPlan {
    /// HEAD now → HEAD after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<(Head, Head)>,
    /// The index to write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexEdit>,
    /// Refs to set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RefEdit>,
    /// The stash list to write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stash: Option<StashEdit>,
    /// Keep-refs to create (`<suffix>` under `refs/dsh-rewind/<op>/`, object id): every tip
    /// the plan moves away from stays reachable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<(String, String)>,
    /// What is left as it is, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flagged: Vec<Flag>,
    /// Why the plan cannot run, if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// HEAD described before (`detached at v2.40.0`).
    pub head_before: String,
    /// HEAD described after (`agent-work @ 3fce3b5`).
    pub head_after: String,
}

impl GitPlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.head.is_none() && self.index.is_none() && self.refs.is_empty() && self.stash.is_none()
    }

    /// The plan that undoes this one once applied: each edit reversed.
    pub fn reversed(&self) -> GitPlan {
        GitPlan {
            head: self.head.clone().map(|(a, b)| (b, a)),
            index: self.index.clone().and_then(|i| {
                i.from.map(|from| IndexEdit {
                    from: Some(i.to),
                    to: from,
                })
            }),
            refs: self
                .refs
                .iter()
                .map(|r| RefEdit {
                    name: r.name.clone(),
                    from: r.to.clone(),
                    to: r.from.clone(),
                })
                .collect(),
            stash: self.stash.as_ref().map(StashEdit::reversed),
            keep: Vec::new(),
            flagged: Vec::new(),
            refusal: None,
            head_before: self.head_after.clone(),
            head_after: self.head_before.clone(),
        }
    }

    /// One line saying what happens: `HEAD: detached at v2.40.0 → agent-work @ 3fce3b5;
    /// branch agent-work moved back; 1 kept`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.head.is_some() {
            parts.push(format!("HEAD: {} → {}", self.head_before, self.head_after));
        } else {
            parts.push(format!("HEAD: {} (unchanged)", self.head_before));
        }
        for r in &self.refs {
            let short = short_ref(&r.name);
            parts.push(match (&r.from, &r.to) {
                (None, Some(to)) => format!("{short} restored at {}", to.get(..7).unwrap_or(to)),
                (Some(_), None) => format!("{short} removed (tip kept under refs/dsh-rewind/)"),
                (_, Some(to)) => format!("{short} back to {}", to.get(..7).unwrap_or(to)),
                (None, None) => continue,
            });
        }
        if self.index.is_some() {
            parts.push("index restored".into());
        }
        if let Some(s) = &self.stash {
            let n = |l: &Option<StashLog>| l.as_ref().map_or(0, |l| l.commits.len());
            let entries = |k: usize| {
                if k == 1 {
                    "1 entry".to_owned()
                } else {
                    format!("{k} entries")
                }
            };
            parts.push(format!(
                "stash list: {} → {}",
                entries(n(&s.from)),
                entries(n(&s.to))
            ));
        }
        for f in &self.flagged {
            parts.push(f.message());
        }
        parts.join("; ")
    }
}

/// The stash half of [`plan_git_restore`].
fn plan_stash(plan: &mut GitPlan, now: &GitState, target: &GitState, moves: &AgentMoves) {
    const STASH: &str = "refs/stash";
    let id = |s: &GitState| s.stash.as_ref().map(|l| l.id.clone());
    let moved = moves.stash.is_some() || moves.refs.contains_key(STASH);
    if !moved || (id(now) == id(target) && now.refs.get(STASH) == target.refs.get(STASH)) {
        return;
    }
    let log_ok = moves.stash.as_ref().is_none_or(|left| *left == id(now));
    let ref_ok = moves
        .refs
        .get(STASH)
        .is_none_or(|left| left.as_ref() == now.refs.get(STASH));
    if !(log_ok && ref_ok) {
        plan.flagged
            .push(Flag::ChangedOutside { name: STASH.into() });
        return;
    }
    let commits = |s: &GitState| -> Vec<String> {
        let mut v: Vec<String> = s
            .stash
            .as_ref()
            .map(|l| l.commits.clone())
            .unwrap_or_default();
        v.extend(s.refs.get(STASH).cloned());
        v
    };
    let (a, b) = (commits(now), commits(target));
    for c in a
        .iter()
        .filter(|c| !b.contains(c))
        .chain(b.iter().filter(|c| !a.contains(c)))
    {
        plan.keep.push((format!("stash/{c}"), c.clone()));
    }
    plan.stash = Some(StashEdit {
        from: now.stash.clone(),
        to: target.stash.clone(),
        ref_from: now.refs.get(STASH).cloned(),
        ref_to: target.refs.get(STASH).cloned(),
    });
}

/// `refs/heads/x` → `branch x`, `refs/tags/v` → `tag v`.
pub fn short_ref(name: &str) -> String {
    if let Some(b) = name.strip_prefix("refs/heads/") {
        format!("branch {b}")
    } else if let Some(t) = name.strip_prefix("refs/tags/") {
        format!("tag {t}")
    } else {
        name.to_owned()
    }
}

/// Plans a rewind of the repository from `now` to `target`, given what the agent's calls
/// moved since (`moves`). Branches and tags the agent created, moved or deleted go back to
/// their value at the target unless they moved since the agent last left them (flagged:
/// a commit made outside the agent stays on its branch); HEAD goes back to its branch or
/// commit; the index to its stored bytes (`target_stored`: whether they are in the store).
/// The stash list (`refs/stash` and its reflog) goes back when a call pushed, popped or
/// dropped a stash since the target, unless it changed since the agent last left it; every
/// stash commit the list gains or loses either way is kept under a keep-ref.
pub fn plan_git_restore(
    now: &GitState,
    target: &GitState,
    moves: &AgentMoves,
    target_stored: bool,
) -> GitPlan {
    let mut plan = GitPlan {
        head_before: now.describe_head(),
        ..GitPlan::default()
    };
    if let Some(op) = now.operation {
        plan.refusal = Some(Refusal::InProgress { operation: op });
    }
    for (name, agent_left) in &moves.refs {
        if name == "refs/stash" {
            continue;
        }
        let (cur, want) = (now.refs.get(name), target.refs.get(name));
        if cur == want {
            continue;
        }
        if cur != agent_left.as_ref() {
            plan.flagged
                .push(Flag::ChangedOutside { name: name.clone() });
            continue;
        }
        if now.elsewhere.contains(name) {
            plan.flagged
                .push(Flag::CheckedOutElsewhere { name: name.clone() });
            continue;
        }
        if let Some(c) = cur {
            let keep = name.trim_start_matches("refs/").to_owned();
            plan.keep.push((keep, c.clone()));
        }
        plan.refs.push(RefEdit {
            name: name.clone(),
            from: cur.cloned(),
            to: want.cloned(),
        });
    }
    plan_stash(&mut plan, now, target, moves);
    // The refs as they will be, for HEAD's commit and description.
    let mut after = now.refs.clone();
    for r in &plan.refs {
        match &r.to {
            Some(v) => after.insert(r.name.clone(), v.clone()),
            None => after.remove(&r.name),
        };
    }
    let want_head = match &target.head {
        Head::Branch { name, .. } => Head::Branch {
            name: name.clone(),
            oid: after.get(name).cloned(),
        },
        d => d.clone(),
    };
    let now_head = now.head.clone();
    let same_place = match (&now_head, &target.head) {
        (Head::Branch { name: a, .. }, Head::Branch { name: b, .. }) => a == b,
        (a, b) => a == b,
    };
    if !same_place {
        if let (Head::Branch { name, .. }, Some(_)) = (&target.head, target.head.oid()) {
            if !after.contains_key(name) {
                plan.flagged.push(Flag::BranchGone { name: name.clone() });
            }
        }
        // Two worktrees are never on one branch: HEAD is left when its branch at the target is
        // checked out in another worktree now.
        if let Head::Branch { name, .. } = &target.head {
            if now.elsewhere.contains(name) {
                plan.flagged
                    .push(Flag::CheckedOutElsewhere { name: name.clone() });
            }
        }
        if !plan
            .flagged
            .iter()
            .any(|f| matches!(f, Flag::BranchGone { .. }) || matches!(f, Flag::CheckedOutElsewhere { name } if Some(name.as_str()) == target.head.branch()))
        {
            if let Head::Detached { oid } = &now_head {
                if !now.refs.values().any(|v| v == oid) {
                    plan.keep.push(("HEAD".into(), oid.clone()));
                }
            }
            plan.head = Some((now_head, want_head.clone()));
        }
    }
    plan.head_after = match &plan.head {
        Some((_, h)) => describe_head(h, &after, &now.peeled),
        None => describe_head(&now.head, &after, &now.peeled),
    };
    // The commit HEAD names after the plan: the index goes back only with it.
    let head_after = match &plan.head {
        Some((_, h)) => h.oid().map(str::to_owned),
        None => match &now.head {
            Head::Branch { name, .. } => after.get(name).cloned(),
            Head::Detached { oid } => Some(oid.clone()),
        },
    };
    if let Some(to) = &target.index {
        if now.index.as_ref() != Some(to) {
            if head_after.as_deref() != target.head.oid() {
                plan.flagged.push(Flag::IndexLeft);
            } else if target_stored {
                plan.index = Some(IndexEdit {
                    from: now.index.clone(),
                    to: to.clone(),
                });
            } else {
                plan.flagged.push(Flag::IndexNotStored);
            }
        }
    }
    plan.keep.sort();
    plan.keep.dedup();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::Layout;
    use std::collections::BTreeMap;

    fn oid(c: char) -> String {
        std::iter::repeat_n(c, 40).collect()
    }

    fn state(head: Head, refs: &[(&str, String)]) -> GitState {
        GitState {
            version: crate::state::STATE_VERSION,
            layout: Layout::LinkedWorktree,
            head,
            refs: refs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            peeled: Default::default(),
            loose: BTreeMap::new(),
            packed: None,
            index: None,
            operation: None,
            elsewhere: Vec::new(),
            stash: None,
        }
    }

    #[test]
    fn head_is_left_when_its_branch_is_checked_out_in_another_worktree() {
        let target = state(
            Head::Branch {
                name: "refs/heads/main".into(),
                oid: Some(oid('a')),
            },
            &[("refs/heads/main", oid('a'))],
        );
        let mut now = state(
            Head::Detached { oid: oid('b') },
            &[("refs/heads/main", oid('a'))],
        );
        now.elsewhere = vec!["refs/heads/main".into()];
        let plan = plan_git_restore(
            &now,
            &target,
            &AgentMoves {
                head: true,
                ..AgentMoves::default()
            },
            false,
        );
        assert!(plan.head.is_none(), "{plan:?}");
        assert_eq!(
            plan.flagged,
            vec![Flag::CheckedOutElsewhere {
                name: "refs/heads/main".into()
            }]
        );
        now.elsewhere.clear();
        let plan = plan_git_restore(&now, &target, &AgentMoves::default(), false);
        assert!(plan.head.is_some());
        assert_eq!(
            plan.keep,
            vec![("HEAD".to_owned(), oid('b'))],
            "the detached commit is kept"
        );
    }

    #[test]
    fn a_summary_of_a_short_or_hostile_id_does_not_panic() {
        let plan = GitPlan {
            refs: vec![RefEdit {
                name: "refs/heads/x".into(),
                from: None,
                to: Some("ab".into()),
            }],
            ..GitPlan::default()
        };
        assert!(plan.summary().contains("branch x restored at ab"));
    }
}
