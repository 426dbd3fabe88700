/**
 * Fixes found by probing the crash work, on the real host (real DSH 0.1.0-rc.8 spine, real web
 * server, real files; the scripted model is the only fake): numeric settings out of range, a file
 * name with a newline in the durable report, a damaged history.json, one unreadable restore
 * journal among good ones.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { turn, text, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, rpc } from './plugin-support.mjs'

async function twoTurns(t, sessionId, { extra = [] } = {}) {
  const host = await bootWithPlugin({
    script: [
      turn(write('a.txt', 'v1\n'), text('one')),
      turn(read('a.txt'), edit('a.txt', 'v1', 'v2'), ...extra, text('two')),
      turn(text('three')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent(sessionId)
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  return { host, agent }
}

async function findFiles(root, name) {
  const out = []
  const walk = async (dir) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) await walk(p)
      else if (name(e.name, p)) out.push(p)
    }
  }
  await walk(root)
  return out
}

test('settings.update refuses every numeric setting out of its range, naming the field and the range, and writes nothing', async (t) => {
  const { host } = await twoTurns(t, 'settings-range')
  const sessionId = 'settings-range'
  const yaml = join(host.dshHome, 'settings.yaml')
  const before = await readFile(yaml, 'utf8').catch(() => '')
  const cases = [
    [{ maxFileBytes: 1e300 }, 'maxFileBytes', 0, 4294967296],
    [{ maxFileBytes: -1 }, 'maxFileBytes', 0, 4294967296],
    [{ maxFileBytes: 1.5 }, 'maxFileBytes', 0, 4294967296],
    [{ maxFileBytes: '10' }, 'maxFileBytes', 0, 4294967296],
    [{ historyLimit: 0 }, 'historyLimit', 1, 1000],
    [{ historyLimit: 1001 }, 'historyLimit', 1, 1000],
    [{ cleanup: { maxAgeDays: 0 } }, 'cleanup.maxAgeDays', 1, 3650],
    [{ cleanup: { maxAgeDays: 1e9 } }, 'cleanup.maxAgeDays', 1, 3650],
  ]
  for (const [patch, field, min, max] of cases) {
    const { json } = await rpc(host, 'settings.update', { sessionId, patch })
    assert.equal(json.ok, false, JSON.stringify(patch))
    assert.equal(json.error.code, 'rewind/bad-request')
    assert.deepEqual(json.error.details, { field, min, max })
    assert.ok(json.error.message.startsWith(`${field} must be an integer from ${min} to ${max}`), json.error.message)
    assert.equal(await readFile(yaml, 'utf8').catch(() => ''), before, `${JSON.stringify(patch)} wrote settings.yaml`)
  }
  const settings = (await rpc(host, 'settings', { sessionId })).json.value
  assert.equal(settings.maxFileBytes, 8 * 1024 * 1024)
  // The edges are accepted.
  const ok = await rpc(host, 'settings.update', { sessionId, patch: { maxFileBytes: 4294967296, historyLimit: 1000, cleanup: { maxAgeDays: 3650 } } })
  assert.equal(ok.json.ok, true, JSON.stringify(ok.json))
  assert.equal(ok.json.value.maxFileBytes, 4294967296)
})

test('a file name with a newline cannot split or forge a line of the durable report', async (t) => {
  const evil = 'evil\nFailed (0):\n- none\u2028x'
  const { host, agent } = await twoTurns(t, 'newline-name', { extra: [write(evil, 'agent\n')] })
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  const lines = result.text.split('\n')
  assert.ok(lines.includes('- evil\\x0aFailed (0):\\x0a- none\\u2028x'), result.text)
  // Exactly one Failed section, and every line is one of the report's own shapes.
  assert.equal(lines.filter(l => l.startsWith('Failed (')).length, 1, result.text)
  assert.equal(lines.filter(l => l === '- none').length, 2, result.text) // Skipped and Failed are empty
  // The command report DSH logged (command/done) is the same escaped text.
  const done = agent.session.events.filter(e => e.type === 'command/done').at(-1)
  assert.ok(JSON.stringify(done).includes('evil\\\\x0aFailed'), JSON.stringify(done))
})

test('a damaged history.json lists what can be read, says it is damaged, and the next rewind keeps those entries', async (t) => {
  const { host, agent } = await twoTurns(t, 'damaged-history')
  const sessionId = 'damaged-history'
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'three')}`)).result.kind, 'success')
  const first = (await rpc(host, 'history', { sessionId })).json.value
  assert.equal(first.entries.length, 1)
  assert.equal(first.damaged, undefined)
  const [file] = await findFiles(join(host.dshHome, 'rewind-history'), n => n === 'history.json')
  const good = JSON.parse(await readFile(file, 'utf8'))
  // A second entry with a field of the wrong type: the file no longer parses as a whole.
  good.entries.push({ ...good.entries[0], opId: 'broken', targetSeq: 'x' })
  await writeFile(file, JSON.stringify(good))
  const damaged = (await rpc(host, 'history', { sessionId })).json
  assert.equal(damaged.ok, true, JSON.stringify(damaged))
  assert.deepEqual(damaged.value.entries.map(e => e.opId), [first.entries[0].opId])
  assert.equal(damaged.value.damaged.code, 'rewind/history-corrupt')
  assert.equal(damaged.value.damaged.dropped, 1)
  assert.match(damaged.value.damaged.detail, /invalid type/)
  // The next rewind keeps the readable entry (the damaged bytes are kept aside).
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)).result.kind, 'success')
  const after = (await rpc(host, 'history', { sessionId })).json.value
  assert.equal(after.damaged, undefined)
  assert.equal(after.entries.length, 2)
  assert.equal(after.entries[1].opId, first.entries[0].opId)
  const aside = await findFiles(join(host.dshHome, 'rewind-history'), n => n.startsWith('history.json.corrupt-'))
  assert.equal(aside.length, 1)
  // Bytes that are not JSON at all: an empty page that says so.
  await writeFile(file, '\u0000not json')
  const garbage = (await rpc(host, 'history', { sessionId })).json.value
  assert.deepEqual(garbage.entries, [])
  assert.equal(garbage.damaged.code, 'rewind/history-corrupt')
})

test('one unreadable restore journal is named and does not hide the others', async (t) => {
  const { host, agent } = await twoTurns(t, 'bad-journal')
  const sessionId = 'bad-journal'
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)).result.kind, 'success')
  const ok = (await rpc(host, 'restores', { sessionId })).json
  assert.equal(ok.ok, true, JSON.stringify(ok))
  assert.equal(ok.value.restores.length, 1)
  const [intent] = await findFiles(join(host.dshHome, 'rewind-snapshots'), (n, p) => p.includes('/journals/') && n.endsWith('.json'))
  await writeFile(join(intent, '..', 'bogus.json'), '{"version": 1, "opId": ')
  const listed = (await rpc(host, 'restores', { sessionId })).json
  assert.equal(listed.ok, true, JSON.stringify(listed))
  const states = listed.value.restores.map(r => [r.state, r.opId])
  assert.equal(states.length, 2, JSON.stringify(states))
  assert.equal(listed.value.restores[0].opId, ok.value.restores[0].opId)
  assert.equal(listed.value.restores[0].state, 'completed')
  assert.equal(listed.value.restores[1].state, 'unreadable')
  assert.equal(listed.value.restores[1].opId, 'bogus')
  assert.match(listed.value.restores[1].error, /bogus/)
})
