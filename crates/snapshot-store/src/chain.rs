//! Restore planning across a fork chain.
//!
//! A forked child session starts from a prefix of its parent's log: every
//! message up to the fork boundary is shared, with the same seqs. The
//! before-states the parent recorded for those messages are the child's history
//! too, so a rewind inside the child reads them *in place* — nothing is copied —
//! through a chain of ancestors, each limited to the anchors at or below its fork
//! boundary. Siblings (other children of the same parent) are never part of a
//! chain, so they never see each other's records.
//!
//! **Which before-state wins.** Records are ordered by *chain order*: the root
//! ancestor's records first, then each descendant's, down to the session
//! itself; within one session by `(anchor, order)` as in
//! [`Session::plan_restore`]. Chain order is the order in which the changes
//! happened along this session's lineage, so for each path the earliest record
//! in chain order whose anchor is at or after the target holds the state the
//! path had when the target message was sent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{FsFailure, PlanError};
use crate::format::BeforeState;
use crate::path::{IdError, RelPath, encode_id};
use crate::plan::{Planner, RestorePlan};
use crate::seam::Area;
use crate::session::Session;

/// One ancestor of a forked session: whose records to read, and up to which anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainLink {
    /// The ancestor session's id.
    pub session_id: String,
    /// The fork boundary: only the ancestor's groups with anchor ≤ this are read.
    /// A link further up the chain is also limited by every boundary below it.
    pub max_anchor: u64,
}

/// Error of [`Session::plan_restore_chain`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainPlanError {
    /// Reading records or observing the workspace failed (as for a single session).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// An ancestor id is not acceptable.
    #[error("invalid ancestor session id `{id}`: {reason}")]
    InvalidAncestor {
        /// The id.
        id: String,
        /// Why.
        reason: IdError,
    },
    /// A session appears twice in the chain (a lineage cannot loop).
    #[error("session `{id}` appears twice in the fork chain")]
    Cycle {
        /// The repeated id.
        id: String,
    },
}

/// Why an ancestor's view cannot be made.
pub(crate) enum AncestorFail {
    /// The id is not acceptable.
    Id(IdError),
    /// The workspace handle could not be shared.
    Fs(FsFailure),
}

/// A selected before-state: (chain rank, anchor, order) sorts in chain order.
type Pick = ((usize, u64, u64), BeforeState);

impl Session {
    /// Plans restoring the workspace to anchor `target_seq` of this session when
    /// it is a fork: like [`Session::plan_restore`], but the before-states are
    /// looked up along `ancestors` (nearest parent first), each ancestor limited
    /// to anchors ≤ its [`ChainLink::max_anchor`] and ≤ every boundary below it.
    /// Per path, the earliest record in chain order (root ancestor first, this
    /// session last; `(anchor, order)` within a session) anchored at or after the
    /// target wins. Nothing is copied and nothing is changed. With no ancestors
    /// this is exactly [`Session::plan_restore`].
    pub fn plan_restore_chain(
        &self,
        target_seq: u64,
        ancestors: &[ChainLink],
    ) -> Result<RestorePlan, ChainPlanError> {
        self.planner().plan_restore_chain(target_seq, ancestors)
    }
}

impl Planner<'_> {
    /// An ancestor's view of the store, for a plan.
    fn ancestor(&self, id: &str) -> Result<Session, ChainPlanError> {
        match self.ancestor_view(id) {
            Ok(s) => Ok(s),
            Err(AncestorFail::Id(reason)) => Err(ChainPlanError::InvalidAncestor {
                id: id.to_string(),
                reason,
            }),
            Err(AncestorFail::Fs(f)) => Err(PlanError::Fs(f).into()),
        }
    }

    /// An ancestor's view of the store (same workspace handle; only its records are read).
    pub(crate) fn ancestor_view(&self, id: &str) -> Result<Session, AncestorFail> {
        let enc = encode_id(id).map_err(AncestorFail::Id)?;
        let root = self.s.ws.root.try_clone().map_err(|source| {
            AncestorFail::Fs(FsFailure {
                op: crate::seam::FsOp::Open,
                area: Area::Workspace,
                path: ".".into(),
                source,
            })
        })?;
        Ok(Session::new(
            self.s.store.clone(),
            id.to_string(),
            PathBuf::from("sessions").join(enc),
            root,
            Vec::new(),
        ))
    }

    pub(crate) fn plan_restore_chain(
        &self,
        target_seq: u64,
        ancestors: &[ChainLink],
    ) -> Result<RestorePlan, ChainPlanError> {
        self.s.store.guard_writable().map_err(PlanError::from)?;
        self.s.load().map_err(PlanError::from)?;
        let mut seen = vec![self.s.id.clone()];
        let depth = ancestors.len();
        let mut best: BTreeMap<RelPath, Pick> = BTreeMap::new();
        let mut offer = |path: RelPath, key: (usize, u64, u64), before: BeforeState| {
            if best.get(&path).is_none_or(|(k, _)| key < *k) {
                best.insert(path, (key, before));
            }
        };
        let mut noted = std::collections::BTreeSet::new();
        for (seq, rec) in self.s.load_groups(target_seq).map_err(PlanError::from)? {
            if crate::plan::scanned::is_outside(&rec.source) {
                noted.extend(rec.entries.into_iter().map(|e| e.path));
                continue;
            }
            for e in rec.entries {
                offer(e.path, (depth, seq, e.order), e.before);
            }
        }
        let mut limit = u64::MAX;
        // The content the ancestors' logs keep (the nearest one's first).
        let mut elsewhere: std::collections::HashMap<String, crate::codec::Shared> =
            Default::default();
        for (i, link) in ancestors.iter().enumerate() {
            if seen.contains(&link.session_id) {
                return Err(ChainPlanError::Cycle {
                    id: link.session_id.clone(),
                });
            }
            seen.push(link.session_id.clone());
            limit = limit.min(link.max_anchor);
            if limit < target_seq {
                // Nothing at or after the target is shared with this ancestor (nor above it).
                break;
            }
            let anc = self.ancestor(&link.session_id)?;
            anc.load().map_err(PlanError::from)?;
            for (sha, bytes) in anc.kept_blobs().map_err(PlanError::from)? {
                elsewhere.entry(sha).or_insert(bytes);
            }
            let rank = depth - 1 - i;
            for (seq, rec) in anc.load_groups(target_seq).map_err(PlanError::from)? {
                if seq > limit {
                    continue;
                }
                if crate::plan::scanned::is_outside(&rec.source) {
                    noted.extend(rec.entries.into_iter().map(|e| e.path));
                    continue;
                }
                for e in rec.entries {
                    offer(e.path, (rank, seq, e.order), e.before);
                }
            }
        }
        let outside = crate::plan::scanned::outside_only(noted, &best.keys().collect());
        let picks = best
            .into_iter()
            .map(|(path, ((_, anchor, _), before))| (path, anchor, before))
            .collect();
        let mut plan = self.plan_picks_with(target_seq, picks, &elsewhere)?;
        plan.outside = outside;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::RecheckError;
    use crate::{Action, Store, StoreOptions};
    use std::fs;
    use std::path::Path;

    struct Fx {
        _tmp: tempfile::TempDir,
        store: Store,
        cwd: PathBuf,
    }

    fn fx() -> Fx {
        let tmp = tempfile::tempdir().expect("tmp");
        let cwd = tmp.path().join("ws");
        fs::create_dir_all(&cwd).expect("ws");
        let store = Store::open(&tmp.path().join("store"), StoreOptions::default()).expect("store");
        Fx {
            _tmp: tmp,
            store,
            cwd,
        }
    }

    impl Fx {
        fn session(&self, id: &str) -> Session {
            self.store.session(id, &self.cwd).expect("session")
        }
        /// A tool call of `s` at `anchor` writes `text` to `path` (a capture + commit).
        fn write(&self, s: &Session, anchor: u64, call: &str, path: &str, text: &str) {
            s.capture_before(call, Path::new(path)).expect("capture");
            fs::write(self.cwd.join(path), text).expect("write");
            s.commit(call, anchor, true).expect("commit");
        }
        fn read(&self, path: &str) -> Option<String> {
            fs::read_to_string(self.cwd.join(path)).ok()
        }
        fn restore(&self, s: &Session, target: u64, chain: &[ChainLink], op: &str) {
            let plan = s.plan_restore_chain(target, chain).expect("plan");
            let out = s.restore(&plan, op).expect("restore");
            assert!(out.failed.is_empty(), "{:?}", out.failed);
        }
    }

    fn link(id: &str, max_anchor: u64) -> ChainLink {
        ChainLink {
            session_id: id.into(),
            max_anchor,
        }
    }

    fn paths(plan: &RestorePlan) -> Vec<(String, u64)> {
        plan.actions
            .iter()
            .map(|a| (a.display.clone(), a.anchor_seq))
            .collect()
    }

    #[test]
    fn child_reads_parent_records_up_to_the_boundary_only() {
        let f = fx();
        let parent = f.session("parent");
        f.write(&parent, 10, "p1", "a.txt", "a1");
        f.write(&parent, 20, "p2", "a.txt", "a2");
        f.write(&parent, 20, "p3", "b.txt", "b2");
        f.write(&parent, 30, "p4", "c.txt", "c3"); // after the fork boundary
        // Fork at boundary 25 (messages 10 and 20 are shared); the fork restore put c.txt back.
        fs::remove_file(f.cwd.join("c.txt")).expect("rm");
        let child = f.session("child");
        f.write(&child, 40, "c1", "a.txt", "child-a");
        f.write(&child, 40, "c2", "d.txt", "d4");
        let chain = [link("parent", 25)];

        // Without the chain the child knows only its own records.
        assert_eq!(
            paths(&child.plan_restore(20).expect("plan")),
            vec![("a.txt".into(), 40), ("d.txt".into(), 40)]
        );
        let plan = child.plan_restore_chain(20, &chain).expect("plan");
        // a.txt: the parent's record at 20 (state "a1") wins over the child's at 40;
        // b.txt: created at 20 → delete; c.txt (anchor 30 > boundary) is not seen; d.txt: the child's.
        assert_eq!(
            paths(&plan),
            vec![
                ("a.txt".into(), 20),
                ("b.txt".into(), 20),
                ("d.txt".into(), 40)
            ]
        );
        f.restore(&child, 20, &chain, "op-1");
        assert_eq!(f.read("a.txt").as_deref(), Some("a1"));
        assert_eq!(f.read("b.txt"), None);
        assert_eq!(f.read("c.txt"), None);
        assert_eq!(f.read("d.txt"), None);
        // Undo goes back through the child's own journal.
        child.undo_restore("op-1").expect("undo");
        assert_eq!(f.read("a.txt").as_deref(), Some("child-a"));
        assert_eq!(f.read("d.txt").as_deref(), Some("d4"));
        // The parent's store is untouched: its groups, nothing copied into the child.
        assert_eq!(parent.anchors().expect("anchors"), vec![10, 20, 30]);
        assert_eq!(child.anchors().expect("anchors"), vec![40]);
    }

    #[test]
    fn the_earliest_record_in_chain_order_wins() {
        let f = fx();
        let parent = f.session("p");
        f.write(&parent, 10, "p1", "x.txt", "px");
        let child = f.session("c");
        // The child records a lower anchor than the parent's (not produced by a real fork,
        // where the child's anchors follow the boundary): chain order, not the anchor, decides.
        f.write(&child, 12, "c1", "x.txt", "cx");
        let plan = child.plan_restore_chain(5, &[link("p", 15)]).expect("plan");
        assert_eq!(paths(&plan), vec![("x.txt".into(), 10)]);
        assert!(matches!(plan.actions[0].action, Action::Delete));
    }

    #[test]
    fn fork_of_a_fork_and_siblings() {
        let f = fx();
        let root = f.session("root");
        f.write(&root, 10, "r1", "r.txt", "r1");
        f.write(&root, 30, "r2", "late.txt", "root-late"); // after both forks
        fs::remove_file(f.cwd.join("late.txt")).expect("rm");
        let child = f.session("child");
        f.write(&child, 40, "c1", "c.txt", "c1");
        f.write(&child, 50, "c2", "c.txt", "c2");
        let sibling = f.session("sibling");
        f.write(&sibling, 40, "s1", "s.txt", "s1");
        // The grandchild forks the child at 45: the child's group 40 and the root's up to 20.
        let grand = f.session("grand");
        f.write(&grand, 60, "g1", "g.txt", "g1");
        let chain = [link("child", 45), link("root", 20)];
        let plan = grand.plan_restore_chain(10, &chain).expect("plan");
        assert_eq!(
            paths(&plan),
            vec![
                ("c.txt".into(), 40),
                ("g.txt".into(), 60),
                ("r.txt".into(), 10)
            ]
        );
        // The root's limit is also capped by the boundary below it.
        let plan = grand
            .plan_restore_chain(10, &[link("child", 5), link("root", 20)])
            .expect("plan");
        assert_eq!(paths(&plan), vec![("g.txt".into(), 60)]);
        // The sibling is never part of another chain; its own chain sees the root only.
        let plan = sibling
            .plan_restore_chain(10, &[link("root", 20)])
            .expect("plan");
        assert_eq!(
            paths(&plan),
            vec![("r.txt".into(), 10), ("s.txt".into(), 40)]
        );
        f.restore(&grand, 10, &chain, "op-g");
        assert_eq!(f.read("r.txt"), None);
        assert_eq!(f.read("c.txt"), None);
        assert_eq!(f.read("g.txt"), None);
        assert_eq!(f.read("s.txt").as_deref(), Some("s1"));
    }

    #[test]
    fn refusals_fail_closed() {
        let f = fx();
        let child = f.session("c");
        let err = child.plan_restore_chain(1, &[link("", 5)]).unwrap_err();
        assert!(
            matches!(err, ChainPlanError::InvalidAncestor { .. }),
            "{err}"
        );
        let err = child
            .plan_restore_chain(1, &[link("p", 5), link("c", 5)])
            .unwrap_err();
        assert!(matches!(err, ChainPlanError::Cycle { .. }), "{err}");
        // A corrupt ancestor record is reported, never skipped.
        let parent = f.session("p");
        f.write(&parent, 3, "p1", "a.txt", "x");
        let log = f._tmp.path().join("store/sessions/p/records.log");
        let mut bytes = fs::read(&log).expect("log");
        // A flipped bit in the first record (more records follow): damage, not a torn tail.
        bytes[crate::log::HEADER_LEN + crate::log::FRAME_HEAD + 2] ^= 0x01;
        fs::write(&log, &bytes).expect("corrupt");
        let err = child.plan_restore_chain(1, &[link("p", 5)]).unwrap_err();
        assert!(
            matches!(err, ChainPlanError::Plan(PlanError::Corrupt(_))),
            "{err}"
        );
        // A missing ancestor (never recorded anything, or swept away) contributes nothing.
        assert!(
            child
                .plan_restore_chain(1, &[link("gone", 5)])
                .expect("plan")
                .actions
                .is_empty()
        );
    }

    #[test]
    fn a_child_rechecks_what_its_ancestors_track() {
        let f = fx();
        let parent = f.session("p");
        parent.recheck_tracked(1).expect("boundary 1");
        f.write(&parent, 1, "p1", "a.txt", "one");
        parent.recheck_tracked(2).expect("boundary 2");
        // Forked at message 2; the child's first message is 3.
        let chain = [link("p", 1)];
        let child = f.session("c");
        let out = child
            .recheck_tracked_chain(3, &chain)
            .expect("child boundary 3");
        assert_eq!(
            out.checked, 1,
            "the parent's path is re-checked in the child"
        );
        assert_eq!(child.tracked_paths().expect("tracked").len(), 1);
        // Changed outside the agent in the child's turn 3: recorded at 4, the state at 3 kept.
        fs::write(f.cwd.join("a.txt"), "outside").expect("outside");
        let out = child
            .recheck_tracked_chain(4, &chain)
            .expect("child boundary 4");
        assert_eq!(out.recorded.len(), 1, "{out:?}");
        f.restore(&child, 3, &chain, "r1");
        assert_eq!(f.read("a.txt").as_deref(), Some("one"));
        // Once the child has a boundary of its own, its ancestors are not read again: a path
        // the parent tracks later is not taken over.
        f.write(&parent, 2, "p2", "b.txt", "later");
        let out = child
            .recheck_tracked_chain(5, &chain)
            .expect("child boundary 5");
        assert_eq!(out.checked, 1);
        // A child reopened keeps what it took over.
        let again = f.session("c");
        assert_eq!(again.tracked_paths().expect("tracked").len(), 1);
        // An unacceptable ancestor id is refused, the child left as it was.
        let fresh = f.session("c2");
        let err = fresh.recheck_tracked_chain(3, &[link("", 1)]).unwrap_err();
        assert!(matches!(err, RecheckError::InvalidAncestor { .. }), "{err}");
        assert!(fresh.tracked_paths().expect("tracked").is_empty());
    }
}
