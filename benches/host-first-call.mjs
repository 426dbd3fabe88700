#!/usr/bin/env node
/**
 * A turn's first write-tool call on the real DSH host (0.1.0-rc.8 spine, scripted model), after
 * the model's pause, as a user meets it. `cold-call.mjs` times the addon's calls alone after an
 * idle pause, so the call is the first thing the process does when its CPU comes back, and pays
 * all of the machine's waking-up. On a host the call comes after the host's own work for the
 * same tool call (the model's stream, the `tool/call` event, the tool's checks and its look at
 * the file), as it does here.
 *
 * Each round, three hosts in this process (one with the plugin, one with the plugin and its backups
 * turned off for the session, one without it; the same mounts, each with a session of its own in a
 * workspace of its own) run the same turn: a user message (with the
 * plugin, its re-check of the tracked files and its workspace scan), then the scripted model waits
 * `HOST_FIRST_CALL_PAUSE` ms (300) before it answers with one `write` of a 16 KiB file two
 * directories down, content of its own every round. Timed:
 *
 *   - with the plugin, the addon's two calls of that write as the plugin makes them on the host
 *     (`captureNow` before the write, `commitNow` after it; the goal's figure): every call of the
 *     addon's `BindingStore` in this process is timed in place, and a call the addon hands to its
 *     thread pool is counted apart (its time there is not the call's);
 *   - in each host, the tool call from its `tool/call` event to its `tool/result` event: the
 *     with-plugin host's span over the one without is what the plugin adds to the call's latency
 *     (its commit runs after the result, so it is in the addon's figure but not in this one);
 *     against the host whose backups are off, what its work for the call adds, and that host's
 *     against the one without, what the host's own dispatch costs with the plugin's listeners;
 *   - after the same pause, alternated with the turns: one `fs.statSync` of a file and Node's own
 *     synchronous read + write of a 16 KiB file (the goal's baseline).
 *
 * The host with the plugin is run once per session size (\`HOST_FIRST_CALL_TRACKED\`, tracked
 * files: 100, 1,000, 10,000 and 100,000 by default), the two others at the first size. A set-up
 * turn makes the files: one \`write\` of the file the rounds rewrite, then one \`bash\` call that
 * creates the others, a thousand a directory, which the plugin's workspace scan after the
 * call records as created (so every message re-checks them all, and its scan walks them); the
 * plugin's file limit is raised above the size first. Its message work is timed too: the
 * addon's \`recheck\` and \`scan\` of each message, on the thread pool, while the model pauses.
 * Run with Node 24 after \`scripts/build.sh\`: \`node benches/host-first-call.mjs\`.
 * \`HOST_FIRST_CALL_ROUNDS\` (30), \`HOST_FIRST_CALL_PAUSE\` (ms, 1000: long enough for the
 * message's re-check and scan of 100,000 files to be done before the model answers, as a
 * model's first tool call usually comes seconds after the message), \`HOST_FIRST_CALL_TRACKED\`,
 * \`HOST_FIRST_CALL_PER_DIR\` (files a directory, 1000; 100000 puts a session's files in one).
 * Writes target/bench-results/host-first-call.md.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { startHost, turn, text, tools, bash, gate, gated } from '../tests/host/lib/harness.mjs'
import { pluginSettled, rpc } from '../tests/host/plugin-support.mjs'
import { callContent } from './support/content.mjs'
import { numbers, ROOT } from './support/options.mjs'
import { bootstrap, median } from './support/stats.mjs'

const [ROUNDS] = numbers('HOST_FIRST_CALL_ROUNDS', '30')
const [PAUSE] = numbers('HOST_FIRST_CALL_PAUSE', '1000', 0)
const SIZES = numbers('HOST_FIRST_CALL_TRACKED', '100,1000,10000,100000', 2)
const [PER_DIR] = numbers('HOST_FIRST_CALL_PER_DIR', '1000')
const SIZE = 16 * 1024
const FILE = 'src/app/w.ts'
const content = callContent(SIZE)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// The plugin loads its addon from `native/` next to `lib/`: the same module as this require, so
// timing its class's methods here times the plugin's own calls.
const { BindingStore } = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
/** Times every call of the `BindingStore` methods `names` in place: `record(name, start, returned)` right after it returns. */
function timeCalls(names, record) {
  for (const name of names) {
    const original = BindingStore.prototype[name]
    BindingStore.prototype[name] = function (...args) {
      const t = performance.now()
      const out = original.apply(this, args)
      record(name, t, out)
      return out
    }
  }
}
/** The addon calls of the current round, by name: `{ us, queued }` (`queued`: a promise of the thread pool's work). */
let addonCalls = []
timeCalls(['captureNow', 'commitNow'], (name, t, out) => addonCalls.push({ name, us: (performance.now() - t) * 1000, queued: out !== undefined }))
/** The message's work of the current round on the thread pool, by name: `{ ms }` from the call to its promise's settling. */
let messageCalls = []
timeCalls(['recheck', 'scan'], (name, t, out) => {
  const done = () => messageCalls.push({ name, ms: performance.now() - t })
  out.then(done, done)
})

const tmp = await mkdtemp(join(tmpdir(), 'host-first-call-'))

/**
 * A host with or without the plugin, its session tracking `tracked` files; `backups` off: the
 * plugin loaded, its backups turned off for the session after the set-up (it then captures,
 * scans and re-checks nothing, while its listeners still run).
 */
async function boot(withPlugin, tracked, backups = withPlugin) {
  const name = `${withPlugin ? (backups ? 'with' : 'off') : 'without'}-${tracked}`
  const dshHome = join(tmp, `home-${name}`)
  const workspace = join(tmp, `ws-${name}`)
  const plugins = withPlugin ? [[await import(join(ROOT, 'lib', 'index.js')), { dshHome }]] : []
  const host = await startHost({ workspace, dshHome, plugins, invariants: false, script: [], webServer: true, settings: true, shell: true })
  /** `tool/call` to `tool/result`, by call id (ms). */
  const spans = new Map()
  const started = new Map()
  host.ctx.on('session/event', (session, event) => {
    if (event.type === 'tool/call') started.set(event.data.callId, performance.now())
    else if (event.type === 'tool/result') {
      const result = event.data.message.content[0]
      const t = started.get(result.toolCallId)
      if (t !== undefined) spans.set(result.toolCallId, { ms: performance.now() - t, isError: result.isError })
    }
  })
  const agent = await host.createAgent(`first-call-${name}`)
  const sessionId = agent.session.header.id
  const settings = async (patch) => {
    const set = await rpc(host, 'settings.update', { sessionId, patch })
    for (const [k, v] of Object.entries(patch)) if (set.json?.value?.[k] !== v) throw new Error(`settings.update: ${JSON.stringify(set.json)}`)
  }
  // The scan covers the workspace whole (its default limit is 100,000 files).
  if (withPlugin) await settings({ maxFiles: tracked + 1000 })
  // The file the rounds rewrite, then the others, made by the shell (the scan after the call
  // records them as created: tracked from then on).
  // A thousand files a directory by default, as in a project's tree.
  const dirs = Math.ceil(tracked / PER_DIR)
  const made = `for d in $(seq 0 ${dirs - 1}); do mkdir -p src/t/d$d; done && awk 'BEGIN { for (i = 1; i < ${tracked}; i++) { f = "src/t/d" int(i / ${PER_DIR}) "/f" i ".txt"; print "file " i > f; close(f) } }'`
  host.addTurns(turn(
    tools({ name: 'write', id: 'setup-w', args: { file_path: FILE, content: content(-1).toString('latin1') } }),
    bash(made, { id: 'setup-files' }),
    text('set up'),
  ))
  await host.sendUser(agent, 'set up')
  if (withPlugin) await pluginSettled(host, agent)
  for (const id of ['setup-w', 'setup-files']) if (spans.get(id)?.isError !== false) throw new Error(`set-up call ${id} failed in the host ${name}`)
  if (withPlugin && !backups) await settings({ backups: false })
  return { host, agent, spans, withPlugin: withPlugin && backups, name, tracked, workspace }
}

/** One turn of `h`: the message, the model's pause, one write of the file. */
async function round(h, r) {
  const g = gate()
  void g.reached.then(() => setTimeout(g.release, PAUSE))
  const id = `first-${r}`
  h.host.addTurns(turn(gated(g, tools({ name: 'write', id, args: { file_path: FILE, content: content(r).toString('latin1') } })), text('done')))
  addonCalls = []
  messageCalls = []
  await h.host.sendUser(h.agent, `round ${r}`)
  if (h.withPlugin) await pluginSettled(h.host, h.agent)
  const span = h.spans.get(id)
  if (span === undefined || span.isError) throw new Error(`round ${r}: the write failed in the host ${h.name}`)
  const of = (name) => addonCalls.filter((c) => c.name === name)
  const [capture, commit] = [of('captureNow'), of('commitNow')]
  const expected = h.withPlugin ? 1 : 0
  if (capture.length !== expected || commit.length !== expected) {
    throw new Error(`round ${r}, host ${h.name}: expected ${expected} capture and commit, saw ${capture.length} and ${commit.length}`)
  }
  const message = (name) => messageCalls.filter((c) => c.name === name).reduce((sum, c) => sum + c.ms, 0)
  return { span: span.ms * 1000, capture: capture[0], commit: commit[0], recheck: message('recheck'), scan: message('scan') }
}

const probeFile = join(tmp, 'probe.ts')
writeFileSync(probeFile, content(-2))
const probes = {
  stat: () => statSync(probeFile),
  readWrite: (r) => {
    readFileSync(probeFile)
    writeFileSync(probeFile, content(r))
  },
}
async function probe(name, r) {
  await sleep(PAUSE)
  const t = performance.now()
  probes[name](r)
  return (performance.now() - t) * 1000
}

/** The hosts with the plugin, one per size; the first is also the breakdown's. */
const sized = []
for (const n of SIZES) sized.push(await boot(true, n))
const withPlugin = sized[0]
const off = await boot(true, SIZES[0], false)
const without = await boot(false, SIZES[0])
const rows = []
for (let r = 0; r < ROUNDS; r++) {
  const out = { sized: [] }
  const steps = [
    ...sized.map((h, k) => async () => { out.sized[k] = await round(h, r) }),
    async () => { out.without = await round(without, r) },
    async () => { out.off = await round(off, r) },
    async () => { out.stat = await probe('stat', r) },
    async () => { out.readWrite = await probe('readWrite', r) },
  ]
  for (let k = 0; k < steps.length; k++) await steps[(k + r) % steps.length]()
  out.with = out.sized[0]
  rows.push(out)
}
for (const h of [...sized, off, without]) await h.host.dispose()
await rm(tmp, { recursive: true, force: true })

const us = (v) => `${v.toFixed(1)} µs`
const ms = (v) => `${v.toFixed(1)} ms`
const ci = (xs, unit = us) => bootstrap(xs.map((x) => [x]), median).map(unit).join(' to ')
/** The rounds of host `k` whose two calls ran on the host's thread. */
const inlineOf = (k) => rows.map((r) => r.sized[k]).filter((c) => !c.capture.queued && !c.commit.queued)
const inline = inlineOf(0)
const capture = inline.map((c) => c.capture.us)
const commit = inline.map((c) => c.commit.us)
const both = inline.map((c) => c.capture.us + c.commit.us)
const added = rows.map((r) => r.with.span - r.without.span)
const work = rows.map((r) => r.with.span - r.off.span)
const listening = rows.map((r) => r.off.span - r.without.span)
const readWrite = median(rows.map((r) => r.readWrite))
const call = median(both)
const goal = (v) => `≤ 100 µs: ${v <= 100 ? 'met' : '**not met**'}; ≤ 1.5× Node's read + write: ${(v / readWrite).toFixed(2)}×`
const bySize = SIZES.map((n, k) => {
  const calls = inlineOf(k)
  const sum = calls.map((c) => c.capture.us + c.commit.us)
  return {
    n,
    inline: calls.length,
    call: median(sum),
    interval: ci(sum),
    capture: median(calls.map((c) => c.capture.us)),
    commit: median(calls.map((c) => c.commit.us)),
    span: median(rows.map((r) => r.sized[k].span)),
    recheck: median(rows.map((r) => r.sized[k].recheck)),
    scan: median(rows.map((r) => r.sized[k].scan)),
  }
})
const calls = bySize.map((b) => b.call)
const curve = Math.max(...calls) / Math.min(...calls)
const lines = [
  `## A turn's first call on the host (\`benches/host-first-call.mjs\`)`,
  '',
  `Real DSH 0.1.0-rc.8 spine in-process (scripted model, invariant checkers off, DSH's \`bash\` tool mounted), Node ${process.version}; ${ROUNDS} rounds, each a turn of a host with the plugin per session size (${SIZES.map((n) => n.toLocaleString('en-US')).join(', ')} tracked files, made by a \`bash\` call of the set-up turn, ${PER_DIR.toLocaleString('en-US')} a directory; "Track every change" on) and of one without the plugin: the user's message (with the plugin, its re-check of the tracked files and its workspace scan, on the thread pool), the model's pause of ${PAUSE} ms, then one \`write\` of a 16 KiB file two directories down (\`${FILE}\`), content of its own every round; alternated with Node's own work on a file after the same pause. Medians over the rounds, 95 % intervals by bootstrap; a third host has the plugin loaded with its backups off for the session (at ${SIZES[0].toLocaleString('en-US')} files, as the host without it).`,
  '',
  `By session size: the plugin's capture + commit of the turn's first call, timed in place on the host's thread (the rounds in which both ran there; a call handed to the addon's thread pool is counted apart), and the message's work before it.`,
  '',
  "| tracked files | capture + commit of the turn's first call | 95 % interval | its capture + commit | rounds on the host's thread | the tool call, `tool/call` to `tool/result` | the message's re-check | its workspace scan | goals |",
  '|---:|---:|---|---:|---:|---:|---:|---:|---|',
  ...bySize.map((b) => `| ${b.n.toLocaleString('en-US')} | ${us(b.call)} | ${b.interval} | ${us(b.capture)} + ${us(b.commit)} | ${b.inline} of ${rows.length} | ${us(b.span)} | ${ms(b.recheck)} | ${ms(b.scan)} | ${goal(b.call)} |`),
  '',
  `Curve max / min of the first call's capture + commit: ${curve.toFixed(2)} (goal ≤ 1.2: ${curve <= 1.2 ? 'met' : '**not met**'}).`,
  '',
  `At ${SIZES[0].toLocaleString('en-US')} tracked files, with the host without the plugin and the one with its backups off:`,
  '',
  '| | median | 95 % interval | goal |',
  '|---|---:|---|---|',
  `| the plugin's capture + commit of the turn's first call | ${us(call)} | ${ci(both)} | ${goal(call)} |`,
  `| its capture (before the write) | ${us(median(capture))} | ${ci(capture)} | — |`,
  `| its commit (after the write) | ${us(median(commit))} | ${ci(commit)} | — |`,
  `| the tool call, \`tool/call\` to \`tool/result\`, with the plugin | ${us(median(rows.map((r) => r.with.span)))} | ${ci(rows.map((r) => r.with.span))} | — |`,
  `| the same without the plugin | ${us(median(rows.map((r) => r.without.span)))} | ${ci(rows.map((r) => r.without.span))} | — |`,
  `| the same with the plugin loaded, its backups off for the session | ${us(median(rows.map((r) => r.off.span)))} | ${ci(rows.map((r) => r.off.span))} | — |`,
  `| what the plugin adds to the call (median of the rounds' differences, with against without) | ${us(median(added))} | ${ci(added)} | — |`,
  `| of which its work for the call (with against backups off) | ${us(median(work))} | ${ci(work)} | — |`,
  `| of which the host's with its listeners there (backups off against without) | ${us(median(listening))} | ${ci(listening)} | — |`,
  `| Node: \`statSync\` after the same pause | ${us(median(rows.map((r) => r.stat)))} | ${ci(rows.map((r) => r.stat))} | — |`,
  `| Node: read + write of 16 KiB (sync) after the same pause | ${us(readWrite)} | ${ci(rows.map((r) => r.readWrite))} | — |`,
  '',
]
mkdirSync(join(ROOT, 'target', 'bench-results'), { recursive: true })
writeFileSync(join(ROOT, 'target', 'bench-results', 'host-first-call.md'), lines.join('\n'))
console.log(lines.join('\n'))
