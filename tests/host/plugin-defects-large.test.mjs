/**
 * A rewind and its undo of many files a shell command made, on the real rc.8 host: every file
 * comes back, the reports are summarized (50 paths, then "… and N more"), and DSH's file
 * observations are re-synced only for the files DSH observed — the file the agent read and edited
 * is re-synced (the model edits it again right away), the thousands the shell made, which DSH never
 * observed, cost no `fs.resolve` / `fs.stat` each (they made a 50,000-file rewind wait tens of
 * seconds).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readdir, readFile } from 'node:fs/promises'
import { turn, text, bash, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, pluginSettled } from './plugin-support.mjs'

const N = 2000

test(`a rewind and an undo of ${N} shell-made files: all back, summarized, only observed files re-synced`, async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('keep.txt', 'v1\n'), text('wrote keep')),
      turn(bash(`mkdir -p gen && for i in $(seq 1 ${N}); do echo "file $i" > gen/f$i.txt; done`), read('keep.txt'), edit('keep.txt', 'v1', 'v2'), text('generated')),
      turn(read('keep.txt'), edit('keep.txt', 'v1', 'v3'), text('edited after the rewind')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('large-observed')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'generate')
  await pluginSettled(host, agent)
  assert.equal((await readdir(join(host.workspace, 'gen'))).length, N)

  // Every path the observation re-sync resolves.
  const fs = host.ctx.get('fs')
  const resolved = []
  const resolve = fs.resolve
  fs.resolve = function (path, ...rest) {
    resolved.push(String(path))
    return resolve.call(this, path, ...rest)
  }
  t.after(() => { fs.resolve = resolve })

  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'generate')}`)
  assert.equal(result.kind, 'success', result.text)
  const left = await readdir(join(host.workspace, 'gen')).catch(e => (e.code === 'ENOENT' ? [] : Promise.reject(e)))
  assert.deepEqual(left, [], 'every generated file is gone')
  assert.equal(await readFile(join(host.workspace, 'keep.txt'), 'utf8'), 'v1\n')
  const deleted = /Deleted \((\d+)\):\n((?:- .*\n)+)… and (\d+) more/.exec(result.text)
  assert.ok(deleted, result.text.slice(0, 2000))
  assert.equal(Number(deleted[1]), N)
  assert.equal(deleted[2].trimEnd().split('\n').length, 50)
  assert.equal(Number(deleted[3]), N - 50)
  assert.ok(result.text.length < 20_000, `the report stays short (${result.text.length} characters)`)
  assert.deepEqual(resolved.filter(p => p.startsWith('gen/')), [], 'no generated file, never observed by DSH, is re-synced')
  assert.ok(resolved.includes('keep.txt'), `the observed file is re-synced (${JSON.stringify(resolved.slice(0, 10))})`)

  // The undo brings all of them back, summarized as well, still without re-syncing them.
  resolved.length = 0
  const undo = (await host.runCommand(agent, '/rewind undo')).result
  assert.equal(undo.kind, 'success', undo.text)
  assert.equal((await readdir(join(host.workspace, 'gen'))).length, N, 'every generated file is back')
  assert.equal(await readFile(join(host.workspace, 'gen', `f${N}.txt`), 'utf8'), `file ${N}\n`)
  const written = /Written \((\d+)\):\n((?:- .*\n)+)… and (\d+) more/.exec(undo.text)
  assert.ok(written, undo.text.slice(0, 2000))
  assert.equal(Number(written[1]), N + 1)
  assert.equal(written[2].trimEnd().split('\n').length, 50)
  assert.ok(undo.text.length < 20_000, `the undo report stays short (${undo.text.length} characters)`)
  assert.deepEqual(resolved.filter(p => p.startsWith('gen/')), [])
})
