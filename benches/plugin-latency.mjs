#!/usr/bin/env node
/**
 * The plugin's added latency inside the real DSH host (0.1.0-rc.8 spine, scripted model), each
 * figure next to the same work without the plugin, measured in the same run and alternated:
 *
 *   1. a turn of 20 `write` tool calls (4 KiB each) with the plugin (capture + commit per call,
 *      the message-boundary re-check) vs the same turn in a host without the plugin, each the
 *      first turn of a new session (it also pays the session's first scan, the baseline); then
 *      later turns of one session (20 calls, and 1 call: what a message costs on its own);
 *   2. a 10-call `edit` turn (read + edit of an existing file) likewise;
 *   3. `/rewind` of a 3-turn session that changed 30 files vs a no-op command round trip
 *      (DSH's own `command/run` + `command/done`), which is the floor any command pays.
 *
 * Run with Node 24: `node benches/plugin-latency.mjs` (after `node scripts/build-package.mjs`).
 * Writes target/bench-results/plugin.md. DSH's invariant checkers are off here (they cost far
 * more than the plugin and would hide it); the tests run with them on.
 */
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, write, read, edit, tools } from '../tests/host/lib/harness.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const ROUNDS = Number(process.env.PLUGIN_BENCH_ROUNDS ?? 12)
const CALLS = 20
const Rewind = await import(join(ROOT, 'lib', 'index.js'))

const NoopCommand = {
  name: 'bench-noop',
  inject: ['commands'],
  apply(ctx) {
    ctx.commands.register({ name: 'noop', description: 'no-op', handler: () => ({ kind: 'success', text: 'ok' }) })
  },
}

const content = 'x'.repeat(4095) + '\n'
let sessionCounter = 0

async function boot(withPlugin) {
  const home = await mkdtemp(join(tmpdir(), 'bench-home-'))
  const plugins = [[NoopCommand, {}]]
  if (withPlugin) plugins.push([Rewind, { dshHome: home }])
  return startHost({ dshHome: home, plugins, invariants: false, script: [] })
}

async function freshSession(host) {
  const cwd = await mkdtemp(join(host.workspace, 's-'))
  const agent = await host.createAgent(`bench-${++sessionCounter}`, { cwd })
  return { agent, cwd }
}

async function writeTurn(host) {
  const { agent } = await freshSession(host)
  const steps = []
  for (let i = 0; i < CALLS; i++) steps.push(write(`f${i}.txt`, content))
  host.addTurns(turn(...steps, text('done')))
  const t = performance.now()
  await host.sendUser(agent, 'write files')
  return performance.now() - t
}

/** One host's session for the later turns: warmed up by three turns first. */
const steady = new Map()
async function laterTurn(host, calls) {
  let s = steady.get(host)
  if (s === undefined) {
    s = { ...(await freshSession(host)), turns: 0 }
    steady.set(host, s)
    for (let k = 0; k < 3; k++) await laterTurn(host, calls)
  }
  // Every turn writes files of its own, each with content of its own.
  const steps = []
  const k = ++s.turns
  for (let i = 0; i < calls; i++) steps.push(write(`t${k}/f${i}.txt`, `${k}\n${content}`))
  host.addTurns(turn(...steps, text('done')))
  const t = performance.now()
  await host.sendUser(s.agent, 'write files')
  return performance.now() - t
}

async function editTurn(host) {
  const { agent, cwd } = await freshSession(host)
  const steps = []
  for (let i = 0; i < CALLS / 2; i++) {
    await writeFile(join(cwd, `e${i}.txt`), `line ${i}\n${content}`)
    steps.push(read(`e${i}.txt`), edit(`e${i}.txt`, `line ${i}`, `line ${i} edited`))
  }
  host.addTurns(turn(...steps, text('done')))
  const t = performance.now()
  await host.sendUser(agent, 'edit files')
  return performance.now() - t
}

async function rewindOnce(host, withPlugin) {
  const { agent } = await freshSession(host)
  for (let k = 0; k < 3; k++) {
    const steps = []
    for (let i = 0; i < 10; i++) steps.push(write(`t${k}-${i}.txt`, content))
    host.addTurns(turn(...steps, text(`turn ${k}`)))
    await host.sendUser(agent, `turn ${k}`)
  }
  const first = agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user').seq
  const t = performance.now()
  const r = await host.runCommand(agent, withPlugin ? `/rewind @${first}` : '/noop')
  const ms = performance.now() - t
  if (r.result.kind !== 'success') throw new Error(`bench command failed: ${r.result.text}`)
  if (withPlugin && !/Deleted \(30\)/.test(r.result.text)) throw new Error(`rewind did not delete the 30 files:\n${r.result.text}`)
  return ms
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

async function pair(name, fn) {
  const subject = await boot(true)
  const baseline = await boot(false)
  const a = []
  const b = []
  try {
    await fn(subject, true)
    await fn(baseline, false)
    // The order alternates from round to round: whichever runs second meets what the first
    // left behind (its dirty pages' write-back, a warmer or colder CPU).
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        a.push(await fn(subject, true))
        b.push(await fn(baseline, false))
      } else {
        b.push(await fn(baseline, false))
        a.push(await fn(subject, true))
      }
    }
  } finally {
    await subject.dispose()
    await baseline.dispose()
  }
  const row = { name, subject: median(a), baseline: median(b) }
  console.log(`${name}: ${row.subject.toFixed(2)} ms vs ${row.baseline.toFixed(2)} ms`)
  return row
}

const rows = []
rows.push({ ...(await pair(`turn of ${CALLS} write calls (4 KiB each), a new session's first`, (h) => writeTurn(h))), perCall: CALLS })
steady.clear()
rows.push({ ...(await pair(`later turn of ${CALLS} write calls (4 KiB each) in one session`, (h) => laterTurn(h, CALLS))), perCall: CALLS })
steady.clear()
rows.push({ ...(await pair('later turn of 1 write call in one session', (h) => laterTurn(h, 1))), perCall: 1 })
rows.push({ ...(await pair(`turn of ${CALLS / 2} read + ${CALLS / 2} edit calls`, (h) => editTurn(h))), perCall: CALLS / 2 })
rows.push({ ...(await pair('/rewind of 30 files (3 turns) vs a no-op command', (h, p) => rewindOnce(h, p))), perCall: 1 })

let md_extra = ''
let md = '## Plugin latency inside the real DSH host\n\n'
md += `Real DSH 0.1.0-rc.8 service spine in-process (scripted model, invariant checkers off), Node ${process.version}; `
md += `median of ${ROUNDS} alternated rounds (the order of the two hosts swapped every round); the baseline is the same work in a host without the plugin `
md += '(for the rewind: a no-op command, the floor of any command round trip). `benches/plugin-latency.mjs`.\n\n'
md += '| case | with plugin (median) | without (median) | added | added per write-tool call / rewind |\n|---|---:|---:|---:|---:|\n'
for (const r of rows) {
  const added = r.subject - r.baseline
  md += `| ${r.name} | ${r.subject.toFixed(2)} ms | ${r.baseline.toFixed(2)} ms | ${added.toFixed(2)} ms | ${(added / r.perCall).toFixed(3)} ms |\n`
}
// Where the per-call cost goes: the addon's async calls alone (same machine, same run).
{
  const { createRequire } = await import('node:module')
  const addon = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
  const dir = await mkdtemp(join(tmpdir(), 'bench-addon-'))
  const ws = join(dir, 'ws')
  await mkdir(ws)
  const store = addon.BindingStore.open(join(dir, 'store'))
  const N = 200
  for (let i = 0; i < N; i++) await writeFile(join(ws, `f${i}.txt`), `${i}\n${content}`) // distinct contents: no dedup hits
  const { readFile: rf, writeFile: wf } = await import('node:fs/promises')
  const time = async (fn) => { const t = performance.now(); for (let i = 0; i < N; i++) await fn(i); return (performance.now() - t) / N }
  const capture = await time(i => store.capture('s', ws, `c${i}`, join(ws, `f${i}.txt`), 8 << 20))
  const commit = await time(i => store.commit('s', ws, `c${i}`, 5, true))
  const raw = await time(async i => wf(join(dir, `raw${i}`), await rf(join(ws, `f${i}.txt`))))
  md_extra = `\nPer call inside the addon (${N} calls, distinct 4 KiB files): capture ${capture.toFixed(3)} ms, commit ${commit.toFixed(3)} ms; `
    + `a raw read + write of the same file ${raw.toFixed(3)} ms.\n`
  console.log(md_extra.trim())
}

// The sync planner crossing: planning over a live log of 20,000 events (JSON.stringify of the
// events + the addon's parse, fold and plan) vs JSON.stringify + JSON.parse of the same events.
{
  const { createRequire } = await import('node:module')
  const addon = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
  const events = []
  for (let turnNo = 0; events.length < 20_000; turnNo++) {
    events.push({ type: 'user/message', seq: events.length, time: 1, data: { id: `m${turnNo}`, role: 'user', content: [{ type: 'text', text: `message ${turnNo} ${'x'.repeat(60)}` }], source: { kind: 'user' } }, surfaceOp: 'append' })
    for (let k = 0; k < 4; k++) {
      events.push({ type: 'assistant/message', seq: events.length, time: 1, data: { turn: turnNo + 1, step: k + 1, message: { role: 'assistant', content: [{ type: 'text', text: 'y'.repeat(120) }] } }, surfaceOp: 'append', sourceEventSeqs: [] })
    }
  }
  const target = `@${events[Math.floor(events.length / 2) - (Math.floor(events.length / 2) % 5)].seq}`
  const time = (fn, n = 15) => { fn(); const xs = []; for (let i = 0; i < n; i++) { const t = performance.now(); fn(); xs.push(performance.now() - t) } return median(xs) }
  const plan = time(() => addon.planRewind(JSON.stringify(events), target))
  const raw = time(() => JSON.parse(JSON.stringify(events)))
  const line = `Planning a rewind over a live log of ${events.length} events (stringify + addon parse, fold, plan): ${plan.toFixed(2)} ms; `
    + `JSON.stringify + JSON.parse of the same events: ${raw.toFixed(2)} ms (${(plan / raw).toFixed(2)}×).\n`
  md_extra += line
  console.log(line.trim())
}

const out = join(ROOT, 'target', 'bench-results')
await mkdir(out, { recursive: true })
await writeFile(join(out, 'plugin.md'), md + md_extra)
console.log(`wrote ${join(out, 'plugin.md')}`)
