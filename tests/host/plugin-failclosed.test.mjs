/**
 * Fail-closed paths on the real host: a snapshot store written by a newer build, a corrupt store
 * marker, and two rewinds of one session at once.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { appendFile, mkdtemp, mkdir, readFile, writeFile } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { turn, text, write, gate, gated } from './lib/harness.mjs'
import { bootWithPlugin, bytes, humanSeq, rpc } from './plugin-support.mjs'

// The session's record log (docs/format.md): frames of len, ~len, CRC-32, payload.
// A `format` record is kind 2, then 1 (some), then the text as a varint length + bytes.
function formatFrame(format) {
  const text = Buffer.from(format)
  if (text.length > 127) throw new Error('short formats only')
  const payload = Buffer.concat([Buffer.from([2, 1, text.length]), text])
  const head = Buffer.alloc(12)
  head.writeUInt32LE(payload.length, 0)
  head.writeUInt32LE(~payload.length >>> 0, 4)
  head.writeUInt32LE(crc32(payload) >>> 0, 8)
  return Buffer.concat([head, payload])
}

async function recordedFormat(log) {
  const b = await readFile(log).catch(() => Buffer.alloc(0))
  let format = null
  for (let o = 8; o + 12 <= b.length;) {
    const len = b.readUInt32LE(o)
    if (o + 12 + len > b.length) break
    const p = b.subarray(o + 12, o + 12 + len)
    if (p[0] === 2) format = p[1] === 1 ? p.subarray(3, 3 + p[2]).toString() : null
    o += 12 + len
  }
  return format
}

async function homeWithStoreMarker(marker) {
  const home = await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  await mkdir(join(home, 'rewind-snapshots'), { recursive: true })
  await writeFile(join(home, 'rewind-snapshots', 'store.json'), marker)
  return home
}

test('a store written by a newer build: no capture, no restore, the conversation still rewinds', async (t) => {
  const home = await homeWithStoreMarker(JSON.stringify({ store_version: 999 }))
  const host = await bootWithPlugin({ dshHome: home, script: [turn(write('a.txt', 'one\n'), text('a')), turn(write('b.txt', 'two\n'), text('b'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('newer-store')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  const caps = await rpc(host, 'caps', { sessionId: 'newer-store' })
  assert.equal(caps.json.value.fileCheckpointing, false)
  const preview = await rpc(host, 'preview', { sessionId: 'newer-store', seq: humanSeq(agent, 'second') })
  assert.match(preview.json.value.storeUnavailable, /^rewind\/store-newer/)
  // The same shape as any preview: the client reads every list, the warning one included.
  assert.deepEqual(preview.json.value.unreadable, [])
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'second')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Files not restored: the snapshot store was written by a newer version/)
  assert.equal((await bytes(join(host.workspace, 'b.txt'))).toString(), 'two\n', 'no file is touched')
  assert.ok(agent.session.events.some(e => e.type === 'user/message' && e.data?.source?.kind === 'dsh-prompt-rewind'), 'the marker was appended')
})

test('a corrupt store marker: files are reported unavailable by name, the conversation still rewinds', async (t) => {
  const home = await homeWithStoreMarker('{ not json')
  const host = await bootWithPlugin({ dshHome: home, script: [turn(write('a.txt', 'one\n'), text('a')), turn(text('b'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('corrupt-store')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  const { result } = await host.runCommand(agent, '/rewind 1')
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Files not restored: .*rewind\/store-corrupt/)
  assert.equal((await bytes(join(host.workspace, 'a.txt'))).toString(), 'one\n')
})

test('a second rewind of the same session while one runs is refused with rewind/in-flight', async (t) => {
  const g = gate()
  const host = await bootWithPlugin({ script: [turn(write('a.txt', 'one\n'), text('a')), turn(gated(g, text('slow')))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('in-flight')
  await host.sendUser(agent, 'first')
  host.followup(agent, 'second')
  await g.reached
  const first = humanSeq(agent, 'first')
  // The first rewind has to stop the running turn; the second arrives while it does.
  const [a, b] = await Promise.all([host.runCommand(agent, `/rewind @${first}`), host.runCommand(agent, `/rewind @${first}`)])
  const kinds = [a.result.kind, b.result.kind].sort()
  assert.deepEqual(kinds, ['error', 'success'], `${a.result.text}\n${b.result.text}`)
  const refused = a.result.kind === 'error' ? a : b
  assert.match(refused.result.text, /\[rewind\/in-flight\]/)
  assert.equal(agent.session.events.filter(e => e.data?.source?.kind === 'dsh-prompt-rewind').length, 1, 'one marker')
  g.release()
})

test('a session whose recorded format differs gets its snapshots cleared when its agent is created', async (t) => {
  const host = await bootWithPlugin({ script: [turn(write('a.txt', 'one\n'), text('a')), turn(write('a2.txt', 'two\n'), text('b'))] })
  t.after(() => host.dispose())
  const agent = await host.createAgent('format-session')
  await host.sendUser(agent, 'first')
  await host.sendUser(agent, 'second')
  const log = join(host.dshHome, 'rewind-snapshots', 'sessions', 'format-session', 'records.log')
  // The session's format as the plugin sees it: 0 on rc.8, 3 behind the newer-contract shim.
  const tag = `dsh-session-v${process.env.DSH_REWIND_CONTRACT === 'newer' ? 3 : 0}`
  assert.equal(await recordedFormat(log), tag)
  // As if an older DSH had recorded the session: its format differs.
  await appendFile(log, formatFrame('dsh-session-v-older'))
  assert.equal(await recordedFormat(log), 'dsh-session-v-older')
  const resumed = await host.resume('format-session')
  // The guard runs in the background of agent creation; wait until the format is re-recorded.
  for (let i = 0; i < 50; i++) {
    if ((await recordedFormat(log)) === tag) break
    await new Promise(r => setTimeout(r, 20))
  }
  assert.equal(await recordedFormat(log), tag)
  const { result } = await host.runCommand(resumed, `/rewind @${humanSeq(resumed, 'second')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Deleted \(0\)/, 'the cleared snapshots restore nothing')
  assert.equal((await bytes(join(host.workspace, 'a2.txt'))).toString(), 'two\n')
})
