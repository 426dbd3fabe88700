/**
 * The Compatibility block of the Rewind history page: the host's `doctor` answer (which DSH this
 * is, each host contract the plugin uses, the faults contained at the host boundary) checked,
 * and turned into the lines the page shows. Pure apart from the one RPC call in {@link loadDoctor}.
 */
import type { T } from './i18n.ts'
import { oneLine } from './escape.ts'
import { rpc, RpcError } from './rpc.ts'

/** One host contract as the doctor reports it (`js/src/contract/doctor.ts`). */
export interface ContractCheck {
  readonly name: string
  readonly status: 'found' | 'missing' | 'degraded'
  /** What was found (the API, the spelling). */
  readonly detail: string
  /** What works (found) or degrades (missing, degraded) because of it; may be empty. */
  readonly effect: string
}

/** One fault contained at the host boundary, or a contract refused. */
export interface DoctorFault {
  readonly where: string
  readonly effect: string
  readonly message: string
  readonly count: number
  /** When it first happened (ms since the epoch). */
  readonly since: number
}

/** The `doctor` answer. */
export interface DoctorReport {
  readonly dshVersion: string | undefined
  readonly sessionFormat: number | undefined
  readonly contracts: readonly ContractCheck[]
  readonly faults: readonly DoctorFault[]
  readonly overall: 'ok' | 'degraded'
}

/** A `doctor` answer that does not have the report's shape. */
export class BadDoctorReport extends Error {
  constructor(message: string) {
    super(`malformed doctor report: ${message}`)
    this.name = 'BadDoctorReport'
  }
}

const STATUSES = new Set(['found', 'missing', 'degraded'])

/**
 * Check a `doctor` answer field by field.
 * @param value - the RPC's value.
 * @returns the report (optional fields `null` or absent read as `undefined`).
 * @throws BadDoctorReport naming the first field that is wrong.
 */
export function parseDoctorReport(value: unknown): DoctorReport {
  if (typeof value !== 'object' || value === null) throw new BadDoctorReport('not an object')
  const v = value as Record<string, unknown>
  if (v.overall !== 'ok' && v.overall !== 'degraded') throw new BadDoctorReport('overall is neither "ok" nor "degraded"')
  if (v.dshVersion != null && typeof v.dshVersion !== 'string') throw new BadDoctorReport('dshVersion is not a string')
  if (v.sessionFormat != null && (typeof v.sessionFormat !== 'number' || !Number.isFinite(v.sessionFormat))) throw new BadDoctorReport('sessionFormat is not a number')
  if (!Array.isArray(v.contracts)) throw new BadDoctorReport('contracts is not a list')
  if (!Array.isArray(v.faults)) throw new BadDoctorReport('faults is not a list')
  const contracts = v.contracts.map((c: unknown, i): ContractCheck => {
    const o = (typeof c === 'object' && c !== null ? c : {}) as Record<string, unknown>
    if (typeof o.name !== 'string' || typeof o.status !== 'string' || !STATUSES.has(o.status)) throw new BadDoctorReport(`contracts[${i}] has no name or a status other than found / missing / degraded`)
    return { name: o.name, status: o.status as ContractCheck['status'], detail: typeof o.detail === 'string' ? o.detail : '', effect: typeof o.effect === 'string' ? o.effect : '' }
  })
  const faults = v.faults.map((f: unknown, i): DoctorFault => {
    const o = (typeof f === 'object' && f !== null ? f : {}) as Record<string, unknown>
    if (typeof o.where !== 'string' || typeof o.message !== 'string') throw new BadDoctorReport(`faults[${i}] has no where or message`)
    const count = typeof o.count === 'number' && Number.isFinite(o.count) ? o.count : 1
    return { where: o.where, effect: typeof o.effect === 'string' ? o.effect : '', message: o.message, count, since: typeof o.since === 'number' ? o.since : 0 }
  })
  return {
    dshVersion: typeof v.dshVersion === 'string' && v.dshVersion !== '' ? v.dshVersion : undefined,
    sessionFormat: typeof v.sessionFormat === 'number' ? v.sessionFormat : undefined,
    contracts,
    faults,
    overall: v.overall,
  }
}

/** What the page knows of the doctor. */
export type DoctorState =
  | { readonly status: 'ready'; readonly report: DoctorReport }
  /** A host of an older build without the endpoint: the block is left out. */
  | { readonly status: 'unsupported' }
  | { readonly status: 'error'; readonly message: string }

/** The RPC call {@link loadDoctor} makes (replaceable in tests). */
export type DoctorCall = (sessionId: string) => Promise<unknown>

/**
 * Ask the host's doctor about one session. Never rejects: a refusal, a transport failure or a
 * malformed answer becomes an `error` state; a host without the endpoint, `unsupported`.
 * @param sessionId - the session on screen.
 * @param call - the RPC (default: `POST /dsh-rewind/api/doctor`).
 * @returns the state to render.
 */
export async function loadDoctor(sessionId: string, call: DoctorCall = id => rpc('doctor', id, {})): Promise<DoctorState> {
  try {
    return { status: 'ready', report: parseDoctorReport(await call(sessionId)) }
  } catch (error) {
    if (error instanceof RpcError && error.code === 'rewind/unknown-endpoint') return { status: 'unsupported' }
    const message = error instanceof Error ? error.message : String(error)
    return { status: 'error', message }
  }
}

/** One contract line of the block. */
export interface CompatContract {
  readonly name: string
  readonly status: 'missing' | 'degraded'
  /** The whole line, e.g. `fs service (missing): write-tool calls are not backed up…`. */
  readonly text: string
  /** What was found, for a tooltip. */
  readonly detail: string
}

/** One fault line of the block. */
export interface CompatFault {
  readonly where: string
  readonly count: number
  readonly text: string
}

/** What the Compatibility block shows. */
export interface CompatView {
  /** `ok`: one line; `degraded`: the lists; `failed`: a short note. */
  readonly kind: 'ok' | 'degraded' | 'failed'
  readonly title: string
  readonly headline: string
  /** DSH version and session format (small text), when the report came. */
  readonly meta?: string
  readonly contracts: readonly CompatContract[]
  /** Title of the fault list, when there are faults. */
  readonly faultsTitle?: string
  readonly faults: readonly CompatFault[]
}

/**
 * The lines of the Compatibility block.
 * @param t - translate (the plugin locale; contract names, effects and fault messages are the host's text).
 * @param state - the doctor state, `undefined` while loading or without a session.
 * @returns the view, or `undefined` when the block is left out (loading, no session, a host without the endpoint).
 */
export function compatView(t: T, state: DoctorState | undefined): CompatView | undefined {
  if (state === undefined || state.status === 'unsupported') return undefined
  const title = t('compat.title')
  if (state.status === 'error') return { kind: 'failed', title, headline: t('compat.failed', { message: oneLine(state.message) }), contracts: [], faults: [] }
  const r = state.report
  const contracts = r.contracts
    .filter((c): c is ContractCheck & { status: 'missing' | 'degraded' } => c.status !== 'found')
    .map(c => {
      const status = t(c.status === 'missing' ? 'compat.missing' : 'compat.partial')
      const text = c.effect === '' ? t('compat.contractBare', { name: oneLine(c.name), status }) : t('compat.contract', { name: oneLine(c.name), status, effect: oneLine(c.effect) })
      return { name: c.name, status: c.status, text, detail: oneLine(c.detail) }
    })
  const faults = r.faults.map(f => ({ where: f.where, count: f.count, text: t('compat.fault', { where: oneLine(f.where), message: oneLine(f.message), count: f.count }) }))
  const meta = [
    r.dshVersion !== undefined ? t('compat.version', { version: oneLine(r.dshVersion) }) : t('compat.versionUnknown'),
    ...(r.sessionFormat !== undefined ? [t('compat.format', { format: r.sessionFormat })] : []),
  ].join(' · ')
  const ok = r.overall === 'ok' && contracts.length === 0 && faults.length === 0
  return {
    kind: ok ? 'ok' : 'degraded',
    title,
    headline: t(ok ? 'compat.ok' : 'compat.degraded'),
    meta,
    contracts,
    ...(faults.length > 0 ? { faultsTitle: t('compat.faults', { count: faults.length }) } : {}),
    faults,
  }
}
