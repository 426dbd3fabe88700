/** Pure helpers of the Rewind history page. */

/** The fields of a history entry the helpers read. */
export interface EntryLike {
  readonly opId: string
  readonly sessionId: string
  readonly undoable: boolean
  readonly undoneAt?: number
}

/**
 * The entry that gets "Restore to before this rewind": the newest entry of
 * the current session that the host marks undoable and that was not undone
 * yet. Entries of other sessions never get the action.
 * @param entries - history entries, newest first.
 * @param sessionId - the session on screen.
 * @returns its op id, or undefined.
 */
export function newestEligible(entries: readonly EntryLike[], sessionId: string | undefined): string | undefined {
  if (sessionId === undefined) return undefined
  return entries.find(e => e.sessionId === sessionId && e.undoable === true && e.undoneAt === undefined)?.opId
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
