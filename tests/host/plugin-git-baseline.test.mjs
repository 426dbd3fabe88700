/**
 * Before-states from git on the real host with DSH's real `bash` tool: in a clean git checkout
 * the workspace scan's baseline copies no file (each is its index blob), so the store stays a
 * small fraction of the working tree; a shell edit of tracked files — `sed -i` and a `>`
 * redirect — and a shell `rm` come back byte for byte with /rewind, read from the repository's
 * objects (after `git gc` packed them). When the repository loses such a blob (the commit that
 * held it amended away, the object pruned), the preview — the RPC's and `/rewind preview` —
 * names the file before anything runs, and the rewind is refused until it is kept. See
 * docs/git.md, "Files' before-states from the repository".
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { readFile, readdir, stat } from 'node:fs/promises'
import { turn, text, bash } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, put, rpc } from './plugin-support.mjs'

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

test('a before-state whose git object was pruned is named by the preview, and the rewind runs once it is kept', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash('echo replaced > src/f3.txt && echo replaced > src/f4.txt'), text('done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  git(ws, 'init', '-q', '-b', 'main')
  for (let i = 0; i < 10; i++) await put(join(ws, `src/f${i}.txt`), body(i))
  git(ws, 'add', '.')
  git(ws, 'commit', '-qm', 'one')
  const oid = git(ws, 'rev-parse', 'HEAD:src/f3.txt')
  await new Promise(resolve => setTimeout(resolve, 150))
  const agent = await host.createAgent('git-gone')
  await host.sendUser(agent, 'edit')
  const seq = humanSeq(agent, 'edit')
  const before = (await rpc(host, 'preview', { sessionId: 'git-gone', seq })).json
  assert.equal(before.ok, true, JSON.stringify(before))
  assert.deepEqual(before.value.gitObjectGone, [], 'nothing is gone yet')

  // The user commits the agent's f3 over the first commit and prunes: f3's first version is
  // gone; f4's is still in the amended commit.
  git(ws, 'add', 'src/f3.txt')
  git(ws, 'commit', '-q', '--amend', '-m', 'one')
  git(ws, 'reflog', 'expire', '--expire=now', '--all')
  git(ws, 'gc', '-q', '--prune=now')
  assert.throws(() => git(ws, 'cat-file', '-e', oid), 'the object is pruned')

  const p = (await rpc(host, 'preview', { sessionId: 'git-gone', seq })).json
  assert.equal(p.ok, true, JSON.stringify(p))
  assert.deepEqual(p.value.gitObjectGone.map(g => g.path), ['src/f3.txt'], JSON.stringify(p.value))
  assert.match(p.value.gitObjectGone[0].message, new RegExp(oid))
  const shown = (await host.runCommand(agent, `/rewind preview @${seq}`)).result
  assert.equal(shown.kind, 'success', shown.text)
  assert.match(shown.text, /git object the repository no longer has/, shown.text)
  assert.match(shown.text, /src\/f3\.txt: .*no longer has it/, shown.text)

  // The rewind is refused, nothing changed; with the file kept, the rest comes back.
  const refused = (await host.runCommand(agent, `/rewind @${seq}`)).result
  assert.notEqual(refused.kind, 'success', refused.text)
  assert.match(refused.text, /git-object-gone/, refused.text)
  assert.equal(await readFile(join(ws, 'src/f4.txt'), 'utf8'), 'replaced\n')
  const r = (await host.runCommand(agent, `/rewind @${seq} --keep src/f3.txt`)).result
  assert.equal(r.kind, 'success', r.text)
  assert.equal(await readFile(join(ws, 'src/f4.txt'), 'utf8'), body(4))
  assert.equal(await readFile(join(ws, 'src/f3.txt'), 'utf8'), 'replaced\n')
})
