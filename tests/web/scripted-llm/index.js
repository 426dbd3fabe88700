/**
 * Scripted model for the browser end-to-end test of dsh-prompt-rewind (test fixture only).
 *
 * The human prompt is a script: every `write <path> <word>` clause (clauses separated by `;`)
 * becomes one call of DSH's real `write` tool with content `<word>\n`, and every `bash <command>`
 * clause one call of DSH's real `bash` tool, in order, one call per model step. When every clause
 * has a tool result, the model answers `DONE: <paths>` (`bash` for a command).
 * A prompt without clauses gets `ECHO: <prompt>`; a session-title request gets a fixed title.
 * Each request is appended to $DSH_REWIND_LLM_LOG (JSONL) when set.
 * No imports from DSH: the adapter is duck-typed to what `ctx.llm.registerAdapter` calls.
 */
import { appendFileSync } from 'node:fs'

let calls = 0

function textOf(message) {
  return (message?.content ?? []).filter(b => b.type === 'text').map(b => b.text).join('')
}

function* say(text) {
  yield { type: 'block-start', index: 0, blockType: 'text' }
  yield { type: 'text-delta', index: 0, text }
  yield { type: 'block-end', index: 0, block: { type: 'text', text } }
  yield { type: 'usage', usage: { inputTokens: 12, outputTokens: 4 } }
  yield { type: 'finish', reason: { kind: 'stop' } }
}

function* callTool(name, argsObject) {
  const id = `rewind-e2e-call-${++calls}`
  const args = JSON.stringify(argsObject)
  yield { type: 'block-start', index: 0, blockType: 'tool-call' }
  yield { type: 'tool-call-delta', index: 0, id, name, argumentsDelta: args }
  yield { type: 'block-end', index: 0, block: { type: 'tool-call', id, name, arguments: args } }
  yield { type: 'usage', usage: { inputTokens: 12, outputTokens: 4 } }
  yield { type: 'finish', reason: { kind: 'tool-calls' } }
}

/** Parse `write <path> <word>` and `bash <command>` clauses. */
export function clauses(text) {
  const out = []
  for (const part of text.split(';')) {
    const m = /^\s*write\s+([\w./-]+)\s+(\S+)\s*$/i.exec(part)
    if (m) { out.push({ path: m[1], content: `${m[2]}\n` }); continue }
    const b = /^\s*bash\s+(.+?)\s*$/i.exec(part)
    if (b) out.push({ command: b[1] })
  }
  return out
}

class ScriptedAdapter {
  providerInfo(provider) { return { id: provider, name: 'Scripted (rewind e2e)' } }
  providerRetryPolicy() { return undefined }
  listModels() { return Promise.resolve([{ provider: 'scripted', id: 'scripted-model', name: 'scripted-model' }]) }
  resolveModel(provider, model) { return Promise.resolve({ provider, id: model, name: model }) }
  async * stream(options) {
    if (options.purpose === 'session-title') { yield* say('Rewind e2e session'); return }
    // The last message is often an injected runtime-context message: walk back to the human prompt,
    // counting the tool results that came after it.
    let human
    let results = 0
    for (let i = options.messages.length - 1; i >= 0; i--) {
      const msg = options.messages[i]
      if (msg.role === 'user' && msg.source?.kind === 'user') { human = msg; break }
      results += (msg.content ?? []).filter(b => b.type === 'tool-result').length
    }
    const prompt = textOf(human)
    if (process.env.DSH_REWIND_LLM_LOG) {
      try { appendFileSync(process.env.DSH_REWIND_LLM_LOG, JSON.stringify({ time: Date.now(), prompt: prompt.slice(0, 120), results, messages: options.messages.length }) + '\n') } catch {}
    }
    const script = clauses(prompt)
    const names = new Set((options.tools ?? []).map(t => t.name))
    const canRun = script.every(c => names.has(c.command === undefined ? 'write' : 'bash'))
    if (script.length === 0 || !canRun) { yield* say(`ECHO: ${prompt.slice(0, 200)}`); return }
    if (results < script.length) {
      const c = script[results]
      if (c.command === undefined) yield* callTool('write', { file_path: c.path, content: c.content })
      else yield* callTool('bash', { command: c.command, description: 'scripted shell command' })
      return
    }
    yield* say(`DONE: ${script.map(c => c.path ?? 'bash').join(', ')}`)
  }
}

export const name = 'dsh-prompt-rewind-scripted-llm'
export const inject = ['llm']
export function apply(ctx) {
  ctx.llm.registerAdapter(['scripted'], new ScriptedAdapter())
}
