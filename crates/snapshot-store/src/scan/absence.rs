//! What one walk of the workspace tells of a path it did not pass on: whether the path was
//! absent when the walk listed its directory, or could have been there out of its view.

use std::collections::HashSet;

use super::walk::Walked;

/// The directories one walk listed to their end and the names of their entries it did not
/// walk on (see [`Walked::unlisted`]); with the files it passed on (the index's entries),
/// every name those listings held. Kept in memory by the session handle whose scan made it.
#[derive(Debug, Default)]
pub(crate) struct Absence {
    listed: HashSet<Box<[u8]>>,
    unlisted: HashSet<Box<[u8]>>,
}

impl Absence {
    /// What `walked` saw; `None` when the walk stopped early (a listing it never made says
    /// nothing).
    pub(crate) fn of(walked: &mut Walked) -> Option<Absence> {
        if walked.over_limit {
            return None;
        }
        Some(Absence {
            listed: std::mem::take(&mut walked.listed).into_iter().collect(),
            unlisted: std::mem::take(&mut walked.unlisted).into_iter().collect(),
        })
    }

    /// Notes a path the walk passed on that vanished before it was read (not absent when
    /// listed: its state then is not known).
    pub(crate) fn vanished(&mut self, rel: &[u8]) {
        self.unlisted.insert(rel.into());
    }

    /// Whether `rel` (a workspace path, `/`-separated) was absent when the walk listed the
    /// directory that would have held it: some directory on its way was listed to its end
    /// and held no entry of that name, walked on or not. Then the length of the path to that
    /// name (`rel[..n]`, the first of its components no listing held). `walked(q)`: whether
    /// the walk passed `q` on as a file (an entry of the index). `None` when not known: a
    /// directory on the way was out of scope, unreadable or not a directory, or the path
    /// itself was there.
    pub(crate) fn absent(&self, rel: &[u8], walked: impl Fn(&[u8]) -> bool) -> Option<usize> {
        if rel.is_empty() || !self.listed.contains(&b""[..]) {
            return None;
        }
        let mut end = 0;
        loop {
            let next = rel[end..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(rel.len(), |i| end + i);
            let q = &rel[..next];
            if self.unlisted.contains(q) || walked(q) {
                return None;
            }
            if !self.listed.contains(q) {
                // Its directory was listed to its end without it.
                return Some(next);
            }
            if next == rel.len() {
                // The path itself was a directory the walk listed.
                return None;
            }
            end = next + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn absence(listed: &[&str], unlisted: &[&str]) -> Absence {
        Absence {
            listed: listed.iter().map(|s| s.as_bytes().into()).collect(),
            unlisted: unlisted.iter().map(|s| s.as_bytes().into()).collect(),
        }
    }

    #[test]
    fn a_name_no_listing_held_is_absent_and_every_other_is_not_known() {
        let a = absence(&["", "src", "src/app"], &["dist", "src/.env", "locked"]);
        let files = |q: &[u8]| q == b"src/a.ts" || q == b"README.md";
        // Not in a listing that was made to its end: the first name no listing held.
        assert_eq!(a.absent(b"src/new.ts", files), Some(10));
        assert_eq!(a.absent(b"src/app/new.ts", files), Some(14));
        assert_eq!(a.absent(b"new/deeper/file", files), Some(3));
        assert_eq!(a.absent(b"src/gen/deep/out.ts", files), Some(7));
        // Out of scope, unreadable, walked on, or a directory on the way that was not one.
        for rel in [
            "dist/out.js",
            "src/.env",
            "locked/f",
            "src/a.ts",
            "README.md",
            "README.md/x",
            "src",
            "src/app",
            "",
        ] {
            assert_eq!(a.absent(rel.as_bytes(), files), None, "{rel}");
        }
        // The root never listed: nothing is known.
        let none = absence(&[], &[]);
        assert_eq!(none.absent(b"src/new.ts", |_| false), None);
    }
}
