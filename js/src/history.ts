/**
 * The history port over the addon's `BindingHistory`: per-workspace partition key derived
 * host-side from the session, record / list / clear / undo bookkeeping.
 */
import { createHash } from 'node:crypto'
import { basename, join } from 'node:path'
import type { Addon } from './native.ts'
import { awaitNative, callNative } from './native.ts'
import type { HostContext, HostSession, HostWorkspaceRegistry } from './host.ts'
import type { RewindReport } from './rewind.ts'
import type { RestoreOutcome } from './ports.ts'

/** The history outcome of a finished rewind. */
export function outcomeOf(report: RewindReport): 'done' | 'partial' | 'failed' {
  const o = report.outcome
  const total = o.written.length + o.deleted.length + o.failed.length
  if (report.filesNotRestored !== undefined && report.filesNotRestored.code !== 'no-cwd') {
    return report.filesNotRestored.code.startsWith('rewind/') ? 'failed' : 'done'
  }
  return o.failed.length === 0 ? 'done' : o.failed.length === total ? 'failed' : 'partial'
}

/** The history paths of a restore outcome. */
export function pathsOf(o: Pick<RestoreOutcome, 'written' | 'deleted' | 'skipped' | 'failed' | 'outside' | 'notCovered' | 'kept'>): Addon.BindingHistoryPaths {
  return {
    restored: [...o.written],
    deleted: [...o.deleted],
    // Left alone: skipped paths, files changed only outside the agent, what the scan does not cover.
    skipped: [...o.skipped.map(s => s.path), ...(o.outside ?? []), ...(o.notCovered ?? []).map(n => n.path)],
    failed: o.failed.map(f => f.path),
    kept: [...(o.kept ?? [])],
  }
}

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

  constructor(
    private readonly ctx: HostContext,
    private readonly root: string,
  ) {}

  private history(): Addon.BindingHistory {
    this.binding ??= callNative(n => new n.BindingHistory(this.root))
    return this.binding
  }

  /** The history root (`<dsh home>/rewind-history`). */
  static rootFor(dshHome: string): string {
    return join(dshHome, 'rewind-history')
  }

  /**
   * Crash order, step 1: the entry in state `started`, durable before the rewind changes anything
   * (marker, child session, files). After a kill, an entry still `started` is how a restart knows
   * a rewind was interrupted. Resolves with the partition key. Rejects (and the rewind is refused
   * with nothing changed) when the history cannot be written.
   */
  async start(session: HostSession, entry: { opId: string; targetSeq: number; targetText?: string; markerId?: string; forkChildSessionId?: string; redoOf?: string; sessionId?: string }, limit: number): Promise<string> {
    const key = await partitionKey(this.ctx, session)
    await awaitNative(() => this.history().append(key, {
      opId: entry.opId,
      sessionId: entry.sessionId ?? session.header.id,
      targetSeq: entry.targetSeq,
      time: Date.now(),
      outcome: 'started',
      paths: { restored: [], deleted: [], skipped: [], failed: [] },
      forkChildSessionId: entry.forkChildSessionId,
      markerId: entry.markerId,
      targetText: entry.targetText,
      redoOf: entry.redoOf,
      workspaceName: typeof session.header.cwd === 'string' && session.header.cwd !== '' ? basename(session.header.cwd) : undefined,
    }, limit))
    return key
  }

  /** Crash order, last step: the `started` entry gets the rewind's outcome and paths. */
  async record(key: string, report: RewindReport): Promise<Addon.BindingHistoryEntry> {
    return await this.finish(key, report.opId, outcomeOf(report), pathsOf(report.outcome))
  }

  /** End a `started` entry (refused for a settled one). */
  finish(key: string, opId: string, outcome: 'done' | 'partial' | 'failed' | 'rolled-back' | 'abandoned', paths?: Addon.BindingHistoryPaths): Promise<Addon.BindingHistoryEntry> {
    return awaitNative(() => this.history().finish(key, opId, outcome, paths))
  }

  /** Durable before an undo changes a file. */
  markUndoStarted(key: string, opId: string, undoSessionId?: string): Promise<Addon.BindingHistoryEntry> {
    return awaitNative(() => this.history().markUndoStarted(key, opId, Date.now(), undoSessionId))
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

  /** Check undo eligibility (rejects with the refusal's code). */
  checkUndo(key: string, opId: string, sessionId: string, journal: string): Promise<Addon.BindingHistoryEntry> {
    return awaitNative(() => this.history().checkUndo(key, opId, sessionId, journal))
  }

  /** Record an undo. */
  markUndone(key: string, opId: string, outcome: 'ok' | 'partial' | 'failed'): Promise<Addon.BindingHistoryEntry> {
    return awaitNative(() => this.history().markUndone(key, opId, outcome, Date.now()))
  }

  /** Record what continuing an interrupted restore did. */
  settleContinued(key: string, opId: string, written: string[], deleted: string[], failed: string[]): Promise<Addon.BindingHistoryEntry> {
    return awaitNative(() => this.history().settleContinued(key, opId, written, deleted, failed))
  }
}
