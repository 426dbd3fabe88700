/**
 * Shared helpers of the plugin's real-host tests (tests/host/plugin-*.test.mjs): boot the real
 * DSH spine (tests/host/lib/harness.mjs) with the built plugin (lib/index.js + native/ addon),
 * call its RPC route over real HTTP, and read workspace files.
 */
import { readFile, writeFile, mkdir, mkdtemp, readdir, lstat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { existsSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startHost, turn, text, write, read, edit, sre } from './lib/harness.mjs'

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))

/**
 * The built plugin module (lib/index.js with native/ beside it). When the package was never built,
 * builds it once (`node scripts/build-package.mjs --debug`: cargo + esbuild); a stale build is
 * not detected here, so test scripts build first.
 */
export async function loadPlugin() {
  const lib = join(ROOT, 'lib', 'index.js')
  const addon = join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node')
  if (!existsSync(lib) || !existsSync(addon)) {
    const res = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-package.mjs'), '--debug'], { cwd: ROOT, stdio: 'inherit' })
    if (res.status !== 0 || !existsSync(lib) || !existsSync(addon)) {
      throw new Error('the plugin is not built and `node scripts/build-package.mjs --debug` failed')
    }
  }
  return import(lib)
}

/** Boot a host with the plugin (webServer and settings on by default). */
export async function bootWithPlugin({ config = {}, script = [], workspace, dshHome, webServer = true, settings = true, ...rest } = {}) {
  const Rewind = await loadPlugin()
  // The plugin's stores live in the host's DSH home (never the user's ~/.dsh).
  const home = dshHome ?? await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const host = await startHost({ plugins: [[Rewind, { dshHome: home, ...config }]], script, webServer, settings, workspace, dshHome: home, ...rest })
  return host
}

/** POST `/dsh-rewind/api/<endpoint>` on the host's real web server. */
export async function rpc(host, endpoint, body, { headers = {} } = {}) {
  const res = await fetch(`${host.baseUrl}/dsh-rewind/api/${endpoint}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text) }
}

/**
 * Resolves once the plugin's queued work for the agent's session has run (the re-check and
 * scan of its latest message run after the turn starts, in the session's queue; the scripted
 * model's turn can end before they do). An edit made by hand "after the turn" then lands after
 * them, as it does with a real model's turn.
 */
export async function pluginSettled(host, agent) {
  const r = await rpc(host, 'restores', { sessionId: agent.id ?? agent.session.header.id })
  if (r.status !== 200 || r.json?.ok !== true) throw new Error(`restores: ${r.status} ${JSON.stringify(r.json)}`)
}

/** File bytes, or `null` when absent. */
export async function bytes(path) {
  try {
    return await readFile(path)
  } catch (error) {
    if (error.code === 'ENOENT') return null
    throw error
  }
}

/** Snapshot of several workspace files: name → Buffer | null. */
export async function snapshot(workspace, names) {
  const out = {}
  for (const name of names) out[name] = await bytes(join(workspace, name))
  return out
}

/**
 * Every entry under `dir`, `.git` left out: a file as its executable bit and its bytes
 * (base64), a directory as `'dir'` under its path with a trailing `/` (left out with
 * `{ dirs: false }`).
 */
export async function tree(dir, { dirs = true } = {}) {
  const out = {}
  async function walk(rel) {
    for (const name of (await readdir(join(dir, rel))).sort()) {
      if (name === '.git') continue
      const r = rel === '' ? name : `${rel}/${name}`
      const st = await lstat(join(dir, r))
      if (st.isDirectory()) {
        if (dirs) out[`${r}/`] = 'dir'
        await walk(r)
      } else {
        out[r] = `${(st.mode & 0o111) !== 0 ? 'x' : '-'} ${(await readFile(join(dir, r))).toString('base64')}`
      }
    }
  }
  await walk('')
  return out
}

/** Write a file (creating parents). */
export async function put(path, content) {
  await mkdir(dirname(path), { recursive: true })
  await writeFile(path, content)
}

/** Text of a content array. */
export function textOf(message) {
  return (message?.content ?? []).filter(b => b.type === 'text').map(b => b.text).join('')
}

/** The seq of the human user/message whose text is `text`. */
export function humanSeq(agent, text) {
  const event = agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user' && textOf(e.data) === text)
  if (event === undefined) throw new Error(`no human message "${text}" in the log`)
  return event.seq
}

/** The index of the human message `text` in a request's messages. */
export function humanIndex(messages, text) {
  return messages.findIndex(m => m.role === 'user' && m.source?.kind === 'user' && textOf(m) === text)
}

export const BINARY = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
export const BIG = `BIG\n${'x'.repeat(400)}\n`
export const FILES = ['notes.txt', 'sre.txt', 'data.bin', 'new.txt', 'big.txt', 'keep.txt']

/** Three human turns with every covered tool route, external edits between them. */
export async function threeTurnSession(options = {}) {
  const host = await bootWithPlugin({
    config: { maxFileBytes: 300, ...options.config },
    script: [
      turn(write('notes.txt', 'v1\n'), sre.create('sre.txt', 'alpha\n'), write('data.bin', 'text0\n'), text('turn one done')),
      turn(
        read('notes.txt'), edit('notes.txt', 'v1', 'v2'),
        sre.strReplace('sre.txt', 'alpha', 'beta'), sre.insert('sre.txt', 1, 'gamma'),
        write('new.txt', 'created later\n'),
        read('big.txt'), edit('big.txt', 'BIG', 'HUGE'),
        sre.view('keep.txt'),
        text('turn two done'),
      ),
      turn(read('notes.txt'), edit('notes.txt', 'v2', 'v3'), text('turn three done')),
      ...(options.extraTurns ?? []),
    ],
    ...options.host,
  })
  const ws = host.workspace
  await put(join(ws, 'big.txt'), BIG)
  await put(join(ws, 'keep.txt'), 'untouched\n')
  const agent = await host.createAgent(options.sessionId ?? 'rewind-session')
  await host.sendUser(agent, 'start')
  await put(join(ws, 'data.bin'), BINARY) // external edit between "start" and "middle"
  const beforeMiddle = await snapshot(ws, FILES)
  await host.sendUser(agent, 'middle')
  await put(join(ws, 'data.bin'), 'external\n') // external edit between "middle" and "last"
  await host.sendUser(agent, 'last')
  const afterLast = await snapshot(ws, FILES)
  return { host, agent, ws, beforeMiddle, afterLast }
}

