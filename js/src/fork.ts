/**
 * Fork lineage: the ancestors of a forked session as the snapshot store reads them, and the DSH
 * surfaces a fork rewind uses to create the child (the agent registry's `create` with the
 * parent's prefix as the seed, as DSH's own `session.fork` RPC does).
 */
import type { HostAgent, HostContext, HostSession, HostSessionHeader } from './host.ts'
import type { ChainLink } from './ports.ts'
import { inheritedCount } from './contract/session.ts'

/** Longest chain followed (a deeper lineage keeps its nearest ancestors only). */
export const MAX_CHAIN = 64

/** The session store subset (`ctx.sessions`). */
export interface HostSessions {
  get(id: string): HostSession | undefined
}

/** The session persistence subset (`ctx.sessionPersistence`). */
export interface HostSessionPersistence {
  list(signal?: AbortSignal): Promise<HostSessionHeader[]>
}

/** What `agents.create` takes for a fork child. */
export interface CreateChildOptions {
  sessionId: string
  seed: readonly unknown[]
  meta: { cwd?: string; parentSession: string; seedLength?: number; isSeeded?: boolean; agentPreset?: string }
  /** Format 2+: the inherited prefix's length beside `meta.isSeeded` (`contract/session.ts`). */
  inheritedEventCount?: number
  agentOptions?: unknown
  setup?: (agentCtx: unknown) => Promise<void> | void
}

/** The agent registry with the factory. */
export interface HostAgentFactory {
  get(id: string): HostAgent | undefined
  create(options: CreateChildOptions): Promise<{ agent: HostAgent; dispose(): Promise<void> }>
}

/** DSH's agent presets service (web product), when present. */
interface HostAgentPresets {
  resolve(id: string | undefined): Promise<{ id: string }>
  mount(agentCtx: unknown, id: string): Promise<void>
}

/** A workspace of DSH's registry, with the attach the fork needs. */
interface HostWorkspace {
  id: string
  sessionIds?: readonly string[]
  attachSession?(id: string): Promise<void>
}

/** The live session of an id, when this host has it. */
function liveSession(ctx: HostContext, id: string): HostSession | undefined {
  try {
    return (ctx.get('sessions') as HostSessions | undefined)?.get(id)
  } catch {
    return undefined
  }
}

/** The header of a session: live first, else as persisted; `undefined` when unknown. */
async function headerOf(ctx: HostContext, id: string, persisted: { list?: HostSessionHeader[] }): Promise<HostSessionHeader | undefined> {
  const live = (ctx.get('sessions') as HostSessions | undefined)?.get(id)
  if (live !== undefined) return live.header
  const persistence = ctx.get('sessionPersistence') as HostSessionPersistence | undefined
  if (persistence === undefined || typeof persistence.list !== 'function') return undefined
  try {
    persisted.list ??= await persistence.list()
  } catch {
    return undefined
  }
  return persisted.list.find(h => h.id === id)
}

/**
 * Whether a session exists: live in this host, or listed by DSH's session persistence (a fork
 * child created before a crash). Without a persistence service only live sessions count.
 */
export async function sessionExists(ctx: HostContext, id: string): Promise<boolean> {
  return (await headerOf(ctx, id, {})) !== undefined
}

/**
 * The fork chain of a session, nearest parent first: each parent named by a header's
 * `parentSession`, limited to the boundary `n - 1` where `n` is the inherited prefix (DSH seeds a
 * child with the parent's events `0..n-1`, same seqs; rc.8 names `n` `seedLength` in the header,
 * format 2+ keeps it on the live session, see `inheritedCount`). The walk stops at a session
 * whose header is unknown (not live and not persisted), whose inherited count cannot be read, at
 * a repeated id, or after {@link MAX_CHAIN} links.
 */
export async function forkAncestors(ctx: HostContext, header: HostSessionHeader, live?: HostSession): Promise<ChainLink[]> {
  const links: ChainLink[] = []
  const seen = new Set<string>([header.id])
  const persisted: { list?: HostSessionHeader[] } = {}
  let h: HostSessionHeader | undefined = header
  while (h !== undefined && links.length < MAX_CHAIN) {
    const parent = h.parentSession
    const seedLength = inheritedCount(h, h === header ? live : liveSession(ctx, h.id))
    if (typeof parent !== 'string' || parent === '' || seen.has(parent)) break
    if (seedLength === undefined) break
    seen.add(parent)
    links.push({ sessionId: parent, maxAnchor: seedLength - 1 })
    h = await headerOf(ctx, parent, persisted)
  }
  return links
}

/**
 * How the child is composed: in the web product an agent's tools come from its preset, so the
 * child mounts the parent's (`header.agentPreset`, else the default); without a presets service
 * (headless) the composition's global tools apply and nothing is mounted.
 */
export async function childComposition(ctx: HostContext, parent: HostSession): Promise<{ agentPreset?: string; setup?: (agentCtx: unknown) => Promise<void> }> {
  const presets = ctx.get('agentPresets') as HostAgentPresets | undefined
  if (presets === undefined || typeof presets.resolve !== 'function' || typeof presets.mount !== 'function') return {}
  const wanted = (parent.header as { agentPreset?: string }).agentPreset
  const id = (await presets.resolve(wanted)).id
  return { agentPreset: id, setup: async agentCtx => { await presets.mount(agentCtx, id) } }
}

/** Attach the child to the parent's workspace in DSH's registry (web product), when there is one. */
export async function attachToParentWorkspace(ctx: HostContext, parentId: string, childId: string): Promise<void> {
  const registry = ctx.get('workspaceRegistry') as { list?(): HostWorkspace[] } | undefined
  const owner = registry?.list?.().find(w => w.sessionIds?.includes(parentId))
  if (owner !== undefined && typeof owner.attachSession === 'function') await owner.attachSession(childId)
}
