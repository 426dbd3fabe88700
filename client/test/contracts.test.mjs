// The browser half on both DSH client contracts: the rc.8 session face's `chat` store and the
// 0.1.2+ `uiConversation` "chat" view; rewound rows hidden without `conversationEvents`; and a
// page missing services. Fakes follow the shapes cited in client/src/chat.ts.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chatReader, nodesOf, storeOf } from '../.test-build/chat.mjs'
import { commandsOf, currentSessionId, messageBySeq, messageOf, MISSING_COMMANDS, noteSlotSession, readerOf, rowsAndMarkers, runRewind, service } from '../.test-build/host.mjs'
import { computeHidden, markerDefinition, markersFromHistory, MARKER_KIND } from '../.test-build/hidden.mjs'
import { missingServices, missingWarnings, SERVICES } from '../.test-build/services.mjs'

// One transcript as chat view nodes (same node shape in both contracts).
const userNode = (seq, text) => ({ key: `${seq}:input-message:${seq}`, kind: 'user', anchorSeq: seq, visibility: 'visible', data: { kind: 'user', seq, time: seq, content: [{ type: 'text', text }], source: { kind: 'user' } } })
const replyNode = (seq) => ({ key: `${seq}:assistant`, kind: 'assistant-step', anchorSeq: seq, visibility: 'visible', data: {} })
const NODES = [userNode(10, 'first question'), replyNode(12), userNode(20, 'second question'), replyNode(22)]

/** A `{get, values}` node store with change listeners, as both contracts publish. */
function nodeStore(nodes) {
  let list = [...nodes]
  return {
    store: { get: key => list.find(n => n.key === key), values: () => list },
    push: (node) => { list = [...list, node] },
  }
}

function observable(read) {
  const listeners = new Set()
  return {
    getSnapshot: read,
    subscribe: (fn) => { listeners.add(fn); return () => { listeners.delete(fn) } },
    emit: () => { for (const fn of [...listeners]) fn() },
    listeners,
  }
}

/** rc.8: `sessions.binding(id).session.getSnapshot().chat.nodes`. */
function rc8Page(nodes = NODES) {
  const s = nodeStore(nodes)
  const face = observable(() => ({ chat: { nodes: s.store } }))
  const sessions = {
    list: { getSnapshot: () => ({ current: 'S1' }), subscribe: () => () => {} },
    binding: id => (id === 'S1' ? { session: face, ctx: { scope: 'S1' } } : undefined),
  }
  return { s, face, sessions }
}

/** 0.1.2+: the face has no `chat`; `uiConversation.binding(id).target('chat').getSnapshot().nodes`. */
function uiConversationPage(nodes = NODES, { withSessions = true } = {}) {
  const s = nodeStore(nodes)
  const face = observable(() => ({ lifecycle: 'idle' }))
  const target = observable(() => ({ order: [], nodes: s.store, legacy: { nodes: [] } }))
  const uiConversation = {
    binding: id => (id === 'S1' ? { target: name => (name === 'chat' ? target : undefined) } : (() => { throw new Error('no binding') })()),
    events: { registered: [], register(definition) { this.registered.push(definition); return () => { this.registered.splice(this.registered.indexOf(definition), 1) } } },
  }
  const sessions = withSessions
    ? { list: { getSnapshot: () => ({ current: 'S1' }), subscribe: () => () => {} }, binding: id => (id === 'S1' ? { session: face, ctx: {} } : undefined) }
    : undefined
  return { s, face, target, uiConversation, sessions }
}

const ctxOf = (services) => ({ get: name => services[name] })

test('rc.8 session face: the reader takes the face\'s chat store', () => {
  const page = rc8Page()
  const reader = chatReader({ sessions: page.sessions }, 'S1')
  assert.equal(reader.shape, 'session-face')
  assert.deepEqual(nodesOf(reader).map(n => n.anchorSeq), [10, 12, 20, 22])
  assert.equal(reader.nodes().get('20:input-message:20').data.seq, 20)
  let calls = 0
  const off = reader.subscribe(() => { calls++ })
  page.face.emit()
  off()
  page.face.emit()
  assert.equal(calls, 1, 'one change seen, none after unsubscribing')
})

test('0.1.2+ uiConversation: the reader takes the "chat" view, subscribes to it (activating it) and to the face', () => {
  const page = uiConversationPage()
  const reader = chatReader({ sessions: page.sessions, uiConversation: page.uiConversation }, 'S1')
  assert.equal(reader.shape, 'ui-conversation')
  assert.deepEqual(nodesOf(reader).map(n => n.key), NODES.map(n => n.key))
  let calls = 0
  const off = reader.subscribe(() => { calls++ })
  assert.equal(page.target.listeners.size, 1, 'the view has a subscriber')
  page.target.emit()
  page.face.emit()
  assert.equal(calls, 2)
  off()
  assert.equal(page.target.listeners.size, 0)
  page.s.push(userNode(30, 'third'))
  assert.equal(nodesOf(reader).length, 5, 'nodes are read live, not copied')
})

test('0.1.2+ without a sessions service: the view alone is enough', () => {
  const page = uiConversationPage(NODES, { withSessions: false })
  const reader = chatReader({ uiConversation: page.uiConversation }, 'S1')
  assert.equal(reader.shape, 'ui-conversation')
  assert.equal(nodesOf(reader).length, 4)
})

test('both shapes give the same messages, rows and markers', () => {
  const marker = { key: 'm', kind: MARKER_KIND, anchorSeq: 30, visibility: 'hidden', data: { markerSeq: 30, targetSeq: 20 } }
  const a = rc8Page([...NODES, marker])
  const b = uiConversationPage([...NODES, marker])
  const readers = [readerOf(ctxOf({ sessions: a.sessions }), 'S1'), readerOf(ctxOf({ sessions: b.sessions, uiConversation: b.uiConversation }), 'S1')]
  assert.deepEqual(readers.map(r => r.shape), ['session-face', 'ui-conversation'])
  const [ra, rb] = readers
  assert.deepEqual(messageBySeq(ra, 20), { seq: 20, text: 'second question', images: [] })
  assert.deepEqual(messageBySeq(rb, 20), messageBySeq(ra, 20))
  assert.deepEqual(messageOf(rb, '10:input-message:10'), messageOf(ra, '10:input-message:10'))
  assert.equal(messageOf(rb, '12:assistant'), undefined, 'a reply row is not a message')
  assert.deepEqual(rowsAndMarkers(nodesOf(rb)), rowsAndMarkers(nodesOf(ra)))
  const hidden = computeHidden(...Object.values(rowsAndMarkers(nodesOf(rb)))).hidden
  assert.deepEqual([...hidden].sort(), ['20:input-message:20', '22:assistant'])
})

test('a snapshot whose nodes are a plain array is read; anything else is no store', () => {
  const store = storeOf([NODES[0], { junk: true }, NODES[2]])
  assert.deepEqual(store.values().map(n => n.anchorSeq), [10, 20])
  assert.equal(store.get(NODES[2].key), NODES[2])
  for (const bad of [undefined, null, 7, 'x', { values: [] }, { get() {} }]) assert.equal(storeOf(bad), undefined, String(bad))
})

test('no chat on the page, or services that throw: no reader, no throw', () => {
  assert.equal(chatReader({}, 'S1'), undefined)
  assert.equal(chatReader({ sessions: { binding: () => { throw new Error('gone') } }, uiConversation: { binding: () => { throw new Error('gone') } } }, 'S1'), undefined)
  // A face without chat and no uiConversation (a 0.1.2+ page whose view is not there yet).
  const page = uiConversationPage()
  assert.equal(chatReader({ sessions: page.sessions }, 'S1'), undefined)
  assert.deepEqual(nodesOf(undefined), [])
  // A store that throws while read gives nothing rather than an exception.
  const reader = chatReader({ uiConversation: { binding: () => ({ target: () => ({ getSnapshot: () => ({ nodes: { get() { throw new Error('x') }, values() { throw new Error('x') } } }), subscribe: () => () => {} }) }) } }, 'S1')
  assert.deepEqual(nodesOf(reader), [])
  assert.equal(reader.nodes().get('k'), undefined)
})

test('without conversationEvents: the marker Definition in uiConversation.events yields a hidden node that hides the rewound rows', () => {
  const page = uiConversationPage()
  const off = page.uiConversation.events.register(markerDefinition)
  assert.equal(page.uiConversation.events.registered.length, 1)
  // What the conversation assembler does with one durable marker event (0.2 spelling).
  const event = { type: 'user/message', seq: 30, time: 30, surfaceOp: { op: 'replace', startSeq: 20, endSeq: 22 }, data: { role: 'user', id: 'm1', content: [{ type: 'text', text: '(empty message)' }], source: { kind: 'dsh-prompt-rewind' } } }
  const match = markerDefinition.match(event)
  assert.deepEqual(match, { id: 'm1', role: 'start' })
  const state = markerDefinition.start({}, { event })
  const node = markerDefinition.buildViewNode({ key: 'ctx:m1', id: 'm1', state, start: { location: { kind: 'session' } } })
  assert.equal(node.visibility, 'hidden')
  page.s.push(node)
  const reader = readerOf(ctxOf({ sessions: page.sessions, uiConversation: page.uiConversation }), 'S1')
  const { rows, markers } = rowsAndMarkers(nodesOf(reader))
  assert.deepEqual(markers, [{ markerSeq: 30, targetSeq: 20 }])
  assert.deepEqual([...computeHidden(rows, markers).hidden].sort(), ['20:input-message:20', '22:assistant'])
  // Ordinary events and live chunks are not claimed.
  assert.equal(markerDefinition.match({ type: 'user/message', seq: 5, surfaceOp: 'append', data: { source: { kind: 'user' } } }), null)
  assert.equal(markerDefinition.match({ type: 'assistant/live-chunk', seq: 6, data: {} }), null)
  off()
  assert.equal(page.uiConversation.events.registered.length, 0)
})

test('without any event registry: markers named by the host\'s history hide the rows; entries without markerSeq hide nothing', () => {
  const entries = [
    { sessionId: 'S1', targetSeq: 20, markerSeq: 30, outcome: 'done' },
    { sessionId: 'S1', targetSeq: 10, outcome: 'done', fork: { childSessionId: 'S2' } }, // a fork: no marker here
    { sessionId: 'S0', targetSeq: 10, markerSeq: 40, outcome: 'done' }, // another session
    { sessionId: 'S1', targetSeq: 10, markerSeq: null, outcome: 'done' }, // a host that cannot say
    null,
  ]
  assert.deepEqual(markersFromHistory(entries, 'S1'), [{ markerSeq: 30, targetSeq: 20 }])
  assert.deepEqual(markersFromHistory(undefined, 'S1'), [])
  const rows = rowsAndMarkers(NODES).rows
  assert.deepEqual([...computeHidden(rows, markersFromHistory(entries, 'S1')).hidden].sort(), ['20:input-message:20', '22:assistant'])
  assert.equal(computeHidden(rows, markersFromHistory([{ sessionId: 'S1', targetSeq: 20 }], 'S1')).hidden.size, 0)
})

test('missing services: reads answer undefined, the session comes from the header, a rewind fails with a named reason', async () => {
  const bare = { get: () => undefined }
  const throwing = { get: (name) => { throw new Error(`cannot get property "${name}" without inject`) } }
  assert.equal(service(throwing, 'sessions'), undefined)
  assert.equal(commandsOf(bare), undefined)
  assert.equal(commandsOf(throwing), undefined)
  // remote.commands found as its own service or under remote.
  const execute = async () => ({ ok: true, value: { commandId: 'c', result: { kind: 'success', text: 'ok' } } })
  assert.equal(typeof commandsOf(ctxOf({ 'remote.commands': { execute } }))?.execute, 'function')
  assert.equal(typeof commandsOf(ctxOf({ remote: { commands: { execute } } }))?.execute, 'function')
  // No sessions service: the header slot's session is the one on screen.
  assert.equal(currentSessionId(bare), undefined)
  noteSlotSession('S9')
  assert.equal(currentSessionId(bare), 'S9')
  assert.equal(currentSessionId(ctxOf({ sessions: rc8Page().sessions })), 'S1', 'the session list wins when there is one')
  const outcome = await runRewind(bare, 'S9', { seq: 20, text: 'x', images: [] })
  assert.deepEqual(outcome, { ok: false, message: MISSING_COMMANDS })
  assert.match(MISSING_COMMANDS, /remote\.commands/)
})

test('missing services are named, each with what degrades, and stand-ins silence a warning', () => {
  const none = () => false
  assert.deepEqual(missingServices(none), SERVICES.map(s => s.name))
  const all = missingWarnings({ has: none, markerRegistry: undefined, chatReadable: false })
  for (const s of SERVICES) assert.ok(all.some(w => w.startsWith(`client service "${s.name}" is missing: `)), s.name)
  assert.ok(all.some(w => w.startsWith('no client event registry')))
  assert.ok(all.some(w => w.startsWith('no chat to read')))
  // rc.8 page: everything there.
  const rc8 = new Set(SERVICES.map(s => s.name))
  assert.deepEqual(missingWarnings({ has: n => rc8.has(n), markerRegistry: 'conversationEvents', chatReadable: true }), [])
  // A 0.1.5+ page: no conversationEvents (uiConversation stands in), no settingsScope.
  const later = new Set(['slots', 'sessions', 'remote', 'uiConversation', 'commandUi', 'conversation', 'locale'])
  const warnings = missingWarnings({ has: n => later.has(n), markerRegistry: 'uiConversation.events', chatReadable: true })
  assert.deepEqual(warnings, ['client service "settingsScope" is missing: the stored DSH language preference is not read'])
})
