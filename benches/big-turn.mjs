#!/usr/bin/env node
/**
 * One turn that writes 5,000 files, inside the real DSH host (0.1.0-rc.8 spine, DSH's real `write`
 * tool, scripted model): the same turn in a host with the plugin (every write captured before and
 * committed after, the message-boundary re-check and scan) and in a host without it, alternated,
 * each on a workspace of its own. The goal: the plugin's overhead ≤ 10 % of the turn without it.
 * Then one host with the plugin, its backups turned on and off from turn to turn: the plugin's
 * cost with the host process's own speed taken out. Then one more pair of hosts whose turns run with
 * V8's sampling profiler on the host's thread: the plugin's own time there (its listeners and the
 * addon's work they do on that thread), the garbage collector's and the host's own, with the
 * plugin and without it — a figure of the plugin's cost that the disk's drift does not reach.
 *
 * Run with Node 24: `node benches/big-turn.mjs` (after `node scripts/build-package.mjs`); about
 * 17 minutes. `BIG_TURN_PAIRS`, `BIG_TURN_ROUNDS_PER_PAIR`, `BIG_TURN_TOGGLE_ROUNDS` and
 * `BIG_TURN_FILES` and `BIG_TURN_PROFILE_ROUNDS` change its size. Writes target/bench-results/big-turn.md (and every round's
 * figures to big-turn.json; `BIG_TURN_KEEP=1` keeps them in benches/results too, for `benches/big-turn-pool.mjs`). Invariant checkers are off (they cost far more than the plugin and
 * would hide it).
 */
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { fork } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bootstrap, mean, median, quartile } from './support/stats.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
// When the run began: the name its rounds are kept under (`BIG_TURN_KEEP=1`).
const STARTED = new Date()
// The host processes: a new pair (one host with the plugin, one without) every
// `BIG_TURN_ROUNDS_PER_PAIR` rounds. A process keeps its own speed over its life (its heap's and
// code's placement, what the machine ran beside it): with one pair for the whole run, every round
// shared that pair's luck, and runs of the same build differed by more than their intervals said.
const PAIRS = Number(process.env.BIG_TURN_PAIRS ?? 8)
const PER_PAIR = Number(process.env.BIG_TURN_ROUNDS_PER_PAIR ?? 3)
const ROUNDS = PAIRS * PER_PAIR
// Rounds of one host with the plugin whose backups are turned on and off (on, off, off, on, ...):
// the same process both ways, so its own speed cancels out.
const TOGGLE = Number(process.env.BIG_TURN_TOGGLE_ROUNDS ?? 12)
const FILES = Number(process.env.BIG_TURN_FILES ?? 5_000)
// Rounds of one more pair of hosts with V8's sampling profiler on the host's thread during the
// turn: where the thread's time goes (the plugin's code, the garbage collector, waiting), a
// figure of the plugin's own cost that the disk's and the machine's drift between two turns do
// not reach.
const PROFILED = Number(process.env.BIG_TURN_PROFILE_ROUNDS ?? 4)

const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`)

/**
 * A host in a process of its own (benches/support/big-turn-host.mjs) on a fresh workspace and
 * DSH home, with one warm-up turn done. Each process has its own heap: with both hosts in one
 * process, a garbage collection of both hosts' sessions landed in whichever turn ran, and moved
 * a round's overhead by tens of percent either way.
 */
async function bootHost(withPlugin) {
  const child = fork(join(ROOT, 'benches', 'support', 'big-turn-host.mjs'), [withPlugin ? 'with' : 'without', String(FILES)], {
    execArgv: ['--max-old-space-size=6144'],
  })
  const replies = []
  const waiting = []
  child.on('message', (m) => (waiting.length ? waiting.shift()(m) : replies.push(m)))
  child.on('exit', (code) => {
    while (waiting.length) waiting.shift()({ ok: false, error: `the ${withPlugin ? 'with' : 'without'} host exited (${code})` })
  })
  const next = () => new Promise((resolve) => (replies.length ? resolve(replies.shift()) : waiting.push(resolve)))
  const ask = async (m) => {
    if (m) child.send(m)
    const r = await next()
    if (!r.ok) throw new Error(r.error)
    return r
  }
  await ask()
  return { ask, withPlugin }
}

/** One round of a host: its turn's time, CPU time and queued plugin work. */
async function bigTurn(h, round, options) {
  const r = await h.ask({ cmd: 'round', round, options })
  return { ms: r.ms, cpu: r.cpu, after: r.after }
}

/** The rounds of one pair of fresh hosts, the order alternating from round to round. */
async function pairRounds(first) {
  const withPlugin = await bootHost(true)
  const without = await bootHost(false)
  const out = []
  for (let k = 0; k < PER_PAIR; k++) {
    const r = first + k
    let x, y
    if (r % 2 === 0) {
      y = await bigTurn(without, r)
      x = await bigTurn(withPlugin, r)
    } else {
      x = await bigTurn(withPlugin, r)
      y = await bigTurn(without, r)
    }
    out.push({ x, y, pair: (x.ms - y.ms) / y.ms })
  }
  // The plugin really recorded the writes: its session's record log holds an entry per file.
  const { logBytes, dirs } = await withPlugin.ask({ cmd: 'finish' })
  leftovers.push(...dirs, ...(await without.ask({ cmd: 'finish' })).dirs)
  if (logBytes < FILES * PER_PAIR * 16) throw new Error(`the plugin's record log is too small (${logBytes} bytes) for ${FILES * PER_PAIR} captured writes`)
  return out
}

// The hosts' workspaces and homes, removed at the end (removing them between rounds would leave
// the disk busy with it in the rounds after).
const leftovers = []
const groups = []
for (let p = 0; p < PAIRS; p++) groups.push(await pairRounds(p * PER_PAIR))
const rounds = groups.flat()
const pairs = rounds.map((o) => o.pair)
const pairGroups = groups.map((g) => g.map((o) => o.pair))
const mA = median(rounds.map((o) => o.x.ms))
const mB = median(rounds.map((o) => o.y.ms))
// The headline is the median of the rounds' own overheads (each a with/without pair run back to
// back): DSH's own time for the same turn drifts by seconds over a run, which a pair cancels.
const overhead = median(pairs)
const [lo, hi] = bootstrap(pairGroups, median)
const [mlo, mhi] = bootstrap(pairGroups, mean)
const cA = median(rounds.map((o) => o.x.cpu))
const cB = median(rounds.map((o) => o.y.cpu))

// The same host process with backups on and off, in blocks of four rounds (on, off, off, on):
// each block's overhead is its two turns with backups against its two without, so a drift of the
// process's speed over the block cancels out.
const toggled = []
if (TOGGLE >= 4) {
  const h = await bootHost(true)
  const block = []
  for (let r = 0; r < TOGGLE; r++) {
    // A new session for every block: DSH keeps every event of a session in memory, and its
    // turns grow slower as the session grows (from 14 s to 27 s over twelve 5,000-file turns).
    if (r > 0 && r % 4 === 0) await h.ask({ cmd: 'session' })
    const on = r % 4 === 0 || r % 4 === 3
    block.push({ on, ...(await bigTurn(h, ROUNDS + r, { backups: on })) })
    if (block.length === 4) {
      const sum = (on) => block.filter((b) => b.on === on).reduce((t, b) => t + b.ms, 0)
      toggled.push({ overhead: (sum(true) - sum(false)) / sum(false), on: block.filter((b) => b.on).map((b) => b.ms), off: block.filter((b) => !b.on).map((b) => b.ms) })
      block.length = 0
    }
  }
  leftovers.push(...(await h.ask({ cmd: 'finish' })).dirs)
}
// The profiled rounds: one pair of fresh hosts, alternated, a new session for every round.
const profiled = []
if (PROFILED > 0) {
  const withPlugin = await bootHost(true)
  const without = await bootHost(false)
  for (let r = 0; r < PROFILED; r++) {
    const n = ROUNDS + TOGGLE + r
    const turnOf = async (h) => {
      if (r > 0) await h.ask({ cmd: 'session' })
      return (await h.ask({ cmd: 'round', round: n, options: { profile: true } }))
    }
    let x, y
    if (r % 2 === 0) {
      x = await turnOf(withPlugin)
      y = await turnOf(without)
    } else {
      y = await turnOf(without)
      x = await turnOf(withPlugin)
    }
    profiled.push({ x, y })
  }
  leftovers.push(...(await withPlugin.ask({ cmd: 'finish' })).dirs, ...(await without.ask({ cmd: 'finish' })).dirs)
}
for (const d of leftovers) await rm(d, { recursive: true, force: true })
const pct = (v) => `${(v * 100).toFixed(1)} %`

/**
 * The profiled rounds' rows: the plugin's time on the host's thread over the rest of the turn
 * (what the turn would take without that time), and the garbage collector's and the host's own
 * busy time with the plugin and without it (an effect of the plugin beyond its own code shows as
 * a difference there).
 */
function profileRows() {
  if (profiled.length === 0) return []
  const m = (f) => median(profiled.map(f))
  const busy = (o) => o.sampledMs - o.idleMs - o.gcMs - o.pluginMs
  const share = m((o) => o.x.pluginMs / (o.x.ms - o.x.pluginMs))
  return [
    `| the plugin's code on the host's thread during the turn (${profiled.length} profiled rounds, median) | ${fmt(m((o) => o.x.pluginMs))} of ${fmt(m((o) => o.x.ms))}: ${pct(share)} of the rest of the turn (${fmt(m((o) => o.x.pluginMs) / FILES)} per write) | ≤ 10 % | ${share <= 0.1 ? 'yes' : '**no**'} |`,
    `| garbage collection on that thread, with / without the plugin | ${fmt(m((o) => o.x.gcMs))} / ${fmt(m((o) => o.y.gcMs))} | — | — |`,
    `| the host's own work on that thread (neither the plugin's, the collector's nor waiting), with / without | ${fmt(m((o) => busy(o.x)))} / ${fmt(m((o) => busy(o.y)))} | — | — |`,
    `| the thread's busy time (all but waiting), with / without: the difference over the turn without | ${fmt(m((o) => o.x.sampledMs - o.x.idleMs))} / ${fmt(m((o) => o.y.sampledMs - o.y.idleMs))}: ${pct(m((o) => (o.x.sampledMs - o.x.idleMs - (o.y.sampledMs - o.y.idleMs)) / o.y.ms))} | — | — |`,
    `| the thread waiting (the disk: DSH's own fsyncs), with / without; the profiled turns, with / without | ${fmt(m((o) => o.x.idleMs))} / ${fmt(m((o) => o.y.idleMs))}; ${fmt(m((o) => o.x.ms))} / ${fmt(m((o) => o.y.ms))} | — | — |`,
  ]
}
const groupLine = groups.map((g, i) => `${i + 1}: ${g.map((o) => pct(o.pair)).join(', ')}`).join('; ')
const lines = [
  '## One turn writing 5,000 files (real host, `write` tool)',
  '',
  `${FILES} new 1 KiB files (each with content of its own) written by DSH's real \`write\` tool in one model step, in ${ROUNDS} rounds alternated between a host with the plugin (each write captured before and committed after; the re-check and the workspace scan at the message) and one without it (the order alternating from round to round, \`sync\` before each turn), each host in a process of its own on a fresh workspace, a new pair of host processes every ${PER_PAIR} rounds (${PAIRS} pairs)${process.env.BIG_TURN_WORKSPACE_DIR ? `, the workspaces under \`${process.env.BIG_TURN_WORKSPACE_DIR}\` (the DSH home, with the plugin's store, in the temp directory)` : ''}.`,
  '',
  '| figure | median | goal | met |',
  '|---|---|---|---|',
  `| turn without the plugin | ${fmt(mB)} | — | — |`,
  `| same turn with the plugin | ${fmt(mA)} | — | — |`,
  `| plugin overhead (median of the rounds' pairs) | ${pct(overhead)} (${fmt((overhead * mB) / FILES)} per write) | ≤ 10 % | ${overhead <= 0.1 ? 'yes' : '**no**'} |`,
  `| its 95 % confidence interval (bootstrap over the host pairs) | ${pct(lo)} to ${pct(hi)} | upper end ≤ 10 % | ${hi <= 0.1 ? 'yes' : '**no**'} |`,
  `| mean of the rounds' pairs, its 95 % interval | ${pct(mean(pairs))} (${pct(mlo)} to ${pct(mhi)}) | — | — |`,
  `| the same from the two medians above | ${pct((mA - mB) / mB)} | — | — |`,
  `| the plugin's work still queued when the turn ended | ${fmt(median(rounds.map((o) => o.x.after)))} | — | — |`,
  `| CPU time of the turn and that work (process, all threads) | ${fmt(cA)} with, ${fmt(cB)} without: ${pct((cA - cB) / cB)} (${fmt((cA - cB) / FILES)} per write) | — | — |`,
  ...(toggled.length === 0 ? [] : [
    `| backups on against off in one host process (median of ${toggled.length} blocks of on, off, off, on; 95 % interval) | ${pct(median(toggled.map((t) => t.overhead)))} (${bootstrap(toggled.map((t) => [t.overhead]), median).map(pct).join(' to ')}) | — | — |`,
  ]),
  ...profileRows(),
  '',
  `Overhead of each round (with / without, run back to back), by host pair: ${groupLine}; middle half of the rounds: ${pct(quartile(pairs, 0.25))} to ${pct(quartile(pairs, 0.75))}.`,
  ...(toggled.length === 0 ? [] : [
    '',
    `One host process with the plugin, its backups turned on and off (the turns with backups off write into a directory the workspace scan ignores, so the next turn's scan finds nothing of them): blocks ${toggled.map((t) => `${pct(t.overhead)} (on ${t.on.map(fmt).join(', ')}; off ${t.off.map(fmt).join(', ')})`).join('; ')}. With backups off the plugin is loaded and its listeners run, but it captures, scans and re-checks nothing.`,
  ]),
  '',
]
console.log(lines.join('\n'))
await mkdir(join(ROOT, 'target', 'bench-results'), { recursive: true })
await writeFile(join(ROOT, 'target', 'bench-results', 'big-turn.md'), lines.join('\n'))
// Every round's figures, for a second look; with `BIG_TURN_KEEP=1` also kept in benches/results,
// where `benches/big-turn-pool.mjs` takes the kept runs together.
const kept = JSON.stringify({ files: FILES, pairs: groups, toggled, profiled }, null, 1)
await writeFile(join(ROOT, 'target', 'bench-results', 'big-turn.json'), kept)
if (process.env.BIG_TURN_KEEP === '1') {
  const stamp = STARTED.toISOString().slice(0, 16).replace(/:/g, '')
  await mkdir(join(ROOT, 'benches', 'results'), { recursive: true })
  await writeFile(join(ROOT, 'benches', 'results', `big-turn-${stamp}.json`), kept)
}
