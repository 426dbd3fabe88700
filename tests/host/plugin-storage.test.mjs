/**
 * Storage you can see and cap, on the real host: the size quota setting (`cleanup.maxSizeBytes`:
 * range refusal, persisted in DSH's settings file, `/snapshot-auto-cleanup max-size`), the
 * automatic sweep enforcing it after the age rule (oldest idle sessions first, live ones kept,
 * what it freed reported), and the `storage` RPC's figures against the files on disk.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { mkdtemp, readdir, readFile, realpath, stat, utimes, writeFile } from 'node:fs/promises'
import { createHash, randomBytes } from 'node:crypto'
import { turn, text, write, read } from './lib/harness.mjs'
import { bootWithPlugin, rpc } from './plugin-support.mjs'

const GIB = 1024 ** 3

/** Bytes of every regular file under `path` (recursively); 0 when it does not exist. */
async function du(path) {
  let entries
  try {
    entries = await readdir(path, { withFileTypes: true, recursive: true })
  } catch (error) {
    if (error.code === 'ENOENT') return 0
    throw error
  }
  let sum = 0
  for (const e of entries) if (e.isFile()) sum += (await stat(join(e.parentPath ?? e.path, e.name))).size
  return sum
}

async function ageTree(path, days) {
  const when = new Date(Date.now() - days * 86_400_000)
  for (const e of await readdir(path, { withFileTypes: true, recursive: true })) await utimes(join(e.parentPath ?? e.path, e.name), when, when)
  await utimes(path, when, when)
}

/** Waits until the session's queued store work (captures, background scans) has run. */
async function quiet(host, sessionId) {
  const r = await rpc(host, 'restores', { sessionId })
  assert.equal(r.json.ok, true, JSON.stringify(r.json))
}

test('cleanup.maxSizeBytes: default, range refusal naming the field, persisted, /snapshot-auto-cleanup max-size', async (t) => {
  const host = await bootWithPlugin({ script: [turn(text('hi'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('quota-settings')
  await host.sendUser(agent, 'hello')
  const sessionId = 'quota-settings'
  const settingsFile = join(host.dshHome, 'settings.yaml')

  const initial = await rpc(host, 'settings', { sessionId })
  assert.equal(initial.json.value.cleanup.maxSizeBytes, 4 * GIB, 'default quota: 4 GiB')

  for (const bad of [-1, 1.5, 2 ** 60, '5G']) {
    const res = await rpc(host, 'settings.update', { sessionId, patch: { cleanup: { maxSizeBytes: bad } } })
    assert.equal(res.json.ok, false, `refused: ${bad}`)
    assert.equal(res.json.error.code, 'rewind/bad-request')
    assert.equal(res.json.error.details.field, 'cleanup.maxSizeBytes')
    assert.match(res.json.error.message, /cleanup\.maxSizeBytes must be an integer from 0 to \d+ .*nothing was written/)
  }
  assert.equal((await rpc(host, 'settings', { sessionId })).json.value.cleanup.maxSizeBytes, 4 * GIB, 'a refused value changes nothing')

  const set = await rpc(host, 'settings.update', { sessionId, patch: { cleanup: { maxSizeBytes: 3 * 1024 * 1024 } } })
  assert.equal(set.json.ok, true, JSON.stringify(set.json))
  assert.equal(set.json.value.cleanup.maxSizeBytes, 3 * 1024 * 1024)
  assert.equal(set.json.value.cleanup.maxAgeDays, 30, 'the other cleanup fields are kept')
  assert.match(await readFile(settingsFile, 'utf8'), /maxSizeBytes: 3145728/, 'persisted in DSH\'s settings file')

  const cmd = await host.runCommand(agent, '/snapshot-auto-cleanup max-size 5M')
  assert.equal(cmd.result.kind, 'success', cmd.result.text)
  assert.equal(cmd.result.text, 'Size quota set to 5.0 MiB.')
  assert.match(await readFile(settingsFile, 'utf8'), /maxSizeBytes: 5242880/)
  const shown = await host.runCommand(agent, '/snapshot-auto-cleanup show')
  assert.match(shown.result.text, /\nSize quota: 5\.0 MiB\.$/)

  // Over the largest accepted quota: refused with the field named; the setting stays.
  const over = await host.runCommand(agent, '/snapshot-auto-cleanup max-size 2000T')
  assert.equal(over.result.kind, 'error', over.result.text)
  assert.match(over.result.text, /rewind\/bad-request.*cleanup\.maxSizeBytes must be an integer from 0 to/)
  assert.match(await readFile(settingsFile, 'utf8'), /maxSizeBytes: 5242880/)
  for (const bad of ['max-size', 'max-size lots', 'max-size -1', 'max-size 1 2']) {
    const res = await host.runCommand(agent, `/snapshot-auto-cleanup ${bad}`)
    assert.equal(res.result.kind, 'error', bad)
    assert.match(res.result.text, /^Usage: \/snapshot-auto-cleanup/)
  }

  const off = await host.runCommand(agent, '/snapshot-auto-cleanup max-size 0')
  assert.equal(off.result.text, 'Size quota off.')
  assert.match((await host.runCommand(agent, '/snapshot-auto-cleanup show')).result.text, /\nSize quota: none\.$/)
  assert.equal((await rpc(host, 'settings', { sessionId })).json.value.cleanup.maxSizeBytes, 0)
})

test('the size quota runs with auto-cleanup off (the default): oldest idle first, live kept, what it removed and when reported, the rest packed', async (t) => {
  const host = await bootWithPlugin({
    // The sizes below are the sessions' own backups (the workspace scan's baseline is no session's alone).
    // The age rule stays off, as on a fresh install; the sweep is attempted at every agent creation
    // and message here (`quotaCheckMs: 0`) instead of at most every 10 minutes.
    config: { trackAll: false, cleanup: { enabled: false, maxAgeDays: 30, maxSizeBytes: 100 * 1024 }, quotaCheckMs: 0 },
    script: [
      turn(read('live.txt'), write('live.txt', 'l'), text('live')),
      turn(read('a.txt'), write('a.txt', 'a'), text('a')),
      turn(read('b.txt'), write('b.txt', 'b'), text('b')),
    ],
  })
  t.after(() => host.dispose())
  // Each file exists before its session overwrites it: a 55,000-byte backup per session, of
  // random text (a compaction shrinks it only to about 41 KB).
  for (const f of ['live.txt', 'a.txt', 'b.txt']) await writeFile(join(host.workspace, f), randomBytes(41_250).toString('base64'))
  const live = await host.createAgent('live')
  await host.sendUser(live, 'write live')
  const older = await host.createAgent('older')
  await host.sendUser(older, 'write a')
  const newer = await host.createAgent('newer')
  await host.sendUser(newer, 'write b')
  await host.disposeAgent(older)
  await host.disposeAgent(newer)
  const sessions = join(host.dshHome, 'rewind-snapshots', 'sessions')
  // The live session has the oldest activity of all: the quota must pass over it.
  await ageTree(join(sessions, 'live'), 10)
  await ageTree(join(sessions, 'older'), 3)
  await ageTree(join(sessions, 'newer'), 2)
  const dirs = async () => (await readdir(sessions)).filter(d => !d.startsWith('.')).sort()
  // While every session was live, the quota removed nothing.
  assert.deepEqual(await dirs(), ['live', 'newer', 'older'])
  const before = (await rpc(host, 'storage', { sessionId: 'live' })).json.value
  assert.equal(before.lastQuota, null)
  assert.deepEqual(before.quota, { enabled: true, maxSizeBytes: 100 * 1024 }, 'the quota is on with auto-cleanup off')
  assert.ok(before.totalBytes > 100 * 1024, `the store (${before.totalBytes} B) is over the 100 KiB quota`)
  // What removing it frees, as the storage view counts it (its backup packed by the sweeps so far).
  const olderBytes = before.biggest.find(b => b.sessionId === 'older').ownBytes
  assert.ok(olderBytes >= await du(join(sessions, 'older')) + 40_000, `older: ${olderBytes}`)

  // Let a sweep still running from the last message end, then an agent's creation runs the next.
  await new Promise(r => setTimeout(r, 1000))
  await host.createAgent('trigger')
  let storage
  for (let i = 0; i < 100; i++) {
    storage = (await rpc(host, 'storage', { sessionId: 'live' })).json.value
    if (storage.lastQuota != null) break
    await new Promise(r => setTimeout(r, 50))
  }
  assert.ok(storage.lastQuota, `the quota recorded what it removed: ${JSON.stringify(storage)}`)
  assert.deepEqual((await dirs()).filter(d => d !== 'trigger'), ['live', 'newer'], 'the oldest idle session went; the live one (older still) and the newer one stay')
  assert.equal(storage.lastSweep, null, 'the age rule never ran')
  const { at, freed, bytesAfter, ...quota } = storage.lastQuota
  assert.deepEqual(quota, { trigger: 'auto', maxBytes: 100 * 1024, sessions: ['older'] })
  assert.ok(at > Date.now() - 60_000 && at <= Date.now(), `when: ${at}`)
  // Its backup is counted loose or at its share of a pack (whether the idle compaction packed
  // it before the quota ran depends on timing): something freed, never more than it took.
  assert.ok(freed > 0 && freed <= olderBytes + olderBytes / 100, `freed ${freed}, the session took ${olderBytes}`)
  assert.ok(bytesAfter <= 100 * 1024, `size after the quota: ${bytesAfter}`)
  await quiet(host, 'trigger')
  const now = (await rpc(host, 'storage', { sessionId: 'live' })).json.value
  assert.ok(now.totalBytes <= 100 * 1024 + 4096, `the store fits: ${now.totalBytes}`)
  // The figures the view shows: logical, on disk, their ratio.
  assert.ok(now.logicalBytes >= 80_000 && now.diskBytes > 0 && now.ratio > 0, JSON.stringify(now))
  assert.equal(now.ratio, now.diskBytes / now.logicalBytes)

  // The host log names what the quota removed and freed (cordis keeps the latest messages).
  const logged = host.ctx.logger.buffer.filter(m => m.name === 'dsh-rewind' && typeof m.args[0] === 'string' && m.args[0].includes('the size quota (%s) removed'))
  assert.equal(logged.length, 1, 'one log line for the quota')
  assert.deepEqual(logged[0].args.slice(1, 4), ['100.0 KiB', 1, 'older'])

  const shown = (await host.runCommand(live, '/snapshot-auto-cleanup show')).result.text
  assert.match(shown, /^Snapshot auto-cleanup: off; idle cutoff 30 day\(s\); last sweep: never\./)
  assert.match(shown, /\nSize quota: 100\.0 KiB\.\n/)
  assert.match(shown, /\nThe size quota last removed 1 session\(s\) at \d{4}-\d\d-\d\dT[^,]+, freeing [\d.]+ KiB: older\.$/)
})

test('storage: this workspace, all workspaces, shared backups and the biggest sessions, against the files on disk', async (t) => {
  const other = await realpath(await mkdtemp(join(tmpdir(), 'rewind-other-ws-')))
  const host = await bootWithPlugin({
    script: [turn(read('a.txt'), write('a.txt', 'here\n'), text('here')), turn(read('b.txt'), write('b.txt', 'there\n'), text('there'))],
  })
  t.after(() => host.dispose())
  const shared = 's'.repeat(25_000) // in both workspaces: one backup, used by both
  await writeFile(join(host.workspace, 'a.txt'), 'h'.repeat(30_000))
  await writeFile(join(host.workspace, 'same.txt'), shared)
  await writeFile(join(other, 'b.txt'), 'o'.repeat(20_000))
  await writeFile(join(other, 'same.txt'), shared)
  const here = await host.createAgent('here')
  await host.sendUser(here, 'write a')
  const there = await host.createAgent('there', { cwd: other })
  await host.sendUser(there, 'write b')
  await quiet(host, 'here')
  await quiet(host, 'there')

  const root = join(host.dshHome, 'rewind-snapshots')
  const scanKey = async (dir) => createHash('sha256').update(await realpath(dir)).digest('hex').slice(0, 32)
  const hereScan = join(root, 'workspaces', await scanKey(host.workspace))
  const thereScan = join(root, 'workspaces', await scanKey(other))
  assert.ok((await du(hereScan)) > 0 && (await du(thereScan)) > 0, 'both workspaces were scanned')

  const a = await rpc(host, 'storage', { sessionId: 'here' })
  assert.equal(a.json.ok, true, JSON.stringify(a.json))
  const b = (await rpc(host, 'storage', { sessionId: 'there' })).json.value
  const s = a.json.value
  const total = await du(join(root, 'sessions')) + await du(join(root, 'workspaces')) + await du(join(root, 'blobs'))
  assert.equal(s.totalBytes, total, 'all workspaces: every session, every scan state, every backup once')
  assert.equal(b.totalBytes, total)
  assert.equal(s.sessions, 2)
  assert.equal(s.workspaceSessions, 1)
  assert.equal(s.problems, 0)
  // The shared contents are one backup, counted once: in neither workspace's own figure.
  assert.equal(s.workspaceSharedBytes, shared.length)
  assert.equal(b.workspaceSharedBytes, shared.length)
  assert.equal(s.workspaceBytes + b.workspaceBytes + shared.length, total - s.unreferencedBytes)
  // This workspace's own: its session's records, its scan state, and at least the backup of a.txt's old contents.
  assert.ok(s.workspaceBytes >= await du(join(root, 'sessions', 'here')) + await du(hereScan) + 30_000, JSON.stringify(s))
  assert.ok(b.workspaceBytes >= await du(join(root, 'sessions', 'there')) + await du(thereScan) + 20_000, JSON.stringify(b))

  assert.deepEqual(s.biggest.map(x => x.sessionId).sort(), ['here', 'there'])
  assert.ok(s.biggest[0].bytes >= s.biggest[1].bytes, 'biggest first')
  for (const x of s.biggest) {
    assert.equal(x.inWorkspace, x.sessionId === 'here')
    assert.ok(x.lastActivity > Date.now() - 3_600_000 && x.bytes > 0 && x.ownBytes <= x.bytes, JSON.stringify(x))
  }
  // The quota is on by default, with auto-cleanup (the age rule) off.
  assert.deepEqual(s.quota, { enabled: true, maxSizeBytes: 4 * GIB })
  assert.equal(s.lastSweep, null)
})
