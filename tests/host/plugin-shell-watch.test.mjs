/**
 * The change watcher in the real host: a shell edit and a shell `rm` made by DSH's real `bash`
 * tool come back with /rewind when the scans around the calls look only at what the watcher
 * reported, and the same with the watcher turned off (`DSH_REWIND_WATCH=0`: every scan walks the
 * workspace). The storage view says how the session's latest scan ran.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { turn, text, bash } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, pluginSettled, put, rpc } from './plugin-support.mjs'

async function shellEditAndRmComeBack(t, watch) {
  if (watch) delete process.env.DSH_REWIND_WATCH
  else process.env.DSH_REWIND_WATCH = '0'
  t.after(() => { delete process.env.DSH_REWIND_WATCH })
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash('echo warm > warm.txt'), text('warm done')),
      turn(bash("sed -i 's/one/two/' src/a.txt"), bash('rm -f src/b.txt'), text('shell done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'src/a.txt'), 'one\n')
  await put(join(ws, 'src/b.txt'), 'bee\n')
  for (let i = 0; i < 50; i++) await put(join(ws, `pad/d${i % 5}/f${i}.txt`), `pad ${i}\n`)
  const agent = await host.createAgent(`watch-${watch}`)
  await host.sendUser(agent, 'warm')
  await host.sendUser(agent, 'shell')
  await pluginSettled(host, agent)
  assert.equal(await readFile(join(ws, 'src/a.txt'), 'utf8'), 'two\n')
  assert.equal(existsSync(join(ws, 'src/b.txt')), false)
  const storage = (await rpc(host, 'storage', { sessionId: agent.id })).json
  assert.equal(storage.ok, true, JSON.stringify(storage))
  const scan = storage.value.scan
  assert.notEqual(scan, null)
  if (watch) assert.equal(scan.mode, 'watched', JSON.stringify(scan))
  else {
    assert.equal(scan.mode, 'full')
    assert.match(scan.fullReason, /DSH_REWIND_WATCH=0/)
  }
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'shell')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(ws, 'src/a.txt'), 'utf8'), 'one\n', 'the shell edit is undone')
  assert.equal(await readFile(join(ws, 'src/b.txt'), 'utf8'), 'bee\n', 'the shell rm is undone')
}

test('a shell edit and a shell rm come back with the change watcher on', async (t) => {
  await shellEditAndRmComeBack(t, true)
})

test('a shell edit and a shell rm come back with the change watcher off (DSH_REWIND_WATCH=0)', async (t) => {
  await shellEditAndRmComeBack(t, false)
})
