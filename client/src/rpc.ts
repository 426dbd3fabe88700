/**
 * The side-effect-free RPC channel to the host half:
 * `POST /dsh-rewind/api/<endpoint>` with a JSON body that always carries the
 * session id; the answer is `{ok:true, value}` or `{ok:false, error}`.
 */

/** A refusal or failure reported by the host (or by the transport). */
export class RpcError extends Error {
  /** Stable code such as `rewind/stale-undo`, or `rewind/transport` for network/HTTP problems. */
  readonly code: string
  /** Structured details (e.g. `paths` for `rewind/stale-undo`). */
  readonly details: unknown
  constructor(code: string, message: string, details?: unknown) {
    super(message)
    this.name = 'RpcError'
    this.code = code
    this.details = details
  }
}

/** One file of the preview: its action, `+added / −removed` lines when known, and who made the change it undoes. */
export interface PreviewFile {
  readonly path: string
  readonly action: 'write' | 'delete' | 'create'
  readonly added?: number | null
  readonly removed?: number | null
  /** Absent from hosts of older builds (then: the agent). */
  readonly origin?: 'agent' | 'outside' | 'other-session'
  readonly originSession?: string | null
}
/** One side of a file diff. */
export interface DiffSide {
  readonly state: 'absent' | 'text' | 'binary' | 'too-large' | 'too-many-lines' | 'not-regular' | 'unreadable' | 'missing-backup' | 'corrupt-backup'
  readonly size?: number | null
  readonly lines?: number | null
  readonly sha256?: string | null
  readonly message?: string | null
}
/** `diff` answer: the unified hunks (now → after the rewind) when both sides are text, else each side summarized. */
export interface FileDiff {
  readonly path: string
  readonly action: 'write' | 'delete' | 'create'
  readonly now: DiffSide
  readonly then: DiffSide
  readonly added?: number | null
  readonly removed?: number | null
  readonly unified?: string | null
  readonly truncated: boolean
}
/** `preview` answer. */
export interface Preview {
  readonly targetSeq: number
  readonly files: readonly PreviewFile[]
  readonly uncovered: readonly string[]
  readonly skipped: readonly { readonly path: string; readonly reason: string }[]
  /** Files changed since the target only outside the agent's tool calls: left as they are. */
  readonly outside?: readonly string[]
  /** What the workspace scan does not cover, with why. */
  readonly notCovered?: readonly { readonly path: string; readonly reason: string }[]
  readonly backupOff: boolean
  readonly storeUnavailable?: string
}
/** One history entry. */
export interface HistoryEntry {
  readonly opId: string
  readonly sessionId: string
  readonly targetSeq: number
  readonly time: number
  readonly outcome: 'done' | 'partial' | 'failed' | 'started' | 'rolled-back' | 'abandoned'
  readonly restored: number
  readonly deleted: number
  readonly skipped: number
  readonly failed: number
  readonly paths?: unknown
  readonly undoneAt?: number
  readonly undoOutcome?: string
  readonly undoMode?: string
  readonly undoStartedAt?: number
  readonly undoable: boolean
  readonly fork?: { readonly childSessionId: string }
  /** Planned files the user kept as they were (absent from older entries). */
  readonly kept?: number
  /** The target message's text and the workspace's folder name (absent from older entries). */
  readonly targetText?: string | null
  readonly workspaceName?: string | null
  /** The session the conversation before the rewind continues in, once undone. */
  readonly undoSessionId?: string | null
  /**
   * Seq of the marker the rewind appended to this session (absent from hosts that do not send
   * it, and for forks): lets a page without a client event registry hide the rewound rows.
   */
  readonly markerSeq?: number | null
  /** On a redo: the undone rewind it did again. */
  readonly redoOf?: string | null
  /** An undone rewind this session may do again (absent from hosts of older builds). */
  readonly redoable?: boolean
}
/** `history` answer; `damaged` when history.json is damaged (the entries are what could be read). */
export interface History {
  readonly workspace: string
  /** The workspace's folder name (absent from hosts of older builds). */
  readonly workspaceName?: string
  readonly entries: readonly HistoryEntry[]
  readonly damaged?: { readonly code: string; readonly detail: string; readonly dropped: number }
}
/** One interrupted rewind (or undo) a restart found (`interrupted` answer). */
export interface Interrupted {
  readonly opId: string
  readonly kind: 'rewind' | 'fork' | 'undo'
  readonly targetSeq: number
  readonly time: number
  readonly journal: string
  readonly conversation: boolean
  readonly childSessionId?: string
  readonly restore?: { readonly actions: number; readonly done: number; readonly failed?: number }
  readonly error?: { readonly code: string; readonly message: string }
  /** Not interrupted: the rewind ran to its end but could not restore some files; its restore stays open. */
  readonly partial?: true
  /** The target message's text (absent from hosts that do not send it: the banner then reads it from the chat, or names the seq). */
  readonly targetText?: string | null
}
/** What continuing or rolling back did. */
export interface ResolveResult {
  readonly written: readonly string[]
  readonly deleted: readonly string[]
  readonly failed: readonly { readonly path: string; readonly message: string }[]
  readonly entryOutcome?: string
  readonly tempsRemoved?: readonly string[]
}
/** `undo` answer: the files, and where the conversation as it was before the rewind is. */
export interface UndoResult {
  readonly kind: 'ok' | 'partial'
  readonly restored: readonly string[]
  readonly deleted: readonly string[]
  readonly failed: readonly { readonly path: string; readonly message: string }[]
  /** Files changed since the rewind that the undo left as they are, as chosen. */
  readonly kept?: readonly string[]
  /** A new session seeded up to the rewind (`created`), or the fork's unchanged parent. */
  readonly conversation?: { readonly sessionId: string; readonly created: boolean } | null
}
/** Per file changed since the rewind: take the version from before it, or keep it as it is. */
export interface UndoChoices { take?: string[]; keep?: string[] }
/** `caps` answer. */
export interface Caps { readonly history: boolean; readonly undo: boolean; readonly fileCheckpointing: boolean; readonly backups: boolean }
/** The one settings model (`settings` / `settings.update`). */
export interface RewindSettings {
  readonly backups: boolean
  readonly maxFileBytes: number
  /** Track every change (shell commands too); absent from hosts of older builds. */
  readonly trackAll?: boolean
  readonly historyLimit: number
  /** `maxSizeBytes` (the size quota, `0` = none) is absent from hosts of older builds. */
  readonly cleanup: { readonly enabled: boolean; readonly maxAgeDays: number; readonly maxSizeBytes?: number }
  /** False when the host has no settings service (the values are then read-only). */
  readonly persistent?: boolean
}
/** A partial settings update. */
export interface SettingsPatch {
  backups?: boolean
  trackAll?: boolean
  historyLimit?: number
  cleanup?: { enabled?: boolean; maxAgeDays?: number; maxSizeBytes?: number }
}

/** `storage` answer: how much the snapshot backups take (bytes). */
export interface Storage {
  /** The workspace (history partition) the figures are about. */
  readonly workspace: string
  /** The whole store: every session, every workspace scan state, every backup counted once. */
  readonly totalBytes: number
  readonly unreferencedBytes: number
  readonly sessions: number
  /** This workspace: its sessions' records, its scan state, the backups only it uses. */
  readonly workspaceBytes: number
  /** Backups this workspace uses that other workspaces use too (counted in `totalBytes` only). */
  readonly workspaceSharedBytes: number
  readonly workspaceSessions: number
  readonly biggest: readonly { readonly sessionId: string; readonly bytes: number; readonly ownBytes: number; readonly lastActivity: number; readonly inWorkspace: boolean }[]
  /** Records that could not be read: the figures are lower bounds. */
  readonly problems: number
  readonly quota: { readonly enabled: boolean; readonly maxSizeBytes: number }
  readonly lastSweep: {
    readonly at: number
    readonly trigger: string
    readonly removed: number
    readonly bytes: number
    readonly quota?: { readonly maxBytes: number; readonly removed: number; readonly freed: number; readonly bytesAfter: number }
  } | null
}

/** Endpoint → [request extras, answer]. */
export interface Endpoints {
  preview: [{ seq: number }, Preview]
  diff: [{ seq: number; path: string }, FileDiff]
  candidates: [Record<string, never>, { candidates: import('./picker.ts').Candidate[] }]
  history: [Record<string, never>, History]
  'history.clear': [Record<string, never>, { cleared: number }]
  undo: [{ opId: string; choices?: UndoChoices }, UndoResult]
  redo: [{ opId: string; choices?: UndoChoices }, UndoResult & { readonly opId: string }]
  caps: [Record<string, never>, Caps]
  storage: [Record<string, never>, Storage]
  settings: [Record<string, never>, RewindSettings]
  'settings.update': [{ patch: SettingsPatch }, RewindSettings]
  interrupted: [Record<string, never>, { interrupted: readonly Interrupted[] }]
  'restores.continue': [{ opId: string }, ResolveResult]
  'restores.rollback': [{ opId: string }, ResolveResult]
  /** The host's compatibility report; checked by `parseDoctorReport` (client/src/doctor.ts). */
  doctor: [Record<string, never>, unknown]
}

/** Path prefix of the host's route. */
export const RPC_PREFIX = '/dsh-rewind/api/'

/**
 * Call one endpoint.
 * @param endpoint - endpoint name.
 * @param sessionId - the session the request is about.
 * @param extra - endpoint-specific body fields.
 * @returns the value.
 * @throws RpcError on a refusal, a non-JSON answer or a network failure.
 */
export async function rpc<E extends keyof Endpoints>(endpoint: E, sessionId: string, extra: Endpoints[E][0]): Promise<Endpoints[E][1]> {
  let response: Response
  try {
    response = await fetch(RPC_PREFIX + endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...extra, sessionId }),
      credentials: 'same-origin',
    })
  } catch (error) {
    throw new RpcError('rewind/transport', String((error as Error)?.message ?? error))
  }
  let body: unknown
  try {
    body = await response.json()
  } catch {
    throw new RpcError('rewind/transport', `HTTP ${response.status} without a JSON body`)
  }
  const envelope = body as { ok?: unknown; value?: unknown; error?: { code?: unknown; message?: unknown; details?: unknown } }
  if (envelope.ok === true) return envelope.value as Endpoints[E][1]
  const error = envelope.error ?? {}
  throw new RpcError(
    typeof error.code === 'string' ? error.code : 'rewind/transport',
    typeof error.message === 'string' ? error.message : `HTTP ${response.status}`,
    error.details,
  )
}

/**
 * Paths a `rewind/stale-undo` refusal names, or [] for any other error.
 * @param error - caught error.
 * @returns the paths.
 */
export function stalePaths(error: unknown): string[] {
  if (!(error instanceof RpcError) || error.code !== 'rewind/stale-undo') return []
  const paths = (error.details as { paths?: unknown } | undefined)?.paths
  return Array.isArray(paths) ? paths.map(p => (typeof p === 'string' ? p : typeof p === 'object' && p !== null && 'path' in p ? String((p as { path: unknown }).path) : String(p))) : []
}
