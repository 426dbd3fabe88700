/**
 * The plugin's RPC route on the real DSH web server: history, undo (once, refused when stale),
 * preview, candidates, caps, settings, the Host/Origin fence and the error envelope.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { writeFile, mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { request as httpRequest } from 'node:http'
import z from '@deepseek-ai/schemastery'
import { turn, text, edit, write } from './lib/harness.mjs'
import { threeTurnSession, bootWithPlugin, rpc, snapshot, humanSeq, bytes, FILES } from './plugin-support.mjs'

test('undo over RPC restores the files once; history lists the entry', async (t) => {
  const { host, agent, ws, afterLast } = await threeTurnSession({ sessionId: 'undo-session' })
  t.after(() => host.dispose())
  const sessionId = 'undo-session'
  const middle = humanSeq(agent, 'middle')
  assert.equal((await host.runCommand(agent, `/rewind @${middle}`)).result.kind, 'success')

  const history = await rpc(host, 'history', { sessionId })
  assert.equal(history.status, 200)
  assert.equal(history.json.ok, true, JSON.stringify(history.json))
  const [entry] = history.json.value.entries
  assert.equal(entry.sessionId, sessionId)
  assert.equal(entry.targetSeq, middle)
  assert.equal(entry.outcome, 'done')
  assert.equal(entry.undoable, true)
  assert.deepEqual([...entry.paths.deleted], ['new.txt'])
  assert.match(history.json.value.workspace, /^ws-|^_unknown$/)

  const undo = await rpc(host, 'undo', { sessionId, opId: entry.opId })
  assert.equal(undo.json.ok, true, JSON.stringify(undo.json))
  assert.equal(undo.json.value.kind, 'ok')
  const now = await snapshot(ws, FILES)
  for (const name of FILES) assert.deepEqual(now[name], afterLast[name], `${name} is back to its state before the rewind`)

  const again = await rpc(host, 'undo', { sessionId, opId: entry.opId })
  assert.equal(again.json.ok, false)
  assert.equal(again.json.error.code, 'rewind/already-undone')
  const after = await rpc(host, 'history', { sessionId })
  assert.equal(after.json.value.entries[0].undoOutcome, 'ok')
  assert.equal(after.json.value.entries[0].undoable, false)

  // The file observation was re-synced: the model can edit a restored file right away.
  host.addTurns(turn(edit('notes.txt', 'v3', 'v4'), text('edited after undo')))
  await host.sendUser(agent, 'edit notes again')
  assert.equal((await bytes(join(ws, 'notes.txt'))).toString(), 'v4\n', 'the edit of a restored file is not refused as stale')
})

test('undo is refused as stale (listing the paths) when a restored file changed since', async (t) => {
  const { host, agent, ws } = await threeTurnSession({ sessionId: 'stale-session' })
  t.after(() => host.dispose())
  const sessionId = 'stale-session'
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'middle')}`)).result.kind, 'success')
  await writeFile(join(ws, 'notes.txt'), 'my own edit\n')
  const before = await snapshot(ws, FILES)
  const { json } = await rpc(host, 'history', { sessionId })
  const undo = await rpc(host, 'undo', { sessionId, opId: json.value.entries[0].opId })
  assert.equal(undo.json.ok, false)
  assert.equal(undo.json.error.code, 'rewind/stale-undo')
  assert.ok(undo.json.error.details.paths.includes('notes.txt'), JSON.stringify(undo.json.error))
  assert.deepEqual(await snapshot(ws, FILES), before, 'a refused undo changes nothing')
})

test('preview, candidates, caps, settings and the error envelope', async (t) => {
  const { host, agent } = await threeTurnSession({ sessionId: 'rpc-session' })
  t.after(() => host.dispose())
  const sessionId = 'rpc-session'
  const middle = humanSeq(agent, 'middle')

  const candidates = await rpc(host, 'candidates', { sessionId })
  assert.deepEqual(candidates.json.value.candidates.map(c => c.preview), ['last', 'middle', 'start'])

  const preview = await rpc(host, 'preview', { sessionId, seq: middle })
  assert.equal(preview.json.ok, true, JSON.stringify(preview.json))
  const actions = Object.fromEntries(preview.json.value.files.map(f => [f.path, f.action]))
  assert.equal(actions['new.txt'], 'delete')
  assert.equal(actions['notes.txt'], 'write')
  assert.ok(preview.json.value.uncovered.includes('big.txt'))
  assert.equal(preview.json.value.backupOff, false)

  const caps = await rpc(host, 'caps', { sessionId })
  assert.deepEqual(caps.json.value, { history: true, undo: true, fileCheckpointing: true, backups: true })

  const settings = await rpc(host, 'settings', { sessionId })
  assert.equal(settings.json.value.maxFileBytes, 300)
  const updated = await rpc(host, 'settings.update', { sessionId, patch: { backups: false, cleanup: { maxAgeDays: 7 } } })
  assert.equal(updated.json.ok, true, JSON.stringify(updated.json))
  assert.equal(updated.json.value.backups, false)
  assert.equal(updated.json.value.cleanup.maxAgeDays, 7)
  const previewOff = await rpc(host, 'preview', { sessionId, seq: middle })
  assert.equal(previewOff.json.value.backupOff, true)
  const bad = await rpc(host, 'settings.update', { sessionId, patch: { historyLimit: -1 } })
  assert.equal(bad.json.error.code, 'rewind/bad-request')
  // A key that is no setting, or a value of the wrong type, is refused with its name; nothing is written.
  for (const [patch, field] of [[{ nope: 1 }, 'nope'], [{ backups: 'yes' }, 'backups'], [{ cleanup: { enabled: 1 } }, 'cleanup.enabled'], [{ cleanup: { typo: true } }, 'cleanup.typo'], [{ locale: 'xx' }, 'locale'], [{ cleanup: [] }, 'cleanup']]) {
    const refused = await rpc(host, 'settings.update', { sessionId, patch })
    assert.equal(refused.json.ok, false, JSON.stringify(patch))
    assert.equal(refused.json.error.code, 'rewind/bad-request')
    assert.equal(refused.json.error.details.field, field)
  }
  assert.equal((await rpc(host, 'settings', { sessionId })).json.value.backups, false, 'nothing was written')

  // Error envelope: every failure is HTTP 200 with a stable code.
  const cases = [
    ['nope', { sessionId }, 'rewind/unknown-endpoint'],
    ['history', {}, 'rewind/bad-request'],
    ['history', { sessionId: '' }, 'rewind/bad-request'],
    ['history', { sessionId: 'no-such-session' }, 'rewind/session-not-found'],
    ['preview', { sessionId, seq: -1 }, 'rewind/bad-request'],
    ['undo', { sessionId, opId: 'not-an-op' }, 'rewind/unknown-entry'],
  ]
  for (const [endpoint, body, code] of cases) {
    const res = await rpc(host, endpoint, body)
    assert.equal(res.status, 200)
    assert.equal(res.json.ok, false)
    assert.equal(res.json.error.code, code, `${endpoint} ${JSON.stringify(body)}: ${JSON.stringify(res.json)}`)
    assert.equal(typeof res.json.error.message, 'string')
    assert.equal(typeof res.json.error.details, 'object')
  }

  // The fence: a foreign Host or Origin is refused before anything runs.
  const foreignOrigin = await rpc(host, 'history', { sessionId }, { headers: { origin: 'http://evil.example' } })
  assert.equal(foreignOrigin.status, 403)
  const res = await fetch(`${host.baseUrl}/dsh-rewind/api/history`, { method: 'GET' })
  assert.equal(res.status, 405)
  const form = await fetch(`${host.baseUrl}/dsh-rewind/api/history.clear`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ sessionId }) })
  assert.equal(form.status, 415, 'a simple (non-JSON) cross-site style post is refused')
  // DNS rebinding: the request reaches the loopback port under a foreign name (fetch cannot set
  // Host, node:http can).
  const rebound = await new Promise((resolve, reject) => {
    const url = new URL(`${host.baseUrl}/dsh-rewind/api/history`)
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { host: `attacker.example:${url.port}`, 'content-type': 'application/json' } }, (r) => { r.resume(); resolve(r.statusCode) })
    req.on('error', reject)
    req.end(JSON.stringify({ sessionId }))
  })
  assert.equal(rebound, 403, 'a foreign Host is refused')

  // Restore journals: the rewind's journal is listed completed; only an open one continues or rolls back.
  assert.equal((await host.runCommand(agent, `/rewind @${middle}`)).result.kind, 'success')
  const restores = await rpc(host, 'restores', { sessionId })
  assert.equal(restores.json.value.restores.length, 1)
  const [journal] = restores.json.value.restores
  assert.equal(journal.state, 'completed')
  assert.equal(journal.targetSeq, middle)
  const rollback = await rpc(host, 'restores.rollback', { sessionId, opId: journal.opId })
  assert.equal(rollback.json.ok, false)
  assert.equal(rollback.json.error.code, 'rewind/not-undoable', JSON.stringify(rollback.json))
  assert.equal((await rpc(host, 'restores.continue', { sessionId, opId: 'nope' })).json.error.code, 'rewind/unknown-entry')

  // history.clear removes records only.
  const cleared = await rpc(host, 'history.clear', { sessionId })
  assert.equal(cleared.json.value.cleared, 1)
  assert.deepEqual((await rpc(host, 'history', { sessionId })).json.value.entries, [])
})

test('command output exists in all eight languages and follows the setting', async (t) => {
  const { host, agent } = await threeTurnSession({ sessionId: 'locales-session' })
  t.after(() => host.dispose())
  const headers = new Map()
  for (const locale of ['zh-CN', 'en', 'ja', 'es', 'fr', 'de', 'ru', 'pt-BR']) {
    const updated = await rpc(host, 'settings.update', { sessionId: 'locales-session', patch: { locale } })
    assert.equal(updated.json.ok, true, JSON.stringify(updated.json))
    const listed = (await host.runCommand(agent, '/rewind')).result.text
    const bad = (await host.runCommand(agent, '/rewind @x')).result.text
    const usage = (await host.runCommand(agent, '/snapshot-auto-cleanup nope')).result.text
    for (const out of [listed, bad, usage]) assert.doesNotMatch(out, /\{\w+\}/, `${locale}: unfilled placeholder in ${out}`)
    assert.match(bad, /\[rewind\/bad-target\]/)
    headers.set(locale, listed.split('\n')[0])
  }
  assert.equal(new Set(headers.values()).size, 8, `eight distinct list headers: ${[...headers.values()].join(' | ')}`)
})

test('with the language setting on auto, command output follows DSH\'s interface language', async (t) => {
  const { host, agent } = await threeTurnSession({ sessionId: 'dsh-locale' })
  t.after(() => host.dispose())
  assert.match((await host.runCommand(agent, '/rewind')).result.text, /^Messages you can rewind to/)
  // DSH's own `locale` namespace (registered by its locale plugin in the product composition).
  const scope = host.ctx.settings.register('locale', z.object({ preference: z.union(['zh', 'en']).required(false) }))
  await scope.update({ preference: 'zh' })
  assert.match((await host.runCommand(agent, '/rewind')).result.text, /^可回退到的消息/)
  await scope.update({ preference: 'en' })
  assert.match((await host.runCommand(agent, '/rewind')).result.text, /^Messages you can rewind to/)
})

test('command output follows the language setting', async (t) => {
  const { host, agent } = await threeTurnSession({ sessionId: 'locale-session', config: { locale: 'de' } })
  t.after(() => host.dispose())
  const listed = await host.runCommand(agent, '/rewind')
  assert.match(listed.result.text, /^Nachrichten, zu denen zurückgespult werden kann/)
  const bad = await host.runCommand(agent, '/rewind 1 2')
  assert.match(bad.result.text, /^Zurückspulen fehlgeschlagen \[rewind\/bad-target\]/)
})

test('history is partitioned per workspace, derived host-side from the session', async (t) => {
  const host = await bootWithPlugin({ script: [turn(write('a.txt', 'a\n'), text('a')), turn(text('a2')), turn(write('b.txt', 'b\n'), text('b')), turn(text('b2'))] })
  t.after(() => host.dispose())
  const wsA = await mkdtemp(join(tmpdir(), 'ws-a-'))
  const wsB = await mkdtemp(join(tmpdir(), 'ws-b-'))
  const a = await host.createAgent('session-a', { cwd: wsA })
  await host.sendUser(a, 'first a')
  await host.sendUser(a, 'second a')
  const b = await host.createAgent('session-b', { cwd: wsB })
  await host.sendUser(b, 'first b')
  await host.sendUser(b, 'second b')
  assert.equal((await host.runCommand(a, '/rewind 2')).result.kind, 'success')
  const histA = await rpc(host, 'history', { sessionId: 'session-a' })
  const histB = await rpc(host, 'history', { sessionId: 'session-b' })
  assert.equal(histA.json.value.entries.length, 1)
  assert.deepEqual(histB.json.value.entries, [])
  assert.notEqual(histA.json.value.workspace, histB.json.value.workspace)
  // Another workspace's op id is not found from this session, and nothing is undone.
  const undo = await rpc(host, 'undo', { sessionId: 'session-b', opId: histA.json.value.entries[0].opId })
  assert.equal(undo.json.ok, false)
  assert.equal(undo.json.error.code, 'rewind/unknown-entry')
  assert.equal(await bytes(join(wsA, 'a.txt')), null, 'session A stays rewound')
  assert.equal((await rpc(host, 'history.clear', { sessionId: 'session-b' })).json.value.cleared, 0)
  assert.equal((await rpc(host, 'history', { sessionId: 'session-a' })).json.value.entries.length, 1, 'clearing B leaves A')
})

test('a body over 64 KiB is refused and the same connection serves the next request', async (t) => {
  const { request, Agent } = await import('node:http')
  const host = await bootWithPlugin({ script: [turn(text('hi'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('big-body')
  await host.sendUser(agent, 'hello')
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => keepAlive.destroy())
  const sockets = new Set()
  const post = (body) => new Promise((resolve, reject) => {
    const req = request(`${host.baseUrl}/dsh-rewind/api/history`, { method: 'POST', agent: keepAlive, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c) => { text += c })
      res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(text) }))
    })
    req.on('socket', s => sockets.add(s))
    req.on('error', reject)
    req.end(body)
  })
  const big = await post(JSON.stringify({ sessionId: 'big-body', pad: 'x'.repeat(200 * 1024) }))
  assert.equal(big.status, 200)
  assert.equal(big.json.error.code, 'rewind/bad-request')
  assert.match(big.json.error.message, /over 65536 bytes/)
  const next = await post(JSON.stringify({ sessionId: 'big-body' }))
  assert.equal(next.json.ok, true, JSON.stringify(next.json))
  assert.equal(sockets.size, 1, 'the second request went over the same connection')
})
