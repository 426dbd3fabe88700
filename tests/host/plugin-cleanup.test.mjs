/**
 * `/snapshot-auto-cleanup` on the real host: policy via DSH's settings service, dry run and
 * `--apply`, the current-session mode, and usage errors.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readdir, utimes, stat, writeFile, access, readFile } from 'node:fs/promises'
import { createHash } from 'node:crypto'
import { turn, text, write, read } from './lib/harness.mjs'
import { bootWithPlugin } from './plugin-support.mjs'

async function sessionDirs(dshHome) {
  try {
    return (await readdir(join(dshHome, 'rewind-snapshots', 'sessions'), { withFileTypes: true })).filter(d => d.isDirectory() && !d.name.startsWith('.')).map(d => d.name)
  } catch {
    return []
  }
}

async function ageTree(path, days) {
  const when = new Date(Date.now() - days * 86_400_000)
  const entries = await readdir(path, { withFileTypes: true, recursive: true })
  for (const e of entries) await utimes(join(e.parentPath ?? e.path, e.name), when, when)
  await utimes(path, when, when)
}

test('/snapshot-auto-cleanup: show, on/off, max-age, dry run and --apply', async (t) => {
  const host = await bootWithPlugin({
    // Without the workspace scan: with it, the other session of the same workspace also records
    // the overwritten contents (as a change made outside it), so no blob is the old session's alone.
    config: { trackAll: false },
    script: [turn(read('old.txt'), write('old.txt', 'old\n'), text('old')), turn(write('new.txt', 'new\n'), text('new'))],
  })
  t.after(() => host.dispose())
  // old.txt exists before the old session overwrites it: its before-state is a backup blob
  // that only the old session references (over 16 KiB: a blob file of its own; a smaller
  // backup is kept in the session's record log and goes with the session's directory).
  const staleBytes = 'contents only the old session backed up\n'.repeat(500)
  await writeFile(join(host.workspace, 'old.txt'), staleBytes)
  const hex = createHash('sha256').update(staleBytes).digest('hex')
  const blob = join(host.dshHome, 'rewind-snapshots', 'blobs', hex) // flat layout: blobs/<sha256>
  const old = await host.createAgent('old-session')
  await host.sendUser(old, 'write old')
  await access(blob)
  const current = await host.createAgent('current-session')
  await host.sendUser(current, 'write new')
  const dirsBefore = await sessionDirs(host.dshHome)
  assert.equal(dirsBefore.length, 2, `two session snapshot dirs: ${dirsBefore}`)
  await host.disposeAgent(old)
  const oldDir = dirsBefore.find(d => d.includes('old'))
  await ageTree(join(host.dshHome, 'rewind-snapshots', 'sessions', oldDir), 40)

  const show = await host.runCommand(current, '/snapshot-auto-cleanup show')
  assert.match(show.result.text, /Snapshot auto-cleanup: off; idle cutoff 30 day\(s\); last sweep: never\./)
  assert.match((await host.runCommand(current, '/snapshot-auto-cleanup on')).result.text, /is now on/)
  assert.match((await host.runCommand(current, '/snapshot-auto-cleanup max-age 10')).result.text, /10 day/)
  assert.match((await host.runCommand(current, '/snapshot-auto-cleanup show')).result.text, /on; idle cutoff 10 day/)

  const dry = await host.runCommand(current, '/snapshot-auto-cleanup run')
  assert.equal(dry.result.kind, 'success', dry.result.text)
  assert.match(dry.result.text, /^Dry run: 1 session snapshot/)
  assert.match(dry.result.text, /old-session/)
  assert.deepEqual((await sessionDirs(host.dshHome)).sort(), dirsBefore.sort(), 'a dry run deletes nothing')

  const applied = await host.runCommand(current, '/snapshot-auto-cleanup run --apply')
  assert.match(applied.result.text, /^Removed 1 session snapshot/)
  const left = await sessionDirs(host.dshHome)
  assert.equal(left.length, 1)
  assert.ok(!left.includes(oldDir), 'the idle session is gone; the active one stays')
  await assert.rejects(access(blob), 'the backup only the removed session used is freed')

  const currentDry = await host.runCommand(current, '/snapshot-auto-cleanup run --current')
  assert.match(currentDry.result.text, /current-session/)
  assert.equal((await sessionDirs(host.dshHome)).length, 1)

  for (const bad of ['bogus', 'max-age -3', 'max-age x', 'run --force', 'on now']) {
    const res = await host.runCommand(current, `/snapshot-auto-cleanup ${bad}`)
    assert.equal(res.result.kind, 'error', bad)
    assert.match(res.result.text, /^Usage: \/snapshot-auto-cleanup/)
  }
})

test('the automatic sweep runs at agent creation when enabled, at most once a day', async (t) => {
  // An earlier run left the snapshots of a session that has been idle for 6 days.
  const first = await bootWithPlugin({ script: [turn(write('old.txt', 'old\n'), text('old'))] })
  const old = await first.createAgent('stale-session')
  await first.sendUser(old, 'write old')
  await first.dispose()
  const home = first.dshHome
  await ageTree(join(home, 'rewind-snapshots', 'sessions', 'stale-session'), 6)

  const host = await bootWithPlugin({ dshHome: home, config: { cleanup: { enabled: true, maxAgeDays: 5 } }, script: [turn(text('new')), turn(text('other'))] })
  t.after(() => host.dispose())
  const fresh = await host.createAgent('fresh-session')
  await host.sendUser(fresh, 'hello')
  let shown
  for (let i = 0; i < 50; i++) {
    // The sweep runs in the background of agent creation; wait for its record.
    shown = (await host.runCommand(fresh, '/snapshot-auto-cleanup show')).result.text
    if (!/last sweep: never/.test(shown)) break
    await new Promise(r => setTimeout(r, 50))
  }
  assert.match(shown, /on; idle cutoff 5 day\(s\); last sweep: \d{4}-/)
  assert.ok(!(await sessionDirs(home)).includes('stale-session'), 'the idle session was swept')
  assert.ok((await sessionDirs(home)).includes('fresh-session'), 'the active session stays')

  // Not due again within a day: another idle directory stays until tomorrow.
  const other = await host.createAgent('another-stale')
  await host.sendUser(other, 'hi')
  await host.disposeAgent(other)
  await ageTree(join(home, 'rewind-snapshots', 'sessions', 'another-stale'), 6)
  await host.createAgent('third')
  await new Promise(r => setTimeout(r, 200))
  assert.ok((await sessionDirs(home)).includes('another-stale'), 'at most one automatic sweep a day')
})

test('without a settings service the cleanup policy fails closed', async (t) => {
  const host = await bootWithPlugin({ settings: false, script: [turn(text('hi'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('no-settings')
  await host.sendUser(agent, 'hello')
  for (const line of ['show', 'on', 'max-age 3', 'run', 'run --apply', 'run --current --apply']) {
    const res = await host.runCommand(agent, `/snapshot-auto-cleanup ${line}`)
    assert.match(res.result.text, /unavailable: this host has no settings service/, line)
  }
})

test('a sweep keeps the snapshots of a live forked session’s ancestors', async (t) => {
  const host = await bootWithPlugin({
    script: [turn(write('a.txt', 'one\n'), text('first')), turn(write('b.txt', 'two\n'), text('second'))],
  })
  t.after(() => host.dispose())
  const parent = await host.createAgent('fork-source')
  await host.sendUser(parent, 'first')
  await host.sendUser(parent, 'second')
  const second = parent.session.events.find(e => e.type === 'user/message' && e.data.source?.kind === 'user' && e.data.content?.[0]?.text === 'second').seq
  const { result } = await host.runCommand(parent, `/rewind --fork @${second}`)
  assert.equal(result.kind, 'success', result.text)
  const childId = /new session (session-[0-9a-f-]+)/.exec(result.text)[1]
  const child = host.ctx.agents.get(childId)
  assert.ok(child)
  // The parent goes idle for long; the child stays live and still reads the parent's records.
  await host.disposeAgent(parent)
  await ageTree(join(host.dshHome, 'rewind-snapshots', 'sessions', 'fork-source'), 40)
  assert.match((await host.runCommand(child, '/snapshot-auto-cleanup max-age 10')).result.text, /10 day/)
  const applied = await host.runCommand(child, '/snapshot-auto-cleanup run --apply')
  assert.equal(applied.result.kind, 'success', applied.result.text)
  assert.ok((await sessionDirs(host.dshHome)).includes('fork-source'), `the fork's ancestor is kept: ${applied.result.text}`)
})

test('the sweep removes the scan state of another workspace whose last session it removed; a session there builds a new baseline', async (t) => {
  // The first host works in one workspace, then closes.
  const first = await bootWithPlugin({ script: [turn(write('a.txt', 'by the old session\n'), text('a'))] })
  // Over 16 KiB: the baseline keeps it in a blob file of its own.
  const kept = 'a file only the workspace scan baseline keeps\n'.repeat(500)
  await writeFile(join(first.workspace, 'kept.txt'), kept)
  const blob = join(first.dshHome, 'rewind-snapshots', 'blobs', createHash('sha256').update(kept).digest('hex'))
  const spaces = join(first.dshHome, 'rewind-snapshots', 'workspaces')
  const old = await first.createAgent('old-session')
  await first.sendUser(old, 'write a')
  await access(blob)
  const [key] = await readdir(spaces)
  await first.dispose()
  const [oldDir] = await sessionDirs(first.dshHome)
  await ageTree(join(first.dshHome, 'rewind-snapshots', 'sessions', oldDir), 40)
  // Unwritten for a day: past the hour a workspace no session names is kept for.
  await ageTree(join(spaces, key), 1)

  // A host in another workspace, on the same DSH home, sweeps.
  const host = await bootWithPlugin({ dshHome: first.dshHome, script: [turn(write('b.txt', 'by the current one\n'), text('b'))] })
  t.after(() => host.dispose())
  const current = await host.createAgent('current-session')
  const applied = await host.runCommand(current, '/snapshot-auto-cleanup run --apply')
  assert.match(applied.result.text, /^Removed 1 session snapshot/, applied.result.text)
  assert.deepEqual(await sessionDirs(host.dshHome), ['current-session'])
  await assert.rejects(access(join(spaces, key)), 'no session names the first workspace any more: its scan state is gone')
  await assert.rejects(access(blob), 'with the content only its baseline kept')
  assert.equal((await readdir(spaces)).length, 1, 'the current workspace keeps its own')

  // A session in the first workspace again: a new baseline, and its changes come back.
  const again = await bootWithPlugin({ dshHome: first.dshHome, workspace: first.workspace, script: [turn(read('kept.txt'), write('kept.txt', 'overwritten\n'), text('c'))] })
  t.after(() => again.dispose())
  const back = await again.createAgent('back-session')
  await again.sendUser(back, 'overwrite kept.txt')
  await access(join(spaces, key, 'index.bin'))
  await access(blob)
  assert.equal(await readFile(join(first.workspace, 'kept.txt'), 'utf8'), 'overwritten\n')
  const listed = await again.runCommand(back, '/rewind')
  const seq = /@(\d+) overwrite kept\.txt/.exec(listed.result.text)?.[1]
  assert.ok(seq, listed.result.text)
  const rewound = await again.runCommand(back, `/prompt-rewind @${seq}`)
  assert.equal(rewound.result.kind, 'success', rewound.result.text)
  assert.equal(await readFile(join(first.workspace, 'kept.txt'), 'utf8'), kept, 'the new baseline brings it back')
})
