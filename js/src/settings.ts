/**
 * The plugin's one settings model: backups on/off, the per-file cap, the history limit and the
 * cleanup policy. Registered with DSH's settings service (namespace `dsh-rewind`) when the host
 * has one; otherwise the plugin config (or the defaults) applies read-only, and the cleanup
 * policy fails closed (reported unavailable, a sweep deletes nothing).
 */
import z from '@deepseek-ai/schemastery'
import type { HostContext, HostSettingsScope } from './host.ts'
import { Codes, RewindError } from './errors.ts'

/** The settings namespace. */
export const SETTINGS_NAMESPACE = 'dsh-rewind'

/** Default per-file cap: 8 MiB. */
export const DEFAULT_MAX_FILE_BYTES = 8 * 1024 * 1024

/** Default per-workspace budget of the scan baseline: 1 GiB of file contents. */
export const DEFAULT_MAX_BASELINE_BYTES = 1024 * 1024 * 1024

/** Default per-workspace file-count limit of the scan: 1,000,000 files in scope. */
export const DEFAULT_MAX_FILES = 1_000_000

/** Largest accepted `maxBaselineBytes`: 1 TiB. */
export const MAX_BASELINE_BYTES_LIMIT = 1024 ** 4

/** Largest accepted `maxFiles`: ten million. */
export const MAX_FILES_LIMIT = 10_000_000

/** Largest accepted `maxFileBytes`: 4 GiB. */
export const MAX_FILE_BYTES_LIMIT = 4 * 1024 * 1024 * 1024

/** Default size quota of the snapshot store: 4 GiB (`0` = no quota). */
export const DEFAULT_MAX_SIZE_BYTES = 4 * 1024 ** 3

/** Largest accepted `cleanup.maxSizeBytes`: 1 PiB. */
export const MAX_SIZE_BYTES_LIMIT = 1024 ** 5

/**
 * The accepted range of every numeric setting (a dotted path into the settings), checked by
 * {@link validateNumbers} before anything is written: an integer outside it is refused with
 * `rewind/bad-request` naming the field and the range, never written and never silently replaced
 * by the default. A new numeric setting adds its row here.
 */
export const NUMERIC_RANGES: Readonly<Record<string, { min: number; max: number }>> = {
  maxFileBytes: { min: 0, max: MAX_FILE_BYTES_LIMIT },
  historyLimit: { min: 1, max: 1000 },
  maxBaselineBytes: { min: 0, max: MAX_BASELINE_BYTES_LIMIT },
  maxFiles: { min: 1, max: MAX_FILES_LIMIT },
  'cleanup.maxAgeDays': { min: 1, max: 3650 },
  'cleanup.maxSizeBytes': { min: 0, max: MAX_SIZE_BYTES_LIMIT },
}

/** Refuses (`rewind/bad-request`, details `{field, min, max}`) a numeric setting of `patch` out of its range. */
export function validateNumbers(patch: Record<string, unknown>): void {
  for (const [field, range] of Object.entries(NUMERIC_RANGES)) {
    let value: unknown = patch
    for (const part of field.split('.')) {
      value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[part] : undefined
    }
    if (value === undefined) continue
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < range.min || value > range.max) {
      const shown = typeof value === 'number' ? String(value) : JSON.stringify(value) ?? typeof value
      throw new RewindError(Codes.badRequest, `${field} must be an integer from ${range.min} to ${range.max} (got ${shown}); nothing was written`, { field, min: range.min, max: range.max })
    }
  }
}

/** The keys a patch may carry, with the type each must have (numbers are checked by {@link validateNumbers}). */
const PATCH_KEYS: Readonly<Record<string, 'boolean' | 'number' | 'string' | 'object'>> = {
  backups: 'boolean', maxFileBytes: 'number', trackAll: 'boolean', maxBaselineBytes: 'number', maxFiles: 'number',
  historyLimit: 'number', locale: 'string', cleanup: 'object',
}
const CLEANUP_KEYS: Readonly<Record<string, 'boolean' | 'number'>> = { enabled: 'boolean', maxAgeDays: 'number', maxSizeBytes: 'number' }

/**
 * Refuses (`rewind/bad-request`, details `{field}`) a patch with a key that is no setting or a
 * value of the wrong type, before anything is written.
 */
export function validateShape(patch: Record<string, unknown>): void {
  const check = (prefix: string, value: Record<string, unknown>, keys: Readonly<Record<string, string>>): void => {
    for (const [key, v] of Object.entries(value)) {
      const field = `${prefix}${key}`
      const want = keys[key]
      if (want === undefined) throw new RewindError(Codes.badRequest, `\`${field}\` is not a setting (settings: ${Object.keys(keys).map(k => prefix + k).join(', ')}); nothing was written`, { field })
      // A number's type and range are checked together by validateNumbers (it names the range).
      if (want === 'number') continue
      const got = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v
      if (got !== want) throw new RewindError(Codes.badRequest, `\`${field}\` must be a ${want} (got ${got}); nothing was written`, { field })
    }
  }
  check('', patch, PATCH_KEYS)
  if (patch.cleanup !== undefined) check('cleanup.', patch.cleanup as Record<string, unknown>, CLEANUP_KEYS)
  if (patch.locale !== undefined && !LOCALES.includes(patch.locale as string)) {
    throw new RewindError(Codes.badRequest, `\`locale\` must be one of ${LOCALES.join(', ')} (got ${JSON.stringify(patch.locale)}); nothing was written`, { field: 'locale' })
  }
}

/** The accepted values of `locale`. */
const LOCALES: readonly string[] = ['auto', 'zh-CN', 'en', 'ja', 'es', 'fr', 'de', 'ru', 'pt-BR']

/** The resolved settings. */
export interface RewindSettings {
  /** Whether new snapshot backups are taken. */
  backups: boolean
  /** Per-file cap in bytes; a larger regular file is recorded as uncovered. `0` disables the cap. */
  maxFileBytes: number
  /**
   * Track every change (shell commands too): scan the workspace around every tool call that is
   * not one of DSH's file-writing tools, and at each message. Off: only `write` / `edit` /
   * `str_replace_editor` are captured.
   */
  trackAll: boolean
  /** Per-workspace budget of the scan baseline in bytes (contents kept so any file can come back). */
  maxBaselineBytes: number
  /** Per-workspace limit of files in scope of the scan; a larger workspace is not scanned. */
  maxFiles: number
  /** History entries kept per workspace. */
  historyLimit: number
  /** The snapshot auto-cleanup policy. */
  cleanup: {
    enabled: boolean
    maxAgeDays: number
    /** Size quota of the whole snapshot store in bytes, enforced by the automatic sweep after the age rule; `0` = none. */
    maxSizeBytes: number
  }
  /** Language of command output: `auto` follows DSH's interface language. */
  locale: string
}

/** Defaults. */
export const DEFAULT_SETTINGS: RewindSettings = {
  backups: true,
  maxFileBytes: DEFAULT_MAX_FILE_BYTES,
  trackAll: true,
  maxBaselineBytes: DEFAULT_MAX_BASELINE_BYTES,
  maxFiles: DEFAULT_MAX_FILES,
  historyLimit: 10,
  cleanup: { enabled: false, maxAgeDays: 30, maxSizeBytes: DEFAULT_MAX_SIZE_BYTES },
  locale: 'auto',
}

/** The schemastery schema (rendered by DSH's settings UI, validated on every write). */
export const SettingsSchema = z.object({
  backups: z.boolean().default(true).description('Take before-write snapshot backups (powers file restore).'),
  maxFileBytes: z.natural().max(MAX_FILE_BYTES_LIMIT).default(DEFAULT_MAX_FILE_BYTES).description('Per-file backup cap in bytes (0 = no cap).'),
  trackAll: z.boolean().default(true).description('Track every change, shell commands too (scan the workspace around every other tool call).'),
  maxBaselineBytes: z.natural().max(MAX_BASELINE_BYTES_LIMIT).default(DEFAULT_MAX_BASELINE_BYTES).description('Per-workspace budget of file contents kept by the scan, in bytes.'),
  maxFiles: z.natural().min(1).max(MAX_FILES_LIMIT).default(DEFAULT_MAX_FILES).description('Per-workspace limit of files the scan covers.'),
  historyLimit: z.natural().min(1).max(1000).default(10).description('Rewind history entries kept per workspace.'),
  cleanup: z.object({
    enabled: z.boolean().default(false).description('Remove the snapshots of long-inactive sessions automatically.'),
    maxAgeDays: z.natural().min(1).max(3650).default(30).description('Idle days after which a session\'s snapshots are removed.'),
    maxSizeBytes: z.natural().max(MAX_SIZE_BYTES_LIMIT).default(DEFAULT_MAX_SIZE_BYTES).description('Size quota of all snapshot backups in bytes: after the age rule, the oldest idle sessions go until they fit (0 = no quota).'),
  }).default({ enabled: false, maxAgeDays: 30, maxSizeBytes: DEFAULT_MAX_SIZE_BYTES }),
  locale: z.union(['auto', 'zh-CN', 'en', 'ja', 'es', 'fr', 'de', 'ru', 'pt-BR']).default('auto').description('Language of command output.'),
})

/** A patch accepted by {@link SettingsModel.update}. */
export type SettingsPatch = Partial<Omit<RewindSettings, 'cleanup'>> & { cleanup?: Partial<RewindSettings['cleanup']> }

/** Where the settings come from. */
export class SettingsModel {
  private scope: HostSettingsScope<RewindSettings> | undefined
  private fallback: RewindSettings
  private base: Partial<RewindSettings>

  constructor(config: Partial<RewindSettings> | undefined) {
    this.fallback = normalize({ ...DEFAULT_SETTINGS, ...config, cleanup: { ...DEFAULT_SETTINGS.cleanup, ...config?.cleanup } })
    // The plugin's entry config is the composition layer under the user's settings.
    const base: Partial<RewindSettings> = {}
    for (const key of ['backups', 'maxFileBytes', 'trackAll', 'maxBaselineBytes', 'maxFiles', 'historyLimit', 'locale'] as const) {
      if (config?.[key] !== undefined) (base as Record<string, unknown>)[key] = this.fallback[key]
    }
    if (config?.cleanup !== undefined) base.cleanup = this.fallback.cleanup
    this.base = base
  }

  /**
   * Register with the settings service when the host has one (optional service). A host whose
   * settings service has no `register` (DSH 0.1.7+) keeps the settings of the plugin's config:
   * `onMissing` is told, and the model stays read-only here (DSH's own forms edit the config).
   */
  attach(ctx: HostContext, onError: (error: unknown) => void, onMissing: (message: string) => void = () => {}): void {
    ctx.inject(['settings'], (sub) => {
      try {
        const service = sub.settings
        if (typeof service?.register !== 'function') {
          onMissing('this DSH\'s settings service has no `register` (0.1.7+): the settings come from the plugin\'s config, edited in DSH\'s plugin settings')
          return
        }
        const scope = service.register<RewindSettings>(SETTINGS_NAMESPACE, SettingsSchema, { applies: 'live', base: this.base })
        this.scope = scope
        sub.effect(() => () => {
          if (this.scope === scope) this.scope = undefined
        }, 'dsh-rewind settings scope')
      } catch (error) {
        onError(error)
      }
    })
  }

  /** Whether a settings service backs this model (the cleanup policy needs it). */
  get persistent(): boolean {
    return this.scope !== undefined
  }

  /**
   * The current settings. A value the settings service cannot give (it throws, or holds
   * something that is not a settings object) falls back to the plugin's config and defaults,
   * and `onCorrupt` is told.
   */
  get(): RewindSettings {
    let value: unknown
    try {
      value = this.scope?.get()
    } catch (error) {
      this.onCorrupt?.(error)
      return this.fallback
    }
    if (value === undefined) return this.fallback
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.onCorrupt?.(new Error(`the stored settings are not an object (${value === null ? 'null' : typeof value})`))
      return this.fallback
    }
    return normalize(value as RewindSettings)
  }

  /** Told when the stored settings cannot be read (see {@link SettingsModel.get}). */
  onCorrupt: ((error: unknown) => void) | undefined

  /** Persist a patch; refuses without a settings service. */
  async update(patch: SettingsPatch): Promise<RewindSettings> {
    if (this.scope === undefined) throw new Error('no settings service: settings are read-only on this host (on DSH 0.1.7+ change them in the plugin\'s entry of the DSH profile)')
    validateShape(patch as Record<string, unknown>)
    validateNumbers(patch as Record<string, unknown>)
    const clean: Record<string, unknown> = {}
    if (patch.backups !== undefined) clean.backups = patch.backups
    if (patch.maxFileBytes !== undefined) clean.maxFileBytes = patch.maxFileBytes
    if (patch.trackAll !== undefined) clean.trackAll = patch.trackAll
    if (patch.maxBaselineBytes !== undefined) clean.maxBaselineBytes = patch.maxBaselineBytes
    if (patch.maxFiles !== undefined) clean.maxFiles = patch.maxFiles
    if (patch.historyLimit !== undefined) clean.historyLimit = patch.historyLimit
    if (patch.locale !== undefined) clean.locale = patch.locale
    if (patch.cleanup !== undefined) {
      const cleanup: Record<string, unknown> = {}
      if (patch.cleanup.enabled !== undefined) cleanup.enabled = patch.cleanup.enabled
      if (patch.cleanup.maxAgeDays !== undefined) cleanup.maxAgeDays = patch.cleanup.maxAgeDays
      if (patch.cleanup.maxSizeBytes !== undefined) cleanup.maxSizeBytes = patch.cleanup.maxSizeBytes
      clean.cleanup = { ...this.get().cleanup, ...cleanup }
    }
    // Validate before persisting so a bad patch names its field instead of half-applying.
    SettingsSchema({ ...this.get(), ...clean } as never)
    await this.scope.update(clean)
    return this.get()
  }
}

function normalize(value: RewindSettings): RewindSettings {
  return {
    backups: value.backups !== false,
    maxFileBytes: Number.isSafeInteger(value.maxFileBytes) && value.maxFileBytes >= 0 ? value.maxFileBytes : DEFAULT_MAX_FILE_BYTES,
    trackAll: value.trackAll !== false,
    maxBaselineBytes: Number.isSafeInteger(value.maxBaselineBytes) && value.maxBaselineBytes >= 0 ? value.maxBaselineBytes : DEFAULT_MAX_BASELINE_BYTES,
    maxFiles: Number.isSafeInteger(value.maxFiles) && value.maxFiles > 0 ? value.maxFiles : DEFAULT_MAX_FILES,
    historyLimit: Number.isSafeInteger(value.historyLimit) && value.historyLimit > 0 ? value.historyLimit : 10,
    cleanup: {
      enabled: value.cleanup?.enabled === true,
      maxAgeDays: Number.isSafeInteger(value.cleanup?.maxAgeDays) && value.cleanup.maxAgeDays > 0 ? value.cleanup.maxAgeDays : 30,
      maxSizeBytes: Number.isSafeInteger(value.cleanup?.maxSizeBytes) && value.cleanup.maxSizeBytes >= 0 ? value.cleanup.maxSizeBytes : DEFAULT_MAX_SIZE_BYTES,
    },
    locale: typeof value.locale === 'string' ? value.locale : 'auto',
  }
}
