/**
 * Names that are not valid UTF-8, end to end on the real rc.8 host. The shell makes `n\xff.txt`
 * and `n\xfe.txt`: both show as `n\uFFFD.txt`. The preview (chat and RPC) must tell them apart
 * and give each a name that chooses it (`hex:` spelling; `{hex, lossy}` in the RPC); a rewind
 * `--keep hex:…` keeps that file only; the display form both share is refused as ambiguous,
 * nothing changed; an undo's choice in the `{hex, lossy}` form decides the very file.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readFile, writeFile } from 'node:fs/promises'
import { turn, text, bash, write } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, rpc } from './plugin-support.mjs'

const name = (b) => Buffer.concat([Buffer.from('n'), Buffer.from([b]), Buffer.from('.txt')])
const FF = { hex: '6eff2e747874', lossy: 'n\uFFFD.txt' }
const FE = { hex: '6efe2e747874', lossy: 'n\uFFFD.txt' }

test('two names alike on screen: the preview tells them apart, --keep hex:… keeps that one only', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('keep.txt', 'v1\n'), text('one done')),
      turn(bash("printf 'ff\\n' > $'n\\xff.txt'; printf 'fe\\n' > $'n\\xfe.txt'"), write('plain.txt', 'plain\n'), text('two done')),
      turn(text('three done')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('names')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  const ff = Buffer.concat([Buffer.from(`${host.workspace}/`), name(0xff)])
  const fe = Buffer.concat([Buffer.from(`${host.workspace}/`), name(0xfe)])
  assert.equal(await readFile(ff, 'utf8'), 'ff\n')
  assert.equal(await readFile(fe, 'utf8'), 'fe\n')
  const seq = humanSeq(agent, 'two')

  // The RPC preview carries each as {hex, lossy}: two files, not one name twice.
  const preview = (await rpc(host, 'preview', { sessionId: 'names', seq })).json
  assert.equal(preview.ok, true, JSON.stringify(preview))
  const paths = preview.value.files.map(f => f.path)
  assert.deepEqual(paths.filter(p => typeof p === 'object').sort((a, b) => a.hex.localeCompare(b.hex)), [FE, FF])
  assert.ok(paths.includes('plain.txt'), JSON.stringify(paths))
  // The diff of one of them, named by that form, is that file's.
  const diff = (await rpc(host, 'diff', { sessionId: 'names', seq, path: FE })).json
  assert.equal(diff.ok, true, JSON.stringify(diff))
  assert.deepEqual(diff.value.path, FE)

  // The chat preview shows both apart, each with the spelling that chooses it.
  const shown = (await host.runCommand(agent, `/rewind preview @${seq}`)).result
  assert.equal(shown.kind, 'success', shown.text)
  assert.match(shown.text, /n\uFFFD\.txt \(n\\xff\.txt, hex:6eff2e747874\)/)
  assert.match(shown.text, /n\uFFFD\.txt \(n\\xfe\.txt, hex:6efe2e747874\)/)

  // The display form both share cannot choose one: refused, nothing changed.
  const ambiguous = (await host.runCommand(agent, `/rewind @${seq} --keep "n\uFFFD.txt"`)).result
  assert.notEqual(ambiguous.kind, 'success', ambiguous.text)
  assert.match(ambiguous.text, /hex:6eff2e747874/)
  assert.match(ambiguous.text, /hex:6efe2e747874/)
  assert.equal(await readFile(ff, 'utf8'), 'ff\n')
  assert.equal(await readFile(fe, 'utf8'), 'fe\n')
  assert.equal(await readFile(join(host.workspace, 'plain.txt'), 'utf8'), 'plain\n', 'nothing rewound')

  // Kept by its exact spelling: n\xff.txt stays, n\xfe.txt (made after the target) goes.
  const rewound = (await host.runCommand(agent, `/rewind @${seq} --keep hex:6eff2e747874`)).result
  assert.equal(rewound.kind, 'success', rewound.text)
  assert.equal(await readFile(ff, 'utf8'), 'ff\n', 'kept')
  await assert.rejects(readFile(fe), { code: 'ENOENT' }, 'n\\xfe.txt deleted')
  await assert.rejects(readFile(join(host.workspace, 'plain.txt')), { code: 'ENOENT' })
  // The report names what was kept and what was deleted apart.
  assert.match(rewound.text, /n\\xff\.txt, hex:6eff2e747874/)
  assert.match(rewound.text, /n\\xfe\.txt, hex:6efe2e747874/)
  const kept = rewound.text.slice(rewound.text.indexOf('Kept'))
  assert.match(kept, /n\\xff\.txt/, rewound.text)
  assert.doesNotMatch(kept, /n\\xfe\.txt/, rewound.text)

  // The undo: n\xfe.txt is made again; the refusal names it as {hex, lossy}, and the choice
  // sent back in that form keeps it (the other comes back as it was).
  const [entry] = (await rpc(host, 'history', { sessionId: 'names' })).json.value.entries
  await writeFile(fe, 'made again\n')
  const stale = (await rpc(host, 'undo', { sessionId: 'names', opId: entry.opId })).json
  assert.equal(stale.error?.code, 'rewind/stale-undo', JSON.stringify(stale))
  assert.deepEqual(stale.error.details.paths, [FE])
  const undone = (await rpc(host, 'undo', { sessionId: 'names', opId: entry.opId, choices: { keep: [FE] } })).json
  assert.equal(undone.ok, true, JSON.stringify(undone))
  assert.deepEqual(undone.value.kept, [FE])
  assert.equal(await readFile(fe, 'utf8'), 'made again\n', 'kept as it is')
  assert.equal(await readFile(join(host.workspace, 'plain.txt'), 'utf8'), 'plain\n', 'the rest is undone')
})
