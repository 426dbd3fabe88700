/**
 * What the rewind, the undo and redo, and the recovery report, and the durable command text of
 * each (`/rewind`, `/rewind preview`, `/rewind undo`, `--continue` / `--rollback`, the list of
 * what was left open). Names and messages go through `escapeControl`; long lists are cut.
 */
import type { Addon } from './native.ts'
import type { FilesPreview, PreviewFile, RestoreOutcome, SkippedPath, UndoOutcome } from './ports.ts'
import type { Interrupted } from '../../shared/rpc-types.ts'
import { type Locale, format } from './locales.ts'
import { escapeControl } from '../../shared/format.ts'
import { showPath } from '../../shared/names.ts'

/** What `/rewind preview` found: the target, and the files or why there are none. */
export interface RewindPreview {
  targetSeq: number
  preview: string
  files: FilesPreview | undefined
  unavailable?: { code: string; message: string }
  /** What the rewind would do to the workspace's git repository (docs/git.md). */
  git?: GitReport
}

/** What a rewind does (or did) to the workspace's git repository (`BindingGitReport`). */
export type GitReport = import('../../crates/napi-host/index.d.ts').BindingGitReport

/**
 * The lines saying what happens to git: `Git: HEAD: detached at v2.40.0 → agent-work @ 3fce3b5;
 * …`, or that it is kept or left as it is and why; the keep-refs of the agent's commits.
 */
export function gitLines(locale: Locale, git: GitReport | undefined, preview = false): string[] {
  if (git === undefined) return []
  if (git.kept) return [format(locale, 'gitKept')]
  const lines: string[] = []
  if (git.refusal != null) lines.push(format(locale, 'gitLine', { summary: escapeControl(git.refusal) }))
  else if (git.changes || git.flagged.length > 0) lines.push(format(locale, 'gitLine', { summary: escapeControl(git.summary) }))
  else if (git.untracked != null && !preview) lines.push(format(locale, 'gitLeft', { why: escapeControl(git.untracked) }))
  if (git.keepRefs.length > 0) lines.push(format(locale, 'gitKeepRefs', { refs: git.keepRefs.map(escapeControl).join(', ') }))
  if (git.error != null) lines.push(format(locale, 'gitError', { why: escapeControl(git.error) }))
  if (preview && git.changes && git.refusal == null) lines.push(format(locale, 'gitHint'))
  return lines
}

/** What a rewind did. */
export interface RewindReport {
  opId: string
  targetSeq: number
  targetText: string
  preview: string
  stoppedTurn: boolean
  markerSeq: number | undefined
  withdrawn: string[]
  /** Why files were not restored at all, when they were not. */
  filesNotRestored: { code: string; message: string } | undefined
  outcome: RestoreOutcome
  /** Set when the rewind forked: the child session the conversation continues in. */
  fork?: { childSessionId: string; boundarySeq: number }
}

/** An interrupted rewind (or undo) of a session, as a restart finds it (the `interrupted` answer). */
export type InterruptedRewind = Interrupted

/** What continuing or rolling back an interrupted rewind did. */
export interface ResolveReport {
  opId: string
  how: 'continue' | 'rollback'
  kind: InterruptedRewind['kind']
  targetSeq: number
  conversation: boolean
  outcome: RestoreOutcome
  /** The history outcome written (empty when the entry could not be updated). */
  entryOutcome: Addon.BindingResolved['entryOutcome']
  /** Leftover restore temp files removed. */
  tempsRemoved: string[]
}

/** Lines of a report section shown before the rest is only counted. */
export const SECTION_LINES = 50

function section(locale: Locale, title: string, lines: string[]): string[] {
  const out = [`${title} (${lines.length}):`]
  if (lines.length === 0) out.push(`- ${format(locale, 'none')}`)
  else {
    // A long list is summarized: a report of 50,000 restored paths would be megabytes of text.
    for (const line of lines.slice(0, SECTION_LINES)) out.push(`- ${line}`)
    if (lines.length > SECTION_LINES) out.push(format(locale, 'andMore', { n: lines.length - SECTION_LINES }))
  }
  return out
}

function skippedLine(s: SkippedPath): string {
  return `${showPath(s.path)}: ${escapeControl(s.reason)}`
}

function outcomeLines(locale: Locale, o: RestoreOutcome): string[] {
  return [
    ...section(locale, format(locale, 'written'), o.written.map(showPath)),
    ...section(locale, format(locale, 'deleted'), o.deleted.map(showPath)),
    ...section(locale, format(locale, 'skipped'), o.skipped.map(skippedLine)),
    ...section(locale, format(locale, 'failed'), o.failed.map(f => `${showPath(f.path)}: ${escapeControl(f.message)}`)),
    // Files it could not restore leave the restore open: say how to settle it.
    ...(!o.completed && o.failed.length > 0 ? [format(locale, 'interruptedHint')] : []),
  ]
}

/** What a rewind left open was: a rewind, a fork or an undo, and its target. */
function openWhat(i: InterruptedRewind, locale: Locale): string {
  if (i.kind === 'undo') return format(locale, 'interruptedUndo', { seq: i.targetSeq })
  if (i.kind === 'fork') return format(locale, 'interruptedFork', { seq: i.targetSeq, child: escapeControl(i.childSessionId ?? '') })
  return format(locale, 'interruptedRewind', { seq: i.targetSeq })
}

/** What an interrupted rewind left, and the two ways out. */
export function interruptedText(list: readonly InterruptedRewind[], locale: Locale): string {
  const lines = [format(locale, 'interruptedHeader')]
  for (const i of list) {
    const what = openWhat(i, locale)
    const files = i.restore !== undefined
      ? format(locale, 'interruptedFiles', { done: i.restore.done, total: i.restore.actions })
      : format(locale, 'interruptedNoFiles')
    lines.push(`- ${what} (${files}; op ${escapeControl(i.opId)})${i.error !== undefined ? ` [${i.error.code}: ${escapeControl(i.error.message)}]` : ''}`)
  }
  lines.push(format(locale, list.some(i => i.kind !== 'undo') ? 'interruptedHint' : 'interruptedUndoHint'))
  return lines.join('\n')
}

/** The rewinds that ran to their end but could not restore every file, and the two ways out. */
export function partialText(list: readonly InterruptedRewind[], locale: Locale): string {
  const lines = [format(locale, 'partialHeader')]
  for (const p of list) {
    const what = openWhat(p, locale)
    const files = format(locale, 'partialFiles', { failed: p.restore?.failed ?? 0, total: p.restore?.actions ?? 0 })
    lines.push(`- ${what} (${files}; op ${escapeControl(p.opId)})`)
  }
  lines.push(format(locale, 'interruptedHint'))
  return lines.join('\n')
}

/** The durable report of `/rewind --continue` / `--rollback`. */
export function resolveText(report: ResolveReport, locale: Locale): string {
  const lines = [format(locale, report.how === 'continue' ? 'continuedDone' : 'rolledBackDone', { seq: report.targetSeq })]
  if (report.how === 'rollback' && report.conversation && report.kind === 'rewind') lines.push(format(locale, 'rollbackConversation'))
  if (report.tempsRemoved.length > 0) lines.push(format(locale, 'tempsRemoved', { n: report.tempsRemoved.length }))
  lines.push(...outcomeLines(locale, report.outcome))
  return lines.join('\n')
}

const REASON_KEYS: Record<string, 'reasonBackupsOff' | 'reasonStoreNewer' | 'reasonStoreUnavailable' | 'reasonPendingOnly' | 'reasonNoCwd'> = {
  'pending-only': 'reasonPendingOnly',
  'no-cwd': 'reasonNoCwd',
  'rewind/store-newer': 'reasonStoreNewer',
  'rewind/backups-off': 'reasonBackupsOff',
}

/** The durable command result: target, then Written / Deleted / Skipped / Failed paths. */
export function reportText(report: RewindReport, locale: Locale): string {
  const lines: string[] = report.fork === undefined
    ? [format(locale, 'rewoundTo', { seq: report.targetSeq, preview: JSON.stringify(report.preview) })]
    : [
        format(locale, 'forkedTo', { seq: report.targetSeq, preview: JSON.stringify(report.preview) }),
        format(locale, 'forkChild', { child: escapeControl(report.fork.childSessionId) }),
      ]
  if (report.stoppedTurn) lines.push(format(locale, 'stopped'))
  if (report.withdrawn.length > 0) lines.push(format(locale, 'withdrawn', { n: report.withdrawn.length }))
  if (report.filesNotRestored !== undefined) {
    const key = REASON_KEYS[report.filesNotRestored.code]
    const reason = key !== undefined ? format(locale, key) : `${format(locale, 'reasonStoreUnavailable')} (${report.filesNotRestored.code}: ${escapeControl(report.filesNotRestored.message)})`
    lines.push(format(locale, 'filesNotRestored', { reason }))
  }
  lines.push(...outcomeLines(locale, report.outcome))
  if ((report.outcome.kept ?? []).length > 0) lines.push(...section(locale, format(locale, 'kept'), report.outcome.kept!.map(showPath)))
  // Shown only when the workspace scan found any: files changed outside the agent's tool calls
  // (left as they are), and what the scan does not cover (a budget, the per-file cap).
  const o = report.outcome
  if ((o.outside ?? []).length > 0) lines.push(...section(locale, format(locale, 'outside'), o.outside!.map(showPath)))
  if ((o.inFlight ?? []).length > 0) lines.push(...section(locale, format(locale, 'inFlight'), o.inFlight!.map(showPath)))
  if ((o.notCovered ?? []).length > 0) lines.push(...section(locale, format(locale, 'notCovered'), o.notCovered!.map(skippedLine)))
  lines.push(...gitLines(locale, o.git))
  return lines.join('\n')
}

/** The impact line of one planned file: action, path, `+added −removed`, who changed it. */
function previewLine(f: PreviewFile, locale: Locale): string {
  const act = format(locale, f.action === 'write' ? 'actWrite' : f.action === 'create' ? 'actCreate' : 'actDelete')
  const counts = f.added != null && f.removed != null ? ` (+${f.added} −${f.removed})` : ''
  const origin = f.origin === 'outside'
    ? ` [${format(locale, 'originOutside')}]`
    : f.origin === 'in-flight'
      ? ` [${format(locale, 'originInFlight')}]`
      : f.origin === 'other-session'
        ? ` [${format(locale, 'originSession', { session: escapeControl(f.originSession ?? '?') })}]`
        : ''
  return `${act} ${showPath(f.path)}${counts}${origin}`
}

/** `/rewind preview @<seq>`: the files the rewind would change, with counts and origins. */
export function previewText(p: RewindPreview, locale: Locale): string {
  const preview = JSON.stringify(p.preview)
  if (p.files === undefined) {
    const key = p.unavailable !== undefined ? REASON_KEYS[p.unavailable.code] : undefined
    const reason = key !== undefined ? format(locale, key) : `${p.unavailable?.code ?? ''}: ${escapeControl(p.unavailable?.message ?? '')}`
    return format(locale, 'previewUnavailable', { seq: p.targetSeq, reason })
  }
  const f = p.files
  const lines = [f.files.length === 0
    ? format(locale, 'previewNone', { seq: p.targetSeq, preview })
    : format(locale, 'previewHeader', { seq: p.targetSeq, preview, n: f.files.length })]
  for (const file of f.files) lines.push(`- ${previewLine(file, locale)}`)
  if (f.skipped.length > 0 || f.uncovered.length > 0) {
    lines.push(...section(locale, format(locale, 'skipped'), [...f.skipped.map(skippedLine), ...f.uncovered.map(showPath)]))
  }
  if (f.outside.length > 0) lines.push(...section(locale, format(locale, 'outside'), f.outside.map(showPath)))
  if ((f.inFlight ?? []).length > 0) lines.push(...section(locale, format(locale, 'inFlight'), f.inFlight!.map(showPath)))
  if (f.notCovered.length > 0) lines.push(...section(locale, format(locale, 'notCovered'), f.notCovered.map(skippedLine)))
  // Warned before anything runs: files the restore cannot read for its copy of them stay as they are.
  const unreadable = f.unreadable ?? []
  if (unreadable.length > 0) lines.push(...section(locale, format(locale, 'unreadable'), unreadable.map(u => `${showPath(u.path)}: ${escapeControl(u.message)}`)))
  // Warned before anything runs: files whose earlier content is a git object the repository no
  // longer has; the rewind is refused (`rewind/git-object-gone`) unless they are kept.
  const gone = f.gitObjectGone ?? []
  if (gone.length > 0) lines.push(...section(locale, format(locale, 'gitObjectGone'), gone.map(u => `${showPath(u.path)}: ${escapeControl(u.message)}`)))
  if (f.files.length > 0) lines.push(format(locale, 'previewHint', { seq: p.targetSeq }))
  lines.push(...gitLines(locale, p.git, true))
  return lines.join('\n')
}

/** What an undo did. */
export interface UndoReport {
  opId: string
  targetSeq: number
  /** `ok` | `partial` (some file failed); files untouched when the rewind changed none. */
  kind: UndoOutcome['kind']
  files: UndoOutcome
  /**
   * Where the conversation as it was before the rewind is: a new session seeded up to the
   * rewind's marker (`created`), the fork's parent (never changed by the fork), or nowhere (an
   * entry without a marker: its conversation was not rewound).
   */
  conversation: { sessionId: string; created: boolean } | undefined
  /**
   * Files that changed after the undo's check, once it had started (its entry and new session
   * exist): the undo was finished as a restart finishes one, and these were kept as they are.
   */
  changedDuring?: string[]
  /** What the undo (or redo) did to the workspace's git repository (docs/git.md). */
  git?: GitReport
}

/** The durable report of `/rewind undo`. */
export function undoText(report: UndoReport, locale: Locale, how: 'undo' | 'redo' = 'undo'): string {
  const lines = [format(locale, how === 'redo' ? 'redoneTo' : 'undoneTo', { seq: report.targetSeq })]
  const list = (title: string, items: string[]): void => {
    if (items.length === 0) return
    lines.push(`${title} (${items.length}):`)
    for (const i of items.slice(0, SECTION_LINES)) lines.push(`- ${i}`)
    if (items.length > SECTION_LINES) lines.push(format(locale, 'andMore', { n: items.length - SECTION_LINES }))
  }
  // Paths come spelled exactly; shown so that names alike on screen are told apart.
  list(format(locale, 'written'), report.files.restored.map(showPath))
  list(format(locale, 'deleted'), report.files.deleted.map(showPath))
  list(format(locale, 'kept'), (report.files.kept ?? []).map(showPath))
  list(format(locale, 'failed'), report.files.failed.map(f => `${showPath(f.path)}: ${escapeControl(f.message)}`))
  if ((report.changedDuring ?? []).length > 0) list(format(locale, 'undoRaced'), report.changedDuring!.map(showPath))
  lines.push(...gitLines(locale, report.git))
  if (how === 'redo' && report.conversation !== undefined) lines.push(format(locale, 'redoSession', { session: escapeControl(report.conversation.sessionId) }))
  else if (report.conversation?.created) lines.push(format(locale, 'undoSession', { session: escapeControl(report.conversation.sessionId) }))
  else if (report.conversation !== undefined) lines.push(format(locale, 'undoForkParent', { session: escapeControl(report.conversation.sessionId) }))
  return lines.join('\n')
}
