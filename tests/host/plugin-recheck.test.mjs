/**
 * Changes made to a tracked file after the last message (a shell command or an editor, not a
 * write tool) are restored by a rewind too: the rewind re-checks the tracked files first.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readFile, writeFile, access } from 'node:fs/promises'
import { turn, text, write } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, pluginSettled } from './plugin-support.mjs'

test('an outside edit after the last message is rolled back by a rewind', async (t) => {
  const host = await bootWithPlugin({
    script: [
      turn(write('tracked.txt', 'v1\n'), text('first done')),
      turn(write('other.txt', 'other\n'), text('second done')),
      turn(text('third done')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('recheck-session')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  // By now the store has recorded tracked.txt's content; the third message leaves it alone.
  await host.sendUser(agent, 'third')
  await pluginSettled(host, agent)
  // After the last turn, something outside the write tools changes the tracked file.
  await writeFile(join(host.workspace, 'tracked.txt'), 'changed outside\n')

  const third = humanSeq(agent, 'third')
  const { result } = await host.runCommand(agent, `/rewind @${third}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(host.workspace, 'tracked.txt'), 'utf8'), 'v1\n', 'the state before "third" is back')
  assert.match(result.text, /Written \(1\):\n- tracked\.txt/)

  // And a rewind further back still deletes what was created after its target.
  const second = humanSeq(agent, 'second')
  const back = await host.runCommand(agent, `/rewind @${second}`)
  assert.equal(back.result.kind, 'success', back.result.text)
  await assert.rejects(access(join(host.workspace, 'other.txt')), 'a file created after the target is deleted')
  assert.equal(await readFile(join(host.workspace, 'tracked.txt'), 'utf8'), 'v1\n')
})
