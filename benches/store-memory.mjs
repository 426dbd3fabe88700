#!/usr/bin/env node
/**
 * What a session's handle keeps in memory as it keeps content: through the packed napi addon
 * from Node, one session captures (before each write-tool call) and commits 1,200 files of 16 KiB,
 * each with content new to the store, which the store keeps in the session's record log; the
 * next message's re-check reads the 1,200 contents the tools wrote into the log too; then the
 * files are written once more and the message after re-checks them again (all within the 64 MiB
 * a log keeps). The process's resident memory is read before and after each part, next to the
 * bytes of content kept. Memory the store frees is used again by what follows, so a part that
 * holds what it keeps adds about that much, and one that frees it adds little once the memory of
 * a part before is there to take (a re-check reads its files into memory before its one write).
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/store-memory.mjs` (`STORE_MEMORY_FILES`:
 * how many files; `STORE_MEMORY_NATIVE`: another build of the addon). Writes
 * target/bench-results/store-memory.md.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { writeFileSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const require = createRequire(import.meta.url)
const { BindingStore } = require(process.env.STORE_MEMORY_NATIVE ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
const N = Number(process.env.STORE_MEMORY_FILES ?? 1200)
const CAP = 8 * 1024 * 1024
const SIZE = 16 * 1024
const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'store-memory-'))
const cwd = join(base, 'ws')
await mkdir(cwd)
mkdirSync(join(cwd, 'src'))
const store = BindingStore.open(join(base, 'store'))
const buf = Buffer.alloc(SIZE, 7)
/** File `i`'s content in version `v`: content of its own. */
function content(i, v) {
  buf.writeInt32LE(i, 0)
  buf.writeInt32LE(v, 4)
  return buf
}
for (let i = 0; i < N; i++) writeFileSync(join(cwd, `src/f${i}`), content(i, 0))
// The handle opened and written once, so that what follows is what keeping content costs.
await store.capture('s', cwd, 'first', 'src/none', CAP, 1)
await store.commit('s', cwd, 'first', 1, true)
const rss = () => process.memoryUsage().rss
const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`
const r0 = rss()
for (let i = 0; i < N; i++) {
  const c = store.captureNow('s', cwd, `c${i}`, `src/f${i}`, CAP, 2)
  if (c) await c
  writeFileSync(join(cwd, `src/f${i}`), content(i, 1)) // the tool's own write
  const m = store.commitNow('s', cwd, `c${i}`, 2, true)
  if (m) await m
}
const r1 = rss()
await store.recheck('s', cwd, 3, CAP) // reads the files the tools wrote into the log
const r2 = rss()
for (let i = 0; i < N; i++) writeFileSync(join(cwd, `src/f${i}`), content(i, 2)) // changed again
await store.recheck('s', cwd, 4, CAP)
const r3 = rss()
const kept = N * SIZE
const lines = [
  '## snapshot-store: memory of a handle keeping content',
  '',
  `One session through the napi addon from Node ${process.version}: ${N.toLocaleString('en-US')} write-tool calls (capture + the tool's write + commit), each on a file of 16 KiB whose content is new to the store (kept in the session's record log); the next message's re-check, which reads the ${N.toLocaleString('en-US')} files the tools wrote into the log too; the files changed again and the next message's re-check. Resident memory of the process before and after each part, next to the content each part kept. Memory freed is used again by the parts after it: a part that holds what it keeps adds about that much, one that frees it adds little once an earlier part's memory is there (a re-check reads its files into memory before its one write).`,
  '',
  '| part | content kept | resident memory added |',
  '|---|---:|---:|',
  `| ${N.toLocaleString('en-US')} captures | ${mib(kept)} | ${mib(r1 - r0)} |`,
  `| the message's re-check | ${mib(kept)} | ${mib(r2 - r1)} |`,
  `| the next message's re-check | ${mib(kept)} | ${mib(r3 - r2)} |`,
  '',
]
console.log(lines.slice(4).join('\n'))
await rm(base, { recursive: true, force: true })
const out = join(ROOT, 'target', 'bench-results')
await mkdir(out, { recursive: true })
await writeFile(join(out, 'store-memory.md'), lines.join('\n'))
console.log(`wrote ${join(out, 'store-memory.md')}`)
