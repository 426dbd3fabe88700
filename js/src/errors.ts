/**
 * The one error shape the plugin reports: `{code, message, details}` with the stable codes of
 * the engine (`rewind/...`, `crates/engine/src/codes.rs`). Native errors arrive as JS errors carrying `code` and
 * `details`; anything else becomes `rewind/failed`.
 */

/** Stable codes the host itself raises (the native layer raises the rest). */
export const Codes = {
  badRequest: 'rewind/bad-request',
  agentsUnavailable: 'rewind/agents-unavailable',
  sessionNotFound: 'rewind/session-not-found',
  unknownEntry: 'rewind/unknown-entry',
  undoCrossWorkspace: 'rewind/undo-cross-workspace',
  undoOtherSession: 'rewind/undo-other-session',
  alreadyUndone: 'rewind/already-undone',
  notUndoable: 'rewind/not-undoable',
  staleUndo: 'rewind/stale-undo',
  undoFailed: 'rewind/undo-failed',
  unknownEndpoint: 'rewind/unknown-endpoint',
  failed: 'rewind/failed',
  nativeUnavailable: 'rewind/native-unavailable',
  badTarget: 'rewind/bad-target',
  inFlight: 'rewind/in-flight',
  stopFailed: 'rewind/stop-failed',
  storeNewer: 'rewind/store-newer',
  storeCorrupt: 'rewind/store-corrupt',
  backupsOff: 'rewind/backups-off',
  restoreFailed: 'rewind/restore-failed',
  subagentSession: 'rewind/subagent-session',
  forkInsideTurn: 'rewind/fork-inside-turn',
  forkSourceNotLive: 'rewind/fork-source-not-live',
  interrupted: 'rewind/interrupted',
  historyCorrupt: 'rewind/history-corrupt',
  flushFailed: 'rewind/flush-failed',
  badSelection: 'rewind/bad-selection',
  notPlanned: 'rewind/not-planned',
  notRedoable: 'rewind/not-redoable',
  hostUnsupported: 'rewind/host-unsupported',
} as const

/** A failure with a stable code. */
export class RewindError extends Error {
  override readonly name = 'RewindError'
  constructor(
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message)
  }

  /** The wire shape. */
  toJSON(): { code: string; message: string; details: Record<string, unknown> } {
    return { code: this.code, message: this.message, details: this.details }
  }
}

/**
 * Normalize anything thrown into a {@link RewindError}. A native error keeps its stable code and
 * details; a foreign error becomes `fallback` (default `rewind/failed`) with its message.
 */
export function toRewindError(error: unknown, fallback: string = Codes.failed): RewindError {
  if (error instanceof RewindError) return error
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code
    const details = (error as { details?: unknown }).details
    if (typeof code === 'string' && code.startsWith('rewind/')) {
      return new RewindError(code, error.message, isRecord(details) ? jsonSafe(details) : {})
    }
    return new RewindError(fallback, error.message)
  }
  return new RewindError(fallback, String(error))
}

/** Details as plain JSON (a `BigInt` becomes a number). */
function jsonSafe(value: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))) as Record<string, unknown>
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
