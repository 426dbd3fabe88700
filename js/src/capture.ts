/**
 * The checkpoint pipeline: translate DSH tool and session events into snapshot-store calls.
 *
 *   fs/write-intent, fs/edit-intent   capture the before-state of the resolved target (prepended
 *                                     listeners that always call `next()` exactly once)
 *   tools/post-execute                commit the capture (or drop it when the call failed)
 *   tools/result                      discard a capture still pending (safety net)
 *   session/event                     at each new human `user/message`, re-check tracked files;
 *                                     when the model names a write tool, take the locks ahead
 *   agent/created                     session-format guard
 */
import type { HostAgent, HostContext, HostEvent, HostFsTarget, HostLogger, HostSession, HostToolExecution, HostToolResult } from './host.ts'
import { forkAncestors } from './fork.ts'
import type { FilesPort } from './ports.ts'
import type { SettingsModel } from './settings.ts'
import { effectiveCwd, forgetCwd, observeCwd } from './contract/workdir.ts'
import { SessionState, WRITE_TOOLS, captureKey, isCapturedTool, isHumanMessage, isSubagentSession, toolActor } from './state.ts'

/**
 * The session-format tag recorded per session: DSH's `SessionHeader.version`. Snapshots anchor
 * to log seqs, so when DSH changes its session format the session's snapshots are cleared rather
 * than re-mapped.
 */
export function sessionFormat(session: HostSession): string {
  const version = session.header.version
  return `dsh-session-v${typeof version === 'number' ? version : 0}`
}

/** Dependencies of the pipeline. */
export interface CaptureDeps {
  ctx: HostContext
  state: SessionState
  files: () => FilesPort
  settings: SettingsModel
  logger: HostLogger
}

/**
 * Where a session's files live, or `undefined` when it has no cwd or is not tracked: the
 * session's effective working directory (DSH 0.2.x `working-directory/change`, see
 * `contract/workdir.ts`), else the header's `cwd`.
 */
export function trackedCwd(session: HostSession): string | undefined {
  if (isSubagentSession(session)) return undefined
  const cwd = effectiveCwd(session) ?? session.header.cwd
  return typeof cwd === 'string' && cwd !== '' ? cwd : undefined
}

/** Register the pipeline on `ctx`. */
export function registerCapture(deps: CaptureDeps): void {
  const { ctx, state, logger } = deps

  /**
   * The host path of an fs target, through the host's `fs` service: its `processPath`, looked up
   * once per service — when the service comes (or is replaced), in a sub-plugin that depends on
   * it — and dropped when it goes. A lookup through the plugin's context on every call would cost
   * more than the capture itself (the context and the service are proxies that make new objects
   * on every property read). `undefined` while the host has no `fs` service.
   */
  let hostPath: ((target: HostFsTarget) => string) | undefined
  ctx.inject(['fs'], (sub) => {
    const fs = sub.get('fs') as import('./host.ts').HostFs | undefined
    if (fs === undefined) return
    const processPath = fs.processPath
    sub.effect(() => {
      const mine = (target: HostFsTarget): string => processPath.call(fs, target)
      hostPath = mine
      return () => {
        // Whichever order the host stops the old service's sub-plugin and starts the new one's.
        if (hostPath === mine) hostPath = undefined
      }
    }, 'dsh-rewind fs paths')
  })

  /**
   * Capture the before-state of a write-tool call's target. `undefined` when that is done (or
   * not wanted) before returning — the usual case: no promise is made — else a promise of it.
   * Never throws or rejects: a failed capture is logged and the tool still runs.
   */
  function capture(target: HostFsTarget, actor: unknown): Promise<void> | undefined {
    const exec = toolActor(actor)
    if (exec === undefined || !isCapturedTool(exec)) return undefined
    const settings = deps.settings.get()
    if (!settings.backups) return undefined
    const session = exec.agent.session
    const cwd = trackedCwd(session)
    if (cwd === undefined) return undefined
    // Whether the store is usable (not written by a newer build) is checked by the capture itself
    // (a store that refuses answers `rewind/store-newer`, below), not by a call of its own per write.
    const files = deps.files()
    const sessionId = session.header.id
    const callId = exec.callId
    let path: string
    const map = hostPath
    if (map === undefined) return undefined
    try {
      path = map(target)
    } catch (error) {
      logger.warn('cannot map %s to a host path; not captured: %s', target.displayPath, (error as Error).message)
      return undefined
    }
    const failed = (error: unknown): void => {
      // A store this build must not write (newer, or unavailable): captures are skipped quietly,
      // as the status and the rewind dialog say.
      if (files.unavailable() !== undefined) return
      // The tool still runs: a failed capture costs only the restorability of this path.
      logger.warn('before-state capture of %s failed: %s', target.displayPath, (error as Error).message)
    }
    const captured = (): void => {
      state.pending.set(captureKey(sessionId, callId), { sessionId, cwd, callId })
    }
    let queued: Promise<void> | undefined
    try {
      // The anchor the commit will name (the latest human message), so the store can settle the
      // commit without a write of its own.
      const anchor = state.anchor(session)
      queued = state.runNow(sessionId, () => files.capture(sessionId, cwd, callId, path, settings.maxFileBytes, anchor))
    } catch (error) {
      failed(error)
      return undefined
    }
    if (queued === undefined) {
      captured()
      return undefined
    }
    return queued.then(captured, failed)
  }

  function intent<T>(target: HostFsTarget, actor: unknown, next: () => T | Promise<T>): T | Promise<T> {
    let started: Promise<void> | undefined
    try {
      started = capture(target, actor)
    } catch (error) {
      logger.warn('capture listener failed: %s', (error as Error).message)
    }
    return started === undefined ? next() : started.then(next)
  }

  ctx.on('fs/write-intent', (target: HostFsTarget, actor: unknown, next: () => unknown) => intent(target, actor, next), { prepend: true })
  ctx.on('fs/edit-intent', (target: HostFsTarget, actor: unknown, next: () => unknown) => intent(target, actor, next), { prepend: true })

  ctx.on('tools/post-execute', (exec: HostToolExecution, result: HostToolResult, next: () => Promise<unknown>) => {
    const sessionId = exec.agent?.session?.header?.id
    if (sessionId === undefined) return next()
    const key = captureKey(sessionId, exec.callId)
    const pending = state.pending.get(key)
    if (pending === undefined) return next()
    state.pending.delete(key)
    const session = exec.agent!.session
    const anchor = state.anchor(session)
    const ok = result.isError !== true && anchor !== undefined
    // The commit does not hold the call's result back: it is queued in the session's order (so
    // the session's next capture, scan or rewind comes after it) and runs once the host has gone
    // on, while it waits on its own I/O. It only records the after-state: the before-state was
    // in the log before the tool ran, and a commit lost to a crash leaves the call committed at
    // its anchor all the same (`docs/format.md`, "Commits that wait for the next write").
    const callId = exec.callId
    void state.later(sessionId, () => deps.files().commit(sessionId, pending.cwd, callId, anchor ?? 0, ok)).catch((error: unknown) => {
      logger.warn('commit of capture %s failed: %s', callId, (error as Error).message)
    })
    return next()
  })

  ctx.on('tools/result', (exec: HostToolExecution) => {
    const sessionId = exec.agent?.session?.header?.id
    if (sessionId === undefined) return
    const key = captureKey(sessionId, exec.callId)
    const pending = state.pending.get(key)
    if (pending === undefined) return
    state.pending.delete(key)
    void state.run(sessionId, () => deps.files().discard(sessionId, pending.cwd, exec.callId)).catch((error: unknown) => {
      logger.warn('discard of capture %s failed: %s', exec.callId, (error as Error).message)
    })
  })

  /** Per session, the model's step whose first write-tool call had the locks taken ahead. */
  const aheadOf = new Map<string, string>()
  /**
   * The model has finished naming a tool call: when it is a write tool's, the store takes the
   * locks the call's capture needs now, on the thread pool, while the host parses and checks the
   * call. The capture on the host's thread then takes none (a turn's first call otherwise
   * re-takes them, the message's re-check having released them). Once per model step: a step
   * that names many calls keeps the locks through them anyway.
   */
  function aheadOfCall(session: HostSession, event: HostEvent): void {
    const chunk = event.data?.chunk
    if (chunk?.type !== 'block-end' || chunk.block?.type !== 'tool-call' || !WRITE_TOOLS.has(chunk.block.name)) return
    const sessionId = session.header.id
    const step = `${event.data.turn}:${event.data.step}`
    if (aheadOf.get(sessionId) === step) return
    aheadOf.set(sessionId, step)
    if (state.rewinding(sessionId) || !deps.settings.get().backups) return
    const cwd = trackedCwd(session)
    if (cwd !== undefined) deps.files().takeLocksAhead(sessionId, cwd)
  }

  ctx.on('session/event', (session: HostSession, event: HostEvent) => {
    if (event.type === 'assistant/chunk') return aheadOfCall(session, event)
    state.observe(session, event)
    observeCwd(session, event)
    if (!isHumanMessage(event)) return
    const sessionId = session.header.id
    if (state.rewinding(sessionId)) return
    const cwd = trackedCwd(session)
    if (cwd === undefined) return
    const settings = deps.settings.get()
    if (!settings.backups) return
    const files = deps.files()
    if (files.unavailable() !== undefined) return
    void state.run(sessionId, async () => {
      const ancestors = await forkAncestors(ctx, session.header, session)
      await files.recheck(sessionId, cwd, event.seq, settings.maxFileBytes, ancestors)
      await files.prune(sessionId, cwd)
    }).catch((error: unknown) => {
      logger.warn('message-boundary re-check of %s failed: %s', sessionId, (error as Error).message)
    })
  }, { global: true })

  ctx.on('agent/created', ({ agent }: { agent: HostAgent }) => {
    const session = agent?.session
    if (session === undefined) return
    const cwd = trackedCwd(session)
    if (cwd === undefined) return
    const files = deps.files()
    const unavailable = files.unavailable()
    if (unavailable !== undefined) {
      // Store-version guard: a store this build cannot read stays untouched; the session's
      // rewinds restore the conversation only.
      logger.warn('file restore is off for session %s: %s (%s)', session.header.id, unavailable.message, unavailable.code)
      return
    }
    const sessionId = session.header.id
    void state.run(sessionId, async () => {
      await files.sessionFormat(sessionId, cwd, sessionFormat(session))
      // A restore interrupted by a crash stays open (and pins its snapshots) until it is
      // continued or rolled back (RPC `restores.continue` / `restores.rollback`).
      for (const status of await files.restoreStatuses(sessionId, cwd)) {
        if (status.state === 'open') {
          logger.warn('restore %s of session %s was interrupted (%d of %d actions applied); continue or roll it back', status.opId, sessionId, status.done, status.actions)
        }
      }
    }).catch((error: unknown) => {
      logger.warn('session guards for %s failed: %s', sessionId, (error as Error).message)
    })
  }, { global: true })

  ctx.on('agent/disposed', ({ agent }: { agent: HostAgent }) => {
    const id = agent?.session?.header?.id
    if (id === undefined) return
    state.forget(id)
    forgetCwd(id)
    aheadOf.delete(id)
    // Drop the addon's cached handles once queued work of the session settled.
    void state.run(id, async () => deps.files().forget(id)).catch(() => {})
  }, { global: true })
}
