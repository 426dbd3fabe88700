#!/usr/bin/env node
/**
 * The demo behind the README's main command (scripts/demo.sh runs it with Node 24 after building
 * the package). No configuration: it boots the real DSH host (0.1.0-rc.8 service spine, DSH's
 * invariant checkers on) with the dsh-prompt-rewind plugin and a scripted model in a temporary
 * workspace, runs a short coding session that creates and edits files, rewinds to an earlier
 * message with `/rewind`, prints the transcript and the files before and after, then undoes the
 * rewind over the plugin's HTTP RPC (`undo`): the files come back and the conversation as it was
 * before the rewind continues in a new session; prints both.
 *
 *   node tests/host/demo.mjs [--keep]     (--keep leaves the temp workspace and DSH home)
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { turn, text, write, read, edit, sre, bash } from './lib/harness.mjs'
import { bootWithPlugin, rpc, humanSeq, textOf } from './plugin-support.mjs'

const keep = process.argv.includes('--keep')
const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s)
const dim = (s) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s)

function heading(title) {
  console.log(`\n${bold(`== ${title} `.padEnd(78, '='))}`)
}

function summarize(message) {
  const parts = []
  for (const block of message.content ?? []) {
    if (block.type === 'text') parts.push(JSON.stringify(block.text.length > 70 ? `${block.text.slice(0, 67)}...` : block.text))
    else if (block.type === 'tool-call') {
      let args = block.arguments
      try { args = JSON.parse(args) } catch {}
      const target = args.file_path ?? args.path ?? ''
      parts.push(`${block.name}(${args.command ? `${args.command} ` : ''}${String(target).replace(/^.*\//, '')})`)
    } else if (block.type === 'tool-result') parts.push(block.isError ? 'tool error' : 'tool ok')
  }
  return parts.join(' ')
}

function printTranscript(agent) {
  heading('Transcript (what the model sees next)')
  for (const m of agent.session.deriveMessages()) {
    const who = m.role === 'assistant' ? 'assistant' : m.source?.kind === 'tool' ? 'tool' : `user:${m.source?.kind ?? '?'}`
    console.log(`  ${who.padEnd(16)} ${summarize(m)}`)
  }
}

/** Every file under `ws` (relative paths, sorted), directories walked. */
async function listFiles(ws, rel = '') {
  const out = []
  for (const entry of (await readdir(join(ws, rel), { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    const path = rel === '' ? entry.name : `${rel}/${entry.name}`
    if (entry.isDirectory()) out.push(...await listFiles(ws, path))
    else out.push(path)
  }
  return out
}

async function printFiles(ws, title) {
  heading(`Files: ${title}`)
  const names = await listFiles(ws)
  if (names.length === 0) console.log(dim('  (empty workspace)'))
  for (const name of names) {
    const body = await readFile(join(ws, name), 'utf8')
    console.log(`  ${bold(name)}`)
    for (const line of body.replace(/\n$/, '').split('\n')) console.log(`    | ${line}`)
  }
}

const home = await mkdtemp(join(tmpdir(), 'dsh-rewind-demo-home-'))
const ws = await mkdtemp(join(tmpdir(), 'dsh-rewind-demo-ws-'))
const host = await bootWithPlugin({
  dshHome: home,
  workspace: ws,
  // DSH's real `bash` tool too: what the shell changes comes back like what `write` changes.
  shell: true,
  script: [
    turn(write('app.py', 'def greet():\n    return "hello"\n'), sre.create(join(ws, 'README.md'), '# Demo app\n'), text('Created app.py and README.md.')),
    turn(read('app.py'), edit('app.py', '"hello"', '"hello, world"'), write('notes.txt', 'remember to add tests\n'),
      bash("mkdir -p tests && printf 'from app import greet\\n' > tests/test_app.py && sed -i 's/add tests/add more tests/' notes.txt"),
      text('Greeting changed; notes and a test added.')),
    turn(read('app.py'), edit('app.py', 'def greet():', 'def greet(name):'), sre.strReplace(join(ws, 'README.md'), '# Demo app', '# Demo app (v2)'), text('greet now takes a name.')),
  ],
})
try {
  console.log(bold('dsh-prompt-rewind demo: real DSH host 0.1.0-rc.8, scripted model, plugin loaded from lib/index.js'))
  console.log(dim(`workspace ${ws}\nDSH home  ${home}`))
  const agent = await host.createAgent('demo-session')
  for (const prompt of ['create a tiny app with a README', 'make the greeting friendlier and keep notes', 'let greet take a name']) {
    console.log(`\n${bold('> user:')} ${prompt}`)
    await host.sendUser(agent, prompt)
    const last = agent.session.deriveMessages().at(-1)
    console.log(`${bold('< model:')} ${textOf(last)}`)
  }
  printTranscript(agent)
  await printFiles(ws, 'before the rewind')

  heading('/rewind (the candidates)')
  console.log((await host.runCommand(agent, '/rewind')).result.text.replace(/^/gm, '  '))
  const target = humanSeq(agent, 'make the greeting friendlier and keep notes')
  heading(`/rewind @${target}`)
  const { result } = await host.runCommand(agent, `/rewind @${target}`)
  console.log(result.text.replace(/^/gm, '  '))
  printTranscript(agent)
  await printFiles(ws, 'after the rewind (as they were before that message)')

  heading('Rewind history (RPC: POST /dsh-rewind/api/history)')
  const history = await rpc(host, 'history', { sessionId: 'demo-session' })
  const entry = history.json.value.entries[0]
  console.log(`  ${entry.opId}  target @${entry.targetSeq}  ${entry.outcome}  restored ${entry.restored}, deleted ${entry.deleted}, undoable ${entry.undoable}`)

  heading('Undo the rewind: files and conversation (RPC: POST /dsh-rewind/api/undo)')
  const undo = await rpc(host, 'undo', { sessionId: 'demo-session', opId: entry.opId })
  console.log(`  ${JSON.stringify(undo.json)}`)
  await printFiles(ws, 'after the undo (as they were before the rewind)')
  const continued = undo.json.value?.conversation?.sessionId
  const next = continued === undefined ? undefined : host.ctx.agents.get(continued)
  if (next !== undefined) {
    console.log(`\n  The conversation as it was before the rewind continues in the new session ${continued}`)
    console.log('  (the rewound session is unchanged):')
    printTranscript(next)
  }
  const again = await rpc(host, 'undo', { sessionId: 'demo-session', opId: entry.opId })
  console.log(`\n  a second undo is refused: ${again.json.error.code}: ${again.json.error.message}`)

  heading('/rewind doctor (what works on this DSH)')
  console.log((await host.runCommand(agent, '/rewind doctor')).result.text.replace(/^/gm, '  '))
} finally {
  await host.dispose()
  if (!keep) {
    await rm(home, { recursive: true, force: true })
    await rm(ws, { recursive: true, force: true })
  }
}
