/**
 * The child process of rewind-crash.test.mjs: the real DSH spine with the built plugin, on a DSH
 * home and workspace named by the parent, so the parent can SIGKILL it (through the plugin's crash
 * seam `DSH_REWIND_CRASH=<point>`, or after a delay) and start it again on the same home.
 *
 *   node rewind-crash-child.mjs '<json>'   with {phase, home, ws, scenario, resolve?}
 *
 * phase `setup`: three human turns ("one", "two", "three"; the second writes many files), the
 *   session log flushed, `READY` on stdout, then the operation under test: `rewind` (in place, to
 *   "two"), `fork` (fork rewind to "two"), `undo` (a whole rewind to "two", `READY`, then its
 *   undo over the RPC route), or `redo` (that rewind and its undo, `READY`, then the redo). Prints `DONE` and exits when nothing killed it.
 * phase `restart`: resumes the session, waits for the plugin's reconcile pass, prints the state as
 *   one `STATE <json>` line; runs each of `commands` (printing `COMMAND <result json>`); with `resolve` (`continue` | `rollback`) settles an interrupted rewind
 *   with the typed command and prints `STATE` again.
 */
import { turn, text, tools, write, read, edit } from './lib/harness.mjs'
import { bootWithPlugin, rpc, textOf } from './plugin-support.mjs'

import { MANY, SESSION, manyContent, manyName } from './rewind-crash-fixture.mjs'

const args = JSON.parse(process.argv[2])

function say(line) {
  process.stdout.write(`${line}\n`)
}

const script = [
  turn(write('a.txt', 'v1\n'), write('b.txt', 'keep\n'), text('one done')),
  turn(
    read('a.txt'), edit('a.txt', 'v1', 'v2'), write('c.txt', 'created in two\n'),
    tools(...Array.from({ length: MANY }, (_, i) => ({ name: 'write', args: { file_path: manyName(i), content: manyContent(i) } }))),
    text('two done'),
  ),
  turn(text('three done')),
]

const host = await bootWithPlugin({ dshHome: args.home, workspace: args.ws, script: args.phase === 'setup' ? script : [] })

function humanSeq(agent, s) {
  return agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user' && textOf(e.data) === s).seq
}

async function state(agent) {
  const interrupted = (await rpc(host, 'interrupted', { sessionId: SESSION })).json
  const history = (await rpc(host, 'history', { sessionId: SESSION })).json
  const markers = agent.session.events.filter(e => e.type === 'user/message' && e.data?.source?.kind === 'dsh-prompt-rewind').length
  const persisted = await host.ctx.sessionPersistence.list()
  return { interrupted, history, markers, sessions: persisted.map(h => h.id).sort() }
}

if (args.phase === 'setup') {
  const agent = await host.createAgent(SESSION)
  for (const s of ['one', 'two', 'three']) await host.sendUser(agent, s)
  await host.flush(agent)
  const target = humanSeq(agent, 'two')
  if (args.scenario === 'undo' || args.scenario === 'redo') {
    const r = await host.runCommand(agent, `/rewind @${target}`)
    if (r.result.kind !== 'success') throw new Error(r.result.text)
    const { json } = await rpc(host, 'history', { sessionId: SESSION })
    await host.flush(agent)
    const opId = json.value.entries[0].opId
    if (args.scenario === 'redo') {
      const undo = await rpc(host, 'undo', { sessionId: SESSION, opId })
      if (!undo.json.ok) throw new Error(JSON.stringify(undo.json))
      await host.flush(agent)
    }
    say('READY')
    const op = await rpc(host, args.scenario, { sessionId: SESSION, opId })
    if (!op.json.ok) throw new Error(JSON.stringify(op.json))
  } else {
    say('READY')
    const r = await host.runCommand(agent, `/rewind ${args.scenario === 'fork' ? '--fork ' : ''}@${target}`)
    if (r.result.kind !== 'success') throw new Error(r.result.text)
  }
  say('DONE')
} else {
  const agent = await host.resume(SESSION)
  const found = await state(agent)
  say(`STATE ${JSON.stringify(found)}`)
  for (const line of args.commands ?? []) {
    const r = await host.runCommand(agent, line)
    say(`COMMAND ${JSON.stringify(r.result)}`)
  }
  if (args.resolve !== undefined && found.interrupted.value?.interrupted?.length > 0) {
    const r = await host.runCommand(agent, `/rewind --${args.resolve}`)
    say(`RESOLVED ${JSON.stringify(r.result)}`)
    say(`STATE ${JSON.stringify(await state(agent))}`)
  }
}
await host.dispose()
process.exit(0)

