/**
 * Small observable stores shared by the surfaces: the plugin locale, the open
 * confirm dialog, and the one settings model both configuration cards edit.
 */
import { bindLocale, resolveLocale, type LocaleId, type T } from './i18n.ts'
import { rpc, type RewindSettings, type SettingsPatch } from './rpc.ts'
import type { Ctx } from './host.ts'

/** A minimal external store for `useSyncExternalStore`. */
export class Store<S> {
  private state: S
  private readonly listeners = new Set<() => void>()
  constructor(initial: S) { this.state = initial }
  /** @returns the current state (stable until the next `set`). */
  getSnapshot = (): S => this.state
  /** @param fn - change listener. @returns unsubscribe. */
  subscribe = (fn: () => void): (() => void) => {
    this.listeners.add(fn)
    return () => { this.listeners.delete(fn) }
  }
  /** @param next - the new state, or an updater. */
  set(next: S | ((prev: S) => S)): void {
    const value = typeof next === 'function' ? (next as (prev: S) => S)(this.state) : next
    if (Object.is(value, this.state)) return
    this.state = value
    for (const fn of [...this.listeners]) fn()
  }
}

/** The locale the plugin renders in, and its bound translate function. */
export interface LocaleState { readonly locale: LocaleId; readonly t: T }

/**
 * Follow DSH's interface language (and the browser's languages) into the
 * plugin's own locale.
 * @param localeService - DSH's locale service, when present.
 * @param settingsScope - DSH's settings scope (for the stored language preference), when present.
 * @returns the store and a disposer.
 */
export function createLocaleStore(localeService: Ctx['locale'], settingsScope: Ctx['settingsScope']): { store: Store<LocaleState>; dispose: () => void } {
  let preferenceScope: ReturnType<NonNullable<Ctx['settingsScope']>['bind']> | undefined
  try {
    preferenceScope = settingsScope?.bind({ namespace: 'locale' })
  } catch {
    preferenceScope = undefined
  }
  const compute = (): LocaleId => {
    let dshActive: string | undefined
    let dshPreference: string | undefined
    try { dshActive = localeService?.getSnapshot().active } catch { dshActive = undefined }
    try { dshPreference = preferenceScope?.getSnapshot().value?.preference } catch { dshPreference = undefined }
    const browser = typeof navigator === 'undefined' ? [] : [...(navigator.languages ?? []), navigator.language].filter(Boolean)
    return resolveLocale({ dshActive, dshPreference, browser })
  }
  const first = compute()
  const store = new Store<LocaleState>({ locale: first, t: bindLocale(first) })
  const refresh = (): void => {
    const next = compute()
    if (next !== store.getSnapshot().locale) store.set({ locale: next, t: bindLocale(next) })
  }
  const offs: (() => void)[] = []
  try { if (localeService !== undefined) offs.push(localeService.subscribe(refresh)) } catch { /* no locale service: browser languages only */ }
  try { if (preferenceScope !== undefined) offs.push(preferenceScope.subscribe(refresh)) } catch { /* no settings scope */ }
  return { store, dispose: () => { for (const off of offs) off() } }
}

/** The confirm dialog's request. */
export interface DialogRequest {
  readonly sessionId: string
  readonly target: import('./host.ts').MessageInfo
}

/** Open dialog (or null). */
export const dialogStore = new Store<DialogRequest | null>(null)

/** Bumped whenever a rewind ran (or was seen to run) here: the banner asks again what is left open. */
export const rewindsSeen = new Store<number>(0)

/** State of the shared settings model. */
export interface SettingsState {
  readonly status: 'idle' | 'loading' | 'ready' | 'error'
  /** The host's current value. */
  readonly value?: RewindSettings
  /** The edited, unsaved value both cards show. */
  readonly draft?: RewindSettings
  readonly saving: boolean
  readonly message?: { readonly kind: 'ok' } | { readonly kind: 'error'; readonly detail: string }
  readonly error?: string
}

/**
 * The one settings model: loaded from `settings`, edited as a shared draft,
 * saved through `settings.update`. The Rewind history page and the Plugins
 * page render the same card over this model, so an edit on one shows on the
 * other.
 */
export class SettingsModel {
  readonly store = new Store<SettingsState>({ status: 'idle', saving: false })

  /** @param sessionId - any live session (the host needs one to resolve the request). */
  async load(sessionId: string): Promise<void> {
    this.store.set(s => ({ ...s, status: s.value === undefined ? 'loading' : s.status, error: undefined }))
    try {
      const value = await rpc('settings', sessionId, {})
      this.store.set(s => ({ ...s, status: 'ready', value, draft: s.draft !== undefined && !sameSettings(s.draft, s.value) ? s.draft : value }))
    } catch (error) {
      this.store.set(s => ({ ...s, status: 'error', error: String((error as Error).message) }))
    }
  }

  /** @param patch - fields to change in the draft. */
  edit(patch: SettingsPatch): void {
    this.store.set(s => {
      if (s.draft === undefined) return s
      const draft: RewindSettings = {
        ...s.draft,
        ...(patch.backups === undefined ? {} : { backups: patch.backups }),
        ...(patch.trackAll === undefined ? {} : { trackAll: patch.trackAll }),
        ...(patch.historyLimit === undefined ? {} : { historyLimit: patch.historyLimit }),
        cleanup: { ...s.draft.cleanup, ...patch.cleanup },
      }
      return { ...s, draft, message: undefined }
    })
  }

  /**
   * Save the draft's differences from the host value.
   * @param sessionId - any live session.
   */
  async save(sessionId: string): Promise<void> {
    const { draft, value } = this.store.getSnapshot()
    if (draft === undefined || value === undefined) return
    const patch = diffSettings(value, draft)
    this.store.set(s => ({ ...s, saving: true, message: undefined }))
    try {
      const next = await rpc('settings.update', sessionId, { patch })
      this.store.set(s => ({ ...s, saving: false, value: next, draft: next, message: { kind: 'ok' } }))
    } catch (error) {
      this.store.set(s => ({ ...s, saving: false, message: { kind: 'error', detail: String((error as Error).message) } }))
    }
  }
}

/**
 * Whether two settings values are equal.
 * @param a - one value.
 * @param b - the other value.
 * @returns equality.
 */
export function sameSettings(a: RewindSettings | undefined, b: RewindSettings | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return a.backups === b.backups && a.trackAll === b.trackAll && a.historyLimit === b.historyLimit && a.maxFileBytes === b.maxFileBytes
    && a.cleanup.enabled === b.cleanup.enabled && a.cleanup.maxAgeDays === b.cleanup.maxAgeDays && a.cleanup.maxSizeBytes === b.cleanup.maxSizeBytes
}

/**
 * The patch that turns `from` into `to` (only the editable fields).
 * @param from - the host value.
 * @param to - the draft.
 * @returns the patch.
 */
export function diffSettings(from: RewindSettings, to: RewindSettings): SettingsPatch {
  const patch: SettingsPatch = {}
  if (from.backups !== to.backups) patch.backups = to.backups
  if (to.trackAll !== undefined && from.trackAll !== to.trackAll) patch.trackAll = to.trackAll
  if (from.historyLimit !== to.historyLimit) patch.historyLimit = to.historyLimit
  const cleanup: { enabled?: boolean; maxAgeDays?: number; maxSizeBytes?: number } = {}
  if (from.cleanup.enabled !== to.cleanup.enabled) cleanup.enabled = to.cleanup.enabled
  if (from.cleanup.maxAgeDays !== to.cleanup.maxAgeDays) cleanup.maxAgeDays = to.cleanup.maxAgeDays
  if (to.cleanup.maxSizeBytes !== undefined && from.cleanup.maxSizeBytes !== to.cleanup.maxSizeBytes) cleanup.maxSizeBytes = to.cleanup.maxSizeBytes
  if (Object.keys(cleanup).length > 0) patch.cleanup = cleanup
  return patch
}
