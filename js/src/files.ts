/**
 * The {@link FilesPort} over the addon's snapshot store (`BindingStore`). When the addon lacks
 * the store, or the store on disk was written by a newer build, the port reports itself
 * unavailable: captures are skipped and a rewind restores the conversation only.
 */
import { Codes } from './errors.ts'
import type { HostLogger } from './host.ts'
import { addon, awaitNative } from './native.ts'
import type { FilesPort, FilesPreview, RestoreOutcome, UndoOutcome } from './ports.ts'
import { unavailableFiles } from './ports.ts'
import { toRewindError } from './errors.ts'

/** The store binding as the addon exposes it (present once the snapshot store is linked). */
interface StoreBinding {
  capture(sessionId: string, cwd: string, callId: string, path: string, maxFileBytes: number): Promise<unknown>
  commit(sessionId: string, cwd: string, callId: string, anchorSeq: number, ok: boolean): Promise<unknown>
  discard(sessionId: string, cwd: string, callId: string): Promise<unknown>
  recheck(sessionId: string, cwd: string, anchorSeq: number, maxFileBytes: number): Promise<unknown>
  preview(sessionId: string, cwd: string, targetSeq: number): Promise<FilesPreview>
  restore(sessionId: string, cwd: string, targetSeq: number, opId: string): Promise<RestoreOutcome>
  journalState(sessionId: string, cwd: string, opId: string): Promise<string>
  undo(sessionId: string, cwd: string, opId: string): Promise<UndoOutcome>
  sessionFormat(sessionId: string, cwd: string, format: string): Promise<unknown>
  prune(sessionId: string, cwd: string): Promise<unknown>
}

interface StoreFactory {
  open(root: string): StoreBinding
}

/** Open the store under `root` (`<dsh home>/rewind-snapshots`). */
export function openFiles(root: string, logger: HostLogger): FilesPort {
  let factory: StoreFactory | undefined
  try {
    factory = (addon() as unknown as { BindingStore?: StoreFactory }).BindingStore
  } catch (error) {
    const e = toRewindError(error)
    logger.warn('snapshot store unavailable: %s', e.message)
    return unavailableFiles(e.code, e.message)
  }
  if (factory === undefined || typeof factory.open !== 'function') {
    return unavailableFiles(Codes.restoreFailed, 'this build of the addon has no snapshot store')
  }
  let store: StoreBinding
  try {
    store = factory.open(root)
  } catch (error) {
    const e = toRewindError(error)
    logger.warn('snapshot store at %s unavailable: %s', root, e.message)
    return unavailableFiles(e.code, e.message)
  }
  return {
    unavailable: () => undefined,
    capture: async (...a) => { await awaitNative(() => store.capture(...a)) },
    commit: async (...a) => { await awaitNative(() => store.commit(...a)) },
    discard: async (...a) => { await awaitNative(() => store.discard(...a)) },
    recheck: async (...a) => { await awaitNative(() => store.recheck(...a)) },
    preview: (...a) => awaitNative(() => store.preview(...a)),
    restore: (...a) => awaitNative(() => store.restore(...a)),
    journalState: (...a) => awaitNative(() => store.journalState(...a)),
    undo: (...a) => awaitNative(() => store.undo(...a)),
    sessionFormat: async (...a) => { await awaitNative(() => store.sessionFormat(...a)) },
    prune: async (...a) => { await awaitNative(() => store.prune(...a)) },
  }
}
