#!/usr/bin/env node
/**
 * A turn's first write-tool call as a user meets it: after the model's pause. Between a message
 * and its turn's first tool call the host waits on the model for a second or more, and a CPU that
 * waited comes back to the process with cold caches: every first system call costs more then,
 * the plugin's and Node's alike. This bench measures the plugin's first call of a turn (capture
 * before the write, commit after it, through the packed addon; 16 KiB file, two directories down)
 * after an idle pause of each length in `COLD_CALL_PAUSES` (ms), and, each after the same pause
 * and alternated with it, what the same machine charges for the least file work from Node:
 *
 *   - one `fs.statSync` of the file (the floor of any one file-system call from JavaScript);
 *   - one addon call that does nothing (`addonVersion`: the floor of a call into the addon);
 *   - Node's own read + write of the file, synchronous, and through fs/promises.
 *
 * Two forms of the plugin's call, each in sessions with 100, 10,000 and 100,000 files tracked
 * (`COLD_CALL_TRACKED`): `message re-check first` (the plugin's default path: the message's
 * re-check, then the pause, then the call, which finds the file's state recorded at the message)
 * and `worst case` (no message between the turns: the call reads, hashes and keeps content new
 * to the store). `store-addon.mjs` measures the same calls warm, back to back.
 *
 * Right after a message's re-check of many files, a first call costs more in large sessions
 * than in small ones. Two control rows tell whether that is the session's size or the footprint
 * of the work just before the call: the smallest `message re-check first` session's first call
 * right after the re-check of a session as large as the largest (a session of its own, which
 * takes no calls: a second re-check of a timed session would leave its file's state at the
 * next message unrecorded, and its call would then read the file), then its own re-check; and
 * right after Node `statSync`s that session's tracked files, then its own re-check. If the
 * session's size is what costs, these rows stay at the small session's own figure; if the
 * caches the large re-check emptied are what costs, they rise to the large session's.
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/cold-call.mjs`. `COLD_CALL_TRIALS`
 * (30), `COLD_CALL_NATIVE` (another build of the addon). Writes target/bench-results/cold-call.md.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { callContent } from './support/content.mjs'
import { numbers } from './support/options.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const require = createRequire(import.meta.url)
const NATIVE = process.env.COLD_CALL_NATIVE ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node')
const addon = require(NATIVE)
const PAUSES = numbers('COLD_CALL_PAUSES', '1,300', 0)
const SIZES = numbers('COLD_CALL_TRACKED', '100,10000,100000', 0)
const [TRIALS] = numbers('COLD_CALL_TRIALS', '30', 0)
const CAP = 8 * 1024 * 1024
const SIZE = 16 * 1024
const FILE = 'src/app/w.ts'

const content = callContent(SIZE)
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const tmp = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'cold-call-'))

/** A session with `tracked` files tracked, whose turns write `FILE`. */
async function setUp(tracked, form) {
  const base = join(tmp, `${form}-${tracked}`)
  const cwd = join(base, 'ws')
  mkdirSync(join(cwd, 'src', 'app'), { recursive: true })
  const store = addon.BindingStore.open(join(base, 'store'))
  const sid = `cold-${form}-${tracked}`
  for (let i = 0; i < tracked; i++) {
    const dir = join(cwd, 't', String(Math.floor(i / 1000)))
    if (i % 1000 === 0) mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, `f${i}`), `tracked ${i}\n`)
  }
  for (let i = 0; i < tracked; i += 1000) {
    const paths = []
    for (let k = i; k < Math.min(tracked, i + 1000); k++) paths.push(`t/${Math.floor(k / 1000)}/f${k}`)
    for (const p of paths) await store.capture(sid, cwd, `bulk${i}`, p, CAP)
    await store.commit(sid, cwd, `bulk${i}`, 1, true)
  }
  writeFileSync(join(cwd, FILE), content(-1))
  return { tracked, form, cwd, store, sid, anchor: 1, call: 0, times: new Map() }
}

/** The message's re-check of `s` at its next anchor. */
async function recheck(s) {
  s.anchor += 1
  await s.store.recheck(s.sid, s.cwd, s.anchor, CAP)
}

/** What a control row does before its session's own turn: touch the files of `large` (below). */
const before = {
  recheck: () => recheck(large),
  stat: async () => {
    for (let i = 0; i < large.tracked; i++) statSync(join(large.cwd, 't', String(Math.floor(i / 1000)), `f${i}`))
  },
}

/** One turn's first call of `s` after `ms` of idle (the message's re-check first, when the form has it). */
async function firstCall(s, ms, touch = null) {
  if (touch) await before[touch]()
  s.call += 1
  const id = `w${s.call}`
  if (s.form === 'host') await recheck(s)
  else s.anchor += 1
  await pause(ms)
  let t = performance.now()
  await s.store.captureNow(s.sid, s.cwd, id, FILE, CAP, s.anchor)
  const capture = performance.now() - t
  writeFileSync(join(s.cwd, FILE), content(s.call))
  t = performance.now()
  await s.store.commitNow(s.sid, s.cwd, id, s.anchor, true)
  return capture + performance.now() - t
}

const raw = join(tmp, 'raw')
mkdirSync(join(raw, 'src', 'app'), { recursive: true })
writeFileSync(join(raw, FILE), content(-1))
let rawCall = 0
/** Node's own work on the same file, each after `ms` of idle. */
const floors = {
  stat: async () => {
    const t = performance.now()
    statSync(join(raw, FILE))
    return performance.now() - t
  },
  'addon call': async () => {
    const t = performance.now()
    addon.addonVersion()
    return performance.now() - t
  },
  'read + write (sync)': async () => {
    const next = content(++rawCall)
    const t = performance.now()
    readFileSync(join(raw, FILE))
    writeFileSync(join(raw, FILE), next)
    return performance.now() - t
  },
  'read + write (fs/promises)': async () => {
    const next = content(++rawCall)
    const t = performance.now()
    await readFile(join(raw, FILE))
    await writeFile(join(raw, FILE), next)
    return performance.now() - t
  },
}

const sessions = []
for (const form of ['host', 'worst']) for (const n of SIZES) sessions.push(await setUp(n, form))
const hosts = sessions.filter((s) => s.form === 'host').sort((a, b) => a.tracked - b.tracked)
const small = hosts[0]
/** The control rows (only when the run has two sizes or more), and the session whose files they touch. */
const large = hosts.length > 1 ? await setUp(hosts[hosts.length - 1].tracked, 'control') : null
const controls = large ? Object.keys(before).map((touch) => ({ touch, times: new Map() })) : []
const floorTimes = new Map()
const record = (map, key, ms, v) => {
  const k = `${key}@${ms}`
  if (!map.has(k)) map.set(k, [])
  map.get(k).push(v)
}
// Warm-up turns (not measured), then the trials: every pause, every session and every floor in
// turn, the order reversed every other trial so that drift weighs on all alike.
for (const s of sessions) for (let w = 0; w < 3; w++) await firstCall(s, 1)
for (const c of controls) await firstCall(small, 1, c.touch)
for (let trial = 0; trial < TRIALS; trial++) {
  const steps = []
  for (const ms of PAUSES) {
    for (const s of sessions) steps.push(async () => record(s.times, '', ms, await firstCall(s, ms)))
    for (const c of controls) steps.push(async () => record(c.times, '', ms, await firstCall(small, ms, c.touch)))
    for (const [name, f] of Object.entries(floors)) {
      steps.push(async () => {
        await pause(ms)
        record(floorTimes, name, ms, await f())
      })
    }
  }
  if (trial % 2 === 1) steps.reverse()
  for (const step of steps) await step()
}
await rm(tmp, { recursive: true, force: true })

const us = (ms) => `${(ms * 1000).toFixed(1)} µs`
const formName = { host: 'message re-check first', worst: 'worst case' }
const head = `| | ${PAUSES.map((ms) => `after ${ms} ms idle`).join(' | ')} |`
const rule = `|---|${PAUSES.map(() => '---:').join('|')}|`
const floorMedian = (name, ms) => median(floorTimes.get(`${name}@${ms}`))
const lines = [
  '## A turn\'s first call after the model\'s pause (`benches/cold-call.mjs`)',
  '',
  `A turn's first write-tool call (capture + commit, 16 KiB, through the addon) after an idle pause,`,
  `next to the least file work Node does after the same pause, measured in the same run and alternated`,
  `(median of ${TRIALS} trials each; ratio: the call over Node's synchronous read + write after the same pause).`,
  '',
  head,
  rule,
]
for (const s of sessions) {
  const cells = PAUSES.map((ms) => {
    const v = median(s.times.get(`@${ms}`))
    return `${us(v)} (${(v / floorMedian('read + write (sync)', ms)).toFixed(2)}×)`
  })
  lines.push(`| first call, ${formName[s.form]}, ${s.tracked.toLocaleString('en-US')} tracked | ${cells.join(' | ')} |`)
}
const controlName = large && {
  recheck: `right after the re-check of another session of ${large.tracked.toLocaleString('en-US')} files`,
  stat: `right after Node stats that session's ${large.tracked.toLocaleString('en-US')} files`,
}
for (const c of controls) {
  const cells = PAUSES.map((ms) => {
    const v = median(c.times.get(`@${ms}`))
    return `${us(v)} (${(v / floorMedian('read + write (sync)', ms)).toFixed(2)}×)`
  })
  lines.push(`| control: first call, message re-check first, ${small.tracked.toLocaleString('en-US')} tracked, ${controlName[c.touch]} | ${cells.join(' | ')} |`)
}
for (const name of Object.keys(floors)) {
  lines.push(`| Node: ${name} | ${PAUSES.map((ms) => us(floorMedian(name, ms))).join(' | ')} |`)
}
for (const form of ['host', 'worst']) {
  const rows = sessions.filter((s) => s.form === form)
  for (const ms of PAUSES) {
    const v = rows.map((s) => median(s.times.get(`@${ms}`)))
    lines.push('', `Curve, ${formName[form]}, after ${ms} ms: ${(Math.max(...v) / Math.min(...v)).toFixed(2)}× (${v.map(us).join(', ')}).`)
  }
}
lines.push('')
const text = lines.join('\n')
process.stdout.write(`${text}\n`)
const out = join(ROOT, 'target', 'bench-results')
mkdirSync(out, { recursive: true })
writeFileSync(join(out, 'cold-call.md'), `${text}\n`)
process.stderr.write(`wrote ${join(out, 'cold-call.md')}\n`)
