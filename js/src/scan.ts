/**
 * Every change comes back: the workspace scan around tool calls.
 *
 * DSH's `write` / `edit` / `str_replace_editor` announce the file they change (fs intents, see
 * `capture.ts`). Every other tool — `bash`, the persistent shell, background jobs, subagents,
 * MCP tools, tools this plugin has never heard of — changes files silently. For those, the
 * session's workspace is scanned around the call (`tools/execute`, outermost listener):
 *
 *   before the call   the workspace index is brought up to date (a change that appeared since the
 *                     last scan during the turn — a background job, an editor — is recorded in the
 *                     current turn's group);
 *   after the call    every file the call created, modified, deleted, renamed or chmod-ed is
 *                     recorded as that call's before-state (taken from the index, whose contents
 *                     the store already holds);
 *   at each message   the index is refreshed (and built the first time: the baseline); a change to
 *                     a file no tool ever touched is noted as "changed outside the agent";
 *   when a job ends   (DSH's `jobs` service) the owner's workspace is scanned like before a call:
 *                     what a background job wrote joins the owner's current turn.
 *
 * A subagent's calls are not scanned on their own: the parent's call that ran the subagent sees
 * their changes. The scan is skipped while the setting "Track every change" is off, while backups
 * are off, and for tools that only read (a short list of DSH's read-only tools).
 */
import type { HostAgent, HostContext, HostEvent, HostLogger, HostSession, HostToolExecution } from './host.ts'
import type { FilesPort, NotCoveredPath, ScanPhase, ScanReport, ScanRequest } from './ports.ts'
import type { RewindSettings, SettingsModel } from './settings.ts'
import { SessionState, isCapturedTool, isHumanMessage } from './state.ts'
import { trackedCwd } from './capture.ts'

/**
 * DSH tools that never change the workspace: not scanned around (their calls would only cost
 * time). Any tool not named here — known or not — is scanned around.
 */
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(['read', 'grep', 'glob', 'ls', 'web_fetch', 'web_search', 'job_output', 'todo_read'])

/** Whether the scan runs around a call of this tool. */
export function isScannedTool(exec: { name?: unknown; arguments?: unknown }): boolean {
  if (typeof exec.name !== 'string') return false
  if (isCapturedTool(exec)) return false
  if (exec.name === 'str_replace_editor') return false // `view`: reads only
  return !READ_ONLY_TOOLS.has(exec.name)
}

/** Dependencies of the scan pipeline. */
export interface ScanDeps {
  ctx: HostContext
  state: SessionState
  files: () => FilesPort
  settings: SettingsModel
  logger: HostLogger
}

/** Scanned calls in flight per session (a message-boundary scan waits for none of them). */
class InFlight {
  private readonly running = new Map<string, number>()

  enter(sessionId: string): void {
    this.running.set(sessionId, (this.running.get(sessionId) ?? 0) + 1)
  }

  leave(sessionId: string): void {
    const n = (this.running.get(sessionId) ?? 1) - 1
    if (n <= 0) this.running.delete(sessionId)
    else this.running.set(sessionId, n)
  }

  /** Whether at least `atLeast` scanned calls of the session run now. */
  busy(sessionId: string, atLeast = 1): boolean {
    return (this.running.get(sessionId) ?? 0) >= atLeast
  }

  forget(sessionId: string): void {
    this.running.delete(sessionId)
  }
}

/** The scan request of `phase` under the current settings. */
export function scanRequest(settings: RewindSettings, phase: ScanPhase, anchorSeq: number, callId?: string, ok?: boolean): ScanRequest {
  return {
    phase,
    anchorSeq,
    ...(callId === undefined ? {} : { callId }),
    ...(ok === undefined ? {} : { ok }),
    maxFileBytes: settings.maxFileBytes,
    maxBaselineBytes: settings.maxBaselineBytes,
    maxFiles: settings.maxFiles,
  }
}

/** Remember whether a budget refused the session's latest scan; returns the refusal, if any. */
export function noteRefusal(state: SessionState, sessionId: string, report: ScanReport): { code: string; message: string } | undefined {
  const refused = report.refused ?? undefined
  if (refused === undefined) state.scanRefused.delete(sessionId)
  else state.scanRefused.set(sessionId, refused)
  return refused
}

/**
 * The whole workspace as a not-covered entry when the latest scan of the session was refused by a
 * budget (reported in previews, the command report and the history entry).
 */
export function refusedScope(state: SessionState, sessionId: string): NotCoveredPath[] {
  const refused = state.scanRefused.get(sessionId)
  return refused === undefined ? [] : [{ path: '.', reason: `${refused.message} (${refused.code})` }]
}

/**
 * The not-covered list of a preview or restore: the refused scope first, then the scan's own
 * entries, without the paths the report already lists as skipped or uncovered (one line per path).
 */
export function notCoveredOf(state: SessionState, sessionId: string, o: { notCovered?: NotCoveredPath[]; skipped: { path: string }[]; uncovered?: string[] }): NotCoveredPath[] {
  const listed = new Set([...o.skipped.map(s => s.path), ...(o.uncovered ?? [])])
  return [...refusedScope(state, sessionId), ...(o.notCovered ?? []).filter(n => !listed.has(n.path))]
}

/** Register the scan pipeline on `ctx`. */
export function registerScan(deps: ScanDeps): void {
  const { ctx, state, logger } = deps
  const scans = new InFlight()
  /** Budget refusals already logged per session (one warning, not one per call). */
  const refusedLogged = new Set<string>()
  /**
   * Per session, the anchor of its last completed after-scan when no other scan came since. The
   * next call of the same turn then needs no before-scan: that after-scan left the index current,
   * and whatever changed in between (a background job, an editor) is recorded by this call's
   * after-scan as a change of the same turn — restorable to the same messages either way.
   */
  const afterAt = new Map<string, number>()

  /** The tracked session and cwd of a call, or `undefined` when the scan does not apply. */
  function target(session: HostSession | undefined): { sessionId: string; cwd: string } | undefined {
    if (session === undefined) return undefined
    const settings = deps.settings.get()
    if (!settings.backups || !settings.trackAll) return undefined
    const cwd = trackedCwd(session)
    if (cwd === undefined) return undefined
    if (deps.files().unavailable() !== undefined) return undefined
    return { sessionId: session.header.id, cwd }
  }

  async function scan(sessionId: string, cwd: string, phase: ScanPhase, anchorSeq: number, callId?: string, ok?: boolean): Promise<ScanReport | undefined> {
    const request = scanRequest(deps.settings.get(), phase, anchorSeq, callId, ok)
    afterAt.delete(sessionId)
    try {
      const report = await state.run(sessionId, () => deps.files().scan(sessionId, cwd, request))
      if (phase === 'after' && report.refused == null) afterAt.set(sessionId, anchorSeq)
      const refused = noteRefusal(state, sessionId, report)
      state.lastScan.set(sessionId, { mode: report.mode ?? 'full', fullReason: report.fullReason ?? null, elapsedMs: report.elapsedMs })
      if (refused === undefined) refusedLogged.delete(sessionId)
      else if (!refusedLogged.has(sessionId)) {
        refusedLogged.add(sessionId)
        logger.warn('workspace scan of %s is off: %s (%s)', cwd, refused.message, refused.code)
      }
      return report
    } catch (error) {
      // The tool still runs: a failed scan costs only the restorability of what the call changes.
      logger.warn('workspace scan (%s) of session %s failed: %s', phase, sessionId, (error as Error).message)
      return undefined
    }
  }

  // A call that is not scanned passes straight through (no promise of this listener's own: this
  // runs around every tool call).
  ctx.on('tools/execute', (exec: HostToolExecution, next: () => Promise<unknown>) => {
    const session = exec.agent?.session
    const where = isScannedTool(exec) ? target(session) : undefined
    if (where === undefined || session === undefined) return next()
    return scanned(exec, session, where, next)
  }, { prepend: true })

  async function scanned(exec: HostToolExecution, session: HostSession, where: { sessionId: string; cwd: string }, next: () => Promise<unknown>): Promise<unknown> {
    const { sessionId, cwd } = where
    if (state.rewinding(sessionId)) return await next()
    // A workspace over a budget is not walked again around every call (each walk would go up to
    // the limit): it is retried at the next message.
    if (state.scanRefused.has(sessionId)) return await next()
    const anchor = state.anchor(session)
    if (anchor === undefined) return await next()
    scans.enter(sessionId)
    try {
      // The before-scan is skipped when this session's last scan was the after-scan of a call of
      // the same turn and no other scanned call runs (see `afterAt`).
      if (afterAt.get(sessionId) !== anchor || scans.busy(sessionId, 2)) await scan(sessionId, cwd, 'before', anchor, exec.callId)
      let ok = false
      try {
        const result = await next()
        ok = (result as { isError?: unknown } | undefined)?.isError !== true
        return result
      } finally {
        // A failed or cancelled call may still have changed files: its changes are recorded too.
        await scan(sessionId, cwd, 'after', state.anchor(session) ?? anchor, exec.callId, ok)
      }
    } finally {
      scans.leave(sessionId)
    }
  }

  ctx.on('session/event', (session: HostSession, event: HostEvent) => {
    if (!isHumanMessage(event)) return
    const where = target(session)
    if (where === undefined) return
    if (state.rewinding(where.sessionId)) return
    // A message that arrives while a scanned call runs (steering) is not a boundary of the
    // workspace: the call's own after-scan records what it changed.
    if (scans.busy(where.sessionId)) return
    void scan(where.sessionId, where.cwd, 'boundary', event.seq)
  }, { global: true })

  // The first scan of a workspace builds its baseline; start it when the session opens so the
  // first tool call finds it done (or waits for it in the session's queue).
  ctx.on('agent/created', ({ agent }: { agent: HostAgent }) => {
    const session = agent?.session
    const where = target(session)
    if (where === undefined || session === undefined) return
    const anchor = state.anchor(session) ?? 0
    void scan(where.sessionId, where.cwd, 'boundary', anchor)
  }, { global: true })

  // A background job (DSH's `jobs` service: `bash` with `run_in_background`, and any other job
  // producer) may write long after the call that started it returned: when it settles, the
  // owner's workspace is scanned and what it changed joins the owner's current turn.
  ctx.inject(['jobs'], (sub) => {
    const jobs = sub.get('jobs') as { onJobDone?(listener: (snapshot: unknown, owner: HostAgent | undefined) => void): () => void } | undefined
    if (typeof jobs?.onJobDone !== 'function') return
    sub.effect(() => jobs.onJobDone!((_snapshot, owner) => {
      const session = owner?.session
      const where = target(session)
      if (where === undefined || session === undefined || state.rewinding(where.sessionId) || state.scanRefused.has(where.sessionId)) return
      const anchor = state.anchor(session)
      if (anchor === undefined) return
      void scan(where.sessionId, where.cwd, 'before', anchor)
    }), 'dsh-rewind job scan')
  })

  ctx.on('agent/disposed', ({ agent }: { agent: HostAgent }) => {
    const id = agent?.session?.header?.id
    if (id !== undefined) {
      scans.forget(id)
      state.scanRefused.delete(id)
      state.lastScan.delete(id)
    }
  }, { global: true })

}
