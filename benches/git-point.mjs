#!/usr/bin/env node
/**
 * What recording the repository's git state costs a user per point. Every workspace scan (before
 * and after each tracked tool call, and at each message) also records a git point: HEAD and its
 * branch, the index (stored once under its checksum), the branch and tag tips (loose refs and
 * `packed-refs`, the latter stored once under its digest), an operation in progress and the stash
 * list (see docs/git.md). The goal: ≤ 1 ms per point on a repository the size of git.git.
 *
 * A repository like git.git's shape is generated with the `git` CLI (no network): 4,500 files of
 * about 1 KiB committed on `main`, 200 branches and 100 tags (half of them annotated) packed into
 * `packed-refs`, 20 more branches loose, and one stash entry. The same files are copied to a
 * workspace that is no repository. Each workspace gets its own store and is scanned through the
 * packed addon (`BindingStore.scan`) before and after each of `GIT_POINT_CALLS` calls (300),
 * alternating the two workspaces call by call. Every other call changes one file; in the
 * repository that call also runs `git add` on it (outside the timed scans), so the scan after it
 * finds a new index to store, as after an agent's `git add` or `git commit`.
 *
 * The git point's cost: each scan's wall time minus the time the scan reports for its own walk
 * (`elapsedMs`, taken inside the store before the git point is recorded), in the repository minus
 * the same in the plain workspace (where looking for a repository finds none) — the point itself,
 * without the addon's call overhead that both pay. Also reported: the whole scan's wall time in
 * both (their difference is all a git workspace costs a scan, the scan's git-blob baseline
 * included), and a raw baseline in the same run: Node reading what a point must read at least
 * (`HEAD`, `.git/index`, `packed-refs`, the loose refs, the stash log) with `readFileSync`.
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/git-point.mjs`; about a minute.
 * `GIT_POINT_FILES` (4500), `GIT_POINT_CALLS` (300), `GIT_POINT_NATIVE` (another build of the
 * addon). Writes target/bench-results/git-point.md.
 */
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ROOT, numbers } from './support/options.mjs'
import { median, quartile } from './support/stats.mjs'

const require = createRequire(import.meta.url)
const NATIVE = process.env.GIT_POINT_NATIVE ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node')
const { BindingStore } = require(NATIVE)
const [FILES] = numbers('GIT_POINT_FILES', '4500')
const [CALLS] = numbers('GIT_POINT_CALLS', '300')
const WARM = 10
const BRANCHES = 200
const TAGS = 100
const LOOSE = 20
const CAP = 8 * 1024 * 1024
const request = (phase, anchorSeq, callId) => ({ phase, anchorSeq, callId, maxFileBytes: CAP, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 })
const GIT_ENV = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' }
for (const k of ['GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_COMMON_DIR']) delete GIT_ENV[k]
const git = (cwd, args, input) => execFileSync('git', args, { cwd, env: GIT_ENV, input, stdio: ['pipe', 'pipe', 'inherit'] }).toString()
const us = (ms) => `${(ms * 1000).toFixed(0)} µs`
const pathOf = (i) => join(`d${Math.floor(i / 300)}`, `e${Math.floor(i / 30) % 10}`, `f${i}.c`)
const textOf = (i, tag = '') => `/* file ${i}${tag} */\n${`int v${i} = ${i}; /* ${'x'.repeat(40)} */\n`.repeat(16)}`

/** The repository: files, a commit, packed and loose branches and tags, a stash entry. */
function makeRepo(repo) {
  for (let i = 0; i < FILES; i++) {
    const p = join(repo, pathOf(i))
    if (i % 30 === 0) mkdirSync(join(p, '..'), { recursive: true })
    writeFileSync(p, textOf(i))
  }
  git(repo, ['init', '-q', '-b', 'main'])
  git(repo, ['add', '-A'])
  git(repo, ['commit', '-q', '-m', 'generated'])
  const head = git(repo, ['rev-parse', 'HEAD']).trim()
  let input = ''
  for (let b = 0; b < BRANCHES; b++) input += `create refs/heads/topic/b${b} ${head}\n`
  for (let t = 0; t < TAGS / 2; t++) input += `create refs/tags/v1.${t} ${head}\n`
  git(repo, ['update-ref', '--stdin'], input)
  for (let t = 0; t < TAGS / 2; t++) git(repo, ['tag', '-a', '-m', `release ${t}`, `v2.${t}`])
  git(repo, ['pack-refs', '--all'])
  input = ''
  for (let b = 0; b < LOOSE; b++) input += `create refs/heads/loose/b${b} ${head}\n`
  git(repo, ['update-ref', '--stdin'], input)
  writeFileSync(join(repo, pathOf(0)), textOf(0, ' stashed'))
  git(repo, ['stash', '-q'])
}

/** Node's read of what a point must read at least. */
function rawRead(repo) {
  const g = join(repo, '.git')
  let n = readFileSync(join(g, 'HEAD')).length + readFileSync(join(g, 'index')).length + readFileSync(join(g, 'packed-refs')).length
  const loose = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) loose(p)
      else n += readFileSync(p).length
    }
  }
  loose(join(g, 'refs', 'heads'))
  loose(join(g, 'refs', 'tags'))
  n += readFileSync(join(g, 'refs', 'stash')).length + readFileSync(join(g, 'logs', 'refs', 'stash')).length
  return n
}

const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'git-point-'))
try {
  const repo = join(base, 'repo')
  const plain = join(base, 'plain')
  mkdirSync(repo)
  makeRepo(repo)
  cpSync(repo, plain, { recursive: true })
  rmSync(join(plain, '.git'), { recursive: true, force: true })
  const indexBytes = readFileSync(join(repo, '.git', 'index')).length
  const packedLines = readFileSync(join(repo, '.git', 'packed-refs'), 'utf8').split('\n').filter((l) => l && !l.startsWith('#')).length
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise((resolve) => setTimeout(resolve, 100))

  const ws = {}
  for (const [kind, cwd] of [['git', repo], ['plain', plain]]) {
    const store = BindingStore.open(join(base, `store-${kind}`))
    const sid = `git-point-${kind}`
    const r = await store.scan(sid, cwd, request('boundary', 1))
    if (!r.baselineComplete || r.refused) throw new Error(`baseline scan: ${JSON.stringify(r)}`)
    await store.recheck(sid, cwd, 2, CAP)
    await store.scan(sid, cwd, request('boundary', 2))
    ws[kind] = { kind, cwd, store, sid, wall: { same: [], index: [] }, point: { same: [], index: [] } }
  }

  /** One timed scan; returns [wall, wall − the scan's own elapsed time]. */
  async function timedScan(w, phase, id) {
    const t = performance.now()
    const r = await w.store.scan(w.sid, w.cwd, request(phase, 2, id))
    const wall = performance.now() - t
    if (r.refused) throw new Error(`scan: ${JSON.stringify(r.refused)}`)
    return [wall, wall - r.elapsedMs, r]
  }

  const raw = []
  for (let j = 0; j < CALLS + WARM; j++) {
    const order = j % 2 === 0 ? [ws.git, ws.plain] : [ws.plain, ws.git]
    for (const w of order) {
      const id = `c${j}`
      const [bw, bp] = await timedScan(w, 'before', id)
      const changes = j % 2 === 1
      if (changes) {
        const i = 1 + ((j * 7) % (FILES - 1))
        writeFileSync(join(w.cwd, pathOf(i)), textOf(i, ` call ${j}`))
        if (w.kind === 'git') git(w.cwd, ['add', '--', pathOf(i)])
      }
      const [aw, ap, r] = await timedScan(w, 'after', id)
      if (changes && r.modified.length !== 1) throw new Error(`call ${j} (${w.kind}): the scan after it found ${JSON.stringify(r.modified)}`)
      if (j >= WARM) {
        w.wall.same.push(bw)
        w.point.same.push(bp)
        ;(changes ? w.wall.index : w.wall.same).push(aw)
        ;(changes ? w.point.index : w.point.same).push(ap)
      }
    }
    const t = performance.now()
    rawRead(repo)
    if (j >= WARM) raw.push(performance.now() - t)
  }

  // The stored points: one line per scan in the repository's session, none in the plain one.
  const sessionsDir = join(base, 'store-git', 'sessions')
  const points = readdirSync(sessionsDir).map((s) => {
    try { return readFileSync(join(sessionsDir, s, 'git', 'points.jsonl'), 'utf8').split('\n').filter(Boolean).length } catch { return 0 }
  }).reduce((a, b) => a + b, 0)
  if (points < 2 * (CALLS + WARM)) throw new Error(`only ${points} git points recorded`)

  const m = (xs) => median(xs)
  const q = (xs) => `${us(quartile(xs, 0.25))}–${us(quartile(xs, 0.75))}`
  const rows = [
    ['index unchanged (a scan before a call, or after a call that left git alone)', 'same'],
    ['a new index to store (after a call that ran `git add`)', 'index'],
  ].map(([what, k]) => {
    const point = m(ws.git.point[k]) - m(ws.plain.point[k])
    return { what, point, gitPoint: ws.git.point[k], plainPoint: ws.plain.point[k], gitWall: m(ws.git.wall[k]), plainWall: m(ws.plain.wall[k]), n: ws.git.point[k].length }
  })
  const load = loadavg().map((x) => x.toFixed(2)).join(', ')
  const when = new Date().toISOString().replace(/\.\d+Z$/, ' UTC').replace('T', ' ')
  for (const r of rows) process.stderr.write(`${r.what}: git point ${us(r.point)}; scan ${us(r.gitWall)} (git) vs ${us(r.plainWall)} (plain)\n`)
  const md = [
    '## Recording the git state per point (`benches/git-point.mjs`)',
    '',
    `A generated repository of ${FILES.toLocaleString('en-US')} files (index ${(indexBytes / 1024).toFixed(0)} KiB), ${BRANCHES + TAGS} branches and tags in \`packed-refs\` (${packedLines} lines, ${TAGS / 2} annotated tags peeled), ${LOOSE} loose branches and a stash entry, against the same files in a workspace that is no repository; scans through the packed addon before and after ${CALLS} calls each, alternated call by call; every other call changes a file (and, in the repository, \`git add\`s it). Run ${when}, load average ${load} (${availableParallelism()} cores).`,
    '',
    '"Git point" is a scan\'s wall time minus the time the scan reports for its own walk, in the repository minus the same in the plain workspace: the recording itself. Medians (interquartile range of the repository\'s side).',
    '',
    '| point | git point | repository: wall − walk | plain: wall − walk | whole scan, repository | whole scan, plain | scans |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.what} | **${us(r.point)}** | ${us(m(r.gitPoint))} (${q(r.gitPoint)}) | ${us(m(r.plainPoint))} | ${us(r.gitWall)} | ${us(r.plainWall)} | ${r.n} |`),
    '',
    `Raw baseline in the same run: Node's \`readFileSync\` of \`HEAD\`, \`.git/index\`, \`packed-refs\`, every loose ref and the stash log: ${us(m(raw))} (median of ${raw.length}).`,
    '',
  ].join('\n')
  mkdirSync(join(ROOT, 'target', 'bench-results'), { recursive: true })
  writeFileSync(join(ROOT, 'target', 'bench-results', 'git-point.md'), `${md}\n`)
  process.stdout.write(`${md}\n`)
} finally {
  await rm(base, { recursive: true, force: true })
}
