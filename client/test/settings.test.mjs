import { test } from 'node:test'
import assert from 'node:assert/strict'
import { undoableEntries } from '../.test-build/history.mjs'
import { diffSettings, sameSettings, SettingsModel } from '../.test-build/store.mjs'

const entry = (opId, sessionId, extra = {}) => ({ opId, sessionId, undoable: true, ...extra })

test('undo is offered on every undoable entry of the current session (and its fork), never another\'s', () => {
  const list = (entries, sessionId) => [...undoableEntries(entries, sessionId)].sort()
  const entries = [entry('o3', 'other'), entry('o2', 's1'), entry('o1', 's1')]
  assert.deepEqual(list(entries, 's1'), ['o1', 'o2'])
  assert.deepEqual(list(entries, 'other'), ['o3'])
  assert.deepEqual(list(entries, undefined), [])
  assert.deepEqual(list([entry('o2', 's1', { undoable: false }), entry('o1', 's1')], 's1'), ['o1'])
  assert.deepEqual(list([entry('o2', 's1', { undoneAt: 5 }), entry('o1', 's1', { undoable: false })], 's1'), [])
  // The session a fork rewind created may undo that fork.
  assert.deepEqual(list([entry('f1', 'parent', { fork: { childSessionId: 'child' } })], 'child'), ['f1'])
  assert.deepEqual(list([], 's1'), [])
})

const base = { backups: true, maxFileBytes: 8388608, historyLimit: 10, cleanup: { enabled: false, maxAgeDays: 30 } }

test('the settings patch carries only what changed', () => {
  assert.deepEqual(diffSettings(base, base), {})
  assert.deepEqual(diffSettings(base, { ...base, backups: false }), { backups: false })
  assert.deepEqual(diffSettings(base, { ...base, historyLimit: 3, cleanup: { enabled: true, maxAgeDays: 30 } }), { historyLimit: 3, cleanup: { enabled: true } })
  assert.ok(sameSettings(base, { ...base, cleanup: { ...base.cleanup } }))
  assert.ok(!sameSettings(base, { ...base, cleanup: { enabled: false, maxAgeDays: 7 } }))
})

test('both cards edit one draft: an edit is seen by every subscriber', () => {
  const model = new SettingsModel()
  model.store.set({ status: 'ready', value: base, draft: base, saving: false })
  const seen = []
  const a = model.store.subscribe(() => seen.push(['history', model.store.getSnapshot().draft.backups]))
  const b = model.store.subscribe(() => seen.push(['plugins', model.store.getSnapshot().draft.backups]))
  model.edit({ backups: false })
  model.edit({ cleanup: { maxAgeDays: 7 } })
  a(); b()
  assert.deepEqual(seen, [['history', false], ['plugins', false], ['history', false], ['plugins', false]])
  assert.deepEqual(model.store.getSnapshot().draft, { ...base, backups: false, cleanup: { enabled: false, maxAgeDays: 7 } })
  assert.deepEqual(model.store.getSnapshot().value, base, 'the host value is untouched until saved')
})

test('missing capabilities are named, including ones the host does not send', async () => {
  const { missingCaps } = await import('../.test-build/history.mjs')
  assert.deepEqual(missingCaps({ history: true, undo: true, fileCheckpointing: true, backups: true }), [])
  assert.deepEqual(missingCaps({ history: true, undo: false, fileCheckpointing: false, backups: true }), ['undo', 'fileCheckpointing'])
  assert.deepEqual(missingCaps({ history: true, undo: true, fileCheckpointing: true }), ['backups'])
  assert.deepEqual(missingCaps({ history: 'yes' }), ['history', 'undo', 'fileCheckpointing', 'backups'])
})
