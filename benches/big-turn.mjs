#!/usr/bin/env node
/**
 * One turn that writes 5,000 files, inside the real DSH host (0.1.0-rc.8 spine, DSH's real `write`
 * tool, scripted model): the same turn in a host with the plugin (every write captured before and
 * committed after, the message-boundary re-check and scan) and in a host without it, alternated,
 * each on a workspace of its own. The goal: the plugin's overhead ≤ 10 % of the turn without it.
 *
 * Run with Node 24: `node benches/big-turn.mjs` (after `node scripts/build-package.mjs`).
 * Writes target/bench-results/big-turn.md. Invariant checkers are off (they cost far more than
 * the plugin and would hide it).
 */
import { mkdtemp, mkdir, writeFile, rm } from 'node:fs/promises'
import { readdirSync, statSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, write } from '../tests/host/lib/harness.mjs'
import { pluginSettled } from '../tests/host/plugin-support.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
// 16 pairs: a round's own overhead varies by ±15 % (DSH's fsyncs on a virtual disk), so the
// median of fewer pairs moves by several points from run to run.
const ROUNDS = Number(process.env.BIG_TURN_ROUNDS ?? 16)
const FILES = Number(process.env.BIG_TURN_FILES ?? 5_000)
const Rewind = await import(join(ROOT, 'lib', 'index.js'))

const quartile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * q))] }
const median = (xs) => quartile(xs, 0.5)
const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`)

let turns = 0
/** A fresh host on a fresh workspace; one warm-up turn (the first scan builds the baseline). */
async function bootHost(withPlugin) {
  const ws = await mkdtemp(join(tmpdir(), 'bench-big-ws-'))
  const home = await mkdtemp(join(tmpdir(), 'bench-big-home-'))
  const plugins = withPlugin ? [[Rewind, { dshHome: home }]] : []
  const host = await startHost({ workspace: ws, dshHome: home, plugins, invariants: false, script: [], webServer: true })
  const agent = await host.createAgent(`bench-big-${++turns}`)
  host.addTurns(turn(write('warm.txt', 'warm\n'), text('warm')))
  await host.sendUser(agent, 'warm up')
  return { host, agent, ws, home, cpu: [], after: [], withPlugin }
}

/**
 * One turn: 5,000 `write` calls in one model step, each a new 1 KiB file in its own round's
 * directory, with content of its own (no two files, of this round or any other, are the same:
 * the store keeps each of them, as it would a real turn's files).
 */
async function bigTurn(h, round) {
  const calls = []
  for (let i = 0; i < FILES; i++) {
    calls.push({ name: 'write', args: { file_path: `r${round}/d${i % 50}/f${i}.txt`, content: `file ${round} ${i}\n${'z'.repeat(1000)}\n` } })
  }
  h.host.addTurns(turn({ kind: 'tools', calls: calls.map((c, i) => ({ ...c, id: `big-${round}-${i}` })) }, text('wrote them')))
  // Each turn starts with nothing of an earlier turn left to write back (DSH's own writes are
  // fsynced; dirty pages of the turn before would otherwise weigh on whichever host runs next).
  execFileSync('sync')
  const cpu = process.cpuUsage()
  const t = performance.now()
  await h.host.sendUser(h.agent, `write ${FILES} files, round ${round}`)
  const ms = performance.now() - t
  if (h.withPlugin) {
    // Whatever plugin work is still queued when the turn ends runs before anything else (so that
    // it never overlaps the other host's turn), and is reported apart.
    const s = performance.now()
    await pluginSettled(h.host, h.agent)
    h.after.push(performance.now() - s)
  }
  const used = process.cpuUsage(cpu)
  h.cpu.push((used.user + used.system) / 1000)
  // Every file written, or the figure means nothing.
  let n = 0
  for (const d of readdirSync(join(h.ws, `r${round}`))) n += readdirSync(join(h.ws, `r${round}`, d)).length
  if (n !== FILES) throw new Error(`round ${round}: ${n} of ${FILES} files written`)
  return ms
}

const withPlugin = await bootHost(true)
const without = await bootHost(false)
const a = []
const b = []
const pairs = []
/**
 * A new session on the same host and workspace, warmed up like the first: a DSH session keeps
 * every event in memory, and eight rounds of 5,000 calls in one session are as many as the heap
 * of one process holding both hosts takes.
 */
async function newSession(h) {
  await h.host.disposeAgent(h.agent)
  h.agent = await h.host.createAgent(`bench-big-${++turns}`)
  h.host.addTurns(turn(write(`warm-${turns}.txt`, 'warm\n'), text('warm')))
  await h.host.sendUser(h.agent, 'warm up')
  if (h.withPlugin) await pluginSettled(h.host, h.agent)
}

for (let r = 0; r < ROUNDS; r++) {
  if (r > 0 && r % 8 === 0) {
    await newSession(withPlugin)
    await newSession(without)
  }
  // The order alternates (without first, then with first), so that neither host always runs
  // right after the other.
  let x, y
  if (r % 2 === 0) {
    y = await bigTurn(without, r)
    x = await bigTurn(withPlugin, r)
  } else {
    x = await bigTurn(withPlugin, r)
    y = await bigTurn(without, r)
  }
  a.push(x)
  b.push(y)
  pairs.push((x - y) / y)
}
// The plugin really recorded the writes: its session's record log holds an entry per file.
const logOf = (home) => {
  const root = join(home, 'rewind-snapshots', 'sessions')
  return readdirSync(root).reduce((n, id) => { try { return n + statSync(join(root, id, 'records.log')).size } catch { return n } }, 0)
}
if (logOf(withPlugin.home) < FILES * ROUNDS * 16) throw new Error(`the plugin's record log is too small (${logOf(withPlugin.home)} bytes) for ${FILES * ROUNDS} captured writes`)
await withPlugin.host.dispose()
await without.host.dispose()
for (const h of [withPlugin, without]) {
  await rm(h.ws, { recursive: true, force: true })
  await rm(h.home, { recursive: true, force: true })
}
const mA = median(a)
const mB = median(b)
// The headline is the median of the rounds' own overheads (each a with/without pair run back to
// back): DSH's own time for the same turn drifts by seconds over a run, which a pair cancels.
const overhead = median(pairs)
const cA = median(withPlugin.cpu)
const cB = median(without.cpu)
const pct = (v) => `${(v * 100).toFixed(1)} %`
const lines = [
  '## One turn writing 5,000 files (real host, `write` tool)',
  '',
  `${FILES} new 1 KiB files (each with content of its own) written by DSH's real \`write\` tool in one model step, ${ROUNDS} rounds alternated between a host with the plugin (each write captured before and committed after; the re-check and the workspace scan at the message) and one without it (the order alternating from round to round, \`sync\` before each turn), each on a fresh workspace.`,
  '',
  '| figure | median | goal | met |',
  '|---|---|---|---|',
  `| turn without the plugin | ${fmt(mB)} | — | — |`,
  `| same turn with the plugin | ${fmt(mA)} | — | — |`,
  `| plugin overhead (median of the rounds' pairs) | ${(overhead * 100).toFixed(1)} % (${fmt((overhead * mB) / FILES)} per write) | ≤ 10 % | ${overhead <= 0.1 ? 'yes' : '**no**'} |`,
  `| the same from the two medians above | ${pct((mA - mB) / mB)} | — | — |`,
  `| the plugin's work still queued when the turn ended | ${fmt(median(withPlugin.after))} | — | — |`,
  `| CPU time of the turn and that work (process, all threads) | ${fmt(cA)} with, ${fmt(cB)} without: ${pct((cA - cB) / cB)} (${fmt((cA - cB) / FILES)} per write) | — | — |`,
  '',
  `Overhead of each round (with / without, run back to back): ${pairs.map(pct).join(', ')}; middle half of the rounds: ${pct(quartile(pairs, 0.25))} to ${pct(quartile(pairs, 0.75))}.`,
  '',
]
console.log(lines.join('\n'))
await mkdir(join(ROOT, 'target', 'bench-results'), { recursive: true })
await writeFile(join(ROOT, 'target', 'bench-results', 'big-turn.md'), lines.join('\n'))
