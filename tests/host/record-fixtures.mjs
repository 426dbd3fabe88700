/**
 * Records real DSH session logs into tests/fixtures/*.jsonl.
 *
 * Every session runs on the real DSH 0.1.0-rc.8 host (tests/host/lib/harness.mjs: invariant
 * checkers on, real tools writing real files, JSONL persistence without compression); only the
 * model is scripted. The JSONL file written by DSH's persistence is copied verbatim except that
 * the temp workspace path becomes `/workspace` and the temp DSH home becomes `/dsh-home`.
 *
 * Run: scripts/record-fixtures.sh   (or: <node24> tests/host/record-fixtures.mjs [outDir] [name...])
 *
 * Sessions:
 *   edits             write / read+edit / str_replace_editor create, str_replace, insert, view,
 *                     an overwrite and a failing edit; multi-delta text (packed `text-chunks` rows)
 *   compaction        three turns, a real between-turns compaction by dsh-compaction-basic
 *                     (compaction/start, compaction/summary, checkpoint user/message replace,
 *                     compaction/end), then two more turns
 *   steering          a steering message sent while a turn runs, consumed at the next step
 *   steering-pending  the log as it stands while a turn is still running with two unread
 *                     steering messages (open turn, steering spliced into the inbox only)
 *   rewind            an earlier rewind marker (appended inside a command, as the plugin does)
 *                     followed by more turns
 *   rewind-twice      a second rewind whose range shadows the first marker, then one more turn
 *   injected          plugin-injected context messages (agent.inject) around human turns
 */
import { foldSurface } from '@deepseek-ai/dsh-session'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { randomUUID } from 'node:crypto'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isDeepStrictEqual } from 'node:util'
import {
  edit, gate, gated, normalizeLog, denormalizeLog, parseJsonl, read, sre, startHost, text, tools, turn, write,
} from './lib/harness.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const outDir = resolve(process.argv[2] ?? join(HERE, '..', 'fixtures'))
const only = new Set(process.argv.slice(3))

/** The marker a rewind appends: the planner's shape plus a fresh message id. */
export function rewindMarker(session, targetSeq) {
  const nodes = [...session.surface.nodes]
  const idx = nodes.indexOf(targetSeq)
  if (idx < 0) throw new Error(`seq ${targetSeq} is not on the surface`)
  const shadowed = nodes.slice(idx)
  return {
    data: {
      role: 'user',
      id: randomUUID(),
      content: [{ type: 'text', text: '(empty message)' }],
      source: { kind: 'dsh-rewind' },
    },
    intent: { surfaceOp: { op: 'replace', start: targetSeq, end: nodes.at(-1) }, sourceEventSeqs: shadowed },
  }
}

/** A command that appends a rewind marker between its command/run and command/done events. */
const RewindRecorder = {
  name: 'fixture-rewind-recorder',
  inject: ['commands'],
  apply(ctx) {
    ctx.effect(function* () {
      yield ctx.commands.register({
        name: 'fixture-rewind',
        description: 'append a rewind marker for @<seq>',
        handler: async ({ agent, rawInput }) => {
          const seq = Number(rawInput.trim().replace(/^@/, ''))
          const { data, intent } = rewindMarker(agent.session, seq)
          const event = agent.session.append('user/message', data, intent)
          return { kind: 'success', text: `marker seq ${event.seq}`, sourceEventSeq: event.seq }
        },
      })
    }, 'fixture rewind command')
  },
}

const humanSeqs = (session) => session.events
  .filter((e) => e.type === 'user/message' && e.data.source.kind === 'user')
  .map((e) => e.seq)

async function withHost(name, options, body) {
  const root = await mkdtemp(join(tmpdir(), `rewind-fixture-${name}-`))
  const workspace = join(root, 'ws')
  const dshHome = join(root, 'dsh-home')
  await mkdir(workspace, { recursive: true })
  await writeFile(join(workspace, 'notes.md'), '# Notes\n\ndraft plan\n')
  const host = await startHost({ workspace, dshHome, plugins: [[RewindRecorder]], ...options })
  try {
    const agent = await host.createAgent(name)
    const captured = await body(host, agent)
    const raw = captured ?? await host.readJsonl(agent)
    const normalized = normalizeLog(raw, { workspace, dshHome })
    if (denormalizeLog(normalized, { workspace, dshHome }) !== raw) {
      throw new Error(`${name}: path normalization does not round-trip`)
    }
    // The file must reproduce the live surface (when captured at rest).
    const { events } = parseJsonl(raw)
    const fold = foldSurface(events)
    if (captured === undefined && !isDeepStrictEqual([...fold.nodes], [...agent.session.surface.nodes])) {
      throw new Error(`${name}: persisted log folds to ${fold.nodes}, live surface is ${agent.session.surface.nodes}`)
    }
    const file = join(outDir, `${name}.jsonl`)
    await writeFile(file, normalized)
    console.log(`${name}: ${events.length} events, ${normalized.split('\n').filter(Boolean).length} lines, surface [${fold.nodes}] -> ${file}`)
  } finally {
    await host.dispose()
    await rm(root, { recursive: true, force: true })
  }
}

const sessions = {
  async edits() {
    await withHost('edits', {
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt with the first version.', { chunks: 4 })),
        turn(read('notes.md'), edit('notes.md', 'draft plan', 'final plan'), text('Edited notes.md.')),
        turn(
          sre.create('src/lib.rs', 'pub fn a() {}\n'),
          sre.strReplace('src/lib.rs', 'pub fn a() {}', 'pub fn a() -> u8 { 1 }'),
          sre.insert('src/lib.rs', 1, 'pub fn b() {}'),
          text('Created src/lib.rs, then changed and extended it.', { chunks: 5 }),
        ),
        turn(
          tools(
            { name: 'write', args: { file_path: 'hello.txt', content: 'v2\n' } },
            { name: 'str_replace_editor', args: { command: 'view', path: 'src/lib.rs' } },
          ),
          edit('hello.txt', 'no such text', 'x'),
          text('Overwrote hello.txt; the last edit failed.'),
        ),
      ],
    }, async (host, agent) => {
      await host.sendUser(agent, 'create hello.txt')
      await host.sendUser(agent, 'turn the draft plan in notes.md into the final plan')
      await host.sendUser(agent, 'add src/lib.rs with two functions')
      await host.sendUser(agent, 'bump hello.txt to v2 and show me lib.rs')
    })
  },

  async compaction() {
    await withHost('compaction', {
      compaction: { retainTokens: 150 },
      auxiliary: () => 'The user had hello.txt created, notes.md edited and a.txt written.',
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt.')),
        turn(read('notes.md'), edit('notes.md', 'draft plan', 'final plan'), text('Edited notes.md.')),
        turn(write('a.txt', 'alpha\n'), text('Wrote a.txt.', { chunks: 3 })),
        turn(write('b.txt', 'beta\n'), text('Wrote b.txt.')),
        turn(sre.create('c.txt', 'gamma\n'), text('Created c.txt.')),
      ],
    }, async (host, agent) => {
      await host.sendUser(agent, 'create hello.txt')
      await host.sendUser(agent, 'finalize the plan in notes.md')
      await host.sendUser(agent, 'write a.txt')
      const result = await host.compactNow(agent)
      if (result === null) throw new Error('compaction found nothing to compact')
      await host.sendUser(agent, 'write b.txt')
      await host.sendUser(agent, 'create c.txt')
    })
  },

  async steering() {
    const g = gate()
    await withHost('steering', {
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt.')),
        turn(gated(g, write('todo.txt', '- one\n')), sre.strReplace('todo.txt', '- one', '- one\n- two'), text('Wrote todo.txt with two items.')),
        turn(read('todo.txt'), text('todo.txt has two items.')),
      ],
    }, async (host, agent) => {
      await host.sendUser(agent, 'create hello.txt')
      host.followup(agent, 'write todo.txt with one item')
      await g.reached
      host.steer(agent, 'actually, add a second item too')
      g.release()
      await host.waitIdle(agent)
      await host.sendUser(agent, 'what is in todo.txt?')
    })
  },

  async 'steering-pending'() {
    const g = gate()
    await withHost('steering-pending', {
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt.')),
        turn(read('notes.md'), edit('notes.md', 'draft plan', 'final plan'), text('Edited notes.md.')),
        turn(gated(g, write('later.txt', 'later\n')), text('Wrote later.txt.'), text('Noted both remarks.')),
      ],
    }, async (host, agent) => {
      await host.sendUser(agent, 'create hello.txt')
      await host.sendUser(agent, 'finalize the plan in notes.md')
      host.followup(agent, 'write later.txt')
      await g.reached
      host.steer(agent, 'use a different name')
      host.steer(agent, 'and keep it short')
      // Capture the log while the turn is still running and both steering messages are unread.
      const snapshot = await host.readJsonl(agent)
      g.release()
      await host.waitIdle(agent)
      return snapshot
    })
  },

  async rewind() {
    await withHost('rewind', {
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt.')),
        turn(read('notes.md'), edit('notes.md', 'draft plan', 'final plan'), text('Edited notes.md.')),
        turn(sre.create('a.txt', 'alpha\n'), text('Created a.txt.', { chunks: 3 })),
        turn(write('b.txt', 'beta\n'), text('Wrote b.txt.')),
        turn(read('hello.txt'), edit('hello.txt', 'v1', 'v2'), text('Bumped hello.txt.')),
      ],
    }, async (host, agent) => {
      await host.sendUser(agent, 'create hello.txt')
      await host.sendUser(agent, 'finalize the plan in notes.md')
      await host.sendUser(agent, 'create a.txt')
      const [, second] = humanSeqs(agent.session)
      const run = await host.runCommand(agent, `/fixture-rewind @${second}`)
      if (run?.result?.kind !== 'success') throw new Error(`rewind command failed: ${JSON.stringify(run)}`)
      await host.sendUser(agent, 'write b.txt instead')
      await host.sendUser(agent, 'bump hello.txt')
    })
  },

  async 'rewind-twice'() {
    await withHost('rewind-twice', {
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt.')),
        turn(write('a.txt', 'alpha\n'), text('Wrote a.txt.')),
        turn(write('b.txt', 'beta\n'), text('Wrote b.txt.')),
        turn(write('c.txt', 'gamma\n'), text('Wrote c.txt.')),
        turn(write('d.txt', 'delta\n'), text('Wrote d.txt.')),
      ],
    }, async (host, agent) => {
      await host.sendUser(agent, 'create hello.txt')
      await host.sendUser(agent, 'write a.txt')
      await host.sendUser(agent, 'write b.txt')
      const [first, second] = humanSeqs(agent.session)
      let run = await host.runCommand(agent, `/fixture-rewind @${second}`)
      if (run?.result?.kind !== 'success') throw new Error(`rewind command failed: ${JSON.stringify(run)}`)
      await host.sendUser(agent, 'write c.txt')
      // The second rewind starts before the first marker, so it shadows that marker too.
      run = await host.runCommand(agent, `/fixture-rewind @${first}`)
      if (run?.result?.kind !== 'success') throw new Error(`rewind command failed: ${JSON.stringify(run)}`)
      await host.sendUser(agent, 'write d.txt')
    })
  },

  async injected() {
    await withHost('injected', {
      script: [
        turn(write('hello.txt', 'v1\n'), text('Created hello.txt.')),
        turn(read('notes.md'), text('notes.md holds a draft plan.')),
        turn(write('a.txt', 'alpha\n'), text('Wrote a.txt.')),
      ],
    }, async (host, agent) => {
      host.inject(agent, '<system-reminder>The repository uses two-space indentation.</system-reminder>', 'context')
      await host.sendUser(agent, 'create hello.txt')
      host.inject(agent, '<system-reminder>notes.md changed on disk.</system-reminder>', 'file-watch')
      await host.sendUser(agent, 'what does notes.md say?')
      host.inject(agent, '<system-reminder>Tests passed.</system-reminder>', 'context')
      await host.sendUser(agent, 'write a.txt')
    })
  },
}

await mkdir(outDir, { recursive: true })
for (const [name, record] of Object.entries(sessions)) {
  if (only.size > 0 && !only.has(name)) continue
  await record()
}
