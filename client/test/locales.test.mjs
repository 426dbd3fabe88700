import { test } from 'node:test'
import assert from 'node:assert/strict'
import { DICTIONARIES, LOCALE_IDS, matchTag, resolveLocale, translate } from '../.test-build/i18n.mjs'

const en = DICTIONARIES.en
const placeholders = (s) => [...s.matchAll(/\{(\w+)\}/g)].map(m => m[1]).sort()

test('eight locales ship', () => {
  assert.deepEqual([...LOCALE_IDS].sort(), ['de', 'en', 'es', 'fr', 'ja', 'pt-BR', 'ru', 'zh-CN'])
  for (const id of LOCALE_IDS) assert.ok(DICTIONARIES[id], id)
})

for (const id of LOCALE_IDS) {
  test(`${id}: every key, no extra key, no empty string, same placeholders as English`, () => {
    const dict = DICTIONARIES[id]
    assert.deepEqual(Object.keys(dict).sort(), Object.keys(en).sort())
    for (const [key, value] of Object.entries(dict)) {
      assert.equal(typeof value, 'string', `${id}.${key}`)
      assert.notEqual(value.trim(), '', `${id}.${key} is empty`)
      assert.deepEqual(placeholders(value), placeholders(en[key]), `${id}.${key} placeholders`)
    }
  })
}

test('non-English locales are translated (not copies of English) for the visible labels', () => {
  for (const id of LOCALE_IDS.filter(l => l !== 'en')) {
    for (const key of ['button.label', 'dialog.title', 'dialog.cancel', 'settings.nav', 'settings.undo', 'config.title']) {
      assert.notEqual(DICTIONARIES[id][key], en[key], `${id}.${key}`)
    }
  }
})

test('language tags map onto the shipped locales', () => {
  assert.equal(matchTag('zh-Hans-CN'), 'zh-CN')
  assert.equal(matchTag('pt-PT'), 'pt-BR')
  assert.equal(matchTag('en_GB'), 'en')
  assert.equal(matchTag('ko'), undefined)
  assert.equal(matchTag(''), undefined)
})

test('the locale follows DSH: a stored preference, then an explicit switch, then the browser', () => {
  assert.equal(resolveLocale({ dshPreference: 'zh', dshActive: 'zh', browser: ['ja-JP'] }), 'zh-CN')
  // DSH falls back to en for a Japanese browser; nothing explicit, so the browser decides.
  assert.equal(resolveLocale({ dshActive: 'en', browser: ['ja-JP', 'en'] }), 'ja')
  // The user switched DSH to 中文 while the browser is English: DSH's choice wins.
  assert.equal(resolveLocale({ dshActive: 'zh', browser: ['en-US'] }), 'zh-CN')
  assert.equal(resolveLocale({ dshActive: 'en', browser: ['de-DE'] }), 'de')
  assert.equal(resolveLocale({ dshActive: 'en', browser: ['ko-KR'] }), 'en')
  assert.equal(resolveLocale({ browser: ['pt-BR'] }), 'pt-BR')
  assert.equal(resolveLocale({}), 'en')
})

test('translate fills placeholders and leaves unknown ones visible', () => {
  assert.equal(translate('fr', 'dialog.write', { count: 2 }), 'Restaurer (2)')
  assert.equal(translate('en', 'dialog.write'), 'Restore ({count})')
})
