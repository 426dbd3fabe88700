/**
 * The rewind engine (`crates/engine` through the addon's `BindingEngine`): one per DSH home,
 * opened on first use. The undo, redo and recovery sequences run there as one call each; this
 * module only resolves which session, working directory and history partition a DSH session
 * is, and hands the engine's session object over.
 */
import type { Addon } from './native.ts'
import { awaitNative, callNative } from './native.ts'
import { RewindError } from './errors.ts'
import type { HostContext, HostSession } from './host.ts'
import { trackedCwd } from './capture.ts'
import { partitionKey } from './history.ts'

/** The engine of one DSH home. */
export class EnginePort {
  private binding: Addon.BindingEngine | undefined

  constructor(
    private readonly ctx: HostContext,
    private readonly dshHome: string,
  ) {}

  /** The addon's engine (throws `rewind/native-unavailable` without the addon). */
  engine(): Addon.BindingEngine {
    this.binding ??= callNative(n => n.BindingEngine.open(this.dshHome))
    return this.binding
  }

  /** The engine's session object for a DSH session: its id, tracked cwd and history partition. */
  async session(session: HostSession): Promise<Addon.BindingEngineSession> {
    const key = await partitionKey(this.ctx, session)
    const engine = this.engine()
    return callNative(() => engine.session(session.header.id, trackedCwd(session), key))
  }
}

function isRefusal(value: unknown): value is Addon.BindingRefusal {
  return typeof value === 'object' && value !== null && (value as { refused?: unknown }).refused === true
}

/**
 * Run one engine step: its result, or — when a rule refused it, which the engine returns as
 * data — a {@link RewindError} with the refusal's code, message and details. A fault rejects as
 * any native error does.
 */
export async function step<T>(run: () => Promise<T | Addon.BindingRefusal>): Promise<T> {
  const result = await awaitNative(run)
  if (isRefusal(result)) {
    const details = typeof result.details === 'object' && result.details !== null ? result.details as Record<string, unknown> : {}
    throw new RewindError(result.code, result.message, details)
  }
  return result
}
