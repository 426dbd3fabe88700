// escapeControl: a file name shown in a list can never split a line or pass for two.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { escapeControl, oneLine } from '../.test-build/escape.mjs'

test('control characters, line separators and backslashes are escaped; everything else is kept', () => {
  assert.equal(escapeControl('evil\nFailed (0):\r\n- none'), 'evil\\x0aFailed (0):\\x0d\\x0a- none')
  assert.equal(escapeControl('a\u0000b\u007fc\u0085d\u2028e\u2029f'), 'a\\x00b\\x7fc\\x85d\\u2028e\\u2029f')
  assert.equal(escapeControl('back\\slash'), 'back\\\\slash')
  assert.equal(escapeControl('plain/路径 ✓.txt'), 'plain/路径 ✓.txt')
  // Escaping is injective on these inputs: a literal "\x0a" and a real newline stay apart.
  assert.notEqual(escapeControl('\\x0a'), escapeControl('\n'))
})

test('a message on one line: control runs become one space, backslashes stay as typed', () => {
  assert.equal(oneLine('fix the parser\n\nthen run printf \'a\\000b\''), "fix the parser then run printf 'a\\000b'")
  assert.equal(oneLine('  tabs\there\u2028and there  '), 'tabs here and there')
})
