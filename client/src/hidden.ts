/**
 * Which chat rows a rewind hides — pure, no DOM and no DSH types.
 *
 * A rewind appends one marker (`user/message`, source `dsh-prompt-rewind`, a
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

/** `data.source.kind` this plugin writes on its markers. */
export const MARKER_SOURCE_KIND = 'dsh-prompt-rewind'
/**
 * The kind its markers carried before: another rewind plugin writes the same kind, so such a
 * marker is taken as ours only with every other field ours has (see {@link markerOfEvent}).
 */
export const LEGACY_MARKER_SOURCE_KIND = 'dsh-rewind'
/** The text of a marker's one content block. */
export const MARKER_TEXT = '(empty message)'

/**
 * Whether a `dsh-rewind` marker's data is exactly what this plugin wrote: role `user`, one
 * text block `(empty message)`, a string `id`, and a source carrying only its kind.
 */
function ownLegacyData(data: { role?: unknown; id?: unknown; content?: unknown; source?: object }): boolean {
  const content = data.content as readonly { type?: unknown; text?: unknown }[] | undefined
  return data.role === 'user' && typeof data.id === 'string'
    && Array.isArray(content) && content.length === 1 && content[0]?.type === 'text' && content[0].text === MARKER_TEXT
    && Object.keys(data.source ?? {}).length === 1
}

/**
 * Read a marker out of a raw session event, or undefined when the event is
 * not a rewind marker of this plugin. The source kind is `dsh-prompt-rewind`, or the
 * earlier `dsh-rewind` with every other field of this plugin's marker (another plugin
 * writes `dsh-rewind` too). Accepts the surface operation as `{op:'replace', start}`
 * (session format 0–2) or `{op:'replace', startSeq}` (format 3 and later).
 * @param event - raw session event (untrusted shape).
 * @returns the marker.
 */
export function markerOfEvent(event: unknown): RewindMarker | undefined {
  if (typeof event !== 'object' || event === null) return undefined
  const e = event as { type?: unknown; seq?: unknown; surfaceOp?: unknown; data?: { role?: unknown; id?: unknown; content?: unknown; source?: { kind?: unknown } } }
  if (e.type !== 'user/message' || typeof e.data !== 'object' || e.data === null) return undefined
  const kind = e.data.source?.kind
  if (kind !== MARKER_SOURCE_KIND && !(kind === LEGACY_MARKER_SOURCE_KIND && ownLegacyData(e.data))) return undefined
  const op = e.surfaceOp as { op?: unknown; start?: unknown; startSeq?: unknown } | undefined
  if (typeof op !== 'object' || op === null || op.op !== 'replace') return undefined
  const start = isSeq(op.start) ? op.start : op.startSeq
  if (!isSeq(e.seq) || !isSeq(start)) return undefined
  return { markerSeq: e.seq, targetSeq: start }
}

/**
 * Markers named by the host's rewind history, for a page whose client has no event
 * registry to read them from the log: every entry of the session with a `markerSeq`
 * (the seq of the marker the rewind appended) and its `targetSeq`. Entries without a
 * `markerSeq` (forks, older hosts) give nothing, so nothing is hidden on a guess.
 * @param entries - history entries (untrusted shape).
 * @param sessionId - the session on screen.
 * @returns its markers.
 */
export function markersFromHistory(entries: unknown, sessionId: string): RewindMarker[] {
  if (!Array.isArray(entries)) return []
  const out: RewindMarker[] = []
  for (const entry of entries as { sessionId?: unknown; markerSeq?: unknown; targetSeq?: unknown }[]) {
    if (entry?.sessionId !== sessionId || !isSeq(entry.markerSeq) || !isSeq(entry.targetSeq)) continue
    out.push({ markerSeq: entry.markerSeq, targetSeq: entry.targetSeq })
  }
  return out
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

/** Kind of the hidden chat node carrying one rewind marker. */
export const MARKER_KIND = 'dsh-rewind-marker'

/**
 * The chat Definition that turns each rewind marker into a hidden node of the session's
 * store (`data` = the {@link RewindMarker}). The same Definition serves rc.8's
 * `conversationEvents.register` and, from 0.1.2, `uiConversation.events.register`: both
 * take `{kind, target, match, start, update, buildViewNode}` and hand `match` the session
 * event (`type`, `seq`, `data`, `surfaceOp`). See zq0929/deepseek-harness @
 * 5593cc250aae228449197efd2413192165e3377f
 * `packages/client/ui-chat/tests/conversation-node-definitions.client.spec.ts`.
 */
export const markerDefinition = {
  kind: MARKER_KIND,
  target: 'chat',
  match: (event: { seq?: number; data?: { id?: unknown } }): { id: string; role: 'start' } | null =>
    (markerOfEvent(event) === undefined ? null : { id: String(event.data?.id ?? event.seq), role: 'start' }),
  start: (_context: unknown, match: { event: unknown }): RewindMarker | undefined => markerOfEvent(match.event),
  update: (context: { state: unknown }): unknown => context.state,
  buildViewNode: (context: { key: string; id: string; state?: RewindMarker; start?: { location?: unknown } }) => (context.state === undefined ? null : {
    key: context.key,
    kind: MARKER_KIND,
    id: context.id,
    target: 'chat',
    anchorSeq: context.state.markerSeq,
    location: context.start?.location ?? { kind: 'unresolved' },
    visibility: 'hidden' as const,
    data: context.state,
  }),
}
