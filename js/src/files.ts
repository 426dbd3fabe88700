/**
 * The {@link FilesPort} over the addon's snapshot store (`BindingStore`). When the store cannot
 * open, or the store on disk was written by a newer build, the port reports itself unavailable
 * (`rewind/store-newer`, ...): captures are skipped and a rewind restores the conversation only.
 */
import { Codes, toRewindError } from './errors.ts'
import type { HostLogger } from './host.ts'
import type { Addon } from './native.ts'
import { awaitNative, callNative } from './native.ts'
import type { FilesPort } from './ports.ts'
import { unavailableFiles } from './ports.ts'

/**
 * A commit at the anchor its capture named is settled in memory and written with the session's
 * next write; when a burst of tool calls goes quiet for this long, the waiting commits are
 * written on their own.
 */
export const FLUSH_AFTER_MS = 50

/**
 * However busy the session stays, the commits waiting for its next write are written on their
 * own at the latest this long after the first of them (a burst of calls that write nothing of
 * their own, e.g. later writes of paths the turn already changed, keeps them waiting otherwise).
 */
export const FLUSH_WITHIN_MS = 1000

/** Open the engine's store (`root`: `<dsh home>/rewind-snapshots`, for the log). */
export function openFiles(engine: () => Addon.BindingEngine, root: string, logger: HostLogger): FilesPort {
  let store: Addon.BindingStore
  try {
    store = callNative(() => engine().store())
  } catch (error) {
    const e = toRewindError(error)
    logger.warn('snapshot store at %s unavailable: %s', root, e.message)
    return unavailableFiles(e.code, e.message)
  }
  const newer = (): { code: string; message: string } | undefined => {
    const why = store.newerVersion()
    return why === null || why === undefined ? undefined : { code: Codes.storeNewer, message: why }
  }
  // Per session: the timer of its flush and when its first waiting commit came. Each commit
  // moves the flush back to FLUSH_AFTER_MS after it (`refresh`, no new timer), so a burst of
  // calls is written by its own appends and the flush comes once the burst is quiet.
  const flushes = new Map<string, { timer: ReturnType<typeof setTimeout>; since: number }>()
  const flushSoon = (sessionId: string, cwd: string): void => {
    const key = `${sessionId}\0${cwd}`
    const armed = flushes.get(key)
    if (armed !== undefined) {
      if (performance.now() - armed.since < FLUSH_WITHIN_MS - FLUSH_AFTER_MS) armed.timer.refresh()
      return
    }
    const timer = setTimeout(() => {
      flushes.delete(key)
      awaitNative(() => store.flush(sessionId, cwd)).catch((error: unknown) => {
        logger.warn('writing the commits of session %s failed: %s', sessionId, (error as Error).message)
      })
    }, FLUSH_AFTER_MS)
    timer.unref?.()
    flushes.set(key, { timer, since: performance.now() })
  }
  return {
    unavailable: newer,
    // Both run on the host's thread when nothing is in the way, with no promise made then.
    capture: (...a) => {
      const queued = callNative(() => store.captureNow(...a))
      return queued === undefined ? undefined : awaitNative(() => queued)
    },
    commit: (sessionId, cwd, callId, anchorSeq, ok) => {
      const queued = callNative(() => store.commitNow(sessionId, cwd, callId, anchorSeq, ok))
      if (queued === undefined) {
        if (ok) flushSoon(sessionId, cwd)
        return undefined
      }
      return awaitNative(() => queued).then(() => {
        if (ok) flushSoon(sessionId, cwd)
      })
    },
    discard: async (...a) => { await awaitNative(() => store.discard(...a)) },
    takeLocksAhead: (sessionId, cwd) => {
      // Only a head start: the capture takes the locks itself when this did not.
      awaitNative(() => store.takeLocksAhead(sessionId, cwd)).catch(() => {})
    },
    recheck: async (...a) => { await awaitNative(() => store.recheck(...a)) },
    scan: async (...a) => await awaitNative(() => store.scan(...a)),
    preview: async (...a) => await awaitNative(() => store.preview(...a)),
    diff: (...a) => awaitNative(() => store.diff(...a)),
    sessionFormat: async (...a) => { await awaitNative(() => store.sessionFormat(...a)) },
    prune: async (...a) => { await awaitNative(() => store.prune(...a)) },
    forget: (sessionId) => store.forget(sessionId),
    restoreStatuses: (...a) => awaitNative(() => store.restoreStatuses(...a)),
  }
}
