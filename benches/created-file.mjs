#!/usr/bin/env node
/**
 * A write-tool call on a file created during the turn by something no scan ran around (a
 * background job, an editor, a tool the plugin does not scan), with "Track every change" on.
 * The message's scan listed the directory and found no such name, so the capture records the
 * path as absent at the message and reads nothing, unless the file is one the scan's index
 * knows under another path (the same inode: moved or linked there since). That question is
 * asked of the index at every such call: this bench measures what it costs as the workspace
 * grows (100, 1,000, 10,000 and 100,000 files), through the packed addon, capture before the
 * write and commit after it, against Node's own read + write of a 16 KiB file in the same run,
 * alternated call by call.
 *
 * Each turn: the message's re-check and scan, then a job writes `CREATED_FILE_PER_TURN` (4) new
 * 16 KiB files, then a write tool edits each of them. A turn's first such call is timed apart
 * from the later ones.
 *
 * `CREATED_FILE_AB`: another build of the addon, alternated with this one turn by turn (each
 * build on a workspace and store of its own). Run with Node 24 after `scripts/build.sh`:
 * `node benches/created-file.mjs`; about 2 minutes. `CREATED_FILE_TURNS` (40),
 * `CREATED_FILE_TRACKED`, `CREATED_FILE_NATIVE`. Writes target/bench-results/created-file.md.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ROOT, addonBuilds, numbers } from './support/options.mjs'
import { callContent } from './support/content.mjs'

const BUILDS = addonBuilds('CREATED_FILE_NATIVE', 'CREATED_FILE_AB')
const SIZES = numbers('CREATED_FILE_TRACKED', '100,1000,10000,100000')
const [TURNS] = numbers('CREATED_FILE_TURNS', '40')
const [PER_TURN] = numbers('CREATED_FILE_PER_TURN', '4')
/** Turns before the measured ones. */
const WARM = 4
const CAP = 8 * 1024 * 1024
const SIZE = 16 * 1024
const content = callContent(SIZE)
const boundary = (anchorSeq) => ({ phase: 'boundary', anchorSeq, maxFileBytes: CAP, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 })
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const us = (ms) => `${(ms * 1000).toFixed(1)} µs`

/** A workspace of `files` small files (1,000 a directory) and its baseline scan, for `build`. */
async function setUp(build, files) {
  const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'created-file-'))
  const cwd = join(base, 'ws')
  const raw = join(base, 'raw')
  mkdirSync(cwd)
  mkdirSync(raw)
  for (let d = 0; d * 1000 < files; d++) mkdirSync(join(cwd, `t${d}`))
  for (let i = 0; i < files; i++) writeFileSync(join(cwd, `t${Math.floor(i / 1000)}/f${i}`), `project file ${i}`)
  // The directory the job writes into, there at every message.
  mkdirSync(join(cwd, 'out'))
  writeFileSync(join(raw, 'w.ts'), content(-1))
  execFileSync('sync')
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise((resolve) => setTimeout(resolve, 100))
  const store = build.BindingStore.open(join(base, 'store'))
  const sid = `created-${files}`
  const r = await store.scan(sid, cwd, boundary(1))
  if (!r.baselineComplete || r.refused) throw new Error(`baseline scan: ${JSON.stringify(r)}`)
  return { build, files, base, cwd, raw, store, sid, first: [], later: [], node: [] }
}

/** Turn `j` of `p`: the message's re-check and scan, the job's files, the write tool's edits. */
async function turn(p, j) {
  const anchor = 2 + j
  await p.store.recheck(p.sid, p.cwd, anchor, CAP)
  await p.store.scan(p.sid, p.cwd, boundary(anchor))
  const names = Array.from({ length: PER_TURN }, (_, k) => `out/j${j}_${k}.ts`)
  for (const [k, name] of names.entries()) writeFileSync(join(p.cwd, name), content(100_000 + j * PER_TURN + k))
  for (const [k, name] of names.entries()) {
    const call = `c${j}_${k}`
    // The calls as the plugin makes them: done on this thread when they need not wait
    // (`undefined`), else a promise.
    let t = performance.now()
    const o = await p.store.captureNow(p.sid, p.cwd, call, name, CAP, anchor)
    const capture = performance.now() - t
    if (o !== undefined && o.kind !== 'captured') throw new Error(`capture of ${name}: ${JSON.stringify(o)}`)
    writeFileSync(join(p.cwd, name), content(j * PER_TURN + k))
    t = performance.now()
    await p.store.commitNow(p.sid, p.cwd, call, anchor, true)
    const call_ = capture + performance.now() - t
    // Node's own read + write of a 16 KiB file, right after.
    t = performance.now()
    const bytes = readFileSync(join(p.raw, 'w.ts'))
    writeFileSync(join(p.raw, 'w.ts'), content(j * PER_TURN + k))
    const node = performance.now() - t
    if (bytes.length !== SIZE) throw new Error('baseline read')
    if (j >= WARM) {
      ;(k === 0 ? p.first : p.later).push(call_)
      p.node.push(node)
    }
  }
}

const rows = []
for (const files of SIZES) {
  const ps = []
  for (const build of BUILDS) ps.push(await setUp(build, files))
  for (let j = 0; j < TURNS + WARM; j++) {
    // The builds take turns going first.
    const order = j % 2 === 0 ? ps : [...ps].reverse()
    for (const p of order) await turn(p, j)
  }
  for (const p of ps) {
    // The calls took the path this bench is about: a rewind to the last turn's message deletes
    // that turn's files (absent at the message), it does not bring back the job's content.
    const last = TURNS + WARM - 1
    await p.store.recheck(p.sid, p.cwd, 2 + last + 1, CAP)
    const { files: planned } = await p.store.preview(p.sid, p.cwd, 2 + last)
    for (let k = 0; k < PER_TURN; k++) {
      const f = planned.find((x) => x.path === `out/j${last}_${k}.ts`)
      if (f?.action !== 'delete') throw new Error(`${p.build.name}, ${files} files: out/j${last}_${k}.ts not taken as created: ${JSON.stringify(f)}`)
    }
    const all = [...p.first, ...p.later]
    const row = { build: p.build.name, files, first: median(p.first), later: median(p.later), all: median(all), node: median(p.node) }
    rows.push(row)
    process.stderr.write(`${files} files, ${row.build}: first ${us(row.first)}, later ${us(row.later)}, all ${us(row.all)}, Node ${us(row.node)}\n`)
    await rm(p.base, { recursive: true, force: true })
  }
}

const lines = [
  '## A write-tool call on a file created during the turn',
  '',
  `A job writes ${PER_TURN} new 16 KiB files into a directory the message's scan listed, then a write tool edits each (capture before the write, commit after it, through the packed addon; "Track every change" on): the capture records each as absent at the message, after asking whether the scan's index knows the file under another path. ${TURNS} turns per workspace size (medians), alternated call by call with Node's own read + write of a 16 KiB file.`,
  '',
  '| build | workspace files | first call of a turn | later call | all calls | Node read + write | all: ratio |',
  '|---|---|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.build} | ${r.files.toLocaleString('en-US')} | ${us(r.first)} | ${us(r.later)} | ${us(r.all)} | ${us(r.node)} | ${(r.all / r.node).toFixed(2)}× |`),
]
for (const b of BUILDS) {
  const mine = rows.filter((r) => r.build === b.name)
  for (const key of ['first', 'all']) {
    const v = mine.map((r) => r[key])
    lines.push('', `Curve, ${b.name}, ${key === 'first' ? 'first call of a turn' : 'all calls'}: ${(Math.max(...v) / Math.min(...v)).toFixed(2)}× (${v.map(us).join(', ')}).`)
  }
}
lines.push('')
const text = lines.join('\n')
process.stdout.write(`${text}\n`)
const out = join(ROOT, 'target', 'bench-results')
mkdirSync(out, { recursive: true })
writeFileSync(join(out, 'created-file.md'), `${text}\n`)
process.stderr.write(`wrote ${join(out, 'created-file.md')}\n`)
