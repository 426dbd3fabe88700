/**
 * The history port over the addon's `BindingHistory`: the per-workspace partition key derived
 * host-side from the session, the sessions of a workspace (the `storage` figures), and the reads
 * and `clear` of the history page. Every write of a rewind's entry is a step of an engine
 * sequence (`engine.ts`).
 */
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { Addon } from './native.ts'
import { awaitNative, callNative } from './native.ts'
import type { HostAgent, HostAgents, HostContext, HostSession, HostSessionHeader, HostWorkspaceRegistry } from './host.ts'
import type { HostSessionPersistence } from './fork.ts'

/**
 * The partition key of a session, always derived host-side:
 * - DSH's workspace registry accounts for the session (its `sessionIds`), or owns its cwd
 *   (`resolveByPath`) → `ws-<workspace id>`;
 * - the registry knows neither → `_unknown`;
 * - no registry in this composition (headless hosts) → `ws-cwd.<sha256(cwd)[0..16]>`, so
 *   workspaces still never share a partition; no cwd → `_unknown`.
 */
export async function partitionKey(ctx: HostContext, session: Pick<HostSession, 'header'>): Promise<string> {
  const unknown = (): string => callNative(n => n.workspaceKey(undefined))
  const registry = ctx.get('workspaceRegistry') as HostWorkspaceRegistry | undefined
  const cwd = session.header.cwd
  if (registry !== undefined && typeof registry.resolveByPath === 'function') {
    let id: string | undefined
    try {
      const owner = registry.list?.().find(w => w.sessionIds?.includes(session.header.id))
      id = owner?.id ?? (typeof cwd === 'string' && cwd !== '' ? (await registry.resolveByPath(cwd))?.id : undefined)
    } catch {
      id = undefined // an unreadable registry accounts for nothing
    }
    return id === undefined ? unknown() : keyOf(String(id))
  }
  if (typeof cwd !== 'string' || cwd === '') return unknown()
  return callNative(n => n.workspaceKey(`cwd.${createHash('sha256').update(cwd).digest('hex').slice(0, 16)}`))
}

/** `ws-<id>`; an id the key rules refuse is hashed instead of guessed at. */
function keyOf(id: string): string {
  try {
    return callNative(n => n.workspaceKey(id))
  } catch {
    return callNative(n => n.workspaceKey(`id.${createHash('sha256').update(id).digest('hex').slice(0, 16)}`))
  }
}

/** History operations the host needs. */
export class HistoryPort {
  private binding: Addon.BindingHistory | undefined

  constructor(private readonly root: string) {}

  private history(): Addon.BindingHistory {
    this.binding ??= callNative(n => new n.BindingHistory(this.root))
    return this.binding
  }

  /** The history root (`<dsh home>/rewind-history`). */
  static rootFor(dshHome: string): string {
    return join(dshHome, 'rewind-history')
  }

  /** Entries that can be read, newest first, and the damage of a damaged file. */
  listChecked(key: string): Promise<Addon.BindingHistoryList> {
    return awaitNative(() => this.history().listChecked(key))
  }

  /** Entries of a partition, newest first. */
  list(key: string): Promise<Addon.BindingHistoryEntry[]> {
    return awaitNative(() => this.history().list(key))
  }

  /** Clear a partition (records only). */
  clear(key: string): Promise<number> {
    return awaitNative(() => this.history().clear(key))
  }
}

/**
 * The sessions of the workspace of `session` (by the history partition: DSH's workspace registry,
 * else the cwd), with their working directories: every session DSH has persisted and every live
 * one. An unreadable session list leaves the live sessions.
 */
export async function workspaceSessions(ctx: HostContext, session: HostAgent['session']): Promise<{ key: string; members: string[]; cwds: string[] }> {
  const key = await partitionKey(ctx, session)
  const headers = new Map<string, HostSessionHeader>()
  const persistence = ctx.get('sessionPersistence') as HostSessionPersistence | undefined
  try {
    for (const h of (await persistence?.list()) ?? []) if (typeof h?.id === 'string') headers.set(h.id, h)
  } catch {
    // the live sessions below still count
  }
  const agents = ctx.get('agents') as HostAgents | undefined
  try {
    for (const a of agents?.list() ?? []) headers.set(a.session.header.id, a.session.header)
  } catch {
    // the current session below still counts
  }
  headers.set(session.header.id, session.header)
  const members: string[] = []
  const cwds = new Set<string>()
  for (const header of headers.values()) {
    let same: boolean
    try {
      same = header.id === session.header.id || (await partitionKey(ctx, { header })) === key
    } catch {
      same = false
    }
    if (!same) continue
    members.push(header.id)
    if (typeof header.cwd === 'string' && header.cwd !== '') cwds.add(header.cwd)
  }
  return { key, members, cwds: [...cwds] }
}
