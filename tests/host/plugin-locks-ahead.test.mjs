/**
 * When the model has named a write tool's call, the plugin has the store take the locks that
 * call's capture needs ahead of it, on the thread pool (`takeLocksAhead`): once per model step,
 * not for other tools, and released again once the burst is over (another store handle, as
 * another process, gets them). The files still come back on rewind.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { turn, text, tools, read, gate, gated } from './lib/harness.mjs'
import { bootWithPlugin, bytes, humanSeq, pluginSettled, rpc } from './plugin-support.mjs'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
// The plugin loads its addon from `native/`: the same module as this one.
const { BindingStore } = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))

/** Every `takeLocksAhead` and `captureNow` call of the addon in this process, in order. */
function watchCalls(t) {
  const calls = []
  for (const name of ['takeLocksAhead', 'captureNow']) {
    const original = BindingStore.prototype[name]
    BindingStore.prototype[name] = function (...args) {
      const out = original.apply(this, args)
      const call = { name, args }
      calls.push(call)
      if (out instanceof Promise) void out.then((v) => { call.resolved = v }, () => { call.resolved = 'failed' })
      return out
    }
    t.after(() => { BindingStore.prototype[name] = original })
  }
  return calls
}

const w = (id, path, content) => ({ name: 'write', id, args: { file_path: path, content } })

test('the locks of a write-tool call are taken when the model names it, once per step, and released after', async (t) => {
  const calls = watchCalls(t)
  const pause = gate()
  const host = await bootWithPlugin({
    script: [
      turn(tools(w('w0', 'a.txt', 'a0\n')), text('first')),
      // The model's pause: the message's re-check is done when the model names the calls.
      turn(gated(pause, tools(w('w1', 'a.txt', 'a1\n'), w('w2', 'b.txt', 'b1\n'), w('w3', 'c.txt', 'c1\n'))), text('three')),
      turn(read('a.txt'), text('read only')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('locks-ahead')
  await host.sendUser(agent, 'first')
  await pluginSettled(host, agent)

  host.followup(agent, 'second')
  await pause.reached
  await pluginSettled(host, agent)
  const before = calls.length
  pause.release()
  await host.waitIdle(agent)
  await pluginSettled(host, agent)
  const step = calls.slice(before)
  const ahead = step.filter((c) => c.name === 'takeLocksAhead')
  assert.equal(ahead.length, 1, 'once for the step that names three writes')
  assert.deepEqual(ahead[0].args, [agent.session.header.id, host.workspace])
  assert.equal(step[0].name, 'takeLocksAhead', 'before the step\'s first capture')
  assert.equal(step.filter((c) => c.name === 'captureNow').length, 3)
  assert.equal(ahead[0].resolved, true, 'the locks were taken ahead')

  // A step that names no write tool takes nothing ahead.
  const beforeRead = calls.length
  await host.sendUser(agent, 'third')
  await pluginSettled(host, agent)
  assert.deepEqual(calls.slice(beforeRead).filter((c) => c.name === 'takeLocksAhead'), [])

  // The locks are released once the burst is over: another handle on the store (as another
  // process would) captures and commits, which waits for them.
  const other = BindingStore.open(join(host.dshHome, 'rewind-snapshots'))
  const otherCapture = other.captureNow('other-session', host.workspace, 'o1', join(host.workspace, 'a.txt'), 1 << 20, 1)
  if (otherCapture !== undefined) await otherCapture
  const otherCommit = other.commitNow('other-session', host.workspace, 'o1', 1, true)
  if (otherCommit !== undefined) await otherCommit
  assert.equal(await other.flush('other-session', host.workspace), true)

  // The three files come back on a rewind to the second message.
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'second')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'a0\n')
  assert.equal(await bytes(join(host.workspace, 'b.txt')), null)
  assert.equal(await bytes(join(host.workspace, 'c.txt')), null)
})

test('with backups off, nothing is taken ahead', async (t) => {
  const calls = watchCalls(t)
  const host = await bootWithPlugin({
    script: [
      turn(tools(w('w0', 'a.txt', 'a0\n')), text('first')),
      turn(tools(w('w1', 'a.txt', 'a1\n')), text('second')),
    ],
  })
  t.after(() => host.dispose())
  const agent = await host.createAgent('locks-ahead-off')
  await host.sendUser(agent, 'first')
  await pluginSettled(host, agent)
  const off = await rpc(host, 'settings.update', { sessionId: 'locks-ahead-off', patch: { backups: false } })
  assert.equal(off.json.value.backups, false)
  const before = calls.length
  await host.sendUser(agent, 'second')
  await pluginSettled(host, agent)
  assert.deepEqual(calls.slice(before).map((c) => c.name), [])
})
