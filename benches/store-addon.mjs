#!/usr/bin/env node
/**
 * The cost a user pays per write-tool call: the plugin's `capture` before the write and `commit`
 * after it, called through the packed napi addon from Node, for a 16 KiB file, next to Node's own
 * read + write of the same file (fs/promises) measured in the same run, alternated. Repeated with
 * 100, 1,000, 10,000 and 100,000 files already tracked by the session, to record the curve.
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/store-addon.mjs`.
 * Writes target/bench-results/store-addon.md.
 */
import { mkdtemp, mkdir, readFile, writeFile, rm } from 'node:fs/promises'
import { writeFileSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const require = createRequire(import.meta.url)
const { BindingStore } = require(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
const ROUNDS = Number(process.env.STORE_ADDON_ROUNDS ?? 400)
const SIZES = (process.env.STORE_ADDON_TRACKED ?? '100,1000,10000,100000').split(',').map(Number)
const CAP = 8 * 1024 * 1024
const SIZE = 16 * 1024

function content(i) {
  const b = Buffer.alloc(SIZE)
  for (let k = 0; k < SIZE; k++) b[k] = (k * 31) ^ (k >> 7)
  b.writeUInt32LE(i >>> 0, 0)
  return b
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

async function curvePoint(tracked) {
  const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'store-addon-'))
  const cwd = join(base, 'ws')
  const raw = join(base, 'raw')
  await mkdir(cwd)
  await mkdir(raw)
  const store = BindingStore.open(join(base, 'store'))
  const sid = 'bench'
  // Setup: `tracked` small files, tracked through one bulk call.
  for (let d = 0; d * 1000 < tracked; d++) mkdirSync(join(cwd, `t${d}`))
  for (let i = 0; i < tracked; i++) {
    const rel = `t${Math.floor(i / 1000)}/f${i}`
    writeFileSync(join(cwd, rel), `tracked ${i}`)
    await store.capture(sid, cwd, 'bulk', rel, CAP)
  }
  await store.commit(sid, cwd, 'bulk', 1, true)
  await store.recheck(sid, cwd, 2, CAP)
  execFileSync('sync') // write back the setup's dirty data before measuring
  const contents = Array.from({ length: 8 }, (_, i) => content(i + 1))
  writeFileSync(join(cwd, 'w'), content(0))
  writeFileSync(join(raw, 'w'), content(0))
  const sub = []
  const bas = []
  for (let i = 0; i < ROUNDS + 20; i++) {
    const next = contents[i % contents.length]
    const call = `w${i}`
    let t = performance.now()
    await store.capture(sid, cwd, call, 'w', CAP)
    const capture = performance.now() - t
    writeFileSync(join(cwd, 'w'), next) // the tool's own write, not the plugin's cost
    t = performance.now()
    await store.commit(sid, cwd, call, 3 + Math.floor(i / 20), true)
    const commit = performance.now() - t
    t = performance.now()
    const bytes = await readFile(join(raw, 'w'))
    await writeFile(join(raw, 'w'), next)
    const baseline = performance.now() - t
    if (bytes.length !== SIZE) throw new Error('baseline read')
    if (i >= 20) {
      sub.push(capture + commit)
      bas.push(baseline)
    }
  }
  await rm(base, { recursive: true, force: true })
  return { tracked, subject: median(sub) * 1000, baseline: median(bas) * 1000 }
}

const rows = []
for (const n of SIZES) {
  const r = await curvePoint(n)
  console.log(`tool call 16 KiB at ${n} tracked: ${r.subject.toFixed(1)} µs vs read + write ${r.baseline.toFixed(1)} µs`)
  rows.push(r)
}
const us = (x) => `${x.toFixed(1)} µs`
const lines = [
  '## snapshot-store through the addon (Node)',
  '',
  `One write-tool call as the plugin makes it: \`capture\` before the write + \`commit\` after it, through the napi addon from Node ${process.version}, 16 KiB file, its content changed on every call (cycling through 8 contents, so after the first calls the capture finds its blob already stored); baseline: Node's own \`readFile\` + \`writeFile\` of the same size (fs/promises), alternated in the same run. Medians of ${ROUNDS} calls. Goals: ≤ 1.5× the baseline and ≤ 100 µs; the same figure within 1.2× from 100 to 100,000 tracked files.`,
  '',
  '| tracked files | capture + commit (median) | Node read + write (median) | ratio | ≤ 1.5× | ≤ 100 µs |',
  '|---:|---:|---:|---:|:-:|:-:|',
]
for (const r of rows) {
  const ratio = r.subject / r.baseline
  lines.push(`| ${r.tracked.toLocaleString('en-US')} | ${us(r.subject)} | ${us(r.baseline)} | ${ratio.toFixed(2)}× | ${ratio <= 1.5 ? 'yes' : '**no**'} | ${r.subject <= 100 ? 'yes' : '**no**'} |`)
}
const s = rows.map((r) => r.subject)
const spread = Math.max(...s) / Math.min(...s)
lines.push('', `Curve max / min: ${spread.toFixed(2)} (goal ≤ 1.2: ${spread <= 1.2 ? 'met' : '**not met**'}).`, '')
const out = join(ROOT, 'target', 'bench-results')
await mkdir(out, { recursive: true })
await writeFile(join(out, 'store-addon.md'), lines.join('\n'))
console.log(`wrote ${join(out, 'store-addon.md')}`)
