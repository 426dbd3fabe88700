/**
 * A restore that cannot finish (a per-file failure) on the real host: the failure is reported
 * and never aborts the pass, the journal stays open, it is not undoable, and it can be continued
 * once the cause is gone, or rolled back to the exact pre-restore bytes. The failure is made with
 * the immutable attribute (`chattr +i`), which stops even root; the test is skipped, saying so,
 * where chattr is unavailable.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { turn, text, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, bytes, humanSeq, rpc } from './plugin-support.mjs'

function chattr(flag, path) {
  const res = spawnSync('chattr', [flag, path], { encoding: 'utf8' })
  return res.status === 0
}

async function failingRestore(t, sessionId) {
  const host = await bootWithPlugin({
    script: [
      turn(write('a.txt', 'v1\n'), text('one')),
      turn(read('a.txt'), edit('a.txt', 'v1', 'v2'), write('b.txt', 'created later\n'), text('two')),
      turn(text('three')),
    ],
  })
  const b = join(host.workspace, 'b.txt')
  t.after(async () => {
    chattr('-i', b)
    await host.dispose()
  })
  const agent = await host.createAgent(sessionId)
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  await host.sendUser(agent, 'three')
  if (!chattr('+i', b)) return undefined
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  return { host, agent, b, result }
}

test('a per-file failure is reported, the journal stays open, and continue finishes it', async (t) => {
  const run = await failingRestore(t, 'continue-session')
  if (run === undefined) return t.skip('chattr +i is not available here')
  const { host, b, result } = run
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Written \(1\):\n- a\.txt/)
  assert.match(result.text, /Failed \(1\):\n- b\.txt: /)
  assert.match(result.text, /Run \/rewind --continue to finish restoring the files, or \/rewind --rollback/)
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'v1\n', 'the other path was still restored')
  assert.equal((await bytes(b)).toString(), 'created later\n')

  const history = await rpc(host, 'history', { sessionId: 'continue-session' })
  const [entry] = history.json.value.entries
  assert.equal(entry.outcome, 'partial')
  assert.equal(entry.undoable, false, 'an open journal is not undoable')
  const undo = await rpc(host, 'undo', { sessionId: 'continue-session', opId: entry.opId })
  assert.equal(undo.json.error.code, 'rewind/not-undoable')
  assert.match(undo.json.error.message, /its restore journal is open; continue or roll it back first/)

  const restores = await rpc(host, 'restores', { sessionId: 'continue-session' })
  const open = restores.json.value.restores.find(r => r.opId === entry.opId)
  assert.equal(open.state, 'open')
  assert.equal(open.failed, 1)
  // Listed with the interrupted rewinds (the client's banner offers Continue and Roll back), as
  // partial; a new rewind is not refused over it.
  const listed = (await rpc(host, 'interrupted', { sessionId: 'continue-session' })).json.value.interrupted
  assert.deepEqual(listed.map(i => [i.opId, i.partial, i.kind, i.restore.failed, i.restore.actions]), [[entry.opId, true, 'rewind', 1, 2]])

  chattr('-i', b)
  const continued = await rpc(host, 'restores.continue', { sessionId: 'continue-session', opId: entry.opId })
  assert.equal(continued.json.ok, true, JSON.stringify(continued.json))
  assert.equal(continued.json.value.completed, true)
  assert.equal(await bytes(b), null, 'the failed delete is done now')
  const after = await rpc(host, 'restores', { sessionId: 'continue-session' })
  assert.equal(after.json.value.restores.find(r => r.opId === entry.opId).state, 'completed')
  assert.deepEqual((await rpc(host, 'interrupted', { sessionId: 'continue-session' })).json.value.interrupted, [])
  // The history entry is settled: done, b.txt deleted, nothing failed — and now undoable.
  const settled = (await rpc(host, 'history', { sessionId: 'continue-session' })).json.value.entries[0]
  assert.equal(settled.outcome, 'done')
  assert.equal(settled.failed, 0)
  assert.ok(settled.paths.deleted.includes('b.txt'), JSON.stringify(settled.paths))
  assert.equal(settled.undoable, true)
})

test('an open restore rolls back to the exact pre-restore bytes', async (t) => {
  const run = await failingRestore(t, 'rollback-session')
  if (run === undefined) return t.skip('chattr +i is not available here')
  const { host, b } = run
  const { json } = await rpc(host, 'restores', { sessionId: 'rollback-session' })
  const [open] = json.value.restores
  assert.equal(open.state, 'open')
  chattr('-i', b)
  const rolled = await rpc(host, 'restores.rollback', { sessionId: 'rollback-session', opId: open.opId })
  assert.equal(rolled.json.ok, true, JSON.stringify(rolled.json))
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'v2\n', 'a.txt is back to its bytes before the restore')
  assert.equal((await bytes(b)).toString(), 'created later\n')
  const after = await rpc(host, 'restores', { sessionId: 'rollback-session' })
  assert.equal(after.json.value.restores[0].state, 'rolled-back')
  // Its file changes are undone, and the history entry says so.
  const entry = (await rpc(host, 'history', { sessionId: 'rollback-session' })).json.value.entries[0]
  assert.equal(entry.opId, open.opId)
  assert.ok(entry.undoneAt > 0, JSON.stringify(entry))
  assert.equal(entry.undoOutcome, 'ok')
  assert.equal(entry.undoable, false)
})

test('a rewind that could not restore a file is finished by a typed /rewind --continue', async (t) => {
  const run = await failingRestore(t, 'typed-session')
  if (run === undefined) return t.skip('chattr +i is not available here')
  const { host, agent, b } = run
  // The bare /rewind names it first, with the two ways out.
  const listed = await host.runCommand(agent, '/rewind')
  assert.equal(listed.result.kind, 'success', listed.result.text)
  assert.match(listed.result.text, /^An earlier rewind of this session could not restore every file:\n- rewind to @\d+ \(1 of 2 file action\(s\) failed; op [0-9a-f-]+\)\nRun \/rewind --continue/)
  // While the cause is there, the continue reports the file failed again and the restore stays open.
  const again = await host.runCommand(agent, '/rewind --continue')
  assert.equal(again.result.kind, 'success', again.result.text)
  assert.match(again.result.text, /Failed \(1\):\n- b\.txt: /)
  assert.match(again.result.text, /Run \/rewind --continue to finish restoring the files/)
  chattr('-i', b)
  const { result } = await host.runCommand(agent, '/rewind --continue')
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /^Finished the interrupted rewind to @\d+/)
  assert.match(result.text, /Deleted \(1\):\n- b\.txt/)
  assert.equal(await bytes(b), null)
  const entry = (await rpc(host, 'history', { sessionId: 'typed-session' })).json.value.entries[0]
  assert.equal(entry.outcome, 'done')
  assert.equal(entry.undoable, true)
  // Nothing is left to settle.
  const none = await host.runCommand(agent, '/rewind --continue')
  assert.equal(none.result.kind, 'error')
  assert.match(none.result.text, /no interrupted rewind in this session/)
})
