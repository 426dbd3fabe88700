/**
 * Per-session bookkeeping of the host plugin: a serial work queue (captures, commits, re-checks
 * and restores of one session never interleave), the rewind in-flight guard, the anchor (latest
 * `user/message` seq), and the captures waiting for their tool call to finish.
 */
import type { HostEvent, HostSession, HostToolExecution } from './host.ts'
import { eventsOf } from './contract/session.ts'

/** Whether a session belongs to a subagent (never tracked, never rewound). */
export function isSubagentSession(session: HostSession): boolean {
  const header = session.header
  return header.origin === 'subagent' || (typeof header.delegationDepth === 'number' && header.delegationDepth > 0)
}

/** Whether a `user/message` event was typed by a human. */
export function isHumanMessage(event: HostEvent): boolean {
  return event.type === 'user/message' && event.data?.source?.kind === 'user'
}

/** The tools whose file writes are captured (`str_replace_editor` only for its writing commands). */
export const WRITE_TOOLS: ReadonlySet<string> = new Set(['write', 'edit', 'str_replace_editor'])

/** The tool calls whose file writes are captured; `view` and every other tool are not. */
export function isCapturedTool(exec: { name?: unknown; arguments?: unknown }): boolean {
  if (typeof exec.name !== 'string' || !WRITE_TOOLS.has(exec.name)) return false
  if (exec.name !== 'str_replace_editor') return true
  const command = (exec.arguments as { command?: unknown } | null | undefined)?.command
  return command === 'create' || command === 'str_replace' || command === 'insert'
}

/** The fs-intent actor, when it is a tool execution with an agent session. */
export function toolActor(actor: unknown): (HostToolExecution & { agent: NonNullable<HostToolExecution['agent']> }) | undefined {
  if (typeof actor !== 'object' || actor === null) return undefined
  const exec = actor as Partial<HostToolExecution>
  if (typeof exec.callId !== 'string' || typeof exec.name !== 'string') return undefined
  const session = exec.agent?.session
  if (session === undefined || typeof session.header?.id !== 'string') return undefined
  return exec as HostToolExecution & { agent: NonNullable<HostToolExecution['agent']> }
}

/** Per-session state. */
export class SessionState {
  private readonly queues = new Map<string, Promise<unknown>>()
  private readonly anchors = new Map<string, number>()
  private readonly inFlight = new Set<string>()
  /** Sessions whose latest workspace scan a budget refused: the code and message, for reports. */
  readonly scanRefused = new Map<string, { code: string; message: string }>()
  /**
   * Sessions' latest workspace scan: `watched` (only what the change watcher reported) or
   * `full` (a walk of the workspace) with why, and its wall time — for the storage view.
   */
  readonly lastScan = new Map<string, { mode: 'full' | 'watched'; fullReason: string | null; elapsedMs: number }>()
  /** `<sessionId>\0<callId>` → cwd of a capture awaiting commit. */
  readonly pending = new Map<string, { sessionId: string; cwd: string; callId: string }>()

  /** Run `task` after every earlier task of this session settled. */
  run<T>(sessionId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(sessionId) ?? Promise.resolve()
    const next = previous.then(task, task)
    const settled = next.then(() => undefined, () => undefined)
    this.queues.set(sessionId, settled)
    void settled.then(() => {
      if (this.queues.get(sessionId) === settled) this.queues.delete(sessionId)
    })
    return next
  }

  /**
   * {@link SessionState.run} for a task that may finish before it returns (`undefined` then):
   * when nothing of the session is queued it starts at once, and is queued only when it returns
   * a promise; otherwise it runs after the queued work, as `run`. A task that throws when it
   * starts at once throws here.
   */
  runNow(sessionId: string, task: () => Promise<void> | undefined): Promise<void> | undefined {
    if (this.queues.has(sessionId)) return this.run(sessionId, async () => await task())
    const started = task()
    if (started === undefined) return undefined
    const settled = started.then(() => undefined, () => undefined)
    this.queues.set(sessionId, settled)
    void settled.then(() => {
      if (this.queues.get(sessionId) === settled) this.queues.delete(sessionId)
    })
    return started
  }

  /**
   * {@link SessionState.run} for work the caller does not wait for (a call's commit): queued in
   * the session's order at once, started in a later turn of the event loop. The host's thread
   * goes on first, so the work runs while the host waits on its own I/O rather than ahead of it,
   * and whatever the session queues next (the next capture, a scan, a rewind) still comes after it.
   */
  later(sessionId: string, task: () => Promise<void> | undefined): Promise<void> {
    return this.run(sessionId, () => new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        try {
          const started = task()
          if (started === undefined) resolve()
          else started.then(resolve, reject)
        } catch (error) {
          reject(error)
        }
      })
    }))
  }

  /** Note a newly appended event (keeps the anchor cache current). */
  observe(session: HostSession, event: HostEvent): void {
    if (event.type === 'user/message') this.anchors.set(session.header.id, event.seq)
  }

  /** The latest `user/message` seq of the session (scanning the log once on a cache miss). */
  anchor(session: HostSession): number | undefined {
    const cached = this.anchors.get(session.header.id)
    if (cached !== undefined) return cached
    const events = eventsOf(session)
    for (let i = events.length - 1; i >= 0; i--) {
      const event = events[i]!
      if (event.type === 'user/message') {
        this.anchors.set(session.header.id, event.seq)
        return event.seq
      }
    }
    return undefined
  }

  /** Forget a disposed session. */
  forget(sessionId: string): void {
    this.anchors.delete(sessionId)
  }

  /** Claim the in-flight guard; `false` when a rewind of this session is already running. */
  begin(sessionId: string): boolean {
    if (this.inFlight.has(sessionId)) return false
    this.inFlight.add(sessionId)
    return true
  }

  /** Release the in-flight guard. */
  end(sessionId: string): void {
    this.inFlight.delete(sessionId)
  }

  /** Whether a rewind of this session is running. */
  rewinding(sessionId: string): boolean {
    return this.inFlight.has(sessionId)
  }
}

/** The key of a pending capture. */
export function captureKey(sessionId: string, callId: string): string {
  return `${sessionId}\u0000${callId}`
}
