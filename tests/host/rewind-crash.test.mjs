/**
 * Crash consistency of a rewind as a whole, on the real host: a child process running the real DSH
 * spine with the built plugin (rewind-crash-child.mjs) is SIGKILLed at every step of the crash
 * order — through the plugin's crash seam (`DSH_REWIND_CRASH=<point>`) and after timed delays —
 * for an in-place rewind, a fork rewind, an undo and a redo. A second child starts on the same DSH home and
 * workspace; the invariant is asserted byte for byte for every kill point:
 *
 * - the whole rewind: history entry `done` and undoable, the marker in the log (the child session
 *   persisted, for a fork), every file as before "two";
 * - none of it: no marker (no child), entry absent or `abandoned`, every file as after "three";
 * - an interrupted rewind the plugin reports (RPC `interrupted`), which `/rewind --continue` turns
 *   into the whole rewind and `/rewind --rollback` into files exactly as before the rewind;
 *   no restore temp file is left either way.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, readdir, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { MANY, manyContent, manyName } from './rewind-crash-fixture.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const CHILD = join(HERE, 'rewind-crash-child.mjs')

/** The workspace after "three" (nothing rewound) and after the rewind to "two". */
const BEFORE = new Map([
  ['a.txt', 'v2\n'], ['b.txt', 'keep\n'], ['c.txt', 'created in two\n'],
  ...Array.from({ length: MANY }, (_, i) => [manyName(i), manyContent(i)]),
].map(([k, v]) => [k, Buffer.from(v)]))
const AFTER = new Map([['a.txt', Buffer.from('v1\n')], ['b.txt', Buffer.from('keep\n')]])

/** Every regular file under `root` (relative path → bytes); directories are not compared. */
async function files(root) {
  const out = new Map()
  const walk = async (dir) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) await walk(p)
      else out.set(relative(root, p), await readFile(p))
    }
  }
  await walk(root)
  return out
}

function assertFiles(actual, expected, label) {
  const temps = [...actual.keys()].filter(k => k.includes('.rewind-tmp-'))
  assert.deepEqual(temps, [], `${label}: leftover restore temp files`)
  assert.deepEqual([...actual.keys()].sort(), [...expected.keys()].sort(), `${label}: file set`)
  for (const [k, v] of expected) assert.ok(actual.get(k).equals(v), `${label}: bytes of ${k}`)
}

/** Run the child; `crash` is a seam point, `delayMs` a timed SIGKILL after READY. */
function run(args, { crash, delayMs } = {}) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env }
    delete env.DSH_REWIND_CRASH
    if (crash !== undefined) env.DSH_REWIND_CRASH = crash
    const child = spawn(process.execPath, [CHILD, JSON.stringify(args)], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => {
      stdout += d
      if (delayMs !== undefined && stdout.includes('READY\n') && !child.timer) {
        child.timer = setTimeout(() => child.kill('SIGKILL'), delayMs)
      }
    })
    child.stderr.on('data', (d) => { stderr += d })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(child.timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

function states(out) {
  return out.stdout.split('\n').filter(l => l.startsWith('STATE ')).map(l => JSON.parse(l.slice(6)))
}

/**
 * Kill the operation, restart, and check the invariant. Returns the class found (`whole`, `none`,
 * `interrupted`) after the restart's reconcile pass.
 */
async function killAndCheck(scenario, kill, resolve) {
  const home = await mkdtemp(join(tmpdir(), 'rewind-crash-home-'))
  const ws = await mkdtemp(join(tmpdir(), 'rewind-crash-ws-'))
  const label = `${scenario} ${kill.crash ?? `+${kill.delayMs}ms`}${resolve ? ` ${resolve}` : ''}`
  const setup = await run({ phase: 'setup', home, ws, scenario }, kill)
  if (kill.crash !== undefined) {
    assert.equal(setup.signal, 'SIGKILL', `${label}: the seam killed the child\n${setup.stderr}`)
    assert.match(setup.stderr, new RegExp(`@@rewind-crash ${kill.crash}`), label)
  } else {
    assert.ok(setup.signal === 'SIGKILL' || (setup.code === 0 && setup.stdout.includes('DONE')), `${label}: ${setup.stderr}`)
  }
  const restart = await run({ phase: 'restart', home, ws, scenario, ...(resolve ? { resolve } : {}) })
  assert.equal(restart.code, 0, `${label}: restart failed\n${restart.stderr}`)
  const [first, after] = states(restart)
  assert.ok(first.interrupted.ok && first.history.ok, `${label}: ${JSON.stringify(first)}`)
  const entries = first.history.value.entries
  const interrupted = first.interrupted.value.interrupted
  const disk = await files(ws)
  const childOf = e => e?.fork?.childSessionId

  if (scenario === 'undo') {
    // The rewind before the undo was whole; after a kill during the undo and the reconcile pass,
    // the undo is whole (files as after "three", entry undone) or absent (entry undoable).
    assert.equal(interrupted.length, 0, `${label}: an interrupted undo is finished by the reconcile pass`)
    assert.equal(entries.length, 1, label)
    assert.equal(first.markers, 1, label)
    if (entries[0].undoneAt != null) {
      assert.equal(entries[0].undoOutcome, 'ok', label)
      assertFiles(disk, BEFORE, label)
      // The conversation as it was before the rewind: its new session exists (created by the
      // reconcile pass when the kill came before it).
      assert.ok(typeof entries[0].undoSessionId === 'string' && first.sessions.includes(entries[0].undoSessionId), `${label}: the undo's session exists (${entries[0].undoSessionId}; ${first.sessions})`)
      return 'whole'
    }
    assert.equal(entries[0].outcome, 'done', label)
    assert.equal(entries[0].undoable, true, label)
    assertFiles(disk, AFTER, label)
    return 'none'
  }

  if (scenario === 'redo' && interrupted.length === 0) {
    // After the rewind and its undo (files as before "two" came back: BEFORE), the redo is whole
    // (its entry done and undoable, files as after the rewind) or absent (no entry, or abandoned).
    assert.equal(restart.stdout.includes('RESOLVED'), false, label)
    const redo = entries.find(e => e.redoOf != null)
    if (redo?.outcome === 'done') {
      assert.equal(redo.undoable, true, label)
      assertFiles(disk, AFTER, label)
      return 'whole'
    }
    assert.ok(redo === undefined || redo.outcome === 'abandoned', `${label}: ${JSON.stringify(redo)}`)
    assertFiles(disk, BEFORE, label)
    return 'none'
  }

  const entry = entries[0]
  const conversation = scenario === 'fork' ? entry !== undefined && first.sessions.includes(childOf(entry)) : first.markers === 1
  if (interrupted.length === 0) {
    assert.equal(restart.stdout.includes('RESOLVED'), false, label)
    if (entry !== undefined && entry.outcome === 'done') {
      assert.equal(conversation, true, `${label}: a done entry has its conversation half`)
      assert.equal(entry.undoable, true, label)
      assertFiles(disk, AFTER, label)
      return 'whole'
    }
    assert.ok(entry === undefined || entry.outcome === 'abandoned', `${label}: ${JSON.stringify(entry)}`)
    assert.equal(conversation, false, `${label}: nothing changed means no marker and no child: ${JSON.stringify({ entry, markers: first.markers, sessions: first.sessions })}\n${restart.stderr}`)
    if (scenario === 'rewind') assert.equal(first.markers, 0, label)
    assertFiles(disk, BEFORE, label)
    return 'none'
  }

  // Interrupted: the plugin knows it and names it.
  assert.equal(interrupted.length, 1, label)
  assert.equal(interrupted[0].opId, entry.opId, label)
  assert.equal(entry.outcome, 'started', label)
  assert.equal(entry.undoable, false, label)
  // A redo is interrupted like a rewind (its conversation is the rewound session, unchanged).
  assert.equal(interrupted[0].kind, scenario === 'redo' ? 'rewind' : scenario, label)
  if (resolve === undefined) return 'interrupted'
  const resolved = JSON.parse(restart.stdout.split('\n').find(l => l.startsWith('RESOLVED ')).slice(9))
  assert.equal(resolved.kind, 'success', `${label}: ${resolved.text}`)
  assert.equal(after.interrupted.value.interrupted.length, 0, label)
  const settled = after.history.value.entries[0]
  const diskAfter = await files(ws)
  if (resolve === 'continue') {
    assert.equal(settled.outcome, 'done', label)
    assert.equal(settled.undoable, true, label)
    assertFiles(diskAfter, AFTER, label)
  } else {
    assert.equal(settled.outcome, 'rolled-back', label)
    assert.equal(settled.undoable, false, label)
    assertFiles(diskAfter, BEFORE, label)
  }
  return 'interrupted'
}

/** Every seam point with the classes the invariant allows there. */
const SEAMS = {
  rewind: {
    'rewind:started': ['none'],
    'rewind:marker-appended': ['none', 'interrupted'],
    'rewind:marker-durable': ['interrupted'],
    'rewind:done': ['whole'],
  },
  fork: {
    'fork:started': ['none'],
    'fork:child-created': ['none', 'interrupted'],
    'fork:child-durable': ['interrupted'],
    'fork:done': ['whole'],
  },
  undo: {
    'undo:started': ['whole'],
    'undo:session': ['whole'],
    'undo:files': ['whole'],
    'undo:done': ['whole'],
  },
  redo: {
    'redo:started': ['none'],
    'redo:files': ['whole'],
    'redo:done': ['whole'],
  },
}
const DELAYS = { rewind: [0, 20, 40, 60, 120, 250], fork: [0, 40, 120], undo: [0, 20, 60], redo: [0, 20, 60] }

for (const scenario of ['rewind', 'fork', 'undo', 'redo']) {
  test(`${scenario}: a kill at every seam point leaves the whole ${scenario}, none of it, or an interrupted one that continue and rollback settle`, async (t) => {
    for (const [crash, allowed] of Object.entries(SEAMS[scenario])) {
      const found = await killAndCheck(scenario, { crash })
      t.diagnostic(`${crash}: ${found}`)
      assert.ok(allowed.includes(found), `${scenario} ${crash}: found ${found}, allowed ${allowed}`)
      if (found === 'interrupted') {
        await killAndCheck(scenario, { crash }, 'continue')
        await killAndCheck(scenario, { crash }, 'rollback')
      }
    }
  })

  test(`${scenario}: timed kills keep the invariant`, async (t) => {
    for (const delayMs of DELAYS[scenario]) {
      const found = await killAndCheck(scenario, { delayMs })
      t.diagnostic(`+${delayMs} ms: ${found}`)
      if (found === 'interrupted') {
        await killAndCheck(scenario, { delayMs }, 'continue')
        await killAndCheck(scenario, { delayMs }, 'rollback')
      }
    }
  })
}

test('after a restart the next /rewind names the interrupted rewind and offers both ways out; a new rewind waits; rollback removes the restore temp files', async () => {
  const home = await mkdtemp(join(tmpdir(), 'rewind-crash-home-'))
  const ws = await mkdtemp(join(tmpdir(), 'rewind-crash-ws-'))
  const setup = await run({ phase: 'setup', home, ws, scenario: 'rewind' }, { crash: 'rewind:marker-durable' })
  assert.equal(setup.signal, 'SIGKILL')
  // What a kill in the middle of writing a.txt and f/00.txt leaves beside them, and a file of the
  // user's that only looks similar.
  const { writeFile } = await import('node:fs/promises')
  await writeFile(join(ws, '.a.txt.rewind-tmp-4242-0'), 'half')
  await writeFile(join(ws, 'f', '.00.txt.rewind-tmp-4242-1'), 'half')
  await writeFile(join(ws, '.a.txt.rewind-tmp-mine'), 'mine')
  const restart = await run({ phase: 'restart', home, ws, scenario: 'rewind', commands: ['/rewind', '/rewind 1', '/rewind --rollback', '/rewind'] })
  assert.equal(restart.code, 0, restart.stderr)
  const results = restart.stdout.split('\n').filter(l => l.startsWith('COMMAND ')).map(l => JSON.parse(l.slice(8)))
  const [listed, refused, rolledBack, after] = results
  assert.equal(listed.kind, 'success')
  assert.match(listed.text, /^An earlier rewind of this session was interrupted:\n- rewind to @\d+ \(no file changed yet; op [0-9a-f-]+\)\nRun \/rewind --continue .* \/rewind --rollback /)
  assert.match(listed.text, /Messages you can rewind to/)
  assert.equal(refused.kind, 'error')
  assert.match(refused.text, /\[rewind\/interrupted\]/)
  assert.equal(rolledBack.kind, 'success', rolledBack.text)
  assert.match(rolledBack.text, /^Rolled back the interrupted rewind to @\d+/)
  assert.match(rolledBack.text, /The conversation stays rewound/)
  assert.match(rolledBack.text, /Removed 2 leftover temporary file\(s\)/)
  assert.doesNotMatch(after.text, /interrupted/)
  const disk = await files(ws)
  assert.equal(disk.get('.a.txt.rewind-tmp-mine').toString(), 'mine')
  disk.delete('.a.txt.rewind-tmp-mine')
  assertFiles(disk, BEFORE, 'after the rollback')
  const [, ...states_] = states(restart)
  assert.equal(states_.length, 0)
})
