/**
 * A directory that becomes unreadable, on the real rc.8 host with DSH's real `bash` tool:
 *
 * - `echo x > src/a.txt && rm src/b.txt && chmod 000 src` in one call: the preview, the
 *   `/rewind preview` text, the `/rewind` report and the history entry list the directory (with
 *   why) and the files it held that the scan could not check, under the not-covered heading,
 *   as the budgets are — instead of mentioning neither file.
 * - A rewind into a directory made unreadable after the agent changed a file in it: the preview
 *   warns that the file cannot be read, the rewind names it as failed (with why), the rest comes
 *   back; the workspace root made unreadable (`chmod 000 .`) likewise names what it could not
 *   restore and what it could not check, instead of reporting nothing.
 *
 * Root reads any directory, so the host runs in a child process without the capabilities that let
 * root past file permissions (`setpriv --bounding-set -dac_override,-dac_read_search`); the test
 * is skipped, saying so, where setpriv is missing.
 *
 * And a file restored while over the per-file cap is listed as restored only, not also as "not
 * covered" (which read as if it had failed).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { readFile } from 'node:fs/promises'
import { turn, text, bash } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, put, rpc } from './plugin-support.mjs'

const here = import.meta.dirname
const CHILD = (body) => `
const { turn, text, bash } = await import(${JSON.stringify(pathToFileURL(join(here, 'lib/harness.mjs')).href)})
const { bootWithPlugin, humanSeq, rpc, put } = await import(${JSON.stringify(pathToFileURL(join(here, 'plugin-support.mjs')).href)})
const { chmod, readFile } = await import('node:fs/promises')
const { join } = await import('node:path')
const out = {}
${body}
process.stdout.write('@@RESULT ' + JSON.stringify(out) + '\\n')
`

/** Runs `body` (the host boot and the steps, filling `out`) in a child without DAC capabilities. */
function inChild(t, body) {
  if (spawnSync('setpriv', ['--version']).status !== 0) {
    t.skip('setpriv is not available here')
    return undefined
  }
  const child = spawnSync('setpriv', ['--bounding-set', '-dac_override,-dac_read_search', process.execPath, '--input-type=module', '-e', CHILD(body)], {
    encoding: 'utf8', env: process.env, timeout: 180_000, maxBuffer: 64 << 20,
  })
  const line = child.stdout.split('\n').find(l => l.startsWith('@@RESULT '))
  assert.ok(line, `the child reported nothing (status ${child.status}):\n${child.stderr.slice(-4000)}`)
  return JSON.parse(line.slice('@@RESULT '.length))
}

/** The steps after the session's messages, shared by the child scripts: preview, rewind, history. */
const REWIND_STEPS = `
  out.preview = (await rpc(host, 'preview', { sessionId: 's', seq: target })).json
  out.previewText = (await host.runCommand(agent, '/rewind preview @' + target)).result.text
  out.result = (await host.runCommand(agent, '/rewind @' + target)).result
  out.history = (await rpc(host, 'history', { sessionId: 's' })).json.value.entries
`

test('changes inside a directory that became unreadable are listed as not covered, with why, everywhere', async (t) => {
  const out = inChild(t, `
const host = await bootWithPlugin({ shell: true, script: [
  turn(text('one done')),
  turn(bash('echo x > src/a.txt && rm src/b.txt && chmod 000 src'), text('two done')),
  turn(text('three done')),
] })
try {
  await put(join(host.workspace, 'src/a.txt'), 'a1\\n')
  await put(join(host.workspace, 'src/b.txt'), 'b1\\n')
  await put(join(host.workspace, 'open.txt'), 'o1\\n')
  const agent = await host.createAgent('s')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  out.listable = await readFile(join(host.workspace, 'src/a.txt')).then(() => true, () => false)
  const target = humanSeq(agent, 'two')
  ${REWIND_STEPS}
} finally {
  await chmod(join(host.workspace, 'src'), 0o755).catch(() => {})
  await host.dispose()
}
`)
  if (out === undefined) return
  assert.equal(out.listable, false, 'src cannot be read by the host')
  // The preview RPC (the dialog's list): the directory with why, and the two files it held.
  assert.equal(out.preview.ok, true, JSON.stringify(out.preview))
  const nc = Object.fromEntries(out.preview.value.notCovered.map(n => [n.path, n.reason]))
  assert.deepEqual(Object.keys(nc).sort(), ['src', 'src/a.txt', 'src/b.txt'], JSON.stringify(nc))
  assert.match(nc.src, /unreadable directory: .*Permission denied.*2 file\(s\) in it/)
  assert.match(nc['src/a.txt'], /not checked: its directory `src` cannot be read/)
  // The command's preview and the rewind's report, under the not-covered heading.
  const section = /Not covered by [^\n]*\(3\):\n- src: unreadable directory[^\n]*Permission denied[^\n]*\n- src\/a\.txt: not checked[^\n]*\n- src\/b\.txt: not checked/
  assert.match(out.previewText, section)
  assert.equal(out.result.kind, 'success', out.result.text)
  assert.match(out.result.text, section)
  // The history entry names them (as paths it left).
  const entry = out.history[0]
  assert.ok(['src', 'src/a.txt', 'src/b.txt'].every(p => JSON.stringify(entry).includes(JSON.stringify(p))), JSON.stringify(entry))
})

test('a rewind into a directory made unreadable since names the file it could not restore; the rest comes back', async (t) => {
  const out = inChild(t, `
const host = await bootWithPlugin({ shell: true, script: [
  turn(text('one done')),
  turn(bash('echo a2 > src/a.txt && echo o2 > open.txt'), text('two done')),
  turn(bash('chmod 000 src'), text('three done')),
] })
try {
  await put(join(host.workspace, 'src/a.txt'), 'a1\\n')
  await put(join(host.workspace, 'open.txt'), 'o1\\n')
  const agent = await host.createAgent('s')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  const target = humanSeq(agent, 'two')
  ${REWIND_STEPS}
} finally {
  await chmod(join(host.workspace, 'src'), 0o755).catch(() => {})
  out.a = await readFile(join(host.workspace, 'src/a.txt'), 'utf8').catch(e => e.code)
  out.open = await readFile(join(host.workspace, 'open.txt'), 'utf8').catch(e => e.code)
  await host.dispose()
}
`)
  if (out === undefined) return
  // The preview warns first: the file in the unreadable directory cannot be read.
  assert.equal(out.preview.ok, true, JSON.stringify(out.preview))
  assert.deepEqual(out.preview.value.unreadable.map(u => u.path), ['src/a.txt'])
  assert.match(out.preview.value.unreadable[0].message, /Permission denied/)
  assert.match(out.previewText, /Cannot be read, so not restored \(1\):\n- src\/a\.txt: .*Permission denied/)
  // The rewind: that file fails alone, named with why; the rest comes back.
  assert.equal(out.result.kind, 'success', out.result.text)
  assert.match(out.result.text, /Failed \(1\):\n- src\/a\.txt: [^\n]*Permission denied/)
  assert.match(out.result.text, /Written \(1\):\n- open\.txt/)
  assert.equal(out.history[0].outcome, 'partial', JSON.stringify(out.history[0]))
  assert.equal(out.a, 'a2\n', 'the unreadable file is left as it is')
  assert.equal(out.open, 'o1\n')
})

test('a rewind with the workspace itself unreadable names what it could not restore and what it could not check', async (t) => {
  const out = inChild(t, `
const host = await bootWithPlugin({ shell: true, script: [
  turn(text('one done')),
  turn(bash('echo x2 > x.txt'), text('two done')),
  turn(bash('chmod 000 .'), text('three done')),
] })
try {
  await put(join(host.workspace, 'x.txt'), 'x1\\n')
  await put(join(host.workspace, 'y.txt'), 'y1\\n')
  const agent = await host.createAgent('s')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  const target = humanSeq(agent, 'two')
  ${REWIND_STEPS}
} finally {
  await chmod(host.workspace, 0o755).catch(() => {})
  out.x = await readFile(join(host.workspace, 'x.txt'), 'utf8').catch(e => e.code)
  await host.dispose()
}
`)
  if (out === undefined) return
  assert.equal(out.preview.ok, true, JSON.stringify(out.preview))
  assert.deepEqual(out.preview.value.unreadable.map(u => u.path), ['x.txt'])
  assert.deepEqual(out.preview.value.notCovered.map(n => n.path), ['y.txt'])
  assert.equal(out.result.kind, 'success', out.result.text)
  assert.match(out.result.text, /Failed \(1\):\n- x\.txt: [^\n]*Permission denied/)
  assert.match(out.result.text, /Not covered by [^\n]*\(1\):\n- y\.txt: not checked: the workspace directory cannot be read/)
  assert.equal(out.history[0].outcome, 'failed', JSON.stringify(out.history[0]))
  assert.equal(out.x, 'x2\n', 'left as it is')
})

test('a file restored while over the per-file cap is listed as restored, not also as not covered', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    config: { maxFileBytes: 300 },
    script: [
      turn(text('one done')),
      turn(bash("head -c 1000 /dev/zero | tr '\\\\0' x > big.txt && head -c 1000 /dev/zero > other.bin"), text('two done')),
      turn(text('three done')),
    ],
  })
  t.after(() => host.dispose())
  await put(join(host.workspace, 'big.txt'), 'small\n')
  const agent = await host.createAgent('s')
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  const target = humanSeq(agent, 'two')
  const preview = (await rpc(host, 'preview', { sessionId: 's', seq: target })).json
  assert.equal(preview.ok, true, JSON.stringify(preview))
  assert.deepEqual(preview.value.files.map(f => f.path).sort(), ['big.txt', 'other.bin'])
  assert.deepEqual(preview.value.notCovered.map(n => n.path), [], JSON.stringify(preview.value.notCovered))
  const { result } = await host.runCommand(agent, `/rewind @${target}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Written \(1\):\n- big\.txt/)
  assert.doesNotMatch(result.text, /Not covered/)
  assert.equal(await readFile(join(host.workspace, 'big.txt'), 'utf8'), 'small\n')
  const history = (await rpc(host, 'history', { sessionId: 's' })).json.value.entries
  assert.ok(!JSON.stringify(history[0]).includes('"skipped":["big.txt"'), JSON.stringify(history[0]))
})
