/**
 * A rewind whose file half cannot run, on the real rc.8 host: the conversation must not move.
 *
 * - A damaged record log (one byte of a record flipped, the host started again on it): the
 *   preview refuses with `rewind/store-corrupt`, and so does `/rewind` — nothing appended, no file
 *   touched — instead of rewinding the conversation and reporting the files as unavailable.
 * - A file the restore cannot open for its rescue copy: that file alone fails, named with why;
 *   every other file comes back; the preview warns about it before anything runs. Root reads any
 *   file, so the host runs in a child process without the capabilities that let root past file
 *   permissions (`setpriv --bounding-set -dac_override,-dac_read_search`), and the file is mode
 *   000; the test is skipped, saying so, where setpriv is missing.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { turn, text, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, bytes, humanSeq, rpc } from './plugin-support.mjs'

async function find(dir, name) {
  const out = []
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) out.push(...await find(p, name))
    else if (e.name === name) out.push(p)
  }
  return out
}

const script = [
  turn(write('a.txt', 'v1\n'), write('c.txt', 'c1\n'), text('one done')),
  turn(read('a.txt'), edit('a.txt', 'v1', 'v2'), read('c.txt'), edit('c.txt', 'c1', 'c2'), write('b.txt', 'created later\n'), text('two done')),
  turn(text('three done')),
]

const markers = agent => agent.session.events.filter(e => e.type === 'user/message' && e.data?.source?.kind === 'dsh-prompt-rewind').length

test('a damaged record log refuses the whole rewind: the conversation does not move', async (t) => {
  const first = await bootWithPlugin({ script })
  const agent1 = await first.createAgent('damaged-log')
  for (const s of ['one', 'two', 'three']) await first.sendUser(agent1, s)
  const target = humanSeq(agent1, 'two')
  await first.dispose()
  const [log] = await find(join(first.dshHome, 'rewind-snapshots'), 'records.log')
  assert.ok(log, 'the session has a record log')
  const damaged = await readFile(log)
  damaged[Math.floor(damaged.length / 3)] ^= 0x55
  await writeFile(log, damaged)

  const host = await bootWithPlugin({ dshHome: first.dshHome, workspace: first.workspace })
  t.after(() => host.dispose())
  const agent = await host.resume('damaged-log')
  const eventsBefore = agent.session.events.length
  const preview = (await rpc(host, 'preview', { sessionId: 'damaged-log', seq: target })).json
  assert.equal(preview.ok, false, JSON.stringify(preview))
  assert.equal(preview.error.code, 'rewind/store-corrupt')

  const { result } = await host.runCommand(agent, `/rewind @${target}`)
  assert.equal(result.kind, 'error', result.text)
  assert.match(result.text, /rewind\/store-corrupt/)
  assert.match(result.text, /nothing was changed/)
  assert.equal(markers(agent), 0, 'no marker was appended')
  // The command's own events only (its run and its end); no rewind.
  assert.ok(agent.session.events.slice(eventsBefore).every(e => e.type.startsWith('command/')), JSON.stringify(agent.session.events.slice(eventsBefore).map(e => e.type)))
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'v2\n', 'no file is touched')
  assert.equal((await bytes(join(host.workspace, 'b.txt'))).toString(), 'created later\n')
  const history = (await rpc(host, 'history', { sessionId: 'damaged-log' })).json.value
  assert.ok(history.entries.every(e => e.outcome === 'abandoned'), JSON.stringify(history.entries.map(e => e.outcome)))
})

const CHILD = `
const { turn, text, write, read, edit } = await import(${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'lib/harness.mjs')).href)})
const { bootWithPlugin, humanSeq, rpc } = await import(${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'plugin-support.mjs')).href)})
const { chmod, readFile } = await import('node:fs/promises')
const { join } = await import('node:path')
const script = ${JSON.stringify(script)}
const host = await bootWithPlugin({ script })
const out = {}
try {
  const agent = await host.createAgent('unreadable')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  const target = humanSeq(agent, 'two')
  await chmod(join(host.workspace, 'a.txt'), 0)
  out.readable = await readFile(join(host.workspace, 'a.txt')).then(() => true, () => false)
  out.preview = (await rpc(host, 'preview', { sessionId: 'unreadable', seq: target })).json
  out.previewText = (await host.runCommand(agent, '/rewind preview @' + target)).result
  out.result = (await host.runCommand(agent, '/rewind @' + target)).result
  out.markers = agent.session.events.filter(e => e.type === 'user/message' && e.data?.source?.kind === 'dsh-prompt-rewind').length
  out.history = (await rpc(host, 'history', { sessionId: 'unreadable' })).json.value.entries.map(e => e.outcome)
  await chmod(join(host.workspace, 'a.txt'), 0o644)
  out.a = await readFile(join(host.workspace, 'a.txt'), 'utf8')
  out.c = await readFile(join(host.workspace, 'c.txt'), 'utf8')
  out.b = await readFile(join(host.workspace, 'b.txt'), 'utf8').catch(e => e.code)
} finally {
  await host.dispose()
}
process.stdout.write('@@RESULT ' + JSON.stringify(out) + '\\n')
`

test('a file the restore cannot read is that file\'s failure; the rest is restored, and the preview warns first', async (t) => {
  if (spawnSync('setpriv', ['--version']).status !== 0) return t.skip('setpriv is not available here')
  const child = spawnSync('setpriv', ['--bounding-set', '-dac_override,-dac_read_search', process.execPath, '--input-type=module', '-e', CHILD], {
    encoding: 'utf8', env: process.env, timeout: 120_000, maxBuffer: 64 << 20,
  })
  const line = child.stdout.split('\n').find(l => l.startsWith('@@RESULT '))
  assert.ok(line, `the child reported nothing (status ${child.status}):\n${child.stderr.slice(-4000)}`)
  const out = JSON.parse(line.slice('@@RESULT '.length))
  assert.equal(out.readable, false, 'a.txt cannot be read by the host')

  // The preview warns before anything runs: the RPC names the file and why, as does the command.
  assert.equal(out.preview.ok, true, JSON.stringify(out.preview))
  assert.deepEqual(out.preview.value.unreadable.map(u => u.path), ['a.txt'])
  assert.match(out.preview.value.unreadable[0].message, /Permission denied/)
  assert.match(out.previewText.text, /Cannot be read, so not restored \(1\):\n- a\.txt: .*Permission denied/)

  // The rewind: the conversation moves, a.txt alone fails (named, with why), the rest comes back.
  assert.equal(out.result.kind, 'success', out.result.text)
  assert.equal(out.markers, 1)
  assert.doesNotMatch(out.result.text, /Files not restored/)
  assert.match(out.result.text, /Written \(1\):\n- c\.txt/)
  assert.match(out.result.text, /Deleted \(1\):\n- b\.txt/)
  assert.match(out.result.text, /Failed \(1\):\n- a\.txt: cannot be read to keep a copy of it before the restore \(open: Permission denied.*\); left as it is/)
  assert.deepEqual(out.history, ['partial'])
  assert.equal(out.a, 'v2\n', 'the unreadable file is left as it is')
  assert.equal(out.c, 'c1\n')
  assert.equal(out.b, 'ENOENT')
})
