/**
 * The plugin's own dictionaries (eight locales) and the rule that picks one.
 *
 * DSH rc.8 ships only `zh` and `en` for its own interface. The plugin follows
 * that choice when the user made it explicitly in Settings → General →
 * Language; while DSH still runs on its browser-derived default, the
 * browser's preferred languages decide among the plugin's eight locales, and
 * DSH's active locale is the last resort.
 */
import { de } from './locales/de.ts'
import { en, type Dict, type Key } from './locales/en.ts'
import { es } from './locales/es.ts'
import { fr } from './locales/fr.ts'
import { ja } from './locales/ja.ts'
import { ptBR } from './locales/pt-BR.ts'
import { ru } from './locales/ru.ts'
import { zhCN } from './locales/zh-CN.ts'

export type { Dict, Key }

/** Locale ids the plugin ships. */
export const LOCALE_IDS = ['zh-CN', 'en', 'ja', 'es', 'fr', 'de', 'ru', 'pt-BR'] as const
/** One shipped locale id. */
export type LocaleId = typeof LOCALE_IDS[number]

/** Every shipped dictionary by locale id. */
export const DICTIONARIES: Readonly<Record<LocaleId, Dict>> = {
  'zh-CN': zhCN, en, ja, es, fr, de, ru, 'pt-BR': ptBR,
}

/**
 * Map one BCP 47 tag onto a shipped locale, or undefined.
 * @param tag - a language tag such as `pt-BR`, `zh-Hans-CN`, `ja`.
 * @returns the shipped locale id the tag asks for.
 */
export function matchTag(tag: string | undefined | null): LocaleId | undefined {
  if (typeof tag !== 'string' || tag === '') return undefined
  const primary = tag.toLowerCase().split(/[-_]/)[0]
  switch (primary) {
    case 'zh': return 'zh-CN'
    case 'en': return 'en'
    case 'ja': return 'ja'
    case 'es': return 'es'
    case 'fr': return 'fr'
    case 'de': return 'de'
    case 'ru': return 'ru'
    case 'pt': return 'pt-BR'
    default: return undefined
  }
}

/** What the locale choice is made from. */
export interface LocaleInputs {
  /** DSH's active interface locale (`zh` | `en` in rc.8), if the locale service exists. */
  readonly dshActive?: string | undefined
  /** The user's explicit DSH language preference, when one is stored. */
  readonly dshPreference?: string | undefined
  /** The browser's preferred languages, most preferred first. */
  readonly browser?: readonly string[] | undefined
}

/**
 * The locale DSH rc.8 picks by itself from the browser (zh or en, else en).
 * @param browser - the browser's preferred languages.
 * @returns `zh-CN` or `en`.
 */
export function dshDefault(browser: readonly string[] | undefined): LocaleId {
  for (const tag of browser ?? []) {
    const hit = matchTag(tag)
    if (hit === 'zh-CN' || hit === 'en') return hit
  }
  return 'en'
}

/**
 * Pick the plugin locale: an explicit DSH preference wins (stored, or
 * inferred from an active DSH locale that differs from DSH's own browser
 * default), then the first browser language the plugin ships, then DSH's
 * active locale, then English.
 * @param inputs - the three sources.
 * @returns the locale to render.
 */
export function resolveLocale(inputs: LocaleInputs): LocaleId {
  const explicit = matchTag(inputs.dshPreference)
  if (explicit !== undefined) return explicit
  // DSH derives its own default from the browser among zh/en; an active
  // locale other than that default can only be the user's explicit choice.
  const active = matchTag(inputs.dshActive)
  if (active !== undefined && active !== dshDefault(inputs.browser)) return active
  for (const tag of inputs.browser ?? []) {
    const hit = matchTag(tag)
    if (hit !== undefined) return hit
  }
  return matchTag(inputs.dshActive) ?? 'en'
}

/**
 * Translate one key with `{name}` placeholders. A key missing from the
 * locale falls back to English; a missing placeholder stays visible.
 * @param locale - locale to render.
 * @param key - translation key.
 * @param params - placeholder values.
 * @returns the rendered text.
 */
export function translate(locale: LocaleId, key: Key, params?: Readonly<Record<string, string | number>>): string {
  const template = DICTIONARIES[locale][key] || en[key] || key
  if (params === undefined) return template
  return template.replace(/\{(\w+)\}/g, (match, name: string) => (name in params ? String(params[name]) : match))
}

/** A translate function bound to one locale. */
export type T = (key: Key, params?: Readonly<Record<string, string | number>>) => string

/**
 * Bind {@link translate} to one locale.
 * @param locale - locale to render.
 * @returns the bound translate function.
 */
export function bindLocale(locale: LocaleId): T {
  return (key, params) => translate(locale, key, params)
}
