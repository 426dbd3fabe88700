/**
 * dsh-prompt-rewind — host half. The only module that receives the cordis Context: it registers
 * the commands (`/rewind`, `/undo`, `/prompt-rewind`, `/snapshot-auto-cleanup`, each in
 * isolation), the checkpoint pipeline, the message-boundary re-check, the `agent/created`
 * guards, the settings namespace and the RPC route, and wires them to the napi addon.
 */
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import type { HostAgent, HostCommandDefinition, HostCommandResult, HostContext } from './host.ts'
import { SettingsModel, type RewindSettings } from './settings.ts'
import { SessionState } from './state.ts'
import { registerCapture } from './capture.ts'
import { registerScan } from './scan.ts'
import { Rewinder } from './rewind.ts'
import { HistoryPort } from './history.ts'
import { registerRpc } from './rpc.ts'
import { cleanupCommand, keptSessions } from './cleanup-command.ts'
import { formatBytes } from '../../shared/format.ts'
import { openFiles } from './files.ts'
import { openCleanup } from './cleanup.ts'
import type { CleanupPort, FilesPort } from './ports.ts'
import { EnginePort } from './engine.ts'
import { type Locale, matchLocale } from './locales.ts'
import { Health, containContext } from './contract/guard.ts'
import { type DoctorDeps, doctor, doctorText } from './contract/doctor.ts'
import { addonAvailable } from './native.ts'

/** The RPC fence, for the fence tests. */
export { trustedRequest } from './rpc.ts'

/** Cordis plugin name. */
export const name = 'dsh-rewind'
/** Required services; everything else is optional and looked up when used. */
export const inject = ['commands']

/**
 * How often this process attempts the automatic sweep at most (ms): its size quota reads the
 * whole store's inventory, so it is not run at every message.
 */
export const QUOTA_CHECK_MS = 10 * 60_000

/** Plugin config (all optional; DSH's settings service overrides the settings part). */
export interface Config extends Partial<RewindSettings> {
  /** DSH home (default `$DSH_HOME` or `~/.dsh`). */
  dshHome?: string
  /** How long a rewind waits for a cancelled turn to stop (ms, default 10000). */
  stopTimeoutMs?: number
  /** How often the automatic sweep (its size quota) is attempted at most, in ms (default {@link QUOTA_CHECK_MS}). */
  quotaCheckMs?: number
}

/** The DSH home: config, `$DSH_HOME`, or `~/.dsh`. */
export function resolveDshHome(config?: Config): string {
  const configured = config?.dshHome ?? process.env.DSH_HOME
  if (typeof configured === 'string' && configured !== '' && isAbsolute(configured)) return configured
  return join(homedir(), '.dsh')
}

/** Apply the plugin. */
export function apply(rawCtx: unknown, config: Config = {}): void {
  const hostCtx = rawCtx as HostContext
  const logger = hostCtx.logger('dsh-rewind')
  // Every listener, waterfall step and command registered below contains its own faults.
  const health = new Health(logger)
  const ctx = containContext(hostCtx, health)
  const dshHome = resolveDshHome(config)
  const settings = new SettingsModel(config)
  settings.attach(ctx,
    (error) => health.degraded('settings', 'settings are read from the plugin config and are read-only here', `the settings namespace was not registered: ${(error as Error).message}`),
    (message) => health.degraded('settings', 'settings are read from the plugin config; change them in DSH\'s plugin settings', message))
  settings.onCorrupt = (error) => health.fault('settings', error)
  const state = new SessionState()

  const engine = new EnginePort(ctx, dshHome)
  let files: FilesPort | undefined
  const getFiles = (): FilesPort => (files ??= openFiles(() => engine.engine(), join(dshHome, 'rewind-snapshots'), logger))
  let cleanup: CleanupPort | undefined
  const getCleanup = (): CleanupPort => (cleanup ??= openCleanup(() => engine.engine(), settings, logger))
  const history = new HistoryPort(HistoryPort.rootFor(dshHome))

  const locale = (): Locale => {
    const own = settings.get().locale
    if (own !== 'auto') return matchLocale(own) ?? 'en'
    const dsh = ctx.get('settings') as { get(ns: string): unknown } | undefined
    let preference: unknown
    try {
      preference = (dsh?.get('locale') as { preference?: unknown } | undefined)?.preference
    } catch {
      preference = undefined
    }
    return matchLocale(preference) ?? 'en'
  }

  registerCapture({ ctx, state, files: getFiles, settings, logger })
  registerScan({ ctx, state, files: getFiles, settings, logger })
  const rewinder = new Rewinder({ ctx, state, files: getFiles, engine, history, settings, logger, locale, stopTimeoutMs: config.stopTimeoutMs ?? 10_000 })

  const doctorDeps: DoctorDeps = {
    ctx, health, addon: addonAvailable,
    storeUnavailable: () => getFiles().unavailable(),
    settingsPersistent: () => settings.persistent,
  }
  // `/rewind doctor`: what works on this DSH; every other input is a rewind command.
  const rewindCommand = (agent: HostAgent, rawInput: string): Promise<HostCommandResult> | HostCommandResult => {
    if (rawInput.trim() === 'doctor') return { kind: 'success', text: doctorText(doctor(doctorDeps, agent?.session)) }
    return rewinder.command(agent, rawInput, false)
  }
  const commands: HostCommandDefinition[] = [
    {
      name: 'rewind',
      description: 'Rewind the conversation to an earlier message and restore the files changed since then',
      input: { hint: '[<n> | @<seq> | doctor]' },
      handler: inv => rewindCommand(inv.agent as HostAgent, inv.rawInput),
    },
    {
      name: 'undo',
      description: 'Alias of /rewind',
      input: { hint: '[<n> | @<seq>]' },
      handler: inv => rewindCommand(inv.agent as HostAgent, inv.rawInput),
    },
    {
      name: 'prompt-rewind',
      description: 'Rewind to @<seq> (engine command used by the rewind button)',
      input: { hint: '@<seq>' },
      handler: inv => rewinder.command(inv.agent as HostAgent, inv.rawInput, true),
    },
    {
      name: 'snapshot-auto-cleanup',
      description: 'Show or change snapshot auto-cleanup, or run a sweep',
      input: { hint: 'show | on | off | max-age <days> | max-size <size|0> | run [--apply] [--max-size <size>] | run --current [--apply]' },
      handler: inv => cleanupCommand({ ctx, cleanup: getCleanup, settings, locale }, inv.agent as HostAgent, inv.rawInput),
    },
  ]
  for (const definition of commands) {
    // Each registration stands alone: a name another plugin owns costs only that name.
    try {
      ctx.commands.register(definition)
    } catch (error) {
      logger.warn('command /%s not registered: %s', definition.name, (error as Error).message)
    }
  }

  registerRpc({ ctx, state, files: getFiles, engine, history, settings, logger, rewinder, cleanup: getCleanup, health, doctor: doctorDeps })

  // Crash order, the reconcile pass: when a session's agent is created (opened, resumed after a
  // restart), its interrupted rewinds are settled or logged; `/rewind` and the client ask again.
  ctx.on('agent/created', ({ agent }: { agent: HostAgent }) => {
    void rewinder.reconcile(agent).then((found) => {
      for (const i of found) logger.warn('interrupted %s %s of session %s (journal %s); /rewind --continue or --rollback settles it', i.kind, i.opId, agent.session.header.id, i.journal)
    }, (error: unknown) => logger.warn('reconcile of %s failed: %s', agent.session?.header?.id, (error as Error).message))
  }, { global: true })

  // The automatic sweep (only when a settings service backs the policy): the age rule when it is
  // on (at most once a day), and the size quota whenever it is set — on by default (4 GiB) and
  // independent of the age rule's switch (oldest idle sessions first until the store fits; never
  // a live session, one an open restore journal needs, or one an undo in the history needs).
  // Attempted when a session starts and at each human message, at most every QUOTA_CHECK_MS in
  // this process (the quota reads the whole store's inventory); never on a tool call's path.
  let lastAutoSweep: number | undefined
  let sweeping = false
  const autoSweep = (): void => {
    const s = settings.get()
    const maxBytes = s.cleanup.maxSizeBytes
    if ((!s.cleanup.enabled && maxBytes === 0) || !settings.persistent) return
    const now = Date.now()
    if (sweeping || (lastAutoSweep !== undefined && now - lastAutoSweep < (config.quotaCheckMs ?? QUOTA_CHECK_MS))) return
    sweeping = true
    lastAutoSweep = now
    void keptSessions(ctx).then(active => getCleanup().autoSweep({ maxAgeDays: s.cleanup.maxAgeDays, active, maxBytes })).then((report) => {
      if (report === undefined) return
      const { age, quota, quotaError } = report
      if (age !== undefined) logger.info('automatic snapshot cleanup: the age rule removed %d session(s), %s', age.items.length, formatBytes(age.bytes))
      if (quota !== undefined && quota.items.length > 0) {
        const freed = quota.items.reduce((sum, i) => sum + i.bytes, 0)
        logger.info('automatic snapshot cleanup: the size quota (%s) removed %d session(s) (%s), freed %s; the store now takes %s', formatBytes(maxBytes), quota.items.length, quota.items.map(i => i.sessionId).join(', ') || 'none', formatBytes(freed), formatBytes(quota.bytes))
      }
      if (quota !== undefined && quota.bytes > maxBytes) logger.warn('snapshot store still over its size quota (%s of %s): the remaining sessions are live, pinned, needed by an interrupted restore or by an undo in the rewind history', formatBytes(quota.bytes), formatBytes(maxBytes))
      for (const f of [...(age?.failed ?? []), ...(quota?.failed ?? [])]) logger.warn('automatic snapshot cleanup: %s not removed: %s', f.path, f.reason)
      if (quotaError !== undefined) logger.warn('automatic snapshot cleanup: the size quota did not run: %s', quotaError)
    }).catch((error: unknown) => {
      logger.warn('automatic snapshot cleanup failed: %s', (error as Error).message)
    }).finally(() => {
      sweeping = false
    })
  }
  ctx.on('agent/created', () => autoSweep(), { global: true })
  ctx.on('session/event', (_session: unknown, event: { type?: unknown } | undefined) => {
    if (event?.type === 'user/message') autoSweep()
  }, { global: true })
}
