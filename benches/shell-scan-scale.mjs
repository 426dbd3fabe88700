#!/usr/bin/env node
/**
 * What a shell call adds at any workspace size: the scan before and the scan after one call
 * through the addon (`BindingStore.scan`, phases `before` / `after`), the call itself editing
 * one file, at 20,000, 150,000 and 1,000,000 files:
 *
 *   watched   the change watcher on (the scans look only at what inotify reported);
 *   full      the watcher off (`DSH_REWIND_WATCH=0`: each scan walks the workspace);
 *   bare      the same edit with no scan at all (the raw baseline: what the call costs anyway).
 *
 * The added cost per call is (watched or full) − bare. Trees are empty files, 1,000 to a
 * directory (so 1,000,000 files take 1,000 inotify watches), made once under
 * $SCALE_BENCH_DIR (default: the temp dir) and reused. Sizes: SCALE_BENCH_SIZES (comma
 * separated), rounds: SCALE_BENCH_ROUNDS (alternated, median reported).
 *
 * SCALE_BENCH_CALLS (default 0): after the rounds, that many watched calls in a row, each
 * timed (scan before + edit + scan after): enough of them take the index's delta past its
 * bound (some 12,500 at 150,000 files), so the worst single call shows whether a call waits
 * for the fold (the whole index written anew). Reported: median, 99th and 99.9th percentile,
 * worst, and how many times the base index file was replaced meanwhile. The calls come back
 * to back, so the call right after the one that crossed the bound waits, at the workspace's
 * lock, for the fold that call left running; SCALE_BENCH_SETTLE_MS (default 0) waits that
 * long (not timed) after a call that left the delta past its bound, as a model's turn leaves
 * time between calls.
 *
 * Run with Node 24 after `scripts/build.sh`. Writes target/bench-results/shell-scale.md.
 */
import { mkdir, writeFile, mkdtemp, rm, readFile } from 'node:fs/promises'
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { tmpdir, loadavg } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const SIZES = (process.env.SCALE_BENCH_SIZES ?? '20000,150000,1000000').split(',').map(Number)
const ROUNDS = Number(process.env.SCALE_BENCH_ROUNDS ?? 15)
const CALLS = Number(process.env.SCALE_BENCH_CALLS ?? 0)
const SETTLE_MS = Number(process.env.SCALE_BENCH_SETTLE_MS ?? 0)
const BASE = process.env.SCALE_BENCH_DIR ?? join(tmpdir(), 'bench-shell-scale')
const PER_DIR = 1000
const addon = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(0)} µs`)

/** A tree of `n` empty files, `PER_DIR` to a directory (made once; a marker says it is whole). */
async function tree(n) {
  const dir = join(BASE, `ws-${n}`)
  const done = join(BASE, `ws-${n}.done`)
  if (existsSync(done)) return dir
  await rm(dir, { recursive: true, force: true })
  for (let d = 0; d * PER_DIR < n; d++) {
    const sub = join(dir, `g${d % 10}`, `d${d}`)
    await mkdir(sub, { recursive: true })
    const jobs = []
    for (let i = d * PER_DIR; i < Math.min(n, (d + 1) * PER_DIR); i++) jobs.push(writeFile(join(sub, `f${i}`), ''))
    await Promise.all(jobs)
  }
  await writeFile(done, '')
  return dir
}

const request = (phase, anchorSeq, callId) => ({
  phase, anchorSeq, callId, maxFileBytes: 8 * 1024 * 1024, maxBaselineBytes: 1024 ** 3, maxFiles: 2_000_000,
})

async function measure(n) {
  const ws = await tree(n)
  const target = join(ws, 'g0', 'd0', 'f0')
  const home = await mkdtemp(join(tmpdir(), 'bench-scale-home-'))
  const store = addon.BindingStore.open(join(home, 'rewind'))
  const sid = `scale-${n}`
  let t = performance.now()
  const base = await store.scan(sid, ws, request('boundary', 1))
  const baselineMs = performance.now() - t
  if (base.refused) throw new Error(`baseline refused: ${base.refused.message}`)
  let seq = 0
  const call = async (scan) => {
    const id = `c${++seq}`
    const t0 = performance.now()
    const modes = []
    if (scan) modes.push((await store.scan(sid, ws, request('before', 1, id))).mode)
    await writeFile(target, `edit ${seq}\n`)
    if (scan) {
      const after = await store.scan(sid, ws, request('after', 1, id))
      modes.push(after.mode)
      if (!after.modified.includes('g0/d0/f0')) throw new Error(`the edit was not seen (${after.mode})`)
    }
    return { ms: performance.now() - t0, modes }
  }
  const out = { n, baselineMs, watched: [], full: [], bare: [], watchedModes: new Set() }
  // One warm call each (the watcher's first scan after the baseline is full).
  await call(true)
  for (let r = 0; r < ROUNDS; r++) {
    delete process.env.DSH_REWIND_WATCH
    const w = await call(true)
    out.watched.push(w.ms)
    w.modes.forEach(m => out.watchedModes.add(m))
    out.bare.push((await call(false)).ms)
    // Full walks are slow at 1,000,000 files: fewer of them.
    if (n < 500_000 || r % 3 === 0) {
      process.env.DSH_REWIND_WATCH = '0'
      out.full.push((await call(true)).ms)
      delete process.env.DSH_REWIND_WATCH
      // The watcher was dropped while off: its first scan again walks in full (not measured).
      await call(true)
    }
  }
  if (CALLS > 0) {
    // The base index file's identity: a new one each time the delta is folded.
    const wsDir = join(home, 'rewind', 'workspaces')
    const baseId = () => {
      const st = statSync(join(wsDir, readdirSync(wsDir)[0], 'index.bin'))
      return `${st.ino}:${st.mtimeMs}:${st.size}`
    }
    // Whether the delta is past its bound: a quarter of the base, 64 KiB to 4 MiB.
    const due = () => {
      const dir = join(wsDir, readdirSync(wsDir)[0])
      const base = statSync(join(dir, 'index.bin')).size
      const delta = existsSync(join(dir, 'index.delta')) ? statSync(join(dir, 'index.delta')).size : 0
      return delta > Math.min(Math.max(Math.floor(base / 4), 64 << 10), 4 << 20)
    }
    let id = baseId()
    out.calls = []
    out.folds = 0
    for (let i = 0; i < CALLS; i++) {
      out.calls.push((await call(true)).ms)
      if (SETTLE_MS > 0 && due()) await new Promise(res => setTimeout(res, SETTLE_MS))
      const now = baseId()
      if (now !== id) { out.folds++; id = now }
    }
  }
  await rm(home, { recursive: true, force: true })
  return out
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))] }

const watches = Number(readFileSync('/proc/sys/fs/inotify/max_user_watches', 'utf8'))
const started = new Date()
const rows = []
const callRows = []
for (const n of SIZES) {
  const r = await measure(n)
  const bare = median(r.bare)
  rows.push(`| ${n.toLocaleString('en')} | ${fmt(r.baselineMs)} | ${fmt(median(r.watched) - bare)} (${[...r.watchedModes].join('/')}) | ${fmt(median(r.full) - bare)} | ${fmt(bare)} |`)
  console.error(rows.at(-1))
  if (r.calls) {
    callRows.push(`| ${n.toLocaleString('en')} | ${r.calls.length} | ${fmt(median(r.calls))} | ${fmt(pct(r.calls, 0.99))} | ${fmt(pct(r.calls, 0.999))} | ${fmt(Math.max(...r.calls))} | ${r.folds} |`)
    console.error(callRows.at(-1))
  }
}
const md = [
  '## Shell call at any workspace size (benches/shell-scan-scale.mjs)',
  '',
  `Run ${started.toISOString()} (load ${loadavg().map(l => l.toFixed(2)).join(' / ')} at the end); ${ROUNDS} rounds, medians;`,
  `empty files, ${PER_DIR} to a directory; max_user_watches ${watches}. Added cost of one shell call`,
  '(scan before + scan after through the addon, minus the bare call) with the change watcher and',
  'with full walks; goals: ≤ 10 ms at 150,000 files, ≤ 20 ms at 1,000,000 with notifications.',
  '',
  '| files | baseline (first scan) | added, watched | added, full walks | bare call |',
  '| ---: | ---: | ---: | ---: | ---: |',
  ...rows,
  '',
  ...(callRows.length ? [
    `${CALLS} watched calls in a row (scan before + edit + scan after, each timed; folds: times the base`,
    `index file was replaced while they ran; ${SETTLE_MS > 0 ? `${SETTLE_MS} ms untimed after a call that left the delta past its bound` : 'back to back'}):`,
    '',
    '| files | calls | median | p99 | p99.9 | worst | folds |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...callRows,
    '',
  ] : []),
].join('\n')
await mkdir(join(ROOT, 'target', 'bench-results'), { recursive: true })
await writeFile(join(ROOT, 'target', 'bench-results', 'shell-scale.md'), md)
console.log(md)
