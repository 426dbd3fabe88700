/**
 * The {@link CleanupPort} over the addon's cleanup sweep (`BindingCleanup`). The policy is read
 * from the settings model on every call; without a settings service it is `null`, and the sweep
 * refuses (fails closed) — no directory is ever removed.
 */
import { toRewindError } from './errors.ts'
import type { HostLogger } from './host.ts'
import type { Addon } from './native.ts'
import { awaitNative, callNative } from './native.ts'
import type { CleanupPort, SweepReport } from './ports.ts'
import { unavailableCleanup } from './ports.ts'
import type { SettingsModel } from './settings.ts'

/**
 * Open the engine's sweep over `<dsh home>/rewind-snapshots` (the engine frees the backups only
 * the removed sessions referenced and forgets their store handles).
 */
export function openCleanup(engine: () => Addon.BindingEngine, settings: SettingsModel, logger: HostLogger): CleanupPort {
  let binding: Addon.BindingCleanup
  try {
    binding = callNative(() => engine().cleanup())
  } catch (error) {
    const e = toRewindError(error)
    logger.warn('snapshot cleanup unavailable: %s', e.message)
    return unavailableCleanup(e.code, e.message)
  }
  const policy = (): Addon.BindingCleanupPolicy | null => {
    if (!settings.persistent) return null
    const { enabled, maxAgeDays } = settings.get().cleanup
    return { enabled, maxAgeDays }
  }
  const shape = (r: Addon.BindingSweepReport): SweepReport => {
    return { applied: r.applied, items: r.items.map(i => ({ sessionId: i.sessionId, bytes: i.bytes })), bytes: r.bytes, failed: r.failed.map(f => ({ path: f.path, reason: f.reason })) }
  }
  return {
    unavailable: () => undefined,
    sweep: async (o) => shape(await awaitNative(() => binding.sweep(policy(), o.active, o.apply, o.onlySession ?? null))),
    quotaSweep: async (o) => shape(await awaitNative(() => binding.quotaSweep(policy(), o.active, o.apply, o.maxBytes, o.already))),
    lastSweep: async () => {
      const r = await awaitNative(() => binding.lastSweep())
      if (r === null || r === undefined) return undefined
      return { at: r.at, trigger: r.trigger, removed: r.removed, bytes: r.bytes, ...(r.quota != null ? { quota: { ...r.quota } } : {}) }
    },
    lastQuota: async () => {
      const r = await awaitNative(() => binding.lastQuota())
      if (r === null || r === undefined) return undefined
      return { ...r, sessions: [...r.sessions] }
    },
    autoSweep: async (o) => {
      const r = await awaitNative(() => binding.autoSweep(policy(), o.active, o.maxBytes))
      if (r === null || r === undefined) return undefined
      return {
        ...(r.age != null ? { age: shape(r.age) } : {}),
        ...(r.quota != null ? { quota: shape(r.quota) } : {}),
        ...(r.quotaError != null ? { quotaError: r.quotaError } : {}),
      }
    },
    storage: async (o) => {
      const r = await awaitNative(() => binding.storage(o.members, o.cwds, o.top))
      return { ...r, biggest: r.biggest.map(b => ({ ...b })) }
    },
  }
}
