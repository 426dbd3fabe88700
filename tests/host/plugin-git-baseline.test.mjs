/**
 * Before-states from git on the real host with DSH's real `bash` tool: in a clean git checkout
 * the workspace scan's baseline copies no file (each is its index blob), so the store stays a
 * small fraction of the working tree; a shell edit of tracked files — `sed -i` and a `>`
 * redirect — and a shell `rm` come back byte for byte with /rewind, read from the repository's
 * objects (after `git gc` packed them). See docs/git.md, "Files' before-states from the
 * repository".
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { readFile, readdir, stat } from 'node:fs/promises'
import { turn, text, bash } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, put } from './plugin-support.mjs'

Object.assign(process.env, {
  GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t',
  GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1',
})

const git = (ws, ...args) => execFileSync('git', args, { cwd: ws, encoding: 'utf8' }).trim()

/** Bytes of every file under `dir` (`skip`: directory names left out). */
async function bytesUnder(dir, skip = []) {
  let total = 0
  let list
  try { list = await readdir(dir, { withFileTypes: true }) } catch { return 0 }
  for (const e of list) {
    if (skip.includes(e.name)) continue
    const p = join(dir, e.name)
    total += e.isDirectory() ? await bytesUnder(p, skip) : (await stat(p)).size
  }
  return total
}

/** About 16 KiB of text for file `i`. */
const body = i => Array.from({ length: 400 }, (_, k) => `line ${k} of file ${i}: ${(i * 7919 + k * 104729) % 1000003}\n`).join('')

test('a shell edit of tracked files in a clean checkout comes back with /rewind; the store stays small', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash("sed -i 's/line 1 /LINE ONE /' src/f3.txt && echo replaced > src/f5.txt && rm src/f7.txt && echo new > notes.txt"), text('done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  git(ws, 'init', '-q', '-b', 'main')
  for (let i = 0; i < 200; i++) await put(join(ws, `src/f${i}.txt`), body(i))
  git(ws, 'add', '.')
  git(ws, 'commit', '-qm', 'one')
  const tree = await bytesUnder(ws, ['.git'])
  // Past the scan's racy window: the baseline trusts the files' metadata.
  await new Promise(resolve => setTimeout(resolve, 150))

  const agent = await host.createAgent('git-baseline')
  await host.sendUser(agent, 'edit')
  assert.notEqual(await readFile(join(ws, 'src/f3.txt'), 'utf8'), body(3), 'the shell edited f3')
  const store = join(host.dshHome, 'rewind-snapshots')
  const content = await bytesUnder(join(store, 'blobs')) + await bytesUnder(join(store, 'packs'))
  // The call's new content (a few bytes) may be a blob; no baseline copy of the 200 files.
  assert.ok(content * 100 < tree, `content ${content} bytes in the store for a ${tree}-byte tree`)
  const whole = await bytesUnder(store)
  assert.ok(whole * 20 < tree, `store ${whole} bytes for a ${tree}-byte tree`)
  assert.ok((await readdir(join(store, 'gitrefs'))).length >= 3, 'the before-states are references to git blobs')

  // Packed, loose objects pruned: the before-states are read from the pack.
  git(ws, 'gc', '-q', '--prune=now')
  const r = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'edit')}`)
  assert.equal(r.result.kind, 'success', r.result.text)
  for (const i of [3, 5, 7]) assert.equal(await readFile(join(ws, `src/f${i}.txt`), 'utf8'), body(i), `f${i} byte for byte`)
  await assert.rejects(readFile(join(ws, 'notes.txt')), 'the created file is gone')
  assert.equal(git(ws, 'status', '--porcelain'), '', 'the checkout is clean again')
})
