#!/usr/bin/env node
/**
 * The cost a user pays per write-tool call: the plugin's `capture` before the write and `commit`
 * after it, called through the packed napi addon from Node, for a 16 KiB file, next to Node's own
 * read + write of the same file (fs/promises) measured in the same run, alternated. The file is
 * two directories down, as most of a project's files are. Four sessions,
 * with 100, 1,000, 10,000 and 100,000 files already tracked, take the calls in turn, to record the
 * curve. Every call writes content of its own (as an edit does), and a turn's calls write the same
 * file: the first call of a turn stores the file's content as it was before the turn; the later
 * calls of the turn find that state recorded and read nothing. Both are reported.
 *
 * The plugin re-checks the tracked files at every message, before the turn's first call: a file
 * the turn before wrote is read there and its state at the message recorded, so the turn's first
 * call finds it recorded too. A second session per size runs the calls that way (`recheck` at
 * each new message, timed apart: it is paid once per message, not per call); the first session
 * has no message between its turns, the worst case of a first call (content new to the store,
 * as after a shell command changed the file within the turn).
 *
 * The tool's write, as Node's `writeFile` makes it, truncates the file first. On an ext4 mounted
 * with `discard` (this machine's disk) the truncate frees the old blocks and discards them, and the
 * close of a file truncated and written again starts its write-back (`auto_da_alloc`); the
 * block layer's completions of that I/O are handled on the CPU that started it, in the next
 * calls of the plugin. A third session per size (`inplace`) runs the calls of the first with the
 * tool's write (and the baseline's) made over the file's old bytes, with no truncate: what the
 * plugin's calls cost without the kernel's work for the tool's truncate. (DSH's own write tool
 * writes a temporary file, `fsync`s it and renames it over the file; `big-turn.mjs` measures the
 * plugin beside it on the real host.)
 *
 * With "Track every change" on (the plugin's default), the host also scans the workspace at every
 * message, and its first scan stores every file of the workspace (the baseline). A fourth session
 * per size (`scanned`) runs its turns that way: the workspace holds a file of its own for each
 * turn, stored by the baseline and touched by no tool before its turn, and each turn begins with
 * the message's re-check and scan (timed apart, together). A turn's first call is then the first
 * edit of a project file the store holds already, the most common first call of a session.
 *
 * Run with Node 24 after `scripts/build.sh`: `node benches/store-addon.mjs`. `STORE_ADDON_TRACKED`
 * (sizes), `STORE_ADDON_BYTES` (the file's size, 16 KiB by default), `STORE_ADDON_FORMS` (`worst`, `host`, `inplace`, `scanned`; all four by default) and `STORE_ADDON_NATIVE`
 * (another build of the addon) narrow a run down, e.g. to one session in a process of its own for
 * an A/B of two builds run one after the other.
 * `STORE_ADDON_WAIT` sets what the event loop does between two calls: `pool` (the default: the
 * baseline's read + write through fs/promises, so the loop waits on the thread pool), `none` (the
 * baseline through the synchronous calls: the calls run back to back, the loop never waits) or
 * `timer` (as `pool`, then a 1 ms timer before each call, as a host waits on the model). A CPU that
 * waited comes back with colder caches; the first call of a turn, which reads, hashes and appends
 * 16 KiB, pays most for it.
 * `STORE_ADDON_AB` names another build of the addon to run beside this one in the same process:
 * every session is set up once per build and the calls go round all of them, in the opposite
 * order every other round, so the machine's drift, the I/O one session starts and the order of
 * the sessions weigh on both builds alike; a table of the two builds side by side is added.
 * Writes target/bench-results/store-addon.md.
 */
import { mkdtemp, mkdir, readFile, writeFile, rm } from 'node:fs/promises'
import { writeFileSync, mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { callContent } from './support/content.mjs'
import { performance } from 'node:perf_hooks'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const require = createRequire(import.meta.url)
// `STORE_ADDON_NATIVE`: another build of the addon (an A/B of two builds on one machine and day).
const NATIVE = process.env.STORE_ADDON_NATIVE ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node')
const { BindingStore } = require(NATIVE)
const AB = process.env.STORE_ADDON_AB
const OTHER = AB ? require(AB).BindingStore : null
const ROUNDS = Number(process.env.STORE_ADDON_ROUNDS ?? 400)
const SIZES = (process.env.STORE_ADDON_TRACKED ?? '100,1000,10000,100000').split(',').map(Number)
/** The bench's forms: what their sessions do, and their names in the tables and in the log. */
const FORM = {
  worst: { messages: false, inPlace: false, scanned: false, name: 'worst case', how: '' },
  host: { messages: true, inPlace: false, scanned: false, name: 'message re-check', how: ', message re-check first' },
  inplace: { messages: false, inPlace: true, scanned: false, name: 'tool writes in place', how: ', the tool writing in place' },
  scanned: { messages: true, inPlace: false, scanned: true, name: 'workspace scanned', how: ', first edit of a scanned file, message re-check and scan first' },
}
const FORMS = (process.env.STORE_ADDON_FORMS ?? Object.keys(FORM).join(',')).split(',')
for (const f of FORMS) if (!(f in FORM)) throw new Error(`STORE_ADDON_FORMS: ${Object.keys(FORM).join(', ')}, not ${f}`)
const WAIT = process.env.STORE_ADDON_WAIT ?? 'pool'
if (!['pool', 'none', 'timer'].includes(WAIT)) throw new Error(`STORE_ADDON_WAIT: pool, none or timer, not ${WAIT}`)
const CAP = 8 * 1024 * 1024
// `STORE_ADDON_BYTES`: the size of the file every call writes (16 KiB by default).
const SIZE = Number(process.env.STORE_ADDON_BYTES ?? 16 * 1024)
if (!(Number.isInteger(SIZE) && SIZE >= 8)) throw new Error(`STORE_ADDON_BYTES: a whole number of bytes (8 or more), not ${process.env.STORE_ADDON_BYTES}`)
const SIZE_TEXT = SIZE % 1024 === 0 ? `${SIZE / 1024} KiB` : `${SIZE} bytes`
/** The file the calls write: two directories down, as most of a project's files are. */
const FILE = 'src/app/w.ts'

/** Calls per turn (per anchor): the first stores the file's state before the turn. */
const PER_TURN = Number(process.env.STORE_ADDON_PER_TURN ?? 4)
/** Turns of a session (the first 20 rounds are not measured). */
const TURNS = Math.ceil((ROUNDS + 20) / PER_TURN)
/** The file turn `j` of a `scanned` session edits: one the baseline stored, no tool touched before. */
const projectFile = (j) => `src/app/e${j}.ts`
/** A workspace scan at a message, as the plugin asks for it with its default settings. */
const boundary = (anchorSeq) => ({ phase: 'boundary', anchorSeq, maxFileBytes: CAP, maxBaselineBytes: 1024 ** 3, maxFiles: 1_000_000 })
/** Content of its own for call `i` (and for the setup's first write, `i` = -1). */
const content = callContent(SIZE)

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

/** A session with `tracked` files already tracked, ready for the measured calls. */
async function setUp(tracked, form, Store = BindingStore) {
  const { messages, inPlace, scanned } = FORM[form]
  const base = await mkdtemp(join(process.env.BENCH_TMP ?? tmpdir(), 'store-addon-'))
  const cwd = join(base, 'ws')
  const raw = join(base, 'raw')
  await mkdir(cwd)
  await mkdir(raw)
  const store = Store.open(join(base, 'store'))
  const sid = `bench-${tracked}-${form}`
  // Setup: `tracked` small files, tracked through one bulk call.
  for (let d = 0; d * 1000 < tracked; d++) mkdirSync(join(cwd, `t${d}`))
  for (let i = 0; i < tracked; i++) writeFileSync(join(cwd, `t${Math.floor(i / 1000)}/f${i}`), `tracked ${i}`)
  // One call naming every one of them (timed: its cost per path must not grow with the call),
  // once the write-back of the files just written (and of the sessions set up before) is done.
  execFileSync('sync')
  // The call's first capture opens the session (its directory, log and locks): timed apart.
  let t = performance.now()
  await store.capture(sid, cwd, 'bulk', 't0/f0', CAP)
  const bulkFirst = performance.now() - t
  t = performance.now()
  for (let i = 1; i < tracked; i++) await store.capture(sid, cwd, 'bulk', `t${Math.floor(i / 1000)}/f${i}`, CAP)
  const bulkCapture = performance.now() - t
  t = performance.now()
  await store.commit(sid, cwd, 'bulk', 1, true)
  const bulkCommit = performance.now() - t
  await store.recheck(sid, cwd, 2, CAP)
  for (const d of [cwd, raw]) {
    mkdirSync(join(d, dirname(FILE)), { recursive: true })
    writeFileSync(join(d, FILE), content(-1))
  }
  let baselineScan = 0
  if (scanned) {
    // The project's files, then the first scan of the workspace (the baseline) once they are
    // older than the scan's racy window (a file changed within 50 ms before a scan is read
    // again, not trusted).
    for (let j = 0; j < TURNS; j++) writeFileSync(join(cwd, projectFile(j)), content(-2 - j))
    execFileSync('sync')
    await new Promise((resolve) => setTimeout(resolve, 100))
    t = performance.now()
    const r = await store.scan(sid, cwd, boundary(2))
    baselineScan = performance.now() - t
    if (!r.baselineComplete || r.refused) throw new Error(`baseline scan: ${JSON.stringify(r)}`)
  }
  return { tracked, form, messages, inPlace, scanned, other: Store !== BindingStore, base, cwd, raw, store, ...callsOf(store), sid, bulkFirst, bulkCapture, bulkCommit, baselineScan, first: [], later: [], bas: [], rechecks: [], firstCapture: [], firstCommit: [] }
}

// The calls as the plugin makes them: `captureNow` / `commitNow` (`undefined` when done on this
// thread, else a promise). The bench awaits what they return: `await undefined` costs a microtask
// that the plugin, which goes on without it, does not pay.
// A build from before those calls (an A/B) is called as the plugin of its day called it; which
// form a session's build has is looked at once, when it is set up (\`setUp\`).
function callsOf(store) {
  const now = typeof store.captureNow === 'function'
  return {
    captureNow: now ? (...a) => store.captureNow(...a) : (...a) => store.capture(...a),
    commitNow: now ? (...a) => store.commitNow(...a) : (...a) => store.commit(...a),
  }
}

/** One write-tool call on `p` (capture, the tool's write, commit) and one baseline read + write. */
async function round(p, i) {
  const next = content(i)
  const call = `w${i}`
  const anchor = 3 + Math.floor(i / PER_TURN)
  let t
  if (WAIT === 'timer') await new Promise((resolve) => setTimeout(resolve, 1))
  if (p.messages && i % PER_TURN === 0) {
    t = performance.now()
    await p.store.recheck(p.sid, p.cwd, anchor, CAP)
    if (p.scanned) await p.store.scan(p.sid, p.cwd, boundary(anchor))
    if (i >= 20) p.rechecks.push(performance.now() - t)
  }
  const file = p.scanned ? projectFile(Math.floor(i / PER_TURN)) : FILE
  t = performance.now()
  await p.captureNow(p.sid, p.cwd, call, file, CAP, anchor)
  const capture = performance.now() - t
  // The tool's own write, not the plugin's cost: truncate and write, or over the old bytes.
  const how = p.inPlace ? { flag: 'r+' } : undefined
  writeFileSync(join(p.cwd, file), next, how)
  t = performance.now()
  await p.commitNow(p.sid, p.cwd, call, anchor, true)
  const commit = performance.now() - t
  t = performance.now()
  let bytes
  if (WAIT === 'none') {
    bytes = readFileSync(join(p.raw, FILE))
    writeFileSync(join(p.raw, FILE), next, how)
  } else {
    bytes = await readFile(join(p.raw, FILE))
    await writeFile(join(p.raw, FILE), next, how)
  }
  const baseline = performance.now() - t
  if (bytes.length !== SIZE) throw new Error('baseline read')
  if (i >= 20) {
    ;(i % PER_TURN === 0 ? p.first : p.later).push(capture + commit)
    if (i % PER_TURN === 0) {
      p.firstCapture.push(capture)
      p.firstCommit.push(commit)
    }
    p.bas.push(baseline)
  }
}

// Every point is set up first, then the calls go round the points in turn, so a change in
// the machine's speed during the run weighs on every point alike (the curve compares them).
const points = []
const stores = OTHER ? [BindingStore, OTHER] : [BindingStore]
for (const form of Object.keys(FORM).filter((f) => FORMS.includes(f))) {
  for (const n of SIZES) for (const Store of stores) points.push(await setUp(n, form, Store))
}
// The sessions whose tool truncates and the in-place sessions take turns by blocks of rounds,
// so that the machine's drift weighs on both alike; each block begins once the write-back of the
// one before is done (\`sync\`): the in-place calls must not meet the completions of I/O the
// truncating sessions started.
const phases = [points.filter((p) => !p.inPlace), points.filter((p) => p.inPlace)].filter((ps) => ps.length)
const BLOCK = 50
for (let from = 0; from < ROUNDS + 20; from += BLOCK) {
  for (const phase of phases) {
    execFileSync('sync') // write back the setup's (and the block before's) dirty data
    for (let i = from; i < Math.min(from + BLOCK, ROUNDS + 20); i++) {
      for (const p of OTHER && i % 2 ? [...phase].reverse() : phase) await round(p, i)
    }
  }
}
const byForm = Object.fromEntries(Object.keys(FORM).map((f) => [f, []]))
const { worst: rows, host: hostRows, scanned: scannedRows, inplace: inPlaceRows } = byForm
const abRows = []
for (const p of points) {
  const r = {
    tracked: p.tracked,
    recheck: p.messages ? median(p.rechecks) * 1000 : 0,
    first: median(p.first) * 1000,
    later: median(p.later) * 1000,
    form: FORM[p.form].name,
    baselineScan: p.baselineScan,
    firstCapture: median(p.firstCapture) * 1000,
    firstCommit: median(p.firstCommit) * 1000,
    subject: median([...p.first, ...p.later]) * 1000,
    baseline: median(p.bas) * 1000,
    bulkFirst: p.bulkFirst,
    bulkCapture: (p.bulkCapture / (p.tracked - 1)) * 1000,
    bulkCommit: p.bulkCommit,
  }
  if (OTHER) abRows.push({ ...r, other: p.other })
  const how = `${FORM[p.form].how}${p.other ? `, ${AB}` : ''}`
  const calls = `tool call ${SIZE_TEXT} at ${r.tracked} tracked${how}: first of a turn ${r.first.toFixed(1)} µs (capture ${r.firstCapture.toFixed(1)} + commit ${r.firstCommit.toFixed(1)}), later ${r.later.toFixed(1)} µs, all ${r.subject.toFixed(1)} µs`
  if (p.other) {
    console.log(calls)
    await rm(p.base, { recursive: true, force: true })
    continue
  }
  console.log(`one call naming ${r.tracked} paths: first capture ${r.bulkFirst.toFixed(2)} ms, then ${r.bulkCapture.toFixed(1)} µs a path, commit ${r.bulkCommit.toFixed(1)} ms`)
  console.log(`${calls} vs read + write ${r.baseline.toFixed(1)} µs${p.messages ? `; ${p.scanned ? 're-check + scan' : 're-check'} ${r.recheck.toFixed(1)} µs` : ''}${p.scanned ? `; baseline scan ${r.baselineScan.toFixed(1)} ms` : ''}`)
  byForm[p.form].push(r)
  await rm(p.base, { recursive: true, force: true })
}
const us = (x) => `${x.toFixed(1)} µs`
const mark = (x, base) => `${(x / base).toFixed(2)}× ${x / base <= 1.5 ? '' : '**over 1.5×** '}${x <= 100 ? '' : '**over 100 µs**'}`.trim()
const lines = [
  '## snapshot-store through the addon (Node)',
  '',
]
const WAIT_TEXT = {
  pool: 'Between two calls the event loop waits on the thread pool (the baseline).',
  none: 'The calls run back to back (`STORE_ADDON_WAIT=none`): the event loop never waits, the CPU stays warm.',
  timer: 'Before each call the event loop waits on a 1 ms timer (`STORE_ADDON_WAIT=timer`), as a host waits on the model.',
}
const curve = (xs) => Math.max(...xs) / Math.min(...xs)
/** The curve of a form's first calls and of all its calls, against the goal. */
function curveLine(rs) {
  const f = curve(rs.map((r) => r.first))
  const a = curve(rs.map((r) => r.subject))
  return `Curve max / min: first calls ${f.toFixed(2)}, all calls ${a.toFixed(2)} (goal ≤ 1.2: ${f <= 1.2 && a <= 1.2 ? 'met' : '**not met**'}).`
}
/** The table of a form without the message's re-check. */
function plainTable(rs) {
  const t = [
    '| tracked files | first call of a turn | its capture + commit | later call of the turn | all calls | Node read + write | first: ratio, goals | all: ratio, goals |',
    '|---:|---:|---:|---:|---:|---:|:-:|:-:|',
  ]
  for (const r of rs) {
    t.push(`| ${r.tracked.toLocaleString('en-US')} | ${us(r.first)} | ${us(r.firstCapture)} + ${us(r.firstCommit)} | ${us(r.later)} | ${us(r.subject)} | ${us(r.baseline)} | ${mark(r.first, r.baseline)} | ${mark(r.subject, r.baseline)} |`)
  }
  return t
}
if (rows.length) lines.push(
  `One write-tool call as the plugin makes it: \`captureNow\` before the write + \`commitNow\` after it (\`capture\` / \`commit\` that return no promise when they run on the calling thread), through the napi addon from Node ${process.version}, ${SIZE_TEXT} file two directories down (\`${FILE}\`), content of its own on every call; ${PER_TURN} calls per turn (anchor) on the same file: the first of a turn stores the file's content (new to the store), the later ones find the file's state at the turn's message recorded and read nothing. Baseline: Node's own \`readFile\` + \`writeFile\` of the same size (${WAIT === 'none' ? 'the synchronous calls' : 'fs/promises'}), alternated in the same run; the calls go round the sessions in turn. ${WAIT_TEXT[WAIT]} Medians of ${ROUNDS} calls per session (${ROUNDS / PER_TURN} first of a turn). Goals: ≤ 1.5× the baseline and ≤ 100 µs; the same figure within 1.2× from 100 to 100,000 tracked files. These sessions have no message between their turns: a turn's first call meets content new to the store (the worst case, as when a shell command changed the file within the turn).`,
  '',
  ...plainTable(rows),
)
if (rows.length) lines.push('', curveLine(rows), '')
if (hostRows.length) lines.push(
  `As the plugin runs on the host: a second session per size, in the same run, whose turns each begin with the message's re-check of the tracked files (\`recheck\` at the new anchor, timed apart: paid once per message, before the turn's first call). The re-check reads the file the turn before wrote and records its state at the message, so the turn's first call finds it recorded and reads nothing.`,
  '',
  '| tracked files | first call of a turn | later call of the turn | all calls | Node read + write | the message\'s re-check | first: ratio, goals | all: ratio, goals |',
  '|---:|---:|---:|---:|---:|---:|:-:|:-:|',
)
for (const r of hostRows) {
  lines.push(`| ${r.tracked.toLocaleString('en-US')} | ${us(r.first)} | ${us(r.later)} | ${us(r.subject)} | ${us(r.baseline)} | ${us(r.recheck)} | ${mark(r.first, r.baseline)} | ${mark(r.subject, r.baseline)} |`)
}
if (hostRows.length) lines.push('', curveLine(hostRows), '')
if (scannedRows.length) lines.push(
  `As the plugin runs on the host with "Track every change" on (its default): a fourth session per size, in the same run, whose workspace the plugin scans. Its first scan (the baseline, at set-up) stored every file of the workspace, among them a ${SIZE_TEXT} file of its own for each turn (\`src/app/e<turn>.ts\`), which no tool touches before its turn. Each turn begins with the message's re-check and workspace scan (timed apart, together), then its ${PER_TURN} calls edit that turn's file: the turn's first call is the first edit of a project file the store holds already (the capture finds the scan's entry matching the file and reads nothing), the later ones find the file's state at the message recorded.`,
  '',
  "| tracked files | first call of a turn | its capture + commit | later call of the turn | all calls | Node read + write | the message's re-check + scan | baseline scan | first: ratio, goals | all: ratio, goals |",
  '|---:|---:|---:|---:|---:|---:|---:|---:|:-:|:-:|',
  ...scannedRows.map((r) => `| ${r.tracked.toLocaleString('en-US')} | ${us(r.first)} | ${us(r.firstCapture)} + ${us(r.firstCommit)} | ${us(r.later)} | ${us(r.subject)} | ${us(r.baseline)} | ${us(r.recheck)} | ${r.baselineScan.toFixed(1)} ms | ${mark(r.first, r.baseline)} | ${mark(r.subject, r.baseline)} |`),
  '',
  curveLine(scannedRows),
  '',
)
if (inPlaceRows.length) {
  lines.push(
    "The calls of the first table with the tool's write made over the file's old bytes (`writeFile` with the flag `r+`: no truncate), the baseline's write too, a third session per size in the same run, taking turns with the sessions above by blocks of " + BLOCK + " rounds, each block after a `sync` (within a block the calls go round these sessions on their own). Node's `writeFile` truncates the file first; on this machine's ext4, mounted with `discard`, the truncate discards the file's old blocks and the close starts the write-back of the new ones (`auto_da_alloc`), and the block layer's completions of that I/O are handled on the CPU that started it, in the plugin's next calls. Here no I/O is started by the tool's write: the plugin's own cost.",
    '',
    ...plainTable(inPlaceRows),
    '',
    curveLine(inPlaceRows),
    '',
  )
}
// The setup's one call naming every tracked file, per session of the run.
const bulk = [...rows, ...hostRows, ...inPlaceRows, ...scannedRows]
if (bulk.length) {
  lines.push(
    "One call naming many paths: the setup of each session above captures all its tracked files (small files, 10–16 bytes) in one call through `capture` (the promise form, run on the thread pool), one path after another, then commits the call. The call's first capture opens the session (its directory, log and locks) and is timed apart. The cost per path must not grow with the number of paths the call names.",
    '',
    '| paths in the call | session | first capture (opens the session) | capture, per later path | commit of the call |',
    '|---:|:--|---:|---:|---:|',
  )
  for (const r of bulk) lines.push(`| ${r.tracked.toLocaleString('en-US')} | ${r.form} | ${r.bulkFirst.toFixed(2)} ms | ${us(r.bulkCapture)} | ${r.bulkCommit.toFixed(1)} ms |`)
  // A session of 100 paths set up right after one of 100,000 meets the caches that setup left
  // (its 100 captures are too few to amortise it): the curve is taken from 1,000 paths up.
  // Each form's sessions are set up one after another, the forms at different moments of the
  // run: the curve is taken within each form, and over all of them.
  const big = bulk.filter((r) => r.tracked >= 1000)
  const forms = [...new Set(big.map((r) => r.form))]
  const within = forms.map((f) => `${f} ${curve(big.filter((r) => r.form === f).map((r) => r.bulkCapture)).toFixed(2)}`)
  if (big.length) lines.push('', `Curve max / min of the capture per path, from 1,000 paths up: ${within.join(', ')}; over all sessions ${curve(big.map((r) => r.bulkCapture)).toFixed(2)}.`, '')
}
if (abRows.length) {
  lines.push(
    `The same calls of this build (\`${NATIVE}\`) and of another (\`${AB}\`) in one process: each session above set up once per build, the calls going round all of them, in the opposite order every other round.`,
    '',
    '| session | tracked files | first call of a turn: this / other | its capture: this / other | later call: this / other | all calls: this / other | the message\'s re-check (+ scan): this / other |',
    '|:--|---:|---:|---:|---:|---:|---:|',
  )
  const pair = (x, y) => `${us(x)} / ${us(y)}`
  for (const r of abRows.filter((x) => !x.other)) {
    const o = abRows.find((x) => x.other && x.form === r.form && x.tracked === r.tracked)
    const message = r.recheck ? pair(r.recheck, o.recheck) : '—'
    lines.push(`| ${r.form} | ${r.tracked.toLocaleString('en-US')} | ${pair(r.first, o.first)} | ${pair(r.firstCapture, o.firstCapture)} | ${pair(r.later, o.later)} | ${pair(r.subject, o.subject)} | ${message} |`)
  }
  lines.push('')
}
const out = join(ROOT, 'target', 'bench-results')
await mkdir(out, { recursive: true })
await writeFile(join(out, 'store-addon.md'), lines.join('\n'))
console.log(`wrote ${join(out, 'store-addon.md')}`)
