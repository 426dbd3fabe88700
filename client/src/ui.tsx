/**
 * The visible surfaces: the ↶ button portalled into every human message's
 * action row, the confirm dialog, the Rewind history page and the
 * configuration card.
 */
import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore, type ReactNode } from 'react'
import { createPortal } from 'react-dom'
import type { T } from './i18n.ts'
import { currentSessionId, messageBySeq, messageOf, noteSlotSession, readerOf, runRewind, sessionsOf, slotSession, type Ctx, type MessageInfo, type RewindOutcome } from './host.ts'
import { missingCaps, undoableEntries } from './history.ts'
import { compatView, loadDoctor, type DoctorState } from './doctor.ts'
import { escapeControl, formatBytes, oneLine } from '../../shared/format.ts'
import { showPath } from '../../shared/names.ts'
import { gitObjectGoneRows, unreadableRows } from './warnings.ts'
import { openSession, runFork } from './fork.ts'
import { rpc, stalePaths, type UndoChoices, type Caps, type DiffSide, type FileDiff, type History, type HistoryEntry, type Interrupted, type Preview, type PreviewFile, type Storage } from './rpc.ts'
import { dialogStore, rewindsSeen, Store, type LocaleState, type SettingsModel } from './store.ts'

/** Everything a surface needs, handed down from `apply`. */
export interface Env {
  readonly ctx: Ctx
  readonly locale: Store<LocaleState>
  readonly settings: SettingsModel
  /** Report an outcome (the e2e probe and diagnostics read it). */
  readonly report: (event: Record<string, unknown>) => void
}

/** @returns the bound translate function, re-rendering on locale change. */
function useT(env: Env): T {
  return useSyncExternalStore(env.locale.subscribe, env.locale.getSnapshot).t
}

/** @returns the plugin locale id (a BCP 47 tag), re-rendering on locale change. */
function useLocaleTag(env: Env): string {
  return useSyncExternalStore(env.locale.subscribe, env.locale.getSnapshot).locale
}

function formatTime(time: number, tag: string): string {
  try {
    return new Date(time).toLocaleString(tag, { dateStyle: 'medium', timeStyle: 'short' })
  } catch {
    return new Date(time).toISOString()
  }
}

const USER_ROWS = '[data-chat-flow-kind="user"][data-chat-anchor-key], [data-chat-flow-kind="steering"][data-chat-anchor-key]'

interface PortalTarget { readonly key: string; readonly container: Element }

/**
 * Mounts one ↶ button into the action row of every human message row on
 * screen (a message-scoped portal; rows come and go with the virtualized
 * list, so a coalesced MutationObserver keeps the set current).
 */
export function MessagePortals({ env, sessionId }: { env: Env; sessionId: string }): ReactNode {
  const [targets, setTargets] = useState<readonly PortalTarget[]>([])
  // On a page without the sessions service, the header's session is the one on screen.
  useEffect(() => { noteSlotSession(sessionId) }, [sessionId])
  useEffect(() => {
    let last: readonly PortalTarget[] = []
    const refresh = (): void => {
      const next: PortalTarget[] = []
      document.querySelectorAll(USER_ROWS).forEach((row) => {
        const key = row.getAttribute('data-chat-anchor-key')
        if (key === null) return
        const root = row.querySelector('[data-time-hover-root]')
        const actions = root?.lastElementChild
        next.push({ key, container: actions instanceof HTMLElement ? actions : row })
      })
      const same = next.length === last.length && next.every((t, i) => t.key === last[i]!.key && t.container === last[i]!.container)
      if (!same) { last = next; setTargets(next) }
    }
    let queued = false
    const observer = new MutationObserver(() => {
      if (queued) return
      queued = true
      queueMicrotask(() => { queued = false; refresh() })
    })
    observer.observe(document.body, { childList: true, subtree: true })
    refresh()
    return () => { observer.disconnect() }
  }, [])
  return (
    <>
      {targets.map(t => createPortal(<RewindButton key={t.key} env={env} sessionId={sessionId} anchorKey={t.key} />, t.container, t.key))}
      <ConfirmDialog env={env} fallback />
    </>
  )
}

function RewindButton({ env, sessionId, anchorKey }: { env: Env; sessionId: string; anchorKey: string }): ReactNode {
  const t = useT(env)
  const onClick = (): void => {
    const message = messageOf(readerOf(env.ctx, sessionId), anchorKey)
    if (message === undefined) { env.report({ type: 'button-no-message', anchorKey }); return }
    dialogStore.set({ sessionId, target: message })
  }
  return (
    <button
      type="button"
      className="dshpr-msg-button"
      data-testid="dsh-prompt-rewind-button"
      data-anchor-key={anchorKey}
      aria-label={t('button.label')}
      title={t('button.title')}
      onClick={onClick}
    >↶</button>
  )
}

type PreviewState =
  | { readonly status: 'loading' }
  | { readonly status: 'ready'; readonly preview: Preview }
  | { readonly status: 'error'; readonly message: string }

/** How many overlay-mounted dialog hosts are live (the header falls back when none is). */
const overlayHosts = new Store<number>(0)

/**
 * The confirm dialog; one at a time, opened by a ↶ button. Mounted in
 * `shell.overlay`; when that slot is missing, the header's instance (marked
 * `fallback`) renders it instead, so the buttons never open nothing.
 */
export function ConfirmDialog({ env, fallback = false }: { env: Env; fallback?: boolean }): ReactNode {
  const request = useSyncExternalStore(dialogStore.subscribe, dialogStore.getSnapshot)
  const hosts = useSyncExternalStore(overlayHosts.subscribe, overlayHosts.getSnapshot)
  useEffect(() => {
    if (fallback) return undefined
    overlayHosts.set(n => n + 1)
    return () => { overlayHosts.set(n => n - 1) }
  }, [fallback])
  if (request === null || (fallback && hosts > 0)) return null
  return createPortal(<DialogBody key={`${request.sessionId}@${request.target.seq}`} env={env} sessionId={request.sessionId} target={request.target} />, document.body)
}

function DialogBody({ env, sessionId, target }: { env: Env; sessionId: string; target: MessageInfo }): ReactNode {
  const t = useT(env)
  const { seq, text } = target
  const [preview, setPreview] = useState<PreviewState>({ status: 'loading' })
  const [running, setRunning] = useState<false | 'rewind' | 'fork'>(false)
  const [failure, setFailure] = useState<string | undefined>(undefined)
  // Planned files the user unticked: left as they are by Rewind and Fork.
  const [keep, setKeep] = useState<ReadonlySet<string>>(new Set())
  const keepRef = useRef<ReadonlySet<string>>(keep)
  keepRef.current = keep
  // "Keep git as it is": the workspace's repository (HEAD, index, branches) is left alone.
  const [keepGit, setKeepGit] = useState(false)
  const keepGitRef = useRef(keepGit)
  keepGitRef.current = keepGit
  const cancelRef = useRef<HTMLButtonElement>(null)
  const dialogRef = useRef<HTMLDivElement>(null)
  const runningRef = useRef(false)

  useEffect(() => {
    let live = true
    rpc('preview', sessionId, { seq }).then(
      (value) => { if (live) setPreview({ status: 'ready', preview: value }) },
      (error: Error) => { if (live) setPreview({ status: 'error', message: error.message }) },
    )
    return () => { live = false }
  }, [sessionId, seq])
  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null
    cancelRef.current?.focus()
    return () => { if (opener?.isConnected === true) opener.focus() }
  }, [])

  const close = useCallback((): void => { if (!runningRef.current) dialogStore.set(null) }, [])
  const confirm = useCallback((): void => {
    if (runningRef.current) return
    runningRef.current = true
    setRunning('rewind')
    setFailure(undefined)
    const kept = [...keepRef.current]
    void runRewind(env.ctx, sessionId, target, undefined, kept, keepGitRef.current).then((outcome: RewindOutcome) => {
      runningRef.current = false
      setRunning(false)
      env.report({ type: 'rewind', via: 'dialog', sessionId, seq, kept, ...outcome })
      rewindsSeen.set(n => n + 1)
      if (outcome.ok) dialogStore.set(null)
      else setFailure(t('result.failed', { message: outcome.message }))
    })
  }, [env, sessionId, seq, target, t])
  const fork = useCallback((): void => {
    if (runningRef.current) return
    runningRef.current = true
    setRunning('fork')
    setFailure(undefined)
    const kept = [...keepRef.current]
    void runFork(env.ctx, sessionId, target, kept).then((outcome) => {
      runningRef.current = false
      setRunning(false)
      env.report({ type: 'fork', via: 'dialog', sessionId, seq, kept, ...outcome })
      rewindsSeen.set(n => n + 1)
      if (outcome.ok) dialogStore.set(null)
      else setFailure(t('result.forkFailed', { message: outcome.message }))
    })
  }, [env, sessionId, seq, target, t])

  useEffect(() => {
    const onKey = (event: KeyboardEvent): void => {
      if (event.key === 'Escape') { event.preventDefault(); event.stopPropagation(); close() }
      else if (event.key === 'Enter' && (event.metaKey || event.ctrlKey)) { event.preventDefault(); event.stopPropagation(); confirm() }
      else if (event.key === 'Tab') {
        // keep the focus inside the modal dialog
        const box = dialogRef.current
        if (box === null) return
        const items = [...box.querySelectorAll<HTMLElement>('button:not([disabled]), [href], input, textarea, [tabindex]:not([tabindex="-1"])')]
        if (items.length === 0) return
        const first = items[0]!
        const last = items[items.length - 1]!
        if (event.shiftKey && (document.activeElement === first || !box.contains(document.activeElement))) { event.preventDefault(); last.focus() }
        else if (!event.shiftKey && (document.activeElement === last || !box.contains(document.activeElement))) { event.preventDefault(); first.focus() }
      }
    }
    document.addEventListener('keydown', onKey, true)
    return () => { document.removeEventListener('keydown', onKey, true) }
  }, [close, confirm])

  return (
    <div className="dshpr-backdrop" onMouseDown={(e) => { if (e.target === e.currentTarget) close() }}>
      <div ref={dialogRef} className="dshpr-dialog" role="dialog" aria-modal="true" aria-labelledby="dshpr-dialog-title" data-testid="dsh-prompt-rewind-dialog" data-seq={seq}>
        <h2 id="dshpr-dialog-title" className="dshpr-title">{t('dialog.title')}</h2>
        <p className="dshpr-body">{t('dialog.body')}</p>
        {text !== '' && <blockquote className="dshpr-quote" aria-label={t('dialog.message')}>{text.length > 400 ? `${text.slice(0, 399)}…` : text}</blockquote>}
        <Impact t={t} state={preview} sessionId={sessionId} seq={seq} keep={keep} setKeep={setKeep} />
        {preview.status === 'ready' && preview.preview.git !== undefined && <GitImpact t={t} git={preview.preview.git} keepGit={keepGit} setKeepGit={setKeepGit} />}
        {failure !== undefined && <p className="dshpr-error" role="alert" data-testid="dsh-prompt-rewind-failure">{failure}</p>}
        <p className="dshpr-muted" data-testid="dsh-prompt-rewind-fork-hint">{t('dialog.forkHint')}</p>
        <p className="dshpr-hint">{t('dialog.hint')}</p>
        <div className="dshpr-actions">
          <button ref={cancelRef} type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-cancel" onClick={close} disabled={running !== false}>{t('dialog.cancel')}</button>
          <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-fork" onClick={fork} disabled={running !== false}>
            {running === 'fork' ? t('dialog.forking') : t('dialog.fork')}
          </button>
          <button type="button" className="dshpr-btn dshpr-primary" data-testid="dsh-prompt-rewind-confirm" onClick={confirm} disabled={running !== false}>
            {running === 'rewind' ? t('dialog.running') : t('dialog.confirm')}
          </button>
        </div>
      </div>
    </div>
  )
}

/**
 * What the rewind does to the workspace's git repository (`HEAD: detached at v2.40.0 →
 * agent-work @ 3fce3b5; …`, a refusal while a rebase or merge is in progress), and the box that
 * keeps git as it is (the files alone come back).
 */
function GitImpact({ t, git, keepGit, setKeepGit }: { t: T; git: NonNullable<Preview['git']>; keepGit: boolean; setKeepGit: (keep: boolean) => void }): ReactNode {
  if (git.refusal == null && !git.changes && git.flagged.length === 0) return null
  return (
    <div className="dshpr-git" data-testid="dsh-prompt-rewind-git">
      {git.refusal != null
        ? <p className="dshpr-warn" role="alert" data-testid="dsh-prompt-rewind-git-refusal">{escapeControl(git.refusal)}</p>
        : <p data-testid="dsh-prompt-rewind-git-summary">{t('dialog.git', { summary: escapeControl(git.summary) })}</p>}
      <label className="dshpr-row">
        <input type="checkbox" data-testid="dsh-prompt-rewind-keep-git" checked={keepGit} onChange={(e) => { setKeepGit(e.target.checked) }} />
        {' '}{t('dialog.keepGit')}
      </label>
    </div>
  )
}

function PathList({ paths, testid }: { paths: readonly string[]; testid: string }): ReactNode {
  return <ul className="dshpr-paths" data-testid={testid}>{paths.map(p => <li key={p}><code>{showPath(p)}</code></li>)}</ul>
}

/** Longest list of not-covered paths the dialog shows (the rest is counted). */
const LIST_CAP = 50

interface Selection {
  readonly sessionId: string
  readonly seq: number
  readonly keep: ReadonlySet<string>
  readonly setKeep: (update: (keep: ReadonlySet<string>) => ReadonlySet<string>) => void
}

function Impact({ t, state, ...selection }: { t: T; state: PreviewState } & Selection): ReactNode {
  if (state.status === 'loading') return <p className="dshpr-muted" data-testid="dsh-prompt-rewind-impact-loading">{t('dialog.loading')}</p>
  if (state.status === 'error') return <p className="dshpr-warn" data-testid="dsh-prompt-rewind-impact-error">{t('dialog.previewFailed', { message: state.message })}</p>
  const p = state.preview
  const byAction = (action: PreviewFile['action']): PreviewFile[] => p.files.filter(f => f.action === action)
  const writes = byAction('write')
  const creates = byAction('create')
  const deletes = byAction('delete')
  const outside = p.outside ?? []
  // Changed while a command of another conversation was still running: that command's, left as they are.
  const inFlight = p.inFlight ?? []
  const notCovered = p.notCovered ?? []
  // Files the restore cannot read (a file it may not open, a directory it may not list): left as
  // they are and reported as failed; warned about here, before the rewind runs.
  const unreadable = unreadableRows(p)
  // Files whose earlier content the git repository no longer has: the rewind is refused unless
  // they are kept as they are (`rewind/git-object-gone`); warned about here, before it runs.
  const gone = gitObjectGoneRows(p)
  const foreign = p.files.filter(f => f.origin === 'outside' || f.origin === 'in-flight' || f.origin === 'other-session').map(f => f.path)
  const { keep, setKeep } = selection
  const chosen = p.files.length - p.files.filter(f => keep.has(f.path)).length
  return (
    <div className="dshpr-impact" data-testid="dsh-prompt-rewind-impact">
      {p.backupOff && <p className="dshpr-warn" data-testid="dsh-prompt-rewind-backup-off">{t('dialog.backupOff')}</p>}
      {p.storeUnavailable !== undefined && <p className="dshpr-warn" data-testid="dsh-prompt-rewind-store-unavailable">{t('dialog.storeUnavailable', { reason: p.storeUnavailable })}</p>}
      {p.files.length === 0 && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-no-files">{t('dialog.noFiles')}</p>}
      {unreadable.length > 0 && <div className="dshpr-warn" role="alert" data-testid="dsh-prompt-rewind-unreadable"><h3 className="dshpr-sub dshpr-warn">{t('dialog.unreadable', { count: unreadable.length })}</h3>
        <ul className="dshpr-paths">{unreadable.slice(0, LIST_CAP).map(u => <li key={u.key}><code>{u.path}</code> — {u.message}</li>)}{unreadable.length > LIST_CAP && <li className="dshpr-muted">{t('dialog.more', { count: unreadable.length - LIST_CAP })}</li>}</ul></div>}
      {gone.length > 0 && <div className="dshpr-warn" role="alert" data-testid="dsh-prompt-rewind-git-object-gone"><h3 className="dshpr-sub dshpr-warn">{t('dialog.gitObjectGone', { count: gone.length })}</h3>
        <ul className="dshpr-paths">{gone.slice(0, LIST_CAP).map(u => <li key={u.key}><code>{u.path}</code> — {u.message}</li>)}{gone.length > LIST_CAP && <li className="dshpr-muted">{t('dialog.more', { count: gone.length - LIST_CAP })}</li>}</ul></div>}
      {p.files.length > 0 && (
        <div className="dshpr-row dshpr-choice">
          <span className="dshpr-muted" data-testid="dsh-prompt-rewind-chosen" data-chosen={chosen} data-total={p.files.length}>{t('dialog.chosen', { chosen, total: p.files.length })}</span>
          {foreign.length > 0 && (
            <button type="button" className="dshpr-btn dshpr-small" data-testid="dsh-prompt-rewind-keep-outside" onClick={() => setKeep(k => new Set([...k, ...foreign]))}>
              {t('dialog.keepOutside', { count: foreign.length })}
            </button>
          )}
        </div>
      )}
      {writes.length > 0 && <><h3 className="dshpr-sub">{t('dialog.write', { count: writes.length })}</h3><FileRows t={t} files={writes} testid="dsh-prompt-rewind-writes" {...selection} /></>}
      {creates.length > 0 && <><h3 className="dshpr-sub">{t('dialog.create', { count: creates.length })}</h3><FileRows t={t} files={creates} testid="dsh-prompt-rewind-creates" {...selection} /></>}
      {deletes.length > 0 && <><h3 className="dshpr-sub">{t('dialog.delete', { count: deletes.length })}</h3><FileRows t={t} files={deletes} testid="dsh-prompt-rewind-deletes" {...selection} /></>}
      {p.uncovered.length > 0 && <><h3 className="dshpr-sub dshpr-warn">{t('dialog.uncovered', { count: p.uncovered.length })}</h3><PathList paths={p.uncovered} testid="dsh-prompt-rewind-uncovered" /></>}
      {p.skipped.length > 0 && <><h3 className="dshpr-sub">{t('dialog.skipped', { count: p.skipped.length })}</h3>
        <ul className="dshpr-paths" data-testid="dsh-prompt-rewind-skipped">{p.skipped.map(s => <li key={s.path}><code>{showPath(s.path)}</code> — {escapeControl(s.reason)}</li>)}</ul></>}
      {outside.length > 0 && <><h3 className="dshpr-sub">{t('dialog.outside', { count: outside.length })}</h3><PathList paths={outside} testid="dsh-prompt-rewind-outside" /></>}
      {inFlight.length > 0 && <><h3 className="dshpr-sub">{t('dialog.inFlight', { count: inFlight.length })}</h3><PathList paths={inFlight} testid="dsh-prompt-rewind-in-flight" /></>}
      {notCovered.length > 0 && <><h3 className="dshpr-sub dshpr-warn">{t('dialog.notCovered', { count: notCovered.length })}</h3>
        <ul className="dshpr-paths" data-testid="dsh-prompt-rewind-not-covered">{notCovered.slice(0, LIST_CAP).map(s => <li key={s.path}><code>{showPath(s.path)}</code> — {escapeControl(s.reason)}</li>)}{notCovered.length > LIST_CAP && <li className="dshpr-muted">{t('dialog.more', { count: notCovered.length - LIST_CAP })}</li>}</ul></>}
    </div>
  )
}

/** One row per planned file: a checkbox (checked = restored), `+/−` counts, who changed it, and its diff on demand. */
function FileRows({ t, files, testid, ...selection }: { t: T; files: readonly PreviewFile[]; testid: string } & Selection): ReactNode {
  return <ul className="dshpr-files" data-testid={testid}>{files.map(f => <FileRow key={f.path} t={t} file={f} {...selection} />)}</ul>
}

function FileRow({ t, file, sessionId, seq, keep, setKeep }: { t: T; file: PreviewFile } & Selection): ReactNode {
  const [open, setOpen] = useState(false)
  const checked = !keep.has(file.path)
  const toggle = (on: boolean): void => setKeep((k) => {
    const next = new Set(k)
    if (on) next.delete(file.path)
    else next.add(file.path)
    return next
  })
  const origin = file.origin ?? 'agent'
  const diffId = `dshpr-diff-${seq}-${encodeURIComponent(file.path)}`
  return (
    <li className="dshpr-file" data-testid="dsh-prompt-rewind-file" data-path={file.path} data-action={file.action} data-origin={origin} data-checked={checked}>
      <div className="dshpr-file-row">
        <span className="dshpr-file-label">
          <input type="checkbox" data-testid="dsh-prompt-rewind-file-check" checked={checked} onChange={e => toggle(e.currentTarget.checked)} aria-label={t('dialog.restoreFile', { path: showPath(file.path) })} />
          {/* The name opens (and closes) the file's diff, as the Diff button does. */}
          <button type="button" className="dshpr-file-name" data-testid="dsh-prompt-rewind-file-name" aria-expanded={open} aria-controls={diffId} title={open ? t('dialog.hideDiff') : t('dialog.showDiff')} onClick={() => setOpen(o => !o)}>
            {/* A name that is not UTF-8 shows its bytes and spelling: names alike are told apart. */}
            <code>{showPath(file.path)}</code>
          </button>
        </span>
        {file.added != null && file.removed != null && (
          <span className="dshpr-counts" data-testid="dsh-prompt-rewind-file-counts"><span className="dshpr-add">+{file.added}</span> <span className="dshpr-del">−{file.removed}</span></span>
        )}
        {origin !== 'agent' && (
          <span className="dshpr-origin" data-testid="dsh-prompt-rewind-file-origin" title={t(origin === 'outside' ? 'dialog.originOutsideHint' : origin === 'in-flight' ? 'dialog.originInFlightHint' : 'dialog.originSessionHint')}>
            {origin === 'outside' ? t('dialog.originOutside') : origin === 'in-flight' ? t('dialog.originInFlight') : t('dialog.originSession', { session: shortId(file.originSession ?? '') })}
          </span>
        )}
        <button type="button" className="dshpr-btn dshpr-small" data-testid="dsh-prompt-rewind-file-diff-toggle" aria-expanded={open} aria-controls={diffId} onClick={() => setOpen(o => !o)}>
          {open ? t('dialog.hideDiff') : t('dialog.showDiff')}
        </button>
      </div>
      {!checked && <div className="dshpr-muted dshpr-kept" data-testid="dsh-prompt-rewind-file-kept">{t('dialog.kept')}</div>}
      {open && <DiffView t={t} id={diffId} sessionId={sessionId} seq={seq} path={file.path} />}
    </li>
  )
}

function shortId(id: string): string {
  const bare = id.replace(/^session-/, '')
  return bare.length > 8 ? bare.slice(0, 8) : bare
}

type DiffState = { readonly status: 'loading' } | { readonly status: 'ready'; readonly diff: FileDiff } | { readonly status: 'error'; readonly message: string }

/** A file's diff, loaded when first shown: unified lines, or each side summarized. */
function DiffView({ t, id, sessionId, seq, path }: { t: T; id: string; sessionId: string; seq: number; path: string }): ReactNode {
  const [state, setState] = useState<DiffState>({ status: 'loading' })
  useEffect(() => {
    let live = true
    rpc('diff', sessionId, { seq, path }).then(
      (diff) => { if (live) setState({ status: 'ready', diff }) },
      (error: Error) => { if (live) setState({ status: 'error', message: error.message }) },
    )
    return () => { live = false }
  }, [sessionId, seq, path])
  if (state.status === 'loading') return <p id={id} className="dshpr-muted" data-testid="dsh-prompt-rewind-diff-loading">{t('dialog.diffLoading')}</p>
  if (state.status === 'error') return <p id={id} className="dshpr-warn" data-testid="dsh-prompt-rewind-diff-error">{t('dialog.diffFailed', { message: state.message })}</p>
  const d = state.diff
  if (d.unified == null) {
    return (
      <div id={id} className="dshpr-diff-summary" data-testid="dsh-prompt-rewind-diff-summary">
        <div>{t('dialog.diffNow')}: {sideText(t, d.now)}</div>
        <div>{t('dialog.diffThen')}: {sideText(t, d.then)}</div>
      </div>
    )
  }
  const lines = d.unified.split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  return (
    <div id={id}>
      <pre className="dshpr-diff" data-testid="dsh-prompt-rewind-diff" tabIndex={0} aria-label={t('dialog.diffLabel', { path })}>
        {lines.length === 0 ? <span className="dshpr-muted">{t('dialog.diffEmpty')}</span> : lines.map((line, i) => (
          <span key={i} className={`dshpr-line${line.startsWith('+') ? ' dshpr-line-add' : line.startsWith('-') ? ' dshpr-line-del' : line.startsWith('@@') ? ' dshpr-line-hunk' : ''}`}>{line === '' ? ' ' : escapeControl(line)}</span>
        ))}
      </pre>
      {d.truncated && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-diff-truncated">{t('dialog.diffTruncated')}</p>}
    </div>
  )
}

function sideText(t: T, side: DiffSide): string {
  const size = side.size != null ? formatBytes(side.size, 'short') : ''
  const sha = side.sha256 != null ? ` · sha256 ${side.sha256.slice(0, 12)}` : ''
  switch (side.state) {
    case 'absent': return t('dialog.sideAbsent')
    case 'text': return t('dialog.sideText', { size, lines: side.lines ?? 0 })
    case 'binary': return `${t('dialog.sideBinary', { size })}${sha}`
    case 'too-large': return t('dialog.sideTooLarge', { size })
    case 'too-many-lines': return t('dialog.sideTooManyLines', { size, lines: side.lines ?? 0 })
    case 'not-regular': return t('dialog.sideNotRegular')
    case 'unreadable': return t('dialog.sideUnreadable', { message: escapeControl(side.message ?? '') })
    case 'missing-backup': return `${t('dialog.sideMissingBackup')}${sha}`
    case 'corrupt-backup': return `${t('dialog.sideCorruptBackup')}${sha}`
  }
}

/* ------------------------------------------------------------ settings */

function useSessionId(env: Env): string | undefined {
  const subscribe = useCallback((fn: () => void): (() => void) => {
    const offSlot = slotSession.subscribe(fn)
    let offList = (): void => {}
    try { offList = sessionsOf(env.ctx)?.list.subscribe(fn) ?? offList } catch { /* no session list */ }
    return () => { offSlot(); offList() }
  }, [env])
  return useSyncExternalStore(subscribe, () => currentSessionId(env.ctx))
}

/** The configuration card (same component on both pages, one shared model). */
export function ConfigCard({ env, site }: { env: Env; site: 'history' | 'plugins' | 'plugins-item' }): ReactNode {
  const t = useT(env)
  const sessionId = useSessionId(env)
  const state = useSyncExternalStore(env.settings.store.subscribe, env.settings.store.getSnapshot)
  useEffect(() => { if (sessionId !== undefined) void env.settings.load(sessionId) }, [env, sessionId])
  const d = state.draft
  const dirty = d !== undefined && state.value !== undefined && JSON.stringify(d) !== JSON.stringify(state.value)
  const readOnly = state.value?.persistent === false
  return (
    <section className="dshpr-card" data-testid={`dsh-prompt-rewind-config-${site}`} aria-label={t('config.title')}>
      <h3 className="dshpr-card-title">{t('config.title')}</h3>
      {sessionId === undefined && <p className="dshpr-muted">{t('settings.noSession')}</p>}
      {state.status === 'error' && <p className="dshpr-error">{t('config.loadFailed', { message: state.error ?? '' })}</p>}
      {d === undefined && state.status === 'loading' && <p className="dshpr-muted">{t('settings.loading')}</p>}
      {readOnly && <p className="dshpr-warn" data-testid="dsh-prompt-rewind-read-only">{t('config.readOnly')}</p>}
      {d !== undefined && (
        <fieldset className="dshpr-form" disabled={readOnly}>
          <label className="dshpr-field">
            <input type="checkbox" data-testid="dsh-prompt-rewind-backups" checked={d.backups} onChange={e => env.settings.edit({ backups: e.currentTarget.checked })} />
            <span><strong>{t('config.backups')}</strong> — {d.backups ? t('config.on') : t('config.off')}<br /><small className="dshpr-muted">{t('config.backupsHint')} {t('config.maxFileBytes', { size: formatBytes(d.maxFileBytes, 'short') })}</small></span>
          </label>
          {d.trackAll !== undefined && <label className="dshpr-field">
            <input type="checkbox" data-testid="dsh-prompt-rewind-track-all" checked={d.trackAll} disabled={!d.backups} onChange={e => env.settings.edit({ trackAll: e.currentTarget.checked })} />
            <span><strong>{t('config.trackAll')}</strong> — {d.trackAll ? t('config.on') : t('config.off')}<br /><small className="dshpr-muted">{t('config.trackAllHint')}</small></span>
          </label>}
          <label className="dshpr-field">
            <input type="checkbox" data-testid="dsh-prompt-rewind-cleanup" checked={d.cleanup.enabled} onChange={e => env.settings.edit({ cleanup: { enabled: e.currentTarget.checked } })} />
            <span><strong>{t('config.cleanup')}</strong> — {d.cleanup.enabled ? t('config.on') : t('config.off')}<br /><small className="dshpr-muted">{t('config.cleanupHint')}</small></span>
          </label>
          <label className="dshpr-field dshpr-number">
            <span>{t('config.maxAgeDays')}</span>
            <input type="number" min={1} step={1} data-testid="dsh-prompt-rewind-max-age" value={d.cleanup.maxAgeDays}
              onChange={e => { const n = Number(e.currentTarget.value); if (Number.isSafeInteger(n) && n >= 1) env.settings.edit({ cleanup: { maxAgeDays: n } }) }} />
          </label>
          {d.cleanup.maxSizeBytes !== undefined && <label className="dshpr-field dshpr-number">
            <span>{t('config.maxSizeMiB')}<br /><small className="dshpr-muted">{t('config.maxSizeHint')}</small></span>
            <input type="number" min={0} step={1} data-testid="dsh-prompt-rewind-max-size" value={Math.round(d.cleanup.maxSizeBytes / MIB)}
              onChange={e => { const n = Number(e.currentTarget.value); if (Number.isSafeInteger(n) && n >= 0) env.settings.edit({ cleanup: { maxSizeBytes: n * MIB } }) }} />
          </label>}
          <label className="dshpr-field dshpr-number">
            <span>{t('config.historyLimit')}</span>
            <input type="number" min={1} step={1} data-testid="dsh-prompt-rewind-history-limit" value={d.historyLimit}
              onChange={e => { const n = Number(e.currentTarget.value); if (Number.isSafeInteger(n) && n >= 1) env.settings.edit({ historyLimit: n }) }} />
          </label>
          <div className="dshpr-row">
            <button type="button" className="dshpr-btn dshpr-primary" data-testid="dsh-prompt-rewind-save" disabled={!dirty || state.saving || sessionId === undefined}
              onClick={() => { if (sessionId !== undefined) void env.settings.save(sessionId) }}>
              {state.saving ? t('config.saving') : t('config.save')}
            </button>
            {state.message !== undefined && <span className={state.message.kind === 'ok' ? 'dshpr-ok' : 'dshpr-error'} data-testid="dsh-prompt-rewind-save-status">{state.message.kind === 'ok' ? t('config.saved') : t('config.failed', { message: state.message.detail })}</span>}
          </div>
        </fieldset>
      )}
    </section>
  )
}

const MIB = 1024 * 1024

/** How much the backups take: this workspace, all workspaces, the biggest sessions, the quota. */
function StorageView({ t, tag, storage }: { t: T; tag: string; storage: Load<Storage> | undefined }): ReactNode {
  if (storage === undefined) return null
  if (storage.status === 'loading') return <p className="dshpr-muted">{t('settings.loading')}</p>
  if (storage.status === 'error') return <p className="dshpr-error" data-testid="dsh-prompt-rewind-storage-error">{t('storage.loadFailed', { message: storage.message })}</p>
  const s = storage.value
  const size = (n: number): string => (n === 0 ? '0 B' : formatBytes(n, 'short'))
  const last = s.lastSweep
  return (
    <section className="dshpr-card" data-testid="dsh-prompt-rewind-storage" aria-label={t('storage.title')}>
      <h3 className="dshpr-card-title">{t('storage.title')}</h3>
      <p data-testid="dsh-prompt-rewind-storage-workspace" data-bytes={s.workspaceBytes}>{t('storage.workspace', { size: size(s.workspaceBytes), n: s.workspaceSessions })}</p>
      {s.workspaceSharedBytes > 0 && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-storage-shared" data-bytes={s.workspaceSharedBytes}>{t('storage.shared', { size: size(s.workspaceSharedBytes) })}</p>}
      <p data-testid="dsh-prompt-rewind-storage-all" data-bytes={s.totalBytes}>{t('storage.all', { size: size(s.totalBytes), n: s.sessions })}</p>
      {typeof s.ratio === 'number' && s.logicalBytes > 0 && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-storage-disk" data-disk={s.diskBytes} data-logical={s.logicalBytes}>{t('storage.disk', { disk: size(s.diskBytes), logical: size(s.logicalBytes), ratio: s.ratio.toFixed(2) })}</p>}
      <p data-testid="dsh-prompt-rewind-storage-quota">
        {s.quota.maxSizeBytes === 0 ? t('storage.quotaNone') : t('storage.quota', { size: size(s.quota.maxSizeBytes) })}
        {s.quota.maxSizeBytes !== 0 && !s.quota.enabled && <> <span className="dshpr-muted">{t('storage.quotaInactive')}</span></>}
      </p>
      <p className="dshpr-muted" data-testid="dsh-prompt-rewind-storage-last">
        {last === null ? t('storage.neverSwept') : t('storage.lastSweep', { time: formatTime(last.at, tag), size: size(last.bytes + (last.quota?.freed ?? 0)), age: last.removed, quota: last.quota?.removed ?? 0 })}
      </p>
      {s.lastQuota != null && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-storage-last-quota">{t('storage.lastQuota', { n: s.lastQuota.sessions.length, time: formatTime(s.lastQuota.at, tag), size: size(s.lastQuota.freed) })}</p>}
      {s.problems > 0 && <p className="dshpr-warn">{t('storage.lowerBound', { n: s.problems })}</p>}
      {s.biggest.length > 0 && <>
        <h4 className="dshpr-card-title">{t('storage.biggest')}</h4>
        <ol className="dshpr-entries" data-testid="dsh-prompt-rewind-storage-biggest">
          {s.biggest.map(b => (
            <li key={b.sessionId} data-testid="dsh-prompt-rewind-storage-session" data-session-id={b.sessionId} data-bytes={b.bytes}>
              <code>{b.sessionId}</code> — {t('storage.session', { size: size(b.bytes), time: formatTime(b.lastActivity, tag) })}
              {b.inWorkspace && <span className="dshpr-muted"> ({t('storage.here')})</span>}
            </li>
          ))}
        </ol>
      </>}
    </section>
  )
}

type Load<V> = { readonly status: 'loading' } | { readonly status: 'ready'; readonly value: V } | { readonly status: 'error'; readonly message: string }

function useRpc<V>(sessionId: string | undefined, call: (sessionId: string) => Promise<V>, version: number): Load<V> | undefined {
  const [state, setState] = useState<Load<V> | undefined>(undefined)
  useEffect(() => {
    if (sessionId === undefined) { setState(undefined); return }
    let live = true
    setState(prev => (prev?.status === 'ready' ? prev : { status: 'loading' }))
    call(sessionId).then(value => { if (live) setState({ status: 'ready', value }) }, (error: Error) => { if (live) setState({ status: 'error', message: error.message }) })
    return () => { live = false }
  }, [sessionId, version])
  return state
}

/** Settings → Rewind history. */
export function HistorySection({ env }: { env: Env }): ReactNode {
  const t = useT(env)
  const tag = useLocaleTag(env)
  const sessionId = useSessionId(env)
  const [version, setVersion] = useState(0)
  const history = useRpc<History>(sessionId, id => rpc('history', id, {}), version)
  const caps = useRpc<Caps>(sessionId, id => rpc('caps', id, {}), version)
  const settingsState = useSyncExternalStore(env.settings.store.subscribe, env.settings.store.getSnapshot)
  // Reloaded with the history and whenever the saved settings change (a new quota shows at once).
  const savedSettings = JSON.stringify(settingsState.value ?? null)
  const [storageVersion, setStorageVersion] = useState(0)
  useEffect(() => { setStorageVersion(v => v + 1) }, [savedSettings, version])
  const storage = useRpc<Storage>(sessionId, id => rpc('storage', id, {}), storageVersion)
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string; paths?: string[] } | undefined>(undefined)
  const [exported, setExported] = useState<string | undefined>(undefined)
  const [confirmClear, setConfirmClear] = useState(false)
  const [busy, setBusy] = useState<string | undefined>(undefined)
  const reload = (): void => { setVersion(v => v + 1) }

  const entries = history?.status === 'ready' ? history.value.entries : []
  const undoable = useMemo(() => undoableEntries(entries, sessionId), [entries, sessionId])
  // Files changed since a rewind, per entry: the user picks keep / take for each before the undo runs.
  const [choosing, setChoosing] = useState<{ opId: string; paths: string[]; take: Set<string>; how: 'undo' | 'redo' } | undefined>(undefined)

  const open = async (id: string): Promise<void> => {
    const opened = await openSession(env.ctx, id)
    env.report({ type: 'open-session', sessionId: id, opened })
  }
  const undo = async (entry: HistoryEntry, choices?: UndoChoices, how: 'undo' | 'redo' = 'undo'): Promise<void> => {
    if (sessionId === undefined) return
    setBusy(entry.opId)
    setNotice(undefined)
    try {
      const r = await rpc(how, sessionId, { opId: entry.opId, ...(choices !== undefined ? { choices } : {}) })
      setChoosing(undefined)
      const kept = r.kept?.length ?? 0
      setNotice(r.kind === 'ok'
        ? { kind: 'ok', text: how === 'redo' ? t('settings.redoOk', { restored: r.restored.length, deleted: r.deleted.length }) : `${t('settings.undoOk', { restored: r.restored.length, deleted: r.deleted.length })}${kept > 0 ? ` ${t('settings.undoKept', { kept })}` : ''}${r.conversation?.created === true ? ` ${t('settings.undoSession')}` : ''}` }
        : { kind: 'error', text: t('settings.undoPartial', { failed: r.failed.length }), paths: r.failed.map(f => `${f.path}: ${f.message}`) })
      env.report({ type: how, opId: entry.opId, result: r })
      // The conversation as it was before the rewind: open it (a new session, or a fork's parent).
      if (r.conversation != null && r.conversation.sessionId !== sessionId) await open(r.conversation.sessionId)
    } catch (error) {
      const paths = stalePaths(error)
      if (paths.length > 0) {
        setChoosing({ opId: entry.opId, paths, take: new Set(), how })
        setNotice({ kind: 'error', text: t('settings.staleUndo'), paths })
      } else {
        setNotice({ kind: 'error', text: t('settings.undoRefused', { message: (error as Error).message }) })
      }
      env.report({ type: 'undo-refused', opId: entry.opId, code: (error as { code?: string }).code, paths })
    } finally {
      setBusy(undefined)
      reload()
    }
  }
  const exportJson = async (): Promise<void> => {
    if (history?.status !== 'ready') return
    const json = JSON.stringify(history.value, null, 2)
    setExported(undefined)
    try {
      await navigator.clipboard.writeText(json)
      setNotice({ kind: 'ok', text: t('settings.exported', { count: history.value.entries.length }) })
    } catch {
      setNotice({ kind: 'error', text: t('settings.exportShown') })
    }
    setExported(json)
    env.report({ type: 'export', entries: history.value.entries.length })
  }
  const clear = async (): Promise<void> => {
    if (sessionId === undefined) return
    setConfirmClear(false)
    try {
      const r = await rpc('history.clear', sessionId, {})
      setNotice({ kind: 'ok', text: t('settings.cleared', { count: r.cleared }) })
    } catch (error) {
      setNotice({ kind: 'error', text: (error as Error).message })
    }
    reload()
  }

  return (
    <div className="dshpr-section" data-testid="dsh-prompt-rewind-history">
      <h2 className="dshpr-title">{t('settings.title')}</h2>
      <p className="dshpr-muted">{t('settings.intro')}</p>
      {sessionId === undefined && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-no-session">{t('settings.noSession')}</p>}
      <CapsLine t={t} caps={caps} />
      <CompatBlock t={t} sessionId={sessionId} version={version} />
      {history?.status === 'ready' && history.value.workspace !== '' && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-workspace" title={history.value.workspace}>{t('settings.workspace', { name: history.value.workspaceName ?? history.value.workspace })}</p>}
      <div className="dshpr-row">
        <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-export" disabled={history?.status !== 'ready'} onClick={() => { void exportJson() }}>{t('settings.export')}</button>
        {!confirmClear
          ? <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-clear" disabled={entries.length === 0} onClick={() => setConfirmClear(true)}>{t('settings.clear')}</button>
          : <span className="dshpr-confirm" role="alert">{t('settings.clearConfirm')}{' '}
            <button type="button" className="dshpr-btn dshpr-danger" data-testid="dsh-prompt-rewind-clear-yes" onClick={() => { void clear() }}>{t('settings.clearYes')}</button>{' '}
            <button type="button" className="dshpr-btn" onClick={() => setConfirmClear(false)}>{t('dialog.cancel')}</button></span>}
      </div>
      {notice !== undefined && (
        <div className={notice.kind === 'ok' ? 'dshpr-ok' : 'dshpr-error'} role="status" data-testid="dsh-prompt-rewind-notice">
          {notice.text}
          {notice.paths !== undefined && notice.paths.length > 0 && <PathList paths={notice.paths} testid="dsh-prompt-rewind-notice-paths" />}
        </div>
      )}
      {exported !== undefined && <textarea className="dshpr-export" readOnly value={exported} data-testid="dsh-prompt-rewind-export-json" rows={6} />}
      {history?.status === 'loading' && <p className="dshpr-muted">{t('settings.loading')}</p>}
      {history?.status === 'error' && <p className="dshpr-error">{t('settings.loadFailed', { message: history.message })}</p>}
      {history?.status === 'ready' && history.value.damaged !== undefined && <p className="dshpr-error" role="alert" data-testid="dsh-prompt-rewind-damaged">{t('settings.damaged', { dropped: history.value.damaged.dropped, detail: escapeControl(history.value.damaged.detail) })}</p>}
      {history?.status === 'ready' && entries.length === 0 && <p className="dshpr-muted" data-testid="dsh-prompt-rewind-empty">{t('settings.empty')}</p>}
      <ol className="dshpr-entries">
        {entries.map(entry => (
          <li key={entry.opId} className="dshpr-entry" data-testid="dsh-prompt-rewind-entry" data-op-id={entry.opId} data-outcome={entry.outcome}>
            <div className="dshpr-row">
              <span className={`dshpr-badge dshpr-${entry.outcome}`} data-testid="dsh-prompt-rewind-outcome">{t(`settings.outcome.${entry.outcome}`)}</span>
              {entry.targetText != null && entry.targetText !== ''
                ? <span className="dshpr-entry-target" data-testid="dsh-prompt-rewind-entry-target" title={t('settings.entryTarget', { seq: entry.targetSeq })}>{t('settings.entryText', { text: oneLine(entry.targetText) })}</span>
                : <span data-testid="dsh-prompt-rewind-entry-target">{t('settings.entryTarget', { seq: entry.targetSeq })}</span>}
              {entry.workspaceName != null && entry.workspaceName !== '' && <span className="dshpr-muted">{t('settings.entryWorkspace', { name: escapeControl(entry.workspaceName) })}</span>}
              <span className="dshpr-muted">{formatTime(entry.time, tag)}</span>
              {entry.sessionId !== sessionId && <span className="dshpr-muted">({t('settings.otherSession')})</span>}
            </div>
            <div className="dshpr-muted">{t('settings.counts', { restored: entry.restored, deleted: entry.deleted, skipped: entry.skipped, failed: entry.failed })}{(entry.kept ?? 0) > 0 && <> · <span data-testid="dsh-prompt-rewind-entry-kept">{t('settings.countKept', { kept: entry.kept ?? 0 })}</span></>}</div>
            {entry.git !== undefined && entry.git.summary !== '' && (
              <div className="dshpr-muted" data-testid="dsh-prompt-rewind-entry-git" title={entry.git.keepRefs.join('\n')}>
                {t('dialog.git', { summary: escapeControl(entry.git.summary) })}
                {entry.git.error != null && <> · <span className="dshpr-error">{escapeControl(entry.git.error)}</span></>}
              </div>
            )}
            <EntryPaths t={t} paths={entry.paths} />
            {entry.undoneAt !== undefined && <div className="dshpr-muted" data-testid="dsh-prompt-rewind-undone">{t('settings.undone', { time: formatTime(entry.undoneAt, tag) })}</div>}
            <EntryTree t={t} entry={entry} sessionId={sessionId} open={(id) => { void open(id) }} />
            {choosing?.opId === entry.opId && (
              <div className="dshpr-choose" data-testid="dsh-prompt-rewind-undo-choices">
                <div className="dshpr-muted">{t('settings.chooseIntro')}</div>
                <ul className="dshpr-files">
                  {choosing.paths.map(p => (
                    <li key={p} className="dshpr-file-row" data-testid="dsh-prompt-rewind-undo-choice" data-path={p}>
                      <code>{showPath(p)}</code>
                      <label><input type="radio" name={`keep-${entry.opId}-${p}`} data-testid="dsh-prompt-rewind-undo-keep" checked={!choosing.take.has(p)} onChange={() => setChoosing(c => c && { ...c, take: new Set([...c.take].filter(x => x !== p)) })} /> {t('settings.chooseKeep')}</label>
                      <label><input type="radio" name={`keep-${entry.opId}-${p}`} data-testid="dsh-prompt-rewind-undo-take" checked={choosing.take.has(p)} onChange={() => setChoosing(c => c && { ...c, take: new Set([...c.take, p]) })} /> {t('settings.chooseTake')}</label>
                    </li>
                  ))}
                </ul>
                <div className="dshpr-row">
                  <button type="button" className="dshpr-btn dshpr-primary" data-testid="dsh-prompt-rewind-undo-chosen" disabled={busy !== undefined} onClick={() => { void undo(entry, { take: [...choosing.take], keep: choosing.paths.filter(p => !choosing.take.has(p)) }, choosing.how) }}>{t('settings.chooseRun')}</button>
                  <button type="button" className="dshpr-btn" onClick={() => setChoosing(undefined)}>{t('dialog.cancel')}</button>
                </div>
              </div>
            )}
            {entry.redoable === true && choosing?.opId !== entry.opId && (
              <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-redo" disabled={busy !== undefined} onClick={() => { void undo(entry, undefined, 'redo') }}>
                {busy === entry.opId ? t('settings.redoing') : t('settings.redo')}
              </button>
            )}
            {undoable.has(entry.opId) && choosing?.opId !== entry.opId && (
              <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-undo" disabled={busy !== undefined} onClick={() => { void undo(entry) }}>
                {busy === entry.opId ? t('settings.undoing') : t('settings.undo')}
              </button>
            )}
          </li>
        ))}
      </ol>
      <StorageView t={t} tag={tag} storage={storage} />
      <ConfigCard env={env} site="history" />
    </div>
  )
}

/**
 * The sessions around one entry, as a small tree: the session rewound, the session a fork created,
 * and the session the conversation continues in after an undo — each openable.
 */
function EntryTree({ t, entry, sessionId, open }: { t: T; entry: HistoryEntry; sessionId: string | undefined; open: (id: string) => void }): ReactNode {
  const nodes: { key: string; label: string; id: string }[] = []
  if (entry.sessionId !== sessionId) nodes.push({ key: 'rewound', label: t('settings.treeRewound'), id: entry.sessionId })
  if (entry.fork !== undefined) nodes.push({ key: 'fork', label: t('settings.treeFork'), id: entry.fork.childSessionId })
  if (entry.undoSessionId != null && entry.undoSessionId !== '') nodes.push({ key: 'undo', label: t('settings.treeUndo'), id: entry.undoSessionId })
  if (entry.redoOf != null && entry.redoOf !== '') nodes.push({ key: 'redo', label: t('settings.treeRedo'), id: entry.sessionId })
  if (nodes.length === 0) return null
  return (
    <ul className="dshpr-tree" data-testid="dsh-prompt-rewind-entry-tree">
      {nodes.map(n => (
        <li key={n.key} data-testid={`dsh-prompt-rewind-tree-${n.key}`} data-session={n.id}>
          <span className="dshpr-muted">{n.label}</span> <code>{shortId(n.id)}</code>{' '}
          {n.id === sessionId
            ? <span className="dshpr-muted">({t('settings.treeHere')})</span>
            : <button type="button" className="dshpr-btn dshpr-small" data-testid="dsh-prompt-rewind-tree-open" onClick={() => open(n.id)}>{t('settings.treeOpen')}</button>}
        </li>
      ))}
    </ul>
  )
}

const PATH_GROUPS = [['restored', 'settings.pathsRestored'], ['deleted', 'settings.pathsDeleted'], ['kept', 'settings.pathsKept'], ['skipped', 'settings.pathsSkipped'], ['failed', 'settings.pathsFailed']] as const

function EntryPaths({ t, paths }: { t: T; paths: unknown }): ReactNode {
  const groups = PATH_GROUPS.map(([field, key]) => {
    const list = (paths as Record<string, unknown> | undefined)?.[field]
    return { key, list: Array.isArray(list) ? list.filter((p): p is string => typeof p === 'string') : [] }
  }).filter(g => g.list.length > 0)
  if (groups.length === 0) return null
  return (
    <details className="dshpr-details" data-testid="dsh-prompt-rewind-entry-paths">
      <summary>{t('settings.paths')}</summary>
      {groups.map(g => <div key={g.key}><span className="dshpr-muted">{t(g.key, { count: g.list.length })}</span><PathList paths={g.list} testid="dsh-prompt-rewind-entry-path-list" /></div>)}
    </details>
  )
}

function CapsLine({ t, caps }: { t: T; caps: Load<Caps> | undefined }): ReactNode {
  if (caps === undefined || caps.status === 'loading') return null
  if (caps.status === 'error') return <p className="dshpr-warn" data-testid="dsh-prompt-rewind-caps">{t('settings.capsFailed', { message: caps.message })}</p>
  const missing = missingCaps(caps.value as unknown as Record<string, unknown>).map(k => t(`caps.${k}`))
  return (
    <p className={missing.length > 0 ? 'dshpr-warn' : 'dshpr-muted'} data-testid="dsh-prompt-rewind-caps">
      <strong>{t('settings.caps')}:</strong> {missing.length > 0 ? t('settings.capsMissing', { list: missing.join(', ') }) : t('settings.capsAll')}
    </p>
  )
}

/**
 * The host doctor's summary (`doctor` RPC): one line when everything works on this DSH, else the
 * contracts missing or degraded with what that costs, and the faults contained; the DSH version
 * and session format in small text. A failed call leaves a short note; a host without the
 * endpoint, nothing.
 */
function CompatBlock({ t, sessionId, version }: { t: T; sessionId: string | undefined; version: number }): ReactNode {
  const [loaded, setLoaded] = useState<{ sessionId: string; state: DoctorState } | undefined>(undefined)
  useEffect(() => {
    if (sessionId === undefined) return undefined
    let live = true
    void loadDoctor(sessionId).then((state) => { if (live) setLoaded({ sessionId, state }) })
    return () => { live = false }
  }, [sessionId, version])
  const view = compatView(t, loaded !== undefined && loaded.sessionId === sessionId ? loaded.state : undefined)
  if (view === undefined) return null
  return (
    <section className="dshpr-compat" data-testid="dsh-prompt-rewind-compat" data-kind={view.kind} aria-label={view.title}>
      <div className={view.kind === 'ok' ? 'dshpr-ok' : view.kind === 'failed' ? 'dshpr-muted' : 'dshpr-warn'}>
        <strong>{view.title}:</strong> <span data-testid="dsh-prompt-rewind-compat-headline">{view.headline}</span>
      </div>
      {view.contracts.length > 0 && (
        <ul data-testid="dsh-prompt-rewind-compat-contracts">
          {view.contracts.map((c, i) => <li key={i} data-testid="dsh-prompt-rewind-compat-contract" data-name={c.name} data-status={c.status} title={c.detail}>{c.text}</li>)}
        </ul>
      )}
      {view.faultsTitle !== undefined && <>
        <div className="dshpr-muted">{view.faultsTitle}</div>
        <ul data-testid="dsh-prompt-rewind-compat-faults">
          {view.faults.map((f, i) => <li key={i} data-testid="dsh-prompt-rewind-compat-fault" data-where={f.where} data-count={f.count}>{f.text}</li>)}
        </ul>
      </>}
      {view.meta !== undefined && <small className="dshpr-muted" data-testid="dsh-prompt-rewind-compat-meta">{view.meta}</small>}
    </section>
  )
}

/** Longest message text a banner line quotes. */
const BANNER_TEXT_MAX = 80

/**
 * The words a banner names an interrupted rewind's message by: the host's `targetText` when
 * it sends one, else the message's text as the chat holds it (the rewound row stays in the
 * chat store, hidden), else nothing (the banner then names its seq).
 * @param env - plugin environment.
 * @param sessionId - session.
 * @param entry - the interrupted rewind.
 * @returns one line of text, shortened, or undefined.
 */
function targetTextOf(env: Env, sessionId: string, entry: Interrupted): string | undefined {
  let text = typeof entry.targetText === 'string' ? entry.targetText : undefined
  if (text === undefined || text.trim() === '') text = messageBySeq(readerOf(env.ctx, sessionId), entry.targetSeq)?.text
  if (text === undefined) return undefined
  const line = oneLine(text).trim()
  if (line === '') return undefined
  return line.length > BANNER_TEXT_MAX ? `${line.slice(0, BANNER_TEXT_MAX - 1)}…` : line
}

/**
 * What the banner says was interrupted.
 * @param t - translate.
 * @param entry - the interrupted rewind.
 * @param text - its message's text, when known.
 * @returns the line.
 */
function bannerWhat(t: T, entry: Interrupted, text: string | undefined): string {
  const key = entry.kind === 'undo' ? 'banner.undo' : entry.kind === 'fork' ? 'banner.fork' : 'banner.rewind'
  return text !== undefined ? t(`${key}Text`, { text }) : t(key, { seq: entry.targetSeq })
}

/**
 * The banner on a session with an interrupted rewind (a crash in the middle of one): what was
 * interrupted, and Continue (finish restoring the files) / Roll back (every file exactly as before
 * the rewind), over the `interrupted` and `restores.continue` / `restores.rollback` RPCs. The host
 * settles on its own what a restart can judge whole; only the rest is shown here.
 * @param props - the plugin environment.
 * @returns the banner, or nothing.
 */
export function InterruptedBanner({ env }: { env: Env }): ReactNode {
  const t = useT(env)
  const sessionId = useSessionId(env)
  const [found, setFound] = useState<{ sessionId: string; list: readonly Interrupted[] } | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | undefined>(undefined)
  const [tick, setTick] = useState(0)
  // A rewind run here (or seen in the session) may have left files it could not restore.
  const seen = useSyncExternalStore(rewindsSeen.subscribe, rewindsSeen.getSnapshot)
  useEffect(() => {
    if (sessionId === undefined) return undefined
    let live = true
    let timer: ReturnType<typeof setTimeout> | undefined
    const ask = (attempt: number): void => {
      rpc('interrupted', sessionId, {}).then(
        (value) => {
          if (!live) return
          setFound({ sessionId, list: value.interrupted })
          env.report({ type: 'interrupted', sessionId, opIds: value.interrupted.map(i => i.opId) })
        },
        (error: { code?: string }) => {
          if (!live) return
          // A session just opened has no live agent on the host for a moment: ask again.
          if (error.code === 'rewind/session-not-found' && attempt < 20) timer = setTimeout(() => ask(attempt + 1), 500)
          else setFound({ sessionId, list: [] })
        },
      )
    }
    ask(0)
    return () => { live = false; if (timer !== undefined) clearTimeout(timer) }
  }, [sessionId, tick, seen, env])
  useEffect(() => { setNotice(undefined) }, [sessionId])
  const list = found !== undefined && found.sessionId === sessionId ? found.list : []
  const first = list[0]
  // The chat may load after the answer: look for the message's text a few times more.
  const [, setLook] = useState(0)
  const textKnown = first === undefined || sessionId === undefined || targetTextOf(env, sessionId, first) !== undefined
  useEffect(() => {
    if (textKnown) return undefined
    let n = 0
    const timer = setInterval(() => { n += 1; setLook(n); if (n >= 20) clearInterval(timer) }, 500)
    return () => { clearInterval(timer) }
  }, [textKnown, first?.opId])
  if (sessionId === undefined || (first === undefined && notice === undefined)) return null
  const settle = async (how: 'continue' | 'rollback'): Promise<void> => {
    if (first === undefined || busy) return
    setBusy(true)
    try {
      const r = await rpc(how === 'continue' ? 'restores.continue' : 'restores.rollback', sessionId, { opId: first.opId })
      const text = targetTextOf(env, sessionId, first)
      const values = { seq: first.targetSeq, written: r.written.length, deleted: r.deleted.length, ...(text !== undefined ? { text } : {}) }
      setNotice({ kind: 'ok', text: t(`${how === 'continue' ? 'banner.continued' : 'banner.rolledBack'}${text !== undefined ? 'Text' : ''}`, values) })
      // Settled: its buttons go at once (the list asked again below may answer later).
      setFound(f => f === undefined ? f : { ...f, list: f.list.filter(i => i.opId !== first.opId) })
      env.report({ type: 'interrupted-settled', how, sessionId, opId: first.opId, outcome: r.entryOutcome, tempsRemoved: r.tempsRemoved?.length ?? 0 })
    } catch (error) {
      setNotice({ kind: 'error', text: t('banner.failed', { message: escapeControl((error as Error).message) }) })
    } finally {
      setBusy(false)
      setTick(n => n + 1)
    }
  }
  const what = first === undefined ? '' : bannerWhat(t, first, targetTextOf(env, sessionId, first))
  const files = first?.restore === undefined
    ? t('banner.noFiles')
    : first.partial === true
      ? t('banner.failedFiles', { failed: first.restore.failed ?? 0, total: first.restore.actions })
      : t('banner.files', { done: first.restore.done, total: first.restore.actions })
  return createPortal(
    <div className="dshpr-banner" role="alert" data-testid="dsh-prompt-rewind-interrupted" data-op-id={first?.opId}>
      {first !== undefined && <>
        <strong className="dshpr-banner-title">{t(first.partial === true ? 'banner.partialTitle' : 'banner.title')}</strong>
        <span data-testid="dsh-prompt-rewind-interrupted-what">{what} — {files}</span>
        <span className="dshpr-banner-actions">
          <button type="button" className="dshpr-btn dshpr-primary" data-testid="dsh-prompt-rewind-interrupted-continue" disabled={busy} onClick={() => { void settle('continue') }}>{t('banner.continue')}</button>
          {first.kind !== 'undo' && <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-interrupted-rollback" disabled={busy} onClick={() => { void settle('rollback') }}>{t('banner.rollback')}</button>}
        </span>
      </>}
      {notice !== undefined && <span className={notice.kind === 'ok' ? 'dshpr-ok' : 'dshpr-error'} data-testid="dsh-prompt-rewind-interrupted-notice">{notice.text}</span>}
      {first === undefined && <button type="button" className="dshpr-btn" data-testid="dsh-prompt-rewind-interrupted-dismiss" onClick={() => setNotice(undefined)}>{t('banner.dismiss')}</button>}
    </div>,
    document.body,
  )
}
