/**
 * Rows of the `/rewind` candidate picker — pure. The host's `candidates`
 * endpoint lists the human messages still on the surface, newest first; the
 * picker shows them in that order with their 1-based recency index, a
 * one-line preview and the log seq the pick will run against.
 */
import type { T } from './i18n.ts'

/** One candidate as the host reports it (`shared/rpc-types.ts`). */
export type { Candidate } from '../../shared/rpc-types.ts'
import type { Candidate } from '../../shared/rpc-types.ts'

/** One popupSelect option (the shape DSH's command UI renders). */
export interface PickerRow {
  /** `@<seq>`: the engine form the pick runs. */
  readonly id: string
  readonly label: string
  readonly detail: string
}

/** Longest preview shown in a row, in characters. */
export const PREVIEW_MAX = 80

/**
 * Collapse whitespace and cut a preview to {@link PREVIEW_MAX} characters.
 * @param text - raw message text.
 * @returns one display line.
 */
export function previewLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim()
  const chars = [...line]
  return chars.length > PREVIEW_MAX ? `${chars.slice(0, PREVIEW_MAX - 1).join('')}…` : line
}

/**
 * Format an epoch-ms time as `HH:MM` (local), or '' when absent.
 * @param time - epoch milliseconds.
 * @returns the clock time.
 */
export function clock(time: number | undefined): string {
  if (typeof time !== 'number' || !Number.isFinite(time)) return ''
  const d = new Date(time)
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`
}

/**
 * Build the picker rows. Candidates with a malformed seq or index are
 * dropped (a row that cannot name its target must not be pickable); order is
 * the host's (newest first), duplicates by seq keep the first.
 * @param candidates - the host's candidates.
 * @param t - bound translate function.
 * @returns the rows.
 */
export function pickerRows(candidates: readonly Candidate[], t: T): PickerRow[] {
  const seen = new Set<number>()
  const rows: PickerRow[] = []
  for (const c of candidates) {
    if (!Number.isSafeInteger(c.seq) || c.seq < 0 || !Number.isSafeInteger(c.index) || c.index < 1 || seen.has(c.seq)) continue
    seen.add(c.seq)
    const preview = previewLine(typeof c.preview === 'string' ? c.preview : '')
    const time = clock(c.time)
    const detail = t('picker.detail', { seq: c.seq, time }).replace(/\s·\s$/, '')
    rows.push({
      id: `@${c.seq}`,
      label: t('picker.row', { index: c.index, preview: preview === '' ? t('picker.empty') : preview }),
      detail: c.pending === true ? `${detail} · ${t('picker.pending')}` : detail,
    })
  }
  return rows
}

/**
 * Read the target seq back from a picked row id.
 * @param id - row id (`@<seq>`).
 * @returns the seq, or undefined for a foreign id.
 */
export function seqOfRow(id: string): number | undefined {
  const m = /^@(\d+)$/.exec(id)
  if (m === null) return undefined
  const seq = Number(m[1])
  return Number.isSafeInteger(seq) ? seq : undefined
}
