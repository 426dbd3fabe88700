/**
 * The {@link CleanupPort} over the addon's cleanup sweep (`BindingCleanup`). Without a settings
 * service the policy fails closed: the automatic sweep never runs and a manual sweep of other
 * sessions is refused by the command (only `--current` works).
 */
import { Codes, toRewindError } from './errors.ts'
import type { HostLogger } from './host.ts'
import { addon, awaitNative } from './native.ts'
import type { CleanupPort, SweepReport } from './ports.ts'
import { unavailableCleanup } from './ports.ts'
import type { SettingsModel } from './settings.ts'

interface CleanupBinding {
  sweep(maxAgeDays: number, active: string[], apply: boolean, onlySession: string | undefined | null): Promise<SweepReport>
  lastSweep(): Promise<number | undefined | null>
  autoSweep(maxAgeDays: number, active: string[]): Promise<SweepReport | undefined | null>
}

interface CleanupFactory {
  open(dshHome: string, snapshotRoot: string): CleanupBinding
}

/** Open the sweep over `<dsh home>/rewind-snapshots`. */
export function openCleanup(dshHome: string, snapshotRoot: string, _settings: SettingsModel, logger: HostLogger): CleanupPort {
  let factory: CleanupFactory | undefined
  try {
    factory = (addon() as unknown as { BindingCleanup?: CleanupFactory }).BindingCleanup
  } catch (error) {
    const e = toRewindError(error)
    return unavailableCleanup(e.code, e.message)
  }
  if (factory === undefined || typeof factory.open !== 'function') {
    return unavailableCleanup(Codes.failed, 'this build of the addon has no cleanup sweep')
  }
  let binding: CleanupBinding
  try {
    binding = factory.open(dshHome, snapshotRoot)
  } catch (error) {
    const e = toRewindError(error)
    logger.warn('snapshot cleanup unavailable: %s', e.message)
    return unavailableCleanup(e.code, e.message)
  }
  return {
    unavailable: () => undefined,
    sweep: (o) => awaitNative(() => binding.sweep(o.maxAgeDays, o.active, o.apply, o.onlySession ?? null)),
    lastSweep: async () => (await awaitNative(() => binding.lastSweep())) ?? undefined,
    autoSweep: async (o) => (await awaitNative(() => binding.autoSweep(o.maxAgeDays, o.active))) ?? undefined,
  }
}
