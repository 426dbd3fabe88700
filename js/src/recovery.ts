/**
 * Recovery: the reconcile pass (at session open, before `/rewind`, on the client's request) that
 * settles what a crash interrupted, and `--continue` / `--rollback` (the RPC's `restores.*`) of an
 * interrupted rewind or of one that could not restore every file. The rules are the engine's
 * (`interruptedEntries`, `judge`, `describe`, `partials`, `resolveEntry`, which also chooses how an
 * entry is settled); this module adds what only the host knows (whether the marker is in the log,
 * whether the child session exists) and re-syncs DSH's fs observations.
 */
import type { Addon } from './native.ts'
import { step } from './engine.ts'
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostSession } from './host.ts'
import type { ChainLink, RestoreStatus } from './ports.ts'
import { isSubagentSession } from './state.ts'
import { trackedCwd } from './capture.ts'
import { type HistoryPort, partitionKey } from './history.ts'
import { forkAncestors, sessionExists } from './fork.ts'
import { hasMarker } from './marker.ts'
import type { InterruptedRewind, ResolveReport } from './report.ts'
import { type RewindDeps, resyncObservations } from './host-steps.ts'
import { escapeControl } from '../../shared/format.ts'

/** One history entry. */
export type HistoryEntry = Awaited<ReturnType<HistoryPort['listChecked']>>['entries'][number]

/** Finishes an interrupted undo (the undo's own step; see `Undoer.finishInterrupted`). */
export type FinishUndo = (agent: HostAgent, key: string, entry: HistoryEntry) => Promise<void>

/** The recovery service. */
export class Recovery {
  private readonly reconciling = new Map<string, Promise<InterruptedRewind[]>>()

  constructor(private readonly deps: RewindDeps, private readonly finishUndo: FinishUndo) {}

  /**
   * The reconcile pass (at session open, before `/rewind`, on the client's request): every
   * history entry of the session still `started`, or whose undo began and never ended, while no
   * rewind of the session runs in this process, was interrupted by a crash. What can be judged
   * whole is settled at once — nothing changed (no marker or child, no journal) → `abandoned`;
   * conversation and files both done → `done`; an interrupted undo is finished (the store's undo
   * is idempotent) — and the rest is returned for the user to continue or roll back.
   */
  async reconcile(agent: HostAgent): Promise<InterruptedRewind[]> {
    const session = agent.session
    const sessionId = session.header.id
    if (isSubagentSession(session)) return []
    // A rewind running in this process: its `started` entry is not interrupted.
    if (this.deps.state.rewinding(sessionId)) return []
    // Concurrent callers join one pass; a rewind waits for it (see `settled`).
    const running = this.reconciling.get(sessionId)
    if (running !== undefined) return await running
    const pass = this.reconcilePass(agent)
    this.reconciling.set(sessionId, pass)
    try {
      return await pass
    } finally {
      if (this.reconciling.get(sessionId) === pass) this.reconciling.delete(sessionId)
    }
  }

  /** Wait for a reconcile pass of the session, if one runs (a rewind never overlaps one). */
  async settled(sessionId: string): Promise<void> {
    await this.reconciling.get(sessionId)?.catch(() => undefined)
  }

  private async reconcilePass(agent: HostAgent): Promise<InterruptedRewind[]> {
    const session = agent.session
    const sessionId = session.header.id
    {
      const key = await partitionKey(this.deps.ctx, session)
      const { entries } = await this.deps.history.listChecked(key)
      // Which entries are interrupted is the engine's rule.
      const es = await this.deps.engine.session(session)
      const interrupted = new Set(await this.deps.state.run(sessionId, () => step(() => es.interruptedEntries())))
      const out: InterruptedRewind[] = []
      for (const entry of entries) {
        if (!interrupted.has(entry.opId)) continue
        try {
          const found = await this.judge(agent, key, entry)
          if (found !== undefined) out.push(found)
        } catch (error) {
          const e = toRewindError(error)
          out.push({ ...(await this.describe(agent, entry)), error: { code: e.code, message: e.message } })
        }
      }
      return out
    }
  }

  /** Whether the conversation half of an interrupted entry happened (the marker is in the log, the child exists). */
  private async conversationHappened(session: HostSession, entry: HistoryEntry): Promise<boolean> {
    const childSessionId = entry.fork?.childSessionId
    if (entry.redoOf != null) return true // a redo's conversation is the rewound session itself
    if (childSessionId !== undefined) return await sessionExists(this.deps.ctx, childSessionId)
    return hasMarker(session, entry.markerId)
  }

  /**
   * What an interrupted entry left, as the reconcile pass reports it; with `partial`, a rewind
   * that is over but left its journal open (see {@link Recovery.partials}).
   */
  private interrupted(entry: HistoryEntry, conversation: boolean, kind: InterruptedRewind['kind'], journal: InterruptedRewind['journal'], restore: RestoreStatus | null | undefined, partial = false): InterruptedRewind {
    const childSessionId = entry.fork?.childSessionId
    return {
      opId: entry.opId, kind, targetSeq: entry.targetSeq, ...(typeof entry.targetText === 'string' ? { targetText: entry.targetText } : {}), time: entry.time, journal, conversation,
      ...(childSessionId !== undefined ? { childSessionId } : {}),
      ...(restore != null ? { restore } : {}),
      ...(partial ? { partial: true as const } : {}),
    }
  }

  /** What an interrupted entry left, without changing anything (after a failed judgement). */
  private async describe(agent: HostAgent, entry: HistoryEntry): Promise<InterruptedRewind> {
    const session = agent.session
    const conversation = await this.conversationHappened(session, entry)
    // The engine names the kind and reads the journal; when even that fails, the journal is `unreadable`.
    const found = await this.deps.engine.session(session)
      .then(es => step(() => es.describe(entry.opId)))
      .catch(() => undefined)
    return this.interrupted(entry, conversation, found?.kind ?? 'rewind', found?.journal ?? 'unreadable', found?.restore)
  }

  /**
   * The engine settles what can be settled alone (crash order: docs/architecture.md) and says
   * what is left: an interrupted undo this host finishes (its session may have to be created
   * first), or an entry for the user to continue or roll back.
   */
  private async judge(agent: HostAgent, key: string, entry: HistoryEntry): Promise<InterruptedRewind | undefined> {
    const session = agent.session
    const conversation = await this.conversationHappened(session, entry)
    const es = await this.deps.engine.session(session)
    const judged = await this.deps.state.run(session.header.id, () => step(() => es.judge(entry.opId, conversation)))
    if (judged.judgement === 'settled') return undefined
    if (judged.judgement === 'finish-undo') {
      await this.finishUndo(agent, key, entry)
      return undefined
    }
    return this.interrupted(entry, conversation, judged.kind, judged.journal, judged.restore)
  }

  /**
   * `/rewind --continue` / `--rollback` and the RPC `restores.continue` / `restores.rollback` for
   * an interrupted rewind: continue finishes restoring the files (the journal's remaining actions,
   * or the whole restore when it never began); roll back puts every file back exactly as before
   * the rewind (nothing to do when the restore never began). Both remove the restore's leftover
   * temp files and finish the history entry. `opId` defaults to the newest interrupted one.
   */
  async resolve(agent: HostAgent, opId: string | undefined, how: 'continue' | 'rollback'): Promise<ResolveReport> {
    const session = agent.session
    const sessionId = session.header.id
    if (isSubagentSession(session)) throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never rewound')
    const pending = await this.reconcile(agent)
    const found = opId === undefined ? pending[0] : pending.find(i => i.opId === opId)
    if (found === undefined) {
      // A rewind that is over but could not restore some files (`partial`): its journal stays
      // open until it is continued or rolled back.
      const partial = (await this.partials(agent)).find(p => opId === undefined || p.opId === opId)
      if (partial !== undefined) return await this.resolvePartial(agent, partial, how)
      throw new RewindError(Codes.unknownEntry, opId === undefined ? 'no interrupted rewind in this session' : `no interrupted rewind ${escapeControl(opId)} in this session`)
    }
    if (!this.deps.state.begin(sessionId)) throw new RewindError(Codes.inFlight, 'a rewind of this session is already running')
    try {
      const ancestors: ChainLink[] = await forkAncestors(this.deps.ctx, session.header, session)
      const es = await this.deps.engine.session(session)
      const r = await this.deps.state.run(sessionId, () => step(() => es.resolveEntry(found.opId, how, ancestors)))
      const cwd = trackedCwd(session)
      if (cwd !== undefined) await resyncObservations(this.deps.ctx, session, cwd, [...r.outcome.written], [...r.outcome.deleted], this.deps.logger)
      return { opId: found.opId, how, kind: r.kind, targetSeq: found.targetSeq, conversation: found.conversation, outcome: r.outcome, entryOutcome: r.entryOutcome, tempsRemoved: r.tempsRemoved }
    } finally {
      this.deps.state.end(sessionId)
    }
  }

  /**
   * The rewinds of this session that ran to their end but could not restore some files (their
   * entry `partial`, or `failed` when none could be), their journal still open (newest first):
   * listed with the interrupted ones by the `interrupted` RPC, so that the client offers the
   * same two ways out. A new rewind is not refused over them.
   */
  async partials(agent: HostAgent): Promise<InterruptedRewind[]> {
    const session = agent.session
    const sessionId = session.header.id
    const cwd = trackedCwd(session)
    const port = this.deps.files()
    if (isSubagentSession(session) || cwd === undefined || port.unavailable() !== undefined) return []
    const { entries } = await this.deps.history.listChecked(await partitionKey(this.deps.ctx, session))
    const es = await this.deps.engine.session(session)
    const out: InterruptedRewind[] = []
    for (const p of await this.deps.state.run(sessionId, () => step(() => es.partials()))) {
      const e = entries.find(x => x.opId === p.opId)
      if (e !== undefined) out.push(this.interrupted(e, true, p.kind, p.journal, p.restore, true))
    }
    return out
  }

  /** {@link Recovery.resolve} of a `partial` rewind: its conversation half is done; its files are finished or put back. */
  private async resolvePartial(agent: HostAgent, entry: InterruptedRewind, how: 'continue' | 'rollback'): Promise<ResolveReport> {
    const sessionId = agent.session.header.id
    if (!this.deps.state.begin(sessionId)) throw new RewindError(Codes.inFlight, 'a rewind of this session is already running')
    try {
      const r = await settleJournal(this.deps, agent.session, entry.opId, how)
      return { opId: entry.opId, how, kind: r.kind, targetSeq: entry.targetSeq, conversation: true, outcome: r.outcome, entryOutcome: r.entryOutcome, tempsRemoved: r.tempsRemoved }
    } finally {
      this.deps.state.end(sessionId)
    }
  }
}

/**
 * Finishes or rolls back the open journal of a rewind that is over (a `partial` or `failed`
 * one): the engine settles its files, removes the temp files and updates the history entry,
 * and the plugin's view of the paths it wrote or deleted follows.
 */
export async function settleJournal(deps: Pick<RewindDeps, 'ctx' | 'engine' | 'state' | 'logger'>, session: HostSession, opId: string, how: 'continue' | 'rollback'): Promise<Addon.BindingResolved> {
  const es = await deps.engine.session(session)
  const r = await deps.state.run(session.header.id, () => step(() => es.resolveEntry(opId, how)))
  const cwd = trackedCwd(session)
  if (cwd !== undefined) await resyncObservations(deps.ctx, session, cwd, [...r.outcome.written], [...r.outcome.deleted], deps.logger)
  if (r.entryOutcome === '') deps.logger.warn('history entry %s not updated after %s', opId, how)
  return r
}
