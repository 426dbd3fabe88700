import { test } from 'node:test'
import assert from 'node:assert/strict'
import { pickerRows, previewLine, seqOfRow, PREVIEW_MAX } from '../.test-build/picker.mjs'
import { bindLocale } from '../.test-build/i18n.mjs'

const t = bindLocale('en')

test('rows keep the host order (newest first) and run against @<seq>', () => {
  const rows = pickerRows([
    { index: 1, seq: 30, preview: 'third', time: Date.UTC(2026, 0, 1, 9, 5) },
    { index: 2, seq: 20, preview: 'second' },
    { index: 3, seq: 10, preview: 'first' },
  ], t)
  assert.deepEqual(rows.map(r => r.id), ['@30', '@20', '@10'])
  assert.deepEqual(rows.map(r => r.label), ['#1 third', '#2 second', '#3 first'])
  assert.match(rows[0].detail, /^seq 30 · \d\d:\d\d$/)
  assert.equal(rows[1].detail, 'seq 20')
})

test('a pending message is marked, an empty preview is named', () => {
  const [a, b] = pickerRows([{ index: 1, seq: 5, preview: '  ', pending: true }, { index: 2, seq: 4, preview: 'x' }], t)
  assert.equal(a.label, '#1 (empty message)')
  assert.equal(a.detail, 'seq 5 · not read yet')
  assert.equal(b.detail, 'seq 4')
})

test('rows that cannot name their target are dropped; duplicate seqs keep the first', () => {
  const rows = pickerRows([
    { index: 1, seq: -1, preview: 'neg' }, { index: 0, seq: 3, preview: 'zero index' },
    { index: 1, seq: 1.5, preview: 'frac' }, { index: 2, seq: 7, preview: 'ok' }, { index: 3, seq: 7, preview: 'dup' },
  ], t)
  assert.deepEqual(rows.map(r => r.label), ['#2 ok'])
})

test('previews collapse whitespace and are cut to one line', () => {
  assert.equal(previewLine('a\n\n  b\tc'), 'a b c')
  const long = previewLine('x'.repeat(500))
  assert.equal([...long].length, PREVIEW_MAX)
  assert.ok(long.endsWith('…'))
  assert.equal([...previewLine('😀'.repeat(100))].length, PREVIEW_MAX, 'cut on code points, not UTF-16 units')
})

test('translated rows', () => {
  const [row] = pickerRows([{ index: 1, seq: 9, preview: 'hi', pending: true }], bindLocale('ja'))
  assert.equal(row.detail, 'seq 9 · 未読')
})

test('seqOfRow reads back only @<seq>', () => {
  assert.equal(seqOfRow('@42'), 42)
  assert.equal(seqOfRow('42'), undefined)
  assert.equal(seqOfRow('@-1'), undefined)
  assert.equal(seqOfRow('@1x'), undefined)
})
