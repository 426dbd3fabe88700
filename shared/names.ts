/**
 * Workspace paths whose names may not be valid UTF-8, in the three forms the plugin speaks (the
 * host plugin and the browser client share this module: pure functions, no host, no DOM, no
 * Node `Buffer`):
 *
 * - the **spelling** (what the addon hands over and takes, and what `--keep` / `--only` /
 *   `--take` accept): the path itself when it is valid UTF-8 and does not begin with `hex:`,
 *   else `hex:` and its bytes in lowercase hex (`hex:6eff2e747874` for `n\xff.txt`);
 * - the **JSON form** of `docs/format.md` (the RPC): a string when the path is valid UTF-8,
 *   else `{hex, lossy}` (`hex` authoritative, `lossy` the display form);
 * - the **shown form** (chat reports): the text; for a name that is not UTF-8 its display form
 *   with the escaped bytes and the spelling beside it, so two names alike on screen are told
 *   apart and each can be chosen.
 */
import { escapeControl as escapeText } from './format.ts'

/** The prefix of a path spelled by its bytes. */
export const HEX = 'hex:'

/** A path in the JSON form of `docs/format.md`. */
export type JsonPath = string | { hex: string; lossy: string }

const utf8 = new TextEncoder()

/** Lowercase hex of bytes. */
function toHex(bytes: Uint8Array): string {
  let out = ''
  for (const b of bytes) out += b.toString(16).padStart(2, '0')
  return out
}

/** The bytes of hex digits (already checked). */
function fromHex(digits: string): Uint8Array {
  const out = new Uint8Array(digits.length / 2)
  for (let i = 0; i < out.length; i++) out[i] = parseInt(digits.slice(2 * i, 2 * i + 2), 16)
  return out
}

/** The bytes as text, each invalid sequence shown as U+FFFD (the display form). */
function lossy(bytes: Uint8Array): string {
  return new TextDecoder('utf-8').decode(bytes)
}

/** The bytes a spelling names, or `undefined` for a `hex:` spelling whose digits are not hex. */
export function spelledBytes(spelling: string): Uint8Array | undefined {
  if (!spelling.startsWith(HEX)) return utf8.encode(spelling)
  const digits = spelling.slice(HEX.length)
  if (digits.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(digits)) return undefined
  return fromHex(digits)
}

/** Whether `bytes` are valid UTF-8. */
function isUtf8(bytes: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes)
    return true
  } catch {
    return false
  }
}

/** The spelling of a path given by its bytes. */
export function spellingOfBytes(bytes: Uint8Array): string {
  const text = isUtf8(bytes) ? lossy(bytes) : undefined
  return text !== undefined && !text.startsWith(HEX) ? text : `${HEX}${toHex(bytes)}`
}

/** The spelling of a path in the JSON form (a string is the path's own text). */
export function spellingOfJson(p: JsonPath): string {
  if (typeof p === 'string') return p.startsWith(HEX) ? `${HEX}${toHex(utf8.encode(p))}` : p
  return `${HEX}${p.hex.toLowerCase()}`
}

/**
 * A path of a request in the JSON form, as its spelling: a non-empty string, or an object whose
 * `hex` is an even number of hex digits. `undefined` for anything else.
 */
export function spellingOfRequest(raw: unknown): string | undefined {
  if (typeof raw === 'string') return raw === '' ? undefined : spellingOfJson(raw)
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined
  const hex = (raw as { hex?: unknown }).hex
  if (typeof hex !== 'string' || hex === '' || hex.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(hex)) return undefined
  return `${HEX}${hex.toLowerCase()}`
}

/** The JSON form of a spelling (a spelling that is not hex stays as it is). */
export function jsonPath(spelling: string): JsonPath {
  if (!spelling.startsWith(HEX)) return spelling
  const bytes = spelledBytes(spelling)
  if (bytes === undefined) return spelling
  if (isUtf8(bytes)) return lossy(bytes)
  return { hex: toHex(bytes), lossy: lossy(bytes) }
}

/** The display form of a spelling: the text, an invalid byte shown as U+FFFD. */
export function lossyOf(spelling: string): string {
  const bytes = spelledBytes(spelling)
  return bytes !== undefined ? lossy(bytes) : spelling
}

/** The length of the valid UTF-8 sequence at `i` of `b`, or 0 when the byte there starts none. */
function sequenceAt(b: Uint8Array, i: number): number {
  const c = b[i]!
  if (c < 0x80) return 1
  const cont = (k: number, lo = 0x80, hi = 0xbf): boolean => i + k < b.length && b[i + k]! >= lo && b[i + k]! <= hi
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0
  if (c >= 0xe0 && c <= 0xef) {
    const lo = c === 0xe0 ? 0xa0 : 0x80
    const hi = c === 0xed ? 0x9f : 0xbf
    return cont(1, lo, hi) && cont(2) ? 3 : 0
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const lo = c === 0xf0 ? 0x90 : 0x80
    const hi = c === 0xf4 ? 0x8f : 0xbf
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0
  }
  return 0
}

/**
 * The bytes of a path with each byte that is not part of valid UTF-8 as `\xNN` (`n\xff.txt`);
 * the valid text with its control characters escaped and a backslash doubled.
 */
export function escapedBytes(bytes: Uint8Array): string {
  let out = ''
  let run = 0
  for (let i = 0; i < bytes.length;) {
    const n = sequenceAt(bytes, i)
    if (n === 0) {
      out += escapeText(lossy(bytes.subarray(run, i)))
      out += `\\x${bytes[i]!.toString(16).padStart(2, '0')}`
      i += 1
      run = i
    } else {
      i += n
    }
  }
  return out + escapeText(lossy(bytes.subarray(run)))
}


/**
 * A path for a chat report: its text (control characters escaped); for a name that is not valid
 * UTF-8, its display form followed by its escaped bytes and its spelling —
 * `n�.txt (n\xff.txt, hex:6eff2e747874)` — so names alike on screen are told apart and each
 * can be named to `--keep`, `--only` or `--take`.
 */
export function showPath(spelling: string): string {
  if (!spelling.startsWith(HEX)) return escapeText(spelling)
  const bytes = spelledBytes(spelling)
  if (bytes === undefined) return escapeText(spelling)
  if (isUtf8(bytes)) return escapeText(lossy(bytes))
  return `${escapeText(lossy(bytes))} (${escapedBytes(bytes)}, ${HEX}${toHex(bytes)})`
}

/** Keys of the RPC answers holding lists of paths. */
const PATH_LISTS = ['written', 'deleted', 'restored', 'kept', 'outside', 'uncovered', 'changedDuring', 'inFlight']
/** Keys of the RPC answers holding lists of rows with a `path` (or of paths). */
const PATH_ROWS = ['files', 'skipped', 'failed', 'notCovered', 'unreadable', 'gitObjectGone']

/**
 * An RPC answer with `f` applied to each path it holds: the host turns the addon's spellings
 * into the JSON form (`{hex, lossy}` for a name that is not UTF-8), the client turns that form
 * back into spellings it keys its lists by and sends back. Only the keys known to hold paths
 * change (the top level and a history entry's `paths`); everything else is left as it is.
 */
export function mapPathFields<T>(value: T, f: (path: unknown) => unknown): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) }
  for (const [key, v] of Object.entries(out)) {
    if (!Array.isArray(v)) continue
    if (PATH_LISTS.includes(key)) out[key] = v.map(f)
    else if (PATH_ROWS.includes(key)) {
      out[key] = v.map(r => typeof r === 'object' && r !== null && 'path' in r ? { ...r, path: f((r as { path: unknown }).path) } : f(r))
    }
  }
  if ('path' in out) out.path = f(out.path)
  return out as T
}

/** Whether `p` is a path in the JSON form. */
export function isJsonPath(p: unknown): p is JsonPath {
  return typeof p === 'string' || (typeof p === 'object' && p !== null && typeof (p as { hex?: unknown }).hex === 'string')
}
