/**
 * Changes made to a tracked file after the last message (a shell command or an editor, not a
 * write tool) are restored by a rewind too: the rewind re-checks the tracked files first.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readFile, writeFile, access, readdir } from 'node:fs/promises'
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

test('the files a turn wrote are read into the store while the session is quiet; an edit after that is still told apart', async (t) => {
  const host = await bootWithPlugin({
    script: [
      turn({ kind: 'tools', calls: [
        { name: 'write', id: 'w1', args: { file_path: 'a.txt', content: 'read ahead: first file\n' } },
        { name: 'write', id: 'w2', args: { file_path: 'b.txt', content: 'read ahead: second file\n' } },
      ] }, text('wrote them')),
      turn(text('second done')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('read-ahead-session')
  await host.sendUser(agent, 'first')
  await pluginSettled(host, agent)
  // The commits are written and the files read a moment after the burst of calls (no message
  // has come yet): their content is in the session's log.
  const sessions = join(host.dshHome, 'rewind-snapshots', 'sessions')
  const logOf = async () => {
    const [dir] = await readdir(sessions)
    return await readFile(join(sessions, dir, 'records.log'))
  }
  let log = Buffer.alloc(0)
  for (let i = 0; i < 100 && !log.includes('read ahead: second file'); i++) {
    await new Promise((r) => setTimeout(r, 20))
    log = await logOf()
  }
  assert.ok(log.includes('read ahead: first file\n'), 'the first file was read ahead')
  assert.ok(log.includes('read ahead: second file\n'), 'the second file was read ahead')
  // Changed after it was read: the message's re-check reads it again.
  await writeFile(join(host.workspace, 'b.txt'), 'changed by hand before the message\n')
  await host.sendUser(agent, 'second')
  await pluginSettled(host, agent)
  await writeFile(join(host.workspace, 'a.txt'), 'changed later\n')
  await writeFile(join(host.workspace, 'b.txt'), 'changed later\n')
  const second = humanSeq(agent, 'second')
  const { result } = await host.runCommand(agent, `/rewind @${second}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'read ahead: first file\n')
  assert.equal(await readFile(join(host.workspace, 'b.txt'), 'utf8'), 'changed by hand before the message\n')
})
