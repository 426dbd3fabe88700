/**
 * Which chat rows a rewind hides — pure, no DOM and no DSH types.
 *
 * A rewind appends one marker (`user/message`, source `dsh-rewind`, a
 * `replace` surface operation starting at the target seq). The chat view
 * keeps every node in its store; this module only decides which rendered
 * rows leave the view: every node anchored in `[targetSeq, markerSeq]` of an
 * effective marker. A marker is effective only when its target is a human
 * message still on screen when the marker is applied and its span is
 * well-formed; anything else (a failed or malformed rewind, a target the
 * client cannot see) hides nothing, so the transcript never loses rows on a
 * guess.
 */

/** The part of a chat node the computation needs. */
export interface ChatRow {
  /** Stable render key (`data-chat-anchor-key`). */
  readonly key: string
  /** Row kind (`user`, `steering`, `context`, `tool-call`, `assistant-step`, `turn-tail`, …). */
  readonly kind: string
  /** Sortable log position of the row. */
  readonly anchorSeq: number
}

/** One rewind marker as read from the session log. */
export interface RewindMarker {
  /** Log seq of the marker itself. */
  readonly markerSeq: number
  /** Log seq of the rewind target (the surface operation's start). */
  readonly targetSeq: number
}

/** Row kinds a rewind can target (human messages). */
export const TARGET_KINDS: ReadonlySet<string> = new Set(['user', 'steering'])

/** Which markers took effect and which rows they hide. */
export interface HiddenResult {
  /** Keys of the rows to hide. */
  readonly hidden: ReadonlySet<string>
  /** Markers applied, in log order. */
  readonly applied: readonly RewindMarker[]
  /** Markers ignored (malformed, or the target is not a visible human message). */
  readonly ignored: readonly RewindMarker[]
}

const isSeq = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0

/**
 * Compute the rows hidden by a session's rewind markers.
 * Markers are applied in log order; a later marker may target a row that an
 * earlier marker left visible (a rewind after a rewind), and a marker whose
 * target is already hidden or absent is ignored.
 * @param rows - every chat node of the session (visible or not).
 * @param markers - the session's rewind markers in any order.
 * @returns hidden keys plus the applied / ignored markers.
 */
export function computeHidden(rows: readonly ChatRow[], markers: readonly RewindMarker[]): HiddenResult {
  const hidden = new Set<string>()
  const applied: RewindMarker[] = []
  const ignored: RewindMarker[] = []
  const sorted = [...markers].sort((a, b) => a.markerSeq - b.markerSeq)
  for (const marker of sorted) {
    if (!isSeq(marker.markerSeq) || !isSeq(marker.targetSeq) || marker.targetSeq >= marker.markerSeq) {
      ignored.push(marker)
      continue
    }
    const target = rows.find(row => row.anchorSeq === marker.targetSeq && TARGET_KINDS.has(row.kind))
    if (target === undefined || hidden.has(target.key)) {
      ignored.push(marker)
      continue
    }
    for (const row of rows) {
      if (row.anchorSeq >= marker.targetSeq && row.anchorSeq <= marker.markerSeq) hidden.add(row.key)
    }
    applied.push(marker)
  }
  return { hidden, applied, ignored }
}

/**
 * Read a marker out of a raw session event, or undefined when the event is
 * not a rewind marker. Accepts the surface operation as `{op:'replace', start}`
 * or `{op:'replace', startSeq}`.
 * @param event - raw session event (untrusted shape).
 * @returns the marker.
 */
export function markerOfEvent(event: unknown): RewindMarker | undefined {
  if (typeof event !== 'object' || event === null) return undefined
  const e = event as { type?: unknown; seq?: unknown; surfaceOp?: unknown; data?: { source?: { kind?: unknown } } }
  if (e.type !== 'user/message' || e.data?.source?.kind !== 'dsh-rewind') return undefined
  const op = e.surfaceOp as { op?: unknown; start?: unknown; startSeq?: unknown } | undefined
  if (typeof op !== 'object' || op === null || op.op !== 'replace') return undefined
  const start = isSeq(op.start) ? op.start : op.startSeq
  if (!isSeq(e.seq) || !isSeq(start)) return undefined
  return { markerSeq: e.seq, targetSeq: start }
}

/**
 * The markers that mean "a rewind just happened" in this pass: not seen
 * before, and whose target was on screen (a visible human row) in the
 * previous pass. Markers that arrive together with their target (a session
 * opened, a reload, older history paged in) are not fresh.
 * @param applied - markers applied in this pass.
 * @param seen - marker seqs seen in earlier passes (updated in place).
 * @param visibleTargets - anchor seqs of the human rows visible in the previous pass.
 * @returns the fresh markers.
 */
export function freshMarkers(applied: readonly RewindMarker[], seen: Set<number>, visibleTargets: ReadonlySet<number>): RewindMarker[] {
  const fresh: RewindMarker[] = []
  for (const marker of applied) {
    if (seen.has(marker.markerSeq)) continue
    seen.add(marker.markerSeq)
    if (visibleTargets.has(marker.targetSeq)) fresh.push(marker)
  }
  return fresh
}

/**
 * Anchor seqs of the human rows a pass leaves visible.
 * @param rows - the session's rows.
 * @param hidden - keys hidden in this pass.
 * @returns the seqs.
 */
export function visibleTargetSeqs(rows: readonly ChatRow[], hidden: ReadonlySet<string>): Set<number> {
  return new Set(rows.filter(r => TARGET_KINDS.has(r.kind) && !hidden.has(r.key)).map(r => r.anchorSeq))
}
