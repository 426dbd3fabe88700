//! What the model-based tests of the store and the engine share: the workspace as a map of
//! file contents, and which before-state a rewind must bring back for each file.

use std::collections::BTreeMap;

/// A model workspace: file → bytes (a missing key is an absent file).
pub type Disk = BTreeMap<&'static str, Vec<u8>>;

/// Which files a rewind restores, and to what: the anchor at which each file got its first
/// restorable record, with its content before that record (`None`: absent).
#[derive(Debug, Clone, Default)]
pub struct Restorable {
    tracked_at: BTreeMap<&'static str, u64>,
    first_before: BTreeMap<&'static str, Option<Vec<u8>>>,
}

impl Restorable {
    /// A restorable record of `f` at `anchor` whose before-state is `before`; only the first
    /// one counts.
    pub fn track(&mut self, f: &'static str, anchor: u64, before: Option<Vec<u8>>) {
        if !self.tracked_at.contains_key(f) {
            self.tracked_at.insert(f, anchor);
            self.first_before.insert(f, before);
        }
    }

    /// The files first recorded at or after `anchor`, forgotten (a fork leaves them to its
    /// parent's abandoned future); returns them.
    pub fn forget_from(&mut self, anchor: u64) -> Vec<&'static str> {
        let gone: Vec<&'static str> = self
            .tracked_at
            .iter()
            .filter(|(_, t)| **t >= anchor)
            .map(|(f, _)| *f)
            .collect();
        for f in &gone {
            self.tracked_at.remove(f);
            self.first_before.remove(f);
        }
        gone
    }

    /// The disk a rewind to `target` must leave, from the disk `now` and the disk `at` the
    /// target message: a file recorded before the target gets its state at the target, one
    /// first recorded from the target on its state before that record, any other file stays.
    pub fn rewound(&self, now: &Disk, target: u64, at: &Disk) -> Disk {
        let mut want = now.clone();
        for (f, t) in &self.tracked_at {
            let v = if *t < target {
                at.get(f).cloned()
            } else {
                self.first_before.get(f).cloned().flatten()
            };
            match v {
                Some(v) => want.insert(f, v),
                None => want.remove(f),
            };
        }
        want
    }
}
