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
import { mkdir, writeFile } from 'node:fs/promises'
import { fork } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
// 24 pairs: a round's own overhead varies by ±20 % (DSH's fsyncs on a virtual disk), so the
// median of fewer pairs moves by several points from run to run.
const ROUNDS = Number(process.env.BIG_TURN_ROUNDS ?? 24)
const FILES = Number(process.env.BIG_TURN_FILES ?? 5_000)

const quartile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * q))] }
const median = (xs) => quartile(xs, 0.5)
const mean = (xs) => xs.reduce((t, x) => t + x, 0) / xs.length

/**
 * A 95 % confidence interval of `stat` over `xs`: the 2.5th and 97.5th percentiles of `stat`
 * over 10,000 resamples of `xs` (drawn with replacement; a fixed seed, so a run's figures can be
 * computed again from its rounds).
 */
function bootstrap(xs, stat) {
  let seed = 0x9e3779b9
  const rand = () => {
    seed ^= seed << 13; seed >>>= 0
    seed ^= seed >>> 17
    seed ^= seed << 5; seed >>>= 0
    return seed / 0x100000000
  }
  const stats = []
  for (let k = 0; k < 10_000; k++) stats.push(stat(xs.map(() => xs[Math.floor(rand() * xs.length)])))
  return [quartile(stats, 0.025), quartile(stats, 0.975)]
}
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
  return { ask, cpu: [], after: [], withPlugin }
}

/** One round of the host: its turn's time; its CPU time and queued plugin work are kept apart. */
async function bigTurn(h, round) {
  const r = await h.ask({ cmd: 'round', round })
  h.cpu.push(r.cpu)
  if (h.withPlugin) h.after.push(r.after)
  return r.ms
}

const withPlugin = await bootHost(true)
const without = await bootHost(false)
const a = []
const b = []
const pairs = []
for (let r = 0; r < ROUNDS; r++) {
  // A new session every eight rounds: a DSH session keeps every event in memory.
  if (r > 0 && r % 8 === 0) {
    await withPlugin.ask({ cmd: 'session' })
    await without.ask({ cmd: 'session' })
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
// The plugin really recorded the writes: its sessions' record logs hold an entry per file.
const { logBytes } = await withPlugin.ask({ cmd: 'finish' })
await without.ask({ cmd: 'finish' })
if (logBytes < FILES * ROUNDS * 16) throw new Error(`the plugin's record log is too small (${logBytes} bytes) for ${FILES * ROUNDS} captured writes`)
const mA = median(a)
const mB = median(b)
// The headline is the median of the rounds' own overheads (each a with/without pair run back to
// back): DSH's own time for the same turn drifts by seconds over a run, which a pair cancels.
const overhead = median(pairs)
const [lo, hi] = bootstrap(pairs, median)
const [mlo, mhi] = bootstrap(pairs, mean)
const cA = median(withPlugin.cpu)
const cB = median(without.cpu)
const pct = (v) => `${(v * 100).toFixed(1)} %`
const lines = [
  '## One turn writing 5,000 files (real host, `write` tool)',
  '',
  `${FILES} new 1 KiB files (each with content of its own) written by DSH's real \`write\` tool in one model step, ${ROUNDS} rounds alternated between a host with the plugin (each write captured before and committed after; the re-check and the workspace scan at the message) and one without it (the order alternating from round to round, \`sync\` before each turn), each host in a process of its own on a fresh workspace${process.env.BIG_TURN_WORKSPACE_DIR ? ` under \`${process.env.BIG_TURN_WORKSPACE_DIR}\` (the DSH home, with the plugin's store, in the temp directory)` : ''}.`,
  '',
  '| figure | median | goal | met |',
  '|---|---|---|---|',
  `| turn without the plugin | ${fmt(mB)} | — | — |`,
  `| same turn with the plugin | ${fmt(mA)} | — | — |`,
  `| plugin overhead (median of the rounds' pairs) | ${(overhead * 100).toFixed(1)} % (${fmt((overhead * mB) / FILES)} per write) | ≤ 10 % | ${overhead <= 0.1 ? 'yes' : '**no**'} |`,
  `| its 95 % confidence interval (bootstrap over the pairs) | ${pct(lo)} to ${pct(hi)} | upper end ≤ 10 % | ${hi <= 0.1 ? 'yes' : '**no**'} |`,
  `| mean of the rounds' pairs, its 95 % interval | ${pct(mean(pairs))} (${pct(mlo)} to ${pct(mhi)}) | — | — |`,
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
