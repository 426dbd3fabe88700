/**
 * The text formatting the host plugin (`js/src`) and the browser client (`client/src`) share:
 * one escape of control characters, one byte formatter and one size parser. Pure functions, no
 * host and no DOM, so both halves bundle this one module.
 */

/**
 * A file name or message as one line of a report or list: control characters (C0, DEL, C1, and
 * the Unicode line and paragraph separators) become `\xNN` / `\uNNNN` escapes and a backslash
 * becomes `\\`, so a name can never split a line or pass for two.
 * @param text - raw text.
 * @returns the escaped text.
 */
export function escapeControl(text: string): string {
  return text.replace(/[\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    if (c === '\\') return '\\\\'
    const code = c.charCodeAt(0)
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
  })
}

/**
 * A message's text on one line: every run of control characters (newlines included) becomes one
 * space. For prose, where a backslash is just a character (file names use {@link escapeControl}).
 * @param text - raw text.
 * @returns the text on one line.
 */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim()
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const

/**
 * A byte count in binary units: `512 B`, `5.0 MiB` (`fixed`, one decimal always: the host's
 * reports) or `5 MiB` / `1.5 GiB` (`short`, a trailing `.0` dropped: the client's pages). A value
 * that is not a finite number is shown as it is.
 * @param bytes - the count.
 * @param style - `fixed` (default) or `short`.
 * @returns the size as text.
 */
export function formatBytes(bytes: number, style: 'fixed' | 'short' = 'fixed'): string {
  if (!Number.isFinite(bytes)) return String(bytes)
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024
    unit++
  }
  if (unit === 0) return `${bytes} B`
  return `${style === 'short' ? +value.toFixed(1) : value.toFixed(1)} ${BYTE_UNITS[unit]}`
}

/**
 * Bytes of `123`, `500K`, `2GiB`, `1.5G` (binary units, case-insensitive).
 * @param text - the size as typed.
 * @returns the byte count, or `undefined` when it is not a positive size.
 */
export function parseSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?$/i.exec(text.trim())
  if (m === null) return undefined
  const unit = (m[2] ?? 'b').toLowerCase()[0] as 'b' | 'k' | 'm' | 'g' | 't'
  const mult = { b: 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 }[unit]
  const bytes = Math.floor(Number(m[1]) * mult)
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined
}
