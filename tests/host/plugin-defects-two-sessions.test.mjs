/**
 * Two conversations in one folder: a rewind in one of them while the other's shell command is
 * still running. The running command's changes stay its own — its later rewind brings back the
 * folder as it was at its message for everything the command changed (the file it created goes,
 * the file it rewrote comes back) — and the files the first conversation's rewind wrote are not
 * taken for the command's changes (the second rewind leaves them as the first one left them).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { turn, text, write, bash } from './lib/harness.mjs'
import { bootWithPlugin, bytes, humanSeq, put, rpc } from './plugin-support.mjs'

/** Resolves once `path` exists (polled), or rejects after `ms`. */
async function appears(path, ms = 20_000) {
  const end = Date.now() + ms
  while (!existsSync(path)) {
    if (Date.now() > end) throw new Error(`${path} did not appear within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

test('a rewind in one conversation while the other\'s shell command runs: the command\'s own rewind restores what it changed, and leaves what the first rewind wrote', async (t) => {
  // The command's signals live outside the folder (not scanned).
  const signals = await mkdtemp(join(tmpdir(), 'rewind-signals-'))
  const started = join(signals, 'started')
  const go = join(signals, 'go')
  const command = [
    "printf 'B half\\n' > shared.txt",
    "printf 'made by B\\n' > new.txt",
    `: > '${started}'`,
    `while [ ! -e '${go}' ]; do sleep 0.05; done`,
    "printf 'B done\\n' >> shared.txt",
  ].join('; ')
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('a.txt', 'a1\n'), text('A one done')),
      turn(write('a.txt', 'a2\n'), text('A two done')),
      turn(bash(command), text('B done')),
    ],
  })
  t.after(async () => {
    await writeFile(go, '').catch(() => {})
    await host.dispose()
    await rm(signals, { recursive: true, force: true })
  })
  const ws = host.workspace
  await put(join(ws, 'shared.txt'), 'base\n')
  const a = await host.createAgent('two-sessions-a')
  const b = await host.createAgent('two-sessions-b')
  await host.sendUser(a, 'A one')
  await host.sendUser(a, 'A two')
  assert.equal((await bytes(join(ws, 'a.txt')))?.toString(), 'a2\n')

  // B's command starts and stops half-way (shared.txt half written, new.txt made).
  host.followup(b, 'B edits shared')
  await appears(started)
  assert.equal((await bytes(join(ws, 'shared.txt')))?.toString(), 'B half\n')

  // A's preview (the dialog's RPC, the command) tells B's files apart before anything runs, as
  // A's report does: changed by another conversation's command still running, not "outside".
  const target = humanSeq(a, 'A two')
  const pv = (await rpc(host, 'preview', { sessionId: 'two-sessions-a', seq: target })).json
  assert.equal(pv.ok, true, JSON.stringify(pv))
  assert.ok((pv.value.inFlight ?? []).includes('shared.txt'), `the preview lists shared.txt as in flight: ${JSON.stringify(pv.value)}`)
  assert.ok(!pv.value.outside.includes('shared.txt'), `the preview does not list shared.txt as changed outside the agent: ${JSON.stringify(pv.value)}`)
  assert.ok(pv.value.files.every(f => f.origin !== 'outside'), JSON.stringify(pv.value.files))
  const { result: pa } = await host.runCommand(a, `/rewind preview @${target}`)
  assert.equal(pa.kind, 'success', pa.text)
  assert.match(pa.text, /Changed by a command of another conversation that was still running, left as is \(\d+\):[^]*shared\.txt/, pa.text)
  assert.doesNotMatch(pa.text, /Changed outside the agent/, pa.text)

  // A rewinds meanwhile: a.txt back to "a1"; B's files are not A's and are left as they are.
  const { result: ra } = await host.runCommand(a, `/rewind @${target}`)
  assert.equal(ra.kind, 'success', ra.text)
  assert.equal((await bytes(join(ws, 'a.txt')))?.toString(), 'a1\n', 'A\'s rewind restored a.txt')
  assert.equal((await bytes(join(ws, 'shared.txt')))?.toString(), 'B half\n', 'B\'s half-written file left alone')
  assert.match(ra.text, /shared\.txt/, 'A\'s report names shared.txt')
  assert.match(ra.text, /Changed by a command of another conversation that was still running, left as is \(\d+\):[^]*shared\.txt/,
    'A\'s report says shared.txt is another conversation\'s change in flight')
  assert.doesNotMatch(ra.text, /Changed outside the agent/, 'B\'s files are not listed as changed outside the agent')

  // B's command finishes.
  await writeFile(go, '')
  await host.waitIdle(b)
  assert.equal((await bytes(join(ws, 'shared.txt')))?.toString(), 'B half\nB done\n')
  assert.equal((await bytes(join(ws, 'new.txt')))?.toString(), 'made by B\n')

  // B rewinds to its message: everything its command changed comes back; A's rewind stays.
  const { result: rb } = await host.runCommand(b, `/rewind @${humanSeq(b, 'B edits shared')}`)
  assert.equal(rb.kind, 'success', rb.text)
  assert.equal((await bytes(join(ws, 'shared.txt')))?.toString(), 'base\n', `shared.txt as it was at B's message\n${rb.text}`)
  assert.equal(await bytes(join(ws, 'new.txt')), null, `the file B's command created is gone\n${rb.text}`)
  assert.equal((await bytes(join(ws, 'a.txt')))?.toString(), 'a1\n', `a.txt as A's rewind left it\n${rb.text}`)
})
