/**
 * The plugin on the real DSH host (0.1.0-rc.8 spine, invariant checkers on, scripted model):
 * real write / edit / str_replace_editor edits, external edits between messages, a binary file,
 * a file over the per-file cap, then `/rewind` to a middle message.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { turn, text, write, read, edit, sre, tools, parseJsonl } from './lib/harness.mjs'
import { threeTurnSession, bootWithPlugin, snapshot, humanSeq, humanIndex, textOf, bytes, rpc, pluginSettled, BINARY, FILES } from './plugin-support.mjs'

test('rewind to a middle message restores the model context and every tracked file', async (t) => {
  const { host, agent, ws, beforeMiddle, afterLast } = await threeTurnSession({ extraTurns: [turn(text('after the rewind'))] })
  t.after(() => host.dispose())

  // Sanity: the session really changed the files.
  assert.equal(afterLast['notes.txt'].toString(), 'v3\n')
  assert.equal(afterLast['sre.txt'].toString(), 'beta\ngamma\n')
  assert.equal(afterLast['new.txt'].toString(), 'created later\n')
  assert.match(afterLast['big.txt'].toString(), /^HUGE/)
  assert.deepEqual(beforeMiddle['data.bin'], BINARY)

  const middle = humanSeq(agent, 'middle')
  const listed = await host.runCommand(agent, '/rewind')
  assert.equal(listed.result.kind, 'success')
  assert.match(listed.result.text, new RegExp(`2\\. @${middle} middle`))

  const { result } = await host.runCommand(agent, `/rewind @${middle}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, new RegExp(`^Rewound to message @${middle}: "middle"`))

  // Every tracked file is byte-identical to its state before "middle"; new.txt is gone.
  const now = await snapshot(ws, FILES)
  assert.deepEqual(now['notes.txt'], beforeMiddle['notes.txt'])
  assert.deepEqual(now['sre.txt'], beforeMiddle['sre.txt'])
  assert.deepEqual(now['data.bin'], BINARY, 'the binary before-state is restored byte for byte')
  assert.equal(now['new.txt'], null, 'a file created after the target is deleted')
  assert.deepEqual(now['keep.txt'], beforeMiddle['keep.txt'])
  // The over-cap file is reported, not touched.
  assert.deepEqual(now['big.txt'], afterLast['big.txt'])
  assert.match(result.text, /Skipped \(\d+\):[\s\S]*- big\.txt/)
  assert.match(result.text, /Deleted \(1\):\n- new\.txt/)
  assert.match(result.text, /Written \(3\):/)
  assert.match(result.text, /Failed \(0\):\n- none/)

  // The model's next request holds exactly the messages before the target, then the marker.
  const firstMiddleRequest = host.adapter.requests.find(r => humanIndex(r.messages, 'middle') >= 0)
  const k = humanIndex(firstMiddleRequest.messages, 'middle')
  await host.sendUser(agent, 'after')
  const next = host.adapter.requests.at(-1).messages
  assert.deepEqual(next.slice(0, k), firstMiddleRequest.messages.slice(0, k))
  assert.equal(next[k].source?.kind, 'dsh-prompt-rewind')
  assert.equal(textOf(next[k]), '(empty message)')
  const rest = next.slice(k + 1)
  assert.ok(rest.some(m => m.source?.kind === 'user' && textOf(m) === 'after'))
  for (const m of rest) assert.ok(!['middle', 'last'].includes(textOf(m)), 'no rewound message reaches the model')
  assert.ok(!next.some(m => m.role === 'assistant' && JSON.stringify(m.content).includes('turn two done')))
})

test('the log resumes from JSONL with the same surface after a rewind', async (t) => {
  const { host, agent } = await threeTurnSession({ sessionId: 'resume-session' })
  t.after(() => host.dispose())
  const { result } = await host.runCommand(agent, '/rewind 2')
  assert.equal(result.kind, 'success', result.text)
  const nodes = [...agent.session.surface.nodes]
  // The report is durable: DSH's own command/done carries it in the JSONL log.
  const { events } = parseJsonl(await host.readJsonl(agent))
  const done = events.filter(e => e.type === 'command/done').at(-1)
  assert.equal(done.data.kind, 'success')
  assert.equal(done.data.text, result.text)
  assert.match(done.data.text, /\nWritten \(\d+\):\n[\s\S]*\nDeleted \(\d+\):\n[\s\S]*\nSkipped \(\d+\):\n[\s\S]*\nFailed \(\d+\):\n/)
  const resumed = await host.resume('resume-session')
  assert.deepEqual([...resumed.session.surface.nodes], nodes)
  const marker = resumed.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'dsh-prompt-rewind')
  assert.ok(marker, 'the marker is in the persisted log')
  assert.deepEqual(Object.keys(marker.surfaceOp).sort(), ['end', 'op', 'start'])
})

test('a rewind of a rewind, and repeating a rewind, are exact and idempotent', async (t) => {
  const { host, agent, ws, beforeMiddle } = await threeTurnSession({
    sessionId: 'twice',
    extraTurns: [turn(write('late.txt', 'late\n'), text('wrote late'))],
  })
  t.after(() => host.dispose())
  const middle = humanSeq(agent, 'middle')
  assert.equal((await host.runCommand(agent, `/rewind @${middle}`)).result.kind, 'success')
  await host.sendUser(agent, 'write late')
  assert.equal((await bytes(join(ws, 'late.txt'))).toString(), 'late\n')
  // Rewind again, to the first message: everything the session created is gone.
  const start = humanSeq(agent, 'start')
  const again = await host.runCommand(agent, `/undo @${start}`)
  assert.equal(again.result.kind, 'success', again.result.text)
  const now = await snapshot(ws, FILES.concat('late.txt'))
  for (const name of ['notes.txt', 'sre.txt', 'data.bin', 'new.txt', 'late.txt']) assert.equal(now[name], null, `${name} removed`)
  assert.deepEqual(now['keep.txt'], beforeMiddle['keep.txt'])
  // History lists both rewinds, newest first; either can be undone (an older one is planned
  // against the disk as the newer one left it).
  const history = await rpc(host, 'history', { sessionId: 'twice' })
  assert.deepEqual(history.json.value.entries.map(e => e.targetSeq), [start, middle])
  assert.deepEqual(history.json.value.entries.map(e => e.undoable), [true, true])
  // The middle message is no longer on the surface: refused by name, nothing changes.
  const events = agent.session.events.length
  const refused = await host.runCommand(agent, `/rewind @${middle}`)
  assert.equal(refused.result.kind, 'error')
  assert.match(refused.result.text, /rewind\/not-on-surface/)
  assert.equal(agent.session.events.length, events + 2, 'only command/run and command/done were appended')
})

test('bad input answers with the named error and changes nothing', async (t) => {
  const { host, agent, ws } = await threeTurnSession({ sessionId: 'bad-input' })
  t.after(() => host.dispose())
  const before = await snapshot(ws, FILES)
  const nonHuman = agent.session.events.find(e => e.type === 'assistant/message').seq
  const cases = [
    ['/rewind @99999', 'rewind/unknown-seq'],
    ['/rewind 9', 'rewind/index-out-of-range'],
    ['/rewind 1 extra', 'rewind/bad-target'],
    ['/rewind @x', 'rewind/bad-target'],
    [`/rewind @${nonHuman}`, 'rewind/not-human-message'],
    ['/prompt-rewind 1', 'rewind/bad-target'],
    ['/prompt-rewind', 'rewind/bad-target'],
  ]
  for (const [line, code] of cases) {
    const surface = [...agent.session.surface.nodes]
    const events = agent.session.events.length
    const { result } = await host.runCommand(agent, line)
    assert.equal(result.kind, 'error', line)
    assert.ok(result.text.includes(`[${code}]`), `${line}: ${result.text}`)
    assert.deepEqual([...agent.session.surface.nodes], surface, `${line} left the surface alone`)
    assert.equal(agent.session.events.length, events + 2, `${line} appended only command/run and command/done`)
  }
  assert.deepEqual(await snapshot(ws, FILES), before, 'no file changed')
})

test('str_replace_editor view is never captured; other tools are not covered', async (t) => {
  const host = await bootWithPlugin({
    script: [
      turn(write('w.txt', 'w1\n'), text('one')),
      turn(sre.view('viewed.txt'), tools({ name: 'read', args: { file_path: 'read.txt' } }), text('two')),
      turn(text('three')),
    ],
  })
  t.after(() => host.dispose())
  await writeFile(join(host.workspace, 'viewed.txt'), 'original\n')
  await writeFile(join(host.workspace, 'read.txt'), 'original\n')
  const agent = await host.createAgent('view-session')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  await pluginSettled(host, agent)
  await writeFile(join(host.workspace, 'viewed.txt'), 'changed later\n')
  await writeFile(join(host.workspace, 'read.txt'), 'changed later\n')
  await host.sendUser(agent, 'three')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal((await bytes(join(host.workspace, 'viewed.txt'))).toString(), 'changed later\n', 'a viewed file is not tracked')
  assert.equal((await bytes(join(host.workspace, 'read.txt'))).toString(), 'changed later\n', 'a read file is not tracked')
  assert.match(result.text, /Written \(0\)/)
})

test('with backups off, changes are not captured and a rewind leaves them', async (t) => {
  const host = await bootWithPlugin({
    script: [turn(write('before.txt', 'b\n'), text('one')), turn(write('while-off.txt', 'off\n'), text('two')), turn(text('three'))],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('backups-off')
  await host.sendUser(agent, 'one')
  const off = await rpc(host, 'settings.update', { sessionId: 'backups-off', patch: { backups: false } })
  assert.equal(off.json.value.backups, false)
  await host.sendUser(agent, 'two')
  await host.sendUser(agent, 'three')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'one')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await bytes(join(host.workspace, 'before.txt')), null, 'the change made while backups were on is undone')
  assert.equal((await bytes(join(host.workspace, 'while-off.txt'))).toString(), 'off\n', 'the change made while they were off stays')
})

test('a file written several times in one turn comes back from before the turn; the states in between are never stored', async (t) => {
  const host = await bootWithPlugin({
    script: [
      turn(
        read('a.txt'), write('a.txt', 'intermediate one\n'),
        read('a.txt'), edit('a.txt', 'intermediate one', 'intermediate two'),
        sre.strReplace('a.txt', 'intermediate two', 'final state'),
        text('three writes'),
      ),
      turn(text('next')),
    ],
  })
  t.after(() => host.dispose())
  await writeFile(join(host.workspace, 'a.txt'), 'original\n')
  const agent = await host.createAgent('rewrites-session')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  await pluginSettled(host, agent)
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'final state\n')

  // Nothing in the store holds the states between the turn's writes: the second and third
  // writes found the file's state at the turn's message recorded already and read nothing.
  const stored = await storedBytes(join(host.dshHome, 'rewind-snapshots'))
  assert.ok(stored.includes('original'), 'the state before the turn is stored')
  for (const between of ['intermediate one', 'intermediate two']) {
    assert.ok(!stored.includes(between), `"${between}" is not stored`)
  }

  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'first')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'original\n')
})

/** Every file under `dir`, concatenated (latin1, so any byte sequence can be searched). */
async function storedBytes(dir) {
  const parts = []
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) parts.push(await readFile(join(entry.parentPath, entry.name)))
  }
  return Buffer.concat(parts).toString('latin1')
}
