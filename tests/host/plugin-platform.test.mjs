/**
 * A platform without a native binary, on the real host: the built plugin is copied without its
 * `native/` directory (as when npm skipped the platform package, or no binary exists for the
 * platform). DSH still starts with the plugin, the agent still works and writes files, and the
 * plugin's commands and its RPC route (what its page calls) answer with one clear message naming
 * the platform and the package expected.
 *
 * Also here: the command-line tool (`dsh-rewind`, crates/cli) against a live host, which holds
 * every session it opens — the tool refuses to change such a session; and the size quota of
 * `/snapshot-auto-cleanup run --max-size`, which reads sizes through the same store inventory.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { cp, mkdtemp, readdir, readFile, utimes } from 'node:fs/promises'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startHost, turn, text, write, read } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, loadPlugin, rpc } from './plugin-support.mjs'

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
// This machine's target (the tests run on linux-x64-gnu, the only platform built here).
const TARGET = 'linux-x64-gnu'
const PACKAGE = `dsh-prompt-rewind-${TARGET}`

/** The built package without native/: lib/ and package.json in a fresh directory. */
async function packageWithoutBinary() {
  await loadPlugin() // builds the package when it was never built
  const dir = await mkdtemp(join(tmpdir(), 'rewind-nobinary-'))
  await cp(join(ROOT, 'lib'), join(dir, 'lib'), { recursive: true })
  await cp(join(ROOT, 'package.json'), join(dir, 'package.json'))
  assert.ok(!existsSync(join(dir, 'native')))
  return import(join(dir, 'lib', 'index.js'))
}

test('without a native binary DSH starts, the agent works, and every answer names the platform and the package', async (t) => {
  const Plugin = await packageWithoutBinary()
  const home = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const host = await startHost({
    plugins: [[Plugin, { dshHome: home }]],
    script: [turn(write('a.txt', 'one\n'), text('done')), turn(text('ok'))],
    webServer: true,
    settings: true,
    dshHome: home,
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('no-binary')
  // The write tools still work: the plugin's capture stands aside.
  await host.sendUser(agent, 'create a.txt')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'one\n')
  await host.sendUser(agent, 'second')

  const { result } = await host.runCommand(agent, '/rewind 1')
  assert.notEqual(result.kind, 'success', result.text)
  assert.match(result.text, new RegExp(`no native addon for ${TARGET}`))
  assert.match(result.text, new RegExp(`the package ${PACKAGE}`))
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'one\n', 'nothing was touched')

  // The page's calls: capabilities say no history, and history answers with the same message.
  const caps = await rpc(host, 'caps', { sessionId: 'no-binary' })
  assert.equal(caps.status, 200)
  assert.equal(caps.json.value.history, false)
  assert.equal(caps.json.value.fileCheckpointing, false)
  const history = await rpc(host, 'history', { sessionId: 'no-binary' })
  assert.equal(history.json.ok, false)
  assert.equal(history.json.error.code, 'rewind/native-unavailable')
  assert.match(history.json.error.message, new RegExp(`no native addon for ${TARGET}`))
  assert.equal(history.json.error.details.platform, TARGET)
  assert.equal(history.json.error.details.package, PACKAGE)
})

test('with the binary in place the same package loads it (the copy differs only by native/)', async (t) => {
  const Plugin = await loadPlugin()
  const home = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const host = await startHost({ plugins: [[Plugin, { dshHome: home }]], script: [turn(text('ok'))], webServer: true, settings: true, dshHome: home })
  t.after(() => host.dispose())
  await host.createAgent('with-binary')
  const caps = await rpc(host, 'caps', { sessionId: 'with-binary' })
  assert.equal(caps.json.value.history, true)
})

/** The dsh-rewind binary (scripts/test-host.sh builds it), built here when run on its own. */
function cliBinary() {
  if (process.env.DSH_REWIND_CLI) return process.env.DSH_REWIND_CLI
  const target = process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target')
  const res = spawnSync('cargo', ['build', '--quiet', '-p', 'dsh-rewind-cli'], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: target } })
  assert.equal(res.status, 0, 'cargo build -p dsh-rewind-cli')
  return join(target, 'debug', 'dsh-rewind')
}

test('dsh-rewind refuses to change a session the live host holds, and reads it', async (t) => {
  const cli = cliBinary()
  const Plugin = await loadPlugin()
  const home = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const host = await startHost({ plugins: [[Plugin, { dshHome: home }]], script: [turn(write('a.txt', 'one\n'), text('a')), turn(write('a.txt', 'two\n'), text('b'))], webServer: true, settings: true, dshHome: home })
  t.after(() => host.dispose())
  const agent = await host.createAgent('live')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n')
  const seq = humanSeq(agent, 'second')
  await host.flush(agent) // DSH's JSONL persistence batches writes; the tool reads the file
  const run = (...args) => spawnSync(cli, ['--home', home, ...args], { encoding: 'utf8' })

  const sessions = run('--json', 'sessions')
  assert.equal(sessions.status, 0, sessions.stderr)
  const row = JSON.parse(sessions.stdout).sessions.find(s => s.session === 'live')
  assert.equal(row.held, true)
  assert.equal(row.workspace, host.workspace)
  const preview = run('--json', 'preview', 'live', `@${seq}`)
  assert.equal(preview.status, 0, preview.stderr)
  assert.deepEqual(JSON.parse(preview.stdout).plan.actions.map(a => a.path), ['a.txt'])

  const restore = run('restore', 'live', `@${seq}`)
  assert.equal(restore.status, 4, restore.stderr)
  assert.match(restore.stderr, /session `live` is held by a running DSH host/)
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n', 'nothing was changed')
})

async function ageTree(path, days) {
  const when = new Date(Date.now() - days * 86_400_000)
  for (const e of await readdir(path, { withFileTypes: true, recursive: true })) await utimes(join(e.parentPath ?? e.path, e.name), when, when)
  await utimes(path, when, when)
}

test('/snapshot-auto-cleanup run --max-size: the oldest idle sessions go until the store fits; live ones stay', async (t) => {
  const host = await bootWithPlugin({
    // The sizes below are the sessions' own backups: without the workspace scan, whose shared
    // baseline (no session's alone) would also count towards the store's size.
    config: { trackAll: false },
    script: [turn(read('a.txt'), write('a.txt', 'a'.repeat(3000)), text('a')), turn(read('b.txt'), write('b.txt', 'b'.repeat(3000)), text('b')), turn(write('c.txt', 'c\n'), text('c'))],
  })
  t.after(() => host.dispose())
  const { writeFile } = await import('node:fs/promises')
  // Each file exists before its session overwrites it: a 40 KiB backup per session.
  for (const f of ['a.txt', 'b.txt']) await writeFile(join(host.workspace, f), f[0].repeat(40_000))
  const older = await host.createAgent('older')
  await host.sendUser(older, 'write a')
  const newer = await host.createAgent('newer')
  await host.sendUser(newer, 'write b')
  const current = await host.createAgent('current')
  await host.sendUser(current, 'write c')
  await host.disposeAgent(older)
  await host.disposeAgent(newer)
  const sessions = join(host.dshHome, 'rewind-snapshots', 'sessions')
  await ageTree(join(sessions, 'older'), 3) // both idle, within the 30-day cutoff
  await ageTree(join(sessions, 'newer'), 2)
  const dirs = async () => (await readdir(sessions)).filter(d => !d.startsWith('.')).sort()
  assert.deepEqual(await dirs(), ['current', 'newer', 'older'])

  // 60 KiB: removing `older` (about 40 KiB of backup) is enough.
  const dry = await host.runCommand(current, '/snapshot-auto-cleanup run --max-size 60K')
  assert.equal(dry.result.kind, 'success', dry.result.text)
  assert.match(dry.result.text, /^Nothing to remove\.\nSize quota 60\.0 KiB: 1 more session snapshot director\(ies\) would be removed/)
  assert.match(dry.result.text, /\n- older \(/)
  assert.doesNotMatch(dry.result.text, /- newer|- current/)
  assert.deepEqual(await dirs(), ['current', 'newer', 'older'], 'a dry run removes nothing')

  // A budget nothing idle can meet: both idle sessions go, the live one stays, and it says so.
  const all = await host.runCommand(current, '/snapshot-auto-cleanup run --max-size 1 --apply')
  assert.equal(all.result.kind, 'success', all.result.text)
  assert.match(all.result.text, /Size quota 1 B: removed 2 more session snapshot/)
  assert.match(all.result.text, /Still over the size quota/)
  assert.deepEqual(await dirs(), ['current'])

  for (const bad of ['run --max-size', 'run --max-size lots', 'run --current --max-size 1G']) {
    const res = await host.runCommand(current, `/snapshot-auto-cleanup ${bad}`)
    assert.equal(res.result.kind, 'error', bad)
    assert.match(res.result.text, /^Usage: \/snapshot-auto-cleanup/)
  }
})
