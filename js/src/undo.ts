/**
 * Undo a rewind completely: the files that rewind changed (through the store's journaled undo,
 * planned against the disk as it is now, with a choice per file changed since) and the
 * conversation — as it was just before the rewind, it continues in a new session seeded from the
 * rewound session's log up to the marker (DSH's log cannot un-shadow a replaced span in place).
 * Any rewind of the session, not only the newest; a fork rewind's conversation is its parent,
 * which the fork never changed.
 */
import { randomUUID } from 'node:crypto'
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostSession } from './host.ts'
import type { UndoChoices } from './ports.ts'
import { isSubagentSession } from './state.ts'
import { trackedCwd } from './capture.ts'
import { partitionKey } from './history.ts'
import { type HostAgentFactory, attachToParentWorkspace, sessionExists } from './fork.ts'
import type { UndoReport } from './report.ts'
import { markerSeq } from './marker.ts'
import { type RewindDeps, childOptions, crashPoint, makeDurable, resyncObservations, testPause } from './host-steps.ts'
import { step } from './engine.ts'
import { gitReport } from './rewind-files.ts'
import { spellingOfRequest } from '../../shared/names.ts'

type Entry = Awaited<ReturnType<RewindDeps['history']['listChecked']>>['entries'][number]

/** The undo service (`undo` RPC, `/rewind undo`). */
export class Undoer {
  /** `reconcile`: settles an interrupted rewind or undo of the session first (the recovery's pass). */
  constructor(private readonly deps: RewindDeps, private readonly reconcile: (agent: HostAgent) => Promise<unknown>) {}

  /** The session, its history partition, its working directory and the store (subagents refused). */
  private where(agent: HostAgent): { session: HostSession; sessionId: string; cwd: string | undefined } {
    const session = agent.session
    if (isSubagentSession(session)) throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never rewound')
    return { session, sessionId: session.header.id, cwd: trackedCwd(session) }
  }

  /**
   * Resolve `ref` of `/rewind undo`: `undefined` = the newest undoable entry, `<n>` = the n-th
   * newest, `@<op id>` or an op id. Numbered by the engine among the entries the history page
   * offers "Undo" on (`entryActions`), so the two never disagree.
   */
  async resolveRef(agent: HostAgent, ref: string | undefined): Promise<string> {
    const es = await this.deps.engine.session(this.where(agent).session)
    return await step(() => es.pickEntry('undo', ref))
  }

  /** Resolve the `ref` of `/rewind redo` among the undone rewinds this session may redo (newest first), as `resolveRef`. */
  async resolveUndone(agent: HostAgent, ref: string | undefined): Promise<string> {
    const es = await this.deps.engine.session(this.where(agent).session)
    return await step(() => es.pickEntry('redo', ref))
  }

  /**
   * Undo the rewind `opId` of `agent`'s session. Files that rewind changed and that changed again
   * since must each be decided (`choices.take` / `choices.keep`), else `rewind/stale-undo` names
   * them and nothing changes. Crash order: `undoStartedAt` (naming the new session) durable →
   * the new session created and flushed → the journaled undo of the files → `undoneAt`; a restart
   * finishes an undo it finds started (see {@link Undoer.finishInterrupted}).
   */
  async undo(agent: HostAgent, opId: string, choices: UndoChoices = {}): Promise<UndoReport> {
    const { ctx, state, logger } = this.deps
    const { session, sessionId, cwd } = this.where(agent)
    // An interrupted undo or rewind of this session is settled first.
    await this.reconcile(agent)
    if (!state.begin(sessionId)) throw new RewindError(Codes.inFlight, 'a rewind of this session is running')
    let releaseChild: (() => void) | undefined
    try {
      const es = await this.deps.engine.session(session)
      // The engine's rules, and every file changed since the rewind decided: nothing changes yet.
      const check = await state.run(sessionId, () => step(() => es.undoCheck(opId, choices)))
      const entry = check.entry
      // The conversation half.
      const fork = entry.fork?.childSessionId != null
      const mSeq = fork ? undefined : markerSeq(session, entry.markerId)
      const agents = ctx.get('agents') as HostAgentFactory | undefined
      let childId: string | undefined
      if (mSeq !== undefined) {
        if (agents === undefined || typeof agents.create !== 'function') {
          throw new RewindError(Codes.agentsUnavailable, 'this host has no agent registry to continue the conversation in; nothing was changed')
        }
        childId = `session-${randomUUID()}`
      }
      await step(() => es.undoStart(opId, childId))
      crashPoint('undo:started')
      let conversation: UndoReport['conversation']
      if (childId !== undefined) {
        releaseChild = this.holdQueue(childId)
        await this.createContinuation(agent, agents!, childId, mSeq!)
        crashPoint('undo:session')
        conversation = { sessionId: childId, created: true }
      } else if (fork) {
        conversation = { sessionId: entry.sessionId, created: false }
      } else if (entry.redoOf != null) {
        // Undoing a redo: the conversation before the redo is the undone rewind's continuation.
        const { entries } = await this.deps.history.listChecked(await partitionKey(ctx, session))
        const undone = entries.find(e => e.opId === entry.redoOf)?.undoSessionId
        if (undone != null) conversation = { sessionId: undone, created: false }
      }
      // The files (the engine's journaled undo), then `undoneAt`. Something changed between the
      // check and now: the entry stays started and the next reconcile finishes it, keeping it.
      await testPause('undo:started')
      let done
      try {
        done = await state.run(check.owner, () => step(() => es.undoFiles(opId, choices)))
      } catch (error) {
        const e = toRewindError(error)
        if (e.code !== Codes.staleUndo) throw error
        // A file changed after the check, once the undo had started (its entry names the new
        // session, which exists): a refusal here would not be one — the next reconcile would
        // finish the undo unasked. It is finished now, as a restart finishes one (a file
        // changed since is kept, never overwritten), and the answer says so.
        // `details.paths` in the JSON path form (`{hex, lossy}` for a name that is not UTF-8).
        const raced = Array.isArray(e.details.paths) ? (e.details.paths as unknown[]).map(spellingOfRequest).filter((p): p is string => p !== undefined) : []
        logger.warn('undo %s: %d file(s) changed after its check; finished keeping them: %s', opId, raced.length, raced.join(', '))
        const outcome = await state.run(check.owner, () => step(() => es.undoFinishInterrupted(opId)))
        if (check.files && cwd !== undefined) await resyncObservations(ctx, session, cwd, outcome.restored, outcome.deleted, logger)
        return { opId, targetSeq: entry.targetSeq, kind: outcome.kind, files: outcome, conversation, changedDuring: raced }
      }
      if (done.notRecorded != null) logger.warn('undo of %s not recorded in history: %s', opId, done.notRecorded.message)
      if (check.files && cwd !== undefined) await resyncObservations(ctx, session, cwd, done.files.restored, done.files.deleted, logger)
      const files = done.files
      // What the undo did to the workspace's git repository (docs/git.md).
      const git = await gitReport(es, check.owner, opId)
      return { opId, targetSeq: entry.targetSeq, kind: files.kind, files, conversation, ...(git !== undefined ? { git } : {}) }
    } finally {
      releaseChild?.()
      state.end(sessionId)
    }
  }

  /**
   * Redo: do again what the undone rewind `opId` did to the files, as a restore of its own (a new
   * history entry naming it with `redoOf`, undoable in turn); the conversation after that rewind
   * is the rewound session itself, which the undo never changed. From that session, the session
   * the undo continued in, or a fork's child. A file changed since the undo is decided like an
   * undo's (`keep` / `take`). Crash order: the new entry `started` → the journaled restore → the
   * entry finished.
   */
  async redo(agent: HostAgent, opId: string, choices: UndoChoices = {}): Promise<UndoReport> {
    const { ctx, state, logger } = this.deps
    const { session, sessionId, cwd } = this.where(agent)
    await this.reconcile(agent)
    if (!state.begin(sessionId)) throw new RewindError(Codes.inFlight, 'a rewind of this session is running')
    try {
      const es = await this.deps.engine.session(session)
      const done = await state.run(sessionId, () => step(() => es.redo(opId, randomUUID(), choices, this.deps.settings.get().historyLimit)))
      if (done.notRecorded != null) logger.warn('redo %s not recorded in history: %s', done.opId, done.notRecorded.message)
      const outcome = done.outcome
      if (cwd !== undefined) await resyncObservations(ctx, session, cwd, [...outcome.written], [...outcome.deleted], logger)
      const kind = outcome.failed.length === 0 ? 'ok' : 'partial'
      const git = await gitReport(es, done.owner, done.opId)
      return {
        opId: done.opId, targetSeq: done.targetSeq, kind,
        files: { kind, restored: [...outcome.written], deleted: [...outcome.deleted], failed: [...outcome.failed], kept: [] },
        conversation: { sessionId: done.owner, created: false },
        ...(git !== undefined ? { git } : {}),
      }
    } finally {
      state.end(sessionId)
    }
  }

  /**
   * Holds the work queue of `sessionId` (the session the conversation continues in, about to be
   * created) until the returned function is called. The first workspace scan of a session, started
   * when it opens (`scan.ts`), then runs once the undo's file step is over, on the workspace as the
   * undo left it: run while the undo writes, it would walk a half-undone workspace (recording it
   * as changes made outside the agent) and compete with the undo for the disk and the processor.
   */
  private holdQueue(sessionId: string): () => void {
    let release!: () => void
    const held = new Promise<void>(resolve => { release = resolve })
    void this.deps.state.run(sessionId, () => held)
    return release
  }

  /** The new session: the rewound session's events before the marker, durable before any file changes. */
  private async createContinuation(agent: HostAgent, agents: HostAgentFactory, childId: string, mSeq: number): Promise<void> {
    const { ctx, logger } = this.deps
    const session = agent.session
    await agents.create(await childOptions(ctx, agent, childId, mSeq))
    const child = agents.get(childId)
    if (child !== undefined) await makeDurable(ctx, child.session)
    try {
      await attachToParentWorkspace(ctx, session.header.id, childId)
    } catch (error) {
      logger.warn('undo session %s not attached to the workspace of %s: %s', childId, session.header.id, (error as Error).message)
    }
  }

  /**
   * A restart found the undo of `entry` started and not finished: the new session is created if
   * it is missing (its seed is still the rewound session's log up to the marker), the files are
   * undone — a file changed since is kept, never overwritten — and the entry is marked undone.
   */
  async finishInterrupted(agent: HostAgent, _key: string, entry: Entry): Promise<void> {
    const { ctx, state, logger } = this.deps
    const session = agent.session
    const sessionId = session.header.id
    const cwd = trackedCwd(session)
    const childId = entry.undoSessionId ?? undefined
    let releaseChild: (() => void) | undefined
    try {
      if (childId != null && !(await sessionExists(ctx, childId))) {
        const mSeq = markerSeq(session, entry.markerId)
        const agents = ctx.get('agents') as HostAgentFactory | undefined
        if (mSeq !== undefined && agents !== undefined && typeof agents.create === 'function') {
          releaseChild = this.holdQueue(childId)
          await this.createContinuation(agent, agents, childId, mSeq)
        }
      }
      const es = await this.deps.engine.session(session)
      const outcome = await state.run(sessionId, () => step(() => es.undoFinishInterrupted(entry.opId)))
      if (cwd !== undefined) await resyncObservations(ctx, session, cwd, outcome.restored, outcome.deleted, logger)
    } finally {
      releaseChild?.()
    }
  }
}
