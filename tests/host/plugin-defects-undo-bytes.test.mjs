/**
 * An undo choice for a file whose name is not valid UTF-8, on the real rc.8 host. The store knows
 * the name as bytes; the stale-undo refusal names it in the JSON path form (`{hex, lossy}`, the
 * display form with the invalid byte shown as U+FFFD beside its bytes). Its display form alone,
 * all a person may have seen, must still decide that very file when no other file shows so —
 * byte-exact, never another file, never a refusal that the name "matches nothing".
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readFile, writeFile } from 'node:fs/promises'
import { turn, text, bash, write } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, rpc } from './plugin-support.mjs'

const NAME = Buffer.concat([Buffer.from('bad'), Buffer.from([0xff]), Buffer.from('.txt')])
const SHOWN = 'bad\uFFFD.txt'
const EXACT = { hex: NAME.toString('hex'), lossy: SHOWN }

test('a file name that is not UTF-8 is decided by its display form in an undo, byte-exact', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('keep.txt', 'v1\n'), text('one done')),
      turn(bash("printf 'made by the shell\\n' > $'bad\\xff.txt'"), write('plain.txt', 'plain\n'), text('two done')),
      turn(text('three done')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('undo-bytes')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  const path = Buffer.concat([Buffer.from(`${host.workspace}/`), NAME])
  assert.equal(await readFile(path, 'utf8'), 'made by the shell\n')

  const rewound = (await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)).result
  assert.equal(rewound.kind, 'success', rewound.text)
  await assert.rejects(readFile(path), { code: 'ENOENT' }, 'the rewind deleted it')
  const [entry] = (await rpc(host, 'history', { sessionId: 'undo-bytes' })).json.value.entries

  // Someone makes the file again: the undo must be told whether to keep it.
  await writeFile(path, 'made again\n')
  const stale = (await rpc(host, 'undo', { sessionId: 'undo-bytes', opId: entry.opId })).json
  assert.equal(stale.error?.code, 'rewind/stale-undo', JSON.stringify(stale))
  assert.deepEqual(stale.error.details.paths, [EXACT])

  // Kept by its display form: the undo runs, that file is left as it is, the rest comes back.
  const undone = (await rpc(host, 'undo', { sessionId: 'undo-bytes', opId: entry.opId, choices: { keep: [SHOWN] } })).json
  assert.equal(undone.ok, true, JSON.stringify(undone))
  assert.deepEqual(undone.value.kept, [EXACT])
  assert.deepEqual(undone.value.changedDuring ?? [], [])
  assert.equal(await readFile(path, 'utf8'), 'made again\n', 'kept as it is')
  assert.equal(await readFile(join(host.workspace, 'plain.txt'), 'utf8'), 'plain\n', 'the rest is undone')
  const after = (await rpc(host, 'history', { sessionId: 'undo-bytes' })).json.value.entries.find(e => e.opId === entry.opId)
  assert.ok(after.undoneAt != null, 'the entry is undone')
})
