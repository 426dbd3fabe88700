#!/usr/bin/env node
/**
 * A compact store: what 20,000 small files (about 3 KiB of source text each) cost the snapshot
 * store after the workspace scan's baseline stored them, before and after a compaction, against
 * their logical size; and what a write-tool call (the plugin's `capture` before the write and
 * `commit` after it, through the packed addon) costs on a store whose baseline is loose and on
 * one whose baseline is packed, alternated call by call in the same run.
 *
 * Two workspaces and stores are built alike (the same files, a baseline scan each); one is then
 * compacted (`BindingCleanup.compact`). Sizes: the logical size is the files' bytes; the store's
 * size on disk is every file's allocated blocks under the store root (`du`'s measure), before and
 * after; the storage figures the plugin shows (`storage`: logical, on disk, ratio) are reported
 * too. The calls then edit files the baseline stored (the first edit of a project file, the most
 * common first call of a session), one on each store in turn, in the opposite order every other
 * round.
 *
 * The compacted store's bytes are broken down by what holds them: the packs, their indexes, the
 * `blobs/` directory itself (its entries' blocks: a directory that held the baseline's 20,000
 * names keeps their blocks on ext4 once they are gone), the loose blobs left, the workspace
 * index (`index.bin`, its spare and its delta), the sessions' files (record logs, `scan.json`) and the rest.
 *
 * The generated files are source-like text: lines of functions, constants, checks and comments
 * built from a small vocabulary, varied identifiers and numbers, and a 32-bit hex word in a
 * quarter of the lines — about as compressible as real source (zstd compresses them to about a
 * fifth to a quarter), never random bytes.
 *
 * `STORE_COMPACT_FILES` (20000), `STORE_COMPACT_CALLS` (300), `STORE_COMPACT_NATIVE` (another
 * build of the addon), `STORE_COMPACT_BEFORE` (a previous build of the addon: a third store is
 * built and compacted by it in the same run, and its calls alternate with the others'),
 * `STORE_COMPACT_TREE` (a directory whose files make the workspace instead
 * of the generated ones, e.g. a checkout of git.git; the calls then edit its files in turn). Run with Node 24 after `scripts/build.sh`, on an idle machine:
 * `node benches/store-compact.mjs`. Writes target/bench-results/store-compact.md.
 */
import { lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ROOT, numbers } from './support/options.mjs'

const require = createRequire(import.meta.url)
const NATIVE = process.env.STORE_COMPACT_NATIVE ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node')
const addon = require(NATIVE)
const BEFORE = process.env.STORE_COMPACT_BEFORE
const before = BEFORE === undefined ? undefined : require(BEFORE)
const [FILES] = numbers('STORE_COMPACT_FILES', '20000')
const [CALLS] = numbers('STORE_COMPACT_CALLS', '300')
const TREE = process.env.STORE_COMPACT_TREE
const CAP = 8 * 1024 * 1024
const request = (phase, anchorSeq) => ({ phase, anchorSeq, maxFileBytes: CAP, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 })
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const p90 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length * 0.9)] }
const us = (ms) => `${(ms * 1000).toFixed(1)} µs`
const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`

/** A deterministic pseudo-random generator (the same files for both workspaces). */
function rng(seed) {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    return x
  }
}

const WORDS = ['value', 'count', 'index', 'result', 'buffer', 'offset', 'length', 'name', 'path', 'entry', 'items', 'state', 'config', 'error', 'handle', 'reader', 'writer', 'token', 'parse', 'render']

/** About 3 KiB of source-like text: lines of identifiers, numbers and punctuation. */
function sourceText(i) {
  const r = rng(i * 2654435761 + 1)
  let out = `// file ${i}\nimport { ${WORDS[r() % 20]}, ${WORDS[r() % 20]} } from './m${r() % 97}'\n\n`
  while (out.length < 3000) {
    const a = WORDS[r() % 20]
    const b = WORDS[r() % 20]
    switch (r() % 4) {
      case 0: out += `export function ${a}${i % 100}_${r() % 1000}(${b}: number): number {\n  return ${b} * ${r() % 100} + ${r() % 10000}\n}\n`; break
      case 1: out += `  const ${a}${r() % 50} = ${b}.${WORDS[r() % 20]}(${r() % 256}, '${WORDS[r() % 20]}')\n`; break
      case 2: out += `  if (${a} > ${r() % 4096}) throw new Error('${b} ${WORDS[r() % 20]} out of range')\n`; break
      default: out += `  // ${a} ${b} ${WORDS[r() % 20]} ${r().toString(16)}\n`
    }
  }
  return out
}

/** Allocated bytes (blocks) and files under `dir`. */
function du(dir) {
  let bytes = 0
  let files = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    const st = lstatSync(p)
    bytes += st.blocks * 512
    if (e.isDirectory()) {
      const sub = du(p)
      bytes += sub.bytes
      files += sub.files
    } else files += 1
  }
  return { bytes, files }
}

/** Allocated bytes of the compacted store `root`, by what holds them. */
function breakdown(root) {
  const b = { packs: 0, packIdx: 0, blobsDir: 0, loose: 0, index: 0, sessions: 0, other: 0 }
  const walk = (dir, rel) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      const r = rel === '' ? e.name : `${rel}/${e.name}`
      const bytes = lstatSync(p).blocks * 512
      if (r === 'blobs') b.blobsDir += bytes
      else if (r.startsWith('blobs/')) b.loose += bytes
      else if (r.startsWith('packs/') && r.endsWith('.idx')) b.packIdx += bytes
      else if (r.startsWith('packs/') && r.endsWith('.pack')) b.packs += bytes
      else if (/^workspaces\/[^/]+\/(\.?index\.bin(\.spare)?|index\.delta)$/.test(r)) b.index += bytes
      else if (r.startsWith('sessions/') && !e.isDirectory()) b.sessions += bytes
      else b.other += bytes
      if (e.isDirectory()) walk(p, r)
    }
  }
  walk(root, '')
  return b
}

async function setUp(name, lib = addon) {
  const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), `store-compact-${name}-`))
  const cwd = join(base, 'ws')
  let logical = 0
  const paths = []
  if (TREE !== undefined) {
    execFileSync('cp', ['-a', TREE, cwd])
    const walk = (dir) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name)
        if (e.isDirectory()) walk(p)
        else if (e.isFile()) {
          logical += lstatSync(p).size
          paths.push(p)
        }
      }
    }
    walk(cwd)
  }
  for (let i = 0; TREE === undefined && i < FILES; i++) {
    const dir = join(cwd, `d${Math.floor(i / 1000)}`, `e${Math.floor(i / 50) % 20}`)
    if (i % 50 === 0) mkdirSync(dir, { recursive: true })
    const text = sourceText(i)
    logical += Buffer.byteLength(text)
    writeFileSync(join(dir, `f${i}.ts`), text)
  }
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise((resolve) => setTimeout(resolve, 100))
  const root = join(base, 'store')
  const store = lib.BindingStore.open(root)
  const sid = `compact-${name}`
  const r = await store.scan(sid, cwd, request('boundary', 1))
  if (!r.baselineComplete || r.refused) throw new Error(`baseline scan: ${JSON.stringify(r)}`)
  await store.flush(sid, cwd)
  const cleanup = lib.BindingCleanup.open(join(base, 'home'), root)
  return { name, base, cwd, root, store, cleanup, sid, logical, paths, times: [], next: 0 }
}

/** One write-tool call on `s`: capture, the tool's write, commit. */
async function call(s, round) {
  const i = s.next++
  const path = TREE !== undefined ? s.paths[i % s.paths.length] : join(s.cwd, `d${Math.floor(i / 1000)}`, `e${Math.floor(i / 50) % 20}`, `f${i}.ts`)
  const id = `call-${round}`
  const t0 = performance.now()
  await s.store.capture(s.sid, s.cwd, id, path, CAP, 2)
  const t1 = performance.now()
  writeFileSync(path, `edited in round ${round}\n`)
  const t2 = performance.now()
  await s.store.commit(s.sid, s.cwd, id, 2, true)
  const t3 = performance.now()
  s.times.push((t1 - t0) + (t3 - t2))
}

const loose = await setUp('loose')
const packed = await setUp('packed')
const beforeDu = du(packed.root)
const t0 = performance.now()
const report = await packed.cleanup.compact()
const compactMs = performance.now() - t0
const afterDu = du(packed.root)
const indexDu = du(join(packed.root, 'workspaces'))
const packDu = du(join(packed.root, 'packs'))
const parts = breakdown(packed.root)
const figures = await packed.cleanup.storage([packed.sid], [packed.cwd], 1)
const looseFigures = await loose.cleanup.storage([loose.sid], [loose.cwd], 1)
let prev
if (before !== undefined) {
  prev = await setUp('previous', before)
  const t = performance.now()
  prev.report = await prev.cleanup.compact()
  prev.compactMs = performance.now() - t
  prev.du = du(prev.root)
  prev.parts = breakdown(prev.root)
}

const stores = prev === undefined ? [loose, packed] : [loose, packed, prev]
for (let round = 0; round < CALLS; round++) {
  const order = round % 2 === 0 ? stores : [...stores].reverse()
  for (const s of order) await call(s, round)
}

const ratio = (b, logical) => (b / logical).toFixed(3)
const partRow = (label, key) =>
  `| ${label} | ${mib(parts[key])} | ${ratio(parts[key], packed.logical)} |` +
  (prev === undefined ? '' : ` ${mib(prev.parts[key])} | ${ratio(prev.parts[key], prev.logical)} |`)

const lines = [
  TREE === undefined ? `## A compact store: ${FILES.toLocaleString('en')} small files, before and after compaction` : `## A compact store: ${TREE}, before and after compaction`,
  '',
  TREE === undefined
    ? `\`benches/store-compact.mjs\`: ${FILES.toLocaleString('en')} files of about 3 KiB of source text (${mib(packed.logical)} logical), stored by the workspace scan's baseline; then one of two such stores compacted. Sizes are allocated blocks under the store root.`
    : `\`STORE_COMPACT_TREE=${TREE} benches/store-compact.mjs\`: ${packed.paths.length.toLocaleString('en')} files (${mib(packed.logical)} logical), stored by the workspace scan's baseline; then one of two such stores compacted. Sizes are allocated blocks under the store root.`,
  '',
  '| | files in the store | on disk | × logical |',
  '|---|---|---|---|',
  `| baseline stored (loose blobs) | ${beforeDu.files.toLocaleString('en')} | ${mib(beforeDu.bytes)} | ${(beforeDu.bytes / packed.logical).toFixed(2)} |`,
  `| after \`compact\` | ${afterDu.files.toLocaleString('en')} | ${mib(afterDu.bytes)} | ${(afterDu.bytes / packed.logical).toFixed(2)} |`,
  '',
  `Of the compacted store, the packs take ${mib(packDu.bytes)} and the workspace scan's index ${mib(indexDu.bytes)}:`,
  '',
  prev === undefined ? '| compacted store: held by | on disk | × logical |' : '| compacted store: held by | this build | × logical | previous build | × logical |',
  prev === undefined ? '|---|---:|---:|' : '|---|---:|---:|---:|---:|',
  partRow('packs (`.pack`)', 'packs'),
  partRow('pack indexes (`.idx`)', 'packIdx'),
  partRow('`blobs/` directory itself', 'blobsDir'),
  partRow('loose blobs left', 'loose'),
  partRow('workspace index and its spare', 'index'),
  partRow('session files (record logs, `scan.json`)', 'sessions'),
  partRow('the rest (directories, `store.json`, locks)', 'other'),
  `| **whole store** | **${mib(afterDu.bytes)}** | **${ratio(afterDu.bytes, packed.logical)}** |` +
    (prev === undefined ? '' : ` **${mib(prev.du.bytes)}** | **${ratio(prev.du.bytes, prev.logical)}** |`),
  '',
  prev === undefined ? '' : `The previous build (\`STORE_COMPACT_BEFORE\`) compacted its store of the same files in ${(prev.compactMs / 1000).toFixed(1)} s (packs of ${mib(prev.report.packBytes)}).`,
  '',
  `The compaction packed ${report.blobsPacked.toLocaleString('en')} blobs (${mib(report.bytesPacked)}) into ${report.packsWritten} pack(s) of ${mib(report.packBytes)} in ${(compactMs / 1000).toFixed(1)} s. The storage view then says: logical ${mib(figures.logicalBytes)}, on disk ${mib(figures.diskBytes)}, ratio ${figures.ratio.toFixed(2)} (the loose store: ${mib(looseFigures.diskBytes)}, ratio ${looseFigures.ratio.toFixed(2)}).`,
  '',
  `A write-tool call (capture + commit, the first edit of a file the baseline stored), ${CALLS} per store, alternated:`,
  '',
  '| store | median | p90 |',
  '|---|---|---|',
  `| baseline loose | ${us(median(loose.times))} | ${us(p90(loose.times))} |`,
  `| baseline packed | ${us(median(packed.times))} | ${us(p90(packed.times))} |`,
  ...(prev === undefined ? [] : [`| baseline packed, previous build | ${us(median(prev.times))} | ${us(p90(prev.times))} |`]),
  '',
]
const text = lines.join('\n')
mkdirSync(join(ROOT, 'target', 'bench-results'), { recursive: true })
writeFileSync(join(ROOT, 'target', 'bench-results', TREE === undefined ? 'store-compact.md' : 'store-compact-tree.md'), text)
process.stdout.write(text + '\n')
await rm(loose.base, { recursive: true, force: true })
await rm(packed.base, { recursive: true, force: true })
if (prev !== undefined) await rm(prev.base, { recursive: true, force: true })
