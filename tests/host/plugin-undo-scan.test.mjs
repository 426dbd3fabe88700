/**
 * The session an undo continues the conversation in opens with a workspace scan (its baseline,
 * started when the session is created). That scan must wait for the undo's file step: run while
 * the undo writes the files back, it walks a half-undone workspace — recording what it finds as
 * changes made outside the agent — and competes with the undo for the disk and the processor (a
 * 50,000-file undo took seconds longer in the host than the same undo in the CLI).
 *
 * The order is observed on the addon's own calls (`BindingStore.scan`, `undoFiles`), patched
 * before the plugin loads the addon: no timing is asserted.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { readFile } from 'node:fs/promises'
import { threeTurnSession, humanSeq, loadPlugin } from './plugin-support.mjs'

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))

test('the new session of an undo is first scanned once the undo\'s files are back', async (t) => {
  await loadPlugin() // builds the package when it was never built
  const native = createRequire(import.meta.url)(join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node'))
  const calls = []
  const { scan } = native.BindingStore.prototype
  const { undoFiles } = native.BindingEngineSession.prototype
  native.BindingStore.prototype.scan = function (sessionId, ...rest) {
    calls.push(`scan ${sessionId}`)
    return scan.call(this, sessionId, ...rest)
  }
  native.BindingEngineSession.prototype.undoFiles = function (...args) {
    calls.push('undoFiles')
    const p = undoFiles.apply(this, args)
    void p.then(() => calls.push('undoFiles done'), () => calls.push('undoFiles failed'))
    return p
  }
  t.after(() => {
    native.BindingStore.prototype.scan = scan
    native.BindingEngineSession.prototype.undoFiles = undoFiles
    delete globalThis.__dshPromptRewindTestPause
  })
  const { host, agent, ws, afterLast } = await threeTurnSession({ sessionId: 'undo-scan-session' })
  t.after(() => host.dispose())
  assert.equal((await host.runCommand(agent, `/rewind @${humanSeq(agent, 'middle')}`)).result.kind, 'success')

  // The undo stops after its new session exists and before its file step: what was scanned by then.
  let atPause
  globalThis.__dshPromptRewindTestPause = async (point) => {
    if (point === 'undo:started') {
      // Let whatever the new session started on its creation reach the addon.
      for (let i = 0; i < 20; i++) await new Promise(resolve => setImmediate(resolve))
      atPause = [...calls]
    }
  }
  const { result } = await host.runCommand(agent, '/rewind undo')
  delete globalThis.__dshPromptRewindTestPause
  assert.equal(result.kind, 'success', result.text)
  const child = /new session (session-[0-9a-f-]+)/.exec(result.text)?.[1]
  assert.ok(child !== undefined, result.text)
  assert.ok(atPause !== undefined, 'the undo passed its pause point')
  assert.ok(!atPause.includes(`scan ${child}`), `the new session was scanned before the undo's file step: ${atPause.join(', ')}`)
  assert.deepEqual(await readFile(join(ws, 'notes.txt')), afterLast['notes.txt'], 'the files are undone')

  // Its first scan comes once the files are back (the undo released the session's queue).
  for (let i = 0; i < 400 && !calls.includes(`scan ${child}`); i++) await new Promise(resolve => setTimeout(resolve, 10))
  const scanned = calls.indexOf(`scan ${child}`)
  assert.ok(scanned >= 0, `the new session was never scanned: ${calls.join(', ')}`)
  assert.ok(scanned > calls.indexOf('undoFiles done') && calls.includes('undoFiles done'), `order: ${calls.join(', ')}`)
})
