/**
 * Crash consistency of a rewind's git step on the real host: a child running the real DSH spine
 * with the built plugin and DSH's real `bash` tool (rewind-git-crash-child.mjs) is SIGKILLed at
 * each seam of the git step — `rewind:git-planned` (the files restored, the git plan journaled,
 * nothing of git changed), `rewind:git-done` (git restored, the entry not finished) and
 * `undo:git-planned` (the undo's files back, its git step not begun). A second child starts on
 * the same home; after its reconcile pass the repository is whole — HEAD on the branch and commit
 * of the target (or, for the undo, as after turn two), `git status --porcelain` empty, the agent's
 * commit reachable — and the entry is settled.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'rewind-git-crash-child.mjs')
const GIT_ENV = {
  GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t',
  GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1',
}
const git = (ws, ...a) => execFileSync('git', a, { cwd: ws, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } }).trim()

async function seed(ws) {
  git(ws, 'init', '-q', '-b', 'main')
  for (let i = 0; i < 10; i++) await writeFile(join(ws, `f${i}.txt`), `v1 ${i}\n`)
  git(ws, 'add', '.')
  git(ws, 'commit', '-qm', 'one')
  git(ws, 'tag', 'v1')
  for (let i = 0; i < 10; i++) await writeFile(join(ws, `f${i}.txt`), `v2 ${i}\n`)
  git(ws, 'commit', '-qam', 'two')
}

function run(args, crash) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...GIT_ENV }
    delete env.DSH_REWIND_CRASH
    if (crash !== undefined) env.DSH_REWIND_CRASH = crash
    const child = spawn(process.execPath, [CHILD, JSON.stringify(args)], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
}

for (const [scenario, crash] of [['rewind', 'rewind:git-planned'], ['rewind', 'rewind:git-done'], ['undo', 'undo:git-planned']]) {
  test(`${scenario} killed at ${crash}: the restart leaves the repository whole`, async () => {
    const home = await mkdtemp(join(tmpdir(), 'rewind-git-crash-home-'))
    const ws = await mkdtemp(join(tmpdir(), 'rewind-git-crash-ws-'))
    await seed(ws)
    const main = git(ws, 'rev-parse', 'main')
    const setup = await run({ phase: 'setup', home, ws, scenario }, crash)
    assert.equal(setup.signal, 'SIGKILL', `the seam killed the child\n${setup.stdout}\n${setup.stderr}`)
    assert.match(setup.stderr, new RegExp(`@@rewind-crash ${crash}`))
    if (crash === 'rewind:git-planned') assert.equal(git(ws, 'rev-parse', '--abbrev-ref', 'HEAD'), 'HEAD', 'killed before the git step: HEAD still detached')
    if (crash === 'undo:git-planned') assert.equal(git(ws, 'rev-parse', '--abbrev-ref', 'HEAD'), 'main', 'killed before the undo\'s git step: HEAD still on main')
    const restart = await run({ phase: 'restart', home, ws, scenario })
    assert.equal(restart.code, 0, restart.stderr)
    const state = JSON.parse(restart.stdout.split('\n').find(l => l.startsWith('STATE ')).slice(6))
    const entry = state.history.value.entries[0]
    assert.equal(state.interrupted.value.interrupted.length, 0, JSON.stringify(state.interrupted))
    assert.equal(git(ws, 'status', '--porcelain'), '', 'git status is clean after the restart')
    const kept = git(ws, 'for-each-ref', '--format=%(refname)', 'refs/dsh-rewind/')
    assert.match(kept, /heads\/agent-work/, 'the agent\'s commit is reachable from a keep-ref')
    if (scenario === 'rewind') {
      assert.equal(entry.outcome, 'done')
      assert.equal(git(ws, 'rev-parse', '--abbrev-ref', 'HEAD'), 'main')
      assert.equal(git(ws, 'rev-parse', 'HEAD'), main)
    } else {
      assert.ok(entry.undoneAt > 0, JSON.stringify(entry))
      assert.equal(git(ws, 'rev-parse', '--abbrev-ref', 'HEAD'), 'HEAD', 'as after turn two: detached')
      assert.equal(git(ws, 'rev-parse', 'HEAD'), git(ws, 'rev-parse', 'v1'))
      assert.ok(git(ws, 'branch', '--list', 'agent-work').includes('agent-work'), 'the agent\'s branch is back')
    }
  })
}
