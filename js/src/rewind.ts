/**
 * The rewind (seed 000 §4): plan from the live log, stop a running turn, drop pending steering,
 * append the marker, restore files through the journaled restore, re-sync DSH's fs observation,
 * record history, and report. Also the candidate listing of a bare `/rewind`.
 */
import { randomUUID } from 'node:crypto'
import { step } from './engine.ts'
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostSession } from './host.ts'
import type { RestoreSelection } from './ports.ts'
import { isSubagentSession } from './state.ts'
import { trackedCwd } from './capture.ts'
import { type HostAgentFactory, type HostSessions, attachToParentWorkspace } from './fork.ts'
import { Undoer } from './undo.ts'
import { type CommandResult, rewindCommand } from './command.ts'
import { Recovery, settleJournal } from './recovery.ts'
import { EMPTY_OUTCOME, RewindFiles } from './rewind-files.ts'
import { candidates, planFork, planRewind, targetPreview, withdraw } from './marker.ts'
import type { InterruptedRewind, ResolveReport, RewindPreview, RewindReport } from './report.ts'
import { type RewindDeps, childOptions, crashPoint, makeDurable, resyncObservations, trackObservations } from './host-steps.ts'
import { appendMarker } from './contract/session.ts'

export type { RewindDeps }
/** Re-exported for the RPC's `candidates` and `restores.*` endpoints. */
export { candidates, settleJournal }

function sleep(ms: number): Promise<'timeout'> {
  return new Promise(resolve => setTimeout(() => resolve('timeout'), ms).unref?.())
}

/** The rewind service. */
export class Rewinder {
  /** Undo of a rewind, files and conversation (`undo` RPC, `/rewind undo`). */
  readonly undoer: Undoer
  /** What a crash interrupted, and continuing or rolling back a restore left open. */
  readonly recovery: Recovery
  /** The file half's steps. */
  readonly files: RewindFiles

  constructor(private readonly deps: RewindDeps) {
    this.files = new RewindFiles(deps)
    this.recovery = new Recovery(deps, (agent, key, entry) => this.undoer.finishInterrupted(agent, key, entry))
    this.undoer = new Undoer(deps, agent => this.recovery.reconcile(agent))
    trackObservations(deps.ctx, deps.logger)
  }

  /** See {@link RewindFiles.recordPending}. */
  recordPending(session: HostSession): Promise<void> {
    return this.files.recordPending(session)
  }

  /** See {@link RewindFiles.preview}. */
  preview(agent: HostAgent, target: string): Promise<RewindPreview> {
    return this.files.preview(agent, target)
  }

  /** See {@link Recovery.reconcile}. */
  reconcile(agent: HostAgent): Promise<InterruptedRewind[]> {
    return this.recovery.reconcile(agent)
  }

  /** See {@link Recovery.resolve}. */
  resolve(agent: HostAgent, opId: string | undefined, how: 'continue' | 'rollback'): Promise<ResolveReport> {
    return this.recovery.resolve(agent, opId, how)
  }

  /** See {@link Recovery.partials}. */
  partials(agent: HostAgent): Promise<InterruptedRewind[]> {
    return this.recovery.partials(agent)
  }

  /** `/rewind` and `/undo`: a bare call lists candidates; otherwise rewinds. */
  command(agent: HostAgent, rawInput: string, engine: boolean): Promise<CommandResult> {
    return rewindCommand(this, this.deps.locale(), agent, rawInput, engine)
  }

  /** Rewind `agent`'s session to `target` (`@<seq>` or `<n>`); `selection` narrows the files restored. */
  async rewind(agent: HostAgent, target: string, selection?: RestoreSelection): Promise<RewindReport> {
    const { state } = this.deps
    const session = agent.session
    const sessionId = session.header.id
    if (isSubagentSession(session)) {
      throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never rewound')
    }
    await this.recovery.settled(sessionId)
    if (!state.begin(sessionId)) {
      throw new RewindError(Codes.inFlight, 'a rewind of this session is already running')
    }
    try {
      return await this.rewindLocked(agent, target, selection)
    } finally {
      state.end(sessionId)
    }
  }

  private async rewindLocked(agent: HostAgent, target: string, selection: RestoreSelection | undefined): Promise<RewindReport> {
    const session = agent.session
    // 1. Resolve the target on the live log (refusals carry the planner's codes; nothing changed yet).
    let plan = planRewind(session, target)
    await this.files.checkSelection(session, plan.targetSeq, selection)
    const previewText = targetPreview(session, plan.targetSeq, plan.targetText)
    const opId = randomUUID()
    let stoppedTurn = false

    if (plan.marker == null) {
      // A pending steering message: withdraw it (and later pending ones); the running turn goes on.
      const withdrawn = withdraw(agent, plan.withdrawPending)
      return {
        opId, targetSeq: plan.targetSeq, targetText: plan.targetText, preview: previewText, stoppedTurn,
        markerSeq: undefined, withdrawn,
        filesNotRestored: { code: 'pending-only', message: 'reasonPendingOnly' },
        outcome: EMPTY_OUTCOME,
      }
    }

    // 2. Stop a running turn, then re-plan: stopping appends events (turn end, interrupted reply).
    if (agent.status !== 'idle') {
      stoppedTurn = true
      await this.stop(agent)
      plan = planRewind(session, `@${plan.targetSeq}`)
      if (plan.marker == null) throw new RewindError(Codes.failed, 'the target changed while the turn stopped')
    }

    // 3–6 run as one maintenance task: new input waits until the files are back. The steps
    // follow the crash order (docs/architecture.md, "Crash order"): after a kill at any instant
    // a restart finds the whole rewind, none of it, or a `started` entry it can settle.
    const work = async (): Promise<RewindReport> => {
      const marker = plan.marker!
      const markerId = randomUUID()
      const es = await this.deps.engine.session(session)
      // Step 0: the file half prepared — plan, checks, a rescue copy of every file it changes —
      // before anything changes: a store that cannot serve this rewind refuses it whole.
      const files = await this.files.prepareFiles(session, es, plan.targetSeq, opId, selection)
      // Step 1: the history entry `started`, durable before anything changes. A history that
      // cannot be written refuses the rewind here, with nothing changed.
      try {
        await step(() => es.begin({ opId, targetSeq: plan.targetSeq, targetText: previewText, markerId }, this.deps.settings.get().historyLimit))
      } catch (error) {
        es.discardPrepared(opId)
        throw error
      }
      crashPoint('rewind:started')
      // Step 2: the marker, in memory. The append validates before it changes anything; only
      // once it succeeded is pending steering (the future being rolled back) withdrawn.
      let event
      try {
        event = appendMarker(session, { ...marker.data, id: markerId }, marker.surfaceOp.start, marker.surfaceOp.end, marker.sourceEventSeqs)
      } catch (error) {
        es.discardPrepared(opId)
        await this.files.settle(es, opId, 'abandoned')
        throw error
      }
      const withdrawn = withdraw(agent, plan.withdrawPending)
      crashPoint('rewind:marker-appended')
      // Step 3: the marker durable before the first file changes, so a restored workspace never
      // meets a log without its marker. If the log cannot be flushed, no file is touched.
      let durable: { code: string; message: string } | undefined
      try {
        await makeDurable(this.deps.ctx, session)
      } catch (error) {
        const e = toRewindError(error, Codes.flushFailed)
        durable = { code: e.code, message: e.message }
      }
      crashPoint('rewind:marker-durable')
      // Step 4: the journaled restore (its own journal is durable before its first action).
      if (durable !== undefined) es.discardPrepared(opId)
      const { outcome, notRestored } = durable === undefined
        ? await this.files.restoreFiles(session, es, plan.targetSeq, opId, selection, files)
        : { outcome: { ...EMPTY_OUTCOME, completed: false }, notRestored: durable }
      const report: RewindReport = {
        opId, targetSeq: plan.targetSeq, targetText: plan.targetText, preview: previewText, stoppedTurn,
        markerSeq: event.seq, withdrawn, filesNotRestored: notRestored, outcome,
      }
      // Step 5: the entry gets its outcome; from here the rewind is whole and undoable.
      await this.files.record(es, report)
      crashPoint('rewind:done')
      return report
    }
    const report = await this.asMaintenance(agent, work, () => {
      plan = planRewind(session, `@${plan.targetSeq}`)
      if (plan.marker == null) throw new RewindError(Codes.failed, 'the target changed while the turn stopped')
    })
    report.stoppedTurn ||= stoppedTurn
    return report
  }

  /**
   * Fork rewind: continue from `target` in a new child session. The child is seeded with the
   * parent's events through the planner's boundary (the last event before the target's turn),
   * its header names the parent (`parentSession` and the inherited prefix, as `contract/session.ts` spells them); the parent's log is not touched.
   * The files go back to the target's state through the parent's journaled restore, recorded in
   * history as a fork naming the child.
   */
  async fork(agent: HostAgent, target: string, selection?: RestoreSelection): Promise<RewindReport> {
    const { ctx, state } = this.deps
    const session = agent.session
    const sessionId = session.header.id
    if (isSubagentSession(session)) {
      throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never forked')
    }
    const sessions = ctx.get('sessions') as HostSessions | undefined
    if (sessions === undefined || typeof sessions.get !== 'function' || sessions.get(sessionId) !== session) {
      throw new RewindError(Codes.forkSourceNotLive, `session "${sessionId}" is not live in this host's session store; nothing was changed`)
    }
    const agents = ctx.get('agents') as HostAgentFactory | undefined
    if (agents === undefined || typeof agents.create !== 'function') {
      throw new RewindError(Codes.agentsUnavailable, 'this host has no agent registry to create the forked session in')
    }
    await this.recovery.settled(sessionId)
    if (!state.begin(sessionId)) {
      throw new RewindError(Codes.inFlight, 'a rewind of this session is already running')
    }
    try {
      return await this.forkLocked(agent, agents, target, selection)
    } finally {
      state.end(sessionId)
    }
  }

  private async forkLocked(agent: HostAgent, agents: HostAgentFactory, target: string, selection: RestoreSelection | undefined): Promise<RewindReport> {
    const { ctx, logger } = this.deps
    const session = agent.session
    const sessionId = session.header.id
    let plan = planFork(session, target)
    await this.files.checkSelection(session, plan.targetSeq, selection)
    const previewText = targetPreview(session, plan.targetSeq, plan.targetText)
    const opId = randomUUID()
    let stoppedTurn = false
    if (agent.status !== 'idle') {
      stoppedTurn = true
      await this.stop(agent)
      plan = planFork(session, `@${plan.targetSeq}`)
    }
    const work = async (): Promise<RewindReport> => {
      const childId = `session-${randomUUID()}`
      const childSpec = await childOptions(ctx, agent, childId, plan.boundarySeq + 1)
      // Step 1 (crash order): the parent's history entry `started`, naming the child to be, durable
      // before the child exists or a file changes.
      const es = await this.deps.engine.session(session)
      // Step 0: the file half prepared before anything changes (see the in-place rewind).
      const files = await this.files.prepareFiles(session, es, plan.targetSeq, opId, selection)
      try {
        await step(() => es.begin({ opId, targetSeq: plan.targetSeq, targetText: previewText, forkChildSessionId: childId }, this.deps.settings.get().historyLimit))
      } catch (error) {
        es.discardPrepared(opId)
        throw error
      }
      crashPoint('fork:started')
      // Step 2: the child. Nothing has changed until it exists: a refusal here leaves parent and
      // files alone, and the entry says the fork was abandoned.
      try {
        await agents.create(childSpec)
      } catch (error) {
        es.discardPrepared(opId)
        await this.files.settle(es, opId, 'abandoned')
        throw error
      }
      crashPoint('fork:child-created')
      // Step 3: the child's log durable before the first file changes.
      const child = agents.get(childId)
      let durable: { code: string; message: string } | undefined
      try {
        if (child !== undefined) await makeDurable(ctx, child.session)
      } catch (error) {
        const e = toRewindError(error, Codes.flushFailed)
        durable = { code: e.code, message: e.message }
      }
      crashPoint('fork:child-durable')
      try {
        await attachToParentWorkspace(ctx, sessionId, childId)
      } catch (error) {
        logger.warn('forked session %s not attached to the workspace of %s: %s', childId, sessionId, (error as Error).message)
      }
      // Step 4: the journaled restore.
      if (durable !== undefined) es.discardPrepared(opId)
      const { outcome, notRestored } = durable === undefined
        ? await this.files.restoreFiles(session, es, plan.targetSeq, opId, selection, files)
        : { outcome: { ...EMPTY_OUTCOME, completed: false }, notRestored: durable }
      if (child !== undefined && notRestored === undefined) {
        const childCwd = trackedCwd(child.session)
        if (childCwd !== undefined) await resyncObservations(ctx, child.session, childCwd, [...outcome.written], [...outcome.deleted], logger)
      }
      const report: RewindReport = {
        opId, targetSeq: plan.targetSeq, targetText: plan.targetText, preview: previewText, stoppedTurn,
        markerSeq: undefined, withdrawn: [], filesNotRestored: notRestored, outcome,
        fork: { childSessionId: childId, boundarySeq: plan.boundarySeq },
      }
      // Step 5: the entry gets its outcome.
      await this.files.record(es, report)
      crashPoint('fork:done')
      return report
    }
    const report = await this.asMaintenance(agent, work, () => {
      plan = planFork(session, `@${plan.targetSeq}`)
    })
    report.stoppedTurn ||= stoppedTurn
    return report
  }

  /**
   * Runs `work` as the agent's maintenance task, so new input waits until it is done. When
   * another activity owns the agent (a turn started between the stop and now), that one is
   * stopped too, once, `replan` runs on the log as it now is, and the task is tried again.
   */
  private async asMaintenance(agent: HostAgent, work: () => Promise<RewindReport>, replan: () => void): Promise<RewindReport> {
    if (typeof agent.runMaintenance !== 'function') return await work()
    let started: Promise<RewindReport>
    try {
      // runMaintenance throws synchronously (before `work` runs) when another activity owns the agent.
      started = agent.runMaintenance(() => work())
    } catch {
      await this.stop(agent)
      replan()
      try {
        started = agent.runMaintenance(() => work())
      } catch (error) {
        throw new RewindError(Codes.stopFailed, `the agent stayed busy: ${(error as Error).message}; nothing was changed`)
      }
      const report = await started
      report.stoppedTurn = true
      return report
    }
    return await started
  }

  private async stop(agent: HostAgent): Promise<void> {
    agent.cancel({ kind: 'user' }, { keepInbox: true })
    const settled = await Promise.race([agent.whenIdle().then(() => 'idle' as const), sleep(this.deps.stopTimeoutMs)])
    if (settled !== 'idle' || agent.status !== 'idle') {
      throw new RewindError(Codes.stopFailed, `the running turn did not stop within ${this.deps.stopTimeoutMs} ms; nothing was changed`)
    }
  }

}
