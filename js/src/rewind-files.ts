/**
 * The rewind's file half, as the host runs it: what changed since the last scan recorded first
 * (re-check, boundary scan), the preview, the check of a `--only` / `--keep` selection, then the
 * engine's `prepareRestore` (before anything changes) and `restoreFiles` (after the marker or
 * the child session is durable), and the history entry's end when no file was restored. The
 * rules and the order of the durable writes are the engine's.
 */
import type { Addon } from './native.ts'
import { step } from './engine.ts'
import { Codes, RewindError, toRewindError } from './errors.ts'
import type { HostAgent, HostSession } from './host.ts'
import type { ChainLink, FilesPreview, RestoreOutcome, RestoreSelection } from './ports.ts'
import { trackedCwd } from './capture.ts'
import { notCoveredOf, noteRefusal, refusedScope, scanRequest } from './scan.ts'
import { forkAncestors } from './fork.ts'
import { planRewind, targetPreview } from './marker.ts'
import type { RewindPreview, RewindReport } from './report.ts'
import { type RewindDeps, resyncObservations } from './host-steps.ts'

/**
 * What a rewind to `targetSeq` would do to the workspace's git repository (see docs/git.md); the
 * engine decides, a fork's rewind to before the fork (`ancestors`) included. `undefined` when the
 * engine cannot say (never throws: the preview goes on without it).
 */
async function gitPreview(deps: Pick<RewindDeps, 'engine' | 'state' | 'logger'>, agent: HostAgent, targetSeq: number, ancestors: ChainLink[], keepGit = false): Promise<Addon.BindingGitReport | undefined> {
  try {
    const es = await deps.engine.session(agent.session)
    if (typeof es.gitPreview !== 'function') return undefined
    return await deps.state.run(agent.session.header.id, () => step(() => es.gitPreview(targetSeq, keepGit, ancestors)))
  } catch (error) {
    deps.logger.warn('git preview of %s failed: %s', agent.session.header.id, (error as Error).message)
    return undefined
  }
}

/** What the git step of rewind `opId` (or of its undo) did, from its journal; never throws. */
export async function gitReport(es: Addon.BindingEngineSession, owner: string, opId: string): Promise<Addon.BindingGitReport | undefined> {
  try {
    if (typeof es.gitReport !== 'function') return undefined
    return (await step(() => es.gitReport(owner, opId))) ?? undefined
  } catch {
    return undefined
  }
}

/** A rewind's preview of the files and of git ({@link RewindFiles.previewOf}), or why there is none. */
export type FilesAndGit =
  | { files: FilesPreview & { notCovered: ReturnType<typeof notCoveredOf> }; git?: Addon.BindingGitReport; unavailable?: undefined }
  | { unavailable: { code: string; message: string }; files?: undefined; git?: undefined }

export const EMPTY_OUTCOME: RestoreOutcome = { written: [], deleted: [], skipped: [], failed: [], completed: true }

/** What {@link RewindFiles.prepareFiles} found: the restore to run, or why none runs. */
export interface PreparedFiles {
  request?: Addon.BindingRewindRestore
  notRestored?: { code: string; message: string }
}

/** The file half's steps of a rewind, an in-place one or a fork. */
export class RewindFiles {
  /**
   * Per session, the paths its latest pre-rewind scan found changed while a command of another
   * session of the workspace was still running (`ScanReport.inFlight`).
   */
  private readonly inFlight = new Map<string, string[]>()

  constructor(private readonly deps: RewindDeps) {}

  /**
   * Record what changed since the last scan (re-check of tracked files, boundary scan) so a plan
   * made now sees every change and who made it. Never throws; a failure is logged.
   */
  async recordPending(session: HostSession): Promise<void> {
    const cwd = trackedCwd(session)
    const files = this.deps.files()
    if (cwd === undefined || files.unavailable() !== undefined) return
    const sessionId = session.header.id
    this.inFlight.delete(sessionId)
    const settings = this.deps.settings.get()
    const anchor = this.deps.state.anchor(session)
    if (!settings.backups || anchor === undefined) return
    // Changes made to tracked files since the last message (by a shell command, an editor, …)
    // are not recorded yet: a re-check at the latest message records the state they replaced.
    try {
      const ancestors = await forkAncestors(this.deps.ctx, session.header, session)
      await this.deps.state.run(sessionId, () => files.recheck(sessionId, cwd, anchor, settings.maxFileBytes, ancestors))
    } catch (error) {
      this.deps.logger.warn('re-check of %s failed: %s', sessionId, (error as Error).message)
    }
    // Files changed since the last workspace scan are not recorded yet either: a boundary scan
    // records them (a file no tool touched is noted as changed outside the agent, left as is).
    if (!settings.trackAll) return
    try {
      const report = await this.deps.state.run(sessionId, () => files.scan(sessionId, cwd, scanRequest(settings, 'boundary', anchor)))
      noteRefusal(this.deps.state, sessionId, report)
      if ((report.inFlight ?? []).length > 0) this.inFlight.set(sessionId, report.inFlight)
    } catch (error) {
      this.deps.logger.warn('workspace scan of %s failed: %s', sessionId, (error as Error).message)
    }
  }

  /**
   * The store's preview of a rewind of `sessionId` as the rewind's report will tell it (call
   * after {@link RewindFiles.recordPending}): of the files changed outside the agent, those its
   * latest scan found changed while a command of another conversation of the workspace was still
   * running are listed apart (`inFlight`), and a planned file among them shows that origin
   * (`in-flight`) instead of `outside` — that command's own rewind brings them back.
   */
  inFlightOf(sessionId: string, preview: Addon.BindingPreview): FilesPreview {
    const moving = new Set(this.inFlight.get(sessionId) ?? [])
    if (moving.size === 0) return preview
    const inFlight = preview.outside.filter(p => moving.has(p))
    return {
      ...preview,
      files: preview.files.map(f => f.origin === 'outside' && moving.has(f.path) ? { ...f, origin: 'in-flight' as const } : f),
      outside: preview.outside.filter(p => !moving.has(p)),
      ...(inFlight.length > 0 ? { inFlight } : {}),
    }
  }

  /**
   * What a rewind of `agent`'s session to `targetSeq` would do, as the rewind will run it (the
   * preview command, the dialog's `preview` request): what changed since the last scan recorded
   * first, the store's plan through the fork chain, the changes of another conversation's running
   * command told apart ({@link RewindFiles.inFlightOf}), what the scan does not cover, and the
   * engine's git preview. `unavailable` when file restore cannot run for this session.
   */
  async previewOf(agent: HostAgent, targetSeq: number): Promise<FilesAndGit> {
    const session = agent.session
    const cwd = trackedCwd(session)
    const port = this.deps.files()
    const unavailable = cwd === undefined ? { code: 'no-cwd', message: 'the session has no working directory' } : port.unavailable()
    if (unavailable !== undefined) return { unavailable }
    const sessionId = session.header.id
    await this.recordPending(session)
    const ancestors = await forkAncestors(this.deps.ctx, session.header, session)
    const files = this.inFlightOf(sessionId, await this.deps.state.run(sessionId, () => port.preview(sessionId, cwd!, targetSeq, ancestors)))
    const git = await gitPreview(this.deps, agent, targetSeq, ancestors)
    return { files: { ...files, notCovered: notCoveredOf(this.deps.state, sessionId, files) }, ...(git !== undefined ? { git } : {}) }
  }

  /** What rewinding to `target` would do to the files, with counts and who made each change. */
  async preview(agent: HostAgent, target: string): Promise<RewindPreview> {
    const session = agent.session
    const plan = planRewind(session, target)
    const previewLine = targetPreview(session, plan.targetSeq, plan.targetText)
    const { files, git, unavailable } = await this.previewOf(agent, plan.targetSeq)
    if (unavailable !== undefined) return { targetSeq: plan.targetSeq, preview: previewLine, files: undefined, unavailable }
    return { targetSeq: plan.targetSeq, preview: previewLine, files, ...(git !== undefined ? { git } : {}) }
  }

  /**
   * Refuses, with nothing changed, a selection naming a path the restore to `targetSeq` would not
   * change (a typo never restores more than asked).
   */
  async checkSelection(session: HostSession, targetSeq: number, selection: RestoreSelection | undefined): Promise<void> {
    const filters = [...(selection?.only ?? []), ...(selection?.keep ?? [])]
    if (filters.length === 0) return
    const cwd = trackedCwd(session)
    const port = this.deps.files()
    if (cwd === undefined || port.unavailable() !== undefined) {
      throw new RewindError(Codes.badSelection, 'files cannot be chosen: file restore is unavailable for this session; nothing was changed')
    }
    const sessionId = session.header.id
    await this.recordPending(session)
    const ancestors = await forkAncestors(this.deps.ctx, session.header, session)
    // The store's own path matcher decides (`rewind/bad-selection` naming the filter).
    const es = await this.deps.engine.session(session)
    await this.deps.state.run(sessionId, () => step(() => es.checkSelection(targetSeq, selection ?? {}, ancestors)))
  }

  /**
   * The file half's first step, before the rewind changes anything: what changed since the last
   * scan recorded, then the engine's plan, checks and rescue copies (the workspace untouched).
   * Without a working directory, or with a store this build cannot use (backups off, written by a
   * newer build: known up front, the preview says so), the conversation rewinds alone and this
   * says why (`notRestored`). A store that cannot serve this rewind (a damaged record log, a
   * store that cannot keep the copies) throws: the whole rewind is refused, nothing changed.
   */
  async prepareFiles(session: HostSession, es: Addon.BindingEngineSession, targetSeq: number, opId: string, selection: RestoreSelection | undefined): Promise<PreparedFiles> {
    const cwd = trackedCwd(session)
    if (cwd === undefined) return { notRestored: { code: 'no-cwd', message: 'reasonNoCwd' } }
    const unavailable = this.deps.files().unavailable()
    if (unavailable !== undefined) return { notRestored: unavailable }
    const sessionId = session.header.id
    // What changed since the last scan is recorded first, so the restore brings it back too.
    await this.recordPending(session)
    const ancestors: ChainLink[] = await forkAncestors(this.deps.ctx, session.header, session)
    const notCovered = refusedScope(this.deps.state, sessionId)
    // `--keep-git`: the workspace's git repository is left as it is (see docs/git.md).
    const keepGit = (selection as { keepGit?: boolean } | undefined)?.keepGit === true
    const request = { targetSeq, opId, ancestors, selection, notCovered, keepGit }
    try {
      await this.deps.state.run(sessionId, () => step(() => es.prepareRestore(request)))
    } catch (error) {
      const e = toRewindError(error, Codes.restoreFailed)
      if (e.code === Codes.badSelection) throw e
      const hint = e.code === Codes.storeCorrupt ? ' (`dsh-rewind verify` names the damage; `dsh-rewind repair` keeps what is readable)' : ''
      throw new RewindError(e.code, `the files of this rewind cannot be restored: ${e.message}${hint}; nothing was changed, the conversation was not rewound`, e.details)
    }
    return { request }
  }

  /** The file half; never fails the rewind. The engine finishes the history entry with it. */
  async restoreFiles(session: HostSession, es: Addon.BindingEngineSession, targetSeq: number, opId: string, selection: RestoreSelection | undefined, prepared: PreparedFiles): Promise<{ outcome: RestoreOutcome; notRestored: { code: string; message: string } | undefined }> {
    const cwd = trackedCwd(session)
    if (prepared.notRestored !== undefined || cwd === undefined) {
      return { outcome: EMPTY_OUTCOME, notRestored: prepared.notRestored ?? { code: 'no-cwd', message: 'reasonNoCwd' } }
    }
    const sessionId = session.header.id
    try {
      const request = prepared.request ?? { targetSeq, opId, selection }
      const restored = await this.deps.state.run(sessionId, () => step(() => es.restoreFiles(request)))
      if (restored.notRecorded != null) this.deps.logger.warn('history entry for %s not finished: %s', opId, restored.notRecorded.message)
      const outcome: RestoreOutcome = { ...restored.outcome, notCovered: notCoveredOf(this.deps.state, sessionId, restored.outcome) }
      // The files another conversation's command, still running, may have changed are listed
      // apart: they are that command's, and its own rewind brings them back.
      const moving = new Set(this.inFlight.get(sessionId) ?? [])
      this.inFlight.delete(sessionId)
      const inFlight = (outcome.outside ?? []).filter(p => moving.has(p))
      if (inFlight.length > 0) {
        outcome.outside = outcome.outside!.filter(p => !moving.has(p))
        outcome.inFlight = inFlight
      }
      await resyncObservations(this.deps.ctx, session, cwd, [...outcome.written], [...outcome.deleted], this.deps.logger)
      // What happened to git, as the engine decided it (its git step, `--keep-git`, or a fork's).
      if (restored.git != null) outcome.git = restored.git
      return { outcome, notRestored: undefined }
    } catch (error) {
      const e = toRewindError(error, Codes.restoreFailed)
      this.deps.logger.warn('file restore of %s failed: %s', sessionId, e.message)
      return { outcome: { ...EMPTY_OUTCOME, completed: false }, notRestored: { code: e.code, message: e.message } }
    }
  }

  /**
   * The last step when the files were not restored (a restored rewind's entry is finished by the
   * engine with its restore): a failure here is logged; the entry stays `started` and the next
   * reconcile settles it.
   */
  async record(es: Addon.BindingEngineSession, report: RewindReport): Promise<void> {
    const why = report.filesNotRestored
    if (why === undefined) return
    try {
      await step(() => es.finishNotRestored(report.opId, why.code, why.message))
    } catch (error) {
      this.deps.logger.warn('history entry for %s not finished: %s', report.opId, (error as Error).message)
    }
  }

  async settle(es: Addon.BindingEngineSession, opId: string, outcome: 'abandoned' | 'rolled-back' | 'done'): Promise<void> {
    try {
      await step(() => es.settle(opId, outcome))
    } catch (error) {
      this.deps.logger.warn('history entry %s not settled as %s: %s', opId, outcome, (error as Error).message)
    }
  }
}
