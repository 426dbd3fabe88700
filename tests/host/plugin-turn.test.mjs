/**
 * A rewind while a turn is running stops the turn first (cancel with keepInbox, wait for idle),
 * then rewinds; pending steering is withdrawn.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { turn, text, write, gate, gated } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, bytes } from './plugin-support.mjs'

test('a rewind while a turn is running stops the turn first', async (t) => {
  const g = gate()
  const host = await bootWithPlugin({
    script: [
      turn(write('a.txt', 'one\n'), text('wrote a')),
      turn(write('b.txt', 'two\n'), gated(g, text('never streamed'))),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('running-session')
  await host.sendUser(agent, 'first')
  host.followup(agent, 'second')
  await g.reached
  assert.equal(agent.status, 'running')
  assert.equal((await bytes(join(host.workspace, 'b.txt'))).toString(), 'two\n')

  const second = humanSeq(agent, 'second')
  const { result } = await host.runCommand(agent, `/rewind @${second}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Stopped the running turn first\./)
  assert.equal(agent.status, 'idle')
  assert.equal(await bytes(join(host.workspace, 'b.txt')), null, 'the running turn\'s file is rolled back')
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'one\n')
  const ended = agent.session.events.filter(e => e.type === 'turn/end').at(-1)
  assert.notEqual(ended.data.reason.kind, 'completed')
  g.release()
})

test('rewinding to an unread steering message withdraws it without stopping the turn', async (t) => {
  const g = gate()
  const host = await bootWithPlugin({
    script: [
      turn(write('a.txt', 'one\n'), gated(g, text('done after steering'))),
      turn(text('next')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('steer-session')
  host.followup(agent, 'first')
  await g.reached
  host.steer(agent, 'please also do X')
  const listed = await host.runCommand(agent, '/rewind')
  const line = listed.result.text.split('\n').find(l => l.includes('please also do X'))
  assert.ok(line, listed.result.text)
  assert.match(line, /\(pending\)/)
  const seq = Number(/@(\d+)/.exec(line)[1])
  const { result } = await host.runCommand(agent, `/rewind @${seq}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Withdrew 1 pending message/)
  assert.equal(agent.status, 'running', 'the turn goes on')
  assert.equal(agent.inbox.nextStep.length, 0)
  g.release()
  await host.waitIdle(agent)
  assert.ok(!host.adapter.requests.some(r => JSON.stringify(r.messages).includes('please also do X')), 'the withdrawn message never reached the model')
})
