#!/usr/bin/env node
/**
 * The workspace scans around a shell call on a small workspace, where what a scan costs beyond
 * its walk (its locks, the workspace's lock file, the ignore rules from outside the workspace,
 * the index it keeps) weighs most. With "Track every change" on, the plugin scans the workspace
 * after every tool call that is not a write tool (and before the first of a turn); this bench
 * times a `before` and an `after` scan through the packed addon around a call that changes one
 * file (every other call) or nothing, on workspaces of 30, 300 and 3,000 files (two levels of
 * directories), against Node's own walk of the same tree in the same run (`readdirSync` of every
 * directory and `lstatSync` of every file: the least any scan does), alternated call by call.
 *
 * `SMALL_SCAN_AB`: another build of the addon, alternated with this one call by call (each build
 * on a workspace and store of its own). Run with Node 24 after `scripts/build.sh`:
 * `node benches/small-scan.mjs`; about a minute. `SMALL_SCAN_FILES` (30,300,3000),
 * `SMALL_SCAN_CALLS` (200), `SMALL_SCAN_CHANGED` (files a changing call rewrites, 1), `SMALL_SCAN_NATIVE`. Writes target/bench-results/small-scan.md.
 */
import { lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ROOT, addonBuilds, numbers } from './support/options.mjs'

const BUILDS = addonBuilds('SMALL_SCAN_NATIVE', 'SMALL_SCAN_AB')
const SIZES = numbers('SMALL_SCAN_FILES', '30,300,3000')
const [CALLS] = numbers('SMALL_SCAN_CALLS', '200')
// Files each changing call rewrites (a generated tree's worth, when many).
const [CHANGED] = numbers('SMALL_SCAN_CHANGED', '1')
const WARM = 10
const CAP = 8 * 1024 * 1024
const request = (phase, anchorSeq, callId) => ({ phase, anchorSeq, callId, maxFileBytes: CAP, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 })
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const us = (ms) => `${(ms * 1000).toFixed(1)} µs`

/** A workspace of `files` files (30 a directory, in directories of 10), its baseline scan and the message's. */
async function setUp(build, files) {
  const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'small-scan-'))
  const cwd = join(base, 'ws')
  for (let i = 0; i < files; i++) {
    const dir = join(cwd, `d${Math.floor(i / 300)}`, `e${Math.floor(i / 30) % 10}`)
    if (i % 30 === 0) mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, `f${i}.ts`), `export const v${i} = ${i}\n`)
  }
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise((resolve) => setTimeout(resolve, 100))
  const store = build.BindingStore.open(join(base, 'store'))
  const sid = `small-${files}`
  const r = await store.scan(sid, cwd, request('boundary', 1))
  if (!r.baselineComplete || r.refused) throw new Error(`baseline scan: ${JSON.stringify(r)}`)
  await store.recheck(sid, cwd, 2, CAP)
  await store.scan(sid, cwd, request('boundary', 2))
  return { build, files, base, cwd, store, sid, before: [], same: [], changed: [], node: [] }
}

/** Node's walk of `dir`: every directory listed, every file `lstat`ed. */
function nodeWalk(dir) {
  let n = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) n += nodeWalk(p)
    else {
      lstatSync(p)
      n += 1
    }
  }
  return n
}

/** Call `j` of `p`: the scan before it, the call's change (every other call), the scan after it. */
async function call(p, j) {
  const id = `c${j}`
  let t = performance.now()
  await p.store.scan(p.sid, p.cwd, request('before', 2, id))
  const before = performance.now() - t
  if (j % 2 === 1) {
    for (let k = 0; k < Math.min(CHANGED, p.files); k++) {
      const i = (j * 7 + k) % p.files
      writeFileSync(join(p.cwd, `d${Math.floor(i / 300)}`, `e${Math.floor(i / 30) % 10}`, `f${i}.ts`), `export const v${i} = ${i} // call ${j}\n`)
    }
  }
  t = performance.now()
  const r = await p.store.scan(p.sid, p.cwd, request('after', 2, id))
  const after = performance.now() - t
  if (j % 2 === 1 && r.modified.length !== Math.min(CHANGED, p.files)) throw new Error(`call ${j}: the scan after it found ${JSON.stringify(r.modified)}`)
  t = performance.now()
  const seen = nodeWalk(p.cwd)
  const node = performance.now() - t
  if (seen < p.files) throw new Error('Node walk')
  if (j >= WARM) {
    p.before.push(before)
    ;(j % 2 === 1 ? p.changed : p.same).push(after)
    p.node.push(node)
  }
}

const rows = []
for (const files of SIZES) {
  const ps = []
  for (const build of BUILDS) ps.push(await setUp(build, files))
  for (let j = 0; j < CALLS + WARM; j++) {
    const order = j % 2 === 0 ? ps : [...ps].reverse()
    for (const p of order) await call(p, j)
  }
  for (const p of ps) {
    const row = { build: p.build.name, files, before: median(p.before), same: median(p.same), changed: median(p.changed), node: median(p.node) }
    rows.push(row)
    process.stderr.write(`${files} files, ${row.build}: before ${us(row.before)}, after (nothing changed) ${us(row.same)}, after (one file changed) ${us(row.changed)}, Node's walk ${us(row.node)}\n`)
    await rm(p.base, { recursive: true, force: true })
  }
}

const lines = [
  '## The scans around a shell call on a small workspace',
  '',
  `A \`before\` and an \`after\` scan through the packed addon around a call that changes ${CHANGED === 1 ? 'one file' : `${CHANGED} files`} (every other call) or nothing, ${CALLS} calls per workspace size (medians; the scan after a call, apart for the calls that changed nothing and those that changed a file), alternated call by call with Node's own walk of the same tree (every directory listed, every file \`lstat\`ed).`,
  '',
  `| build | workspace files | scan before | scan after, nothing changed | scan after, ${CHANGED === 1 ? 'one file' : `${CHANGED} files`} changed | Node's walk | scan before: ratio to Node's walk |`,
  '|---|---|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.build} | ${r.files.toLocaleString('en-US')} | ${us(r.before)} | ${us(r.same)} | ${us(r.changed)} | ${us(r.node)} | ${(r.before / r.node).toFixed(2)}× |`),
  '',
]
const text = lines.join('\n')
process.stdout.write(`${text}\n`)
const out = join(ROOT, 'target', 'bench-results')
mkdirSync(out, { recursive: true })
writeFileSync(join(out, 'small-scan.md'), `${text}\n`)
process.stderr.write(`wrote ${join(out, 'small-scan.md')}\n`)
