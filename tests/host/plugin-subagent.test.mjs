/**
 * Subagent sessions (header `origin: 'subagent'`, `delegationDepth > 0`) are never tracked and
 * never rewound; the parent session is unaffected.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { turn, text, write, PROVIDER, MODEL } from './lib/harness.mjs'
import { bootWithPlugin, bytes } from './plugin-support.mjs'

test('a subagent session is not captured and cannot be rewound', async (t) => {
  const host = await bootWithPlugin({
    script: [turn(write('sub.txt', 'from the subagent\n'), text('sub done')), turn(write('parent.txt', 'p\n'), text('parent done'))],
  })
  t.after(() => host.dispose())
  const { agent: sub } = await host.ctx.agents.create({
    sessionId: 'subagent-session',
    meta: { cwd: host.workspace, origin: 'subagent', delegationDepth: 1 },
    agentOptions: { provider: PROVIDER, model: MODEL },
  })
  assert.equal(sub.session.header.origin, 'subagent')
  await host.sendUser(sub, 'write sub')
  assert.equal((await bytes(join(host.workspace, 'sub.txt'))).toString(), 'from the subagent\n')
  assert.equal(existsSync(join(host.dshHome, 'rewind-snapshots', 'sessions', 'subagent-session')), false, 'no snapshots for a subagent session')
  const listed = await host.runCommand(sub, '/rewind')
  assert.equal(listed.result.kind, 'error')
  assert.match(listed.result.text, /\[rewind\/subagent-session\]/)
  const events = sub.session.events.length
  const refused = await host.runCommand(sub, '/rewind 1')
  assert.match(refused.result.text, /\[rewind\/subagent-session\]/)
  assert.equal(sub.session.events.length, events + 2)

  const parent = await host.createAgent('parent-session')
  await host.sendUser(parent, 'write parent')
  assert.equal(existsSync(join(host.dshHome, 'rewind-snapshots', 'sessions', 'parent-session')), true, 'the parent is tracked')
})
