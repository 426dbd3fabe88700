//! `dsh-rewind`: the rewind checkpoints of a DSH home, without DSH.
//!
//! Lists sessions and their checkpoints, previews, diffs and restores files
//! (journaled, recorded in the rewind history), undoes a restore, finishes or
//! rolls back an interrupted one, and checks, repairs and cleans the store.
//! See `crates/cli/README.md` for every command and the exit codes.

mod cmd;
mod doctor;
mod fail;
mod home;
mod out;
mod show;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::fail::Code;

/// Rewind checkpoints of a DeepSeek Harness home, without DSH.
#[derive(Parser, Debug)]
#[command(name = "dsh-rewind", version, about, long_about = None)]
pub struct Cli {
    /// The DSH home (default: $DSH_HOME when absolute, else ~/.dsh).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Print JSON for scripts instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Sessions with checkpoints: workspace, last activity, checkpoints, bytes.
    Sessions,
    /// The messages of a session you can restore to, with their file counts.
    Checkpoints {
        /// Session id.
        session: String,
    },
    /// What a restore to a message would change (nothing is changed).
    Preview {
        /// Session id.
        session: String,
        /// The message: `@<seq>`, or `<n>` for the n-th newest.
        target: String,
        /// The session's workspace, when its DSH log is gone.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Line diff between the workspace now and a message's state (nothing is changed).
    Diff {
        /// Session id.
        session: String,
        /// The message: `@<seq>` or `<n>`.
        target: String,
        /// Only this workspace-relative path (or directory).
        path: Option<String>,
        /// The session's workspace, when its DSH log is gone.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Restore the workspace files to a message, and the workspace repository's HEAD, index
    /// and the branches the agent moved (journaled; recorded in history).
    Restore {
        /// Session id.
        session: String,
        /// The message: `@<seq>` or `<n>`.
        target: String,
        /// Restore only these paths (or directories); repeatable.
        #[arg(long, value_name = "PATH")]
        only: Vec<String>,
        /// Leave these paths (or directories) as they are; repeatable.
        #[arg(long, value_name = "PATH")]
        keep: Vec<String>,
        /// Leave the git repository (HEAD, index, branches) as it is: restore the files alone.
        #[arg(long)]
        keep_git: bool,
        /// The session's workspace, when its DSH log is gone.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Undo a restore (a rewind's files), by its op id from `history`.
    Undo {
        /// The op id.
        op: String,
        /// The session's workspace, when its DSH log is gone.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// A restored file changed since: leave it as it is (repeatable, or comma-separated).
        #[arg(long, value_name = "PATH", value_delimiter = ',')]
        keep: Vec<String>,
        /// A restored file changed since: give it its pre-restore state all the same.
        #[arg(long, value_name = "PATH", value_delimiter = ',')]
        take: Vec<String>,
    },
    /// Rewind history entries, newest first.
    History {
        /// Only the entries of sessions whose workspace is DIR.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Restores that were interrupted (or failed part-way) and can be continued or rolled back.
    Restores,
    /// Finish an interrupted restore.
    Continue {
        /// The op id (see `restores`).
        op: String,
        /// The session's workspace, when its DSH log is gone.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Put every file of an interrupted restore back as it was before it.
    Rollback {
        /// The op id (see `restores`).
        op: String,
        /// The session's workspace, when its DSH log is gone.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Storage: blobs, records, per-session bytes, what garbage collection would free.
    Du,
    /// Remove idle sessions' checkpoints by age and by size (dry run unless --apply).
    Gc {
        /// Sessions idle longer than this many days go (1 to 3650).
        #[arg(long, value_name = "DAYS", default_value_t = cleanup::DEFAULT_MAX_AGE_DAYS,
              value_parser = clap::value_parser!(u32)
                  .range(i64::from(cleanup::MIN_MAX_AGE_DAYS)..=i64::from(cleanup::MAX_MAX_AGE_DAYS)))]
        max_age_days: u32,
        /// Then the oldest idle sessions go until the store is at most this big (e.g. 2GiB).
        #[arg(long, value_name = "SIZE", value_parser = show::parse_size)]
        max_size: Option<u64>,
        /// Really remove (default: list what would go).
        #[arg(long)]
        apply: bool,
    },
    /// Pack loose blobs into zstd-compressed packs (small ones share chunks); the loose copies
    /// go once each pack and its index are durable.
    Compact,
    /// Check every record and re-hash every blob; non-zero exit when anything is wrong.
    Verify,
    /// Move what `verify` finds corrupt into the store's quarantine/ (nothing is deleted).
    Repair,
    /// What this build can do with the home: session formats found, the store's layout, history.
    Doctor,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                Code::Usage.exit()
            } else {
                0
            });
        }
    };
    let json = cli.json;
    match cmd::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if json {
                let v = serde_json::json!({
                    "ok": false,
                    "error": {"code": f.code.name(), "exit": f.code.exit(), "message": f.message},
                });
                out::stdout(&format!("{v:#}\n"));
            } else {
                out::stderr(&format!("dsh-rewind: {}\n", f.message));
            }
            ExitCode::from(f.code.exit())
        }
    }
}
