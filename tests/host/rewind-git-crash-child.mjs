/**
 * The child process of rewind-git-crash.test.mjs: the real DSH spine with the built plugin and
 * DSH's real `bash` tool, on a DSH home and a git workspace named by the parent, so the parent can
 * SIGKILL it at a seam of the git step (`DSH_REWIND_CRASH=<point>`) and start it again.
 *
 *   node rewind-git-crash-child.mjs '<json>'   with {phase, home, ws, scenario}
 *
 * phase `setup`: turn "one" makes branch agent-work and commits to it, turn "two" checks out tag
 *   v1; `READY`; then the operation: `rewind` (in place, to "one"), or `undo` (that rewind whole,
 *   `READY`, then its undo over the RPC route). Prints `DONE` when nothing killed it.
 * phase `restart`: resumes the session (the plugin's reconcile pass settles what was killed) and
 *   prints `STATE <json>` with the history entries.
 */
import { turn, text, bash } from './lib/harness.mjs'
import { bootWithPlugin, rpc, textOf } from './plugin-support.mjs'

const SESSION = 'git-crash-session'
const args = JSON.parse(process.argv[2])
const say = line => process.stdout.write(`${line}\n`)

const script = [
  turn(bash('git switch -q -c agent-work && echo agent > agent.txt && git add agent.txt && git commit -qm agent'), text('one done')),
  turn(bash('git checkout -q v1'), text('two done')),
]
const host = await bootWithPlugin({ dshHome: args.home, workspace: args.ws, shell: true, script: args.phase === 'setup' ? script : [] })
const humanSeq = (agent, s) => agent.session.events.find(e => e.type === 'user/message' && e.data?.source?.kind === 'user' && textOf(e.data) === s).seq

if (args.phase === 'setup') {
  const agent = await host.createAgent(SESSION)
  for (const s of ['one', 'two']) await host.sendUser(agent, s)
  await host.flush(agent)
  const target = humanSeq(agent, 'one')
  if (args.scenario === 'undo') {
    const r = await host.runCommand(agent, `/rewind @${target}`)
    if (r.result.kind !== 'success') throw new Error(r.result.text)
    await host.flush(agent)
    const { json } = await rpc(host, 'history', { sessionId: SESSION })
    say('READY')
    const op = await rpc(host, 'undo', { sessionId: SESSION, opId: json.value.entries[0].opId })
    if (!op.json.ok) throw new Error(JSON.stringify(op.json))
  } else {
    say('READY')
    const r = await host.runCommand(agent, `/rewind @${target}`)
    if (r.result.kind !== 'success') throw new Error(r.result.text)
  }
  say('DONE')
} else {
  await host.resume(SESSION)
  // The `interrupted` RPC runs the reconcile pass first; the history is read after it.
  const interrupted = (await rpc(host, 'interrupted', { sessionId: SESSION })).json
  const history = (await rpc(host, 'history', { sessionId: SESSION })).json
  say(`STATE ${JSON.stringify({ history, interrupted })}`)
}
await host.dispose()
process.exit(0)
