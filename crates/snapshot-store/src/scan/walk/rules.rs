//! The ignore rules of the walk: the matchers of each directory's ignore files,
//! those of the directories above the workspace, and the decision for one path.

use super::*;

/// The matchers of one directory's ignore files.
pub(super) struct Rules {
    /// `.ignore`
    pub(super) ignore: Gitignore,
    /// `.gitignore`
    pub(super) git: Gitignore,
    /// `.git/info/exclude`
    pub(super) exclude: Gitignore,
}

/// A directory's rules and those of the directories above it (inside the root).
pub(super) struct Chain {
    pub(super) rules: Rules,
    pub(super) parent: Option<Arc<Chain>>,
}

/// Builds a matcher rooted at `match_root` from `file_dir/name` when that exists;
/// errors other than I/O errors are kept (the file's other patterns still apply).
pub(super) fn matcher(match_root: &Path, file: &Path, errs: &mut Vec<ignore::Error>) -> Gitignore {
    let mut b = GitignoreBuilder::new(match_root);
    if file.exists() {
        if let Some(e) = b.add(file) {
            if !e.is_io() {
                errs.push(e);
            }
        }
    }
    match b.build() {
        Ok(g) => g,
        Err(e) => {
            errs.push(e);
            Gitignore::empty()
        }
    }
}

/// The rules of directory `dir` (files read through `dir`, matched against paths
/// rooted at `match_root`).
pub(super) fn rules_of(
    match_root: &Path,
    dir: &Path,
    has: [bool; 3],
    errs: &mut Vec<ignore::Error>,
) -> Rules {
    let [ignore, git, exclude] = has;
    let load = |yes: bool, file: PathBuf, errs: &mut Vec<ignore::Error>| {
        if yes {
            matcher(match_root, &file, errs)
        } else {
            Gitignore::empty()
        }
    };
    Rules {
        ignore: load(ignore, dir.join(".ignore"), errs),
        git: load(git, dir.join(".gitignore"), errs),
        exclude: load(exclude, dir.join(".git").join("info/exclude"), errs),
    }
}

impl Rules {
    pub(super) fn is_empty(&self) -> bool {
        self.ignore.is_empty() && self.git.is_empty() && self.exclude.is_empty()
    }
}

/// Rules from outside the walked tree.
pub(super) struct Outer {
    /// The root as given (the global excludes match `root/rel`).
    pub(super) root: Vec<u8>,
    /// The canonical root (the parents' rules match `canonical/rel`).
    pub(super) canonical: Vec<u8>,
    /// Rules of the directories above the root, nearest first.
    pub(super) parents: Vec<Rules>,
    /// Git's global excludes (`core.excludesFile`), rooted at the current directory.
    pub(super) global: Gitignore,
}

impl Outer {
    pub(super) fn new(root: &Path, errs: &mut Vec<ignore::Error>) -> Outer {
        let mut parents = Vec::new();
        let canonical = root.canonicalize().ok();
        if let Some(c) = &canonical {
            let mut at = c.parent();
            while let Some(dir) = at {
                let r = rules_of(dir, dir, [true, true, true], errs);
                if !r.is_empty() {
                    parents.push(r);
                }
                at = dir.parent();
            }
        }
        let global = match std::env::current_dir() {
            Ok(cwd) => GitignoreBuilder::new(cwd).build_global().0,
            Err(_) => Gitignore::empty(),
        };
        Outer {
            root: root.as_os_str().as_bytes().to_vec(),
            canonical: canonical
                .map(|c| c.into_os_string().into_vec())
                .unwrap_or_default(),
            parents,
            global,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.parents.is_empty() && self.global.is_empty()
    }
}

/// Whether the entry at `rel` (in a directory with rules `chain`) is ignored.
pub(super) fn ignored(
    chain: Option<&Arc<Chain>>,
    outer: &Outer,
    rel: &[u8],
    is_dir: bool,
    buf: &mut Vec<u8>,
) -> bool {
    let p = as_path(rel);
    let (mut mi, mut mg, mut me) = (Match::None, Match::None, Match::None);
    let mut node = chain;
    while let Some(n) = node {
        if mi.is_none() {
            mi = n.rules.ignore.matched(p, is_dir);
        }
        if mg.is_none() {
            mg = n.rules.git.matched(p, is_dir);
        }
        if me.is_none() {
            me = n.rules.exclude.matched(p, is_dir);
        }
        node = n.parent.as_ref();
    }
    if !outer.parents.is_empty() && (mi.is_none() || mg.is_none() || me.is_none()) {
        join_into(buf, &outer.canonical, rel);
        let p = as_path(buf);
        for r in &outer.parents {
            if mi.is_none() {
                mi = r.ignore.matched(p, is_dir);
            }
            if mg.is_none() {
                mg = r.git.matched(p, is_dir);
            }
            if me.is_none() {
                me = r.exclude.matched(p, is_dir);
            }
        }
    }
    let m = mi.or(mg).or(me);
    if m.is_none() && !outer.global.is_empty() {
        join_into(buf, &outer.root, rel);
        return outer.global.matched(as_path(buf), is_dir).is_ignore();
    }
    m.is_ignore()
}
