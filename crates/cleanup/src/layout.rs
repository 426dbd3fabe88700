//! What the sweep knows about the snapshot store's layout: the names and
//! readers of `snapshot_store::usage`, re-exported under the names this crate
//! has always used. The store's layout is described there.

pub use snapshot_store::usage::{
    JournalPin, SESSIONS_DIR, STORE_LOCK, STORE_MARKER, TRASH_DIR,
    session_dir_name as encode_session_dir, session_id_of_dir as decode_session_dir,
};

/// The newest store version this crate knows the layout of (the store's own
/// [`snapshot_store::STORE_VERSION`]).
pub const KNOWN_STORE_VERSION: u64 = snapshot_store::STORE_VERSION as u64;
/// The newest journal intent version (`v`) this crate can judge.
pub const KNOWN_JOURNAL_VERSION: u64 = snapshot_store::usage::JOURNAL_VERSION;
