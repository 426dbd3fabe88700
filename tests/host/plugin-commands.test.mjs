/**
 * Command registration is isolated: a name another plugin already owns costs only that name.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startHost, turn, text, write } from './lib/harness.mjs'
import { loadPlugin } from './plugin-support.mjs'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const OtherUndo = {
  name: 'other-undo',
  inject: ['commands'],
  apply(ctx) {
    ctx.commands.register({ name: 'undo', description: 'someone else\'s undo', handler: () => ({ kind: 'success', text: 'the other plugin answered' }) })
  },
}

test('a command name taken by another plugin costs only that name', async (t) => {
  const Rewind = await loadPlugin()
  const home = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const host = await startHost({
    dshHome: home,
    plugins: [[OtherUndo, {}], [Rewind, { dshHome: home }]],
    script: [turn(write('a.txt', 'a\n'), text('a')), turn(text('b'))],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('names')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  assert.equal((await host.runCommand(agent, '/undo')).result.text, 'the other plugin answered')
  const listed = await host.runCommand(agent, '/rewind')
  assert.equal(listed.result.kind, 'success')
  assert.match(listed.result.text, /2\. @\d+ first/)
  const rewound = await host.runCommand(agent, '/prompt-rewind @' + /2\. @(\d+)/.exec(listed.result.text)[1])
  assert.equal(rewound.result.kind, 'success', rewound.result.text)
  assert.match((await host.runCommand(agent, '/snapshot-auto-cleanup nope')).result.text, /^Usage/)
})
