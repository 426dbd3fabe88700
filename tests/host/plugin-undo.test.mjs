/**
 * Undo a rewind completely, on the real host: the files that rewind changed come back and the
 * conversation as it was just before it continues in a new session seeded from the log up to the
 * marker (the rewound session stays as it is); any rewind of the session, not only the newest;
 * files changed since are decided one by one (keep / take); a fork rewind undone from the session
 * it created; after a restart from the durable history and store; `/rewind undo`.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { turn, text, write } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, rpc, textOf } from './plugin-support.mjs'

const humans = (agent) => agent.session.events.filter(e => e.type === 'user/message' && e.data?.source?.kind === 'user').map(e => textOf(e.data))

async function historyOf(host, sessionId) {
  const { json } = await rpc(host, 'history', { sessionId })
  assert.equal(json.ok, true, JSON.stringify(json))
  return json.value.entries
}

const script = () => [
  turn(write('a.txt', 'a1\n'), text('one done')),
  turn(write('b.txt', 'b2\n'), text('two done')),
  turn(write('c.txt', 'c3\n'), text('three done')),
  turn(write('d.txt', 'd4\n'), text('four done')),
]

test('undo of the newest rewind: files back, the conversation continues in a new session up to the marker', async (t) => {
  const host = await bootWithPlugin({ script: script() })
  t.after(() => host.dispose())
  const ws = host.workspace
  const agent = await host.createAgent('undo-newest')
  for (const m of ['one', 'two', 'three']) await host.sendUser(agent, m)
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'b.txt')), false)
  assert.equal(existsSync(join(ws, 'c.txt')), false)
  const eventsAfterRewind = agent.session.events.length

  const [entry] = await historyOf(host, agent.id)
  assert.equal(entry.undoable, true)
  const undo = await rpc(host, 'undo', { sessionId: agent.id, opId: entry.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  const v = undo.json.value
  assert.deepEqual([...v.restored].sort(), ['b.txt', 'c.txt'])
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b2\n')
  assert.equal(await readFile(join(ws, 'c.txt'), 'utf8'), 'c3\n')
  assert.equal(v.conversation.created, true)
  const child = host.ctx.agents.get(v.conversation.sessionId)
  assert.ok(child, 'the new session is live')
  assert.deepEqual(humans(child), ['one', 'two', 'three'], 'the conversation as it was just before the rewind')
  const runs = child.session.events.filter(e => e.type === 'command/run').map(e => e.data.commandId)
  const dones = new Set(child.session.events.filter(e => e.type === 'command/done').map(e => e.data.commandId))
  assert.deepEqual(runs.filter(id => !dones.has(id)), [], 'no command shows as still running in the new session (the rewind\'s own is left out)')
  assert.equal(child.session.header.parentSession, agent.id)
  assert.equal(agent.session.events.length, eventsAfterRewind, 'the rewound session is unchanged')
  const [after] = await historyOf(host, agent.id)
  assert.ok(after.undoneAt > 0)
  assert.equal(after.undoSessionId, v.conversation.sessionId)
  assert.equal(after.undoable, false, 'undone once')
  const again = await rpc(host, 'undo', { sessionId: agent.id, opId: entry.opId })
  assert.equal(again.json.error.code, 'rewind/already-undone')
  // The new session goes on from there.
  await host.sendUser(child, 'four')
  assert.equal(await readFile(join(ws, 'd.txt'), 'utf8'), 'd4\n')
})

test('an older rewind is undone while a newer one stands; a file changed since is decided per file', async (t) => {
  const host = await bootWithPlugin({ script: script() })
  t.after(() => host.dispose())
  const ws = host.workspace
  const agent = await host.createAgent('undo-older')
  for (const m of ['one', 'two', 'three']) await host.sendUser(agent, m)
  // R1: back to "three" (c.txt deleted); then "four", and R2: back to "four" (d.txt deleted).
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'three')}`)).result.kind, 'success')
  await host.sendUser(agent, 'four')
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'four')}`)).result.kind, 'success')
  const [r2, r1] = await historyOf(host, agent.id)
  assert.equal(r1.targetText, 'three')
  assert.equal(r1.undoable, true, 'not only the newest rewind can be undone')
  // The user writes c.txt by hand: the undo of R1 must not overwrite it without asking.
  await writeFile(join(ws, 'c.txt'), 'mine\n')
  const stale = await rpc(host, 'undo', { sessionId: agent.id, opId: r1.opId })
  assert.equal(stale.json.error.code, 'rewind/stale-undo')
  assert.deepEqual(stale.json.error.details.paths, ['c.txt'])
  assert.equal(await readFile(join(ws, 'c.txt'), 'utf8'), 'mine\n', 'nothing changed')
  assert.equal((await historyOf(host, agent.id)).find(e => e.opId === r1.opId).undoStartedAt ?? null, null, 'not even started')

  // Typed: the second newest, keeping the hand-written file.
  const { result } = await host.runCommand(agent, '/rewind undo 2 --keep c.txt')
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Undid the rewind to @\d+\./)
  assert.match(result.text, /Kept as they are \(your choice\) \(1\):\n- c\.txt/)
  assert.match(result.text, /continues in the new session session-/)
  assert.equal(await readFile(join(ws, 'c.txt'), 'utf8'), 'mine\n', 'kept as chosen')
  assert.equal(existsSync(join(ws, 'd.txt')), false, 'R2 still stands')
  const entries = await historyOf(host, agent.id)
  assert.ok(entries.find(e => e.opId === r1.opId).undoneAt > 0)
  assert.equal(entries.find(e => e.opId === r2.opId).undoable, true)

  // R2 with "take": its file comes back over a hand-made one.
  await writeFile(join(ws, 'd.txt'), 'hand d\n')
  const taken = await rpc(host, 'undo', { sessionId: agent.id, opId: r2.opId, choices: { take: ['d.txt'] } })
  assert.equal(taken.json.ok, true, JSON.stringify(taken.json))
  assert.equal(await readFile(join(ws, 'd.txt'), 'utf8'), 'd4\n')
  const bad = await rpc(host, 'undo', { sessionId: agent.id, opId: r2.opId, choices: { take: 'd.txt' } })
  assert.equal(bad.json.error.code, 'rewind/bad-request')
})

test('a fork rewind is undone from the session it created: files back, the conversation is the unchanged parent', async (t) => {
  const host = await bootWithPlugin({ script: script() })
  t.after(() => host.dispose())
  const ws = host.workspace
  const agent = await host.createAgent('undo-fork')
  for (const m of ['one', 'two']) await host.sendUser(agent, m)
  const { result } = await host.runCommand(agent, `/rewind --fork @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'b.txt')), false)
  const [entry] = await historyOf(host, agent.id)
  const childId = entry.fork.childSessionId
  const [seen] = await historyOf(host, childId)
  assert.equal(seen.undoable, true, 'the fork is undoable from its child')
  const undo = await rpc(host, 'undo', { sessionId: childId, opId: entry.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b2\n')
  assert.deepEqual(undo.json.value.conversation, { sessionId: agent.id, created: false })
})

test('after a restart the undo works from the durable history and store', async (t) => {
  const dshHome = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  let host = await bootWithPlugin({ script: script(), dshHome })
  const ws = host.workspace
  let agent = await host.createAgent('undo-restart')
  for (const m of ['one', 'two']) await host.sendUser(agent, m)
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)).result.kind, 'success')
  await host.flush(agent)
  await host.dispose()
  host = await bootWithPlugin({ script: script(), dshHome, workspace: ws })
  t.after(() => host.dispose())
  agent = await host.resume('undo-restart')
  const [entry] = await historyOf(host, agent.id)
  assert.equal(entry.undoable, true)
  const undo = await rpc(host, 'undo', { sessionId: agent.id, opId: entry.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b2\n')
  assert.deepEqual(humans(host.ctx.agents.get(undo.json.value.conversation.sessionId)), ['one', 'two'])
})

test('undo of an undo: a redo makes the rewind\'s file changes again and is undoable in turn', async (t) => {
  const host = await bootWithPlugin({ script: script() })
  t.after(() => host.dispose())
  const ws = host.workspace
  const agent = await host.createAgent('undo-redo')
  for (const m of ['one', 'two', 'three']) await host.sendUser(agent, m)
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)).result.kind, 'success')
  const [rewind] = await historyOf(host, agent.id)
  const undo = await rpc(host, 'undo', { sessionId: agent.id, opId: rewind.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  const continued = undo.json.value.conversation.sessionId
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b2\n')

  // From the session the undo continued in: the rewind is redoable.
  const fromChild = (await historyOf(host, continued)).find(e => e.opId === rewind.opId)
  assert.equal(fromChild.redoable, true)
  const redo = await rpc(host, 'redo', { sessionId: continued, opId: rewind.opId })
  assert.equal(redo.json.ok, true, JSON.stringify(redo.json))
  assert.deepEqual(redo.json.value.conversation, { sessionId: agent.id, created: false }, 'the conversation after the rewind is the rewound session')
  assert.equal(existsSync(join(ws, 'b.txt')), false, 'files as the rewind left them again')
  assert.equal(existsSync(join(ws, 'c.txt')), false)
  const entries = await historyOf(host, agent.id)
  const redone = entries.find(e => e.redoOf === rewind.opId)
  assert.ok(redone, 'the redo is an entry of its own')
  assert.equal(redone.outcome, 'done')
  assert.equal(redone.targetText, 'two')
  assert.equal(redone.undoable, true, 'a redo can be undone in turn')
  assert.equal(entries.find(e => e.opId === rewind.opId).redoable, false, 'redone once')
  const twice = await rpc(host, 'redo', { sessionId: agent.id, opId: rewind.opId })
  assert.equal(twice.json.error.code, 'rewind/not-redoable')

  // Undo the redo: files back again; the conversation before the redo is the undo's session.
  const again = await host.runCommand(agent, `/rewind undo @${redone.opId}`)
  assert.equal(again.result.kind, 'success', again.result.text)
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'b2\n')
  assert.equal(await readFile(join(ws, 'c.txt'), 'utf8'), 'c3\n')
  assert.match(again.result.text, new RegExp(`session ${continued}`))
  // Typed redo of the newest undone rewind (the redo entry itself now).
  const typed = await host.runCommand(agent, '/rewind redo')
  assert.equal(typed.result.kind, 'success', typed.result.text)
  assert.match(typed.result.text, /Did the rewind to @\d+ again\./)
  assert.equal(existsSync(join(ws, 'b.txt')), false)
  // Nothing left to redo for an entry that is not undone.
  const refused = await rpc(host, 'redo', { sessionId: agent.id, opId: (await historyOf(host, agent.id))[0].opId })
  assert.equal(refused.json.error.code, 'rewind/not-redoable')
})
