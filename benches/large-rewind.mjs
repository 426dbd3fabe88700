#!/usr/bin/env node
/**
 * A rewind of a tree of many files a shell command made, inside the real DSH host (0.1.0-rc.8
 * spine, DSH's real `bash` tool, scripted model), against the same restore by `dsh-rewind` (the
 * CLI: the same engine, no host). Per build of the plugin named on the command line (default: this
 * checkout's `lib/index.js`; another build is a directory holding `lib/` and `native/`):
 *
 *   1. the host stops; `dsh-rewind restore <session> @<seq>` to the message that generated the
 *      tree (the restore deletes every generated file and writes one edited file back), timed,
 *      then `dsh-rewind undo <op>`, timed (the workspace is as it was again);
 *   2. a host started again on the same home resumes the session: `/rewind @<seq>` (the same
 *      plan), timed, then `/rewind undo`, timed.
 *
 * Run with Node 24 after `scripts/build.sh` and `cargo build --release -p dsh-rewind-cli`:
 *   LARGE_REWIND_FILES=50000 node benches/large-rewind.mjs [<build dir> ...]
 * (`LARGE_REWIND_CLI=<path>`: another `dsh-rewind` binary, e.g. one built with the builds compared.)
 * Prints one Markdown row per build. Invariant checkers are off. Each timed step starts after a
 * `sync`, so the 50,000 files an earlier step wrote are not written back during it.
 */
import { mkdtemp } from 'node:fs/promises'
import { readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { spawnSync } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, bash, write, read, edit } from '../tests/host/lib/harness.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const FILES = Number(process.env.LARGE_REWIND_FILES ?? 50_000)
const CLI = process.env.LARGE_REWIND_CLI ?? join(ROOT, 'target', 'release', 'dsh-rewind')
const builds = process.argv.slice(2).length > 0 ? process.argv.slice(2).map(d => resolve(d)) : [ROOT]

/** Writes back what earlier steps left dirty, so a timed step does not pay for them. */
function settle() {
  spawnSync('sync')
}

function cli(home, ...args) {
  settle()
  const t0 = performance.now()
  const r = spawnSync(CLI, ['--home', home, '--json', ...args], { encoding: 'utf8', maxBuffer: 1 << 30 })
  const ms = performance.now() - t0
  if (r.status !== 0) throw new Error(`dsh-rewind ${args.join(' ')} (home ${home}): exit ${r.status}: ${r.stderr.slice(0, 2000)}${r.stdout.slice(0, 2000)}`)
  return { ms, json: JSON.parse(r.stdout) }
}

async function one(build) {
  const Rewind = await import(pathToFileURL(join(build, 'lib', 'index.js')).href)
  const home = await mkdtemp(join(tmpdir(), 'bench-large-home-'))
  const ws = await mkdtemp(join(tmpdir(), 'bench-large-ws-'))
  const boot = script => startHost({ workspace: ws, dshHome: home, plugins: [[Rewind, { dshHome: home }]], invariants: false, shell: true, script })
  const sessionId = 'bench-large'
  // The session: a file written, then the tree generated and the file edited.
  let seq
  {
    const host = await boot([
      turn(write('keep.txt', 'v1\n'), text('wrote keep')),
      turn(bash(`mkdir -p gen && for i in $(seq 1 ${FILES}); do echo "file $i" > gen/f$i.txt; done`), read('keep.txt'), edit('keep.txt', 'v1', 'v2'), text('generated')),
    ])
    try {
      const agent = await host.createAgent(sessionId)
      await host.sendUser(agent, 'first')
      await host.sendUser(agent, 'generate')
      await host.flush(agent)
      seq = agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user' && JSON.stringify(e.data).includes('generate')).seq
    } finally {
      await host.dispose()
    }
  }
  // The CLI, with no host running: restore, then undo (the workspace is as before again).
  const restored = cli(home, 'restore', sessionId, `@${seq}`)
  if (readdirSync(ws).includes('gen')) throw new Error('the CLI restore left files')
  const undone = cli(home, 'undo', /"op":"([^"]+)"/.exec(JSON.stringify(restored.json))[1])
  if (readdirSync(join(ws, 'gen')).length !== FILES) throw new Error('the CLI undo did not bring the files back')
  // The host, started again on the same home: the session resumed, /rewind, then /rewind undo.
  let rewindMs
  let undoMs
  const host = await boot([])
  try {
    const agent = await host.resume(sessionId)
    settle()
    let t0 = performance.now()
    const r = (await host.runCommand(agent, `/rewind @${seq}`)).result
    rewindMs = performance.now() - t0
    if (r.kind !== 'success' || readdirSync(ws).includes('gen')) throw new Error(`the rewind failed: ${r.text.slice(0, 500)}`)
    settle()
    t0 = performance.now()
    const u = (await host.runCommand(agent, '/rewind undo')).result
    undoMs = performance.now() - t0
    if (u.kind !== 'success' || readdirSync(join(ws, 'gen')).length !== FILES) throw new Error(`the undo failed: ${u.text.slice(0, 500)}`)
  } finally {
    await host.dispose()
  }
  return { build, rewindMs, undoMs, cliRestoreMs: restored.ms, cliUndoMs: undone.ms }
}

const s = ms => `${(ms / 1000).toFixed(2)} s`
console.log(`| build | files | host /rewind | CLI restore | host ÷ CLI | host /rewind undo | CLI undo | host ÷ CLI |`)
console.log('|---|---|---|---|---|---|---|---|')
for (const build of builds) {
  const r = await one(build)
  console.log(`| ${build === ROOT ? 'this checkout' : build} | ${FILES} | ${s(r.rewindMs)} | ${s(r.cliRestoreMs)} | ${(r.rewindMs / r.cliRestoreMs).toFixed(2)} | ${s(r.undoMs)} | ${s(r.cliUndoMs)} | ${(r.undoMs / r.cliUndoMs).toFixed(2)} |`)
}
