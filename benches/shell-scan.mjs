#!/usr/bin/env node
/**
 * What tracking every change costs a user per shell call, inside the real DSH host (0.1.0-rc.8
 * spine with DSH's real `bash` tool, scripted model), on a 20,000-file workspace:
 *
 *   1. a turn of 10 `bash` calls (`true`) with the plugin (a scan before and after each call) vs
 *      the same turn in a host without the plugin, alternated; the difference per call is the
 *      added cost;
 *   2. one re-scan of the unchanged tree through the addon (`BindingStore.scan`, phase
 *      `boundary`), the unit the goal is stated in: added cost per call ≤ 2 re-scans;
 *   3. the first scan of the tree (the baseline: every file hashed and stored) vs copying the
 *      same files with Node (`fs.cpSync`), each on a fresh store / fresh target.
 *
 * Run with Node 24: `node benches/shell-scan.mjs` (after `node scripts/build-package.mjs`).
 * Writes target/bench-results/shell.md. Invariant checkers are off (they cost far more than the
 * plugin and would hide it).
 */
import { mkdtemp, mkdir, writeFile, rm } from 'node:fs/promises'
import { cpSync, existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, bash } from '../tests/host/lib/harness.mjs'
import { humanSeq } from '../tests/host/plugin-support.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const ROUNDS = Number(process.env.SHELL_BENCH_ROUNDS ?? 7)
const FILES = Number(process.env.SHELL_BENCH_FILES ?? 20_000)
const CALLS = 10
const Rewind = await import(join(ROOT, 'lib', 'index.js'))
const addon = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(0)} µs`)

/** A tree of `n` files of 96–160 bytes spread over a few hundred directories, 3 levels deep. */
async function makeTree(dir, n) {
  const made = new Set()
  for (let i = 0; i < n; i++) {
    const d = join(dir, `m${i % 7}`, `d${Math.floor(i / 100) % 40}`, `e${Math.floor(i / 4000)}`)
    if (!made.has(d)) {
      await mkdir(d, { recursive: true })
      made.add(d)
    }
    await writeFile(join(d, `f${i}.txt`), `file ${i}\n${'y'.repeat(96 + (i % 64))}\n`)
  }
}

const ws = await mkdtemp(join(tmpdir(), 'bench-shell-ws-'))
await makeTree(ws, FILES)

let sessions = 0
async function bootHost(withPlugin) {
  const home = await mkdtemp(join(tmpdir(), 'bench-shell-home-'))
  const plugins = withPlugin ? [[Rewind, { dshHome: home }]] : []
  const host = await startHost({ workspace: ws, dshHome: home, plugins, invariants: false, shell: true, script: [] })
  // The first session builds the baseline; measure turns after it.
  const agent = await host.createAgent(`bench-warm-${++sessions}`)
  host.addTurns(turn(bash('true'), text('warm')))
  await host.sendUser(agent, 'warm up')
  return { host, agent }
}

async function shellTurn({ host, agent }) {
  const steps = []
  for (let i = 0; i < CALLS; i++) steps.push(bash('true'))
  host.addTurns(turn(...steps, text('done')))
  const t = performance.now()
  await host.sendUser(agent, `ten shell calls ${++sessions}`)
  return performance.now() - t
}

const withPlugin = await bootHost(true)
const without = await bootHost(false)
const a = []
const b = []
for (let r = 0; r < ROUNDS; r++) {
  b.push(await shellTurn(without))
  a.push(await shellTurn(withPlugin))
}
// Store growth over a 50-turn session: each turn edits 5 files of the tree with `sed -i`.
const du = (dir) => {
  let total = 0
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.isFile()) total += statSync(p).size
    }
  }
  walk(dir)
  return total
}
const storeDir = join(withPlugin.host.dshHome, 'rewind-snapshots')
const storeBefore = du(storeDir)
let changedBytes = 0
for (let turnNo = 0; turnNo < 50; turnNo++) {
  const steps = []
  for (let k = 0; k < 5; k++) {
    const i = (turnNo * 37 + k * 4001) % FILES
    const rel = `m${i % 7}/d${Math.floor(i / 100) % 40}/e${Math.floor(i / 4000)}/f${i}.txt`
    steps.push(bash(`sed -i 's/^file /FILE /' ${rel}`))
    changedBytes += statSync(join(ws, rel)).size
  }
  withPlugin.host.addTurns(turn(...steps, text('edited')))
  await withPlugin.host.sendUser(withPlugin.agent, `edit turn ${turnNo}`)
}
const storeAfter = du(storeDir)
const wsBytes = du(ws)

// At this size, a shell edit and a shell `rm` come back with /rewind (a failure stops the bench).
const relA = 'm1/d0/e0/f1.txt'
const relB = 'm2/d0/e0/f2.txt'
const [oldA, oldB] = [readFileSync(join(ws, relA), 'utf8'), readFileSync(join(ws, relB), 'utf8')]
withPlugin.host.addTurns(turn(bash(`sed -i 's/y/z/g' ${relA}`), bash(`rm ${relB}`), text('changed')))
await withPlugin.host.sendUser(withPlugin.agent, 'edit and remove')
if (readFileSync(join(ws, relA), 'utf8') === oldA || existsSync(join(ws, relB))) throw new Error('the shell calls did not change the files')
const tRewind = performance.now()
const { result: rewound } = await withPlugin.host.runCommand(withPlugin.agent, `/rewind @${humanSeq(withPlugin.agent, 'edit and remove')}`)
const rewindMs = performance.now() - tRewind
const cameBack = rewound.kind === 'success' && readFileSync(join(ws, relA), 'utf8') === oldA && existsSync(join(ws, relB)) && readFileSync(join(ws, relB), 'utf8') === oldB
if (!cameBack) throw new Error(`a shell edit and rm at ${FILES} files did not come back: ${rewound.text}`)

await withPlugin.host.dispose()
await without.host.dispose()
const perCall = (median(a) - median(b)) / CALLS

// One re-scan of the unchanged tree through the addon.
const scanHome = await mkdtemp(join(tmpdir(), 'bench-shell-store-'))
const store = addon.BindingStore.open(join(scanHome, 'rewind-snapshots'))
const request = { phase: 'boundary', anchorSeq: 1, maxFileBytes: 8 * 1024 * 1024, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 }
const tBase = performance.now()
await store.scan('bench-scan', ws, request)
const baselineMs = performance.now() - tBase
const rescans = []
for (let r = 0; r < ROUNDS * 2; r++) {
  const t = performance.now()
  await store.scan('bench-scan', ws, request)
  rescans.push(performance.now() - t)
}
const rescan = median(rescans)

// First scan vs a plain copy, each fresh.
const firsts = []
const copies = []
for (let r = 0; r < 3; r++) {
  const dst = await mkdtemp(join(tmpdir(), 'bench-shell-copy-'))
  let t = performance.now()
  cpSync(ws, join(dst, 'copy'), { recursive: true })
  copies.push(performance.now() - t)
  await rm(dst, { recursive: true, force: true })
  const home = await mkdtemp(join(tmpdir(), 'bench-shell-first-'))
  const s = addon.BindingStore.open(join(home, 'rewind-snapshots'))
  t = performance.now()
  await s.scan(`first-${r}`, ws, request)
  firsts.push(performance.now() - t)
  await rm(home, { recursive: true, force: true })
}

const ratio = perCall / rescan
const firstRatio = median(firsts) / median(copies)
const lines = [
  '## Tracking every change: cost per shell call (real host, `bash` tool)',
  '',
  `Workspace: ${FILES.toLocaleString('en')} files (≈ 130 B each). ${ROUNDS} rounds of a ${CALLS}-call \`bash true\` turn, alternated with and without the plugin.`,
  '',
  '| figure | median | goal | met |',
  '|---|---|---|---|',
  `| turn of ${CALLS} shell calls without the plugin | ${fmt(median(b))} | — | — |`,
  `| same turn with the plugin (a scan after each call, and before the first) | ${fmt(median(a))} | — | — |`,
  `| added cost per shell call | ${fmt(perCall)} | ≤ 2 re-scans | ${ratio <= 2 ? 'yes' : 'no'} (${ratio.toFixed(2)} re-scans) |`,
  `| one re-scan of the unchanged tree through the addon | ${fmt(rescan)} | ≤ 30 ms | ${rescan <= 30 ? 'yes' : 'no'} |`,
  `| first scan (baseline) through the addon, first run in this process | ${fmt(baselineMs)} | — | — |`,
  `| first scan on a fresh store vs \`fs.cpSync\` of the tree | ${fmt(median(firsts))} vs ${fmt(median(copies))} | ≤ 1.5× | ${firstRatio <= 1.5 ? 'yes' : 'no'} (${firstRatio.toFixed(2)}×) |`,
  `| a shell edit and a shell \`rm\` come back with \`/rewind\` (the rewind's time) | ${fmt(rewindMs)} | they come back | yes |`,
  '',
  `Store growth over a 50-turn session, each turn editing 5 files with \`sed -i\` (workspace contents: ${(wsBytes / 1048576).toFixed(1)} MiB): the store held ${(storeBefore / 1048576).toFixed(1)} MiB after the baseline and the timed turns, and ${(storeAfter / 1048576).toFixed(1)} MiB after the 50 turns — ${((storeAfter - storeBefore) / 1024).toFixed(0)} KiB more for ${(changedBytes / 1024).toFixed(0)} KiB of edited files (${((storeAfter - storeBefore) / Math.max(1, changedBytes)).toFixed(1)}× what changed, records and new contents included).`,
  '',
]
await mkdir(join(ROOT, 'target', 'bench-results'), { recursive: true })
await writeFile(join(ROOT, 'target', 'bench-results', 'shell.md'), lines.join('\n'))
console.log(lines.join('\n'))
await rm(ws, { recursive: true, force: true })
