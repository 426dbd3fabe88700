import { test } from 'node:test'
import assert from 'node:assert/strict'
import { gitObjectGoneRows, unreadableRows } from '../.test-build/warnings.mjs'
import { DICTIONARIES, LOCALE_IDS } from '../.test-build/i18n.mjs'

test('the preview\'s unreadable files become warning rows, path and why', () => {
  const rows = unreadableRows({
    unreadable: [
      { path: 'src/a.txt', message: 'cannot be read to keep a copy of it before the restore (open: Permission denied (os error 13)); it will be left as it is' },
      { path: 'bad\u001bname', message: 'why\u0007' },
    ],
  })
  assert.deepEqual(rows.map(r => r.key), ['src/a.txt', 'bad\u001bname'])
  assert.equal(rows[0].path, 'src/a.txt')
  assert.match(rows[0].message, /Permission denied/)
  // Control characters are shown, never sent to the page as they are.
  assert.doesNotMatch(rows[1].path, /\u001b/)
  assert.doesNotMatch(rows[1].message, /\u0007/)
})

test('no list, an empty list or malformed entries warn about nothing', () => {
  assert.deepEqual(unreadableRows({}), [])
  assert.deepEqual(unreadableRows({ unreadable: [] }), [])
  assert.deepEqual(unreadableRows({ unreadable: null }), [])
  assert.deepEqual(unreadableRows({ unreadable: [null, 3, { path: '' }, { message: 'x' }] }), [])
  assert.deepEqual(unreadableRows({ unreadable: [{ path: 'a' }] }).map(r => [r.key, r.message]), [['a', '']])
})

test('every locale has the warning heading with its count', () => {
  for (const id of LOCALE_IDS) assert.match(DICTIONARIES[id]['dialog.unreadable'], /\{count\}/, id)
})

test('the preview\'s files whose git object is gone become warning rows of their own', () => {
  const preview = {
    unreadable: [{ path: 'u.txt', message: 'cannot be read' }],
    gitObjectGone: [{ path: 'f.txt', message: 'its earlier content is git object 0123 of the repository at /w, which no longer has it' }, { path: '' }],
  }
  assert.deepEqual(gitObjectGoneRows(preview).map(r => [r.key, r.path]), [['f.txt', 'f.txt']])
  assert.match(gitObjectGoneRows(preview)[0].message, /no longer has it/)
  assert.deepEqual(unreadableRows(preview).map(r => r.key), ['u.txt'])
  assert.deepEqual(gitObjectGoneRows({}), [])
  assert.deepEqual(gitObjectGoneRows({ gitObjectGone: null }), [])
  for (const id of LOCALE_IDS) assert.match(DICTIONARIES[id]['dialog.gitObjectGone'], /\{count\}/, id)
})
