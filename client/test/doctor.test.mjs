// The Compatibility block of the Rewind history page: the `doctor` answer checked and rendered
// (an ok report, a degraded one, a failing call), over the real `rpc` with a stubbed fetch.
import { test, afterEach } from 'node:test'
import assert from 'node:assert/strict'
import { BadDoctorReport, compatView, loadDoctor, parseDoctorReport } from '../.test-build/doctor.mjs'
import { bindLocale } from '../.test-build/i18n.mjs'

const en = bindLocale('en')
const realFetch = globalThis.fetch
afterEach(() => { globalThis.fetch = realFetch })

/** Answer every request with `body` (status 200 unless given); records the requests. */
function answer(body, status = 200) {
  const requests = []
  globalThis.fetch = async (url, init) => {
    requests.push({ url, body: JSON.parse(init.body) })
    return { status, json: async () => (typeof body === 'function' ? body() : body) }
  }
  return requests
}

const found = (name, effect) => ({ name, status: 'found', detail: `${name} found`, effect })
const OK = {
  dshVersion: '0.1.0-rc.8',
  sessionFormat: 0,
  contracts: [found('session log', 'rewinds can read the conversation'), found('fs service', 'write-tool calls are backed up before they write')],
  faults: [],
  overall: 'ok',
}
const DEGRADED = {
  sessionFormat: 2,
  contracts: [
    found('session log', 'rewinds can read the conversation'),
    { name: 'fs service', status: 'missing', detail: 'ctx.fs (processPath, resolve, stat)', effect: 'write-tool calls are not backed up; shell scans still run' },
    { name: 'settings', status: 'degraded', detail: 'no settings.register (DSH 0.1.7+)', effect: 'settings are read from the plugin\'s config' },
    { name: 'replace op', status: 'missing', detail: '?', effect: '' },
  ],
  faults: [{ where: 'tools/execute', effect: 'the workspace scan around a tool call', message: 'boom\nsecond line', count: 3, since: 1700000000000 }],
  overall: 'degraded',
}

test('an ok report: one line, the DSH version and session format in small text', async () => {
  const requests = answer({ ok: true, value: OK })
  const state = await loadDoctor('S1')
  assert.deepEqual(requests, [{ url: '/dsh-rewind/api/doctor', body: { sessionId: 'S1' } }])
  assert.equal(state.status, 'ready')
  const view = compatView(en, state)
  assert.equal(view.kind, 'ok')
  assert.equal(view.title, 'Compatibility')
  assert.equal(view.headline, 'Everything works on this DSH.')
  assert.equal(view.meta, 'DSH 0.1.0-rc.8 · session format 0')
  assert.deepEqual(view.contracts, [])
  assert.deepEqual(view.faults, [])
  assert.equal(view.faultsTitle, undefined)
  // The plugin locale, not English, for the block's own words.
  const de = compatView(bindLocale('de'), state)
  assert.equal(de.title, 'Kompatibilität')
  assert.equal(de.headline, 'Auf diesem DSH funktioniert alles.')
  assert.equal(de.meta, 'DSH 0.1.0-rc.8 · Sitzungsformat 0')
})

test('a degraded report: the missing and degraded contracts with their effect, the faults contained', async () => {
  answer({ ok: true, value: DEGRADED })
  const view = compatView(en, await loadDoctor('S1'))
  assert.equal(view.kind, 'degraded')
  assert.equal(view.headline, 'Some features degrade on this DSH:')
  assert.equal(view.meta, 'DSH version not known · session format 2')
  assert.deepEqual(view.contracts.map(c => [c.name, c.status, c.text]), [
    ['fs service', 'missing', 'fs service (missing): write-tool calls are not backed up; shell scans still run'],
    ['settings', 'degraded', 'settings (degraded): settings are read from the plugin\'s config'],
    ['replace op', 'missing', 'replace op (missing)'],
  ])
  assert.equal(view.contracts[0].detail, 'ctx.fs (processPath, resolve, stat)')
  assert.equal(view.faultsTitle, 'Faults contained, the host was not affected (1):')
  // A host message never splits the line.
  assert.deepEqual(view.faults, [{ where: 'tools/execute', count: 3, text: 'tools/execute: boom second line (3×)' }])
  const zh = compatView(bindLocale('zh-CN'), await loadDoctor('S1'))
  assert.equal(zh.contracts[0].text, 'fs service（缺失）：write-tool calls are not backed up; shell scans still run')
  assert.equal(zh.faults[0].text, 'tools/execute：boom second line（3 次）')
})

test('"ok" from the host with a contract not found still lists it', () => {
  const view = compatView(en, { status: 'ready', report: parseDoctorReport({ ...OK, contracts: [{ name: 'web server', status: 'missing', detail: '', effect: 'no browser UI' }] }) })
  assert.equal(view.kind, 'degraded')
  assert.deepEqual(view.contracts.map(c => c.text), ['web server (missing): no browser UI'])
})

test('a failing call leaves a short note and never rejects', async () => {
  globalThis.fetch = async () => { throw new TypeError('Failed to fetch') }
  const down = await loadDoctor('S1')
  assert.deepEqual(down, { status: 'error', message: 'Failed to fetch' })
  const view = compatView(en, down)
  assert.equal(view.kind, 'failed')
  assert.equal(view.headline, 'The compatibility check could not run: Failed to fetch')
  assert.deepEqual([view.meta, view.contracts, view.faults], [undefined, [], []])

  answer({ ok: false, error: { code: 'rewind/failed', message: 'the doctor is not wired on this host' } }, 500)
  assert.equal(compatView(en, await loadDoctor('S1')).headline, 'The compatibility check could not run: the doctor is not wired on this host')

  answer(() => { throw new SyntaxError('Unexpected token <') }, 502)
  assert.equal(compatView(en, await loadDoctor('S1')).headline, 'The compatibility check could not run: HTTP 502 without a JSON body')

  // A malformed answer is a failure too, named.
  answer({ ok: true, value: { ...OK, overall: 'fine' } })
  const bad = await loadDoctor('S1')
  assert.equal(bad.status, 'error')
  assert.match(bad.message, /^malformed doctor report: overall/)
})

test('a host without the endpoint: no block at all; loading: no block', async () => {
  answer({ ok: false, error: { code: 'rewind/unknown-endpoint', message: 'unknown endpoint doctor' } }, 404)
  const state = await loadDoctor('S1')
  assert.deepEqual(state, { status: 'unsupported' })
  assert.equal(compatView(en, state), undefined)
  assert.equal(compatView(en, undefined), undefined)
})

test('parseDoctorReport names the first wrong field', () => {
  const bad = (value, pattern) => assert.throws(() => parseDoctorReport(value), (e) => e instanceof BadDoctorReport && e.name === 'BadDoctorReport' && pattern.test(e.message))
  bad(null, /not an object/)
  bad({ ...OK, contracts: 'x' }, /contracts is not a list/)
  bad({ ...OK, faults: undefined }, /faults is not a list/)
  bad({ ...OK, dshVersion: 8 }, /dshVersion is not a string/)
  bad({ ...OK, sessionFormat: 'two' }, /sessionFormat is not a number/)
  bad({ ...OK, contracts: [{ name: 'x', status: 'gone' }] }, /contracts\[0\]/)
  bad({ ...OK, faults: [{ where: 'w' }] }, /faults\[0\]/)
  // Optional fields: null reads as not known; missing detail / effect / count get defaults.
  const r = parseDoctorReport({ ...OK, dshVersion: null, sessionFormat: null, contracts: [{ name: 'x', status: 'found' }], faults: [{ where: 'w', message: 'm' }] })
  assert.equal(r.dshVersion, undefined)
  assert.equal(r.sessionFormat, undefined)
  assert.deepEqual(r.contracts, [{ name: 'x', status: 'found', detail: '', effect: '' }])
  assert.deepEqual(r.faults, [{ where: 'w', effect: '', message: 'm', count: 1, since: 0 }])
})
