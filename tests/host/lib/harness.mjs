/**
 * Real-host test harness: boots the real DeepSeek Harness (DSH 0.1.0-rc.8) service spine
 * in-process, with a scripted model as the only fake. Run under Node >= 24
 * (`scripts/setup-node.sh` installs one into `.tools/node24`).
 *
 * Mounted, in order, on one cordis `Context`: `dsh-invariants` (enabled) with the invariant
 * companion of every mounted package, `dsh-llm`, `dsh-session`, `dsh-system-prompt`, `dsh-tools`,
 * `dsh-agent`, `dsh-session-persistence-jsonl` (`{root: <dshHome>/sessions, compression: 'none'}`,
 * default chunk packing), `dsh-agent-loop`, `dsh-commands`, `dsh-fs-local` (`cwd: workspace`),
 * `dsh-fs-observation-policy`, `dsh-tool-fs`, `dsh-tool-str-replace-editor`; optionally
 * `dsh-host-webserver`, `dsh-settings-file` and `dsh-compaction-basic` (+ `dsh-token-meter`, `dsh-session-projection`,
 * `dsh-compaction-tool-result-pruner`); then the plugins under test.
 *
 * ---------------------------------------------------------------------------------------------
 * API (stable; other test files import it)
 *
 *   import { startHost, turn, text, write, read, edit, sre, tools, gate, normalizeLog,
 *            denormalizeLog, parseJsonl } from './lib/harness.mjs'
 *
 *   const host = await startHost({
 *     workspace,          // absolute dir for the files the tools touch; default: a fresh temp dir
 *     dshHome,            // absolute DSH home; default: a fresh temp dir; sessions in <dshHome>/sessions
 *     plugins: [[PluginModule, config], ...],   // loaded last with ctx.plugin(module, config)
 *     script: [turn, ...], // scripted model turns, consumed in order by agent-loop requests
 *     invariants: true,   // DSH's runtime invariant checkers (default true)
 *     settings: false,    // true or a config object: mount dsh-settings-file (path <dshHome>/settings.yaml, watch off)
 *     compaction: false,  // true or a config object: mount dsh-compaction-basic ({auto:false} by default)
 *     webServer: false,   // true: mount dsh-host-webserver on 127.0.0.1, OS-assigned port (host.baseUrl)
 *     shell: false,       // true or {background: true, completionDelivery}: mount DSH's real `bash` tool
 *                         //   (dsh-subprocess-local, dsh-bash-local in the workspace, dsh-shell-env,
 *                         //   dsh-tool-bash); `background` also mounts dsh-jobs-local and dsh-tool-jobs
 *                         //   (completion delivery `quiet` unless given) so `run_in_background` works
 *     auxiliary,          // (request) => string: answer for requests not built by the agent loop
 *                         //   (session titles, compaction summaries); default: a short fixed text
 *     packChunks,         // JSONL chunk packing (default: DSH's default, on)
 *     contract,           // {format: 3|4, settingsRegister}: the plugin named 'dsh-rewind' sees the newer
 *                         //   session contract through lib/newer-contract.mjs (a shim over rc.8, not a
 *                         //   real newer host); default from DSH_REWIND_CONTRACT (rc.8 | newer | newer-v4)
 *   })
 *
 *   A turn is an array of steps; each model request of the agent loop consumes the next step.
 *   A step is one of
 *     text('final answer', {chunks})    the model answers with text (ends the turn); `chunks` splits
 *                                        the text into that many stream deltas (default 1)
 *     tools(call, call, ...)            the model calls tools (one block per call) in one step
 *     write(path, content) | read(path) | edit(path, oldString, newString, {replaceAll})
 *     sre.create(path, text) | sre.strReplace(path, oldStr, newStr) | sre.insert(path, line, text)
 *     | sre.view(path)                  a one-call tool step (str_replace_editor paths may be relative:
 *                                        they are resolved against the workspace when the step streams)
 *     (request) => step                 computed when the request arrives
 *     gated(g, step)                    the stream blocks on gate `g` before producing `step`
 *   `turn(...steps)` just returns the array; the last step of a turn must be a text step.
 *   Tool call ids are `call-<n>` (n counts per host) unless a call has `id`.
 *
 *   host.ctx, host.workspace, host.dshHome, host.sessionsRoot
 *   host.baseUrl              `http://127.0.0.1:<port>` when `webServer` is on (routes: ctx.webServer.register)
 *   host.adapter.requests     every agent-loop request: {messages, system, tools, provider, model}
 *   host.adapter.auxiliary    every other request (titles, summaries), same shape
 *   host.addTurns(...turns)   append turns to the script; host.pendingSteps() → steps left
 *   host.errors               every `agent/error` ({agentId, turn, step, error}), e.g. an exhausted script
 *   await host.createAgent(sessionId, {cwd, agentOptions}) → agent   (cwd default: workspace)
 *   await host.sendUser(agent, text)   follow-up human message, resolves when the agent is idle again
 *   host.followup(agent, text)         same without waiting; returns the UserMessage sent
 *   host.steer(agent, text)            steering message (agent.steer); returns the UserMessage sent
 *   host.inject(agent, text, plugin)   injected context (agent.inject, source {kind:'plugin', plugin})
 *   await host.waitIdle(agent)         resolves when the agent has no active driver
 *   await host.runCommand(agent, '/name args')  → {commandId, result} from ctx.commands.execute
 *   await host.compactNow(agent)       a real between-turns compaction (needs `compaction`)
 *   await host.flush(agent)            drains JSONL persistence for the agent's session
 *   host.jsonlPath(agentOrHeader)      path of the session's JSONL file
 *   await host.readJsonl(agent)        flush + the file's text
 *   await host.writeJsonl(text)        put a session log (header line + events) where persistence
 *                                      looks for it; returns its SessionId
 *   await host.resume(sessionId, {agentOptions})  dispose the live agent of that id (after a flush),
 *                                      then ctx.agents.resume from JSONL → agent
 *   await host.disposeAgent(agent)
 *   await host.dispose()               disposes agents, then every mounted plugin
 *
 *   normalizeLog(text, {workspace, dshHome}) / denormalizeLog(text, {workspace, dshHome}):
 *     swap the temp paths for `/workspace` and `/dsh-home` (and back) in a JSONL text.
 *   parseJsonl(text) → {header, events}: DSH's own reading (packed chunk rows decoded).
 * ---------------------------------------------------------------------------------------------
 */
import { isShimmed, newerContract } from './newer-contract.mjs'
import { Context } from '@deepseek-ai/cordis'
import LlmRuntime, { CallId, LlmAdapter, createUserMessage, isAgentLoopRequest } from '@deepseek-ai/dsh-llm'
import SessionStore, { SessionId, decodeStorageRecord } from '@deepseek-ai/dsh-session'
import SystemPrompt from '@deepseek-ai/dsh-system-prompt'
import ToolRuntime from '@deepseek-ai/dsh-tools'
import AgentRegistry from '@deepseek-ai/dsh-agent'
import AgentLoop from '@deepseek-ai/dsh-agent-loop'
import CommandRuntime from '@deepseek-ai/dsh-commands'
import LocalFileSystem from '@deepseek-ai/dsh-fs-local'
import * as FsPolicy from '@deepseek-ai/dsh-fs-observation-policy'
import * as ToolFs from '@deepseek-ai/dsh-tool-fs'
import * as ToolStrReplaceEditor from '@deepseek-ai/dsh-tool-str-replace-editor'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import InvariantRegistry from '@deepseek-ai/dsh-invariants'
import { mkdtemp, mkdir, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, isAbsolute, join } from 'node:path'

/** Packages whose invariant companions are loaded (when mounted). */
const CORE_INVARIANTS = [
  '@deepseek-ai/dsh-llm', '@deepseek-ai/dsh-session', '@deepseek-ai/dsh-system-prompt',
  '@deepseek-ai/dsh-tools', '@deepseek-ai/dsh-agent', '@deepseek-ai/dsh-agent-loop',
  '@deepseek-ai/dsh-commands', '@deepseek-ai/dsh-fs', '@deepseek-ai/dsh-fs-local',
  '@deepseek-ai/dsh-fs-observation-policy', '@deepseek-ai/dsh-tool-fs',
  '@deepseek-ai/dsh-tool-str-replace-editor', '@deepseek-ai/dsh-session-persistence',
  '@deepseek-ai/dsh-session-persistence-jsonl', '@deepseek-ai/dsh-scope',
]
const SETTINGS_INVARIANTS = ['@deepseek-ai/dsh-settings', '@deepseek-ai/dsh-settings-file']
const WEBSERVER_INVARIANTS = ['@deepseek-ai/dsh-host-webserver']
const COMPACTION_INVARIANTS = [
  '@deepseek-ai/dsh-compaction', '@deepseek-ai/dsh-compaction-basic', '@deepseek-ai/dsh-token-meter',
  '@deepseek-ai/dsh-session-projection', '@deepseek-ai/dsh-compaction-tool-result-pruner',
]

export const PROVIDER = 'scripted'
export const MODEL = 'scripted-model'

// ------------------------------------------------------------------ script steps

/** A turn: the steps of one human turn, in order. */
export const turn = (...steps) => steps

/** A final text answer; `chunks` splits it into that many stream deltas. */
export const text = (s, { chunks = 1 } = {}) => ({ kind: 'text', text: s, chunks })

/** One step calling the given tools ({name, args, id?} each). */
export const tools = (...calls) => ({ kind: 'tools', calls })

const call = (name, args, id) => (id === undefined ? { name, args } : { name, args, id })
/** `bash` (dsh-tool-bash, needs `shell`): a real `bash -c` in the workspace. */
export const bash = (command, { id, background, description = 'scripted command' } = {}) => tools(call('bash', {
  command, description, ...(background === undefined ? {} : { run_in_background: background }),
}, id))
/** `write` (dsh-tool-fs); a relative path resolves against the session cwd. */
export const write = (path, content, { id } = {}) => tools(call('write', { file_path: path, content }, id))
/** `read` (dsh-tool-fs); required before `edit` by the observation policy. */
export const read = (path, { id } = {}) => tools(call('read', { file_path: path }, id))
/** `edit` (dsh-tool-fs). */
export const edit = (path, oldString, newString, { replaceAll, id } = {}) => tools(call('edit', {
  file_path: path, old_string: oldString, new_string: newString,
  ...(replaceAll === undefined ? {} : { replace_all: replaceAll }),
}, id))
/** `str_replace_editor` commands; a relative `path` is made absolute against the workspace. */
export const sre = {
  create: (path, fileText, { id } = {}) => tools(call('str_replace_editor', { command: 'create', path, file_text: fileText }, id)),
  strReplace: (path, oldStr, newStr, { id } = {}) => tools(call('str_replace_editor', { command: 'str_replace', path, old_str: oldStr, new_str: newStr }, id)),
  insert: (path, insertLine, newStr, { id } = {}) => tools(call('str_replace_editor', { command: 'insert', path, insert_line: insertLine, new_str: newStr }, id)),
  view: (path, { id } = {}) => tools(call('str_replace_editor', { command: 'view', path }, id)),
}

/**
 * A gate the scripted stream can block on: `g.reached` resolves when a request is waiting on it,
 * `g.release()` lets it go on.
 */
export function gate() {
  let release
  let reach
  const released = new Promise((r) => { release = r })
  const reached = new Promise((r) => { reach = r })
  return { released, reached, release: () => release(), _reach: () => reach() }
}
/** A step whose stream waits for gate `g` first. */
export const gated = (g, step) => ({ kind: 'gated', gate: g, step })

// ------------------------------------------------------------------ scripted model

function textChunks(s, n) {
  const out = [{ type: 'block-start', index: 0, blockType: 'text' }]
  const parts = Math.max(1, Math.min(n, s.length))
  const size = Math.ceil(s.length / parts)
  for (let i = 0; i < s.length; i += size) out.push({ type: 'text-delta', index: 0, text: s.slice(i, i + size) })
  if (s.length === 0) out.push({ type: 'text-delta', index: 0, text: '' })
  out.push({ type: 'block-end', index: 0, block: { type: 'text', text: s } })
  out.push({ type: 'usage', usage: { inputTokens: 10, outputTokens: 3 } })
  out.push({ type: 'finish', reason: { kind: 'stop' } })
  return out
}

function toolChunks(calls) {
  const out = []
  calls.forEach((c, index) => {
    const json = JSON.stringify(c.args)
    out.push({ type: 'block-start', index, blockType: 'tool-call' })
    out.push({ type: 'tool-call-delta', index, id: c.id, name: c.name, argumentsDelta: json })
    out.push({ type: 'block-end', index, block: { type: 'tool-call', id: c.id, name: c.name, arguments: json } })
  })
  out.push({ type: 'usage', usage: { inputTokens: 10, outputTokens: 5 } })
  out.push({ type: 'finish', reason: { kind: 'tool-calls' } })
  return out
}

function snapshotRequest(options) {
  return {
    provider: options.provider,
    model: options.model,
    system: options.system,
    tools: options.tools?.map((t) => t.name),
    messages: structuredClone(options.messages),
  }
}

function checkTurn(t, i) {
  if (!Array.isArray(t) || t.length === 0) throw new TypeError(`script turn ${i} must be a non-empty array of steps`)
  const last = t.at(-1)
  const lastKind = last?.kind === 'gated' ? last.step.kind : last?.kind
  if (typeof last !== 'function' && lastKind !== 'text') {
    throw new TypeError(`script turn ${i} must end with a text step (the final answer)`)
  }
}

/** LlmAdapter whose answers come from a script of steps. The only fake piece of the host. */
export class ScriptedAdapter extends LlmAdapter {
  requests = []
  auxiliary = []
  steps = []
  callCounter = 0
  constructor({ workspace, auxiliary }) {
    super()
    this.workspace = workspace
    this.answerAuxiliary = auxiliary ?? (() => 'Scripted auxiliary answer.')
  }

  addTurns(turns) {
    turns.forEach((t, i) => checkTurn(t, i))
    for (const t of turns) this.steps.push(...t)
  }

  providerInfo(provider) { return { id: provider, name: provider } }
  async listModels() { return [{ id: MODEL, name: MODEL }] }
  async resolveModel(provider, model) { return { provider, id: model, name: model, contextWindow: 200_000 } }

  async * stream(options) {
    if (!isAgentLoopRequest(options)) {
      this.auxiliary.push(snapshotRequest(options))
      yield * textChunks(String(this.answerAuxiliary(options)), 1)
      return
    }
    this.requests.push(snapshotRequest(options))
    let step = this.steps.shift()
    if (step === undefined) {
      throw new Error(`scripted model: script exhausted at request ${this.requests.length}`)
    }
    if (typeof step === 'function') step = step(options)
    if (step.kind === 'gated') {
      step.gate._reach()
      await Promise.race([step.gate.released, abortPromise(options.signal)])
      step = step.step
    }
    let chunks
    if (step.kind === 'text') chunks = textChunks(step.text, step.chunks ?? 1)
    else if (step.kind === 'tools') {
      chunks = toolChunks(step.calls.map((c) => ({
        id: CallId(c.id ?? `call-${++this.callCounter}`),
        name: c.name,
        args: c.name === 'str_replace_editor' && typeof c.args.path === 'string' && !isAbsolute(c.args.path)
          ? { ...c.args, path: join(this.workspace, c.args.path) }
          : c.args,
      })))
    } else throw new TypeError(`scripted model: unknown step ${JSON.stringify(step)}`)
    for (const chunk of chunks) {
      options.signal?.throwIfAborted()
      yield chunk
    }
  }
}

function abortPromise(signal) {
  if (signal === undefined) return new Promise(() => {})
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true })
  })
}

// ------------------------------------------------------------------ log helpers

/** Replace the temp workspace / DSH home paths with `/workspace` and `/dsh-home`. */
export function normalizeLog(textIn, { workspace, dshHome }) {
  return replaceAllLiteral(replaceAllLiteral(textIn, dshHome, '/dsh-home'), workspace, '/workspace')
}

/** Inverse of {@link normalizeLog}. */
export function denormalizeLog(textIn, { workspace, dshHome }) {
  return replaceAllLiteral(replaceAllLiteral(textIn, '/workspace', workspace), '/dsh-home', dshHome)
}

function replaceAllLiteral(s, from, to) {
  if (!from) return s
  return s.split(from).join(to)
}

/** Parse a JSONL session log the way DSH does: header line, then records (packed rows decoded). */
export function parseJsonl(textIn) {
  const lines = textIn.split('\n').filter((l) => l.trim() !== '')
  if (lines.length === 0) throw new Error('empty session log')
  const header = JSON.parse(lines[0])
  if (header.type !== 'session') throw new Error('first line is not a session header')
  const events = []
  for (const line of lines.slice(1)) events.push(...decodeStorageRecord(JSON.parse(line)))
  return { header, events }
}

// ------------------------------------------------------------------ host

/** The contract a whole run asks for (`DSH_REWIND_CONTRACT`), if any. */
function contractFromEnv() {
  const v = process.env.DSH_REWIND_CONTRACT
  if (v === undefined || v === '' || v === 'rc.8') return undefined
  // `newer`: DSH 0.1.5-rc.2's shape (format 3, settings.register still there); `newer-v4`: 0.1.7+
  // (format 4, no settings.register: the settings tests then see read-only settings).
  if (v === 'newer') return { format: 3, settingsRegister: true }
  if (v === 'newer-v4') return { format: 4 }
  throw new Error(`DSH_REWIND_CONTRACT must be rc.8, newer or newer-v4 (got ${v})`)
}

async function importInvariant(pkg) {
  try {
    return await import(`${pkg}/invariant`)
  } catch (error) {
    if (error?.code === 'ERR_MODULE_NOT_FOUND' || error?.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') return undefined
    throw error
  }
}

/** Boot the host. See the header comment for the options and the returned API. */
export async function startHost(options = {}) {
  const {
    plugins = [],
    script = [],
    invariants = true,
    settings = false,
    compaction = false,
    webServer = false,
    shell = false,
    auxiliary,
    packChunks,
  } = options
  const workspace = options.workspace ?? await mkdtemp(join(tmpdir(), 'rewind-ws-'))
  const dshHome = options.dshHome ?? await mkdtemp(join(tmpdir(), 'rewind-dsh-'))
  const sessionsRoot = join(dshHome, 'sessions')
  await mkdir(workspace, { recursive: true })
  await mkdir(sessionsRoot, { recursive: true })

  const ctx = new Context()
  const fibers = []
  const mount = async (plugin, config) => {
    const fiber = ctx.plugin(plugin, config)
    fibers.push(fiber)
    await fiber
    return fiber
  }

  if (invariants) {
    await mount(InvariantRegistry, { enabled: true })
    const pkgs = [...CORE_INVARIANTS]
    if (settings) pkgs.push(...SETTINGS_INVARIANTS)
    if (compaction) pkgs.push(...COMPACTION_INVARIANTS)
    if (webServer) pkgs.push(...WEBSERVER_INVARIANTS)
    for (const pkg of pkgs) {
      const inv = await importInvariant(pkg)
      if (inv !== undefined) await mount(inv)
    }
  }
  await mount(LlmRuntime)
  await mount(SessionStore)
  await mount(SystemPrompt, { persona: 'rewind real-host tests' })
  await mount(ToolRuntime, {})
  await mount(AgentRegistry)
  await mount(JsonlSessionPersistence, {
    root: sessionsRoot, compression: 'none', ...(packChunks === undefined ? {} : { packChunks }),
  })
  await mount(AgentLoop, { agents: [] })
  await mount(CommandRuntime)
  await mount(LocalFileSystem, { cwd: workspace })
  await mount(FsPolicy)
  await mount(ToolFs)
  await mount(ToolStrReplaceEditor)
  if (shell) {
    const background = typeof shell === 'object' && shell.background === true
    const { default: LocalSubprocessRuntime } = await import('@deepseek-ai/dsh-subprocess-local')
    const { default: LocalBashExecutor } = await import('@deepseek-ai/dsh-bash-local')
    const ShellEnv = await import('@deepseek-ai/dsh-shell-env')
    const ToolBash = await import('@deepseek-ai/dsh-tool-bash')
    await mount(LocalSubprocessRuntime)
    await mount(LocalBashExecutor, { cwd: workspace })
    await mount(ShellEnv)
    if (background) {
      const { default: LocalJobRegistry } = await import('@deepseek-ai/dsh-jobs-local')
      await mount(LocalJobRegistry)
      // The job controller; a completion is left for the next turn unless `completionDelivery` says otherwise.
      const ToolJobs = await import('@deepseek-ai/dsh-tool-jobs')
      await mount(ToolJobs, { completionDelivery: shell.completionDelivery ?? 'quiet' })
    }
    await mount(ToolBash, { enableRunInBackground: background })
  }
  if (webServer) {
    const { default: WebServer } = await import('@deepseek-ai/dsh-host-webserver')
    await mount(WebServer, { host: '127.0.0.1', port: 0 })
  }
  if (settings) {
    const { default: FileSettingsProvider } = await import('@deepseek-ai/dsh-settings-file')
    await mount(FileSettingsProvider, {
      path: join(dshHome, 'settings.yaml'), watch: false, ...(typeof settings === 'object' ? settings : {}),
    })
  }
  if (compaction) {
    const { default: SessionProjections } = await import('@deepseek-ai/dsh-session-projection')
    const { default: TokenMeter } = await import('@deepseek-ai/dsh-token-meter')
    const { default: Pruner } = await import('@deepseek-ai/dsh-compaction-tool-result-pruner')
    const { default: BasicCompactionEngine } = await import('@deepseek-ai/dsh-compaction-basic')
    await mount(SessionProjections)
    await mount(TokenMeter)
    await mount(Pruner)
    await mount(BasicCompactionEngine, { auto: false, ...(typeof compaction === 'object' ? compaction : {}) })
  }

  const adapter = new ScriptedAdapter({ workspace, auxiliary })
  adapter.addTurns(script)
  const unregisterAdapter = ctx.llm.registerAdapter([PROVIDER], adapter)

  // The newer session contract (DSH 0.1.2+, `lib/newer-contract.mjs`) for the plugin under test:
  // `contract: {format}` here, or `DSH_REWIND_CONTRACT=newer` / `newer-v4` for a whole run.
  const contract = options.contract ?? contractFromEnv()
  for (const entry of plugins) {
    const [plugin, config] = Array.isArray(entry) ? entry : [entry, undefined]
    const shimmed = contract !== undefined && plugin?.name === 'dsh-rewind' && !isShimmed(plugin) ? newerContract(plugin, contract) : plugin
    await mount(shimmed, config)
  }

  const errors = []
  ctx.on('agent/error', ({ agent, turn: t, step, error }) => {
    errors.push({ agentId: agent.id, turn: t, step, error })
  }, { global: true })

  const handles = new Map() // SessionId -> AgentHandle
  const agentOptions = { provider: PROVIDER, model: MODEL }
  const human = (s, source = { kind: 'user' }) => createUserMessage({ content: [{ type: 'text', text: s }], source })

  const waitIdle = async (agent) => {
    // whenIdle() follows replacement work; loop once more if a wake raced the first settlement.
    await agent.whenIdle()
    while (agent.status !== 'idle') await agent.whenIdle()
  }

  const sessionOf = (x) => (x?.session ?? x)

  const host = {
    ctx,
    adapter,
    errors,
    workspace,
    dshHome,
    sessionsRoot,
    get baseUrl() {
      if (!webServer) throw new Error('webServer is not mounted (startHost({webServer: true}))')
      return `http://127.0.0.1:${ctx.webServer.port}`
    },
    SessionId,
    createUserMessage,
    addTurns: (...turns) => adapter.addTurns(turns),
    pendingSteps: () => adapter.steps.length,

    async createAgent(sessionId, { cwd = workspace, agentOptions: opts = {}, seed } = {}) {
      const id = SessionId(String(sessionId))
      const handle = await ctx.agents.create({
        sessionId: id,
        meta: { cwd },
        agentOptions: { ...agentOptions, ...opts },
        ...(seed === undefined ? {} : { seed }),
      })
      handles.set(id, handle)
      return handle.agent
    },

    followup(agent, s) {
      const msg = human(s)
      agent.followup(msg)
      return msg
    },
    async sendUser(agent, s) {
      const msg = host.followup(agent, s)
      await waitIdle(agent)
      return msg
    },
    steer(agent, s) {
      const msg = human(s)
      agent.steer(msg)
      return msg
    },
    inject(agent, s, plugin = 'context') {
      const msg = human(s, { kind: 'plugin', plugin })
      agent.inject(msg)
      return msg
    },
    waitIdle,

    async runCommand(agent, line) {
      return ctx.commands.execute(agent, line, [], new AbortController().signal)
    },

    async compactNow(agent) {
      if (!ctx.compaction) throw new Error('compaction is not mounted (startHost({compaction: true}))')
      return ctx.compaction.compactNow(agent, new AbortController().signal)
    },

    async flush(agentOrSession) {
      return ctx.sessions.flush(sessionOf(agentOrSession))
    },

    jsonlPath(agentOrHeader) {
      const header = agentOrHeader?.session?.header ?? agentOrHeader?.header ?? agentOrHeader
      const loc = ctx.sessionPersistence.locate(header)
      if (loc?.kind !== 'jsonl') throw new Error(`no JSONL location for session ${header?.id}`)
      return loc.path
    },

    async readJsonl(agent) {
      await host.flush(agent)
      return readFile(host.jsonlPath(agent), 'utf8')
    },

    async writeJsonl(textIn) {
      const { header } = parseJsonl(textIn)
      const path = host.jsonlPath(header)
      await mkdir(dirname(path), { recursive: true })
      await writeFile(path, textIn.endsWith('\n') ? textIn : `${textIn}\n`)
      return SessionId(header.id)
    },

    async resume(sessionId, { agentOptions: opts = {} } = {}) {
      const id = SessionId(String(sessionId))
      const live = handles.get(id)
      if (live !== undefined) {
        await waitIdle(live.agent)
        await ctx.sessions.flush(live.agent.session)
        await live.dispose()
        handles.delete(id)
      }
      const handle = await ctx.agents.resume({ resumeSessionId: id, agentOptions: { ...agentOptions, ...opts } })
      handles.set(id, handle)
      return handle.agent
    },

    async disposeAgent(agent) {
      const handle = handles.get(agent.id)
      if (handle === undefined) return
      handles.delete(agent.id)
      await ctx.sessions.flush(agent.session)
      await handle.dispose()
    },

    async dispose() {
      for (const handle of [...handles.values()].reverse()) {
        try { await ctx.sessions.flush(handle.agent.session) } catch {}
        await handle.dispose()
      }
      handles.clear()
      unregisterAdapter?.()
      for (const fiber of fibers.reverse()) await fiber.dispose()
    },
  }
  return host
}
