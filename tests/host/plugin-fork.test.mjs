/**
 * Fork rewind on the real DSH host: `/rewind --fork @<seq>` continues from the target in a new
 * child session (seeded with the parent's prefix, header `parentSession` / `seedLength`), restores
 * the files to the target's state, and leaves the parent's conversation alone. A later rewind in
 * the child reads the parent's before-states up to the fork point in place; siblings never see
 * each other's records; forks of forks chain; both sides resume from JSONL.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { turn, text, write, read, edit, gate, gated, parseJsonl } from './lib/harness.mjs'
import { threeTurnSession, bootWithPlugin, snapshot, humanSeq, humanIndex, textOf, bytes, rpc, put, pluginSettled, FILES } from './plugin-support.mjs'

/** The live children of a session, oldest first. */
function childrenOf(host, parentId) {
  return host.ctx.sessions.list().filter(s => s.header.parentSession === parentId)
}

/** The only new child of `parentId` the report names. */
function childFromReport(host, parentId, result) {
  const m = /new session (session-[0-9a-f-]+)/.exec(result.text)
  assert.ok(m, result.text)
  const child = host.ctx.agents.get(m[1])
  assert.ok(child, `the child agent ${m[1]} is live`)
  assert.equal(child.session.header.parentSession, parentId)
  return child
}

const surfaceOf = agent => [...agent.session.surface.nodes]

test('fork-rewind to a middle message: a child with exactly the earlier messages, the parent unchanged, files at the target', async (t) => {
  const { host, agent, ws, beforeMiddle, afterLast } = await threeTurnSession({
    sessionId: 'fork-parent',
    extraTurns: [
      turn(text('child turn one done')),
      turn(read('notes.txt'), edit('notes.txt', 'v1', 'child'), write('child.txt', 'from the child\n'), text('child turn two done')),
    ],
  })
  t.after(() => host.dispose())
  const middle = humanSeq(agent, 'middle')
  const start = humanSeq(agent, 'start')
  const parentEvents = agent.session.events.map(e => JSON.stringify(e))
  const parentSurface = surfaceOf(agent)

  const { result } = await host.runCommand(agent, `/rewind --fork @${middle}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, new RegExp(`^Forked at message @${middle}: "middle"\\nContinue in the new session session-`))
  assert.match(result.text, /\nWritten \(\d+\):\n[\s\S]*\nDeleted \(1\):\n- new\.txt\n[\s\S]*\nFailed \(0\):\n- none$/)
  const child = childFromReport(host, 'fork-parent', result)
  assert.deepEqual(childrenOf(host, 'fork-parent').map(s => s.header.id), [child.id])

  // The child's header names its parent; its log is the parent's prefix up to the boundary,
  // which is the last event before the target's turn.
  const header = child.session.header
  assert.equal(header.cwd, ws)
  const turnStart = agent.session.events.slice(0, middle).findLast(e => e.type === 'turn/start')
  assert.equal(header.seedLength, turnStart.seq)
  assert.deepEqual(child.session.events.slice(0, header.seedLength).map(e => JSON.stringify(e)), parentEvents.slice(0, header.seedLength))

  // The parent's conversation is untouched: same events (plus DSH's own command/run + command/done), same surface.
  assert.deepEqual(agent.session.events.slice(0, parentEvents.length).map(e => JSON.stringify(e)), parentEvents)
  assert.deepEqual(agent.session.events.slice(parentEvents.length).map(e => e.type), ['command/run', 'command/done'])
  assert.deepEqual(surfaceOf(agent), parentSurface)

  // Files are at the target's state (the over-cap file is reported, not touched).
  const now = await snapshot(ws, FILES)
  for (const name of ['notes.txt', 'sre.txt', 'data.bin', 'new.txt', 'keep.txt']) assert.deepEqual(now[name], beforeMiddle[name], name)
  assert.deepEqual(now['big.txt'], afterLast['big.txt'])

  // The child's model context is exactly the messages before the target, then its own message.
  const firstMiddleRequest = host.adapter.requests.find(r => humanIndex(r.messages, 'middle') >= 0)
  const k = humanIndex(firstMiddleRequest.messages, 'middle')
  await host.sendUser(child, 'in the child')
  const childRequest = host.adapter.requests.at(-1).messages
  assert.deepEqual(childRequest.slice(0, k), firstMiddleRequest.messages.slice(0, k))
  assert.deepEqual(childRequest.slice(k).map(m => [m.role, m.source?.kind, textOf(m)]), [['user', 'user', 'in the child']])

  // History: the entry is marked as a fork naming the child.
  const history = await rpc(host, 'history', { sessionId: 'fork-parent' })
  assert.equal(history.json.ok, true, JSON.stringify(history.json))
  const entry = history.json.value.entries[0]
  assert.equal(entry.sessionId, 'fork-parent')
  assert.equal(entry.targetSeq, middle)
  assert.deepEqual(entry.fork, { childSessionId: child.id })

  // Further turns in the child, then a rewind inside the child to a message before the fork
  // point: the parent's records (notes.txt, sre.txt, data.bin were created by "start") decide.
  await host.sendUser(child, 'child edits')
  assert.equal((await bytes(join(ws, 'notes.txt'))).toString(), 'child\n')
  assert.equal((await bytes(join(ws, 'child.txt'))).toString(), 'from the child\n')
  const preview = await rpc(host, 'preview', { sessionId: child.id, seq: start })
  assert.equal(preview.json.ok, true, JSON.stringify(preview.json))
  assert.deepEqual(preview.json.value.files.map(f => `${f.action} ${f.path}`).sort(),
    ['delete child.txt', 'delete data.bin', 'delete notes.txt', 'delete sre.txt'])
  const inChild = await host.runCommand(child, `/rewind @${start}`)
  assert.equal(inChild.result.kind, 'success', inChild.result.text)
  for (const name of ['notes.txt', 'sre.txt', 'data.bin', 'child.txt', 'new.txt']) {
    assert.equal(await bytes(join(ws, name)), null, `${name} did not exist before "start"`)
  }
  // The child's rewind appended its marker to the child only.
  assert.deepEqual(surfaceOf(agent), parentSurface)

})

test('a fork re-checks the files only its parent changed: one changed outside the agent in the child comes back', async (t) => {
  const { host, agent, ws, beforeMiddle } = await threeTurnSession({
    sessionId: 'fork-recheck-parent',
    extraTurns: [turn(text('child one done')), turn(text('child two done'))],
  })
  t.after(() => host.dispose())
  const middle = humanSeq(agent, 'middle')
  const { result } = await host.runCommand(agent, `/rewind --fork @${middle}`)
  assert.equal(result.kind, 'success', result.text)
  const child = childFromReport(host, 'fork-recheck-parent', result)
  assert.deepEqual((await bytes(join(ws, 'sre.txt'))).toString(), beforeMiddle['sre.txt'].toString())

  // sre.txt was created and changed by the parent's agent only; in the child it is changed by
  // hand between two turns, then the child rewinds to the message before that change.
  await host.sendUser(child, 'child one')
  await pluginSettled(host, child)
  await put(join(ws, 'sre.txt'), 'edited by hand in the child\n')
  await host.sendUser(child, 'child two')
  const childOne = humanSeq(child, 'child one')
  const preview = await rpc(host, 'preview', { sessionId: child.id, seq: childOne })
  assert.equal(preview.json.ok, true, JSON.stringify(preview.json))
  assert.deepEqual(preview.json.value.files.map(f => `${f.action} ${f.path}`), ['write sre.txt'])
  const rewound = await host.runCommand(child, `/rewind @${childOne}`)
  assert.equal(rewound.result.kind, 'success', rewound.result.text)
  assert.equal((await bytes(join(ws, 'sre.txt'))).toString(), beforeMiddle['sre.txt'].toString())
})

test('fork of a fork chains through both parents; siblings never see each other\'s records; both resume from JSONL', async (t) => {
  const { host, agent, ws, beforeMiddle } = await threeTurnSession({
    sessionId: 'root-session',
    extraTurns: [
      turn(write('f1.txt', 'a\n'), text('f1 a done')),
      turn(read('f1.txt'), edit('f1.txt', 'a', 'b'), text('f1 b done')),
      turn(write('sib.txt', 'sibling\n'), text('sibling done')),
    ],
  })
  const dshHome = host.dshHome
  let live = host
  t.after(() => live.dispose())
  const start = humanSeq(agent, 'start')
  const last = humanSeq(agent, 'last')
  const middle = humanSeq(agent, 'middle')

  // F1: fork the root at "last"; two turns in F1.
  const f1Result = (await host.runCommand(agent, `/rewind --fork @${last}`)).result
  assert.equal(f1Result.kind, 'success', f1Result.text)
  const f1 = childFromReport(host, 'root-session', f1Result)
  await host.sendUser(f1, 'f1 a')
  await host.sendUser(f1, 'f1 b')
  assert.equal((await bytes(join(ws, 'f1.txt'))).toString(), 'b\n')

  // G: fork F1 at "f1 b" → f1.txt back to "a" from F1's own records.
  const gResult = (await host.runCommand(f1, `/rewind --fork @${humanSeq(f1, 'f1 b')}`)).result
  assert.equal(gResult.kind, 'success', gResult.text)
  const g = childFromReport(host, f1.id, gResult)
  assert.equal((await bytes(join(ws, 'f1.txt'))).toString(), 'a\n')
  assert.equal(g.session.header.seedLength <= f1.session.events.length, true)

  // A sibling of F1: fork the root at "middle"; it writes its own file.
  const sResult = (await host.runCommand(agent, `/rewind --fork @${middle}`)).result
  assert.equal(sResult.kind, 'success', sResult.text)
  const sibling = childFromReport(host, 'root-session', sResult)
  assert.deepEqual((await bytes(join(ws, 'notes.txt'))), beforeMiddle['notes.txt'])
  assert.equal((await bytes(join(ws, 'f1.txt'))).toString(), 'a\n', 'a file only F1 touched stays')
  await host.sendUser(sibling, 'sibling work')

  // Sibling isolation: the sibling's preview never lists F1's or G's files; G's never lists the sibling's.
  const sibPreview = await rpc(host, 'preview', { sessionId: sibling.id, seq: start })
  assert.equal(sibPreview.json.ok, true, JSON.stringify(sibPreview.json))
  const sibPaths = sibPreview.json.value.files.map(f => f.path)
  assert.ok(sibPaths.includes('sib.txt') && sibPaths.includes('notes.txt'), sibPaths.join(','))
  assert.ok(!sibPaths.includes('f1.txt'), `F1's records are not the sibling's: ${sibPaths}`)
  const gPreview = await rpc(host, 'preview', { sessionId: g.id, seq: start })
  const gPaths = gPreview.json.value.files.map(f => f.path)
  assert.ok(!gPaths.includes('sib.txt'), `the sibling's records are not G's: ${gPaths}`)
  // G's chain: F1 up to G's boundary ("f1 a" created f1.txt) and the root up to F1's boundary.
  assert.deepEqual(gPreview.json.value.files.filter(f => ['f1.txt', 'notes.txt'].includes(f.path)).map(f => `${f.action} ${f.path}`).sort(),
    ['delete f1.txt', 'delete notes.txt'])

  // Resume every session from JSONL in a fresh host (same DSH home and workspace).
  const surfaces = Object.fromEntries([agent, f1, g, sibling].map(a => [a.id, surfaceOf(a)]))
  const headers = Object.fromEntries([agent, f1, g, sibling].map(a => [a.id, a.session.header]))
  for (const a of [agent, f1, g, sibling]) await host.flush(a)
  const jsonl = parseJsonl(await host.readJsonl(g))
  assert.equal(jsonl.header.parentSession, f1.id)
  assert.equal(jsonl.header.seedLength, headers[g.id].seedLength)
  await host.dispose()
  live = await bootWithPlugin({ workspace: ws, dshHome })
  const resumedRoot = await live.resume('root-session')
  assert.deepEqual(surfaceOf(resumedRoot), surfaces['root-session'])
  // G alone is live: its grandparent's and parent's headers come from persistence.
  const resumedG = await live.resume(g.id)
  assert.deepEqual(surfaceOf(resumedG), surfaces[g.id])
  assert.equal(resumedG.session.header.parentSession, f1.id)
  assert.equal(live.ctx.sessions.get(f1.id), undefined, 'F1 is not live')
  const { result } = await live.runCommand(resumedG, `/rewind @${start}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await bytes(join(ws, 'f1.txt')), null, 'F1\'s record (before "f1 a") is found through the persisted header')
  assert.equal(await bytes(join(ws, 'notes.txt')), null, 'the root\'s record (before "start") is found through F1\'s persisted header')
  assert.equal((await bytes(join(ws, 'sib.txt'))).toString(), 'sibling\n', 'the sibling\'s file is not G\'s to restore')
  // The sibling resumes too, with its own surface.
  const resumedSibling = await live.resume(sibling.id)
  assert.deepEqual(surfaceOf(resumedSibling), surfaces[sibling.id])
})

test('fork refusals change nothing: subagent session, a message sent mid-turn, unread steering, bad targets', async (t) => {
  const g = gate()
  const host = await bootWithPlugin({
    script: [
      turn(write('a.txt', 'one\n'), text('first done')),
      turn(write('b.txt', 'two\n'), gated(g, text('after steering'))),
      turn(text('steered step')),
      turn(text('sub done')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('refuse-session')
  await host.sendUser(agent, 'first')
  host.followup(agent, 'second')
  await g.reached
  host.steer(agent, 'steer me')
  const steer = /@(\d+) \(pending\) steer me/.exec((await host.runCommand(agent, '/rewind')).result.text)
  assert.ok(steer)
  const sessionsBefore = host.ctx.sessions.list().length
  const files = await snapshot(host.workspace, ['a.txt', 'b.txt'])

  const pending = await host.runCommand(agent, `/rewind --fork @${steer[1]}`)
  assert.equal(pending.result.kind, 'error')
  assert.match(pending.result.text, /\[rewind\/fork-inside-turn\]/)
  g.release()
  await host.waitIdle(agent)
  // "steer me" was read mid-turn, after "second": it cannot be forked before.
  const midTurn = await host.runCommand(agent, `/rewind --fork @${humanSeq(agent, 'steer me')}`)
  assert.equal(midTurn.result.kind, 'error')
  assert.match(midTurn.result.text, /\[rewind\/fork-inside-turn\]/)
  const bad = await host.runCommand(agent, '/prompt-rewind --fork @99999')
  assert.match(bad.result.text, /\[rewind\/unknown-seq\]/)
  const noTarget = await host.runCommand(agent, '/prompt-rewind --fork')
  assert.match(noTarget.result.text, /\[rewind\/bad-target\]/)
  assert.equal(host.ctx.sessions.list().length, sessionsBefore, 'no session was created')
  assert.deepEqual(await snapshot(host.workspace, ['a.txt', 'b.txt']), files)
  assert.ok(!agent.session.events.some(e => e.type === 'user/message' && e.data?.source?.kind === 'dsh-prompt-rewind'))

  const { agent: sub } = await host.ctx.agents.create({
    sessionId: 'fork-subagent',
    meta: { cwd: host.workspace, origin: 'subagent', delegationDepth: 1 },
    agentOptions: { provider: 'scripted', model: 'scripted-model' },
  })
  await host.sendUser(sub, 'sub')
  const refused = await host.runCommand(sub, `/rewind --fork @${humanSeq(sub, 'sub')}`)
  assert.match(refused.result.text, /\[rewind\/subagent-session\]/)
  assert.equal(childrenOf(host, 'fork-subagent').length, 0)
})

test('the engine command forks too, and a second fork of the same target makes a second child', async (t) => {
  const host = await bootWithPlugin({ script: [turn(write('x.txt', '1\n'), text('one')), turn(write('x.txt', '2\n'), text('two'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('engine-fork')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  const two = humanSeq(agent, 'two')
  const a = (await host.runCommand(agent, `/prompt-rewind --fork @${two}`)).result
  assert.equal(a.kind, 'success', a.text)
  assert.equal((await bytes(join(host.workspace, 'x.txt'))).toString(), '1\n')
  // Undo of the fork's file restore, from the parent, as for an in-place rewind.
  const entry = (await rpc(host, 'history', { sessionId: 'engine-fork' })).json.value.entries[0]
  assert.ok(entry.fork?.childSessionId, JSON.stringify(entry))
  assert.equal(entry.undoable, true)
  const undo = await rpc(host, 'undo', { sessionId: 'engine-fork', opId: entry.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  assert.equal((await bytes(join(host.workspace, 'x.txt'))).toString(), '2\n')
  assert.ok(host.ctx.agents.get(entry.fork.childSessionId), 'the undo touches files only; the child stays')
  const b = (await host.runCommand(agent, `/rewind --fork @${two}`)).result
  assert.equal(b.kind, 'success', b.text)
  assert.match(b.text, /Written \(1\):\n- x\.txt/)
  assert.equal(childrenOf(host, 'engine-fork').length, 2)
  // The durable report is DSH's command/done in the parent's JSONL.
  const { events } = parseJsonl(await host.readJsonl(agent))
  const done = events.filter(e => e.type === 'command/done').at(-1)
  assert.equal(done.data.text, b.text)
})
