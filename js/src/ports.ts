/**
 * What the host plugin needs from the file half (the snapshot store) and the cleanup sweep,
 * as ports. `files.ts` / `cleanup.ts` implement them over the napi addon; when the addon lacks
 * a part, the port reports itself unavailable and the conversation half keeps working.
 */
import type * as Addon from '../../crates/napi-host/index.d.ts'
import { RewindError } from './errors.ts'

/** One planned restore action (preview), its origin as the host knows it (`shared/rpc-types.ts`). */
export type { PreviewFile } from '../../shared/rpc-types.ts'

/** Which planned files a restore takes: all, minus `keep`, limited to `only` (paths or directories). */
export type RestoreSelection = import('../../crates/napi-host/index.d.ts').BindingRestoreSelection

/** What restoring one path would change inside it (see `BindingFileDiff`). */
export type FileDiff = import('../../crates/napi-host/index.d.ts').BindingFileDiff

/** A path left alone, with why. */
export type SkippedPath = import('../../crates/napi-host/index.d.ts').BindingSkippedPath

/** A path that failed, with why. */
export type FailedPath = import('../../crates/napi-host/index.d.ts').BindingFailedPath

/** A path the workspace scan does not cover (a budget, a per-file cap, an unreadable file). */
export type NotCoveredPath = import('../../crates/napi-host/index.d.ts').BindingNotCovered

/** Impact of a rewind on the files, without mutation (the store's, or as the host tells it: `shared/rpc-types.ts`). */
export type { FilesPreview } from '../../shared/rpc-types.ts'

/** When a workspace scan runs. */
export type ScanPhase = import('../../crates/napi-host/index.d.ts').BindingScanRequest['phase']

/** A workspace scan request (see `scan.ts`). */
export type ScanRequest = import('../../crates/napi-host/index.d.ts').BindingScanRequest

/** What one workspace scan found and recorded. */
export type ScanReport = import('../../crates/napi-host/index.d.ts').BindingScanReport

/** The outcome of a journaled restore (`shared/rpc-types.ts`, over `BindingRestoreOutcome`). */
export type { RestoreOutcome } from '../../shared/rpc-types.ts'

/** The outcome of undoing a restore (files only). */
export type UndoOutcome = Addon.BindingUndoOutcome

/** Per path changed since the rewind: `take` gets the pre-rewind state all the same, `keep` leaves it. */
export type UndoChoices = import('../../crates/napi-host/index.d.ts').BindingUndoChoices

/** One ancestor of a forked session (nearest parent first): its before-states anchored at or below `maxAnchor` (the fork boundary) are read in place by a restore inside the child. */
export type ChainLink = import('../../crates/napi-host/index.d.ts').BindingChainLink

/** The snapshot store, per session. */
export interface FilesPort {
  /** `undefined` when usable; otherwise a stable code (`rewind/store-newer`, ...) and message. */
  unavailable(): { code: string; message: string } | undefined
  /**
   * `anchorSeq`: the anchor the call's commit will name (the store may then leave the commit's write to its next one).
   * `undefined` when the capture was made before returning (it throws then when it failed), else a promise of it.
   */
  capture(sessionId: string, cwd: string, callId: string, path: string, maxFileBytes: number, anchorSeq?: number): Promise<void> | undefined
  /** `undefined` when the commit was made before returning (it throws then when it failed), else a promise of it. */
  commit(sessionId: string, cwd: string, callId: string, anchorSeq: number, ok: boolean): Promise<void> | undefined
  discard(sessionId: string, cwd: string, callId: string): Promise<void>
  /**
   * Take the locks a burst of write-tool calls keeps, on the thread pool, ahead of the burst (the
   * model has just named a write tool): the call's capture then takes none on the host's thread.
   * Never waits and never fails: nothing is done when the session's handle is not open or the
   * locks are taken by another.
   */
  takeLocksAhead(sessionId: string, cwd: string): void
  /** `ancestors`: the fork chain; a fork's first re-check takes over the paths they track. */
  recheck(sessionId: string, cwd: string, anchorSeq: number, maxFileBytes: number, ancestors?: ChainLink[]): Promise<void>
  /** Scan the session's workspace (before / after a tool call, at a message boundary). */
  scan(sessionId: string, cwd: string, request: ScanRequest): Promise<ScanReport>
  /** `ancestors`: the fork chain of the session (empty for a session that is not a fork). */
  preview(sessionId: string, cwd: string, targetSeq: number, ancestors?: ChainLink[]): Promise<Addon.BindingPreview>
  /** What restoring `path` would change inside it; rejects `rewind/not-planned` for a path the restore leaves alone. */
  diff(sessionId: string, cwd: string, targetSeq: number, path: string, ancestors?: ChainLink[]): Promise<FileDiff>
  /** Record DSH's session format for this session; a different recorded format clears its snapshots. */
  sessionFormat(sessionId: string, cwd: string, format: string): Promise<void>
  /** Keep the newest groups of a session. */
  prune(sessionId: string, cwd: string): Promise<void>
  /** Drop cached handles of a session whose snapshots were swept away. */
  forget(sessionId: string): void
  /** Every restore journal of the session and where it stands. */
  restoreStatuses(sessionId: string, cwd: string): Promise<RestoreStatus[]>
}

/** Where a restore journal stands. */
export type RestoreStatus = import('../../crates/napi-host/index.d.ts').BindingRestoreStatus

/** One session directory a sweep removes (or would remove): its id and size. */
export type SweepItem = Pick<Addon.BindingSweepItem, 'sessionId' | 'bytes'>

/** A sweep report (`BindingSweepReport` without the kept sessions; sessions whose removal failed, with why). */
export type SweepReport = Omit<Addon.BindingSweepReport, 'items' | 'kept'> & { items: SweepItem[] }

/** The cleanup sweep. */
export interface CleanupPort {
  unavailable(): { code: string; message: string } | undefined
  /** Sweep session directories idle longer than `maxAgeDays`; never those in `active`. */
  sweep(opts: { maxAgeDays: number; active: string[]; apply: boolean; onlySession?: string }): Promise<SweepReport>
  /**
   * The size quota: the oldest idle sessions go until the store takes at most `maxBytes`; never
   * those in `active` or needed by an open restore; `already` are the sessions the age sweep of
   * the same run removes. Items carry the bytes each frees; `bytes` is the size afterwards.
   */
  quotaSweep(opts: { maxBytes: number; active: string[]; apply: boolean; already: string[] }): Promise<SweepReport>
  /** The last recorded sweep (with what its size quota did), if any. */
  lastSweep(): Promise<LastSweep | undefined>
  /** The size quota's last run that removed sessions (when, which, what it freed), if any. */
  lastQuota(): Promise<LastQuota | undefined>
  /**
   * The automatic sweep: the age rule when it is on and the last one is older than a day; then,
   * with `maxBytes` (non-zero, whatever the age rule's switch), the size quota. `undefined` when
   * neither ran.
   */
  autoSweep(opts: { maxAgeDays: number; active: string[]; maxBytes: number }): Promise<AutoSweepReport | undefined>
  /**
   * How much the store takes: in all, for the workspace made of the sessions `members` and the
   * workspace scan states of `cwds`, and the `top` biggest sessions.
   */
  storage(opts: { members: string[]; cwds: string[]; top: number }): Promise<StorageReport>
}

/** The last recorded sweep. */
export type LastSweep = import('../../crates/napi-host/index.d.ts').BindingLastSweep

/** The size quota's last run that removed sessions. */
export type LastQuota = import('../../crates/napi-host/index.d.ts').BindingLastQuota

/** The automatic sweep's result (its sweeps as {@link SweepReport}). */
export type AutoSweepReport = Omit<Addon.BindingAutoSweep, 'age' | 'quota'> & { age?: SweepReport; quota?: SweepReport }

/** Storage figures of the snapshot store (bytes). */
export type StorageReport = import('../../crates/napi-host/index.d.ts').BindingStorage

/** A port that is never available. */
export function unavailableFiles(code: string, message: string): FilesPort {
  const refuse = async (): Promise<never> => {
    throw new RewindError(code, message)
  }
  return {
    unavailable: () => ({ code, message }),
    capture: () => undefined,
    commit: () => undefined,
    discard: async () => {},
    takeLocksAhead: () => {},
    recheck: async () => {},
    scan: refuse,
    preview: refuse,
    diff: refuse,
    sessionFormat: async () => {},
    prune: async () => {},
    forget: () => {},
    restoreStatuses: async () => [],
  }
}

/** A cleanup port that is never available. */
export function unavailableCleanup(code: string, message: string): CleanupPort {
  return {
    unavailable: () => ({ code, message }),
    sweep: async () => {
      throw new RewindError(code, message)
    },
    quotaSweep: async () => {
      throw new RewindError(code, message)
    },
    lastSweep: async () => undefined,
    lastQuota: async () => undefined,
    autoSweep: async () => undefined,
    storage: async () => {
      throw new RewindError(code, message)
    },
  }
}
