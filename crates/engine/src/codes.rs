//! The stable error codes, defined in one place: the engine's edge.
//!
//! Every refusal the plugin reports to a user or a client carries one of these
//! strings. They are part of the public contract (seed 000 §7 plus the
//! planner's and the runtime's own refusals) and never change meaning. The planner
//! keeps its own error enums and knows nothing of this table: the engine's error
//! mapping gives each of their variants its code; the codes other core crates give
//! as strings are looked up here.

use std::fmt;

use strum::{EnumCount, IntoEnumIterator};

/// A stable, machine-readable error code such as `rewind/stale-undo`: `rewind/` and the
/// variant's name in kebab-case, derived (`strum`), so that a new variant is in the table,
/// in [`ErrorCode::all`] and in [`ErrorCode::parse`] without a list to keep by hand.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::EnumIter,
    strum::EnumCount,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case", prefix = "rewind/")]
#[non_exhaustive]
pub enum ErrorCode {
    // --- the RPC surface (seed 000 §7) ---
    /// The request is malformed (missing or ill-typed field).
    BadRequest,
    /// The host has no agent registry to resolve the session.
    AgentsUnavailable,
    /// The named session is not live on this host.
    SessionNotFound,
    /// No history entry has the given op id.
    UnknownEntry,
    /// The entry belongs to another workspace.
    UndoCrossWorkspace,
    /// The entry belongs to another session.
    UndoOtherSession,
    /// The entry was already undone.
    AlreadyUndone,
    /// The entry's restore journal is not completed, so it cannot be undone.
    NotUndoable,
    /// Only the newest not-yet-undone entry of the session can be undone. Kept in
    /// the table of the spec's codes; no longer raised: any rewind of a session may
    /// be undone (the undo is planned against the disk as it is).
    UndoNotTop,
    /// A restored file changed after the rewind; undo would overwrite it.
    StaleUndo,
    /// The undo ran and failed.
    UndoFailed,
    /// The RPC endpoint does not exist.
    UnknownEndpoint,
    /// An unexpected failure.
    Failed,
    // --- the planner ---
    /// The rewind target text is not `@<seq>` or a positive index.
    BadTarget,
    /// No event has the given seq.
    UnknownSeq,
    /// The target event is not a human user message.
    NotHumanMessage,
    /// The target message is no longer on the surface (compaction or an earlier rewind shadowed it).
    NotOnSurface,
    /// The index is larger than the number of candidates.
    IndexOutOfRange,
    /// There is no message to rewind to.
    NoCandidates,
    /// The session log is malformed or uses a format this build does not know.
    InvalidLog,
    // --- the runtime ---
    /// A rewind of the same session is already running.
    InFlight,
    /// The running turn did not stop.
    StopFailed,
    /// The snapshot store was written by a newer build; file operations are refused.
    StoreNewer,
    /// A snapshot store file is corrupt.
    StoreCorrupt,
    /// Snapshot backups are switched off.
    BackupsOff,
    /// The file restore failed.
    RestoreFailed,
    /// The session is a subagent session, which is never rewound.
    SubagentSession,
    // --- fork rewind ---
    /// No fork boundary before the target keeps exactly the messages before it (the target sits inside a turn after other messages of that turn, or is unread steering).
    ForkInsideTurn,
    /// The source session of a fork is not live on this host.
    ForkSourceNotLive,
    // --- crash consistency ---
    /// An earlier rewind of the session was interrupted; continue or roll it back first.
    Interrupted,
    /// `history.json` is damaged; the entries that can be read are kept.
    HistoryCorrupt,
    /// The session log could not be made durable; the files were not touched.
    FlushFailed,
    // --- the workspace scan ---
    /// The workspace has more files in scope than the file-count limit: the scan stopped there.
    ScanBudget,
    // --- file selection, undo and redo ---
    /// A `--only` / `--keep` filter names no file the rewind would change.
    BadSelection,
    /// The path is not among the files the rewind would change.
    NotPlanned,
    /// The rewind is not undone, was redone already, or changed no file to redo.
    NotRedoable,
    /// The native addon is missing for this platform; only the conversation half runs.
    NativeUnavailable,
    /// The running DSH lacks a host contract the operation needs (for example a way to read
    /// the session log); the operation is refused and nothing changed.
    HostUnsupported,
    // --- git ---
    /// An operation (merge, rebase, cherry-pick, …) is in progress in the workspace's git
    /// repository: the rewind is refused, nothing changed (or rewind with git kept as it is).
    GitInProgress,
    /// A file's before-state is a blob of the workspace's git repository that its object
    /// store no longer holds (pruned): the rewind is refused, naming the file; nothing changed.
    GitObjectGone,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub fn all() -> impl Iterator<Item = ErrorCode> {
        <Self as IntoEnumIterator>::iter()
    }

    /// How many codes there are.
    pub const COUNT: usize = <Self as EnumCount>::COUNT;

    /// The stable string form, e.g. `rewind/bad-request`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the code names an expected refusal (a rule said no; nothing changed) rather
    /// than a fault (something broke: a failed write, a damaged file, a step that did not
    /// finish). Refusals cross to the host as data; faults are thrown.
    pub const fn is_refusal(self) -> bool {
        !matches!(
            self,
            Self::Failed
                | Self::UndoFailed
                | Self::RestoreFailed
                | Self::StoreCorrupt
                | Self::HistoryCorrupt
                | Self::FlushFailed
                | Self::StopFailed
                | Self::NativeUnavailable
                | Self::HostUnsupported
        )
    }

    /// Parses a stable string form back into its code.
    pub fn parse(code: &str) -> Option<Self> {
        Self::all().find(|c| c.as_str() == code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_prefixed_and_round_trip() {
        let mut seen = HashSet::new();
        for code in ErrorCode::all() {
            let s = code.as_str();
            assert!(s.starts_with("rewind/"), "{s}");
            assert!(seen.insert(s), "duplicate {s}");
            assert_eq!(ErrorCode::parse(s), Some(code));
            assert_eq!(code.to_string(), s);
        }
        assert_eq!(ErrorCode::parse("rewind/nope"), None);
    }

    #[test]
    fn the_thirteen_rpc_codes_of_the_spec() {
        let rpc: Vec<&str> = ErrorCode::all().take(13).map(ErrorCode::as_str).collect();
        assert_eq!(
            rpc,
            [
                "rewind/bad-request",
                "rewind/agents-unavailable",
                "rewind/session-not-found",
                "rewind/unknown-entry",
                "rewind/undo-cross-workspace",
                "rewind/undo-other-session",
                "rewind/already-undone",
                "rewind/not-undoable",
                "rewind/undo-not-top",
                "rewind/stale-undo",
                "rewind/undo-failed",
                "rewind/unknown-endpoint",
                "rewind/failed",
            ]
        );
    }

    /// The derived names are the contract's strings, letter for letter.
    #[test]
    fn every_code_is_spelled_as_the_contract_spells_it() {
        let all: Vec<&str> = ErrorCode::all().map(ErrorCode::as_str).collect();
        assert_eq!(all.len(), ErrorCode::COUNT);
        for code in [
            "rewind/undo-cross-workspace",
            "rewind/not-human-message",
            "rewind/index-out-of-range",
            "rewind/in-flight",
            "rewind/store-newer",
            "rewind/fork-inside-turn",
            "rewind/fork-source-not-live",
            "rewind/history-corrupt",
            "rewind/scan-budget",
            "rewind/bad-selection",
            "rewind/not-planned",
            "rewind/not-redoable",
            "rewind/native-unavailable",
            "rewind/host-unsupported",
        ] {
            assert!(all.contains(&code), "{code} missing from {all:?}");
        }
    }
}
