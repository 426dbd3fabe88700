/**
 * The rewind (seed 000 §4): plan from the live log, stop a running turn, drop pending steering,
 * append the marker, restore files through the journaled restore, re-sync DSH's fs observation,
 * record history, and report. Also the candidate listing of a bare `/rewind`.
 */
import { randomUUID } from 'node:crypto'
import type { Addon } from './native.ts'
import { callNative } from './native.ts'
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostContext, HostFs, HostLogger, HostSession } from './host.ts'
import type { ChainLink, FilesPort, RestoreOutcome, SkippedPath } from './ports.ts'
import type { SettingsModel } from './settings.ts'
import { SessionState, isSubagentSession } from './state.ts'
import { trackedCwd } from './capture.ts'
import { refusedScope } from './scan.ts'
import type { HistoryPort } from './history.ts'
import { type Locale, format } from './locales.ts'
import { type HostAgentFactory, type HostSessions, attachToParentWorkspace, childComposition, forkAncestors } from './fork.ts'

/** What a rewind did. */
export interface RewindReport {
  opId: string
  targetSeq: number
  targetText: string
  preview: string
  stoppedTurn: boolean
  markerSeq: number | undefined
  withdrawn: string[]
  /** Why files were not restored at all, when they were not. */
  filesNotRestored: { code: string; message: string } | undefined
  outcome: RestoreOutcome
  /** Set when the rewind forked: the child session the conversation continues in. */
  fork?: { childSessionId: string; boundarySeq: number }
}

/** Dependencies. */
export interface RewindDeps {
  ctx: HostContext
  state: SessionState
  files: () => FilesPort
  history: HistoryPort
  settings: SettingsModel
  logger: HostLogger
  locale: () => Locale
  /** How long to wait for a cancelled turn to stop. */
  stopTimeoutMs: number
}

const EMPTY_OUTCOME: RestoreOutcome = { written: [], deleted: [], skipped: [], failed: [], completed: true }

/** The live log as the planner reads it. */
export function eventsJson(session: HostSession): string {
  return JSON.stringify(session.events)
}

/** Candidates of a session, newest first. */
export function candidates(session: HostSession): Addon.BindingCandidate[] {
  return callNative(native => native.listCandidates(eventsJson(session)))
}

function sleep(ms: number): Promise<'timeout'> {
  return new Promise(resolve => setTimeout(() => resolve('timeout'), ms).unref?.())
}

/** The rewind service. */
export class Rewinder {
  constructor(private readonly deps: RewindDeps) {}

  /** `/rewind` and `/undo`: a bare call lists candidates; otherwise rewinds. */
  async command(agent: HostAgent, rawInput: string, engine: boolean): Promise<{ kind: 'success'; text: string } | { kind: 'error'; text: string }> {
    const locale = this.deps.locale()
    let input = rawInput.trim()
    // `--fork` first: continue from the target in a new child session instead of in place.
    const forkFlag = /^--fork(?:\s+|$)/.exec(input)
    if (forkFlag !== null) input = input.slice(forkFlag[0].length).trim()
    try {
      if (input === '' && !engine) return { kind: 'success', text: this.listText(agent.session, locale) }
      if (input === '') throw new RewindError(Codes.badTarget, 'no rewind target given: use @<seq>')
      if (engine && !input.startsWith('@')) {
        throw new RewindError(Codes.badTarget, `the engine command takes @<seq>, got "${input}"`)
      }
      const report = forkFlag !== null ? await this.fork(agent, input) : await this.rewind(agent, input)
      return { kind: 'success', text: reportText(report, locale) }
    } catch (error) {
      const e = toRewindError(error)
      return { kind: 'error', text: format(locale, 'error', { code: e.code, message: e.message }) }
    }
  }

  /** The numbered candidate list. */
  listText(session: HostSession, locale: Locale): string {
    if (isSubagentSession(session)) throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never rewound')
    const list = candidates(session)
    if (list.length === 0) return format(locale, 'listEmpty')
    const lines = [format(locale, 'listHeader')]
    for (const c of list) {
      lines.push(`${c.index}. @${c.seq} ${c.pending ? `${format(locale, 'pendingTag')} ` : ''}${c.preview}`)
    }
    lines.push(format(locale, 'listHint'))
    return lines.join('\n')
  }

  /** Rewind `agent`'s session to `target` (`@<seq>` or `<n>`). */
  async rewind(agent: HostAgent, target: string): Promise<RewindReport> {
    const { state } = this.deps
    const session = agent.session
    const sessionId = session.header.id
    if (isSubagentSession(session)) {
      throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never rewound')
    }
    if (!state.begin(sessionId)) {
      throw new RewindError(Codes.inFlight, 'a rewind of this session is already running')
    }
    try {
      return await this.rewindLocked(agent, target)
    } finally {
      state.end(sessionId)
    }
  }

  private async rewindLocked(agent: HostAgent, target: string): Promise<RewindReport> {
    const session = agent.session
    // 1. Resolve the target on the live log (refusals carry the planner's codes; nothing changed yet).
    let plan = callNative(native => native.planRewind(eventsJson(session), target))
    const previewText = callNative(native => native.listCandidates(eventsJson(session))).find(c => c.seq === plan.targetSeq)?.preview ?? plan.targetText
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
      plan = callNative(native => native.planRewind(eventsJson(session), `@${plan.targetSeq}`))
      if (plan.marker == null) throw new RewindError(Codes.failed, 'the target changed while the turn stopped')
    }

    // 3–5 run as one maintenance task: new input waits until the files are back.
    const work = async (): Promise<RewindReport> => {
      const marker = plan.marker!
      // The append validates before it changes anything; only once it succeeded is pending
      // steering (which belongs to the future being rolled back) withdrawn.
      const event = session.append('user/message', { ...marker.data, id: randomUUID() }, {
        surfaceOp: { op: 'replace', start: marker.surfaceOp.start, end: marker.surfaceOp.end },
        sourceEventSeqs: [...marker.sourceEventSeqs],
      })
      const withdrawn = withdraw(agent, plan.withdrawPending)
      const { outcome, notRestored } = await this.restoreFiles(session, plan.targetSeq, opId)
      return {
        opId, targetSeq: plan.targetSeq, targetText: plan.targetText, preview: previewText, stoppedTurn,
        markerSeq: event.seq, withdrawn, filesNotRestored: notRestored, outcome,
      }
    }
    const report = await this.asMaintenance(agent, work, () => {
      plan = callNative(native => native.planRewind(eventsJson(session), `@${plan.targetSeq}`))
      if (plan.marker == null) throw new RewindError(Codes.failed, 'the target changed while the turn stopped')
    })
    report.stoppedTurn ||= stoppedTurn
    await this.record(session, report)
    return report
  }

  /**
   * Fork rewind: continue from `target` in a new child session. The child is seeded with the
   * parent's events through the planner's boundary (the last event before the target's turn),
   * its header names the parent (`parentSession`, `seedLength`); the parent's log is not touched.
   * The files go back to the target's state through the parent's journaled restore, recorded in
   * history as a fork naming the child.
   */
  async fork(agent: HostAgent, target: string): Promise<RewindReport> {
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
    if (!state.begin(sessionId)) {
      throw new RewindError(Codes.inFlight, 'a rewind of this session is already running')
    }
    try {
      return await this.forkLocked(agent, agents, target)
    } finally {
      state.end(sessionId)
    }
  }

  private async forkLocked(agent: HostAgent, agents: HostAgentFactory, target: string): Promise<RewindReport> {
    const { ctx, logger } = this.deps
    const session = agent.session
    const sessionId = session.header.id
    let plan = callNative(native => native.planFork(eventsJson(session), target))
    const previewText = callNative(native => native.listCandidates(eventsJson(session))).find(c => c.seq === plan.targetSeq)?.preview ?? plan.targetText
    const opId = randomUUID()
    let stoppedTurn = false
    if (agent.status !== 'idle') {
      stoppedTurn = true
      await this.stop(agent)
      plan = callNative(native => native.planFork(eventsJson(session), `@${plan.targetSeq}`))
    }
    const work = async (): Promise<RewindReport> => {
      const childId = `session-${randomUUID()}`
      const seed = session.events.slice(0, plan.boundarySeq + 1)
      const cwd = session.header.cwd
      const composition = await childComposition(ctx, session)
      // Nothing has changed until the child exists: a refusal here leaves parent and files alone.
      await agents.create({
        sessionId: childId,
        seed,
        meta: {
          ...(typeof cwd === 'string' && cwd !== '' ? { cwd } : {}),
          parentSession: sessionId,
          seedLength: seed.length,
          ...(composition.agentPreset !== undefined ? { agentPreset: composition.agentPreset } : {}),
        },
        agentOptions: (agent as { options?: unknown }).options,
        ...(composition.setup !== undefined ? { setup: composition.setup } : {}),
      })
      try {
        await attachToParentWorkspace(ctx, sessionId, childId)
      } catch (error) {
        logger.warn('forked session %s not attached to the workspace of %s: %s', childId, sessionId, (error as Error).message)
      }
      const { outcome, notRestored } = await this.restoreFiles(session, plan.targetSeq, opId)
      const child = agents.get(childId)
      if (child !== undefined && notRestored === undefined) {
        const childCwd = trackedCwd(child.session)
        if (childCwd !== undefined) await resyncObservations(ctx, child.session, childCwd, [...outcome.written], [...outcome.deleted], logger)
      }
      return {
        opId, targetSeq: plan.targetSeq, targetText: plan.targetText, preview: previewText, stoppedTurn,
        markerSeq: undefined, withdrawn: [], filesNotRestored: notRestored, outcome,
        fork: { childSessionId: childId, boundarySeq: plan.boundarySeq },
      }
    }
    const report = await this.asMaintenance(agent, work, () => {
      plan = callNative(native => native.planFork(eventsJson(session), `@${plan.targetSeq}`))
    })
    report.stoppedTurn ||= stoppedTurn
    await this.record(session, report)
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

  /** The file half; never fails the rewind. */
  private async restoreFiles(session: HostSession, targetSeq: number, opId: string): Promise<{ outcome: RestoreOutcome; notRestored: { code: string; message: string } | undefined }> {
    const cwd = trackedCwd(session)
    if (cwd === undefined) return { outcome: EMPTY_OUTCOME, notRestored: { code: 'no-cwd', message: 'reasonNoCwd' } }
    const files = this.deps.files()
    const unavailable = files.unavailable()
    if (unavailable !== undefined) return { outcome: EMPTY_OUTCOME, notRestored: unavailable }
    const sessionId = session.header.id
    // Changes made to tracked files since the last message (by a shell command, an editor, …)
    // are not recorded yet: a re-check at the latest message (the marker, for an in-place
    // rewind) records the state they replaced, so the restore brings those files back too.
    const settings = this.deps.settings.get()
    const anchor = this.deps.state.anchor(session)
    if (settings.backups && anchor !== undefined) {
      try {
        await this.deps.state.run(sessionId, () => files.recheck(sessionId, cwd, anchor, settings.maxFileBytes))
      } catch (error) {
        this.deps.logger.warn('re-check of %s before the restore failed: %s', sessionId, (error as Error).message)
      }
    }
    // Files changed since the last workspace scan are not recorded yet either: a boundary scan
    // records them (a file no tool touched is noted as changed outside the agent, left as is).
    if (settings.backups && settings.trackAll && anchor !== undefined) {
      try {
        const report = await this.deps.state.run(sessionId, () => files.scan(sessionId, cwd, {
          phase: 'boundary', anchorSeq: anchor,
          maxFileBytes: settings.maxFileBytes, maxBaselineBytes: settings.maxBaselineBytes, maxFiles: settings.maxFiles,
        }))
        if (report.refused !== undefined && report.refused !== null) this.deps.state.scanRefused.set(sessionId, report.refused)
        else this.deps.state.scanRefused.delete(sessionId)
      } catch (error) {
        this.deps.logger.warn('workspace scan of %s before the restore failed: %s', sessionId, (error as Error).message)
      }
    }
    try {
      const ancestors: ChainLink[] = await forkAncestors(this.deps.ctx, session.header)
      const restored = await this.deps.state.run(sessionId, () => files.restore(sessionId, cwd, targetSeq, opId, ancestors))
      const outcome = { ...restored, notCovered: [...refusedScope(this.deps.state, sessionId), ...(restored.notCovered ?? [])] }
      await resyncObservations(this.deps.ctx, session, cwd, [...outcome.written], [...outcome.deleted], this.deps.logger)
      return { outcome, notRestored: undefined }
    } catch (error) {
      const e = toRewindError(error, Codes.restoreFailed)
      this.deps.logger.warn('file restore of %s failed: %s', sessionId, e.message)
      return { outcome: { ...EMPTY_OUTCOME, completed: false }, notRestored: { code: e.code, message: e.message } }
    }
  }

  private async record(session: HostSession, report: RewindReport): Promise<void> {
    if (report.filesNotRestored?.code === 'pending-only') return
    try {
      await this.deps.history.record(session, report, this.deps.settings.get().historyLimit)
    } catch (error) {
      // A history failure never fails the rewind.
      this.deps.logger.warn('history entry for %s not recorded: %s', report.opId, (error as Error).message)
    }
  }
}

function withdraw(agent: HostAgent, ids: readonly string[]): string[] {
  const removed: string[] = []
  for (const id of ids) {
    try {
      if (agent.inbox.remove(id)) removed.push(id)
    } catch {
      // Already claimed or gone: nothing to withdraw.
    }
  }
  return removed
}

/**
 * Tell DSH's fs observation policy the new state of every restored or deleted path, so the next
 * edit of such a file is judged against what is on disk now (not refused as stale).
 */
export async function resyncObservations(ctx: HostContext, session: HostSession, cwd: string, written: string[], deleted: string[], logger: HostLogger): Promise<void> {
  const fs = ctx.get('fs') as HostFs | undefined
  if (fs === undefined) return
  const agents = ctx.get('agents') as { get(id: string): HostAgent | undefined } | undefined
  const agent = agents?.get(session.header.id)
  const actor = { agent: agent ?? { session } }
  for (const path of [...written, ...deleted]) {
    try {
      const target = await fs.resolve(path, { cwd })
      const info = await fs.stat(target)
      ctx.emit('fs/observed', target, info === undefined ? { kind: 'absent' } : { kind: 'present', version: info.version }, actor)
    } catch (error) {
      logger.debug('observation re-sync of %s skipped: %s', path, (error as Error).message)
    }
  }
}

function section(locale: Locale, title: string, lines: string[]): string[] {
  const out = [`${title} (${lines.length}):`]
  if (lines.length === 0) out.push(`- ${format(locale, 'none')}`)
  else for (const line of lines) out.push(`- ${line}`)
  return out
}

function skippedLine(s: SkippedPath): string {
  return `${s.path}: ${s.reason}`
}

const REASON_KEYS: Record<string, 'reasonBackupsOff' | 'reasonStoreNewer' | 'reasonStoreUnavailable' | 'reasonPendingOnly' | 'reasonNoCwd'> = {
  'pending-only': 'reasonPendingOnly',
  'no-cwd': 'reasonNoCwd',
  'rewind/store-newer': 'reasonStoreNewer',
  'rewind/backups-off': 'reasonBackupsOff',
}

/** The durable command result: target, then Written / Deleted / Skipped / Failed paths. */
export function reportText(report: RewindReport, locale: Locale): string {
  const lines: string[] = report.fork === undefined
    ? [format(locale, 'rewoundTo', { seq: report.targetSeq, preview: JSON.stringify(report.preview) })]
    : [
        format(locale, 'forkedTo', { seq: report.targetSeq, preview: JSON.stringify(report.preview) }),
        format(locale, 'forkChild', { child: report.fork.childSessionId }),
      ]
  if (report.stoppedTurn) lines.push(format(locale, 'stopped'))
  if (report.withdrawn.length > 0) lines.push(format(locale, 'withdrawn', { n: report.withdrawn.length }))
  if (report.filesNotRestored !== undefined) {
    const key = REASON_KEYS[report.filesNotRestored.code]
    const reason = key !== undefined ? format(locale, key) : `${format(locale, 'reasonStoreUnavailable')} (${report.filesNotRestored.code}: ${report.filesNotRestored.message})`
    lines.push(format(locale, 'filesNotRestored', { reason }))
  }
  const o = report.outcome
  lines.push(...section(locale, format(locale, 'written'), o.written))
  lines.push(...section(locale, format(locale, 'deleted'), o.deleted))
  lines.push(...section(locale, format(locale, 'skipped'), o.skipped.map(skippedLine)))
  lines.push(...section(locale, format(locale, 'failed'), o.failed.map(f => `${f.path}: ${f.message}`)))
  // Shown only when the workspace scan found any: files changed outside the agent's tool calls
  // (left as they are), and what the scan does not cover (a budget, the per-file cap).
  if ((o.outside ?? []).length > 0) lines.push(...section(locale, format(locale, 'outside'), [...o.outside!]))
  if ((o.notCovered ?? []).length > 0) lines.push(...section(locale, format(locale, 'notCovered'), o.notCovered!.map(skippedLine)))
  return lines.join('\n')
}
