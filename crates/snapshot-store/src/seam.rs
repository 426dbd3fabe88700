//! The one seam every filesystem call passes through: fault injection and crash points.

use std::fmt;
use std::io;
use std::path::Path;

/// The kind of filesystem call about to be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsOp {
    /// Opening an existing file or directory.
    Open,
    /// Creating a new file.
    Create,
    /// Reading file contents.
    Read,
    /// Writing file contents.
    Write,
    /// `fsync` of a file or directory.
    Sync,
    /// `lstat`/`fstat`.
    Stat,
    /// Listing a directory.
    ReadDir,
    /// Atomic rename.
    Rename,
    /// Removing a file.
    RemoveFile,
    /// Creating a directory.
    CreateDir,
    /// Removing a directory (tree).
    RemoveDir,
    /// Changing permission bits.
    SetPermissions,
    /// Taking the store lock.
    Lock,
}

impl fmt::Display for FsOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            FsOp::Open => "open",
            FsOp::Create => "create",
            FsOp::Read => "read",
            FsOp::Write => "write",
            FsOp::Sync => "sync",
            FsOp::Stat => "stat",
            FsOp::ReadDir => "read-dir",
            FsOp::Rename => "rename",
            FsOp::RemoveFile => "remove-file",
            FsOp::CreateDir => "create-dir",
            FsOp::RemoveDir => "remove-dir",
            FsOp::SetPermissions => "set-permissions",
            FsOp::Lock => "lock",
        };
        f.write_str(s)
    }
}

/// Which tree a filesystem call touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// The store root (paths relative to it).
    Store,
    /// The session workspace (paths relative to the session cwd).
    Workspace,
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Area::Store => "store",
            Area::Workspace => "workspace",
        })
    }
}

/// A named point between two durable steps where a crash is interesting.
///
/// Tests stop (SIGKILL) a child process at each point and check that reopening the
/// store and continuing or rolling back yields exactly the pre- or post-state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashPoint {
    /// A captured blob is in place, the pending line not yet appended.
    CaptureBlobStored,
    /// The capture's pending-log line is written (capture about to return).
    CaptureStaged,
    /// The anchor-group entry file is written, the call not yet settled in the pending log.
    CommitEntryWritten,
    /// The call is settled in the pending log, the tracked cache not yet updated.
    CommitPendingRemoved,
    /// Rescue bytes of every planned path are stored, the journal not yet written.
    RestoreRescued,
    /// The intent journal is written, no workspace mutation yet.
    RestoreJournalWritten,
    /// Action `n` changed the workspace, its progress line not yet appended.
    RestoreActionApplied(usize),
    /// Action `n`'s progress line is appended.
    RestoreActionLogged(usize),
    /// Action `n` is rewriting a file in place: the file is cut and holds the first
    /// half of its new bytes.
    RestoreActionPartial(usize),
    /// Every action ran; the terminal line not yet appended.
    RestoreBeforeComplete,
    /// Rollback step `n` changed the workspace, its progress line not yet appended.
    RollbackActionApplied(usize),
    /// Rollback applied everything; the terminal line not yet appended.
    RollbackBeforeComplete,
    /// Rollback (or undo) step `n` is rewriting a file in place: the file is cut and
    /// holds the first half of its pre-restore bytes.
    RollbackActionPartial(usize),
    /// A pruned group was moved to the trash, not yet deleted.
    PruneGroupDetached,
    /// Groups are pruned, unreferenced blobs not yet swept.
    PruneBeforeSweep,
    /// One unreferenced blob was removed during the sweep.
    PruneBlobRemoved,
    /// A compacted record log is written under its temporary name, not yet renamed.
    CompactWritten,
    /// The compacted record log replaced the old one.
    CompactReplaced,
    /// A migrated session's record log is in place, its layout-1 files not yet removed.
    MigrateLogWritten,
    /// `store.json` says layout 2, the sessions not yet migrated.
    MigrateMarkerWritten,
    /// A new pack is written and synced under its temporary name, not yet renamed.
    PackWritten,
    /// A new pack and its index are in place and durable; the loose copies of its
    /// members not yet removed (or, in a rewrite, the old pack not yet removed).
    PackIndexed,
    /// One loose blob the new pack holds was removed.
    PackLooseRemoved,
    /// The index of a pack a garbage collection drops or rewrote was removed, the pack
    /// file not yet.
    PackOldUnindexed,
    /// A frame of the workspace index's delta is written and synced, nothing after it yet
    /// (the scan's records are committed before it; its session's `scan.json` not yet
    /// written).
    IndexDeltaAppended,
    /// A fold of the workspace index's delta wrote the new base (atomically, synced); the
    /// delta, which names the old base and is ignored beside the new one, not yet removed.
    IndexFoldWritten,
}

impl CrashPoint {
    /// A stable name (without the index), e.g. `restore-action-applied`.
    pub fn name(&self) -> &'static str {
        match self {
            CrashPoint::CaptureBlobStored => "capture-blob-stored",
            CrashPoint::CaptureStaged => "capture-staged",
            CrashPoint::CommitEntryWritten => "commit-entry-written",
            CrashPoint::CommitPendingRemoved => "commit-pending-removed",
            CrashPoint::RestoreRescued => "restore-rescued",
            CrashPoint::RestoreJournalWritten => "restore-journal-written",
            CrashPoint::RestoreActionApplied(_) => "restore-action-applied",
            CrashPoint::RestoreActionLogged(_) => "restore-action-logged",
            CrashPoint::RestoreActionPartial(_) => "restore-action-partial",
            CrashPoint::RestoreBeforeComplete => "restore-before-complete",
            CrashPoint::RollbackActionApplied(_) => "rollback-action-applied",
            CrashPoint::RollbackBeforeComplete => "rollback-before-complete",
            CrashPoint::RollbackActionPartial(_) => "rollback-action-partial",
            CrashPoint::PruneGroupDetached => "prune-group-detached",
            CrashPoint::PruneBeforeSweep => "prune-before-sweep",
            CrashPoint::PruneBlobRemoved => "prune-blob-removed",
            CrashPoint::CompactWritten => "compact-written",
            CrashPoint::CompactReplaced => "compact-replaced",
            CrashPoint::MigrateLogWritten => "migrate-log-written",
            CrashPoint::MigrateMarkerWritten => "migrate-marker-written",
            CrashPoint::PackWritten => "pack-written",
            CrashPoint::PackIndexed => "pack-indexed",
            CrashPoint::PackLooseRemoved => "pack-loose-removed",
            CrashPoint::PackOldUnindexed => "pack-old-unindexed",
            CrashPoint::IndexDeltaAppended => "index-delta-appended",
            CrashPoint::IndexFoldWritten => "index-fold-written",
        }
    }

    /// Every crash-point name, for tests that visit each in turn.
    pub const NAMES: &'static [&'static str] = &[
        "capture-blob-stored",
        "capture-staged",
        "commit-entry-written",
        "commit-pending-removed",
        "restore-rescued",
        "restore-journal-written",
        "restore-action-applied",
        "restore-action-logged",
        "restore-action-partial",
        "restore-before-complete",
        "rollback-action-applied",
        "rollback-before-complete",
        "rollback-action-partial",
        "prune-group-detached",
        "prune-before-sweep",
        "prune-blob-removed",
        "compact-written",
        "compact-replaced",
        "migrate-log-written",
        "migrate-marker-written",
        "pack-written",
        "pack-indexed",
        "pack-loose-removed",
        "pack-old-unindexed",
        "index-delta-appended",
        "index-fold-written",
    ];
}

/// Injected behaviour around every filesystem call of the store.
///
/// The default methods do nothing, so production code passes [`NoFaults`].
/// Tests implement this trait to fail a chosen call with an error such as
/// `EIO`, `ENOSPC` or `EACCES`, or to stop the process at a [`CrashPoint`].
pub trait FaultSeam: Send + Sync {
    /// Called before every filesystem call; an `Err` is returned as that call's error.
    fn before(&self, op: FsOp, area: Area, path: &Path) -> io::Result<()> {
        let _ = (op, area, path);
        Ok(())
    }
    /// Called at each crash point.
    fn crash_point(&self, point: CrashPoint) {
        let _ = point;
    }
    /// Whether this seam wants the crash points that cost work to reach (a file
    /// rewritten in place is written in two halves, with a crash point between
    /// them, only for a seam that says so). `true` unless overridden.
    fn wants_partial_writes(&self) -> bool {
        true
    }
}

/// The production seam: no faults, no crash points.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoFaults;

impl FaultSeam for NoFaults {
    fn wants_partial_writes(&self) -> bool {
        false
    }
}
