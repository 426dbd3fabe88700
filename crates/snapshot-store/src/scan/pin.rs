//! Pins: the before-state of a tool call in flight, kept from what other sessions of the
//! workspace do to the shared index meanwhile.
//!
//! The index is shared by every session of a workspace, and a scan compares the workspace
//! with it: a change is reported by the first scan that sees it. While session B's shell
//! command runs, session A's scan (before A's own call, at A's message, before A's rewind)
//! would take B's half-written files into the index, and B's scan after its command would
//! then find nothing of them to record, or record B's own first writes as their
//! before-state. So each call in flight pins the index state it started from: a scan of
//! another session that moves an entry on keeps, in every other session's pin, the entry as
//! it was (the first time only), and the scan after the call compares the workspace with
//! that pinned state for those paths ([`rebase`]). A rewind's restore writes its files as
//! known content ([`Pins::known`]): they are no call's change, and no pin keeps an older
//! state of them.
//!
//! A session's pins: one per call whose scan before it ran (keyed by its call id), and a
//! standing one from the session's last scan after a call (the host skips the scan before
//! the next call of the same turn: that call's after-scan uses the standing pin). A scan at
//! a message boundary drops the session's pins (no call of it runs then). Pins live in the
//! process's copy of the workspace's state ([`super::workspace::Cached`]): another process's
//! scans are not seen by them.

use std::collections::HashMap;

use super::diff::{Change, ChangeKind, classify};
use super::index::{IdxEntry, Index};

/// Paths a pin keeps at most; one that would keep more is dropped (its call's after-scan
/// then records what the index shows, as without a pin).
const MAX_MOVED: usize = 200_000;

/// Whose pin: a session's call (`call`), or the session's standing pin (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PinKey {
    session: String,
    call: Option<String>,
}

/// One pin: per path another session's scan moved on in the index since it was taken, the
/// entry the path had then (`None`: no entry, the path was absent or out of scope).
#[derive(Debug, Default)]
pub(crate) struct Pin {
    moved: HashMap<Box<[u8]>, Option<IdxEntry>>,
}

/// The pins of one workspace in this process.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    live: HashMap<PinKey, Pin>,
}

impl Pins {
    /// Pins the index as it is now for `session`'s `call` (`None`: the standing pin),
    /// replacing a pin of that key.
    pub(crate) fn pin(&mut self, session: &str, call: Option<&str>) {
        self.live.insert(key(session, call), Pin::default());
    }

    /// Takes the pin of `session`'s `call`, else the session's standing pin.
    pub(crate) fn take(&mut self, session: &str, call: Option<&str>) -> Option<Pin> {
        if call.is_some() {
            if let Some(pin) = self.live.remove(&key(session, call)) {
                return Some(pin);
            }
        }
        self.live.remove(&key(session, None))
    }

    /// Drops the standing pin of `session`.
    pub(crate) fn unpin_standing(&mut self, session: &str) {
        self.live.remove(&key(session, None));
    }

    /// Drops every pin of `session`.
    pub(crate) fn drop_session(&mut self, session: &str) {
        self.live.retain(|k, _| k.session != session);
    }

    /// A scan of `session` moved the index on by `changes`: every pin of another session keeps
    /// the entry each changed path had before (the first move since the pin only). A standing
    /// pin keeps nothing of a scan after a call (`after_call`): those changes are that call's,
    /// made while no call of the pin's session is known to run (a call's pin, taken when its
    /// scan before it runs, keeps them: the two calls ran at once, either may have made them).
    /// Returns the paths moved on since a call of another session started that is still in
    /// flight (a call's pin, not a standing one), by this scan or an earlier one: that call may
    /// have made those changes. Sorted.
    pub(crate) fn moved_by(
        &mut self,
        session: &str,
        after_call: bool,
        changes: &[Change],
    ) -> Vec<Box<[u8]>> {
        let mut in_flight: Vec<Box<[u8]>> = Vec::new();
        self.live.retain(|k, pin| {
            if k.session == session {
                return true;
            }
            if k.call.is_none() && after_call {
                return true;
            }
            for c in changes {
                if !pin.moved.contains_key(&c.path) {
                    pin.moved.insert(c.path.clone(), c.old.clone());
                }
            }
            if k.call.is_some() {
                in_flight.extend(pin.moved.keys().cloned());
            }
            // A pin past its bound is dropped: its call's after-scan then records what the
            // index shows, as without one.
            pin.moved.len() <= MAX_MOVED
        });
        in_flight.sort();
        in_flight.dedup();
        in_flight
    }

    /// A restore wrote (or deleted) `paths` and the index holds what it wrote: those states
    /// are known, no call's change, and no pin keeps an older state of them.
    pub(crate) fn known<'a>(&mut self, paths: impl IntoIterator<Item = &'a [u8]>) {
        let paths: Vec<&[u8]> = paths.into_iter().collect();
        for pin in self.live.values_mut() {
            for p in &paths {
                pin.moved.remove(*p);
            }
        }
    }
}

fn key(session: &str, call: Option<&str>) -> PinKey {
    PinKey {
        session: session.to_string(),
        call: call.map(str::to_string),
    }
}

/// The change from `old` to `new` (`None`: no change).
fn kind(old: Option<&IdxEntry>, new: Option<&IdxEntry>) -> Option<ChangeKind> {
    match (old, new) {
        (None, None) => None,
        (None, Some(_)) => Some(ChangeKind::Created),
        (Some(_), None) => Some(ChangeKind::Deleted),
        (Some(o), Some(n)) => classify(o, n),
    }
}

/// The changes of a call's after-scan against the call's pin: for each path another session
/// moved on in the index while the call ran, the change from the pinned entry to the entry
/// the index holds now (`now`, after this scan), whether this scan found a change of its
/// own there or not (the other session's scan may have seen the call's writes first).
/// Returns how many changes the pin added or altered.
pub(crate) fn rebase(changes: &mut Vec<Change>, pin: Pin, now: &Index) -> usize {
    if pin.moved.is_empty() {
        return 0;
    }
    let mut moved = pin.moved;
    let mut altered = 0;
    changes.retain_mut(|c| {
        let Some(old) = moved.remove(&c.path) else {
            return true;
        };
        altered += 1;
        match kind(old.as_ref(), c.new.as_ref()) {
            Some(k) => {
                c.kind = k;
                c.old = old;
                true
            }
            None => false,
        }
    });
    for (path, old) in moved {
        let new = now.entries().get(&path[..]).cloned();
        if let Some(k) = kind(old.as_ref(), new.as_ref()) {
            altered += 1;
            changes.push(Change {
                path,
                kind: k,
                old,
                new,
            });
        }
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    altered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::index::{Coverage, Stat};

    fn entry(sha: u8, ino: u64) -> IdxEntry {
        IdxEntry {
            stat: Stat {
                mode: 0o100644,
                nlink: 1,
                size: 3,
                mtime_s: 100 + i64::from(sha),
                mtime_ns: 0,
                ctime_s: 100 + i64::from(sha),
                ctime_ns: 0,
                ino,
                dev: 1,
            },
            cov: Coverage::Hashed([sha; 32]),
        }
    }

    fn change(
        path: &str,
        kind: ChangeKind,
        old: Option<IdxEntry>,
        new: Option<IdxEntry>,
    ) -> Change {
        Change {
            path: path.as_bytes().into(),
            kind,
            old,
            new,
        }
    }

    #[test]
    fn another_sessions_scan_does_not_move_a_calls_before_state() {
        let mut pins = Pins::default();
        pins.pin("b", Some("call-1"));
        // A's scan takes B's half-written shared.txt and B's new.txt into the index.
        let in_flight = pins.moved_by(
            "a",
            false,
            &[
                change("new.txt", ChangeKind::Created, None, Some(entry(9, 9))),
                change(
                    "shared.txt",
                    ChangeKind::Modified,
                    Some(entry(1, 1)),
                    Some(entry(2, 1)),
                ),
            ],
        );
        let names: Vec<&[u8]> = in_flight.iter().map(|p| &p[..]).collect();
        assert_eq!(
            names,
            vec![&b"new.txt"[..], &b"shared.txt"[..]],
            "B's call is in flight"
        );
        // A second move of shared.txt (by a scan after A's own call, run at once) keeps the
        // first state: the one at the pin.
        pins.moved_by(
            "a",
            true,
            &[change(
                "shared.txt",
                ChangeKind::Modified,
                Some(entry(2, 1)),
                Some(entry(3, 1)),
            )],
        );
        // B's after-scan: shared.txt changed again since A's scan; new.txt is as A saw it.
        let mut now = Index::default();
        now.insert("shared.txt".as_bytes().into(), entry(4, 1));
        now.insert("new.txt".as_bytes().into(), entry(9, 9));
        let mut changes = vec![change(
            "shared.txt",
            ChangeKind::Modified,
            Some(entry(3, 1)),
            Some(entry(4, 1)),
        )];
        let pin = pins.take("b", Some("call-1")).expect("the call's pin");
        assert_eq!(rebase(&mut changes, pin, &now), 2);
        assert_eq!(changes.len(), 2);
        assert_eq!(&*changes[0].path, b"new.txt");
        assert_eq!(changes[0].kind, ChangeKind::Created);
        assert!(
            changes[0].old.is_none(),
            "new.txt was absent when the call started"
        );
        assert_eq!(&*changes[1].path, b"shared.txt");
        assert_eq!(
            changes[1].old,
            Some(entry(1, 1)),
            "shared.txt as it was when the call started"
        );
        assert!(pins.take("b", Some("call-1")).is_none(), "taken once");
    }

    #[test]
    fn a_restores_known_writes_are_no_calls_change_and_own_scans_move_no_own_pin() {
        let mut pins = Pins::default();
        pins.pin("b", Some("call-1"));
        // B's own other scan does not move B's pin.
        assert!(
            pins.moved_by(
                "b",
                false,
                &[change("x", ChangeKind::Created, None, Some(entry(1, 1)))]
            )
            .is_empty()
        );
        pins.moved_by(
            "a",
            false,
            &[change(
                "a.txt",
                ChangeKind::Modified,
                Some(entry(1, 2)),
                Some(entry(2, 2)),
            )],
        );
        // A's restore writes a.txt back: known.
        pins.known([&b"a.txt"[..]]);
        let mut now = Index::default();
        now.insert("a.txt".as_bytes().into(), entry(1, 3));
        let mut changes = Vec::new();
        assert_eq!(
            rebase(
                &mut changes,
                pins.take("b", Some("call-1")).expect("pin"),
                &now
            ),
            0
        );
        assert!(changes.is_empty());
    }

    #[test]
    fn the_standing_pin_serves_a_call_without_its_own_and_a_pinned_state_equal_to_now_is_no_change()
    {
        let mut pins = Pins::default();
        pins.pin("b", None);
        // A scan after another session's call keeps nothing in a standing pin: that call's.
        assert!(
            pins.moved_by(
                "a",
                true,
                &[change("g", ChangeKind::Created, None, Some(entry(5, 5)))]
            )
            .is_empty()
        );
        // A standing pin is no call in flight.
        assert!(
            pins.moved_by(
                "a",
                false,
                &[change(
                    "f",
                    ChangeKind::Modified,
                    Some(entry(1, 1)),
                    Some(entry(2, 1))
                )]
            )
            .is_empty()
        );
        let mut now = Index::default();
        now.insert("f".as_bytes().into(), entry(1, 1));
        now.insert("g".as_bytes().into(), entry(5, 5));
        // f is back to what it was: no change, and the scan's own change there is dropped.
        let mut changes = vec![change(
            "f",
            ChangeKind::Modified,
            Some(entry(2, 1)),
            Some(entry(1, 1)),
        )];
        let pin = pins.take("b", Some("call-2")).expect("the standing pin");
        rebase(&mut changes, pin, &now);
        assert!(changes.is_empty());
        pins.pin("b", Some("c"));
        pins.pin("a", Some("d"));
        pins.drop_session("b");
        assert!(pins.take("b", Some("c")).is_none());
        assert!(pins.take("a", Some("d")).is_some());
    }
}
