import { test } from 'node:test'
import assert from 'node:assert/strict'
import { computeHidden, markerOfEvent } from '../.test-build/hidden.mjs'

// A transcript as the chat store holds it: three turns, each a user row, a tool row, a reply and a tail.
const turn = (n, seq) => [
  { key: `u${n}`, kind: 'user', anchorSeq: seq },
  { key: `ctx${n}`, kind: 'context', anchorSeq: seq + 1 },
  { key: `tool${n}`, kind: 'tool-call', anchorSeq: seq + 2 },
  { key: `reply${n}`, kind: 'assistant-step', anchorSeq: seq + 4 },
  { key: `tail${n}`, kind: 'turn-tail', anchorSeq: seq + 5 },
]
const three = [...turn(1, 10), ...turn(2, 20), ...turn(3, 30)]
const keys = (set) => [...set].sort()

test('no marker hides nothing', () => {
  const r = computeHidden(three, [])
  assert.equal(r.hidden.size, 0)
})

test('a rewind to the middle message hides the target through the marker', () => {
  const r = computeHidden(three, [{ markerSeq: 40, targetSeq: 20 }])
  assert.deepEqual(keys(r.hidden), keys(new Set(['u2', 'ctx2', 'tool2', 'reply2', 'tail2', 'u3', 'ctx3', 'tool3', 'reply3', 'tail3'])))
  assert.ok(!r.hidden.has('u1') && !r.hidden.has('tail1'), 'the turn before the target stays')
  assert.equal(r.applied.length, 1)
})

test('rows after the marker (the conversation continued) stay visible', () => {
  const rows = [...three, ...turn(4, 50)]
  const r = computeHidden(rows, [{ markerSeq: 40, targetSeq: 20 }])
  for (const k of ['u4', 'ctx4', 'tool4', 'reply4', 'tail4']) assert.ok(!r.hidden.has(k), `${k} visible`)
})

test('a rewind of a rewind: the second marker hides its own span, the first span stays hidden', () => {
  const rows = [...three, ...turn(4, 50), ...turn(5, 60)]
  const markers = [{ markerSeq: 70, targetSeq: 50 }, { markerSeq: 40, targetSeq: 20 }] // any order
  const r = computeHidden(rows, markers)
  assert.deepEqual(r.applied.map(m => m.markerSeq), [40, 70])
  for (const k of ['u2', 'u3', 'u4', 'reply5', 'tail5']) assert.ok(r.hidden.has(k), `${k} hidden`)
  for (const k of ['u1', 'reply1', 'tail1']) assert.ok(!r.hidden.has(k), `${k} visible`)
})

test('a later rewind to an earlier message covers everything after it', () => {
  const rows = [...three, ...turn(4, 50)]
  const r = computeHidden(rows, [{ markerSeq: 40, targetSeq: 30 }, { markerSeq: 60, targetSeq: 10 }])
  assert.equal(r.applied.length, 2)
  assert.equal(r.hidden.size, rows.length)
})

test('a failed rewind stays visible: a marker whose target is not a human message hides nothing', () => {
  const r = computeHidden(three, [{ markerSeq: 40, targetSeq: 21 }]) // seq 21 is an injected context row
  assert.equal(r.hidden.size, 0)
  assert.equal(r.ignored.length, 1)
})

test('a marker whose target is missing from the client window hides nothing', () => {
  const r = computeHidden(three, [{ markerSeq: 40, targetSeq: 5 }])
  assert.equal(r.hidden.size, 0)
  assert.equal(r.ignored.length, 1)
})

test('a malformed span (target at or after the marker, negative, fractional) hides nothing', () => {
  for (const m of [{ markerSeq: 20, targetSeq: 20 }, { markerSeq: 10, targetSeq: 20 }, { markerSeq: 40, targetSeq: -1 }, { markerSeq: 40.5, targetSeq: 20 }]) {
    const r = computeHidden(three, [m])
    assert.equal(r.hidden.size, 0, JSON.stringify(m))
  }
})

test('a marker targeting a row an earlier rewind already hid is ignored', () => {
  const r = computeHidden(three, [{ markerSeq: 40, targetSeq: 20 }, { markerSeq: 45, targetSeq: 30 }])
  assert.deepEqual(r.applied.map(m => m.markerSeq), [40])
  assert.deepEqual(r.ignored.map(m => m.markerSeq), [45])
})

test('a steering message is a valid target', () => {
  const rows = [...turn(1, 10), { key: 's1', kind: 'steering', anchorSeq: 17 }, { key: 'r1b', kind: 'assistant-step', anchorSeq: 18 }]
  const r = computeHidden(rows, [{ markerSeq: 19, targetSeq: 17 }])
  assert.deepEqual(keys(r.hidden), ['r1b', 's1'])
})

// A marker as this plugin writes it (the host adds the id).
const ownData = (kind) => ({ role: 'user', id: 'b0c7f1de-5f0e-4a57-9d43-0b5b7c1e2a11', content: [{ type: 'text', text: '(empty message)' }], source: { kind } })

test('markerOfEvent reads a dsh-prompt-rewind replace marker and nothing else', () => {
  const base = { type: 'user/message', seq: 40, surfaceOp: { op: 'replace', start: 20, end: 39 }, data: ownData('dsh-prompt-rewind') }
  assert.deepEqual(markerOfEvent(base), { markerSeq: 40, targetSeq: 20 })
  assert.deepEqual(markerOfEvent({ ...base, surfaceOp: { op: 'replace', startSeq: 21, endSeq: 39 } }), { markerSeq: 40, targetSeq: 21 })
  assert.equal(markerOfEvent({ ...base, surfaceOp: 'append' }), undefined)
  assert.equal(markerOfEvent({ ...base, data: { ...ownData('user') } }), undefined)
  assert.equal(markerOfEvent({ ...base, data: { source: { kind: 'plugin', plugin: 'compact' } } }), undefined)
  assert.equal(markerOfEvent({ ...base, type: 'assistant/message' }), undefined)
  assert.equal(markerOfEvent({ ...base, surfaceOp: { op: 'replace' } }), undefined)
  assert.equal(markerOfEvent({ ...base, data: null }), undefined)
  assert.equal(markerOfEvent(null), undefined)
})

test('a new-kind marker needs only its kind (its text and id may change)', () => {
  const e = { type: 'user/message', seq: 9, surfaceOp: { op: 'replace', startSeq: 3, endSeq: 8 }, data: { role: 'user', content: [{ type: 'text', text: 'Rewound.' }], source: { kind: 'dsh-prompt-rewind', form: 'notice' } } }
  assert.deepEqual(markerOfEvent(e), { markerSeq: 9, targetSeq: 3 })
})

test('an earlier dsh-rewind marker counts only with every field this plugin wrote', () => {
  const base = { type: 'user/message', seq: 40, surfaceOp: { op: 'replace', start: 20, end: 39 }, data: ownData('dsh-rewind') }
  assert.deepEqual(markerOfEvent(base), { markerSeq: 40, targetSeq: 20 }, 'our earlier marker')
  // Another plugin's dsh-rewind markers: other text, no id, extra source fields, other role.
  assert.equal(markerOfEvent({ ...base, data: { ...ownData('dsh-rewind'), content: [{ type: 'text', text: '(rewound)' }] } }), undefined)
  assert.equal(markerOfEvent({ ...base, data: { ...ownData('dsh-rewind'), content: [] } }), undefined)
  const { id: _id, ...noId } = ownData('dsh-rewind')
  assert.equal(markerOfEvent({ ...base, data: noId }), undefined)
  assert.equal(markerOfEvent({ ...base, data: { ...ownData('dsh-rewind'), source: { kind: 'dsh-rewind', form: 'notice', summary: 'x' } } }), undefined)
  assert.equal(markerOfEvent({ ...base, data: { ...ownData('dsh-rewind'), role: 'developer' } }), undefined)
  assert.equal(markerOfEvent({ ...base, data: { ...ownData('dsh-rewind'), content: [{ type: 'text', text: '(empty message)' }, { type: 'text', text: 'more' }] } }), undefined)
})

test('a marker is fresh only when its target was visible in the previous pass', async () => {
  const { freshMarkers, visibleTargetSeqs } = await import('../.test-build/hidden.mjs')
  const seen = new Set()
  // page load: rows and marker arrive together; nothing was visible before
  let visible = new Set()
  const first = computeHidden(three, [{ markerSeq: 40, targetSeq: 20 }])
  assert.deepEqual(freshMarkers(first.applied, seen, visible), [], 'a marker loaded with its target is not fresh')
  visible = visibleTargetSeqs(three, first.hidden)
  assert.deepEqual([...visible], [10])
  // the conversation goes on, then a live rewind to the new message
  const rows = [...three, ...turn(4, 50)]
  const before = computeHidden(rows, [{ markerSeq: 40, targetSeq: 20 }])
  assert.deepEqual(freshMarkers(before.applied, seen, visible), [])
  visible = visibleTargetSeqs(rows, before.hidden)
  assert.deepEqual([...visible].sort((a, b) => a - b), [10, 50])
  const after = computeHidden(rows, [{ markerSeq: 40, targetSeq: 20 }, { markerSeq: 60, targetSeq: 50 }])
  assert.deepEqual(freshMarkers(after.applied, seen, visible), [{ markerSeq: 60, targetSeq: 50 }])
  assert.deepEqual(freshMarkers(after.applied, seen, visible), [], 'a marker is fresh once')
})
