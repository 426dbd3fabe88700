/**
 * Every change comes back: files changed by DSH's real `bash` tool (dsh-tool-bash over
 * dsh-bash-local and dsh-subprocess-local), by a background command, by a subagent run inside a
 * tool this plugin does not know, and by the write tools followed by the shell, are restored by a
 * rewind — bytes and the executable bit; a file changed only outside the agent is left as it is
 * and listed; budgets are reported, never silent. The write tools' first edit of a project file
 * names the copy the workspace's baseline stored, and comes back from it; a file an editor
 * changed during the turn before the agent rewrote it comes back as it was at the message, and
 * one it created is removed.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { existsSync, readlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { readFile, readdir, writeFile, chmod, mkdtemp, rm } from 'node:fs/promises'
import { turn, text, read, write, edit, bash, tools, gate, gated, PROVIDER, MODEL } from './lib/harness.mjs'
import { bootWithPlugin, humanSeq, pluginSettled, put, rpc, tree, BINARY } from './plugin-support.mjs'

/** Rewind `agent` to its message `message` and check that the job's `created` file is gone and keep.txt is back. */
async function rewindUndoesJob(host, agent, message, created) {
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, message)}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(host.workspace, created)), false, 'the job\'s new file is gone')
  assert.equal(await readFile(join(host.workspace, 'keep.txt'), 'utf8'), 'original\n', 'the job\'s edit is undone')
}

async function seedWorkspace(ws) {
  await put(join(ws, 'src/main.c'), 'int main() { return 0; }\n')
  await put(join(ws, 'src/util.c'), 'int util;\n')
  await put(join(ws, 'lib/old/a.txt'), 'old a\n')
  await put(join(ws, 'lib/old/b.txt'), 'old b\n')
  await put(join(ws, 'run.sh'), '#!/bin/sh\necho run\n')
  await put(join(ws, 'image.bin'), BINARY)
  await put(join(ws, 'README.md'), '# project\n')
  await put(join(ws, '.gitignore'), 'build/\n')
  await put(join(ws, 'build/cache.o'), 'ignored build output\n')
}

test('shell edits, deletes, moves, chmod, binary overwrite and a generated tree all come back', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash('echo "first" >> README.md'), text('first done')),
      turn(
        bash("sed -i 's/return 0/return 1/' src/main.c"),
        bash('rm -rf lib/old'),
        bash('mv src/util.c src/helpers.c'),
        bash('chmod +x README.md && chmod -x run.sh'),
        bash("printf '\\x00\\x01\\x02' > image.bin"),
        bash('mkdir -p gen/a/b && for i in 1 2 3; do echo $i > gen/a/b/f$i.txt; done && echo top > gen/top.txt'),
        bash('echo rebuilt > build/cache.o'),
        text('second done'),
      ),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await seedWorkspace(ws)
  await chmod(join(ws, 'run.sh'), 0o755)
  const agent = await host.createAgent('shell-session')
  await host.sendUser(agent, 'first')
  const beforeSecond = await tree(ws)
  await host.sendUser(agent, 'second')
  // The shell really changed the workspace.
  assert.equal(await readFile(join(ws, 'src/main.c'), 'utf8'), 'int main() { return 1; }\n')
  assert.equal(existsSync(join(ws, 'lib/old')), false)
  assert.equal(existsSync(join(ws, 'gen/a/b/f2.txt')), true)

  const second = humanSeq(agent, 'second')
  const { result } = await host.runCommand(agent, `/rewind @${second}`)
  assert.equal(result.kind, 'success', result.text)
  const after = await tree(ws)
  // build/ is ignored by .gitignore: not tracked, left as the command left it.
  assert.equal(after['build/cache.o'].split(' ')[1], Buffer.from('rebuilt\n').toString('base64'))
  delete after['build/cache.o']
  const expected = { ...beforeSecond }
  delete expected['build/cache.o']
  assert.deepEqual(after, expected, 'the workspace is exactly as before "second" (bytes, executable bits, no generated dirs)')
  assert.match(result.text, /Written \(\d+\):[\s\S]*src\/main\.c/)
  assert.match(result.text, /Deleted \(\d+\):[\s\S]*gen\/top\.txt/)

  // Rewinding further back undoes the first turn's shell append too.
  const first = humanSeq(agent, 'first')
  const back = await host.runCommand(agent, `/rewind @${first}`)
  assert.equal(back.result.kind, 'success', back.result.text)
  assert.equal(await readFile(join(ws, 'README.md'), 'utf8'), '# project\n')
})

test('a background command that writes after its call returned is recorded at the next scan of the turn', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(text('ready')),
      turn(
        bash('(sleep 0.3; echo "late write" > late.txt; echo changed > keep.txt) > /dev/null 2>&1 &'),
        bash('sleep 0.8'),
        text('done'),
      ),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'keep.txt'), 'original\n')
  const agent = await host.createAgent('background-session')
  await host.sendUser(agent, 'ready?')
  await host.sendUser(agent, 'start a job')
  assert.equal(await readFile(join(ws, 'late.txt'), 'utf8'), 'late write\n')
  await rewindUndoesJob(host, agent, 'start a job', 'late.txt')
})

test('a file written with `write` and removed by the shell comes back, in the same turn and in a later one', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('made.txt', 'made by write\n'), bash('rm made.txt'), text('same turn done')),
      turn(write('kept.txt', 'kept by write\n'), text('written')),
      turn(bash('rm kept.txt'), text('removed')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  const agent = await host.createAgent('write-then-rm')
  await host.sendUser(agent, 'same turn')
  assert.equal(existsSync(join(ws, 'made.txt')), false)
  await host.sendUser(agent, 'write it')
  await host.sendUser(agent, 'remove it')
  assert.equal(existsSync(join(ws, 'kept.txt')), false)

  // Back to before "remove it": kept.txt is back with the bytes `write` gave it.
  const removeSeq = humanSeq(agent, 'remove it')
  const r1 = await host.runCommand(agent, `/rewind @${removeSeq}`)
  assert.equal(r1.result.kind, 'success', r1.result.text)
  assert.equal(await readFile(join(ws, 'kept.txt'), 'utf8'), 'kept by write\n')
  // Back to before "same turn": neither file existed.
  const firstSeq = humanSeq(agent, 'same turn')
  const r2 = await host.runCommand(agent, `/rewind @${firstSeq}`)
  assert.equal(r2.result.kind, 'success', r2.result.text)
  assert.equal(existsSync(join(ws, 'kept.txt')), false)
  assert.equal(existsSync(join(ws, 'made.txt')), false)
})

test('a second conversation in the same folder restores a file the first one wrote, after its shell changed it', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(write('shared.txt', 'from the first conversation\n'), text('written')),
      turn(text('noted')),
      turn(bash('echo "changed by the second" > shared.txt'), text('changed')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  const first = await host.createAgent('first-conversation')
  await host.sendUser(first, 'write it')
  // The next message of the first conversation reads the file into its store (its re-check
  // and workspace scan), well after the write.
  await new Promise((r) => setTimeout(r, 100))
  await host.sendUser(first, 'next')
  await pluginSettled(host, first)
  const second = await host.createAgent('second-conversation')
  await host.sendUser(second, 'change it')
  assert.equal(await readFile(join(ws, 'shared.txt'), 'utf8'), 'changed by the second\n')
  const r = await host.runCommand(second, `/rewind @${humanSeq(second, 'change it')}`)
  assert.equal(r.result.kind, 'success', r.result.text)
  assert.equal(await readFile(join(ws, 'shared.txt'), 'utf8'), 'from the first conversation\n')
})

test('a change made only outside the agent between turns is left as is and listed', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(text('one')),
      turn(bash('echo agent > agent.txt'), text('two')),
      turn(text('three')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'notes.md'), 'my notes\n')
  const agent = await host.createAgent('outside-session')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  await pluginSettled(host, agent)
  // The user edits a file no tool touched, between turns.
  await writeFile(join(ws, 'notes.md'), 'my notes, edited by me\n')
  await host.sendUser(agent, 'three')
  const seq = humanSeq(agent, 'two')
  const { result } = await host.runCommand(agent, `/rewind @${seq}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'agent.txt')), false, 'the agent\'s shell change is undone')
  assert.equal(await readFile(join(ws, 'notes.md'), 'utf8'), 'my notes, edited by me\n', 'the user\'s own edit stays')
  assert.match(result.text, /Changed outside the agent, left as is \(1\):\n- notes\.md/)
})

test('a symlink the shell put in place of a file is never written through: the rewind lists it as skipped and restores the rest', async (t) => {
  const outsideDir = await mkdtemp(join(tmpdir(), 'rewind-outside-'))
  const outside = join(outsideDir, 'secret.txt')
  await writeFile(outside, 'outside the workspace\n')
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(text('one')),
      turn(
        bash(`rm notes.txt && ln -s ${outside} notes.txt`),
        bash('ln -s README.md link.md'),
        bash('echo "changed by the agent" > README.md'),
        text('two'),
      ),
    ],
  })
  t.after(async () => {
    await host.dispose()
    await rm(outsideDir, { recursive: true, force: true })
  })
  const ws = host.workspace
  await put(join(ws, 'README.md'), '# project\n')
  await put(join(ws, 'notes.txt'), 'my notes\n')
  const agent = await host.createAgent('symlink-session')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  assert.equal(readlinkSync(join(ws, 'notes.txt')), outside, 'the shell really put a symlink in place of the file')

  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(ws, 'README.md'), 'utf8'), '# project\n', 'the rest of the turn comes back')
  assert.match(result.text, /Skipped \(2\):\n- link\.md: is a symbolic link\n- notes\.txt: is a symbolic link/)
  // Never written through: the file the link points to, outside the workspace, is untouched,
  // and both links are left as the shell made them.
  assert.equal(await readFile(outside, 'utf8'), 'outside the workspace\n')
  assert.equal(readlinkSync(join(ws, 'notes.txt')), outside)
  assert.equal(readlinkSync(join(ws, 'link.md')), 'README.md')
})

test('a directory the shell replaced by a file of its name comes back with its files, and a file it replaced by a directory comes back; /rewind undo puts both back as the shell left them, and a redo makes the rewind again', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(text('one')),
      turn(
        bash('rm -rf config && echo "flat config" > config'),
        bash('rm notes.txt && mkdir notes.txt && echo inner > notes.txt/x'),
        text('two'),
      ),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'config/app.toml'), 'name = "app"\n')
  await put(join(ws, 'config/db/local.toml'), 'port = 5432\n')
  await put(join(ws, 'notes.txt'), 'my notes\n')
  const agent = await host.createAgent('dir-became-file-session')
  await host.sendUser(agent, 'one')
  const beforeTwo = await tree(ws)
  await host.sendUser(agent, 'two')
  assert.equal(await readFile(join(ws, 'config'), 'utf8'), 'flat config\n', 'the shell really made it a file')
  const afterTwo = await tree(ws)

  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.match(result.text, /Written \(3\):\n- config\/app\.toml\n- config\/db\/local\.toml\n- notes\.txt\n/)
  assert.match(result.text, /Deleted \(2\):\n- config\n- notes\.txt\/x\n/)
  assert.match(result.text, /Skipped \(0\):\n- none/)
  assert.deepEqual(await tree(ws), beforeTwo, 'the directory and its files are back, and the file in the place of the other')

  const undo = await host.runCommand(agent, '/rewind undo')
  assert.equal(undo.result.kind, 'success', undo.result.text)
  assert.deepEqual(await tree(ws), afterTwo, 'the undo puts the file back in the place of the directory')

  // And a redo makes the rewind's changes again.
  const { json } = await rpc(host, 'history', { sessionId: agent.id })
  const [entry] = json.value.entries
  const redo = await rpc(host, 'redo', { sessionId: agent.id, opId: entry.opId })
  assert.equal(redo.json.ok, true, JSON.stringify(redo.json))
  assert.deepEqual(await tree(ws), beforeTwo, 'the redo brings the directory and the file back again')
})

test('a path that is a directory, then a file, then a directory again over four turns: a rewind to any message brings its state back', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(text('zero')),
      turn(bash('rm -rf d && echo F > d'), text('one')),
      turn(bash('echo G > d'), text('two')),
      turn(bash('rm d && mkdir d && echo H > d/c'), text('three')),
      turn(bash('echo I > d/c && echo J > d/k'), text('four')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'd/c'), 'c0\n')
  await put(join(ws, 'd/e/f'), 'f0\n')
  const agent = await host.createAgent('retype-session')
  const order = ['zero', 'one', 'two', 'three', 'four']
  const after = {}
  for (const m of order) {
    await host.sendUser(agent, m)
    after[m] = await tree(ws)
  }
  const before = (m) => after[order[order.indexOf(m) - 1]]
  const rewind = async (m) => {
    const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, m)}`)
    assert.equal(result.kind, 'success', result.text)
    assert.deepEqual(await tree(ws), before(m), `rewound to "${m}"`)
  }
  // Straight back over two changes of kind (the file's state at "two" was recorded while
  // its directory's old files were absent under it).
  await rewind('two')
  await rewind('one')
  // The newest rewind undone: the files as the rewind to "two" left them.
  assert.equal((await host.runCommand(agent, '/rewind undo')).result.kind, 'success')
  assert.deepEqual(await tree(ws), before('two'), 'undone')
})

test('a directory the shell moves in a later turn comes back, and its files at the new place go', async (t) => {
  // Files moved with their directory keep their status times, older than the scans of the
  // turn: the scan before the call listed the directory that holds them now without them.
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(bash('true'), text('zero')),
      turn(bash('mkdir -p lib && mv src lib/core && mv notes docs'), text('one')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'src/main.c'), 'int main() { return 0; }\n')
  await put(join(ws, 'src/util/u.c'), 'int u;\n')
  await put(join(ws, 'notes'), 'a file renamed\n')
  const agent = await host.createAgent('moved-dir-session')
  await host.sendUser(agent, 'zero')
  const sent = await tree(ws)
  // Older than the window in which a scan reads a file changed just before it.
  await new Promise((resolve) => setTimeout(resolve, 100))
  await host.sendUser(agent, 'one')
  assert.equal(existsSync(join(ws, 'lib/core/util/u.c')), true)
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'one')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.deepEqual(await tree(ws), sent, 'src and notes back; lib, made by the call, gone')
  assert.equal((await host.runCommand(agent, '/rewind undo')).result.kind, 'success')
  assert.equal(await readFile(join(ws, 'lib/core/util/u.c'), 'utf8'), 'int u;\n', 'the undo puts the move back')
  assert.equal(existsSync(join(ws, 'src')), false)
})

test('the first edits of project files the baseline stored name its copy, and a rewind brings them back', async (t) => {
  // Content only the workspace's first scan (the baseline) copied into the store.
  const project = 'a project line the baseline copied\n'.repeat(200)
  const host = await bootWithPlugin({
    script: [
      // DSH's write tools refuse an existing file the agent has not read (fs-observation-policy).
      turn(read('src/big.ts'), read('src/small.ts'), write('src/big.ts', 'rewritten by write\n'), edit('src/small.ts', 'const a = 1', 'const a = 2'), text('edited')),
      turn(write('src/big.ts', 'and again\n'), text('again')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'src/big.ts'), project)
  await put(join(ws, 'src/small.ts'), 'const a = 1\n')
  // Older than the scan's racy window (50 ms) when the session's baseline stores them.
  await new Promise((resolve) => setTimeout(resolve, 150))
  const agent = await host.createAgent('first-edits')
  await host.sendUser(agent, 'edit them')
  assert.equal(await readFile(join(ws, 'src/small.ts'), 'utf8'), 'const a = 2\n', 'the edit was made')
  await host.sendUser(agent, 'again')
  assert.equal(await readFile(join(ws, 'src/big.ts'), 'utf8'), 'and again\n', 'the writes were made')
  await pluginSettled(host, agent)
  // The write tools' captures named the baseline's copy: no session's log holds those bytes.
  const sessions = join(host.dshHome, 'rewind-snapshots', 'sessions')
  for (const dir of await readdir(sessions)) {
    const log = await readFile(join(sessions, dir, 'records.log')).catch(() => Buffer.alloc(0))
    assert.equal(log.includes(Buffer.from(project)), false, `${dir}'s log holds a copy of src/big.ts`)
  }
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'edit them')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(ws, 'src/big.ts'), 'utf8'), project)
  assert.equal(await readFile(join(ws, 'src/small.ts'), 'utf8'), 'const a = 1\n')
})

test('a file an editor changes during the turn and the agent then rewrites comes back as it was at the message', async (t) => {
  // No scan runs between the editor's change and the `write` (only reads in between, which DSH
  // needs before it writes a file that changed): the write tool's capture finds the file
  // changed since the turn's scan saw it.
  const g = gate()
  const host = await bootWithPlugin({
    script: [turn(read('src/a.ts'), gated(g, read('src/a.ts')), write('src/a.ts', 'written by the agent\n'), text('done'))],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'src/a.ts'), 'as it was at the message\n')
  const agent = await host.createAgent('editor-during-turn')
  host.followup(agent, 'rewrite it')
  await g.reached
  await pluginSettled(host, agent) // the message's scan has seen the file
  await writeFile(join(ws, 'src/a.ts'), 'saved from an editor mid-turn\n')
  g.release()
  await host.waitIdle(agent)
  assert.equal(await readFile(join(ws, 'src/a.ts'), 'utf8'), 'written by the agent\n')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'rewrite it')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(await readFile(join(ws, 'src/a.ts'), 'utf8'), 'as it was at the message\n')
})

test('a file an editor creates during the turn and the agent then rewrites is removed by the rewind; an ignored one is left', async (t) => {
  // The editor creates `src/notes.md` and `docs/new/plan.md` (a new directory) and saves the
  // ignored `.env` after the message's scan; no scan runs before the agent's writes. The
  // scan listed `src/` and the workspace's root to their end without those names, so they
  // were absent at the message; `.env` is out of the scan's scope, whether it was there is
  // not the scan's to say, and it keeps the content the capture found.
  const g = gate()
  const host = await bootWithPlugin({
    script: [turn(
      read('src/a.ts'),
      gated(g, read('src/notes.md')),
      write('src/notes.md', 'the agent\'s notes\n'),
      read('docs/new/plan.md'),
      write('docs/new/plan.md', 'the agent\'s plan\n'),
      read('.env'),
      write('.env', 'TOKEN=the agent\'s\n'),
      text('done'),
    )],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'src/a.ts'), 'const a = 1\n')
  await put(join(ws, '.gitignore'), '.env\n')
  await put(join(ws, '.env'), 'TOKEN=at the message\n')
  const agent = await host.createAgent('editor-creates-during-turn')
  host.followup(agent, 'write the notes')
  await g.reached
  await pluginSettled(host, agent) // the message's scan has run
  await put(join(ws, 'src/notes.md'), 'created in an editor mid-turn\n')
  await put(join(ws, 'docs/new/plan.md'), 'created by a job mid-turn\n')
  await writeFile(join(ws, '.env'), 'TOKEN=saved from an editor\n')
  g.release()
  await host.waitIdle(agent)
  assert.equal(await readFile(join(ws, 'src/notes.md'), 'utf8'), 'the agent\'s notes\n')
  assert.equal(await readFile(join(ws, '.env'), 'utf8'), 'TOKEN=the agent\'s\n')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'write the notes')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'src/notes.md')), false, 'created after the message: removed')
  assert.equal(existsSync(join(ws, 'docs')), false, 'the directories made for it are gone too')
  assert.equal(await readFile(join(ws, '.env'), 'utf8'), 'TOKEN=saved from an editor\n', 'ignored: as the capture found it')
  assert.equal(await readFile(join(ws, 'src/a.ts'), 'utf8'), 'const a = 1\n')
})

test('"Track every change" off: shell changes are not restored (only the write tools are)', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    config: { trackAll: false },
    script: [turn(text('one')), turn(bash('echo shell > shell.txt'), write('tool.txt', 'tool\n'), text('two'))],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  const agent = await host.createAgent('track-off')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'tool.txt')), false, 'the write tool\'s file is deleted')
  assert.equal(existsSync(join(ws, 'shell.txt')), true, 'the shell\'s file is not tracked with the setting off')
  assert.equal(existsSync(join(host.dshHome, 'rewind-snapshots', 'workspaces')), false, 'no workspace scan ran')
})

test('a workspace over the file-count limit is not scanned, and the rewind says so', async (t) => {
  const host = await bootWithPlugin({
    shell: true,
    config: { maxFiles: 5 },
    script: [turn(text('one')), turn(bash('echo shell > shell.txt'), text('two'))],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  for (let i = 0; i < 12; i++) await put(join(ws, `f${i}.txt`), `${i}\n`)
  const agent = await host.createAgent('budget-session')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'shell.txt')), true, 'not covered, so not restored')
  assert.match(result.text, /Not covered by the workspace scan \(\d+\):/)
})

test('a subagent run by a tool this plugin does not know: its changes belong to that call', async (t) => {
  let ctxRef
  // A tool of another plugin (unknown to the rewind plugin) that runs a subagent in the workspace.
  const Delegate = {
    name: 'test-delegate',
    inject: ['tools', 'agents'],
    async apply(ctx) {
      ctxRef = ctx
      const { defineTool } = await import('@deepseek-ai/dsh-tools')
      ctx.tools.register(defineTool({
        name: 'delegate',
        description: 'run a subagent',
        parameters: { task: { type: 'string', required: true, description: 'the task' } },
        output: { schema: { type: 'string' }, render: (_args, value) => [{ type: 'text', text: String(value) }] },
        async execute(args, exec) {
          const { agent: sub } = await ctx.agents.create({
            sessionId: `sub-${exec.callId}`,
            meta: { cwd: exec.agent.session.header.cwd, origin: 'subagent', delegationDepth: 1 },
            agentOptions: { provider: PROVIDER, model: MODEL },
          })
          const { createUserMessage } = await import('@deepseek-ai/dsh-llm')
          sub.followup(createUserMessage({ content: [{ type: 'text', text: String(args.task) }], source: { kind: 'user' } }))
          await sub.whenIdle()
          while (sub.status !== 'idle') await sub.whenIdle()
          return 'subagent finished'
        },
      }))
    },
  }
  const host = await bootWithPlugin({
    shell: true,
    script: [
      turn(text('one')),
      // The parent calls `delegate`; the subagent's turn (next steps) writes and runs the shell.
      turn(tools({ name: 'delegate', args: { task: 'do it' } }), text('parent done')),
    ],
  })
  t.after(() => host.dispose())
  await host.ctx.plugin(Delegate)
  assert.ok(ctxRef)
  // The subagent's steps run while the parent's call is in flight: insert them before the parent's final answer.
  host.adapter.steps.splice(2, 0, ...turn(write('by-sub.txt', 'from the subagent\n'), bash('echo sub > sub-shell.txt && rm seed.txt'), text('sub done')))
  const ws = host.workspace
  await put(join(ws, 'seed.txt'), 'seed\n')
  const agent = await host.createAgent('delegating-parent')
  await host.sendUser(agent, 'one')
  await host.sendUser(agent, 'two')
  assert.equal(await readFile(join(ws, 'by-sub.txt'), 'utf8'), 'from the subagent\n')
  const { result } = await host.runCommand(agent, `/rewind @${humanSeq(agent, 'two')}`)
  assert.equal(result.kind, 'success', result.text)
  assert.equal(existsSync(join(ws, 'by-sub.txt')), false)
  assert.equal(existsSync(join(ws, 'sub-shell.txt')), false)
  assert.equal(await readFile(join(ws, 'seed.txt'), 'utf8'), 'seed\n')
})

test('a job started with run_in_background that writes after the turn ended: recorded when the job ends', async (t) => {
  const host = await bootWithPlugin({
    shell: { background: true },
    script: [
      turn(text('ready')),
      turn(bash('sleep 0.5; echo "from the job" > job.txt; echo edited > keep.txt', { background: true }), text('started')),
      // The job's completion notice may wake the agent for one more answer.
      turn(text('noted')),
    ],
  })
  t.after(() => host.dispose())
  const ws = host.workspace
  await put(join(ws, 'keep.txt'), 'original\n')
  const agent = await host.createAgent('job-session')
  await host.sendUser(agent, 'ready?')
  await host.sendUser(agent, 'start a job')
  for (let i = 0; i < 100 && !existsSync(join(ws, 'job.txt')); i++) await new Promise(r => setTimeout(r, 50))
  assert.equal(await readFile(join(ws, 'job.txt'), 'utf8'), 'from the job\n')
  // Wait for the job to settle (its completion is what triggers the scan), then for the agent.
  for (let i = 0; i < 100 && host.ctx.jobs.list(agent).some(j => j.status === 'running' || j.status === 'stopping'); i++) await new Promise(r => setTimeout(r, 50))
  await host.waitIdle(agent)
  await rewindUndoesJob(host, agent, 'start a job', 'job.txt')
})
