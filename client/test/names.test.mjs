// Names that are not valid UTF-8: the host lists `n\xff.txt` and `n\xfe.txt` as `{hex, lossy}`
// (both `n\uFFFD.txt` on screen). The pages key them by their exact spellings, show them apart,
// and every choice sent back (a rewind's --keep, a diff's path, an undo's keep/take) names the
// very file, never the display form both share.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RpcError, answerWithSpellings, requestWithJsonPaths, rpc, stalePaths } from '../.test-build/rpc.mjs'
import { keepArgs } from '../.test-build/host.mjs'

const FF = { hex: '6eff2e747874', lossy: 'n\uFFFD.txt' }
const FE = { hex: '6efe2e747874', lossy: 'n\uFFFD.txt' }

test('a preview answer: each name that is not UTF-8 becomes its own exact spelling', () => {
  const preview = answerWithSpellings({
    targetSeq: 3,
    files: [{ path: FF, action: 'delete' }, { path: FE, action: 'delete' }, { path: 'plain.txt', action: 'write' }, { path: 'hex:61', action: 'write' }],
    uncovered: [FF], skipped: [{ path: FE, reason: 'x' }], outside: ['o.txt'], notCovered: [], backupOff: false,
  })
  assert.deepEqual(preview.files.map(f => f.path), ['hex:6eff2e747874', 'hex:6efe2e747874', 'plain.txt', 'hex:6865783a3631'])
  assert.deepEqual(preview.uncovered, ['hex:6eff2e747874'])
  assert.deepEqual(preview.skipped, [{ path: 'hex:6efe2e747874', reason: 'x' }])
  assert.deepEqual(preview.outside, ['o.txt'])
  // A history entry's paths too.
  const history = answerWithSpellings({ workspace: 'w', entries: [{ opId: 'a', paths: { restored: [FF], deleted: [], skipped: [], failed: [], kept: [FE] } }] })
  assert.deepEqual(history.entries[0].paths.kept, ['hex:6efe2e747874'])
})

test('the rewind command keeps the exact file: --keep hex:…, not the lossy form', () => {
  assert.equal(keepArgs(['hex:6eff2e747874', 'a b.txt']), ' --keep "hex:6eff2e747874" --keep "a b.txt"')
})

test('a request naming a file sends its JSON form back; a plain name stays a string', () => {
  assert.deepEqual(requestWithJsonPaths({ seq: 3, path: 'hex:6eff2e747874' }), { seq: 3, path: FF })
  assert.deepEqual(requestWithJsonPaths({ seq: 3, path: 'a.txt' }), { seq: 3, path: 'a.txt' })
  // A UTF-8 name that begins with `hex:` is spelled by its bytes and goes back as that text.
  assert.deepEqual(requestWithJsonPaths({ seq: 3, path: 'hex:6865783a3631' }), { seq: 3, path: 'hex:61' })
  assert.deepEqual(
    requestWithJsonPaths({ opId: 'o', choices: { keep: ['hex:6efe2e747874'], take: ['a.txt'] } }),
    { opId: 'o', choices: { keep: [FE], take: ['a.txt'] } },
  )
})

test('through the channel: the undo choice posted is the {hex, lossy} of the chosen file', async (t) => {
  const sent = []
  const original = globalThis.fetch
  t.after(() => { globalThis.fetch = original })
  globalThis.fetch = async (_url, init) => {
    sent.push(JSON.parse(init.body))
    return { status: 200, json: async () => ({ ok: true, value: { kind: 'ok', restored: [FF], deleted: [], failed: [], kept: [FE] } }) }
  }
  const value = await rpc('undo', 's', { opId: 'o', choices: { keep: ['hex:6efe2e747874'] } })
  assert.deepEqual(sent[0], { opId: 'o', choices: { keep: [FE] }, sessionId: 's' })
  assert.deepEqual(value.kept, ['hex:6efe2e747874'])
  assert.deepEqual(value.restored, ['hex:6eff2e747874'])
})

test('a stale-undo refusal names each file by its spelling', () => {
  const e = new RpcError('rewind/stale-undo', 'x', { paths: [FF, FE, 'a.txt'] })
  assert.deepEqual(stalePaths(e), ['hex:6eff2e747874', 'hex:6efe2e747874', 'a.txt'])
})
