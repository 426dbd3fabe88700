/**
 * The packed tarball installs with the real DSH CLI (`dsh plugin --profile web add <tgz>`,
 * CLI 0.1.0-rc.8 from scripts/setup-dsh-cli.sh) and its host half loads when `dsh web` boots:
 * the plugin's RPC route answers with its own error envelope and the boot graph serves the
 * client bundle (when the package carries one).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtemp, mkdir, readFile, rm, readdir } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadPlugin } from './plugin-support.mjs'

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))

function run(cmd, args, options = {}) {
  const res = spawnSync(cmd, args, { encoding: 'utf8', timeout: 300_000, ...options })
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${res.status ?? res.signal}):\n${res.stdout}\n${res.stderr}`)
  return res.stdout
}

test('the packed tarball installs with the real DSH CLI and its host half loads at `dsh web` boot', { timeout: 600_000 }, async (t) => {
  await loadPlugin() // the package must be built
  const dsh = run(join(ROOT, 'scripts', 'setup-dsh-cli.sh'), [], { cwd: ROOT }).trim().split('\n').at(-1)
  const dir = await mkdtemp(join(tmpdir(), 'dsh-rewind-install-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const home = join(dir, 'home')
  const ws = join(dir, 'ws')
  await mkdir(home, { recursive: true })
  await mkdir(ws, { recursive: true })

  // npm pack of what is built (prepack would rebuild in release mode; the build is checked above).
  run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir, '--silent'], { cwd: ROOT })
  const tgz = (await readdir(dir)).find(f => f.endsWith('.tgz'))
  assert.ok(tgz, 'npm pack wrote a tarball')
  const listing = run('tar', ['-tzf', join(dir, tgz)])
  assert.match(listing, /package\/native\/dsh-prompt-rewind\.linux-x64-gnu\.node/)
  assert.match(listing, /package\/lib\/index\.js/)
  assert.match(listing, /package\/cordis\.patch\.yml/)

  const env = { ...process.env, DSH_HOME: home }
  run(dsh, ['plugin', '--profile', 'web', 'add', join(dir, tgz)], { env, cwd: ws })
  const profile = JSON.parse(await readFile(join(home, 'profiles', 'web', 'package.json'), 'utf8'))
  assert.ok(profile.dependencies['dsh-prompt-rewind'], JSON.stringify(profile))
  assert.ok(profile.dsh.profile.bundles.includes('dsh-prompt-rewind'), JSON.stringify(profile.dsh))

  const server = spawn(dsh, ['web', '--no-open', '--host', '127.0.0.1', '--port', '0'], { env, cwd: ws, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  server.stdout.on('data', d => { log += d })
  server.stderr.on('data', d => { log += d })
  t.after(async () => {
    try { process.kill(-server.pid, 'SIGTERM') } catch {}
    await new Promise(r => setTimeout(r, 500))
    try { process.kill(-server.pid, 'SIGKILL') } catch {}
  })
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dsh web did not print its URL:\n${log}`)), 60_000)
    const check = () => {
      const m = /dsh web: (http:\/\/127\.0\.0\.1:\d+)/.exec(log)
      if (m) { clearTimeout(timer); resolve(m[1]) }
    }
    server.stdout.on('data', check)
    server.stderr.on('data', check)
    server.on('exit', code => { clearTimeout(timer); reject(new Error(`dsh web exited (${code}):\n${log}`)) })
  })

  // The host half registered its route: the answer is the plugin's own envelope.
  const res = await fetch(`${url}/dsh-rewind/api/caps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sessionId: 'no-such-session' }) })
  assert.equal(res.status, 200)
  assert.deepEqual(await res.json(), { ok: false, error: { code: 'rewind/session-not-found', message: 'no live session "no-such-session"', details: {} } })
  const foreign = await fetch(`${url}/dsh-rewind/api/caps`, { method: 'POST', headers: { origin: 'http://evil.example' }, body: '{}' })
  assert.equal(foreign.status, 403)

  if (existsSync(join(ROOT, 'lib', 'client.js'))) {
    const index = await (await fetch(`${url}/`)).text()
    const m = /\/plugins\/dsh-prompt-rewind\/client\.js\?rev=[\w-]+/.exec(index)
    assert.ok(m, 'the boot graph lists the client bundle')
    assert.equal((await fetch(`${url}${m[0]}`)).status, 200)
  }
  assert.doesNotMatch(log, /dsh-rewind.*(error|failed)/i, log)
})
