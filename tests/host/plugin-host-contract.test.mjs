/**
 * The plugin on the newer DSH session contract and with faults injected, on the real rc.8 spine.
 *
 * The newer contract is `lib/newer-contract.mjs`, a documented shim that shows the plugin the
 * session contract of DSH 0.1.2+ (no `events`; `snapshotEvents` / `eventAt`; header version 3 or
 * 4 with `isSeeded`; replace ops `{op, startSeq, endSeq}` with the other spelling refused; format
 * 4's source admission; settings without `register`) over the real rc.8 objects. It is not a real
 * newer host. The fault tests run on the plain rc.8 spine (or the shim where the fault is a
 * contract): in each, sessions open, turns run, DSH sees no exception from the plugin, and the
 * degraded state is reported.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { turn, text, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, humanIndex, textOf, rpc, pluginSettled } from './plugin-support.mjs'

const MARKER_KIND = 'dsh-prompt-rewind'

function script() {
  return [
    turn(write('a.txt', 'one\n'), text('wrote a')),
    turn(read('a.txt'), edit('a.txt', 'one', 'two'), write('b.txt', 'bee\n'), text('edited a, wrote b')),
    turn(text('after the rewind')),
    turn(text('in the undo session')),
  ]
}

/**
 * Every log message from here on, warnings and debug lines included (cordis' own buffer keeps
 * only what a logger's level lets through: info and below by default).
 */
const logs = new WeakMap()
function captureLog(host) {
  const lines = []
  host.ctx.logger.exporter({ levels: { default: 3 }, export: m => lines.push(m) })
  logs.set(host, lines)
  return lines
}

/** Log lines of DSH (not the plugin's own logger) that tell of a plugin listener failing. */
function hostSawFaults(host) {
  return (logs.get(host) ?? []).filter((m) => {
    if (m.name === 'dsh-rewind') return false
    const line = m.args.map(a => (a instanceof Error ? a.stack : String(a))).join(' ')
    return /listener (threw|rejected)|dsh-rewind|injected fault|Cannot read properties of undefined/.test(line)
  })
}

/** The plugin's "degraded" lines. */
function degradedLines(host) {
  return (logs.get(host) ?? []).filter(m => m.name === 'dsh-rewind' && typeof m.args[0] === 'string' && m.args[0].startsWith('degraded'))
}

async function twoTurns(host, id) {
  if (!logs.has(host)) captureLog(host)
  const agent = await host.createAgent(id)
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  await pluginSettled(host, agent)
  return agent
}

for (const format of [3, 4]) {
  test(`newer contract, format ${format}: a session opens, turns run, /rewind restores files and conversation, undo works`, async (t) => {
    const host = await bootWithPlugin({ script: script(), contract: { format } })
    t.after(() => host.dispose())
    const ws = host.workspace
    const agent = await twoTurns(host, `newer-${format}`)
    assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'two\n')
    assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'bee\n')

    const second = humanSeq(agent, 'second')
    const { result } = await host.runCommand(agent, `/rewind @${second}`)
    assert.equal(result.kind, 'success', result.text)
    assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'one\n', 'a.txt is back')
    await assert.rejects(readFile(join(ws, 'b.txt')), { code: 'ENOENT' }, 'b.txt, made after the target, is gone')

    // The marker went through the newer spelling (the shim refuses the other) and is in the log.
    const marker = agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === MARKER_KIND)
    assert.ok(marker, 'the marker is in the log')
    assert.equal(marker.surfaceOp.start, second)

    // The model's next request holds the messages before the target, then the marker; not "second".
    await host.sendUser(agent, 'after')
    const next = host.adapter.requests.at(-1).messages
    assert.ok(humanIndex(next, 'first') >= 0)
    assert.equal(humanIndex(next, 'second'), -1, 'the rewound message does not reach the model')

    // Undo: the files come back and the conversation before the rewind opens in a new session.
    const undo = await host.runCommand(agent, '/rewind undo')
    assert.equal(undo.result.kind, 'success', undo.result.text)
    assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'two\n')
    assert.equal(await readFile(join(ws, 'b.txt'), 'utf8'), 'bee\n')
    const children = host.ctx.agents.list().filter(a => a.session.header.parentSession === `newer-${format}`)
    assert.equal(children.length, 1, 'one undo session')
    // The child was created with the newer lineage (isSeeded + inheritedEventCount), which the
    // shim hands rc.8 as its seedLength.
    assert.ok(children[0].session.header.seedLength > 0)
    assert.ok(children[0].session.events.some(e => e.type === 'user/message' && textOf(e.data) === 'second'))

    const doctor = await host.runCommand(agent, '/rewind doctor')
    assert.equal(doctor.result.kind, 'success')
    assert.match(doctor.result.text, /DSH 0\.1\.0-rc\.8, session format /, 'the DSH packages\' version is read')
    assert.match(doctor.result.text, new RegExp(`session format ${format}`))
    assert.match(doctor.result.text, /✓ session log: `snapshotEvents\(\)`/)
    assert.match(doctor.result.text, /\{op, startSeq, endSeq\}/)
    assert.match(doctor.result.text, /isSeeded/)
    assert.match(doctor.result.text, /! settings: no settings.register/)

    assert.deepEqual(host.errors, [])
    assert.deepEqual(hostSawFaults(host), [])
  })
}

test('newer contract: a fork rewind creates a seeded child without seedLength', async (t) => {
  const host = await bootWithPlugin({ script: [...script().slice(0, 2), turn(text('in the child'))], contract: { format: 4 } })
  t.after(() => host.dispose())
  const agent = await twoTurns(host, 'fork-newer')
  const second = humanSeq(agent, 'second')
  const { result } = await host.runCommand(agent, `/rewind --fork @${second}`)
  assert.equal(result.kind, 'success', result.text)
  const child = host.ctx.agents.list().find(a => a.session.header.parentSession === 'fork-newer')
  assert.ok(child, 'the child exists')
  // The shim handed rc.8 the plugin's inheritedEventCount as the child's inherited prefix: the
  // events before the target's turn, the same in parent and child.
  const n = child.session.header.seedLength
  assert.ok(n > 0 && n <= second, `inherited prefix ${n}`)
  assert.deepEqual(child.session.events.slice(0, n).map(e => e.seq), agent.session.events.slice(0, n).map(e => e.seq))
  assert.ok(!child.session.events.some(e => e.type === 'user/message' && textOf(e.data) === 'second'))
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'one\n')
  assert.deepEqual(hostSawFaults(host), [])
})

test('a header that misstates its format: the refused spelling is retried once with the other', async (t) => {
  // The shim refuses `{start, end}` while the header says version 0: the plugin's first try uses
  // the old spelling, the host refuses it before writing, the second try succeeds.
  const host = await bootWithPlugin({ script: script(), contract: { format: 3, headerVersion: 0 } })
  t.after(() => host.dispose())
  const agent = await twoTurns(host, 'retry')
  const before = agent.session.events.length
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'second')}`)
  assert.equal(result.kind, 'success', result.text)
  const markers = agent.session.events.slice(before).filter(e => e.data?.source?.kind === MARKER_KIND)
  assert.equal(markers.length, 1, 'exactly one marker')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'one\n')
})

test('fault: a session with no log reader — sessions open, turns run, /rewind names the missing contract', async (t) => {
  const host = await bootWithPlugin({ script: script(), contract: { format: 3, logReaders: false } })
  t.after(() => host.dispose())
  const agent = await twoTurns(host, 'no-reader')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n', 'the turns ran')
  const { result } = await host.runCommand(agent, '/rewind 1')
  assert.equal(result.kind, 'error')
  assert.match(result.text, /rewind\/host-unsupported/)
  const doctor = await host.runCommand(agent, '/rewind doctor')
  assert.match(doctor.result.text, /✗ session log/)
  assert.match(doctor.result.text, /Faults contained/)
  assert.ok(degradedLines(host).length > 0, 'the degraded state is in the host log')
  assert.deepEqual(host.errors, [])
  assert.deepEqual(hostSawFaults(host), [])
})

test('fault: a store directory that cannot be written — sessions open, turns run, the host is unaffected', async (t) => {
  const host = await bootWithPlugin({ script: script() })
  t.after(async () => {
    try { execFileSync('chattr', ['-i', store]) } catch {}
    await host.dispose()
  })
  const store = join(host.dshHome, 'rewind-snapshots')
  await mkdir(store, { recursive: true })
  execFileSync('chattr', ['+i', store])
  const agent = await twoTurns(host, 'ro-store')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n', 'the tools wrote through')
  assert.equal(await readFile(join(host.workspace, 'b.txt'), 'utf8'), 'bee\n')
  const doctor = await host.runCommand(agent, '/rewind doctor')
  assert.equal(doctor.result.kind, 'success')
  assert.match(doctor.result.text, /✗ snapshot store: .*Operation not permitted/, 'the doctor names the store\'s fault')
  assert.deepEqual(host.errors, [])
  assert.deepEqual(hostSawFaults(host), [])
  // The conversation half still answers.
  const listed = await host.runCommand(agent, '/rewind')
  assert.equal(listed.result.kind, 'success', listed.result.text)
  assert.match(listed.result.text, /second/)
})

test('fault: a corrupt settings value — sessions open, turns run, the defaults apply', async (t) => {
  const dshHome = await (await import('node:fs/promises')).mkdtemp(join((await import('node:os')).tmpdir(), 'rewind-dsh-'))
  await writeFile(join(dshHome, 'settings.yaml'), 'dsh-rewind: 17\n')
  const host = await bootWithPlugin({ script: script(), dshHome })
  t.after(() => host.dispose())
  const agent = await twoTurns(host, 'bad-settings')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'second')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'one\n', 'backups were on (the default)')
  assert.deepEqual(host.errors, [])
  assert.deepEqual(hostSawFaults(host), [])
  const settings = await rpc(host, 'settings', { sessionId: 'bad-settings' })
  assert.equal(settings.json.ok, true)
  assert.equal(settings.json.value.backups, true)
})

test('the RPC fence: the served authority over https and a configured bind literal are the host\'s own', async () => {
  const { trustedRequest } = await import('../../lib/index.js')
  const req = (peer, host, origin) => ({ socket: peer === null ? undefined : { remoteAddress: peer }, headers: { host, ...(origin === undefined ? {} : { origin }) } })
  // rc.8: loopback, plain http.
  assert.equal(trustedRequest(req('127.0.0.1', '127.0.0.1:4000', 'http://127.0.0.1:4000'), { port: 4000, host: '127.0.0.1' }), true)
  assert.equal(trustedRequest(req('127.0.0.1', '127.0.0.1:4000', 'https://127.0.0.1:4000'), { port: 4000, host: '127.0.0.1' }), false, 'https is not this listener\'s scheme')
  assert.equal(trustedRequest(req('10.1.2.3', '127.0.0.1:4000'), { port: 4000, host: '127.0.0.1' }), false, 'a loopback listener takes loopback peers only')
  // 0.2.x over TLS: the https origin of the served authority is the host's own.
  assert.equal(trustedRequest(req('127.0.0.1', 'localhost:4443', 'https://localhost:4443'), { port: 4443, host: '127.0.0.1', protocol: 'https:' }), true)
  assert.equal(trustedRequest(req('127.0.0.1', 'localhost:4443', 'http://localhost:4443'), { port: 4443, host: '127.0.0.1', protocol: 'https:' }), false)
  // A listener bound to one concrete address serves that network: its authority is its own.
  assert.equal(trustedRequest(req('192.0.2.7', '192.0.2.10:4000', 'http://192.0.2.10:4000'), { port: 4000, host: '192.0.2.10' }), true)
  assert.equal(trustedRequest(req('192.0.2.7', '192.0.2.10:4000', 'http://evil.example:4000'), { port: 4000, host: '192.0.2.10' }), false, 'a foreign origin stays foreign')
  assert.equal(trustedRequest(req('192.0.2.7', '[fd00::1]:4000'), { port: 4000, host: 'fd00::1' }), true)
  // A wildcard bind never opens the fence to the network.
  assert.equal(trustedRequest(req('192.0.2.7', '127.0.0.1:4000'), { port: 4000, host: '0.0.0.0' }), false)
  assert.equal(trustedRequest(req('127.0.0.1', '0.0.0.0:4000'), { port: 4000, host: '0.0.0.0' }), false)
  // No socket: DSH's in-process worker tunnel.
  assert.equal(trustedRequest(req(null, '127.0.0.1:4000', 'http://127.0.0.1:4000'), { port: 4000, host: '127.0.0.1' }), true)
})

test('on rc.8 the planner\'s own fold and DSH\'s fold (session.surface.nodes) give the same plans', async (t) => {
  const { createRequire } = await import('node:module')
  const { readdirSync } = await import('node:fs')
  const nativeDir = new URL('../../native/', import.meta.url)
  const file = readdirSync(nativeDir).find(f => f.endsWith('.node'))
  const native = createRequire(import.meta.url)(new URL(file, nativeDir).pathname)
  const { threeTurnSession } = await import('./plugin-support.mjs')
  const { host, agent } = await threeTurnSession({ sessionId: 'two-folds', extraTurns: [turn(text('after the rewind'))] })
  t.after(() => host.dispose())
  const compare = () => {
    const events = JSON.stringify(agent.session.events)
    const nodes = [...agent.session.surface.nodes]
    const own = native.listCandidates(events)
    const hosts = native.listCandidates(events, nodes)
    assert.deepEqual(hosts, own, 'the same candidates')
    for (const c of own) {
      const a = native.planRewind(events, `@${c.seq}`)
      const b = native.planRewind(events, `@${c.seq}`, nodes)
      assert.equal(b.surfaceMismatch ?? null, null, `no mismatch at @${c.seq}`)
      assert.deepEqual({ ...b, surfaceMismatch: undefined }, { ...a, surfaceMismatch: undefined }, `the same plan for @${c.seq}`)
    }
    return own
  }
  const before = compare()
  assert.ok(before.length >= 3, 'three human messages')
  // After a rewind (a marker on the surface) the two folds still agree.
  const { result } = await host.runCommand(agent, `/rewind @${before[1].seq}`)
  assert.equal(result.kind, 'success', result.text)
  compare()
  // A surface that is not DSH's is noticed: the plan is made on it and the difference named.
  const events = JSON.stringify(agent.session.events)
  const nodes = [...agent.session.surface.nodes]
  const target = native.listCandidates(events)[0].seq
  const skewed = native.planRewind(events, `@${target}`, nodes.filter(n => n !== nodes.at(-1)))
  assert.notEqual(skewed.surfaceMismatch ?? null, null, 'a fold that disagrees is reported')
})
