//! What the model-based tests of the store and the engine share: the workspace as a map of
//! file contents, and which before-state a rewind must bring back for each file.

use std::collections::BTreeMap;

/// A model workspace: file → bytes (a missing key is an absent file).
pub type Disk = BTreeMap<&'static str, Vec<u8>>;

/// Which files a rewind restores, and to what: per file, the anchor of its first restorable
/// record and its content before that record (`None`: absent).
#[derive(Debug, Clone, Default)]
pub struct Restorable {
    first: BTreeMap<&'static str, (u64, Option<Vec<u8>>)>,
}

impl Restorable {
    /// A restorable record of `f` at `anchor` whose before-state is `before`; only the first
    /// one counts.
    pub fn track(&mut self, f: &'static str, anchor: u64, before: Option<Vec<u8>>) {
        self.first.entry(f).or_insert((anchor, before));
    }

    /// The files first recorded at or after `anchor`, forgotten (a fork leaves them to its
    /// parent's abandoned future); returns them.
    pub fn forget_from(&mut self, anchor: u64) -> Vec<&'static str> {
        let gone: Vec<&'static str> = self
            .first
            .iter()
            .filter(|(_, (t, _))| *t >= anchor)
            .map(|(f, _)| *f)
            .collect();
        for f in &gone {
            self.first.remove(f);
        }
        gone
    }

    /// The disk a rewind to `target` must leave, from the disk `now` and the disk `at` the
    /// target message: a file recorded before the target gets its state at the target, one
    /// first recorded from the target on its state before that record, any other file stays.
    pub fn rewound(&self, now: &Disk, target: u64, at: &Disk) -> Disk {
        let mut want = now.clone();
        for (f, (t, before)) in &self.first {
            let v = if *t < target {
                at.get(f)
            } else {
                before.as_ref()
            };
            match v {
                Some(v) => want.insert(f, v.clone()),
                None => want.remove(f),
            };
        }
        want
    }
}
