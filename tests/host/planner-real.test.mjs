/**
 * The rewind planner (crates/rewind-plan, through its `plan-cli` example) against real DSH
 * session logs (tests/fixtures/*.jsonl) and the real DSH host.
 *
 * For every fixture:
 *   (i)   `plan-cli fold` gives exactly the nodes and replacements of DSH's own `foldSurface`;
 *   candidates are exactly the human messages on the surface plus the unread steering messages,
 *         newest first;
 *   (ii)  for the first, middle and last candidate on the surface, the planned marker is appended
 *         through `Session.append` of a real session resumed from the fixture's JSONL (invariant
 *         checkers on), and `deriveMessages()` then holds exactly the messages of the surface nodes
 *         before the target plus the marker's `(empty message)` user message;
 *   (iii) after a flush, a fresh resume from the JSONL gives the same surface, and the planner
 *         folds the new log like DSH does; a second rewind planned on that log (a rewind of a
 *         rewind) is accepted the same way;
 *   (iv)  refusals (unknown seq, not a human message, shadowed message, index out of range, bad
 *         target) come back as their named planner errors and leave the log unchanged (the
 *         stable `rewind/...` codes are the engine's; its unit tests map each variant).
 *
 * Needs the planner CLI: PLAN_CLI, or $CARGO_TARGET_DIR/debug/examples/plan-cli, or
 * target/debug/examples/plan-cli (scripts/test-host.sh builds it). Run with Node 24:
 *   <node24> --test tests/host/
 */
import { test, describe, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { randomUUID, createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, rm, writeFile, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { foldSurface } from '@deepseek-ai/dsh-session/surface'
import { denormalizeLog, parseJsonl, startHost } from './lib/harness.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = resolve(HERE, '..', '..')
const FIXTURES = join(ROOT, 'tests', 'fixtures')

function findPlanCli() {
  const candidates = [
    process.env.PLAN_CLI,
    process.env.CARGO_TARGET_DIR && join(resolve(ROOT, process.env.CARGO_TARGET_DIR), 'debug', 'examples', 'plan-cli'),
    join(ROOT, 'target', 'debug', 'examples', 'plan-cli'),
  ].filter(Boolean)
  const found = candidates.find((p) => existsSync(p))
  if (found === undefined) {
    throw new Error(`plan-cli not found (looked at ${candidates.join(', ')}); build it with `
      + '`cargo build -p rewind-plan --example plan-cli` or run scripts/test-host.sh')
  }
  return found
}
const PLAN_CLI = findPlanCli()

/** Runs plan-cli; returns {status, json, stderr}. */
function cli(...args) {
  const r = spawnSync(PLAN_CLI, args, { encoding: 'utf8', maxBuffer: 64 << 20 })
  if (r.error) throw r.error
  let json
  try { json = JSON.parse(r.stdout) } catch {
    throw new Error(`plan-cli ${args.join(' ')}: stdout is not JSON (status ${r.status}): ${r.stdout}\n${r.stderr}`)
  }
  return { status: r.status, json, stderr: r.stderr }
}

function planOk(file, target) {
  const r = cli('plan', file, target)
  assert.equal(r.status, 0, `plan ${target}: exit ${r.status} ${JSON.stringify(r.json)} ${r.stderr}`)
  assert.equal(r.json.ok, true, `plan ${target}: ${JSON.stringify(r.json)}`)
  return r.json.plan
}

/**
 * `kind` is the planner's error variant as plan-cli names it (`PlanError::NotOnSurface`); a kind
 * ending in `::` accepts any variant of that enum. It may be a list when more than one refusal is
 * true of the target.
 */
function planRefused(file, target, kind) {
  const kinds = Array.isArray(kind) ? kind : [kind]
  const before = sha256(readFileSync(file))
  const r = cli('plan', file, target)
  assert.equal(r.status, 1, `plan ${JSON.stringify(target)} should exit 1: ${JSON.stringify(r.json)}`)
  assert.equal(r.json.ok, false)
  const got = r.json.error?.kind
  assert.ok(
    kinds.some((k) => (k.endsWith('::') ? got?.startsWith(k) : got === k)),
    `plan ${JSON.stringify(target)}: ${JSON.stringify(r.json)}, want ${kinds}`,
  )
  assert.equal(typeof r.json.error.message, 'string')
  assert.ok(r.json.error.message.length > 0, 'refusal carries a message')
  assert.equal(sha256(readFileSync(file)), before, 'log file unchanged')
}

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')

const plainFold = (fold) => ({
  nodes: [...fold.nodes],
  replacements: fold.replacements.map((r) => ({
    seq: r.seq, start: r.start, end: r.end, shadowedSeqs: [...r.shadowedSeqs],
  })),
})

// ---------------------------------------------------------------- DSH-side derivations

const isHuman = (e) => e?.type === 'user/message' && e.data?.source?.kind === 'user'

/** Human messages on the surface, in surface order. */
const surfaceHumans = (events, nodes) => nodes.filter((seq) => isHuman(events[seq]))

/**
 * Unread next-step steering: replays the `agent/inbox/spliced` edits of the next-step inbox
 * (splice at `start`, remove `removedCount`, insert `inserted`) and keeps what is left.
 */
function pendingSteering(events) {
  const inbox = []
  for (const e of events) {
    if (e.type !== 'agent/inbox/spliced' || e.data.target !== 'next-step') continue
    inbox.splice(e.data.start, e.data.removedCount ?? 0,
      ...(e.data.inserted ?? []).map((m) => ({ seq: e.seq, id: m.id, text: textOf(m) })))
  }
  return inbox
}

const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('')

/** The expected candidate list, newest first. */
function expectedCandidates(events, nodes) {
  const list = [
    ...surfaceHumans(events, nodes).map((seq) => ({
      seq, pending: false, messageId: events[seq].data.id, text: textOf(events[seq].data),
    })),
    ...pendingSteering(events).map((p) => ({ seq: p.seq, pending: true, messageId: p.id, text: p.text })),
  ]
  return list.sort((a, b) => b.seq - a.seq)
}

function checkMarkerShape(plan, targetSeq, nodes) {
  const idx = nodes.indexOf(targetSeq)
  assert.ok(idx >= 0)
  const shadowed = nodes.slice(idx)
  assert.equal(plan.targetSeq, targetSeq)
  assert.deepEqual(plan.shadowedSeqs, shadowed)
  const m = plan.marker
  assert.ok(m, 'a surface target gets a marker')
  assert.equal(m.type, 'user/message')
  assert.deepEqual(m.data, {
    role: 'user', content: [{ type: 'text', text: '(empty message)' }], source: { kind: 'dsh-prompt-rewind' },
  })
  assert.deepEqual(m.surfaceOp, { op: 'replace', start: targetSeq, end: nodes.at(-1) })
  assert.deepEqual([...m.sourceEventSeqs].sort((a, b) => a - b), [...shadowed].sort((a, b) => a - b))
  assert.equal(m.turn, undefined, 'marker carries no turn')
  assert.equal(m.data.turn, undefined, 'marker data carries no turn')
}

// ---------------------------------------------------------------- real host

const tmpRoots = []
after(async () => { for (const r of tmpRoots) await rm(r, { recursive: true, force: true }) })

async function freshHost() {
  const root = await mkdtemp(join(tmpdir(), 'rewind-planner-real-'))
  tmpRoots.push(root)
  return startHost({ workspace: join(root, 'ws'), dshHome: join(root, 'dsh-home'), invariants: true })
}

/**
 * Appends the plan's marker to the live session and checks the model context; returns the
 * appended event.
 */
function applyMarker(session, plan) {
  const events = session.events
  const nodes = [...session.surface.nodes]
  const idx = nodes.indexOf(plan.targetSeq)
  assert.ok(idx >= 0, `target ${plan.targetSeq} on the live surface ${nodes}`)
  const kept = nodes.slice(0, idx)
  const data = { ...plan.marker.data, id: randomUUID() }
  const expectedMessages = [
    ...kept.map((seq) => session.deriveEventMessage(events[seq])).filter((m) => m !== null),
    data,
  ]
  const lengthBefore = events.length
  const event = session.append('user/message', data, {
    surfaceOp: plan.marker.surfaceOp,
    sourceEventSeqs: plan.marker.sourceEventSeqs,
  })
  assert.equal(event.seq, lengthBefore)
  assert.deepEqual([...session.surface.nodes], [...kept, event.seq])
  assert.deepEqual(toPlain(session.deriveMessages()), toPlain(expectedMessages))
  return event
}

const toPlain = (x) => JSON.parse(JSON.stringify(x))

/** Fixture text → a live agent resumed from JSONL on a fresh host. */
async function resumeFixture(host, fixtureText) {
  const id = await host.writeJsonl(denormalizeLog(fixtureText, host))
  return host.resume(id)
}

// ---------------------------------------------------------------- the tests

const fixtures = readdirSync(FIXTURES).filter((f) => f.endsWith('.jsonl')).sort()

test('fixtures are present', () => {
  for (const name of ['edits', 'compaction', 'steering', 'steering-pending', 'rewind', 'rewind-twice', 'injected']) {
    assert.ok(fixtures.includes(`${name}.jsonl`), `${name}.jsonl recorded`)
  }
})

for (const fixture of fixtures) {
  const file = join(FIXTURES, fixture)
  const text = readFileSync(file, 'utf8')
  const { events } = parseJsonl(text)
  const dshFold = plainFold(foldSurface(events))
  const nodes = dshFold.nodes
  const humans = surfaceHumans(events, nodes)
  const expected = expectedCandidates(events, nodes)

  describe(fixture, () => {
    test('(i) fold matches DSH foldSurface', () => {
      const r = cli('fold', file)
      assert.equal(r.status, 0, r.stderr)
      assert.deepEqual(r.json, dshFold)
    })

    test('(i) fold of the decoded events as a JSON array, from stdin, matches too', () => {
      const r = spawnSync(PLAN_CLI, ['fold', '-'], { input: JSON.stringify(events), encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      assert.deepEqual(JSON.parse(r.stdout), dshFold)
    })

    test('candidates are the human surface messages and unread steering, newest first', () => {
      const r = cli('candidates', file)
      assert.equal(r.status, 0, r.stderr)
      const got = r.json.candidates
      assert.deepEqual(got.map((c) => [c.index, c.seq, c.pending, c.messageId]),
        expected.map((c, i) => [i + 1, c.seq, c.pending, c.messageId]))
      for (const [i, c] of got.entries()) {
        assert.equal(typeof c.preview, 'string')
        assert.ok(c.preview.length > 0, 'preview not empty')
        const stem = c.preview.replace(/(…|\.\.\.)$/, '')
        assert.ok(expected[i].text.replace(/\s+/g, ' ').startsWith(stem.replace(/\s+/g, ' ')),
          `preview ${JSON.stringify(c.preview)} of ${JSON.stringify(expected[i].text)}`)
      }
    })

    const picks = [...new Set([humans[0], humans[Math.floor(humans.length / 2)], humans.at(-1)])]
      .filter((s) => s !== undefined)
    for (const [label, seq] of picks.map((s) => [s === humans[0] ? 'first' : s === humans.at(-1) ? 'last' : 'middle', s])) {
      test(`(ii)+(iii) rewind to the ${label} human message (@${seq}) through the real Session`, async () => {
        const plan = planOk(file, `@${seq}`)
        checkMarkerShape(plan, seq, nodes)
        assert.deepEqual(plan.withdrawPending, pendingSteering(events).map((p) => p.id))
        // The same target by index.
        const index = expected.findIndex((c) => c.seq === seq && !c.pending) + 1
        assert.deepEqual(planOk(file, String(index)), plan)

        const host1 = await freshHost()
        let host = host1
        try {
          const agent = await resumeFixture(host1, text)
          assert.deepEqual([...agent.session.surface.nodes], nodes, 'resumed surface = DSH fold of the file')
          const marker = applyMarker(agent.session, plan)
          const surfaceAfter = [...agent.session.surface.nodes]
          const messagesAfter = toPlain(agent.session.deriveMessages())

          // (iii) flush, then resume from the JSONL in a second host on the same DSH home (a new
          // cordis Context, as after a restart): same surface and model context.
          await host1.disposeAgent(agent)
          host = await startHost({ workspace: host1.workspace, dshHome: host1.dshHome, invariants: true })
          const resumed = await host.resume(agent.id)
          assert.deepEqual([...resumed.session.surface.nodes], surfaceAfter)
          assert.deepEqual(toPlain(resumed.session.deriveMessages()), messagesAfter)
          const persisted = resumed.session.events[marker.seq]
          assert.equal(persisted.type, 'user/message')
          assert.deepEqual(toPlain(persisted.surfaceOp), plan.marker.surfaceOp)
          assert.deepEqual(toPlain(persisted.sourceEventSeqs), plan.marker.sourceEventSeqs)

          // The planner folds the rewound log exactly like DSH.
          const rewoundText = await host.readJsonl(resumed)
          const rewoundFile = join(host.dshHome, 'rewound.jsonl')
          await writeFile(rewoundFile, rewoundText)
          const rewoundFold = plainFold(foldSurface(parseJsonl(rewoundText).events))
          assert.deepEqual(cli('fold', rewoundFile).json, rewoundFold)
          assert.deepEqual(rewoundFold.nodes, surfaceAfter)

          // The rewound message is no longer a candidate; the marker is not one either.
          const after = cli('candidates', rewoundFile).json.candidates
          assert.ok(!after.some((c) => c.seq === seq && !c.pending), 'target gone from candidates')
          assert.ok(!after.some((c) => c.seq === marker.seq), 'marker is not a candidate')
          planRefused(rewoundFile, `@${seq}`, 'PlanError::NotOnSurface')
          planRefused(rewoundFile, `@${marker.seq}`, 'PlanError::NotHumanMessage')

          // A rewind of the rewind: back to the first remaining human message (its range covers
          // the new marker), applied to the resumed session.
          const rewoundEvents = parseJsonl(rewoundText).events
          const remaining = surfaceHumans(rewoundEvents, rewoundFold.nodes)
          if (remaining.length > 0) {
            const plan2 = planOk(rewoundFile, `@${remaining[0]}`)
            checkMarkerShape(plan2, remaining[0], rewoundFold.nodes)
            assert.ok(plan2.shadowedSeqs.includes(marker.seq), 'second range shadows the first marker')
            applyMarker(resumed.session, plan2)
            const surface2 = [...resumed.session.surface.nodes]
            const again = await host.resume(agent.id)
            assert.deepEqual([...again.session.surface.nodes], surface2)
          }
        } finally {
          if (host !== host1) await host.dispose()
          await host1.dispose()
        }
      })
    }

    test('(iv) refusals name their planner error and leave the log unchanged', () => {
      planRefused(file, `@${events.length + 1000}`, 'PlanError::UnknownSeq')
      // Not a human message: an assistant message and a tool result on the surface.
      const assistant = nodes.find((s) => events[s].type === 'assistant/message')
      planRefused(file, `@${assistant}`, 'PlanError::NotHumanMessage')
      const toolResult = nodes.find((s) => events[s].type === 'tool/result')
      if (toolResult !== undefined) planRefused(file, `@${toolResult}`, 'PlanError::NotHumanMessage')
      // Not a user/message at all (turn/start).
      const turnStart = events.find((e) => e.type === 'turn/start')
      planRefused(file, `@${turnStart.seq}`, 'PlanError::NotHumanMessage')
      // User messages that are not human prompts: injected context, compaction checkpoints, markers
      // (a shadowed one is both not human and not on the surface: either refusal is right).
      for (const e of events) {
        if (e.type === 'user/message' && e.data.source.kind !== 'user') {
          planRefused(file, `@${e.seq}`, nodes.includes(e.seq)
            ? 'PlanError::NotHumanMessage'
            : ['PlanError::NotHumanMessage', 'PlanError::NotOnSurface'])
        }
      }
      // Human messages shadowed by compaction or by an earlier rewind.
      for (const e of events) {
        if (isHuman(e) && !nodes.includes(e.seq)) planRefused(file, `@${e.seq}`, 'PlanError::NotOnSurface')
      }
      planRefused(file, String(expected.length + 1), 'PlanError::IndexOutOfRange')
      for (const bad of ['', '@', '@-1', '@x', '0', '-3', '1.5']) planRefused(file, bad, 'TargetError::')
    })
  })
}

describe('steering-pending.jsonl: unread steering', () => {
  const file = join(FIXTURES, 'steering-pending.jsonl')
  const { events } = parseJsonl(readFileSync(file, 'utf8'))
  const pending = pendingSteering(events)

  test('the fixture really has two unread steering messages', () => {
    assert.equal(pending.length, 2)
  })

  test('rewinding to the first unread steering withdraws it and every later one, no marker', () => {
    const plan = planOk(file, `@${pending[0].seq}`)
    assert.equal(plan.marker, null)
    assert.deepEqual(plan.withdrawPending, pending.map((p) => p.id))
    assert.deepEqual(plan.shadowedSeqs, [])
  })

  test('rewinding to the last unread steering withdraws only it', () => {
    const plan = planOk(file, `@${pending[1].seq}`)
    assert.equal(plan.marker, null)
    assert.deepEqual(plan.withdrawPending, [pending[1].id])
  })

  test('rewinding to index 1 (newest) is the newest unread steering', () => {
    assert.deepEqual(planOk(file, '1'), planOk(file, `@${pending[1].seq}`))
  })
})

describe('rewind.jsonl / rewind-twice.jsonl: earlier markers', () => {
  const markersOf = (events) => events.filter((e) => e.type === 'user/message' && ['dsh-rewind', 'dsh-prompt-rewind'].includes(e.data.source.kind))

  test('a rewind to a message before an earlier marker shadows that marker', () => {
    const file = join(FIXTURES, 'rewind.jsonl')
    const { events } = parseJsonl(readFileSync(file, 'utf8'))
    const nodes = [...foldSurface(events).nodes]
    const [marker] = markersOf(events)
    assert.ok(nodes.includes(marker.seq), 'the earlier marker is on the surface')
    const before = surfaceHumans(events, nodes).filter((s) => nodes.indexOf(s) < nodes.indexOf(marker.seq))
    assert.ok(before.length > 0)
    const plan = planOk(file, `@${before[0]}`)
    assert.ok(plan.shadowedSeqs.includes(marker.seq))
    assert.ok(plan.marker.sourceEventSeqs.includes(marker.seq))
  })

  test('the recorded second marker shadows the first; only later messages are candidates', () => {
    const file = join(FIXTURES, 'rewind-twice.jsonl')
    const { events } = parseJsonl(readFileSync(file, 'utf8'))
    const [first, second] = markersOf(events)
    const fold = foldSurface(events)
    assert.ok(!fold.nodes.includes(first.seq) && fold.nodes.includes(second.seq))
    const candidates = cli('candidates', file).json.candidates
    assert.ok(candidates.length > 0)
    assert.ok(candidates.every((c) => c.seq > second.seq))
    planRefused(file, `@${first.seq}`, ['PlanError::NotHumanMessage', 'PlanError::NotOnSurface'])
    planRefused(file, `@${second.seq}`, 'PlanError::NotHumanMessage')
  })
})
