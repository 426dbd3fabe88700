/**
 * See before you rewind, on the real host: the preview's `+/−` counts and who made each change,
 * the `diff` RPC (a unified diff, a binary summary, a path the rewind leaves alone), the typed
 * `/rewind preview`, `--only` and `--keep` (a typo refused with nothing changed), the history
 * entry (target text, workspace folder, kept files) and an undo that brings back exactly what the
 * rewind changed.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { basename, join } from 'node:path'
import { readFile, writeFile } from 'node:fs/promises'
import { turn, text, write, edit, read, bash } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, pluginSettled, put, rpc, BINARY } from './plugin-support.mjs'

const A0 = 'alpha\nbeta\ngamma\ndelta\n'

async function seed(ws) {
  await put(join(ws, 'a.txt'), A0)
  await put(join(ws, 'b.txt'), 'b original\n')
  await put(join(ws, 'bin.dat'), BINARY)
  await put(join(ws, 'c.txt'), 'c original\n')
}

/**
 * Session "main" (turn "one": the agent edits a.txt, rewrites b.txt and c.txt, overwrites
 * bin.dat through the shell); between turns the user edits b.txt by hand and a second session of
 * the same workspace changes c.txt through its shell; then "main" sends "two".
 */
async function session(t) {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(
        read('a.txt'), read('b.txt'), read('c.txt'),
        edit('a.txt', 'beta', 'BETA (agent)'),
        write('b.txt', 'b by the agent\n'),
        write('c.txt', 'c by the agent\n'),
        bash("printf 'X\\000Y' > bin.dat"),
        text('one done'),
      ),
      turn(bash("echo 'c by session two' > c.txt"), text('other done')),
      turn(text('two done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seed(ws)
  const agent = await host.createAgent('diff-main')
  await host.sendUser(agent, 'one')
  await pluginSettled(host, agent)
  await writeFile(join(ws, 'b.txt'), 'b by hand\n')
  const other = await host.createAgent('diff-other')
  await host.sendUser(other, 'other')
  await host.sendUser(agent, 'two')
  return { host, ws, agent, seq: humanSeq(agent, 'one') }
}

test('the preview counts lines and says who made each change; the diff RPC shows them', async (t) => {
  const { host, ws, agent, seq } = await session(t)
  const sessionId = agent.session.header.id
  const { json } = await rpc(host, 'preview', { sessionId, seq })
  assert.equal(json.ok, true, JSON.stringify(json))
  const files = Object.fromEntries(json.value.files.map(f => [f.path, f]))
  assert.deepEqual(Object.keys(files).sort(), ['a.txt', 'b.txt', 'bin.dat', 'c.txt'])
  assert.equal(files['a.txt'].action, 'write')
  assert.deepEqual([files['a.txt'].added, files['a.txt'].removed], [1, 1])
  assert.equal(files['a.txt'].origin, 'agent')
  assert.equal(files['bin.dat'].origin, 'agent', 'a shell change of the agent is the agent\'s')
  assert.equal(files['bin.dat'].added ?? null, null, 'no line counts for a binary file')
  assert.equal(files['b.txt'].origin, 'outside', 'edited by hand between turns')
  assert.equal(files['c.txt'].origin, 'other-session', JSON.stringify(files['c.txt']))
  assert.equal(files['c.txt'].originSession, 'diff-other')

  const diff = await rpc(host, 'diff', { sessionId, seq, path: 'a.txt' })
  assert.equal(diff.json.ok, true, JSON.stringify(diff.json))
  assert.match(diff.json.value.unified, /^-BETA \(agent\)$/m)
  assert.match(diff.json.value.unified, /^\+beta$/m)
  assert.deepEqual([diff.json.value.added, diff.json.value.removed], [1, 1])

  const bin = await rpc(host, 'diff', { sessionId, seq, path: 'bin.dat' })
  assert.equal(bin.json.ok, true)
  assert.equal(bin.json.value.unified ?? null, null)
  assert.equal(bin.json.value.now.state, 'binary')
  assert.equal(bin.json.value.then.state, 'binary')
  assert.equal(bin.json.value.then.size, 256)
  assert.match(bin.json.value.then.sha256, /^[0-9a-f]{64}$/)

  const none = await rpc(host, 'diff', { sessionId, seq, path: 'not-there.txt' })
  assert.equal(none.json.ok, false)
  assert.equal(none.json.error.code, 'rewind/not-planned')
  const bad = await rpc(host, 'diff', { sessionId, seq })
  assert.equal(bad.json.error.code, 'rewind/bad-request')

  // The preview changed nothing.
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'alpha\nBETA (agent)\ngamma\ndelta\n')
})

test('/rewind preview prints counts and origins; --keep leaves files, undo brings back exactly the rest', async (t) => {
  const { host, ws, agent, seq } = await session(t)
  const sessionId = agent.session.header.id
  const preview = await host.runCommand(agent, `/rewind preview @${seq}`)
  assert.equal(preview.result.kind, 'success', preview.result.text)
  assert.match(preview.result.text, /restore a\.txt \(\+1 −1\)/)
  assert.match(preview.result.text, /restore b\.txt \(\+1 −1\) \[changed outside this agent\]/)
  assert.match(preview.result.text, /restore c\.txt .*\[changed by session /)
  assert.match(preview.result.text, /--keep/)
  const messages = () => agent.session.events.filter(e => e.type === 'user/message').length
  const messagesBefore = messages()

  // A filter that matches nothing: refused, nothing changed (no marker, no file).
  const typo = await host.runCommand(agent, `/rewind @${seq} --keep b.txtt`)
  assert.equal(typo.result.kind, 'error')
  assert.match(typo.result.text, /rewind\/bad-selection/)
  assert.equal(messages(), messagesBefore, 'no marker appended')
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'alpha\nBETA (agent)\ngamma\ndelta\n')

  const { result } = await host.runCommand(agent, `/rewind @${seq} --keep b.txt,"c.txt"`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), A0)
  assert.deepEqual(await readFile(join(ws, 'bin.dat')), BINARY)
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b by hand\n', 'kept as the user left it')
  assert.equal(await readFile(join(ws, 'c.txt'), 'utf8'), 'c by session two\n', 'kept as the other session left it')
  assert.match(result.text, /Kept as they are \(your choice\) \(2\):\n- b\.txt\n- c\.txt/)

  const history = await rpc(host, 'history', { sessionId })
  const entry = history.json.value.entries[0]
  assert.equal(entry.targetText, 'one')
  assert.equal(entry.workspaceName, basename(ws))
  assert.equal(history.json.value.workspaceName, basename(ws))
  assert.deepEqual(entry.paths.kept, ['b.txt', 'c.txt'])
  assert.equal(entry.kept, 2)
  assert.deepEqual([...entry.paths.restored].sort(), ['a.txt', 'bin.dat'])

  const undo = await rpc(host, 'undo', { sessionId, opId: entry.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  assert.deepEqual([...undo.json.value.restored].sort(), ['a.txt', 'bin.dat'])
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'alpha\nBETA (agent)\ngamma\ndelta\n')
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b by hand\n')
  assert.equal(await readFile(join(ws, 'c.txt'), 'utf8'), 'c by session two\n')
})

test('--only restores just the named files (a directory names everything under it)', async (t) => {
  const host = await bootWithPlugin({
    script: [
      turn(read('src/x.txt'), read('src/y.txt'), read('top.txt'), write('src/x.txt', 'x2\n'), write('src/y.txt', 'y2\n'), write('top.txt', 'top2\n'), text('done')),
      turn(text('again')),
      turn(read('src/x.txt'), read('top.txt'), write('src/x.txt', 'x3\n'), write('top.txt', 'top3\n'), text('and again')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  for (const [p, c] of [['src/x.txt', 'x1\n'], ['src/y.txt', 'y1\n'], ['top.txt', 'top1\n']]) await put(join(ws, p), c)
  const agent = await host.createAgent('only-session')
  await host.sendUser(agent, 'edit')
  await host.sendUser(agent, 'more')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'edit')} --only src/ --keep src/y.txt`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(ws, 'src/x.txt'), 'utf8'), 'x1\n')
  assert.equal(await readFile(join(ws, 'src/y.txt'), 'utf8'), 'y2\n')
  assert.equal(await readFile(join(ws, 'top.txt'), 'utf8'), 'top2\n')
  // The same choice for a fork rewind: the child session opens, the kept file stays.
  await host.sendUser(agent, 'third')
  assert.equal(await readFile(join(ws, 'src/x.txt'), 'utf8'), 'x3\n')
  const fork = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'third')} --fork --keep top.txt`)
  assert.equal(fork.result.kind, 'success', fork.result.text)
  assert.match(fork.result.text, /Forked at message/)
  assert.equal(await readFile(join(ws, 'src/x.txt'), 'utf8'), 'x1\n', 'restored by the fork')
  assert.equal(await readFile(join(ws, 'top.txt'), 'utf8'), 'top3\n', 'kept by the fork')
  const bad = await host.runCommand(agent, '/rewind @1 --only')
  assert.equal(bad.result.kind, 'error')
  assert.match(bad.result.text, /--only needs a path/)
})
