//! The state of a workspace's git repository, read natively (no `git` process), and its
//! crash-safe restore.
//!
//! - [`GitState::read`] finds the repository of a workspace ([`discover`]) and reads HEAD
//!   (its branch, or detached) with its commit, the branch and tag tips, the index (its
//!   bytes, identified by [`index_id`]) and an operation in progress ([`Operation`]).
//! - [`agent_moves`] folds recorded [`Point`]s into what the agent's calls moved;
//!   [`plan_git_restore`] makes a [`GitPlan`]: HEAD, the index and the moved refs back to a
//!   target, a ref moved outside the agent flagged and left, keep-refs for every tip the
//!   plan moves away from, a refusal when an operation is in progress.
//! - [`read_entries`] reads an index's entries (path, stat data, object id) and [`Odb`]
//!   reads blobs from the object store (loose and packed, deltas resolved, each checked
//!   against its id): the before-state of a file that is its index blob is that blob.
//! - [`apply`] writes it the way git does: `<file>.lock` created exclusively, written,
//!   synced, renamed over the file; a reflog line per ref. It never runs `reset`, never
//!   cleans, never writes an object, never touches a remote-tracking ref.
//!
//! ```no_run
//! use git_state::{Found, GitState};
//! match GitState::read(std::path::Path::new("/work/repo")).unwrap() {
//!     Found::State(read) => println!("HEAD: {}", read.state.describe_head()),
//!     Found::Untracked(why) => println!("{}", why.message()),
//!     Found::None => println!("no repository"),
//! }
//! ```

mod apply;
mod discover;
mod error;
mod index;
mod index_entries;
mod odb;
mod plan;
mod refs;
mod state;

pub use apply::{Applied, KEEP_NAMESPACE, apply, ref_component};
pub use discover::{GIT_ENV, Layout, Repo, Untracked, discover};
pub use error::{ApplyError, ReadError};
pub use index::{index_content, index_id};
pub use index_entries::{BlobHasher, EntriesError, IndexEntries, IndexEntry, blob_oid, read_entries};
pub use odb::{Odb, OdbError};
pub use plan::{
    AgentMoves, Flag, GitPlan, IndexEdit, Phase, Point, RefEdit, Refusal, StashEdit, agent_moves,
    plan_git_restore, short_ref, target_point,
};
pub use refs::{IDENT, Packed, Update, is_oid, read_packed, resolve, update_ref};
pub use state::{
    Found, GitState, Handles, Head, IndexRef, Operation, Read, STATE_VERSION, StashLog,
    describe_head,
    packed_id, parse_packed_peeled, parse_packed_refs, tracked_ref,
};
