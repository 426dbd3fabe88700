/**
 * Host steps shared by the rewind, the undo and redo, and the recovery: what they need from DSH
 * beyond the engine's calls (making the session log durable, re-syncing DSH's fs observations)
 * and the test seams of their crash order. Imports no concern of its own.
 */
import { writeSync } from 'node:fs'
import { realpath } from 'node:fs/promises'
import { join } from 'node:path'
import type { EnginePort } from './engine.ts'
import { Codes, RewindError } from './errors.ts'
import type { HostAgent, HostContext, HostFs, HostLogger, HostSession } from './host.ts'
import type { FilesPort } from './ports.ts'
import type { SettingsModel } from './settings.ts'
import type { SessionState } from './state.ts'
import type { HistoryPort } from './history.ts'
import type { Locale } from './locales.ts'
import { type CreateChildOptions, childComposition } from './fork.ts'
import { childLineage, eventsBetween } from './contract/session.ts'

/** Dependencies. */
export interface RewindDeps {
  ctx: HostContext
  state: SessionState
  files: () => FilesPort
  /** The engine: the undo, redo and recovery sequences. */
  engine: EnginePort
  history: HistoryPort
  settings: SettingsModel
  logger: HostLogger
  locale: () => Locale
  /** How long to wait for a cancelled turn to stop. */
  stopTimeoutMs: number
}

/**
 * Test seam of the crash order: when `DSH_REWIND_CRASH` names `point`, this process is killed
 * with SIGKILL right there (after a synchronous line on stderr naming the point), so the crash
 * tests can stop a real host at every step. A no-op otherwise.
 */
export function crashPoint(point: string): void {
  if (process.env.DSH_REWIND_CRASH !== point) return
  try {
    writeSync(2, `@@rewind-crash ${point}\n`)
  } finally {
    process.kill(process.pid, 'SIGKILL')
  }
}

/**
 * Test seam of the race tests: when a host test has set `globalThis.__dshPromptRewindTestPause`
 * (the tests boot DSH in their own process), the sequence waits for it at `point`, so a test can
 * change a file between two steps. A no-op otherwise.
 */
export async function testPause(point: string): Promise<void> {
  const hook = (globalThis as { __dshPromptRewindTestPause?: (point: string) => unknown }).__dshPromptRewindTestPause
  if (typeof hook === 'function') await hook(point)
}

/**
 * Make what the session log holds in memory durable: DSH's JSONL persistence batches appends
 * (up to `writeBatchMaxDelayMs`, 200 ms); `ctx.sessions.flush(session)` is DSH's own durability
 * checkpoint (the `session/flush` listeners drain and fsync). Without a session store nothing is
 * persisted, so there is nothing to wait for.
 */
export async function makeDurable(ctx: HostContext, session: HostSession): Promise<void> {
  const sessions = ctx.get('sessions') as { flush?(session: HostSession): Promise<boolean> } | undefined
  if (sessions === undefined || typeof sessions.flush !== 'function') return
  try {
    await sessions.flush(session)
  } catch (error) {
    throw new RewindError(Codes.flushFailed, `the session log could not be made durable: ${(error as Error).message}`)
  }
}

/**
 * The files DSH's fs observation policy holds an observation of, per session (the policy's
 * `fs/observed` event: `@deepseek-ai/dsh-fs-observation-policy` 0.1.0-rc.8 keeps one per owner
 * session and target key, the file's real path; an unseen target needs a read before an edit, and
 * a write to it only creates). Per host context, filled by {@link trackObservations}.
 */
const observedKeys = new WeakMap<object, Map<string, Set<string>>>()

/**
 * Listen to DSH's `fs/observed` so a restore re-syncs only what DSH observed. A host that refuses
 * the listener leaves every restored path re-synced, as before. Keyed by session id: the policy's
 * owner is the session object, which a newer host's session contract may wrap for the plugin.
 */
export function trackObservations(ctx: HostContext, logger: HostLogger): void {
  const keys = new Map<string, Set<string>>()
  try {
    ctx.on('fs/observed', (target: { targetKey?: unknown } | undefined, _observation: unknown, actor: { agent?: { session?: { header?: { id?: unknown } } } } | undefined) => {
      const id = actor?.agent?.session?.header?.id
      if (typeof id !== 'string' || typeof target?.targetKey !== 'string') return
      let set = keys.get(id)
      if (set === undefined) keys.set(id, set = new Set())
      set.add(target.targetKey)
    })
    observedKeys.set(ctx, keys)
  } catch (error) {
    logger.warn('fs observations are not tracked (every restored path is re-synced): %s', (error as Error).message)
  }
}

/**
 * Tell DSH's fs observation policy the new state of every restored or deleted path it holds an
 * observation of, so the next edit of such a file is judged against what is on disk now (not
 * refused as stale). A path DSH never observed is left unseen, as it was: re-observing it would
 * hand the agent an observation it never made, and cost a realpath and a stat per path for
 * nothing (the files a shell command made, often thousands).
 */
export async function resyncObservations(ctx: HostContext, session: HostSession, cwd: string, written: string[], deleted: string[], logger: HostLogger): Promise<void> {
  const fs = ctx.get('fs') as HostFs | undefined
  if (fs === undefined) return
  const agents = ctx.get('agents') as { get(id: string): HostAgent | undefined } | undefined
  const agent = agents?.get(session.header.id)
  const actor = { agent: agent ?? { session } }
  let paths = [...written, ...deleted]
  const tracked = observedKeys.get(ctx)
  if (tracked !== undefined && paths.length > 0) {
    const seen = tracked.get(session.header.id)
    if (seen === undefined || seen.size === 0) return
    // The target key of a restored path is its real path: the store never restores through a
    // symbolic link, so it is the real working directory joined with the path.
    let root: string
    try {
      root = await realpath(cwd)
    } catch {
      root = cwd
    }
    paths = paths.filter(p => seen.has(join(root, p)))
  }
  const one = async (path: string): Promise<void> => {
    try {
      const target = await fs.resolve(path, { cwd })
      const info = await fs.stat(target)
      ctx.emit('fs/observed', target, info === undefined ? { kind: 'absent' } : { kind: 'present', version: info.version }, actor)
    } catch (error) {
      logger.debug('observation re-sync of %s skipped: %s', path, (error as Error).message)
    }
  }
  // Many paths at once (each is a realpath and a stat on the host's thread pool).
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < paths.length) await one(paths[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(RESYNC_CONCURRENCY, paths.length) }, worker))
}

/** How many paths the observation re-sync works on at once. */
const RESYNC_CONCURRENCY = 64

/**
 * What `agents.create` takes for a new session seeded with `agent`'s session log before `end` (a
 * fork's child, an undo's continuation): the same working directory and agent preset, its
 * lineage as `contract/session.ts` spells it, the agent's options and the composition's setup.
 */
export async function childOptions(ctx: HostContext, agent: HostAgent, childId: string, end: number): Promise<CreateChildOptions> {
  const session = agent.session
  const seed = eventsBetween(session, 0, end)
  const lineage = childLineage(session, seed.length)
  const cwd = session.header.cwd
  const composition = await childComposition(ctx, session)
  return {
    sessionId: childId,
    seed,
    meta: {
      ...(typeof cwd === 'string' && cwd !== '' ? { cwd } : {}),
      ...lineage.meta,
      ...(composition.agentPreset !== undefined ? { agentPreset: composition.agentPreset } : {}),
    },
    ...(lineage.inheritedEventCount !== undefined ? { inheritedEventCount: lineage.inheritedEventCount } : {}),
    agentOptions: (agent as { options?: unknown }).options,
    ...(composition.setup !== undefined ? { setup: composition.setup } : {}),
  }
}
