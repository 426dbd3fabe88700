/**
 * The `/rewind` (and `/undo`) command and the engine command `/prompt-rewind @<seq>`: a bare call
 * lists what is left open and the candidates; otherwise the arguments choose a rewind, a fork, a
 * preview, an undo or a redo, or `--continue` / `--rollback`. Every outcome is a durable text.
 */
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostSession } from './host.ts'
import type { RestoreSelection } from './ports.ts'
import { isSubagentSession } from './state.ts'
import { type Locale, format } from './locales.ts'
import type { Undoer } from './undo.ts'
import { parseRewindArgs, parseUndoArgs } from './command-args.ts'
import { candidates } from './marker.ts'
import { type InterruptedRewind, type ResolveReport, type RewindPreview, type RewindReport, interruptedText, partialText, previewText, reportText, resolveText, undoText } from './report.ts'
import { escapeControl } from '../../shared/format.ts'

/** What the command runs: the rewind service's sequences (`Rewinder`). */
export interface CommandTarget {
  readonly undoer: Undoer
  reconcile(agent: HostAgent): Promise<InterruptedRewind[]>
  resolve(agent: HostAgent, opId: string | undefined, how: 'continue' | 'rollback'): Promise<ResolveReport>
  partials(agent: HostAgent): Promise<InterruptedRewind[]>
  preview(agent: HostAgent, target: string): Promise<RewindPreview>
  rewind(agent: HostAgent, target: string, selection?: RestoreSelection): Promise<RewindReport>
  fork(agent: HostAgent, target: string, selection?: RestoreSelection): Promise<RewindReport>
}

/** The result of a command. */
export type CommandResult = { kind: 'success'; text: string } | { kind: 'error'; text: string }

/** `/rewind` and `/undo`: a bare call lists candidates; otherwise rewinds. */
export async function rewindCommand(r: CommandTarget, locale: Locale, agent: HostAgent, rawInput: string, engine: boolean): Promise<CommandResult> {
  let input = rawInput.trim()
  // `--continue` / `--rollback [<op id>]`: settle an interrupted rewind of this session.
  const resolveFlag = /^--(continue|rollback)(?:\s+|$)/.exec(input)
  // `--fork` first: continue from the target in a new child session instead of in place.
  const forkFlag = /^--fork(?:\s+|$)/.exec(input)
  if (forkFlag !== null) input = input.slice(forkFlag[0].length).trim()
  try {
    if (resolveFlag !== null && !engine) {
      const rest = input.slice(resolveFlag[0].length).trim()
      const report = await r.resolve(agent, rest === '' ? undefined : rest, resolveFlag[1] as 'continue' | 'rollback')
      return { kind: 'success', text: resolveText(report, locale) }
    }
    // An interrupted rewind of this session is settled before anything else: the next
    // `/rewind` says what was interrupted and offers both ways out.
    const interrupted = await r.reconcile(agent)
    if (input === '' && !engine) {
      // What is left open first: interrupted rewinds, then those that could not restore every file.
      const partial = await r.partials(agent)
      const open = [
        ...(interrupted.length > 0 ? [interruptedText(interrupted, locale)] : []),
        ...(partial.length > 0 ? [partialText(partial, locale)] : []),
      ]
      return { kind: 'success', text: [...open, listText(agent.session, locale)].join('\n\n') }
    }
    if (interrupted.length > 0) {
      throw new RewindError(Codes.interrupted, interruptedText(interrupted, locale), { opIds: interrupted.map(i => i.opId) })
    }
    // `/rewind undo [<n> | @<op id>] [--keep <paths>] [--take <paths>]`: undo a rewind, files and conversation.
    const undoCmd = /^(undo|redo)(?:\s+|$)/.exec(input)
    if (undoCmd !== null && !engine && forkFlag === null) {
      const args = parseUndoArgs(input.slice(undoCmd[0].length))
      if (undoCmd[1] === 'redo') {
        // `/rewind redo [<n> | @<op id>]`: the n-th newest undone rewind (default the newest).
        const opId = await r.undoer.resolveUndone(agent, args.ref)
        return { kind: 'success', text: undoText(await r.undoer.redo(agent, opId, args.choices), locale, 'redo') }
      }
      const opId = await r.undoer.resolveRef(agent, args.ref)
      const report = await r.undoer.undo(agent, opId, args.choices)
      return { kind: 'success', text: undoText(report, locale) }
    }
    if (input === '') throw new RewindError(Codes.badTarget, 'no rewind target given: use @<seq>')
    const args = parseRewindArgs(input)
    if (engine && !args.target.startsWith('@')) {
      throw new RewindError(Codes.badTarget, `the engine command takes @<seq>, got "${escapeControl(args.target)}"`)
    }
    const forking = forkFlag !== null || args.fork
    if (args.preview) {
      if (forking) throw new RewindError(Codes.badRequest, '`preview` and `--fork` do not go together')
      return { kind: 'success', text: previewText(await r.preview(agent, args.target), locale) }
    }
    const report = forking ? await r.fork(agent, args.target, args.selection) : await r.rewind(agent, args.target, args.selection)
    return { kind: 'success', text: reportText(report, locale) }
  } catch (error) {
    const e = toRewindError(error)
    return { kind: 'error', text: format(locale, 'error', { code: e.code, message: e.message }) }
  }
}

/** The numbered candidate list. */
export function listText(session: HostSession, locale: Locale): string {
  if (isSubagentSession(session)) throw new RewindError(Codes.subagentSession, 'this is a subagent session; subagent sessions are never rewound')
  const list = candidates(session)
  if (list.length === 0) return format(locale, 'listEmpty')
  const lines = [format(locale, 'listHeader')]
  for (const c of list) {
    lines.push(`${c.index}. @${c.seq} ${c.pending ? `${format(locale, 'pendingTag')} ` : ''}${escapeControl(c.preview)}`)
  }
  lines.push(format(locale, 'listHint'))
  return lines.join('\n')
}
