#!/usr/bin/env node
/**
 * Before-states from git: what the workspace scan's baseline of a clean git checkout costs the
 * snapshot store, against the working tree and against the raw baseline — the same files in a
 * workspace that is no repository, scanned in the same run (every file copied into the store).
 *
 * A repository of generated source-like files (`GIT_BASELINE_FILES`, 5,000 by default, about
 * 6 KiB each) is made with the `git` CLI (`git init`, `add`, `commit`); the same files are
 * written to a plain directory. Each workspace gets its own store and one baseline scan (the
 * addon's `BindingStore.scan`, phase `boundary`), alternated in order over `GIT_BASELINE_ROUNDS`
 * rounds (3) of fresh stores. Reported: the working tree's bytes; the store's content bytes
 * (`blobs/`, `packs/`, `gitrefs/`) and its whole size (every file under the store root, the
 * workspace index and the session's copy of `.git/index` included) after each baseline, and
 * their ratios to the tree; the baseline's wall time (median).
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/git-baseline.mjs`
 * (`GIT_BASELINE_NATIVE`: another build of the addon). Writes
 * target/bench-results/git-baseline.md.
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ROOT, numbers } from './support/options.mjs'

const require = createRequire(import.meta.url)
const NATIVE = process.env.GIT_BASELINE_NATIVE ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node')
const addon = require(NATIVE)
const [FILES] = numbers('GIT_BASELINE_FILES', '5000')
const [ROUNDS] = numbers('GIT_BASELINE_ROUNDS', '3')
const request = (phase, anchorSeq) => ({ phase, anchorSeq, maxFileBytes: 8 * 1024 * 1024, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 })
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const mib = (b) => `${(b / 1048576).toFixed(2)} MiB`
const pct = (a, b) => `${((100 * a) / b).toFixed(2)} %`
const GIT_ENV = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' }
const git = (cwd, ...args) => execFileSync('git', args, { cwd, env: GIT_ENV, stdio: ['ignore', 'pipe', 'inherit'] })

function rng(seed) {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    return x
  }
}

/** About 6 KiB of source-like text. */
function sourceText(i) {
  const r = rng(i * 2654435761 + 7)
  let out = `// file ${i}\n`
  while (out.length < 6000) out += `export const v${r() % 10000} = compute(${r() % 1000}, '${(r() % 1e6).toString(36)}')\n`
  return out
}

const pathOf = (i) => join(`d${Math.floor(i / 500)}`, `e${Math.floor(i / 50) % 10}`, `f${i}.ts`)

function writeTree(dir) {
  let bytes = 0
  for (let i = 0; i < FILES; i++) {
    const p = join(dir, pathOf(i))
    if (i % 50 === 0) mkdirSync(join(p, '..'), { recursive: true })
    const t = sourceText(i)
    bytes += Buffer.byteLength(t)
    writeFileSync(p, t)
  }
  return bytes
}

/** Bytes of every file under `dir` (`skip`: names of directories left out). */
function bytesUnder(dir, skip = []) {
  let total = 0
  let list
  try { list = readdirSync(dir, { withFileTypes: true }) } catch { return 0 }
  for (const e of list) {
    if (skip.includes(e.name)) continue
    const p = join(dir, e.name)
    total += e.isDirectory() ? bytesUnder(p, skip) : statSync(p).size
  }
  return total
}

const base = await mkdtemp(join(tmpdir(), 'git-baseline-'))
try {
  const repo = join(base, 'repo')
  const plain = join(base, 'plain')
  mkdirSync(repo); mkdirSync(plain)
  const tree = writeTree(repo)
  writeTree(plain)
  git(repo, 'init', '-q', '-b', 'main')
  git(repo, 'add', '-A')
  git(repo, 'commit', '-q', '-m', 'generated')
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise((resolve) => setTimeout(resolve, 100))
  const runs = { git: [], plain: [] }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? ['plain', 'git'] : ['git', 'plain']
    for (const kind of order) {
      const cwd = kind === 'git' ? repo : plain
      const root = join(base, `store-${kind}-${round}`)
      const store = addon.BindingStore.open(root)
      const sid = `bench-${kind}-${round}`
      const t0 = performance.now()
      const r = await store.scan(sid, cwd, request('boundary', 1))
      const ms = performance.now() - t0
      if (!r.baselineComplete || r.refused) throw new Error(`baseline: ${JSON.stringify(r)}`)
      await store.flush(sid, cwd)
      const content = bytesUnder(join(root, 'blobs')) + bytesUnder(join(root, 'packs')) + bytesUnder(join(root, 'gitrefs'))
      runs[kind].push({ ms, content, whole: bytesUnder(root) })
    }
  }
  const g = { content: median(runs.git.map((r) => r.content)), whole: median(runs.git.map((r) => r.whole)), ms: median(runs.git.map((r) => r.ms)) }
  const p = { content: median(runs.plain.map((r) => r.content)), whole: median(runs.plain.map((r) => r.whole)), ms: median(runs.plain.map((r) => r.ms)) }
  const md = [
    '## Baseline of a clean git checkout (`benches/git-baseline.mjs`)',
    '',
    `${FILES} generated files of about 6 KiB (${mib(tree)} of working tree), committed with the \`git\` CLI; the raw baseline is the same files in a directory that is no repository. Median of ${ROUNDS} baselines each, alternated, each into a fresh store.`,
    '',
    '| workspace | content in the store (blobs, packs, git references) | ÷ working tree | whole store (indexes included) | ÷ working tree | baseline scan |',
    '|---|---|---|---|---|---|',
    `| clean git checkout | ${mib(g.content)} | ${pct(g.content, tree)} | ${mib(g.whole)} | ${pct(g.whole, tree)} | ${g.ms.toFixed(0)} ms |`,
    `| same files, no repository (raw) | ${mib(p.content)} | ${pct(p.content, tree)} | ${mib(p.whole)} | ${pct(p.whole, tree)} | ${p.ms.toFixed(0)} ms |`,
    '',
    'A shell change of such a file comes back from the repository (loose or packed, deltas resolved): `crates/snapshot-store/tests/it/git_baseline.rs`.',
    '',
  ].join('\n')
  mkdirSync(join(ROOT, 'target', 'bench-results'), { recursive: true })
  writeFileSync(join(ROOT, 'target', 'bench-results', 'git-baseline.md'), md)
  process.stdout.write(md)
} finally {
  await rm(base, { recursive: true, force: true })
}
