/**
 * An undo that a file change races: the file changes after the undo's check, once the undo has
 * started (its history entry names the new session, which exists). The answer must say what
 * really happened — here the undo is finished at once, the changed file kept as it is — never
 * "refused" while the next reconcile would finish it unasked.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readFile, writeFile } from 'node:fs/promises'
import { threeTurnSession, humanSeq, rpc } from './plugin-support.mjs'

test('a file changed between the undo\'s check and its file step: the undo says it finished, keeping that file', async (t) => {
  const { host, agent, ws, afterLast } = await threeTurnSession({ sessionId: 'race-session' })
  t.after(() => {
    delete globalThis.__dshPromptRewindTestPause
    return host.dispose()
  })
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'middle')}`)).result.kind, 'success')
  // An editor saves notes.txt right after the undo's check.
  globalThis.__dshPromptRewindTestPause = async (point) => {
    if (point === 'undo:started') await writeFile(join(ws, 'notes.txt'), 'saved by an editor\n')
  }
  const { result } = await host.runCommand(agent, '/rewind undo')
  delete globalThis.__dshPromptRewindTestPause
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Changed while the undo ran, kept as they are \(the undo is done\) \(1\):\n- notes\.txt/)
  assert.equal(await readFile(join(ws, 'notes.txt'), 'utf8'), 'saved by an editor\n', 'the editor\'s save is kept')
  assert.deepEqual(await readFile(join(ws, 'sre.txt')), afterLast['sre.txt'], 'the other files are undone')

  // The history says undone, and nothing is left for a reconcile to do.
  const history = await rpc(host, 'history', { sessionId: 'race-session' })
  const entry = history.json.value.entries[0]
  assert.notEqual(entry.undoneAt ?? null, null, 'the entry is undone')
  const interrupted = await rpc(host, 'interrupted', { sessionId: 'race-session' })
  assert.deepEqual(interrupted.json.value.interrupted, [])
  assert.equal(await readFile(join(ws, 'notes.txt'), 'utf8'), 'saved by an editor\n')
})
