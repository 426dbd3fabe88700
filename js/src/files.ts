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
  return {
    unavailable: newer,
    capture: async (...a) => { await awaitNative(() => store.capture(...a)) },
    commit: async (...a) => { await awaitNative(() => store.commit(...a)) },
    discard: async (...a) => { await awaitNative(() => store.discard(...a)) },
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
