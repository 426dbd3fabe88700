#!/usr/bin/env node
/**
 * The rewind of a `git checkout` of many paths, inside the real DSH host (0.1.0-rc.8 spine, DSH's
 * real `bash` tool, scripted model), against git's own `git checkout` of the same change.
 *
 * A generated repository: `GIT_REWIND_FILES` files (default 4,000) on `main`, tag `old` where
 * `GIT_REWIND_CHANGED` of them (default 2,000) hold other bytes, 20 exist only at `old` and 20
 * only at `main`. Per round, a fresh DSH home and session on that workspace (HEAD on `main`):
 *
 *   1. the agent's turn runs `git checkout -q old` (the real `bash` tool; the scans around it
 *      record the files and the repository);
 *   2. `/rewind @<turn>`, timed: every changed file back, the 20 files `old` added deleted, the
 *      20 it removed written, HEAD back on `main`, the index back (the host's whole command:
 *      its boundary scan, the plan, the restore, the git step, the report);
 *   3. `git checkout -q old` (untimed), then `git checkout -q main`, timed: git's own checkout
 *      of the same change (files, index, HEAD); three times, the median kept.
 *
 * Each timed step starts after a `sync`. Prints one Markdown row: medians of the rounds and the
 * ratio rewind ÷ git checkout (goal ≤ 1).
 *   GIT_REWIND_ROUNDS=5 node benches/git-checkout-rewind.mjs     (after scripts/build.sh)
 */
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises'
import { tmpdir, loadavg } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { execFileSync, spawnSync } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, bash } from '../tests/host/lib/harness.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const FILES = Number(process.env.GIT_REWIND_FILES ?? 4000)
const CHANGED = Number(process.env.GIT_REWIND_CHANGED ?? 2000)
const ROUNDS = Number(process.env.GIT_REWIND_ROUNDS ?? 5)
const EXTRA = 20

const env = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' }
Object.assign(process.env, env)
const git = (ws, ...args) => execFileSync('git', args, { cwd: ws, encoding: 'utf8', env, maxBuffer: 1 << 28 }).trim()
const settle = () => spawnSync('sync')
const median = xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** The repository: `old` tagged, then `main` with CHANGED files rewritten and EXTRA added / removed. */
async function makeRepo() {
  const ws = await mkdtemp(join(tmpdir(), 'bench-git-ws-'))
  git(ws, 'init', '-q', '-b', 'main')
  const body = (i, v) => `// file ${i}, version ${v}\n${'x'.repeat(200 + (i % 800))}\n`
  for (let i = 0; i < FILES; i++) {
    await mkdir(join(ws, `src/d${i % 40}`), { recursive: true })
    await writeFile(join(ws, `src/d${i % 40}/f${i}.txt`), body(i, 1))
  }
  for (let i = 0; i < EXTRA; i++) await writeFile(join(ws, `src/old-only-${i}.txt`), body(i, 0))
  git(ws, 'add', '-A')
  git(ws, 'commit', '-qm', 'old')
  git(ws, 'tag', 'old')
  for (let i = 0; i < CHANGED; i++) await writeFile(join(ws, `src/d${i % 40}/f${i}.txt`), body(i, 2))
  for (let i = 0; i < EXTRA; i++) {
    git(ws, 'rm', '-q', `src/old-only-${i}.txt`)
    await writeFile(join(ws, `src/new-only-${i}.txt`), body(i, 3))
  }
  git(ws, 'add', '-A')
  git(ws, 'commit', '-qm', 'main')
  const paths = git(ws, 'diff', '--name-only', 'old', 'main').split('\n').length
  return { ws, paths }
}

async function round(ws) {
  const Rewind = await import(pathToFileURL(join(ROOT, 'lib', 'index.js')).href)
  const home = await mkdtemp(join(tmpdir(), 'bench-git-home-'))
  const host = await startHost({
    workspace: ws, dshHome: home, plugins: [[Rewind, { dshHome: home }]], invariants: false, shell: true,
    script: [turn(bash('git checkout -q old'), text('checked out old'))],
  })
  try {
    const agent = await host.createAgent(`bench-git-${Date.now()}`)
    await host.sendUser(agent, 'check out old')
    await host.flush(agent)
    if (git(ws, 'rev-parse', '--abbrev-ref', 'HEAD') !== 'HEAD') throw new Error('the turn did not check out old')
    const seq = agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user').seq
    settle()
    const t0 = performance.now()
    const r = (await host.runCommand(agent, `/rewind @${seq}`)).result
    const rewindMs = performance.now() - t0
    if (r.kind !== 'success') throw new Error(`the rewind failed: ${r.text.slice(0, 800)}`)
    if (git(ws, 'rev-parse', '--abbrev-ref', 'HEAD') !== 'main' || git(ws, 'status', '--porcelain') !== '') {
      throw new Error(`the rewind did not bring main back clean: ${r.text.slice(0, 800)}`)
    }
    // git's own checkout of the same change, three times (the median of the three).
    const trials = []
    for (let i = 0; i < 3; i++) {
      git(ws, 'checkout', '-q', 'old')
      settle()
      const t1 = performance.now()
      git(ws, 'checkout', '-q', 'main')
      trials.push(performance.now() - t1)
      if (git(ws, 'status', '--porcelain') !== '') throw new Error('git checkout left changes')
    }
    return { rewindMs, gitMs: median(trials) }
  } finally {
    await host.dispose()
  }
}

const { ws, paths } = await makeRepo()
const rows = []
for (let i = 0; i < ROUNDS; i++) rows.push(await round(ws))
const rw = median(rows.map(r => r.rewindMs))
const gc = median(rows.map(r => r.gitMs))
const ms = x => `${x.toFixed(0)} ms`
const when = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
const load = loadavg().map(x => x.toFixed(2)).join(' ')
console.log(`| when (UTC) | load (1/5/15 min) | files | paths changed | rounds | host /rewind | git checkout | rewind ÷ checkout |`)
console.log('|---|---|---|---|---|---|---|---|')
console.log(`| ${when} | ${load} | ${FILES + EXTRA} | ${paths} | ${ROUNDS} | ${ms(rw)} | ${ms(gc)} | ${(rw / gc).toFixed(2)} |`)
console.log(`each round (host / git): ${rows.map(r => `${r.rewindMs.toFixed(0)}/${r.gitMs.toFixed(0)}`).join(', ')}`)
