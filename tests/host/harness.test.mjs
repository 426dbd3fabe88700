/**
 * Checks of the real-host harness itself (tests/host/lib/harness.mjs): the checks other host
 * tests rely on are really live. Run with Node 24: <node24> --test tests/host/
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { foldSurface } from '@deepseek-ai/dsh-session/surface'
import {
  denormalizeLog, edit, gate, gated, normalizeLog, parseJsonl, read, sre, startHost, text, tools, turn, write,
} from './lib/harness.mjs'

async function withHost(options, body) {
  const root = await mkdtemp(join(tmpdir(), 'rewind-harness-test-'))
  const host = await startHost({ workspace: join(root, 'ws'), dshHome: join(root, 'dsh-home'), ...options })
  try {
    return await body(host)
  } finally {
    await host.dispose()
    await rm(root, { recursive: true, force: true })
  }
}

const humanTexts = (session) => session.events
  .filter((e) => e.type === 'user/message' && e.data.source.kind === 'user')
  .map((e) => e.data.content[0].text)

test('scripted steps drive the real tools; requests are recorded', async () => {
  await withHost({
    script: [
      turn(write('a.txt', 'one\n'), text('wrote')),
      turn(read('a.txt'), edit('a.txt', 'one', 'two'), sre.create('b.txt', 'bee\n'),
        sre.strReplace('b.txt', 'bee', 'bea'), sre.insert('b.txt', 1, 'second'),
        tools({ name: 'str_replace_editor', args: { command: 'view', path: 'b.txt' } }), text('all of it is done', { chunks: 3 })),
    ],
  }, async (host) => {
    const agent = await host.createAgent('tools')
    await host.sendUser(agent, 'first')
    await host.sendUser(agent, 'second')
    assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n')
    assert.equal(await readFile(join(host.workspace, 'b.txt'), 'utf8'), 'bea\nsecond\n')
    assert.equal(host.pendingSteps(), 0)
    assert.equal(host.adapter.requests.length, 9)
    const results = agent.session.events.filter((e) => e.type === 'tool/result')
    assert.equal(results.length, 7)
    assert.ok(results.every((e) => e.data.message.content[0].isError === false), 'every tool call succeeded')
    // The last request saw both human prompts and all tool results.
    const last = host.adapter.requests.at(-1).messages
    assert.deepEqual(last.filter((m) => m.source.kind === 'user').map((m) => m.content[0].text), ['first', 'second'])
    assert.equal(last.filter((m) => m.source.kind === 'tool').length, 7)
    // Multi-delta text is packed by DSH's JSONL writer and decoded back by parseJsonl.
    const jsonl = await host.readJsonl(agent)
    assert.ok(jsonl.includes('"type":"text-chunks"'), 'a packed text-chunks row')
    const { events } = parseJsonl(jsonl)
    assert.deepEqual(events.map((e) => e.seq), agent.session.events.map((e) => e.seq))
  })
})

test('DSH invariant checkers and surface validation are live', async () => {
  await withHost({ script: [turn(text('hi'))] }, async (host) => {
    const agent = await host.createAgent('inv')
    await host.sendUser(agent, 'hello')
    const session = agent.session
    const length = session.events.length
    assert.throws(() => session.append('turn/end', { turn: 7, reason: { kind: 'completed' } }))
    const nodes = [...session.surface.nodes]
    const marker = {
      role: 'user', id: crypto.randomUUID(), content: [{ type: 'text', text: '(empty message)' }], source: { kind: 'dsh-rewind' },
    }
    // A replace whose sourceEventSeqs misses a shadowed node is refused and leaves the log as it was.
    assert.throws(() => session.append('user/message', marker, {
      surfaceOp: { op: 'replace', start: nodes[0], end: nodes.at(-1) }, sourceEventSeqs: [nodes[0]],
    }), /shadowed/)
    assert.equal(session.events.length, length)
    assert.deepEqual([...session.surface.nodes], nodes)
  })
})

test('a gated step lets a steering message land in the running turn', async () => {
  const g = gate()
  await withHost({ script: [turn(gated(g, write('x.txt', 'x\n')), text('ok'))] }, async (host) => {
    const agent = await host.createAgent('steer')
    host.followup(agent, 'go')
    await g.reached
    assert.equal(agent.status, 'running')
    host.steer(agent, 'also this')
    g.release()
    await host.waitIdle(agent)
    assert.deepEqual(humanTexts(agent.session), ['go', 'also this'])
    const turns = agent.session.events.filter((e) => e.type === 'turn/start')
    assert.equal(turns.length, 1, 'steering was consumed inside the same turn')
  })
})

test('injected context, commands from plugins, and resume from JSONL', async () => {
  const Plugin = {
    name: 'harness-test-plugin',
    inject: ['commands'],
    apply(ctx, config) {
      ctx.effect(function* () {
        yield ctx.commands.register({
          name: 'echo',
          description: 'echo',
          handler: ({ rawInput }) => ({ kind: 'success', text: `${config.prefix}${rawInput.trim()}` }),
        })
      }, 'echo')
    },
  }
  await withHost({
    plugins: [[Plugin, { prefix: '> ' }]],
    script: [turn(text('one')), turn(text('two'))],
  }, async (host) => {
    const agent = await host.createAgent('resume')
    host.inject(agent, '<system-reminder>context</system-reminder>', 'ctx-test')
    await host.sendUser(agent, 'first')
    const run = await host.runCommand(agent, '/echo hi')
    assert.deepEqual(run.result, { kind: 'success', text: '> hi' })
    await host.sendUser(agent, 'second')
    const injected = agent.session.events.filter((e) => e.type === 'user/message' && e.data.source.kind === 'plugin')
    assert.equal(injected.length, 1)
    assert.equal(injected[0].data.source.plugin, 'ctx-test')
    const surface = [...agent.session.surface.nodes]
    const messages = JSON.stringify(agent.session.deriveMessages())

    const resumed = await host.resume('resume')
    assert.notEqual(resumed, agent)
    assert.deepEqual([...resumed.session.surface.nodes], surface)
    assert.equal(JSON.stringify(resumed.session.deriveMessages()), messages)
    assert.equal(resumed.session.events.at(-1).type, 'session/end-seed')

    const raw = await host.readJsonl(resumed)
    const normalized = normalizeLog(raw, host)
    assert.ok(!normalized.includes(host.workspace) && !normalized.includes(host.dshHome))
    assert.match(normalized, /"cwd":"\/workspace"/)
    assert.equal(denormalizeLog(normalized, host), raw)
    assert.deepEqual([...foldSurface(parseJsonl(raw).events).nodes], surface)
  })
})

test('writeJsonl + resume loads a recorded log under a new home', async () => {
  let recorded
  await withHost({ script: [turn(write('f.txt', 'f\n'), text('ok'))] }, async (host) => {
    const agent = await host.createAgent('moved')
    await host.sendUser(agent, 'make f')
    recorded = normalizeLog(await host.readJsonl(agent), host)
  })
  await withHost({}, async (host) => {
    const id = await host.writeJsonl(denormalizeLog(recorded, host))
    const agent = await host.resume(id)
    assert.equal(agent.session.header.cwd, host.workspace)
    assert.deepEqual(humanTexts(agent.session), ['make f'])
  })
})

test('settings and compaction can be mounted', async () => {
  await withHost({
    settings: true,
    compaction: { retainTokens: 100 },
    auxiliary: () => 'short summary',
    script: [turn(write('a.txt', 'a\n'), text('a')), turn(write('b.txt', 'b\n'), text('b'))],
  }, async (host) => {
    assert.ok(host.ctx.settings, 'ctx.settings provided')
    const agent = await host.createAgent('compact')
    await host.sendUser(agent, 'make a')
    await host.sendUser(agent, 'make b')
    const result = await host.compactNow(agent)
    assert.ok(result, 'compaction ran')
    assert.equal(host.adapter.auxiliary.length, 1, 'the summary request went to the auxiliary answer')
    const checkpoint = agent.session.events.find((e) => e.type === 'user/message' && e.data.source.plugin === 'compact')
    assert.ok(checkpoint)
    assert.equal(checkpoint.data.source.compactionId, result.compactionId)
    assert.deepEqual(checkpoint.surfaceOp, { op: 'replace', start: result.shadowedRange.start, end: result.shadowedRange.end })
  })
})

test('webServer: routes registered on ctx.webServer answer on host.baseUrl', async () => {
  await withHost({ webServer: true }, async (host) => {
    const dispose = host.ctx.webServer.register({
      kind: 'exact',
      path: '/harness-test/ping',
      handler: (req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"pong":true}') },
    })
    try {
      const res = await fetch(`${host.baseUrl}/harness-test/ping`)
      assert.equal(res.status, 200)
      assert.deepEqual(await res.json(), { pong: true })
    } finally {
      dispose()
    }
  })
})

test('an exhausted script ends the turn with an error and does not hang', async () => {
  await withHost({ script: [turn(text('only one'))] }, async (host) => {
    const agent = await host.createAgent('exhausted')
    await host.sendUser(agent, 'one')
    assert.equal(host.errors.length, 0)
    await host.sendUser(agent, 'two')
    assert.equal(host.errors.length, 1)
    assert.match(String(host.errors[0].error?.message ?? host.errors[0].error), /script exhausted/)
    const end = agent.session.events.findLast((e) => e.type === 'turn/end')
    assert.notEqual(end.data.reason.kind, 'completed')
  })
})
