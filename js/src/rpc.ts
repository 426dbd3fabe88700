/**
 * The side-effect-free RPC surface for the browser client: `POST /dsh-rewind/api/<endpoint>`
 * with a JSON body, registered on DSH's web server. Every response is HTTP 200 with
 * `{ok:true, value}` or `{ok:false, error:{code, message, details}}` (403 for a foreign
 * Host/Origin, 405 for another method). Every body must carry a non-empty `sessionId`; the live
 * agent is resolved host-side and the workspace partition is derived from it.
 */
import { forkAncestors } from './fork.ts'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { basename } from 'node:path'
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostAgents } from './host.ts'
import type { CleanupPort, UndoChoices } from './ports.ts'
import type { SettingsPatch } from './settings.ts'
import { partitionKey, workspaceSessions } from './history.ts'
import { type Rewinder, candidates, settleJournal } from './rewind.ts'
import { step } from './engine.ts'
import { gitReport } from './rewind-files.ts'
import { trackedCwd } from './capture.ts'
import { addonAvailable } from './native.ts'
import type { Health } from './contract/guard.ts'
import { type DoctorDeps, doctor } from './contract/doctor.ts'
import { eventsOf } from './contract/session.ts'
import { readBody, send, trustedRequest } from './rpc-route.ts'
import type { RewindDeps } from './host-steps.ts'
import type { Endpoints, ResolveResult, UndoResult } from '../../shared/rpc-types.ts'
import { jsonPath, mapPathFields, spellingOfRequest } from '../../shared/names.ts'

/** The route prefix. */
export const RPC_PREFIX = '/dsh-rewind/api'

/** Dependencies: the rewind's own, and what only the endpoints need. */
export interface RpcDeps extends Pick<RewindDeps, 'ctx' | 'state' | 'files' | 'engine' | 'history' | 'settings' | 'logger'> {
  /** The rewind: its preview, and the settling of interrupted rewinds (reconcile, continue, roll back). */
  rewinder: Rewinder
  /** Faults contained at the host boundary and missing host contracts (`doctor`). */
  health?: Health
  /** What the `doctor` endpoint checks. */
  doctor?: DoctorDeps
  /** The snapshot cleanup (the `storage` figures). */
  cleanup?: () => CleanupPort
}

/** Sessions listed among the biggest by `storage`. */
export const STORAGE_TOP = 5

export { type ServedAt, trustedRequest } from './rpc-route.ts'

type Body = Record<string, unknown> & { sessionId: string }
type Handler = (agent: HostAgent, body: Body) => Promise<unknown>

/**
 * The `choices` of an `undo` request: two optional lists of workspace-relative paths, each in the
 * JSON path form of `docs/format.md` (a string, or `{hex, lossy}` for a name that is not UTF-8,
 * `hex` deciding), handed on as exact spellings.
 */
function undoChoicesOf(raw: unknown): UndoChoices {
  if (raw === undefined || raw === null) return {}
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new RewindError(Codes.badRequest, '`choices` must be an object {take?, keep?}')
  const list = (v: unknown, name: string): string[] | undefined => {
    if (v === undefined) return undefined
    const spelled = Array.isArray(v) ? v.map(spellingOfRequest) : undefined
    if (spelled === undefined || spelled.some(p => p === undefined)) throw new RewindError(Codes.badRequest, `\`choices.${name}\` must be a list of paths (strings or {hex, lossy})`)
    return spelled as string[]
  }
  const { take, keep } = raw as { take?: unknown; keep?: unknown }
  const t = list(take, 'take')
  const k = list(keep, 'keep')
  return { ...(t !== undefined ? { take: t } : {}), ...(k !== undefined ? { keep: k } : {}) }
}

/**
 * An answer with its paths in the JSON path form of `docs/format.md`: the addon hands them over
 * spelled exactly (`hex:…` for a name that is not valid UTF-8); the client gets a string, or
 * `{hex, lossy}` it can show and send back as it is.
 */
export function withJsonPaths<T>(value: T): T {
  return mapPathFields(value, p => typeof p === 'string' ? jsonPath(p) : p)
}

/** Each endpoint's handler answers with the shape `shared/rpc-types.ts` gives the client. */
type TypedEndpoints = { [E in keyof Endpoints]: (agent: HostAgent, body: Body) => Promise<Endpoints[E][1]> }

/** Build the endpoint table. */
export function endpoints(deps: RpcDeps): Record<string, Handler> & TypedEndpoints {
  const { ctx, files, history, settings, state } = deps

  async function finishInterrupted(agent: HostAgent, body: Body, how: 'continue' | 'rollback'): Promise<ResolveResult> {
    const opId = body.opId
    if (typeof opId !== 'string' || opId === '') throw new RewindError(Codes.badRequest, '`opId` must be a non-empty string')
    const session = agent.session
    const cwd = trackedCwd(session)
    const port = files()
    const unavailable = port.unavailable()
    if (cwd === undefined || unavailable !== undefined) throw new RewindError(Codes.notUndoable, `file restore is unavailable for this session${unavailable ? `: ${unavailable.message}` : ''}`)
    const sessionId = session.header.id
    if (state.rewinding(sessionId)) throw new RewindError(Codes.inFlight, 'a rewind of this session is running')
    // An interrupted rewind (its history entry `started`) is settled as a whole: files, temp
    // files and the history entry (see Rewinder.resolve).
    const interrupted = await deps.rewinder.reconcile(agent)
    if (interrupted.some(i => i.opId === opId)) {
      const report = await deps.rewinder.resolve(agent, opId, how)
      return withJsonPaths({ ...report.outcome, entryOutcome: report.entryOutcome, tempsRemoved: report.tempsRemoved })
    }
    // A journal left open by a rewind that is over (a `partial` one): the engine finishes or
    // rolls it back, removes the temp files and updates the history entry.
    return withJsonPaths((await settleJournal({ ctx, engine: deps.engine, state, logger: deps.logger }, session, opId, how)).outcome)
  }
  /** `undo` / `redo`: the files' outcome at the top level, the op id, and where the conversation is. */
  async function undoOrRedo(agent: HostAgent, body: Body, how: 'undo' | 'redo'): Promise<UndoResult & { opId: string }> {
    const opId = body.opId
    if (typeof opId !== 'string' || opId === '') throw new RewindError(Codes.badRequest, '`opId` must be a non-empty string')
    const choices = undoChoicesOf(body.choices)
    const report = how === 'undo' ? await deps.rewinder.undoer.undo(agent, opId, choices) : await deps.rewinder.undoer.redo(agent, opId, choices)
    return withJsonPaths({ ...report.files, opId: report.opId, kind: report.kind, conversation: report.conversation ?? null, ...(report.changedDuring !== undefined ? { changedDuring: report.changedDuring } : {}), ...(report.git !== undefined ? { git: report.git } : {}) })
  }
  return {
    async preview(agent, body) {
      const seq = body.seq
      if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
        throw new RewindError(Codes.badRequest, '`seq` must be a non-negative integer')
      }
      const backupOff = !settings.get().backups
      // The rewind's own preview sequence (`RewindFiles.previewOf`): pending changes recorded,
      // the plan through the fork chain, another conversation's running command told apart, git.
      const { files: preview, git, unavailable } = await deps.rewinder.files.previewOf(agent, seq)
      if (unavailable !== undefined) {
        return { targetSeq: seq, files: [], uncovered: [], skipped: [], outside: [], notCovered: [], unreadable: [], gitObjectGone: [], backupOff, storeUnavailable: `${unavailable.code}: ${unavailable.message}` }
      }
      // Paths in the JSON form: a name that is not UTF-8 as `{hex, lossy}`, so each can be chosen.
      return withJsonPaths({ targetSeq: seq, ...preview, backupOff, ...(git !== undefined ? { git } : {}) })
    },

    async diff(agent, body) {
      const seq = body.seq
      if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
        throw new RewindError(Codes.badRequest, '`seq` must be a non-negative integer')
      }
      // A string, or `{hex, lossy}` for a name that is not UTF-8 (as the preview lists it).
      const path = spellingOfRequest(body.path)
      if (path === undefined) throw new RewindError(Codes.badRequest, '`path` must be a non-empty string or {hex, lossy}')
      const cwd = trackedCwd(agent.session)
      const port = files()
      const unavailable = cwd === undefined ? { code: Codes.notPlanned, message: 'the session has no working directory' } : port.unavailable()
      if (unavailable !== undefined) throw new RewindError(unavailable.code, unavailable.message)
      const sessionId = agent.session.header.id
      const ancestors = await forkAncestors(ctx, agent.session.header, agent.session)
      return withJsonPaths(await state.run(sessionId, () => port.diff(sessionId, cwd!, seq, path, ancestors)))
    },

    async candidates(agent) {
      return { candidates: candidates(agent.session) }
    },

    async history(agent) {
      const key = await partitionKey(ctx, agent.session)
      // A damaged history.json still lists what can be read, and says it is damaged.
      const { entries, damaged } = await history.listChecked(key)
      // What this session may do with each entry: the engine's undo and redo rules.
      let actions = new Map<string, { undoable: boolean; redoable: boolean }>()
      try {
        const es = await deps.engine.session(agent.session)
        actions = new Map((await step(() => es.entryActions())).map(a => [a.opId, a]))
      } catch (error) {
        deps.logger.warn('undo and redo of the history entries not judged: %s', (error as Error).message)
      }
      // Where each of this session's markers sits in its log (the client hides the rewound rows
      // by it where the page has no event registry).
      const markers = new Map<string, number>()
      try {
        for (const e of eventsOf(agent.session)) {
          const id = e.type === 'user/message' ? (e.data as { id?: unknown } | undefined)?.id : undefined
          if (typeof id === 'string') markers.set(id, e.seq)
        }
      } catch {
        // A log this host does not let the plugin read: no marker positions.
      }
      // What each rewind did to the workspace's git repository (docs/git.md), when it changed any.
      const gits = new Map<string, Awaited<ReturnType<typeof gitReport>>>()
      try {
        const es = await deps.engine.session(agent.session)
        for (const entry of entries) gits.set(entry.opId, await gitReport(es, entry.sessionId, entry.opId))
      } catch (error) {
        deps.logger.warn('git reports of the history entries not read: %s', (error as Error).message)
      }
      const out = entries.map(entry => ({
        ...entry,
        ...(gits.get(entry.opId) !== undefined ? { git: gits.get(entry.opId) } : {}),
        // The history keeps paths spelled exactly; the client gets the JSON form.
        ...(entry.paths != null ? { paths: withJsonPaths(entry.paths) } : {}),
        markerSeq: entry.markerId != null ? markers.get(entry.markerId) ?? null : null,
        undoable: actions.get(entry.opId)?.undoable ?? false, redoable: actions.get(entry.opId)?.redoable ?? false,
      }))
      const cwdName = typeof agent.session.header.cwd === 'string' && agent.session.header.cwd !== '' ? basename(agent.session.header.cwd) : undefined
      return { workspace: key, ...(cwdName !== undefined ? { workspaceName: cwdName } : {}), entries: out, ...(damaged != null ? { damaged: { code: Codes.historyCorrupt, detail: damaged.detail, dropped: damaged.dropped } } : {}) }
    },

    async 'history.clear'(agent) {
      const key = await partitionKey(ctx, agent.session)
      return { cleared: await history.clear(key) }
    },

    async undo(agent, body) {
      return await undoOrRedo(agent, body, 'undo')
    },

    async redo(agent, body) {
      return await undoOrRedo(agent, body, 'redo')
    },

    async interrupted(agent) {
      // The interrupted rewinds first, then those that could not restore some files.
      return { interrupted: [...await deps.rewinder.reconcile(agent), ...await deps.rewinder.partials(agent)] }
    },

    async restores(agent) {
      const cwd = trackedCwd(agent.session)
      const port = files()
      if (cwd === undefined || port.unavailable() !== undefined) return { restores: [] }
      const sessionId = agent.session.header.id
      return { restores: await state.run(sessionId, () => port.restoreStatuses(sessionId, cwd)) }
    },

    async 'restores.continue'(agent, body) {
      return await finishInterrupted(agent, body, 'continue')
    },

    async 'restores.rollback'(agent, body) {
      return await finishInterrupted(agent, body, 'rollback')
    },

    async caps(agent) {
      const s = settings.get()
      const port = files()
      const fileCheckpointing = port.unavailable() === undefined && trackedCwd(agent.session) !== undefined
      return { history: addonAvailable(), undo: fileCheckpointing, fileCheckpointing: fileCheckpointing && s.backups, backups: s.backups }
    },

    async storage(agent) {
      const s = settings.get()
      const cleanup = deps.cleanup?.()
      const unavailable = cleanup?.unavailable()
      if (cleanup === undefined || unavailable !== undefined) throw new RewindError(unavailable?.code ?? Codes.failed, `storage figures are unavailable${unavailable ? `: ${unavailable.message}` : ''}`)
      const { key, members, cwds } = await workspaceSessions(ctx, agent.session)
      const report = await cleanup.storage({ members, cwds, top: STORAGE_TOP })
      const last = await cleanup.lastSweep().catch(() => undefined)
      const lastQuota = await cleanup.lastQuota().catch(() => undefined)
      return {
        workspace: key,
        ...report,
        // The quota is enforced whenever it is set, whatever the age rule's switch.
        quota: { enabled: s.cleanup.maxSizeBytes > 0, maxSizeBytes: s.cleanup.maxSizeBytes },
        lastSweep: last ?? null,
        // What the size quota removed last, and when.
        lastQuota: lastQuota ?? null,
        // How this session's latest workspace scan looked at the workspace (change watcher or
        // full walk, and why).
        scan: state.lastScan.get(agent.session.header.id) ?? null,
      }
    },

    async doctor(agent) {
      if (deps.doctor === undefined) throw new RewindError(Codes.failed, 'the doctor is not wired on this host')
      return doctor(deps.doctor, agent.session)
    },

    async settings() {
      const s = settings.get()
      return { backups: s.backups, maxFileBytes: s.maxFileBytes, trackAll: s.trackAll, maxBaselineBytes: s.maxBaselineBytes, maxFiles: s.maxFiles, historyLimit: s.historyLimit, cleanup: { ...s.cleanup }, persistent: settings.persistent }
    },

    async 'settings.update'(_agent, body) {
      const patch = body.patch
      if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
        throw new RewindError(Codes.badRequest, '`patch` must be an object')
      }
      let next
      try {
        next = await settings.update(patch as SettingsPatch)
      } catch (error) {
        // A range refusal keeps its field and range in the details.
        if (error instanceof RewindError) throw error
        throw new RewindError(Codes.badRequest, (error as Error).message)
      }
      return { backups: next.backups, maxFileBytes: next.maxFileBytes, trackAll: next.trackAll, maxBaselineBytes: next.maxBaselineBytes, maxFiles: next.maxFiles, historyLimit: next.historyLimit, cleanup: { ...next.cleanup }, persistent: settings.persistent }
    },
  }
}

/** Handle one request (exported for tests that call it without a server). */
export async function dispatch(deps: RpcDeps, endpoint: string, raw: unknown): Promise<{ ok: true; value: unknown } | { ok: false; error: { code: string; message: string; details: Record<string, unknown> } }> {
  try {
    const table = endpoints(deps)
    if (!Object.hasOwn(table, endpoint)) throw new RewindError(Codes.unknownEndpoint, `unknown endpoint "${endpoint}"`)
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new RewindError(Codes.badRequest, 'body must be a JSON object')
    const body = raw as Record<string, unknown>
    if (typeof body.sessionId !== 'string' || body.sessionId === '') throw new RewindError(Codes.badRequest, '`sessionId` must be a non-empty string')
    const agents = deps.ctx.get('agents') as HostAgents | undefined
    if (agents === undefined) throw new RewindError(Codes.agentsUnavailable, 'this host has no agent registry')
    const agent = agents.get(body.sessionId)
    if (agent === undefined) throw new RewindError(Codes.sessionNotFound, `no live session "${body.sessionId}"`)
    const value = await table[endpoint]!(agent, body as Body)
    return { ok: true, value }
  } catch (error) {
    return { ok: false, error: toRewindError(error).toJSON() }
  }
}

/** Register the HTTP route when the host has a web server (optional service). */
export function registerRpc(deps: RpcDeps): void {
  deps.ctx.inject(['webServer'], (sub) => {
    const server = sub.webServer!
    sub.effect(() => server.register({
      kind: 'prefix',
      path: RPC_PREFIX,
      handler: async (req, res) => {
        try {
          await handle(req, res)
        } catch (error) {
          // Never let a fault of the route reach the host's server: answer it, once.
          deps.health?.fault('rpc', error)
          if (!res.headersSent) send(res, 500, { ok: false, error: toRewindError(error).toJSON() })
          else res.destroy()
        }
      },
    }), 'dsh-rewind rpc route')
    async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
        if (!trustedRequest(req, { port: server.port, host: server.host, protocol: server.protocol })) {
          send(res, 403, { ok: false, error: { code: Codes.badRequest, message: 'foreign Host or Origin', details: {} } })
          return
        }
        if (req.method !== 'POST') {
          res.setHeader('allow', 'POST')
          send(res, 405, { ok: false, error: { code: Codes.badRequest, message: 'use POST', details: {} } })
          return
        }
        // A JSON content type cannot be sent cross-origin without a preflight (which this route
        // never grants), so a page elsewhere cannot make a browser post here.
        if (!/^application\/json\s*(;|$)/i.test(String(req.headers['content-type'] ?? ''))) {
          send(res, 415, { ok: false, error: { code: Codes.badRequest, message: 'content-type must be application/json', details: {} } })
          return
        }
        const url = new URL(req.url ?? '/', 'http://localhost')
        const endpoint = url.pathname.slice(RPC_PREFIX.length).replace(/^\/+/, '')
        let body: unknown
        try {
          body = await readBody(req)
        } catch (error) {
          send(res, 200, { ok: false, error: toRewindError(error).toJSON() })
          return
        }
        send(res, 200, await dispatch(deps, endpoint, body))
    }
  })
}
