/**
 * The arguments of `/rewind` and `/rewind undo`: the target, `preview`, `--fork`, and the
 * `--only` / `--keep` / `--take` path lists (a comma-separated list, or a JSON string for a path
 * with commas or spaces). A malformed argument is refused with its code, nothing run.
 */
import { Codes, RewindError } from './errors.ts'
import type { RestoreSelection } from './ports.ts'
import { escapeControl } from '../../shared/format.ts'

/**
 * A selection of files, and whether the workspace's git repository is kept as it is
 * (`--keep-git`: the files alone are restored).
 */
export type GitSelection = RestoreSelection & { keepGit?: boolean }

/** The arguments of `/rewind [preview] <target> [--only <paths>] [--keep <paths>] [--keep-git]`. */
export interface RewindArgs {
  target: string
  preview: boolean
  /** `--fork` given after the target. */
  fork: boolean
  selection: RestoreSelection | undefined
}

/**
 * Parse what follows `/rewind` (after `--fork`): an optional `preview`, the target, and any number
 * of `--only` / `--keep` options (also `--only=<paths>`). A value is a comma-separated list of
 * workspace-relative paths or directories, or one JSON string (`"a, b.txt"`) for a path holding
 * commas or spaces.
 */
export function parseRewindArgs(input: string): RewindArgs {
  // Tokens split at whitespace outside double quotes; a quoted part is a JSON string.
  const tokens = splitOutsideQuotes(input, c => /\s/.test(c))
  // A value: items separated by commas outside quotes, each bare text or one JSON string.
  const values = (raw: string): string[] => splitOutsideQuotes(raw, c => c === ',').map((v) => {
    if (!v.startsWith('"')) return v
    try {
      const parsed: unknown = JSON.parse(v)
      if (typeof parsed === 'string' && parsed !== '') return parsed
    } catch {
      // reported below
    }
    throw new RewindError(Codes.badRequest, `bad quoted path ${escapeControl(v)}`)
  })
  const only: string[] = []
  const keep: string[] = []
  let target: string | undefined
  let preview = false
  let fork = false
  let keepGit = false
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!
    if (t === '--fork') {
      fork = true
      continue
    }
    if (t === '--keep-git') {
      // The workspace's git repository (HEAD, index, branches) is left as it is.
      keepGit = true
      continue
    }
    const flag = /^--(only|keep)(?:=(.*))?$/s.exec(t)
    if (flag !== null) {
      const raw = flag[2] ?? tokens[++i]
      if (raw === undefined || raw === '' || raw.startsWith('--')) throw new RewindError(Codes.badRequest, `--${flag[1]} needs a path`)
      const list = values(raw)
      if (list.length === 0) throw new RewindError(Codes.badRequest, `--${flag[1]} needs a path`)
      ;(flag[1] === 'only' ? only : keep).push(...list)
    } else if (t === 'preview' && target === undefined && !preview) {
      preview = true
    } else if (target === undefined && !t.startsWith('--')) {
      target = t
    } else if (!t.startsWith('--')) {
      // One target only: `1 extra` is a malformed target, as the planner would say.
      throw new RewindError(Codes.badTarget, `the target is @<seq> or <n>, got "${escapeControl(`${target} ${t}`)}"`)
    } else {
      throw new RewindError(Codes.badRequest, `unknown option "${escapeControl(t)}" (use --only, --keep, --keep-git or --fork)`)
    }
  }
  if (target === undefined) throw new RewindError(Codes.badTarget, 'no rewind target given: use @<seq>')
  if (preview && (only.length > 0 || keep.length > 0)) throw new RewindError(Codes.badRequest, '`preview` takes no --only / --keep')
  const selection: GitSelection | undefined = only.length > 0 || keep.length > 0 || keepGit
    ? { ...(only.length > 0 ? { only } : {}), ...(keep.length > 0 ? { keep } : {}), ...(keepGit ? { keepGit } : {}) }
    : undefined
  return { target, preview, fork, selection }
}

/**
 * `text` cut at every character `isSep` accepts outside double quotes (a backslash escapes the
 * next character inside them); empty pieces are dropped, the others trimmed.
 */
function splitOutsideQuotes(text: string, isSep: (c: string) => boolean): string[] {
  const out: string[] = []
  let cur = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      cur += c
      if (c === '\\') cur += text[++i] ?? ''
      else if (c === '"') quoted = false
    } else if (isSep(c)) {
      out.push(cur)
      cur = ''
    } else {
      if (c === '"') quoted = true
      cur += c
    }
  }
  if (quoted) throw new RewindError(Codes.badRequest, 'unterminated quoted path')
  out.push(cur)
  return out.map(v => v.trim()).filter(v => v !== '')
}

/**
 * The arguments of `/rewind undo`: which entry (`<n>`, `@<op id>`; none = the newest), and a
 * choice per file changed since the rewind (`--keep` / `--take`, values as for `--keep` of a
 * rewind).
 */
export function parseUndoArgs(input: string): { ref: string | undefined; choices: { take?: string[]; keep?: string[] } } {
  // The same grammar as a rewind's options, `--take` read as `--only`.
  const mapped = input.replace(/(^|\s)--take(?=\s|=)/g, '$1--only').trim()
  const noRef = mapped === '' || mapped.startsWith('--')
  const args = parseRewindArgs(noRef ? `@newest ${mapped}` : mapped)
  if (args.preview || args.fork) throw new RewindError(Codes.badRequest, '`/rewind undo` takes an entry and --keep / --take only')
  const take = args.selection?.only ?? []
  const keep = args.selection?.keep ?? []
  return { ref: noRef ? undefined : args.target, choices: { ...(take.length > 0 ? { take } : {}), ...(keep.length > 0 ? { keep } : {}) } }
}
