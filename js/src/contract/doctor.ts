/**
 * `/rewind doctor` and the `doctor` RPC: which DSH this is, the session format, each host
 * contract the plugin uses found or missing, and what works and what degrades because of it.
 * Everything here is read from the live objects (feature detection); the DSH version is shown
 * for the user, never used to decide.
 */
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import type { HostContext, HostSession } from '../host.ts'
import type { Health, HealthEntry } from './guard.ts'
import { SEQ_SPELLING_FROM_FORMAT, formatVersion, logAccess, surfaceNodes } from './session.ts'

/** One host contract as the doctor sees it. */
export interface ContractCheck {
  /** The contract, e.g. `session log`. */
  name: string
  /** `found`, `missing`, or `degraded` (found, but in a form that costs a feature). */
  status: 'found' | 'missing' | 'degraded'
  /** What was found (the API, the spelling). */
  detail: string
  /** What works (found) or degrades (missing) because of it. */
  effect: string
}

/** The doctor's report. */
export interface DoctorReport {
  /** The DSH packages' version where it can be read (`undefined`: not known). */
  dshVersion: string | undefined
  /** The session format of the session asked about (`header.version`). */
  sessionFormat: number | undefined
  contracts: ContractCheck[]
  /** Faults contained at the host boundary since the plugin started, and contracts refused. */
  faults: HealthEntry[]
  /** `ok` when every contract is found and nothing faulted; else `degraded`. */
  overall: 'ok' | 'degraded'
}

/** What the doctor needs besides the context. */
export interface DoctorDeps {
  ctx: HostContext
  health: Health
  /** Whether the native addon loads (the file half). */
  addon: () => boolean
  /** Why the snapshot store refuses work, when it does. */
  storeUnavailable: () => { code: string; message: string } | undefined
  /** Whether a settings service backs the settings (`settings.register`). */
  settingsPersistent: () => boolean
}

/** The version of the DSH packages this process loaded, when one can be read. */
export function dshVersion(): string | undefined {
  // From the plugin's own place first (a profile's node_modules), then from the program DSH runs
  // as (the `dsh` CLI's install, or a host embedding the spine).
  const roots = [import.meta.url, process.argv[1], `${process.cwd()}/`].filter((r): r is string => typeof r === 'string' && r !== '')
  for (const root of roots) {
    let require: NodeJS.Require
    try {
      require = createRequire(root)
    } catch {
      continue
    }
    for (const pkg of ['@deepseek-ai/dsh-session', '@deepseek-ai/dsh-agent', '@deepseek-ai/dsh']) {
      try {
        const path = require.resolve(`${pkg}/package.json`)
        const version = (JSON.parse(readFileSync(path, 'utf8')) as { version?: unknown }).version
        if (typeof version === 'string' && version !== '') return version
      } catch {
        // Not resolvable from here (exports without package.json, another install layout).
      }
    }
  }
  return undefined
}

function service(ctx: HostContext, name: string): Record<string, unknown> | undefined {
  try {
    const s = ctx.get(name)
    return typeof s === 'object' && s !== null ? s as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

/** Run the checks (for `session`, when there is one). */
export function doctor(deps: DoctorDeps, session?: HostSession): DoctorReport {
  const { ctx } = deps
  const contracts: ContractCheck[] = []
  const check = (name: string, found: boolean | 'degraded', detail: string, works: string, degrades: string): void => {
    contracts.push({ name, status: found === true ? 'found' : found === false ? 'missing' : 'degraded', detail, effect: found === true ? works : degrades })
  }
  let format: number | undefined
  if (session !== undefined) {
    format = formatVersion(session)
    const access = logAccess(session)
    check('session log', access !== 'none', access === 'snapshotEvents' ? '`snapshotEvents()` / `eventAt()` (DSH 0.1.2+)' : access === 'events' ? '`events` (DSH 0.1.0/0.1.1)' : 'neither `snapshotEvents()` nor `events`',
      'rewinds can read the conversation', 'no rewind, preview or undo can run (the conversation cannot be read)')
    const nodes = surfaceNodes(session)
    check('surface fold', nodes !== undefined, nodes !== undefined ? `session.surface.nodes (${nodes.length} nodes)` : 'no session.surface.nodes',
      'plans are made against DSH\'s own fold', 'plans use the plugin\'s own fold of the log')
    check('replace op', true, format >= SEQ_SPELLING_FROM_FORMAT ? `{op, startSeq, endSeq} (format ${format})` : `{op, start, end} (format ${format})`,
      'the marker is appended in the session format\'s spelling (the other is tried once if refused)', '')
    const seeded = typeof session.header.isSeeded === 'boolean'
    check('fork lineage', true, seeded ? '`isSeeded` + `inheritedEventCount` (format 2+)' : '`seedLength` (format 0)',
      'forks and undo sessions name their parent and inherited prefix', '')
  }
  const agents = service(ctx, 'agents')
  check('agent registry', typeof agents?.get === 'function' && typeof agents?.create === 'function', 'ctx.agents (get, create)',
    'undo opens the conversation before a rewind in a new session; fork rewinds work', 'undo and fork rewinds are refused (the rewind itself still works)')
  const sessions = service(ctx, 'sessions')
  check('session durability', typeof sessions?.flush === 'function', 'ctx.sessions.flush',
    'the marker is durable before a file changes', 'the rewind cannot wait for the log to reach the disk (crash order weaker)')
  const fs = service(ctx, 'fs')
  check('fs service', typeof fs?.processPath === 'function', 'ctx.fs (processPath, resolve, stat)',
    'write-tool calls are backed up before they write', 'write-tool calls are not backed up; shell scans still run')
  const settingsService = service(ctx, 'settings')
  const register = typeof settingsService?.register === 'function'
  check('settings', register ? (deps.settingsPersistent() ? true : 'degraded') : 'degraded', register ? 'settings.register (DSH before 0.1.7)' : 'no settings.register (DSH 0.1.7+): settings come from the plugin config',
    'settings are editable in Settings → Rewind history and by command', 'settings are read from the plugin\'s config; change them in DSH\'s plugin settings (the plugin\'s own settings page and /snapshot-auto-cleanup on|off are read-only)')
  const web = service(ctx, 'webServer')
  check('web server', typeof web?.register === 'function', web === undefined ? 'no webServer' : `webServer (${String(web.protocol ?? 'http:')}//${String(web.host ?? '?')}:${String(web.port ?? '?')})`,
    'the browser client\'s dialogs and history page work', 'no browser UI; the commands work')
  const jobs = service(ctx, 'jobs')
  check('background jobs', typeof jobs?.onJobDone === 'function', 'jobs.onJobDone',
    'files a background job changed join the turn that started it', 'a background job\'s changes are found by the next scan instead')
  const addon = deps.addon()
  check('native addon', addon, addon ? 'loaded' : 'not loaded',
    'files come back with the conversation', 'only the conversation is rewound (no file backups)')
  const unavailable = addon ? deps.storeUnavailable() : undefined
  if (addon) {
    check('snapshot store', unavailable === undefined ? true : false, unavailable === undefined ? 'readable and writable' : `${unavailable.message} (${unavailable.code})`,
      'backups are taken and restored', 'file restore is off; the conversation half works')
  }
  const faults = deps.health.list()
  const overall = contracts.every(c => c.status === 'found') && faults.length === 0 ? 'ok' : 'degraded'
  return { dshVersion: dshVersion(), sessionFormat: format, contracts, faults, overall }
}

/** The report as command text. */
export function doctorText(report: DoctorReport): string {
  const mark = { found: '✓', missing: '✗', degraded: '!' } as const
  const lines = [
    `dsh-prompt-rewind doctor: ${report.overall === 'ok' ? 'everything works on this DSH' : 'some features degrade on this DSH'}`,
    `DSH ${report.dshVersion ?? 'version not known'}${report.sessionFormat === undefined ? '' : `, session format ${report.sessionFormat}`}`,
    '',
  ]
  for (const c of report.contracts) lines.push(`${mark[c.status]} ${c.name}: ${c.detail}${c.effect === '' ? '' : ` — ${c.effect}`}`)
  if (report.faults.length > 0) {
    lines.push('', `Faults contained (the host was not affected) (${report.faults.length}):`)
    for (const f of report.faults) lines.push(`- ${f.where}: ${f.message} (${f.count}×; affects ${f.effect})`)
  }
  return lines.join('\n')
}
