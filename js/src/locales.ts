/**
 * Host command copy in the eight interface languages. Keys are shared; `{name}` placeholders are
 * filled by {@link format}. Missing keys fall back to English.
 */
import { type CopyKey, type Dictionary, en } from './locales/en.ts'
import { zhCN } from './locales/zh-CN.ts'
import { ja } from './locales/ja.ts'
import { es } from './locales/es.ts'
import { fr } from './locales/fr.ts'
import { de } from './locales/de.ts'
import { ru } from './locales/ru.ts'
import { ptBR } from './locales/pt-BR.ts'

/** Supported locale ids. */
export const LOCALES = ['zh-CN', 'en', 'ja', 'es', 'fr', 'de', 'ru', 'pt-BR'] as const
/** One supported locale id. */
export type Locale = typeof LOCALES[number]

export type { CopyKey }

const dictionaries: Record<Locale, Dictionary> = {
  en,
  'zh-CN': zhCN,
  ja,
  es,
  fr,
  de,
  ru,
  'pt-BR': ptBR,
}

/**
 * Map a DSH interface-language value (`zh`, `en`, or a BCP 47 tag) to a supported locale;
 * `undefined` when it names none of them.
 */
export function matchLocale(value: unknown): Locale | undefined {
  if (typeof value !== 'string' || value === '') return undefined
  const tag = value.replace('_', '-').toLowerCase()
  for (const locale of LOCALES) if (locale.toLowerCase() === tag) return locale
  const base = tag.split('-')[0]
  if (base === 'zh') return 'zh-CN'
  if (base === 'pt') return 'pt-BR'
  for (const locale of LOCALES) if (locale === base) return locale
  return undefined
}

/** The copy for `key` in `locale`, placeholders filled from `vars`. */
export function format(locale: Locale, key: CopyKey, vars: Record<string, string | number> = {}): string {
  const template = dictionaries[locale][key] ?? en[key]
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => (name in vars ? String(vars[name]) : whole))
}

/** Every locale's dictionary (for tests: each must define every key). */
export function dictionary(locale: Locale): Dictionary {
  return dictionaries[locale]
}

/** The English keys. */
export const COPY_KEYS = Object.keys(en) as CopyKey[]
