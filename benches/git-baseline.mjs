#!/usr/bin/env node
/**
 * Before-states from git: what the workspace scan's baseline of a clean git checkout costs the
 * snapshot store, against the working tree and against the raw baseline — the same files in a
 * workspace that is no repository, scanned in the same run (every file copied into the store).
 *
 * A repository of generated source-like files (`GIT_BASELINE_FILES`, 5,000 by default, 6,000 to
 * about 6,050 bytes each) is made with the `git` CLI: the files go into one commit through
 * `git fast-import` (one pack, no loose objects) and `git reset --hard` writes the working tree
 * and a real `.git/index` (so a million files take minutes, not hours). The raw baseline is the
 * same tree with `.git` moved out of it (no second copy on disk). Each workspace gets its own
 * store and one baseline scan (the addon's `BindingStore.scan`, phase `boundary`, the plugin's
 * default budgets: 1 GiB of baseline contents, 1,000,000 files), alternated in order over
 * `GIT_BASELINE_ROUNDS` rounds (3) of fresh stores; the raw baseline's byte budget is
 * `GIT_BASELINE_RAW_BUDGET` (bytes, 1 GiB by default: files past it are reported not covered, as
 * a session would have them). Reported: the working tree's bytes; the store's content bytes
 * (`blobs/`, `packs/`, `gitrefs/`) and its whole size (every file under the store root, the
 * workspace index and the session's copy of `.git/index` included) after each baseline, and
 * their ratios to the tree; the baseline's wall time (median).
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/git-baseline.mjs`
 * (`GIT_BASELINE_NATIVE`: another build of the addon). Writes
 * target/bench-results/git-baseline.md.
 */
import { mkdirSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { execFileSync, spawn } from 'node:child_process'
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
const [RAW_BUDGET] = numbers('GIT_BASELINE_RAW_BUDGET', String(1024 ** 3))
const request = (phase, anchorSeq, maxBaselineBytes = 1024 ** 3) => ({ phase, anchorSeq, maxFileBytes: 8 * 1024 * 1024, maxBaselineBytes, maxFiles: 1_000_000 })
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

/** 6,000 to about 6,050 bytes of source-like text. */
function sourceText(i) {
  const r = rng(i * 2654435761 + 7)
  let out = `// file ${i}\n`
  while (out.length < 6000) out += `export const v${r() % 10000} = compute(${r() % 1000}, '${(r() % 1e6).toString(36)}')\n`
  return out
}

const pathOf = (i) => join(`d${Math.floor(i / 500)}`, `e${Math.floor(i / 50) % 10}`, `f${i}.ts`)

/**
 * Commits the generated files to a new repository at `dir` through `git fast-import` and checks
 * them out with `git reset --hard`; the working tree's bytes.
 */
async function makeRepo(dir) {
  git(dir, 'init', '-q', '-b', 'main')
  const fi = spawn('git', ['fast-import', '--quiet', '--done'], { cwd: dir, env: GIT_ENV, stdio: ['pipe', 'ignore', 'inherit'] })
  const exited = new Promise((resolve, reject) => {
    fi.on('error', reject)
    fi.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`git fast-import exited with ${code}`))))
  })
  const write = (chunk) => (fi.stdin.write(chunk) ? null : new Promise((resolve) => fi.stdin.once('drain', resolve)))
  const msg = 'generated'
  await write(`commit refs/heads/main\ncommitter b <b@b> 1700000000 +0000\ndata ${msg.length}\n${msg}\n`)
  let bytes = 0
  for (let i = 0; i < FILES; i++) {
    const t = Buffer.from(sourceText(i))
    bytes += t.length
    const w = write(Buffer.concat([Buffer.from(`M 100644 inline ${pathOf(i)}\ndata ${t.length}\n`), t, Buffer.from('\n')]))
    if (w) await w
  }
  fi.stdin.end('done\n')
  await exited
  git(dir, 'reset', '-q', '--hard', 'main')
  return bytes
}

/** Bytes of every file under `dir` (`linked`: only of files with more than one hard link). */
function bytesUnder(dir, linked = false) {
  let total = 0
  let list
  try { list = readdirSync(dir, { withFileTypes: true }) } catch { return 0 }
  for (const e of list) {
    const p = join(dir, e.name)
    if (e.isDirectory()) total += bytesUnder(p, linked)
    else {
      const st = statSync(p)
      if (!linked || st.nlink > 1) total += st.size
    }
  }
  return total
}

const base = await mkdtemp(join(tmpdir(), 'git-baseline-'))
try {
  const repo = join(base, 'repo')
  mkdirSync(repo)
  const tg = performance.now()
  const tree = await makeRepo(repo)
  const made = performance.now() - tg
  if (git(repo, 'status', '--porcelain', '--untracked-files=all').length) throw new Error('the generated checkout is not clean')
  const indexBytes = statSync(join(repo, '.git', 'index')).size
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise((resolve) => setTimeout(resolve, 100))
  const runs = { git: [], plain: [] }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? ['plain', 'git'] : ['git', 'plain']
    for (const kind of order) {
      const cwd = repo
      // The raw baseline: the same tree, with the repository moved out of it.
      if (kind === 'plain') renameSync(join(repo, '.git'), join(base, 'git-aside'))
      const root = join(base, `store-${kind}-${round}`)
      try {
        const store = addon.BindingStore.open(root)
        const sid = `bench-${kind}-${round}`
        const t0 = performance.now()
        const r = await store.scan(sid, cwd, request('boundary', 1, kind === 'plain' ? RAW_BUDGET : 1024 ** 3))
        const ms = performance.now() - t0
        if (r.refused || (kind === 'git' && !r.baselineComplete)) throw new Error(`baseline: ${JSON.stringify(r)}`)
        await store.flush(sid, cwd)
        const content = bytesUnder(join(root, 'blobs')) + bytesUnder(join(root, 'packs')) + bytesUnder(join(root, 'gitrefs'))
        const parts = {}
        for (const e of readdirSync(root, { withFileTypes: true })) parts[e.name] = e.isDirectory() ? bytesUnder(join(root, e.name)) : statSync(join(root, e.name)).size
        runs[kind].push({ ms, content, whole: bytesUnder(root), linked: bytesUnder(root, true), uncovered: r.notCovered.length, parts })
        process.stderr.write(`${kind} round ${round}: ${ms.toFixed(0)} ms, not covered ${r.notCovered.length}, hard-linked ${runs[kind].at(-1).linked}, parts ${JSON.stringify(parts)}\n`)
      } finally {
        if (kind === 'plain') renameSync(join(base, 'git-aside'), join(repo, '.git'))
        // One store at a time on disk (a raw baseline of a large tree is big).
        await rm(root, { recursive: true, force: true })
      }
    }
  }
  const g = { content: median(runs.git.map((r) => r.content)), whole: median(runs.git.map((r) => r.whole)), ms: median(runs.git.map((r) => r.ms)) }
  const p = { content: median(runs.plain.map((r) => r.content)), whole: median(runs.plain.map((r) => r.whole)), ms: median(runs.plain.map((r) => r.ms)) }
  const md = [
    '## Baseline of a clean git checkout (`benches/git-baseline.mjs`)',
    '',
    `${FILES} generated files of 6,000 to about 6,050 bytes (${mib(tree)} of working tree), committed with \`git fast-import\` and checked out with \`git reset --hard\` (${(made / 1000).toFixed(0)} s; \`.git/index\` ${mib(indexBytes)}); the raw baseline is the same tree with \`.git\` moved out of it. Median of ${ROUNDS} baselines each, alternated, each into a fresh store; budgets as the plugin's defaults (1 GiB of baseline contents) but the raw baseline's, ${mib(RAW_BUDGET)}.`,
    '',
    '| workspace | content in the store (blobs, packs, git references) | ÷ working tree | whole store (indexes included) | ÷ working tree | baseline scan |',
    '|---|---|---|---|---|---|',
    `| clean git checkout | ${mib(g.content)} | ${pct(g.content, tree)} | ${mib(g.whole)} | ${pct(g.whole, tree)} | ${g.ms.toFixed(0)} ms |`,
    `| same files, no repository (raw) | ${mib(p.content)} | ${pct(p.content, tree)} | ${mib(p.whole)} | ${pct(p.whole, tree)} | ${p.ms.toFixed(0)} ms${runs.plain.some((r) => r.uncovered) ? ` (${runs.plain.at(-1).uncovered} files past the budget not covered)` : ''} |`,
    '',
    `Parts of the clean checkout's store (last round, bytes): ${Object.entries(runs.git.at(-1).parts).map(([k, v]) => `${k} ${v}`).join(', ')}; of the whole, ${runs.git.at(-1).linked} bytes are files with another hard link (the session's \`.git/index\`, linked while git has not replaced it).`,
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
