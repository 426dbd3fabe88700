/**
 * Warnings the confirm dialog shows before the rewind runs, from the host's preview. Pure: the
 * dialog (`ui.tsx`) renders the rows.
 */
import { escapeControl } from './escape.ts'
import { showPath } from '../../shared/names.ts'

/** One planned file the restore cannot read, shown as its path and why. */
export interface UnreadableRow {
  /** The exact spelling (a React key, and what `--keep` would take). */
  readonly key: string
  /** The path as shown (control characters and names that are not UTF-8 made visible). */
  readonly path: string
  /** Why it cannot be read (control characters made visible). */
  readonly message: string
}

/**
 * The preview's `unreadable` list as dialog rows: the planned files the restore cannot read for
 * its copy of them (a file it may not open, a directory on the way it may not list). The rewind
 * leaves each as it is and reports it as failed; the dialog warns first. A malformed entry is
 * dropped; an absent list (an older host) is no warning.
 */
export function unreadableRows(preview: { readonly unreadable?: readonly unknown[] | null }): UnreadableRow[] {
  return failedRows(preview.unreadable)
}

/**
 * The preview's `gitObjectGone` list as dialog rows: the planned files whose earlier content is a
 * blob of the workspace's git repository that the repository no longer has (pruned after the
 * commit that held it was dropped). The rewind is refused (`rewind/git-object-gone`) unless
 * they are kept as they are; the dialog warns first. Malformed entries and an absent list (an
 * older host) as for {@link unreadableRows}.
 */
export function gitObjectGoneRows(preview: { readonly gitObjectGone?: readonly unknown[] | null }): UnreadableRow[] {
  return failedRows(preview.gitObjectGone)
}

function failedRows(list: readonly unknown[] | null | undefined): UnreadableRow[] {
  const rows: UnreadableRow[] = []
  for (const u of list ?? []) {
    if (typeof u !== 'object' || u === null) continue
    const { path, message } = u as { path?: unknown; message?: unknown }
    if (typeof path !== 'string' || path === '') continue
    rows.push({ key: path, path: showPath(path), message: escapeControl(typeof message === 'string' ? message : '') })
  }
  return rows
}
