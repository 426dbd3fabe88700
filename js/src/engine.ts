/**
 * The rewind engine (`crates/engine` through the addon's `BindingEngine`): one per DSH home,
 * opened on first use. The undo, redo and recovery sequences run there as one call each; this
 * module only resolves which session, working directory and history partition a DSH session
 * is, and hands the engine's session object over.
 */
import type { Addon } from './native.ts'
import { callNative } from './native.ts'
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
