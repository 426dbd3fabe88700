/**
 * Fault injection on the real rc.8 host: an addon whose every call throws (`DSH_REWIND_FAULT=
 * addon-throws`, the test seam of `js/src/native.ts`, set before the addon is first loaded; this
 * file runs in its own process). Sessions open, turns run, DSH sees no exception from the plugin,
 * the commands answer with the fault, and the doctor reports it.
 */
process.env.DSH_REWIND_FAULT = 'addon-throws'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { readFile } from 'node:fs/promises'
import { turn, text, write, read, edit, bash } from './lib/harness.mjs'
import { bootWithPlugin, rpc } from './plugin-support.mjs'

test('an addon whose every call throws: sessions open, turns run, DSH is unaffected, the fault is reported', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('a.txt', 'one\n'), text('wrote a')),
      turn(read('a.txt'), edit('a.txt', 'one', 'two'), bash('echo shell > s.txt'), text('edited a, ran the shell')),
    ],
  })
  t.after(() => host.dispose())
  const lines = []
  host.ctx.logger.exporter({ levels: { default: 3 }, export: m => lines.push(m) })
  const agent = await host.createAgent('faulty-addon')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  assert.equal(await readFile(join(host.workspace, 'a.txt'), 'utf8'), 'two\n', 'the write tools ran')
  assert.equal(await readFile(join(host.workspace, 's.txt'), 'utf8'), 'shell\n', 'the shell ran')
  assert.deepEqual(host.errors, [])
  const results = agent.session.events.filter(e => e.type === 'tool/result')
  assert.ok(results.length >= 4)
  for (const r of results) assert.notEqual(r.data.isError ?? r.data.message?.isError, true, 'no tool call failed')

  // DSH logged no failing listener of the plugin.
  const hostLines = lines.filter(m => m.name !== 'dsh-rewind').map(m => m.args.map(String).join(' '))
  assert.deepEqual(hostLines.filter(l => /listener (threw|rejected)|injected fault/.test(l)), [])

  // The commands answer (with the fault named), and so does the RPC.
  const { result } = await host.runCommand(agent, '/rewind 1')
  assert.equal(result.kind, 'error')
  assert.match(result.text, /injected fault/)
  const doctor = await host.runCommand(agent, '/rewind doctor')
  assert.equal(doctor.result.kind, 'success')
  assert.match(doctor.result.text, /some features degrade/)
  const status = await rpc(host, 'history', { sessionId: 'faulty-addon' })
  assert.equal(status.status, 200)
  assert.equal(typeof status.json.ok, 'boolean')
})
