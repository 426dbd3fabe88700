/**
 * The addon's write-tool calls as the plugin makes them: `captureNow` / `commitNow` return
 * `undefined` when they ran on the calling thread and a promise when they went to the thread
 * pool, throw on the calling thread when they failed there, and record exactly what `capture` /
 * `commit` record (a preview of the anchor restores every captured file).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const { BindingStore } = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
const CAP = 8 << 20

test('captureNow and commitNow settle on the calling thread when they can, and record what capture and commit record', async (t) => {
  const base = await mkdtemp(join(tmpdir(), 'addon-write-calls-'))
  t.after(() => rm(base, { recursive: true, force: true }))
  const cwd = join(base, 'ws')
  await mkdir(join(cwd, 'd', 'e'), { recursive: true })
  const store = BindingStore.open(join(base, 'store'))
  const sid = 'calls'

  // The session's handle is not open yet: the first capture goes to the thread pool.
  await writeFile(join(cwd, 'a.txt'), 'a before\n')
  const first = store.captureNow(sid, cwd, 'c1', join(cwd, 'a.txt'), CAP, 1)
  assert.ok(first instanceof Promise, 'the first capture of a session is queued')
  assert.equal(await first, undefined)
  await writeFile(join(cwd, 'a.txt'), 'a after\n')
  const c1 = store.commitNow(sid, cwd, 'c1', 1, true)
  if (c1 !== undefined) await c1

  // A failed call is dropped, not committed: its file is not restored.
  assert.equal(store.captureNow(sid, cwd, 'c0', join(cwd, 'failed.txt'), CAP, 1), undefined)
  await writeFile(join(cwd, 'failed.txt'), 'written by a call that failed\n')
  const dropped = store.commitNow(sid, cwd, 'c0', 1, false)
  if (dropped !== undefined) await dropped

  // The handle is open and has written: both calls run here, with nothing to await.
  await writeFile(join(cwd, 'd', 'e', 'b.txt'), 'b before\n')
  assert.equal(store.captureNow(sid, cwd, 'c2', join(cwd, 'd', 'e', 'b.txt'), CAP, 1), undefined)
  await writeFile(join(cwd, 'd', 'e', 'b.txt'), 'b after\n')
  assert.equal(store.commitNow(sid, cwd, 'c2', 1, true), undefined)
  // A new file (nothing there before): recorded as absent, deleted by a rewind.
  assert.equal(store.captureNow(sid, cwd, 'c3', join(cwd, 'd', 'e', 'new.txt'), CAP, 1), undefined)
  await writeFile(join(cwd, 'd', 'e', 'new.txt'), 'created\n')
  assert.equal(store.commitNow(sid, cwd, 'c3', 1, true), undefined)

  // An invalid call id fails on the calling thread: thrown there, with the binding's code.
  assert.throws(() => store.captureNow(sid, cwd, '', join(cwd, 'a.txt'), CAP, 1), (e) => typeof e.code === 'string' && /call id|callId|id/i.test(e.message))

  // The last two commits wait for the session's next write; flush writes them.
  assert.equal(await store.flush(sid, cwd), true, 'the commits that waited are written')
  assert.equal(await store.flush(sid, cwd), false, 'nothing waits any more')
  const preview = await store.preview(sid, cwd, 1)
  const actions = Object.fromEntries(preview.files.map(f => [f.path, f.action]))
  assert.deepEqual(actions, { 'a.txt': 'write', 'd/e/b.txt': 'write', 'd/e/new.txt': 'delete' })

  // The same record, read by a second store on the same directory (from the log on disk).
  const again = BindingStore.open(join(base, 'store'))
  const reread = await again.preview(sid, cwd, 1)
  assert.deepEqual(Object.fromEntries(reread.files.map(f => [f.path, f.action])), actions)
})
