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

/**
 * What each endpoint takes and answers, described once for the host and the client
 * (`shared/rpc-types.ts`, over the addon's generated typings).
 */
export type {
  Caps, DiffSide, Endpoints, FileDiff, History, HistoryEntry, Interrupted, Preview, PreviewFile,
  ResolveResult, RewindSettings, SettingsPatch, Storage, UndoChoices, UndoResult,
} from '../../shared/rpc-types.ts'
import type { Endpoints } from '../../shared/rpc-types.ts'

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
