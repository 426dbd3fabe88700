/**
 * Git-aware rewind on the real host with DSH's real `bash` tool: turn one makes a branch and
 * commits to it, turn two checks out a tag. A rewind to each turn brings the files back and the
 * repository with them — HEAD on the branch (or commit) it named at that message, the index,
 * the branches the agent made — so `git status --porcelain` is empty; the agent's commits stay
 * reachable from `refs/dsh-rewind/<op>/…`; the undo returns the repository as it was before the
 * rewind; `--keep-git` restores the files alone; a rebase left in progress refuses the rewind
 * with the files untouched. See docs/git.md.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { readFile } from 'node:fs/promises'
import { turn, text, bash } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, put, rpc } from './plugin-support.mjs'

// Commits made by the tests and by the agent's shell name a fixed identity; no user config.
Object.assign(process.env, {
  GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t',
  GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1',
})

function git(ws, ...args) {
  return execFileSync('git', args, { cwd: ws, encoding: 'utf8' }).trim()
}

/** A small repository: 30 files, v1 tagged, two commits after it. */
async function seedRepo(ws) {
  git(ws, 'init', '-q', '-b', 'main')
  for (let i = 0; i < 30; i++) await put(join(ws, `src/f${i}.txt`), `v1 ${i}\n`)
  git(ws, 'add', '.')
  git(ws, 'commit', '-qm', 'one')
  git(ws, 'tag', 'v1')
  for (let i = 0; i < 30; i++) await put(join(ws, `src/f${i}.txt`), `v2 ${i}\n`)
  await put(join(ws, 'NEWS'), 'v2\n')
  git(ws, 'add', '.')
  git(ws, 'commit', '-qm', 'two')
}

const head = ws => git(ws, 'rev-parse', '--abbrev-ref', 'HEAD')
const status = ws => git(ws, 'status', '--porcelain')

const twoTurns = () => [
  turn(bash('git switch -q -c agent-work && echo agent > agent.txt && git add agent.txt && git commit -qm agent'), text('one done')),
  turn(bash('git checkout -q v1'), text('two done')),
]

test('rewinds to each turn bring HEAD, the index and the agent\'s branch back; the undo returns them', async (t) => {
  const host = await bootWithPlugin({ shell: true, script: twoTurns() })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedRepo(ws)
  const main = git(ws, 'rev-parse', 'main')
  const agent = await host.createAgent('git-rewind')
  await host.sendUser(agent, 'one')
  const agentWork = git(ws, 'rev-parse', 'agent-work')
  await host.sendUser(agent, 'two')
  assert.equal(head(ws), 'HEAD', 'turn two left HEAD detached at v1')
  assert.equal(git(ws, 'rev-parse', 'agent-work'), agentWork, 'the agent\'s branch is there')

  // The preview (command and RPC) says what happens to git.
  const two = humanSeq(agent, 'two')
  const preview = await host.runCommand(agent, `/rewind preview @${two}`)
  assert.match(preview.result.text, new RegExp(`Git: HEAD: detached at v1 → agent-work @ ${agentWork.slice(0, 7)}`))
  const rpcPreview = await rpc(host, 'preview', { sessionId: agent.id, seq: two })
  assert.equal(rpcPreview.json.ok, true, JSON.stringify(rpcPreview.json))
  assert.equal(rpcPreview.json.value.git.changes, true)
  assert.match(rpcPreview.json.value.git.summary, /^HEAD: detached at v1 → agent-work @/)

  const r2 = await host.runCommand(agent, `/rewind @${two}`)
  assert.equal(r2.result.kind, 'success', r2.result.text)
  assert.match(r2.result.text, /Git: HEAD: detached at v1 → agent-work/)
  assert.equal(status(ws), '', 'git status is clean after the rewind to turn two')
  assert.equal(head(ws), 'agent-work')
  assert.equal(git(ws, 'rev-parse', 'HEAD'), agentWork)

  const one = humanSeq(agent, 'one')
  const r1 = await host.runCommand(agent, `/rewind @${one}`)
  assert.equal(r1.result.kind, 'success', r1.result.text)
  assert.equal(status(ws), '', 'git status is clean after the rewind to turn one')
  assert.equal(head(ws), 'main')
  assert.equal(git(ws, 'rev-parse', 'HEAD'), main)
  assert.equal(git(ws, 'branch', '--list', 'agent-work'), '', 'the branch the agent made is gone')
  const keep = git(ws, 'for-each-ref', '--format=%(refname) %(objectname)', 'refs/dsh-rewind/')
  assert.match(keep, new RegExp(`refs/dsh-rewind/[^ ]+/heads/agent-work ${agentWork}`), 'the agent\'s commit stays reachable')
  assert.match(r1.result.text, /refs\/dsh-rewind\//)
  // The history entry says it too.
  const hist = await rpc(host, 'history', { sessionId: agent.id })
  const entry = hist.json.value.entries[0]
  assert.match(entry.git.summary, /^HEAD: agent-work @ \w+ → main @/, JSON.stringify(entry.git))
  assert.ok(entry.git.keepRefs.some(r => r.endsWith('/heads/agent-work')), JSON.stringify(entry.git))

  // Undo the rewind to turn one: the state after the rewind to turn two.
  const u1 = await host.runCommand(agent, '/rewind undo')
  assert.equal(u1.result.kind, 'success', u1.result.text)
  assert.match(u1.result.text, /Git: HEAD: main @ \w+ → agent-work @/, 'the undo says what it did to git')
  assert.equal(head(ws), 'agent-work')
  assert.equal(git(ws, 'rev-parse', 'HEAD'), agentWork)
  assert.equal(status(ws), '')
  // Undo the rewind to turn two: the state after turn two, detached at v1.
  const u2 = await host.runCommand(agent, '/rewind undo')
  assert.equal(u2.result.kind, 'success', u2.result.text)
  assert.equal(head(ws), 'HEAD')
  assert.equal(git(ws, 'rev-parse', 'HEAD'), git(ws, 'rev-parse', 'v1'))
  assert.equal(await readFile(join(ws, 'src/f3.txt'), 'utf8'), 'v1 3\n')
  assert.equal(status(ws), '', 'the state after turn two is back, clean')
  git(ws, 'fsck', '--no-progress')
})

test('--keep-git restores the files alone; a rebase in progress refuses the rewind, files untouched', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      ...twoTurns(),
      turn(bash('git stash -q -u && git switch -q -c side v1 && echo side > src/f1.txt && git commit -qam side && (git rebase main || true)'), text('three done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedRepo(ws)
  const agent = await host.createAgent('git-keep')
  for (const m of ['one', 'two']) await host.sendUser(agent, m)
  const two = humanSeq(agent, 'two')
  const kept = await host.runCommand(agent, `/rewind @${two} --keep-git`)
  assert.equal(kept.result.kind, 'success', kept.result.text)
  assert.match(kept.result.text, /Git: kept as it is \(--keep-git\)/)
  assert.equal(head(ws), 'HEAD', 'HEAD is left detached')
  assert.equal(await readFile(join(ws, 'src/f3.txt'), 'utf8'), 'v2 3\n', 'the files came back')

  await host.sendUser(agent, 'three')
  assert.ok(git(ws, 'status').includes('rebase'), 'the rebase stopped on a conflict')
  const before = await readFile(join(ws, 'src/f1.txt'), 'utf8')
  const three = humanSeq(agent, 'three')
  const refused = await host.runCommand(agent, `/rewind @${three}`)
  assert.notEqual(refused.result.kind, 'success', refused.result.text)
  assert.match(refused.result.text, /rebase is in progress[\s\S]*git rebase --abort/)
  assert.equal(await readFile(join(ws, 'src/f1.txt'), 'utf8'), before, 'files untouched')
})

test('a commit made by hand after the agent\'s keeps its branch, flagged; a branch the agent deleted comes back', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash('echo agent > agent.txt && git add agent.txt && git commit -qm agent'), text('one done')),
      turn(bash('git branch -D feature'), text('two done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedRepo(ws)
  git(ws, 'branch', 'feature', 'v1')
  const feature = git(ws, 'rev-parse', 'feature')
  const agent = await host.createAgent('git-by-hand')
  await host.sendUser(agent, 'one')
  // By hand, between the turns: a commit on top of the agent's.
  await put(join(ws, 'mine.txt'), 'mine\n')
  git(ws, 'add', 'mine.txt')
  git(ws, 'commit', '-qm', 'mine')
  const mine = git(ws, 'rev-parse', 'main')
  await host.sendUser(agent, 'two')
  assert.equal(git(ws, 'branch', '--list', 'feature'), '', 'the agent deleted feature')

  const one = humanSeq(agent, 'one')
  const preview = await host.runCommand(agent, `/rewind preview @${one}`)
  assert.match(preview.result.text, /main changed outside the agent: left as is/)
  const r = await host.runCommand(agent, `/rewind @${one}`)
  assert.equal(r.result.kind, 'success', r.result.text)
  assert.match(r.result.text, /main changed outside the agent: left as is/)
  assert.equal(git(ws, 'rev-parse', 'main'), mine, 'the commit made by hand stays on main')
  assert.equal(git(ws, 'diff', '--cached', '--name-only'), '', 'the index is left with HEAD')
  assert.match(r.result.text, /the index is left as is, with HEAD/)
  assert.equal(git(ws, 'rev-parse', 'feature'), feature, 'the branch the agent deleted is back')
  assert.equal(head(ws), 'main')
  assert.equal(await readFile(join(ws, 'mine.txt'), 'utf8'), 'mine\n', 'the file made by hand is left')
})

test('a stash pushed in one turn and popped in the next: a rewind brings the stash list back as it was, the undo returns it', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash('echo wip > src/f2.txt && git stash push -q -m agent-wip'), text('one done')),
      turn(bash('git stash pop -q'), text('two done')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedRepo(ws)
  // A stash entry made by hand before the session.
  await put(join(ws, 'src/f9.txt'), 'mine\n')
  git(ws, 'stash', 'push', '-q', '-m', 'by-hand')
  const list = () => git(ws, 'stash', 'list', '--format=%H %gs')
  const atOne = list()
  const agent = await host.createAgent('git-stash')
  await host.sendUser(agent, 'one')
  const atTwo = list()
  const pushed = git(ws, 'rev-parse', 'refs/stash')
  assert.match(atTwo, /agent-wip[\s\S]*by-hand/, 'the agent\'s entry on top of the one made by hand')
  await host.sendUser(agent, 'two')
  const afterTwo = list()
  assert.doesNotMatch(afterTwo, /agent-wip/, 'popped')
  assert.equal(await readFile(join(ws, 'src/f2.txt'), 'utf8'), 'wip\n')

  const two = humanSeq(agent, 'two')
  const preview = await rpc(host, 'preview', { sessionId: agent.id, seq: two })
  assert.match(preview.json.value.git.summary, /stash list: 1 entry → 2 entries/, JSON.stringify(preview.json.value.git))
  const r = await host.runCommand(agent, `/rewind @${two}`)
  assert.equal(r.result.kind, 'success', r.result.text)
  assert.equal(list(), atTwo, 'git stash list as it was at the start of turn two')
  assert.equal(await readFile(join(ws, 'src/f2.txt'), 'utf8'), 'v2 2\n', 'the popped change is back in the stash, not in the file')
  assert.equal(status(ws), '', 'clean')
  assert.equal(git(ws, 'stash', 'show', '-p', 'stash@{0}').includes('+wip'), true, 'the entry holds the agent\'s change')
  const keep = git(ws, 'for-each-ref', '--format=%(refname) %(objectname)', 'refs/dsh-rewind/')
  assert.match(keep, new RegExp(`refs/dsh-rewind/[^ ]+/stash/${pushed} ${pushed}`), 'the entry\'s commit is kept by a ref of the plugin\'s own')

  // Straight on to turn one: what the first rewind set back is the session's own change, so the
  // second rewind moves it again (the stash list as at turn one), not "changed outside the agent".
  const one = humanSeq(agent, 'one')
  const r1 = await host.runCommand(agent, `/rewind @${one}`)
  assert.equal(r1.result.kind, 'success', r1.result.text)
  assert.doesNotMatch(r1.result.text, /changed outside the agent/)
  assert.equal(list(), atOne, 'git stash list as it was at the start of turn one')
  assert.equal(status(ws), '', 'clean')

  // The undos, newest first: the stash list as at turn two, then as after turn two.
  const u1 = await host.runCommand(agent, '/rewind undo')
  assert.equal(u1.result.kind, 'success', u1.result.text)
  assert.equal(list(), atTwo, 'the first undo: the stash list as at turn two')
  const u2 = await host.runCommand(agent, '/rewind undo')
  assert.equal(u2.result.kind, 'success', u2.result.text)
  assert.equal(list(), afterTwo, 'the second undo: the stash list as after turn two')
  assert.equal(await readFile(join(ws, 'src/f2.txt'), 'utf8'), 'wip\n')
  git(ws, 'fsck', '--no-progress')
})

test('a stash entry the agent dropped and git gc then pruned: the rewind leaves the stash list as it is and says why, the files come back', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [turn(bash('git stash drop -q && echo agent > src/f3.txt'), text('dropped'))],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedRepo(ws)
  await put(join(ws, 'src/f9.txt'), 'mine\n')
  git(ws, 'stash', 'push', '-q', '-m', 'by-hand')
  const entry = git(ws, 'rev-parse', 'refs/stash')
  const agent = await host.createAgent('git-stash-pruned')
  await host.sendUser(agent, 'drop it')
  assert.equal(git(ws, 'stash', 'list'), '', 'dropped')
  git(ws, 'reflog', 'expire', '--expire-unreachable=now', '--all')
  git(ws, 'gc', '-q', '--prune=now')
  assert.throws(() => git(ws, 'cat-file', '-e', entry), 'the entry\'s commit is pruned')

  const seq = humanSeq(agent, 'drop it')
  const preview = await rpc(host, 'preview', { sessionId: agent.id, seq })
  const flagged = preview.json.value.git?.flagged ?? []
  assert.ok(flagged.some(f => /1 commit git has since pruned/.test(f)), JSON.stringify(preview.json.value.git))
  const r = await host.runCommand(agent, `/rewind @${seq}`)
  assert.equal(r.result.kind, 'success', r.result.text)
  assert.match(r.result.text, /stash list of that point names 1 commit git has since pruned: left as is/)
  assert.equal(git(ws, 'stash', 'list'), '', 'no entry naming a missing commit was written back')
  assert.equal(await readFile(join(ws, 'src/f3.txt'), 'utf8'), 'v2 3\n', 'the files came back')
  git(ws, 'fsck', '--no-progress')
})

test('a fork rewind brings git back with the files; inside the fork, a rewind to its own message restores git, one to before the fork leaves it and says so', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [...twoTurns(), turn(bash('git switch -q -c in-child'), text('child one done'))],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedRepo(ws)
  const agent = await host.createAgent('git-fork')
  for (const m of ['one', 'two']) await host.sendUser(agent, m)
  const agentWork = git(ws, 'rev-parse', 'agent-work')
  const fork = await host.runCommand(agent, `/rewind --fork @${humanSeq(agent, 'two')}`)
  assert.equal(fork.result.kind, 'success', fork.result.text)
  assert.match(fork.result.text, /Git: HEAD: detached at v1 → agent-work/, 'the fork rewind restores git as an in-place rewind does')
  assert.equal(head(ws), 'agent-work')
  assert.equal(status(ws), '')
  const m = /new session (session-[0-9a-f-]+)/.exec(fork.result.text)
  assert.ok(m, fork.result.text)
  const child = host.ctx.agents.get(m[1])
  await host.sendUser(child, 'child one')
  assert.equal(head(ws), 'in-child')
  // 'one' is the parent's message, from before the fork: git would be left as it is.
  const before = await rpc(host, 'preview', { sessionId: child.id, seq: humanSeq(child, 'one') })
  assert.match(before.json.value.git.summary, /left as it is: that message is from before this session was forked/, JSON.stringify(before.json.value.git))
  assert.equal(before.json.value.git.changes, false)
  // 'child one' is the fork's own: git comes back with the files, from the fork's own states.
  const childOne = humanSeq(child, 'child one')
  const preview = await rpc(host, 'preview', { sessionId: child.id, seq: childOne })
  assert.match(preview.json.value.git.summary, /HEAD: in-child @ [0-9a-f]+ → agent-work/, JSON.stringify(preview.json.value.git))
  const r = await host.runCommand(child, `/rewind @${childOne}`)
  assert.equal(r.result.kind, 'success', r.result.text)
  assert.match(r.result.text, /Git: HEAD: in-child @ [0-9a-f]+ → agent-work/)
  assert.equal(head(ws), 'agent-work', 'git is back as it was at the fork\'s message')
  assert.equal(git(ws, 'rev-parse', 'HEAD'), agentWork)
  assert.equal(status(ws), '')
  // Back to before the fork: the files alone, and the report says why git stayed.
  const back = await host.runCommand(child, `/rewind @${humanSeq(child, 'one')}`)
  assert.equal(back.result.kind, 'success', back.result.text)
  assert.match(back.result.text, /Git: left as it is: that message is from before this session was forked/)
  assert.equal(head(ws), 'agent-work', 'git is left as it is')
})
