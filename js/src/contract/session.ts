/**
 * Host contract: the session log, the rewind marker's append and fork lineage, across the DSH
 * releases this plugin supports (0.1.0-rc.8 through 0.2.x). Every reader looks at what the live
 * session offers (feature detection), never at a DSH version string. Each adaptation names the
 * upstream file it follows:
 *
 *   rc.8     toninfo/deepseek-harness @611615650f1b  packages/core/session/src/index.ts
 *            (`get events()`, `get seq()`, header `version: 0`, `seedLength`, replace `{op,start,end}`)
 *   0.2.1-α2 zq0929/deepseek-harness @5593cc25  packages/core/session/src/index.ts
 *            (`snapshotEvents(from?, to?)`, `eventAt(seq)`, `seq`, `surface.nodes`; `events` gone;
 *            `validateSessionHeader` refuses `seedLength`, requires `isSeeded`;
 *            `Session.inheritedEventCount`) and src/types.ts (`SurfaceOp` replace
 *            `{op, startSeq, endSeq}` from format 3)
 *   0.2.1-α1 knyazev741/deepseek-harness @1376315f  packages/core/session/src/surface.ts
 *            (`isReplaceOp`: exactly the keys op, startSeq, endSeq)
 */
import type { HostEvent, HostSession, HostSessionHeader } from '../host.ts'
import { Codes, RewindError } from '../errors.ts'

/** The session format from which the replace op is spelled `{op, startSeq, endSeq}`. */
export const SEQ_SPELLING_FROM_FORMAT = 3
/** The session format from which fork lineage is `isSeeded` + `inheritedEventCount`. */
export const SEEDED_LINEAGE_FROM_FORMAT = 2

/** The session's format version (`header.version`; rc.8 writes 0). */
export function formatVersion(session: Pick<HostSession, 'header'>): number {
  const v = session.header?.version
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0
}

/** How this host lets the plugin read a session's log. */
export type LogAccess = 'snapshotEvents' | 'events' | 'none'

/** Which reader the session offers: `snapshotEvents()` (0.1.2+) first, else `events` (rc.8). */
export function logAccess(session: HostSession): LogAccess {
  if (typeof session.snapshotEvents === 'function') return 'snapshotEvents'
  if (Array.isArray(session.events)) return 'events'
  return 'none'
}

/**
 * The whole log of a session as a frozen array. DSH 0.1.2+ (zq0929 @5593cc25
 * `Session.snapshotEvents`) reuses one frozen snapshot until the next append; rc.8's `events`
 * getter does the same. Throws `rewind/host-unsupported` when the session offers neither.
 */
export function eventsOf(session: HostSession): readonly HostEvent[] {
  if (typeof session.snapshotEvents === 'function') return session.snapshotEvents()
  const events = session.events
  if (Array.isArray(events)) return events
  throw new RewindError(Codes.hostUnsupported, 'this DSH offers no way to read a session log (neither `snapshotEvents()` nor `events`)')
}

/** The number of events in the log (the next event's seq). */
export function logLength(session: HostSession): number {
  const seq = session.seq
  if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) return seq
  return eventsOf(session).length
}

/** One event by seq (`eventAt` where the host has it, else the log snapshot). */
export function eventAt(session: HostSession, seq: number): HostEvent | undefined {
  if (typeof session.eventAt === 'function') return session.eventAt(seq)
  return eventsOf(session)[seq]
}

/** Events `from..to` (half-open), without copying the whole log where the host can slice. */
export function eventsBetween(session: HostSession, from: number, to: number): readonly HostEvent[] {
  if (typeof session.snapshotEvents === 'function') return session.snapshotEvents(from, to)
  return eventsOf(session).slice(from, to)
}

/**
 * DSH's own fold of the surface (the seqs of its nodes, in order), where the live session
 * exposes it (`session.surface.nodes`: rc.8 and zq0929 @5593cc25 `Session.surface`). `undefined`
 * when it is absent or not an array of seqs: the planner then folds the log itself.
 */
export function surfaceNodes(session: HostSession): readonly number[] | undefined {
  let nodes: unknown
  try {
    nodes = (session as { surface?: { nodes?: unknown } }).surface?.nodes
  } catch {
    return undefined
  }
  if (!Array.isArray(nodes)) return undefined
  for (const n of nodes) if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) return undefined
  return nodes as readonly number[]
}

/** A replace range in either spelling. */
export type ReplaceOp = { op: 'replace'; start: number; end: number } | { op: 'replace'; startSeq: number; endSeq: number }

/** The replace op as the session's format spells it. */
export function replaceOp(session: Pick<HostSession, 'header'>, start: number, end: number, spelling: 'seq' | 'plain' = formatVersion(session) >= SEQ_SPELLING_FROM_FORMAT ? 'seq' : 'plain'): ReplaceOp {
  return spelling === 'seq' ? { op: 'replace', startSeq: start, endSeq: end } : { op: 'replace', start, end }
}

/** The replace range of an event's `surfaceOp`, in either spelling; `undefined` for any other op. */
export function replaceRange(op: unknown): { start: number; end: number } | undefined {
  if (typeof op !== 'object' || op === null) return undefined
  const o = op as Record<string, unknown>
  if (o.op !== 'replace') return undefined
  const start = o.startSeq ?? o.start
  const end = o.endSeq ?? o.end
  return typeof start === 'number' && typeof end === 'number' ? { start, end } : undefined
}

/** Whether an append error is the host refusing the replace op's spelling (nothing was written). */
function isSpellingRefusal(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error)
  return /surface ?op/i.test(message) && /(invalid|replace|start)/i.test(message)
}

/**
 * Append the rewind marker (`user/message` with a replace op over `start..end`). The spelling
 * follows the session's format; DSH validates an append before it changes the log (zq0929
 * @5593cc25 `Session.append` → `SurfaceManager.validateNext`), so when the host refuses that
 * spelling the other one is tried once. Any other refusal is thrown as it came.
 */
export function appendMarker(session: HostSession, data: unknown, start: number, end: number, sourceEventSeqs: readonly number[]): HostEvent {
  const first = formatVersion(session) >= SEQ_SPELLING_FROM_FORMAT ? 'seq' : 'plain'
  const append = (spelling: 'seq' | 'plain'): HostEvent => session.append('user/message', data, {
    surfaceOp: replaceOp(session, start, end, spelling),
    sourceEventSeqs: [...sourceEventSeqs],
  })
  const before = logLength(session)
  try {
    return append(first)
  } catch (error) {
    // Retry only when nothing was appended and the refusal is about the op itself.
    if (!isSpellingRefusal(error) || logLength(session) !== before) throw error
    return append(first === 'seq' ? 'plain' : 'seq')
  }
}

/**
 * How many leading events a session inherited from its fork parent: format 2+ keeps it on the
 * live session (`Session.inheritedEventCount`, zq0929 @5593cc25) and marks the header
 * `isSeeded`; rc.8 writes it into the header as `seedLength`. `undefined` when the session is no
 * fork child or the count cannot be read.
 */
export function inheritedCount(header: HostSessionHeader, live?: HostSession): number | undefined {
  const seedLength = header.seedLength
  if (typeof seedLength === 'number' && Number.isSafeInteger(seedLength) && seedLength > 0) return seedLength
  if (header.isSeeded === true) {
    const n = live?.inheritedEventCount ?? header.inheritedEventCount
    if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0) return n
  }
  return undefined
}

/** The lineage fields a fork or undo child is created with, as this session's format spells them. */
export interface ChildLineage {
  meta: { parentSession: string; seedLength?: number; isSeeded?: boolean }
  inheritedEventCount?: number
}

/**
 * The lineage of a child seeded with the parent's first `seedLength` events: format 2+
 * (`isSeeded: true` + top-level `inheritedEventCount`; zq0929 @5593cc25 `SessionStore.prepare`,
 * and the 0.2.x agent registry's `CreateAgentOptions`), else rc.8's `meta.seedLength`. The
 * header's shape decides: a header that carries `isSeeded` is format 2+ whatever its version.
 */
export function childLineage(parent: HostSession, seedLength: number): ChildLineage {
  const seeded = typeof parent.header.isSeeded === 'boolean' || formatVersion(parent) >= SEEDED_LINEAGE_FROM_FORMAT
  return seeded
    ? { meta: { parentSession: parent.header.id, isSeeded: true }, inheritedEventCount: seedLength }
    : { meta: { parentSession: parent.header.id, seedLength } }
}
