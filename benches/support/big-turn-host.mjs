/**
 * One host of `benches/big-turn.mjs`, in a process of its own: `with` (the plugin loaded) or
 * `without`. Each host has its own heap, so that neither host's garbage collection runs inside
 * the other's turn (both hosts keep every event of their session in memory). The parent sends
 * `round`, `session` and `finish` messages and gets one reply to each.
 */
import { mkdtemp, writeFile } from 'node:fs/promises'
import { readdirSync, statSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Session as Inspector } from 'node:inspector/promises'
import { startHost, turn, text, write } from '../../tests/host/lib/harness.mjs'
import { pluginSettled, rpc } from '../../tests/host/plugin-support.mjs'

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
const withPlugin = process.argv[2] === 'with'
const FILES = Number(process.argv[3])

// `BIG_TURN_WORKSPACE_DIR`: where the workspaces go (e.g. a tmpfs, to take the noise of DSH's
// own fsyncs out of the figure; the DSH home, with the plugin's store, stays in the temp dir).
const ws = await mkdtemp(join(process.env.BIG_TURN_WORKSPACE_DIR ?? tmpdir(), 'bench-big-ws-'))
const home = await mkdtemp(join(tmpdir(), 'bench-big-home-'))
// Turns with the plugin's backups off write under `off/`, which the workspace scan ignores: the
// next turn's scan finds nothing of them, with nothing deleted (deleting thousands of files
// makes the disk busy for the turns after it).
await writeFile(join(ws, '.ignore'), 'off/\n')
const plugins = withPlugin ? [[await import(join(ROOT, 'lib', 'index.js')), { dshHome: home }]] : []
// The settings service is mounted in both hosts (the `toggle` rounds turn the plugin's backups
// on and off through it).
const host = await startHost({ workspace: ws, dshHome: home, plugins, invariants: false, script: [], webServer: true, settings: true })
let sessions = 0
let agent = null
/** The plugin's `backups` setting as last set (on when the host starts). */
let backupsOn = true

/** A new session, warmed up by one small turn (the plugin's first scan builds its baseline). */
async function newSession() {
  if (agent) await host.disposeAgent(agent)
  agent = await host.createAgent(`bench-big-${withPlugin ? 'with' : 'without'}-${++sessions}`)
  host.addTurns(turn(write(`warm-${sessions}.txt`, 'warm\n'), text('warm')))
  await host.sendUser(agent, 'warm up')
  if (withPlugin) await pluginSettled(host, agent)
}

/**
 * One turn: FILES `write` calls in one model step, each a new 1 KiB file in its own round's
 * directory, with content of its own (no two files, of this round or any other, are the same:
 * the store keeps each of them, as it would a real turn's files).
 *
 * `backups` (the host with the plugin): the plugin's setting for this turn, set through its
 * `settings.update` endpoint before the turn (off: the plugin is loaded but captures, scans and
 * re-checks nothing; the turn writes under `off/`, see above).
 */
async function round(r, { backups = withPlugin, profile = false } = {}) {
  const dir = `${withPlugin && !backups ? 'off/' : ''}r${r}`
  const calls = []
  for (let i = 0; i < FILES; i++) {
    calls.push({ name: 'write', id: `big-${r}-${i}`, args: { file_path: `${dir}/d${i % 50}/f${i}.txt`, content: `file ${r} ${i}\n${'z'.repeat(1000)}\n` } })
  }
  host.addTurns(turn({ kind: 'tools', calls }, text('wrote them')))
  if (withPlugin && backups !== backupsOn) {
    const set = await rpc(host, 'settings.update', { sessionId: agent.session.header.id, patch: { backups } })
    if (set.json?.ok !== true || set.json.value.backups !== backups) throw new Error(`settings.update: ${JSON.stringify(set.json)}`)
    backupsOn = backups
  }
  // Each turn starts with nothing of an earlier turn left to write back (DSH's own writes are
  // fsynced; dirty pages of the turn before would otherwise weigh on whichever host runs next).
  execFileSync('sync')
  const inspector = profile ? await startProfile() : null
  const cpu = process.cpuUsage()
  const t = performance.now()
  await host.sendUser(agent, `write ${FILES} files, round ${r}`)
  const ms = performance.now() - t
  const shares = inspector ? await stopProfile(inspector) : null
  let after = 0
  if (withPlugin) {
    // Whatever plugin work is still queued when the turn ends runs before the other host's turn
    // (so that the two never overlap), and is reported apart.
    const s = performance.now()
    await pluginSettled(host, agent)
    after = performance.now() - s
  }
  const used = process.cpuUsage(cpu)
  // Every file written, or the figure means nothing.
  let n = 0
  for (const d of readdirSync(join(ws, dir))) n += readdirSync(join(ws, dir, d)).length
  if (n !== FILES) throw new Error(`round ${r}: ${n} of ${FILES} files written`)
  return { ms, after, cpu: (used.user + used.system) / 1000, ...shares }
}

/** Starts V8's sampling profiler on this (the host's JavaScript) thread. */
async function startProfile() {
  const inspector = new Inspector()
  inspector.connect()
  await inspector.post('Profiler.enable')
  await inspector.post('Profiler.setSamplingInterval', { interval: 500 })
  await inspector.post('Profiler.start')
  return inspector
}

/**
 * Stops the profiler and splits the thread's sampled time: `pluginMs`, the samples whose stack
 * holds a frame of the plugin's code (`lib/`: its listeners, and the addon's work done on this
 * thread, which the profile puts under the JavaScript frame that called it); `gcMs`, the garbage
 * collector's (whoever allocated); `idleMs`, the thread waiting (on the disk, DSH's own fsyncs);
 * `sampledMs`, all of it.
 */
async function stopProfile(inspector) {
  const { profile } = await inspector.post('Profiler.stop')
  inspector.disconnect()
  const lib = join(ROOT, 'lib') + '/'
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const plugin = new Map()
  const inPlugin = (id) => {
    if (plugin.has(id)) return plugin.get(id)
    const url = nodes.get(id).callFrame.url
    const p = url.startsWith(lib) || url.startsWith(`file://${lib}`) || (parent.has(id) && inPlugin(parent.get(id)))
    plugin.set(id, p)
    return p
  }
  let sampled = 0, mine = 0, gc = 0, idle = 0
  for (let i = 0; i < profile.samples.length; i++) {
    const us = profile.timeDeltas[i] ?? 0
    const node = nodes.get(profile.samples[i])
    sampled += us
    if (node.callFrame.functionName === '(garbage collector)') gc += us
    else if (node.callFrame.functionName === '(idle)') idle += us
    else if (inPlugin(node.id)) mine += us
  }
  return { pluginMs: mine / 1000, gcMs: gc / 1000, idleMs: idle / 1000, sampledMs: sampled / 1000 }
}

/** The bytes of every session's record log (the plugin really recorded the writes). */
function logBytes() {
  const root = join(home, 'rewind-snapshots', 'sessions')
  let n = 0
  for (const id of readdirSync(root)) {
    try {
      n += statSync(join(root, id, 'records.log')).size
    } catch {}
  }
  return n
}

await newSession()
process.on('message', async (m) => {
  try {
    if (m.cmd === 'round') process.send({ ok: true, ...(await round(m.round, m.options)) })
    else if (m.cmd === 'session') process.send({ ok: true, ...(await newSession()) })
    else if (m.cmd === 'finish') {
      const bytes = withPlugin ? logBytes() : 0
      await host.dispose()
      // The parent removes them once every round ran (removing thousands of files leaves the
      // disk busy in the rounds after).
      process.send({ ok: true, logBytes: bytes, dirs: [ws, home] }, () => process.exit(0))
    }
  } catch (error) {
    process.send({ ok: false, error: String(error?.stack ?? error) }, () => process.exit(1))
  }
})
process.send({ ok: true, ready: true })
