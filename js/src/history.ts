/**
 * The history port over the addon's `BindingHistory`: per-workspace partition key derived
 * host-side from the session, record / list / clear / undo bookkeeping.
 */
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { Addon } from './native.ts'
import { awaitNative, callNative } from './native.ts'
import type { HostContext, HostSession, HostWorkspaceRegistry } from './host.ts'
import type { RewindReport } from './rewind.ts'

/**
 * The partition key of a session, always derived host-side:
 * - DSH's workspace registry accounts for the session (its `sessionIds`), or owns its cwd
 *   (`resolveByPath`) → `ws-<workspace id>`;
 * - the registry knows neither → `_unknown`;
 * - no registry in this composition (headless hosts) → `ws-cwd.<sha256(cwd)[0..16]>`, so
 *   workspaces still never share a partition; no cwd → `_unknown`.
 */
export async function partitionKey(ctx: HostContext, session: HostSession): Promise<string> {
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

  /** Record a rewind. */
  async record(session: HostSession, report: RewindReport, limit: number): Promise<void> {
    const key = await partitionKey(this.ctx, session)
    const o = report.outcome
    const total = o.written.length + o.deleted.length + o.failed.length
    const outcome = report.filesNotRestored !== undefined && report.filesNotRestored.code !== 'no-cwd'
      ? (report.filesNotRestored.code.startsWith('rewind/') ? 'failed' : 'done')
      : o.failed.length === 0 ? 'done' : o.failed.length === total ? 'failed' : 'partial'
    await awaitNative(() => this.history().append(key, {
      opId: report.opId,
      sessionId: session.header.id,
      targetSeq: report.targetSeq,
      time: Date.now(),
      outcome,
      paths: {
        restored: [...o.written],
        deleted: [...o.deleted],
        // Left alone: skipped paths, files changed only outside the agent, what the scan does not cover.
        skipped: [...o.skipped.map(s => s.path), ...(o.outside ?? []), ...(o.notCovered ?? []).map(n => n.path)],
        failed: o.failed.map(f => f.path),
      },
      forkChildSessionId: report.fork?.childSessionId,
    }, limit))
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
