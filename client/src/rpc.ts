/**
 * The side-effect-free RPC channel to the host half:
 * `POST /dsh-rewind/api/<endpoint>` with a JSON body that always carries the
 * session id; the answer is `{ok:true, value}` or `{ok:false, error}`.
 *
 * Paths: the host sends each in the JSON form of `docs/format.md` (a string, or `{hex, lossy}`
 * for a name that is not valid UTF-8). This channel hands the pages every path as its exact
 * spelling (`hex:…` for such a name: see `shared/names.ts`), so two names alike on screen are
 * two keys, and turns a spelling back into the JSON form when a request names a file (the diff's
 * `path`, an undo's `choices`): the host gets the very name it listed, never the lossy form.
 */
import { isJsonPath, jsonPath, mapPathFields, spellingOfJson } from '../../shared/names.ts'

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
      body: JSON.stringify({ ...requestWithJsonPaths(extra), sessionId }),
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
  if (envelope.ok === true) return answerWithSpellings(envelope.value) as Endpoints[E][1]
  const error = envelope.error ?? {}
  throw new RpcError(
    typeof error.code === 'string' ? error.code : 'rewind/transport',
    typeof error.message === 'string' ? error.message : `HTTP ${response.status}`,
    error.details,
  )
}

/** A path of an answer as its spelling (anything that is not a path is left as it is). */
function toSpelling(p: unknown): unknown {
  return isJsonPath(p) ? spellingOfJson(p) : p
}

/**
 * An answer with every path as its exact spelling (a history's entries, each entry's `paths`).
 * @param value - the answer as the host sent it.
 * @returns the answer with its paths spelled.
 */
export function answerWithSpellings(value: unknown): unknown {
  const top = mapPathFields(value, toSpelling)
  const entries = (top as { entries?: unknown } | null)?.entries
  if (!Array.isArray(entries)) return top
  return {
    ...(top as object),
    entries: entries.map(e => typeof e === 'object' && e !== null && typeof (e as { paths?: unknown }).paths === 'object'
      ? { ...e, paths: mapPathFields((e as { paths: unknown }).paths, toSpelling) }
      : e),
  }
}

/**
 * A request with the files it names in the JSON path form: the diff's `path` and an undo's or
 * redo's `choices` (the pages hold spellings).
 * @param extra - the endpoint's request fields.
 * @returns the fields to send.
 */
export function requestWithJsonPaths<T>(extra: T): T {
  if (typeof extra !== 'object' || extra === null) return extra
  const out: Record<string, unknown> = { ...(extra as Record<string, unknown>) }
  if (typeof out.path === 'string') out.path = jsonPath(out.path)
  const choices = out.choices as { take?: unknown; keep?: unknown } | undefined
  if (typeof choices === 'object' && choices !== null) {
    const list = (v: unknown): unknown => Array.isArray(v) ? v.map(p => typeof p === 'string' ? jsonPath(p) : p) : v
    out.choices = {
      ...choices,
      ...(choices.take !== undefined ? { take: list(choices.take) } : {}),
      ...(choices.keep !== undefined ? { keep: list(choices.keep) } : {}),
    }
  }
  return out as T
}

/**
 * Paths a `rewind/stale-undo` refusal names (each its spelling), or [] for any other error.
 * @param error - caught error.
 * @returns the paths.
 */
export function stalePaths(error: unknown): string[] {
  if (!(error instanceof RpcError) || error.code !== 'rewind/stale-undo') return []
  const paths = (error.details as { paths?: unknown } | undefined)?.paths
  return Array.isArray(paths) ? paths.map(p => (isJsonPath(p) ? spellingOfJson(p) : typeof p === 'object' && p !== null && 'path' in p ? String(toSpelling((p as { path: unknown }).path)) : String(p))) : []
}
