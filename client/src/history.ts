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
