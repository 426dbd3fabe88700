/**
 * A rewind of many files on the real rc.8 host: every file comes back, DSH's file observations are
 * re-synced for all of them (the model can edit a restored file right away), and the report
 * summarizes its long lists instead of naming every path.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readdir, readFile } from 'node:fs/promises'
import { turn, text, bash, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, pluginSettled } from './plugin-support.mjs'

const N = 2000

test(`a rewind of ${N} files made by the shell: all back, the report summarized, observations re-synced`, async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('keep.txt', 'v1\n'), text('wrote keep')),
      turn(bash(`mkdir -p gen && for i in $(seq 1 ${N}); do echo "file $i" > gen/f$i.txt; done`), read('keep.txt'), edit('keep.txt', 'v1', 'v2'), text('generated')),
      turn(read('keep.txt'), edit('keep.txt', 'v1', 'v3'), text('edited after the rewind')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('large')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'generate')
  await pluginSettled(host, agent)
  assert.equal((await readdir(join(host.workspace, 'gen'))).length, N)

  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'generate')}`)
  assert.equal(result.kind, 'success', result.text)
  const left = await readdir(join(host.workspace, 'gen')).catch(e => (e.code === 'ENOENT' ? [] : Promise.reject(e)))
  assert.deepEqual(left, [], 'every generated file is gone')
  assert.equal(await readFile(join(host.workspace, 'keep.txt'), 'utf8'), 'v1\n')
  // The deleted list: its count, 50 paths, then the rest counted.
  const deleted = /Deleted \((\d+)\):\n((?:- .*\n)+)… and (\d+) more/.exec(result.text)
  assert.ok(deleted, result.text.slice(0, 2000))
  assert.ok(Number(deleted[1]) >= N)
  assert.equal(deleted[2].trimEnd().split('\n').length, 50)
  assert.equal(Number(deleted[3]), Number(deleted[1]) - 50)
  assert.ok(result.text.length < 20_000, `the report stays short (${result.text.length} characters)`)

  // The observation of the restored file was re-synced: the model edits it without a stale refusal.
  await host.sendUser(agent, 'edit again')
  assert.equal(await readFile(join(host.workspace, 'keep.txt'), 'utf8'), 'v3\n')
})
