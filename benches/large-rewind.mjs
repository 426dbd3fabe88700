#!/usr/bin/env node
/**
 * A rewind of a tree of many files a shell command made, inside the real DSH host (0.1.0-rc.8
 * spine, DSH's real `bash` tool, scripted model), against the same restore by `dsh-rewind` (the
 * CLI: the same engine, no host).
 *
 * One session is made once (a file written; then a turn whose `bash` generates the tree and edits
 * the file) and its DSH home and workspace are kept as a pristine copy. Each trial starts from a
 * fresh copy of both, in a process of its own, and times two steps:
 *
 *   - CLI:  `dsh-rewind restore <session> @<seq>` to the message that generated the tree (the
 *           restore deletes every generated file and writes one edited file back), then
 *           `dsh-rewind undo <op>` (the workspace is as it was again);
 *   - host: a host started on the copy resumes the session, `/rewind @<seq>` (the same plan), then
 *           `/rewind undo`.
 *
 * Rounds alternate which side goes first (CLI then host, host then CLI, ...), so neither side
 * always runs on a disk the other has just worked.
 *
 * Before each timed step the bench runs `sync` and then waits `LARGE_REWIND_QUIET_S` seconds
 * (default 65). The wait is there for ext4 without a journal (the disk this is measured on):
 * there the kernel's inode allocator skips every inode freed less than 60 s before (300 s more
 * while its inode-table block is dirty), testing each candidate in turn — `recently_deleted()`
 * and `find_inode_bit()` in the kernel's `fs/ext4/ialloc.c`, active only when the filesystem has
 * no journal — so creating 50,000 files within a minute of deleting 50,000 costs seconds of
 * kernel time that depend on when the step starts, not on who runs it. `LARGE_REWIND_QUIET_S=0`
 * measures that cost in.
 *
 * Run with Node 24 after `scripts/build.sh` and `cargo build --release -p dsh-rewind-cli`:
 *   LARGE_REWIND_FILES=50000 LARGE_REWIND_ROUNDS=3 node benches/large-rewind.mjs [<build dir>]
 * (a build dir holds `lib/` and `native/`; default this checkout. `LARGE_REWIND_CLI=<path>`:
 * another `dsh-rewind` binary.) Prints one Markdown row per trial and the medians. Invariant
 * checkers are off.
 */
import { mkdtemp, readFile } from 'node:fs/promises'
import { readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { spawnSync } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, bash, write, read, edit } from '../tests/host/lib/harness.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const FILES = Number(process.env.LARGE_REWIND_FILES ?? 50_000)
const ROUNDS = Number(process.env.LARGE_REWIND_ROUNDS ?? 3)
const QUIET_S = Number(process.env.LARGE_REWIND_QUIET_S ?? 65)
const CLI = process.env.LARGE_REWIND_CLI ?? join(ROOT, 'target', 'release', 'dsh-rewind')
const SESSION = 'bench-large'

function sh(command) {
  const r = spawnSync('bash', ['-c', command], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${command}: exit ${r.status}: ${r.stderr}`)
}

/** Writes back what earlier steps left dirty and lets the kernel's recently-freed window pass. */
function settle() {
  sh(`sync; sleep ${QUIET_S}`)
}

async function boot(build, dir, script) {
  const Rewind = await import(pathToFileURL(join(build, 'lib', 'index.js')).href)
  const ws = join(dir, 'ws')
  const home = join(dir, 'home')
  return startHost({ workspace: ws, dshHome: home, plugins: [[Rewind, { dshHome: home }]], invariants: false, shell: true, script })
}

/** The session, made once: returns the seq of the message that generated the tree. */
async function makeSession(build, dir) {
  sh(`mkdir -p '${dir}/ws' '${dir}/home'`)
  const host = await boot(build, dir, [
    turn(write('keep.txt', 'v1\n'), text('wrote keep')),
    turn(bash(`mkdir -p gen && for i in $(seq 1 ${FILES}); do echo "file $i" > gen/f$i.txt; done`), read('keep.txt'), edit('keep.txt', 'v1', 'v2'), text('generated')),
  ])
  try {
    const agent = await host.createAgent(SESSION)
    await host.sendUser(agent, 'first')
    await host.sendUser(agent, 'generate')
    await host.flush(agent)
    return agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user' && JSON.stringify(e.data).includes('generate')).seq
  } finally {
    await host.dispose()
  }
}

function cli(home, ...args) {
  settle()
  const t0 = performance.now()
  const r = spawnSync(CLI, ['--home', home, '--json', ...args], { encoding: 'utf8', maxBuffer: 1 << 30 })
  const ms = performance.now() - t0
  if (r.status !== 0) throw new Error(`dsh-rewind ${args.join(' ')} (home ${home}): exit ${r.status}: ${r.stderr.slice(0, 2000)}${r.stdout.slice(0, 2000)}`)
  return { ms, json: JSON.parse(r.stdout) }
}

/** One side's trial on the copy in `dir`: `{ rewindMs, undoMs }`. */
async function trial(side, build, dir, seq) {
  const ws = join(dir, 'ws')
  const generated = () => readdirSync(ws).includes('gen') ? readdirSync(join(ws, 'gen')).length : 0
  if (side === 'cli') {
    const restored = cli(join(dir, 'home'), 'restore', SESSION, `@${seq}`)
    if (generated() !== 0) throw new Error('the CLI restore left files')
    const undone = cli(join(dir, 'home'), 'undo', /"op":"([^"]+)"/.exec(JSON.stringify(restored.json))[1])
    if (generated() !== FILES) throw new Error('the CLI undo did not bring the files back')
    return { rewindMs: restored.ms, undoMs: undone.ms }
  }
  const host = await boot(build, dir, [])
  try {
    const agent = await host.resume(SESSION)
    settle()
    let t0 = performance.now()
    const r = (await host.runCommand(agent, `/rewind @${seq}`)).result
    const rewindMs = performance.now() - t0
    if (r.kind !== 'success' || generated() !== 0) throw new Error(`the rewind failed: ${r.text.slice(0, 500)}`)
    settle()
    t0 = performance.now()
    const u = (await host.runCommand(agent, '/rewind undo')).result
    const undoMs = performance.now() - t0
    if (u.kind !== 'success' || generated() !== FILES) throw new Error(`the undo failed: ${u.text.slice(0, 500)}`)
    return { rewindMs, undoMs }
  } finally {
    await host.dispose()
  }
}

const step = process.env.LARGE_REWIND_STEP
if (step) {
  // A child: one side's trial on a prepared copy; the result on stdout's last line.
  const { side, build, dir, seq } = JSON.parse(step)
  console.log(JSON.stringify(await trial(side, build, dir, seq)))
  process.exit(0)
}

const build = resolve(process.argv[2] ?? ROOT)
const base = await mkdtemp(join(tmpdir(), 'bench-large-'))
const pristine = join(base, 'pristine')
const seq = await makeSession(build, pristine)
sh(`sync`)
const median = xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const s = ms => `${(ms / 1000).toFixed(2)} s`
const rows = { cli: [], host: [] }
console.log(`${FILES} files, ${ROUNDS} rounds, quiet wait ${QUIET_S} s, build ${build === ROOT ? 'this checkout' : build}, started ${new Date().toISOString()}`)
console.log('')
console.log('| round | side | rewind | undo | load (1 min) |')
console.log('|---|---|---|---|---|')
for (let round = 1; round <= ROUNDS; round++) {
  for (const side of round % 2 === 1 ? ['cli', 'host'] : ['host', 'cli']) {
    // A fresh copy under the pristine paths (the session names its workspace by absolute path);
    // the pristine copy waits aside meanwhile.
    sh(`mv '${pristine}' '${base}/keep' && cp -a '${base}/keep' '${pristine}' && sync`)
    const load = (await readFile('/proc/loadavg', 'utf8')).split(' ')[0]
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], {
      encoding: 'utf8',
      maxBuffer: 1 << 30,
      env: { ...process.env, LARGE_REWIND_STEP: JSON.stringify({ side, build, dir: pristine, seq }) },
    })
    sh(`rm -rf '${pristine}' && mv '${base}/keep' '${pristine}'`)
    if (r.status !== 0) throw new Error(`${side} trial: exit ${r.status}: ${r.stderr.slice(-3000)}`)
    const t = JSON.parse(r.stdout.trim().split('\n').at(-1))
    rows[side].push(t)
    console.log(`| ${round} | ${side === 'cli' ? 'CLI' : 'host'} | ${s(t.rewindMs)} | ${s(t.undoMs)} | ${load} |`)
  }
}
const m = (side, k) => median(rows[side].map(t => t[k]))
console.log('')
console.log(`Medians: rewind host ${s(m('host', 'rewindMs'))} ÷ CLI ${s(m('cli', 'rewindMs'))} = ${(m('host', 'rewindMs') / m('cli', 'rewindMs')).toFixed(2)}; ` +
  `undo host ${s(m('host', 'undoMs'))} ÷ CLI ${s(m('cli', 'undoMs'))} = ${(m('host', 'undoMs') / m('cli', 'undoMs')).toFixed(2)}`)
sh(`rm -rf '${base}'`)
