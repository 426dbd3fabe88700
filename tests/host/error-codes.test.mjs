/**
 * One table of stable error codes: every `rewind/...` code the host plugin and the browser
 * client raise or branch on is in the engine's table, as the built addon reports it.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFile, readdir } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** Every `'rewind/...'` string literal of the TypeScript sources under `dir`. */
async function codesIn(dir) {
  const found = new Set()
  for (const name of await readdir(dir, { recursive: true })) {
    if (!name.endsWith('.ts')) continue
    const text = await readFile(join(dir, name), 'utf8')
    for (const m of text.matchAll(/'(rewind\/[a-z-]+)'/g)) found.add(m[1])
  }
  return found
}

test('every code the plugin and the client use is in the engine table', async () => {
  const addon = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
  const table = new Set(addon.errorCodes())
  assert.ok(table.size >= 37, `the table has ${table.size} codes`)
  const used = new Set([...(await codesIn(join(ROOT, 'js', 'src'))), ...(await codesIn(join(ROOT, 'client', 'src')))])
  assert.ok(used.size >= 25, `found ${used.size} codes in the sources`)
  // The client's own transport failure never comes from the host.
  used.delete('rewind/transport')
  const missing = [...used].filter(c => !table.has(c))
  assert.deepEqual(missing, [], 'codes used in js/ or client/ but not in crates/engine/src/codes.rs')
})

test('an engine step returns an expected refusal as data, with its code and details', async () => {
  const { mkdtemp } = await import('node:fs/promises')
  const { tmpdir } = await import('node:os')
  const addon = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
  const home = await mkdtemp(join(tmpdir(), 'rewind-codes-home-'))
  const ws = await mkdtemp(join(tmpdir(), 'rewind-codes-ws-'))
  const engine = addon.BindingEngine.open(home)
  const session = engine.session('s1', ws, addon.workspaceKey('w1'))
  const refusal = await session.undoCheck('op-nope', null)
  assert.equal(refusal.refused, true)
  assert.equal(refusal.code, 'rewind/unknown-entry')
  assert.equal(typeof refusal.message, 'string')
  assert.equal(typeof refusal.details, 'object')
  const bad = await session.resolveEntry('op-nope', 'sideways', null)
  assert.equal(bad.code, 'rewind/bad-request')
  // A result is not mistaken for one.
  assert.equal(await session.journalState('s1', 'op-nope'), 'missing')
  assert.deepEqual(await session.entryActions(), [])
})
