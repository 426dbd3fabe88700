/**
 * Never break the host: every listener, waterfall step, command handler and service callback the
 * plugin gives DSH contains its own faults.
 *
 * DSH treats some throws as decisions: a synchronous throw from an `agent/created` or
 * `session/created` listener vetoes the session (rc.8 `packages/core/agent/src/runtime-types.ts`;
 * zq0929/deepseek-harness @5593cc25 `packages/core/session/src/index.ts`, `SessionStore.announce`),
 * and in the 0.2.x agent registry a rejection fails the creation too (knyazev741/deepseek-harness
 * @1376315f `packages/core/agent/src/runtime-types.ts`). A throw from a waterfall step fails the
 * tool call. So the plugin's context is wrapped once ({@link containContext}): whatever the
 * plugin's code throws or rejects with is caught at the boundary, reported to {@link Health}
 * (once per session and listener in the host log, every time in the doctor's counts), and the
 * host goes on as if the plugin had not been there: an observer returns nothing, a waterfall
 * step hands the call to the next step (or returns what the next step returned), a command
 * answers with an error text.
 */
import type { HostCommandDefinition, HostCommandResult, HostContext, HostLogger } from '../host.ts'

/** One fault or missing contract, as the doctor lists it. */
export interface HealthEntry {
  /** Where: the listener (`agent/created`), the command (`/rewind`) or the contract (`settings`). */
  where: string
  /** What degrades because of it, in a few words. */
  effect: string
  /** The latest message. */
  message: string
  /** How many times it happened since the plugin started. */
  count: number
  /** When it first happened (ms since the epoch). */
  since: number
}

/** What degrades when a listener fails, by listener. */
const EFFECTS: Record<string, string> = {
  'agent/created': 'session guards and the first workspace scan of the session',
  'agent/disposed': 'clean-up of a closed session',
  'session/event': 'message-boundary bookkeeping (anchors, re-checks, scans)',
  'tools/execute': 'the workspace scan around a tool call',
  'fs/write-intent': 'the before-write backup of a write-tool call',
  'fs/edit-intent': 'the before-write backup of an edit-tool call',
  'tools/post-execute': 'the commit of a write-tool call\'s backup',
  'tools/result': 'the clean-up of a write-tool call\'s backup',
}

/** The plugin's health: faults contained at the host boundary and host contracts found missing. */
export class Health {
  private readonly entries = new Map<string, HealthEntry>()
  private readonly logged = new Set<string>()

  constructor(private readonly logger: HostLogger, private readonly now: () => number = Date.now) {}

  /**
   * Record a fault contained at `where` (a listener, a command). Logged once per session and
   * place (`sessionId` `undefined`: once per place), counted every time.
   */
  fault(where: string, error: unknown, sessionId?: string): void {
    const message = describe(error)
    this.note(where, EFFECTS[where] ?? where, message)
    const key = `${sessionId ?? '*'}\u0000${where}`
    if (this.logged.has(key)) return
    this.logged.add(key)
    this.logger.warn('degraded: %s failed%s and was contained (%s keeps working without it): %s', where, sessionId === undefined ? '' : ` for session ${sessionId}`, EFFECTS[where] ?? 'the rest', message)
  }

  /** Record a host contract that is missing or refused, and what degrades without it (logged once). */
  degraded(where: string, effect: string, message: string): void {
    const first = !this.entries.has(where)
    this.note(where, effect, message)
    if (first) this.logger.warn('degraded: %s — %s (%s)', where, effect, message)
  }

  private note(where: string, effect: string, message: string): void {
    const entry = this.entries.get(where)
    if (entry === undefined) this.entries.set(where, { where, effect, message, count: 1, since: this.now() })
    else {
      entry.count++
      entry.message = message
    }
  }

  /** Every entry, oldest first. */
  list(): HealthEntry[] {
    return [...this.entries.values()].map(e => ({ ...e }))
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message
  try {
    return String(error)
  } catch {
    return 'an unprintable value'
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function'
}

/** The session id an event's arguments name, for the once-per-session log line. */
function sessionOf(args: readonly unknown[]): string | undefined {
  try {
    return sessionIn(args)
  } catch {
    return undefined
  }
}

function sessionIn(args: readonly unknown[]): string | undefined {
  for (const a of args) {
    if (typeof a !== 'object' || a === null) continue
    const o = a as { header?: { id?: unknown }; agent?: { session?: { header?: { id?: unknown } } }; session?: { header?: { id?: unknown } } }
    const id = o.header?.id ?? o.agent?.session?.header?.id ?? o.session?.header?.id
    if (typeof id === 'string') return id
  }
  return undefined
}

/** The events whose listeners are waterfall steps (the last argument is `next`). */
const WATERFALLS: ReadonlySet<string> = new Set(['tools/execute', 'fs/write-intent', 'fs/edit-intent', 'tools/post-execute'])

/**
 * An observer listener that never throws and never rejects: a fault is reported and the
 * listener returns what it would have returned without it (nothing, or a promise that settles
 * fulfilled).
 */
export function containObserver<A extends unknown[]>(health: Health, where: string, listener: (...args: A) => unknown): (...args: A) => unknown {
  return (...args: A) => {
    try {
      const r = listener(...args)
      if (isThenable(r)) return Promise.resolve(r).then(undefined, (error: unknown) => health.fault(where, error, sessionOf(args)))
      return r
    } catch (error) {
      health.fault(where, error, sessionOf(args))
      return undefined
    }
  }
}

/**
 * A waterfall step that never fails the host's call for a fault of its own: when the plugin's
 * step throws or rejects before it called `next`, `next` is called in its place; after, what
 * `next` returned is returned. A rejection that is `next`'s own (the tool failed, a later step
 * threw) goes through unchanged and is not the plugin's fault.
 */
export function containWaterfall(health: Health, where: string, listener: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  return (...args: unknown[]) => {
    const next = args[args.length - 1]
    if (typeof next !== 'function') return containObserver(health, where, listener)(...args)
    let called = false
    let result: unknown
    let ownFailure = false
    let nextError: unknown
    const guarded = (...nextArgs: unknown[]): unknown => {
      called = true
      try {
        result = (next as (...a: unknown[]) => unknown)(...nextArgs)
      } catch (error) {
        ownFailure = true
        nextError = error
        throw error
      }
      if (isThenable(result)) {
        result = Promise.resolve(result)
        ;(result as Promise<unknown>).then(undefined, (error: unknown) => {
          ownFailure = true
          nextError = error
        })
      }
      return result
    }
    const replaced = [...args.slice(0, -1), guarded]
    const recover = (error: unknown): unknown => {
      if (called && ownFailure && error === nextError) throw error
      health.fault(where, error, sessionOf(args))
      return called ? result : (next as () => unknown)()
    }
    try {
      const r = listener(...replaced)
      if (isThenable(r)) return Promise.resolve(r).then(undefined, recover)
      return r
    } catch (error) {
      return recover(error)
    }
  }
}

/** A command handler that answers a fault with an error text instead of throwing. */
export function containCommand(health: Health, definition: HostCommandDefinition): HostCommandDefinition {
  const where = `/${definition.name}`
  const failed = (error: unknown, sessionId: string | undefined): HostCommandResult => {
    health.fault(where, error, sessionId)
    return { kind: 'error', text: `/${definition.name} failed: ${describe(error)}` }
  }
  return {
    ...definition,
    handler: (inv) => {
      const sessionId = sessionOf([inv])
      try {
        const r = definition.handler(inv)
        return isThenable(r) ? Promise.resolve(r).then(undefined, (error: unknown) => failed(error, sessionId)) : r
      } catch (error) {
        return failed(error, sessionId)
      }
    },
  }
}

/**
 * The plugin's view of the DSH context: the same context, with every listener registered through
 * `on`, every sub-context of `inject` and every command registered through `commands` contained.
 * A listener registered by the plugin's code cannot reach the host uncontained.
 */
export function containContext(ctx: HostContext, health: Health): HostContext {
  const cache = new WeakMap<object, HostContext>()
  const wrap = (target: HostContext): HostContext => {
    const hit = cache.get(target as object)
    if (hit !== undefined) return hit
    const on = (name: string, listener: (...args: any[]) => any, options?: { prepend?: boolean; global?: boolean }): () => void => {
      const contained = WATERFALLS.has(name) ? containWaterfall(health, name, listener) : containObserver(health, name, listener)
      return target.on(name, contained, options)
    }
    const inject = (deps: string[], callback: (sub: HostContext) => void): void => {
      target.inject(deps, (sub) => {
        try {
          callback(wrap(sub))
        } catch (error) {
          health.fault(`inject(${deps.join(', ')})`, error)
        }
      })
    }
    const proxy = new Proxy(target as object, {
      get(t, key) {
        if (key === 'on') return on
        if (key === 'inject') return inject
        if (key === 'commands') {
          const commands = Reflect.get(t, key) as HostContext['commands'] | undefined
          if (commands === undefined) return undefined
          return { register: (definition: HostCommandDefinition) => commands.register(containCommand(health, definition)) }
        }
        const value = Reflect.get(t, key)
        // A callable service with members of its own (cordis' `logger`) is handed over as it is.
        if (typeof value === 'function' && Object.keys(value).length > 0) return value
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value
      },
    }) as HostContext
    cache.set(target as object, proxy)
    return proxy
  }
  return wrap(ctx)
}
