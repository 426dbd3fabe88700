//! Finding the repository of a workspace, without running `git`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ReadError;

/// How the workspace's repository is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// A `.git` directory in the work tree.
    Plain,
    /// A `.git` file naming a git directory elsewhere (`git init --separate-git-dir`, a
    /// submodule whose git directory is in the superproject's `.git/modules/`).
    GitFile,
    /// A linked worktree (`git worktree add`): its git directory has a `commondir`.
    LinkedWorktree,
}

/// Why the git state of a workspace is not tracked at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Untracked {
    /// `GIT_DIR` (or `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_COMMON_DIR`) is set in the
    /// environment: git itself would use another repository than the one found from the
    /// workspace.
    GitEnv {
        /// The variable that is set.
        variable: String,
    },
    /// The repository stores its refs in the `reftable` format, which is not read.
    Reftable,
    /// The repository uses SHA-256 object names, which are not handled.
    Sha256,
    /// The work tree of the repository is larger than the workspace (the workspace is a
    /// subdirectory): switching HEAD changes files the rewind does not track.
    WorkspaceIsSubdirectory {
        /// The work tree's root.
        work_tree: PathBuf,
    },
}

impl Untracked {
    /// A sentence saying why git is left alone.
    pub fn message(&self) -> String {
        match self {
            Untracked::GitEnv { variable } => {
                format!("{variable} is set in the environment; the repository's git state is not tracked")
            }
            Untracked::Reftable => {
                "the repository stores its refs as a reftable, which is not read; its git state is not tracked".into()
            }
            Untracked::Sha256 => {
                "the repository uses SHA-256 object names; its git state is not tracked".into()
            }
            Untracked::WorkspaceIsSubdirectory { work_tree } => format!(
                "the workspace is inside the repository at {}, not its root; its git state is not tracked",
                work_tree.display()
            ),
        }
    }
}

/// A repository found from a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The work tree's root (the workspace itself).
    pub work_tree: PathBuf,
    /// The git directory of this work tree (HEAD, index, per-worktree refs).
    pub git_dir: PathBuf,
    /// The common directory (branches, tags, packed-refs, reflogs of branches, objects).
    pub common_dir: PathBuf,
    /// How it is laid out.
    pub layout: Layout,
}

/// The environment variables that redirect git away from the repository found by walking up.
pub const GIT_ENV: [&str; 4] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
];

fn io(path: &Path, source: std::io::Error) -> ReadError {
    ReadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a `.git` file (`gitdir: <path>`), relative paths resolved against its directory.
fn read_gitfile(file: &Path) -> Result<PathBuf, ReadError> {
    let text = std::fs::read_to_string(file).map_err(|e| io(file, e))?;
    let rest = text
        .strip_prefix("gitdir:")
        .ok_or_else(|| ReadError::Malformed {
            path: file.to_path_buf(),
            why: "a .git file must start with `gitdir:`".into(),
        })?
        .trim();
    let p = Path::new(rest);
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        file.parent().unwrap_or(Path::new("/")).join(p)
    })
}

/// Finds the repository whose work tree holds `workspace`: `Ok(None)` when there is none
/// (or it is bare), `Err(Untracked)` inside `Ok` when one exists whose state is not tracked.
/// `env` answers environment variables (pass `|k| std::env::var_os(k)`).
pub fn discover(
    workspace: &Path,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<Result<Repo, Untracked>>, ReadError> {
    for var in GIT_ENV {
        if env(var).is_some_and(|v| !v.is_empty()) {
            return Ok(Some(Err(Untracked::GitEnv {
                variable: var.into(),
            })));
        }
    }
    let mut dir = Some(workspace);
    while let Some(d) = dir {
        let dot = d.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(m) => {
                let (git_dir, layout) = if m.is_dir() {
                    (dot.clone(), Layout::Plain)
                } else if m.is_file() {
                    (read_gitfile(&dot)?, Layout::GitFile)
                } else {
                    dir = d.parent();
                    continue;
                };
                if !git_dir.join("HEAD").exists() {
                    dir = d.parent();
                    continue;
                }
                let (common_dir, layout) = match std::fs::read_to_string(git_dir.join("commondir"))
                {
                    Ok(c) => {
                        let c = Path::new(c.trim());
                        let common = if c.is_absolute() {
                            c.to_path_buf()
                        } else {
                            git_dir.join(c)
                        };
                        (common, Layout::LinkedWorktree)
                    }
                    Err(_) => (git_dir.clone(), layout),
                };
                if d != workspace {
                    return Ok(Some(Err(Untracked::WorkspaceIsSubdirectory {
                        work_tree: d.to_path_buf(),
                    })));
                }
                if let Some(u) = unsupported_config(&common_dir) {
                    return Ok(Some(Err(u)));
                }
                return Ok(Some(Ok(Repo {
                    work_tree: d.to_path_buf(),
                    git_dir,
                    common_dir,
                    layout,
                })));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => dir = d.parent(),
            Err(e) => return Err(io(&dot, e)),
        }
    }
    Ok(None)
}

/// A repository format this crate does not read, from the `[extensions]` of its config.
fn unsupported_config(common: &Path) -> Option<Untracked> {
    let text = std::fs::read_to_string(common.join("config")).ok()?;
    let mut section = String::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            section = l
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_ascii_lowercase();
            continue;
        }
        if section != "extensions" {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
        if k == "refstorage" && v == "reftable" {
            return Some(Untracked::Reftable);
        }
        if k == "objectformat" && v == "sha256" {
            return Some(Untracked::Sha256);
        }
    }
    None
}
