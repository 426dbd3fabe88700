/**
 * One rule set: a rewind through the plugin and a restore through `dsh-rewind` run the same
 * engine calls (the plan narrowed by the store's matcher, the history entry `started` first,
 * the journaled restore, the entry finished), so on the same store they record the same
 * history entry — every field but its ids and times.
 *
 * The plugin's rewind is a fork rewind: its conversation continues in a child session and the
 * rewound session's log keeps the target message on its surface, so the command-line tool can
 * restore the same session to the same message after the plugin's rewind was undone. The live
 * host holds its sessions (a shared lock the CLI's claim refuses while this process runs), so
 * the CLI runs on a byte-for-byte copy of the DSH home taken once the host has written
 * everything and stopped: the same session log, store and history, the same workspace.
 */
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { cp, mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { turn, text, write } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, rpc } from './plugin-support.mjs'

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))

/** The dsh-rewind binary (scripts/test-host.sh builds it), built here when run on its own. */
function cliBinary() {
  if (process.env.DSH_REWIND_CLI) return process.env.DSH_REWIND_CLI
  const target = process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target')
  const res = spawnSync('cargo', ['build', '--quiet', '-p', 'dsh-rewind-cli'], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: target } })
  assert.equal(res.status, 0, 'cargo build -p dsh-rewind-cli')
  return join(target, 'debug', 'dsh-rewind')
}

/**
 * An entry as `dsh-rewind --json history` prints it, less what differs by nature: ids and times
 * (its op id, its time, the marker's id, the fork's child session id).
 */
function comparable(entry) {
  const { opId: _op, time: _time, markerId: _marker, fork: _fork, ...rest } = entry
  return rest
}

test('a rewind through the plugin and a restore through dsh-rewind record the same history entry', async (t) => {
  const cli = cliBinary()
  const run = (home, ...args) => spawnSync(cli, ['--home', home, ...args], { encoding: 'utf8' })
  const home = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const host = await bootWithPlugin({
    dshHome: home,
    script: [
      turn(write('a.txt', 'one\n'), text('a')),
      turn(write('a.txt', 'two\n'), write('b.txt', 'new\n'), text('b')),
    ],
  })
  let disposed = false
  t.after(async () => { if (!disposed) await host.dispose() })
  const ws = host.workspace
  const agent = await host.createAgent('same-entry')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  const seq = humanSeq(agent, 'second')

  // The plugin's rewind, keeping b.txt: a.txt restored, b.txt kept (a path the entry records).
  const rewound = await host.runCommand(agent, `/rewind --fork @${seq} --keep b.txt`)
  assert.equal(rewound.result.kind, 'success', rewound.result.text)
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'one\n')
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'new\n')
  await host.flush(agent) // the tool reads the session's workspace from its log
  const before = run(home, '--json', 'history')
  assert.equal(before.status, 0, before.stderr)
  const pluginEntries = JSON.parse(before.stdout).entries
  assert.equal(pluginEntries.length, 1)
  const plugin = pluginEntries[0]
  assert.equal(plugin.outcome, 'done')
  assert.equal(plugin.sessionId, 'same-entry')
  assert.ok(plugin.fork?.childSessionId, 'a fork rewind')
  assert.deepEqual(plugin.paths.restored, ['a.txt'])
  assert.deepEqual(plugin.paths.kept, ['b.txt'])

  // Undone, so that the files are as they were before it; then everything on disk.
  const undone = await host.runCommand(agent, '/rewind undo')
  assert.equal(undone.result.kind, 'success', undone.result.text)
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'two\n')
  await host.flush(agent)
  assert.equal((await rpc(host, 'storage', { sessionId: agent.id })).json.ok, true) // writes what the store holds in memory
  await host.dispose()
  disposed = true
  const copy = await mkdtemp(join(tmpdir(), 'rewind-dsh-copy-'))
  await cp(home, copy, { recursive: true })

  // The same restore through the command-line tool.
  const restore = run(copy, '--json', 'restore', 'same-entry', `@${seq}`, '--keep', 'b.txt')
  assert.equal(restore.status, 0, restore.stderr + restore.stdout)
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'one\n')
  assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'new\n')
  const after = run(copy, '--json', 'history')
  assert.equal(after.status, 0, after.stderr)
  const entries = JSON.parse(after.stdout).entries
  const cliEntry = entries.find(e => e.opId.startsWith('cli-'))
  assert.ok(cliEntry, after.stdout)
  assert.equal(entries.filter(e => e.opId === plugin.opId).length, 1, 'the plugin entry is still there')
  assert.deepEqual(comparable(cliEntry), comparable(plugin))
})
