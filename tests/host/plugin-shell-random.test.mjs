/**
 * Random sessions on the real host: each seed plays turns of DSH's real `bash` tool and `write`
 * tool over a small tree (files written, appended, truncated, deleted, copied and moved;
 * directories removed, copied, moved and renamed; a directory replaced by a file of its name
 * and back; the executable bit set and cleared; commands that fail half-way), then rewinds to
 * random messages, sometimes undoes the rewind, and goes on. After every rewind the workspace's
 * files (bytes and executable bit) must be exactly those it held when that message was sent;
 * after an undo, those it held before the rewind. Directories as such are not compared (an
 * empty directory the agent made stays, by design: `docs/tracking-boundary.md`).
 *
 * `REWIND_RANDOM_SEEDS` (e.g. `1-500`) runs other seeds than the default 1-40; a failure names
 * its seed and the session's steps.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { turn, text, write, bash } from './lib/harness.mjs'
import { bootWithPlugin, put, textOf, tree } from './plugin-support.mjs'

/** Every file under `dir` (executable bit and bytes): directories as such are not compared. */
const files = (dir) => tree(dir, { dirs: false })

/** A small deterministic generator of numbers in [0, 1). */
function random(seed) {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

const PATHS = ['a', 'b', 'd/c', 'd/e/f', 'g/h', 'x.sh', 'd', 'n/m/o', 'g']
const DIRS = ['d', 'd/e', 'g', 'n', 'n/m']

/** One step of a turn: a shell command (which may fail half-way) or a `write`. */
function step(r, n) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)]
  const p = pick(PATHS)
  const q = pick(PATHS)
  const dir = pick(DIRS)
  const parent = (x) => (x.includes('/') ? `mkdir -p ${x.slice(0, x.lastIndexOf('/'))} 2>/dev/null; ` : '')
  switch (Math.floor(r() * 15)) {
    case 0: return `${parent(p)}echo R${n} > ${p}`
    case 1: return `echo A${n} >> ${p}`
    case 2: return `rm -f ${p}`
    case 3: return `rm -rf ${dir}`
    case 4: return `${parent(q)}mv ${p} ${q}`
    case 5: return `chmod +x ${p}`
    case 6: return `chmod -x ${p}`
    case 7: return `${parent(q)}cp ${p} ${q}`
    case 8: return `: > ${p}`
    case 9: return r() < 0.5 ? `rm -rf d && echo R${n} > d` : `rm -f d; mkdir -p d && echo R${n} > d/c`
    case 10: return `${parent(q)}mv ${dir} ${q}`
    case 11: return `${parent(q)}cp -r ${dir} ${q}`
    case 12: return `mkdir -p n/m && echo N${n} > n/m/o && mv n z && mv z n`
    case 13: return `mkdir -p t${n}/u && echo T${n} > t${n}/u/v && mv t${n} ${pick(DIRS)}/`
    default: return { write: p, content: `W${n}\n` }
  }
}

/** The seq of the human message `text` on the agent's conversation (the newest of that text). */
function seqOf(agent, text) {
  const event = agent.session.events.findLast((e) => e.type === 'user/message' && e.data?.source?.kind === 'user' && textOf(e.data) === text)
  if (event === undefined) throw new Error(`no human message "${text}"`)
  return event.seq
}

async function playSeed(seed) {
  const r = random(seed)
  const steps = []
  const host = await bootWithPlugin({ shell: true, script: [] })
  try {
    const ws = host.workspace
    await put(join(ws, 'a'), 'a0\n')
    await put(join(ws, 'd/c'), 'c0\n')
    await put(join(ws, 'd/e/f'), 'f0\n')
    await put(join(ws, 'x.sh'), '#!/bin/sh\n')
    const agent = await host.createAgent(`random-${seed}`)
    const context = () => `seed ${seed}:\n${steps.join('\n')}`
    /** The conversation's messages, each with the files as they were when it was sent. */
    let messages = []
    let n = 0
    const send = async () => {
      const message = `m${n++}`
      const calls = []
      for (let i = 1 + Math.floor(r() * 3); i > 0; i--) {
        const s = step(r, n * 10 + i)
        calls.push(typeof s === 'string' ? bash(`${s}; true`) : write(s.write, s.content))
        steps.push(`${message}: ${typeof s === 'string' ? s : `write ${s.write}`}`)
      }
      host.addTurns(turn(...calls, text('done')))
      const sent = await files(ws)
      await host.sendUser(agent, message)
      messages.push({ message, sent })
    }
    for (let i = 0; i < 5; i++) await send()
    for (let round = 0; round < 3; round++) {
      const k = Math.floor(r() * messages.length)
      const target = messages[k]
      const before = await files(ws)
      steps.push(`rewind to ${target.message}`)
      const { result } = await host.runCommand(agent, `/rewind @${seqOf(agent, target.message)}`)
      assert.equal(result.kind, 'success', `${result.text}\n${context()}`)
      assert.deepEqual(await files(ws), target.sent, `rewound to ${target.message}; ${context()}`)
      if (r() < 0.4) {
        steps.push('undo')
        const undo = await host.runCommand(agent, '/rewind undo')
        assert.equal(undo.result.kind, 'success', `${undo.result.text}\n${context()}`)
        assert.deepEqual(await files(ws), before, `undone; ${context()}`)
      }
      // This conversation goes on from the message rewound to (an undo continues the one
      // before in a session of its own).
      messages = messages.slice(0, k)
      for (let i = 0; i < 2; i++) await send()
    }
  } finally {
    await host.dispose()
  }
}

function seeds() {
  const spec = process.env.REWIND_RANDOM_SEEDS ?? '1-40'
  const m = /^(\d+)-(\d+)$/.exec(spec)
  if (m === null || Number(m[1]) > Number(m[2])) throw new Error(`REWIND_RANDOM_SEEDS: a range like 1-40, not ${spec}`)
  return Array.from({ length: Number(m[2]) - Number(m[1]) + 1 }, (_, i) => Number(m[1]) + i)
}

test('random shell and write-tool sessions: every rewind brings back the files as they were at its message, every undo as they were before it', async (t) => {
  for (const seed of seeds()) await t.test(`seed ${seed}`, () => playSeed(seed))
})
