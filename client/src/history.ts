/** Pure helpers of the Rewind history page. */

/** The fields of a history entry the helpers read. */
export interface EntryLike {
  readonly opId: string
  readonly sessionId: string
  readonly undoable: boolean
  readonly undoneAt?: number
  readonly fork?: { readonly childSessionId: string }
}

/**
 * The entries that get "Undo this rewind": every entry of the current session (or the fork rewind
 * that created it) that the host marks undoable and that was not undone yet — any of them, not
 * only the newest. Entries of other sessions never get the action.
 * @param entries - history entries, newest first.
 * @param sessionId - the session on screen.
 * @returns their op ids.
 */
export function undoableEntries(entries: readonly EntryLike[], sessionId: string | undefined): Set<string> {
  if (sessionId === undefined) return new Set()
  return new Set(entries.filter(e => (e.sessionId === sessionId || e.fork?.childSessionId === sessionId) && e.undoable === true && e.undoneAt === undefined).map(e => e.opId))
}

/** Capability keys the host reports through `caps`. */
export const CAP_KEYS = ['history', 'undo', 'fileCheckpointing', 'backups'] as const

/**
 * The capabilities the host lacks (anything not reported as `true`, including
 * a key the host does not send at all).
 * @param caps - the `caps` answer.
 * @returns the missing keys, in a fixed order.
 */
export function missingCaps(caps: Readonly<Record<string, unknown>>): (typeof CAP_KEYS)[number][] {
  return CAP_KEYS.filter(key => caps[key] !== true)
}
