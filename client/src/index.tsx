/**
 * dsh-prompt-rewind, browser half. Registered through DSH's client module
 * loader; React and every DSH service come from the host page.
 *
 * Surfaces, each independent of the others (a missing slot or service
 * removes that surface only):
 * - `conversation.session.header.actions`: mounts the message-scoped portals
 *   that put ↶ into every human message's action row;
 * - `shell.overlay`: the confirm dialog, and the banner of a session with an interrupted rewind;
 * - `conversationEvents`: a hidden chat node per rewind marker, from which the
 *   rows of each executed rewind are hidden (the nodes stay in the store);
 * - `commandUi`: the `/rewind` and `/undo` candidate picker;
 * - `settings.section` (id `rewind`, order 60): Rewind history + the config card;
 * - `settings.plugin.item` (key `dsh-rewind`) and `settings.plugins.tab`: the same
 *   config card on the Plugins page.
 */
import type { ReactNode } from 'react'
import { computeHidden, freshMarkers, markerOfEvent, visibleTargetSeqs, type RewindMarker } from './hidden.ts'
import { faceOf, messageBySeq, MARKER_KIND, nodesOf, ownRewindKey, ownRewinds, refillComposer, rowsAndMarkers, runRewind, currentSessionId, type Ctx, type SessionFace } from './host.ts'
import { pickerRows, seqOfRow, type Candidate } from './picker.ts'
import { rpc } from './rpc.ts'
import { createLocaleStore, rewindsSeen, SettingsModel } from './store.ts'
import { CSS } from './styles.ts'
import { ConfigCard, ConfirmDialog, HistorySection, InterruptedBanner, MessagePortals, type Env } from './ui.tsx'

/** Plugin name (the cordis name of the browser half). */
export const name = 'dsh-prompt-rewind'
/** Required services; everything else is optional and probed at run time. */
export const inject = ['slots', 'sessions', 'remote', 'remote.commands']

interface Probe {
  applied: number
  surfaces: string[]
  missing: string[]
  events: Record<string, unknown>[]
  hidden: string[]
  markers: RewindMarker[]
  locale?: string
}

declare global {
  interface Window { __dshPromptRewind?: Probe }
}

function probe(): Probe {
  window.__dshPromptRewind ??= { applied: 0, surfaces: [], missing: [], events: [], hidden: [], markers: [] }
  return window.__dshPromptRewind
}

/**
 * Escape a value for a quoted CSS attribute selector.
 * @param value - raw value.
 * @returns the escaped value.
 */
function cssEscape(value: string): string {
  return typeof window.CSS?.escape === 'function' ? window.CSS.escape(value) : value.replace(/["\\]/g, '\\$&')
}

/** The chat Definition that turns each rewind marker into a hidden node of the session's store. */
const markerDefinition = {
  kind: MARKER_KIND,
  target: 'chat',
  match: (event: { seq?: number; data?: { id?: unknown } }) => (markerOfEvent(event) === undefined ? null : { id: String(event.data?.id ?? event.seq), role: 'start' }),
  start: (_context: unknown, match: { event: unknown }) => markerOfEvent(match.event),
  update: (context: { state: unknown }) => context.state,
  buildViewNode: (context: { key: string; id: string; state?: RewindMarker; start?: { location?: unknown } }) => (context.state === undefined ? null : {
    key: context.key,
    kind: MARKER_KIND,
    id: context.id,
    target: 'chat',
    anchorSeq: context.state.markerSeq,
    location: context.start?.location ?? { kind: 'unresolved' },
    visibility: 'hidden',
    data: context.state,
  }),
}

/**
 * Keep a stylesheet hiding the rewound rows of the session on screen, and
 * refill the composer for rewinds this client did not run itself (a typed
 * `/rewind @<seq>` or `/rewind 2`): a marker that appears while its session
 * is on screen puts its target's text back, under the same rules.
 * @param ctx - plugin context.
 * @param report - diagnostics sink.
 * @returns disposer.
 */
function followHiddenRows(ctx: Ctx, report: (event: Record<string, unknown>) => void): () => void {
  const style = document.createElement('style')
  style.id = 'dsh-prompt-rewind-hidden'
  document.head.appendChild(style)
  let sessionId: string | undefined
  let face: SessionFace | undefined
  let offFace: (() => void) | undefined
  let frame = 0
  // A marker counts as new (a rewind that just happened) only when its target row was already on
  // screen, not hidden, in the previous pass. Markers that arrive together with their target (a
  // session opened, a page reloaded, older history paged in) never refill anything.
  let seen = new Set<number>()
  let visibleTargets = new Set<number>()
  const sync = (): void => {
    frame = 0
    const { rows, markers } = rowsAndMarkers(nodesOf(face))
    const result = computeHidden(rows, markers)
    if (sessionId !== undefined) {
      for (const marker of freshMarkers(result.applied, seen, visibleTargets)) {
        if (ownRewinds.delete(ownRewindKey(sessionId, marker.targetSeq))) continue
        const id = sessionId
        const target = messageBySeq(face, marker.targetSeq) ?? { seq: marker.targetSeq, text: '', images: [] }
        void refillComposer(ctx, id, target, /^\s*\/(rewind|undo)(\s.*)?$/s).then(result => {
          report({ type: 'rewind-observed', sessionId: id, seq: marker.targetSeq, markerSeq: marker.markerSeq, ...result })
          rewindsSeen.set(n => n + 1)
        })
      }
    }
    visibleTargets = visibleTargetSeqs(rows, result.hidden)
    const keys = [...result.hidden].sort()
    const p = probe()
    p.hidden = keys
    p.markers = [...result.applied]
    const css = keys.length === 0 ? '' : `${keys.map(k => `[data-chat-flow-key][data-chat-anchor-key="${cssEscape(k)}"]`).join(',\n')}{display:none !important}`
    if (style.textContent !== css) style.textContent = css
  }
  const schedule = (): void => { if (frame === 0) frame = requestAnimationFrame(sync) }
  const follow = (): void => {
    const next = currentSessionId(ctx)
    const nextFace = next === undefined ? undefined : faceOf(ctx, next)
    if (next === sessionId && nextFace === face) return
    offFace?.()
    if (next !== sessionId) { seen = new Set(); visibleTargets = new Set() }
    sessionId = next
    face = nextFace
    offFace = face?.subscribe(schedule)
    schedule()
  }
  const offList = ctx.sessions.list.subscribe(follow)
  follow()
  return () => {
    offList()
    offFace?.()
    if (frame !== 0) cancelAnimationFrame(frame)
    style.remove()
  }
}

/**
 * Client plugin body.
 * @param ctx - the browser plugin context.
 */
export function apply(ctx: Ctx): void {
  const p = probe()
  p.applied += 1
  const report = (event: Record<string, unknown>): void => {
    p.events.push({ time: Date.now(), ...event })
    if (p.events.length > 200) p.events.shift()
  }
  const optional = (key: string): unknown => {
    try { return ctx.get(key) } catch { return undefined }
  }
  for (const key of ['locale', 'commandUi', 'conversationEvents', 'conversation', 'settingsScope']) {
    if (optional(key) === undefined) p.missing.push(key)
  }
  const { store: locale, dispose: disposeLocale } = createLocaleStore(optional('locale') as Ctx['locale'], optional('settingsScope') as Ctx['settingsScope'])
  p.locale = locale.getSnapshot().locale
  ctx.effect(() => locale.subscribe(() => { p.locale = locale.getSnapshot().locale }), 'dsh-prompt-rewind: locale probe')
  ctx.effect(() => disposeLocale, 'dsh-prompt-rewind: locale')
  const env: Env = { ctx, locale, settings: new SettingsModel(), report }

  ctx.effect(() => {
    const style = document.createElement('style')
    style.id = 'dsh-prompt-rewind-style'
    style.textContent = CSS
    document.head.appendChild(style)
    return () => { style.remove() }
  }, 'dsh-prompt-rewind: stylesheet')

  // Rewind markers → hidden nodes in each session's chat store.
  ctx.inject(['conversationEvents'], (sub) => {
    sub.effect(() => sub.conversationEvents!.register(markerDefinition), 'dsh-prompt-rewind: marker definition')
    p.surfaces.push('marker-definition')
  })
  ctx.effect(() => followHiddenRows(ctx, report), 'dsh-prompt-rewind: hidden rows')

  // ↶ buttons (message-scoped portals) under the session header's action list.
  const HEADER = 'conversation.session.header.actions'
  ctx.slots.inject(HEADER, () => {
    p.surfaces.push('message-buttons')
    return ctx.slots.register({ name: HEADER, id: 'dsh-prompt-rewind', order: 950 },
      (props): ReactNode => <MessagePortals env={env} sessionId={String(props.sessionId)} />)
  })
  // The confirm dialog.
  ctx.slots.inject('shell.overlay', () => {
    p.surfaces.push('dialog')
    return ctx.slots.register({ name: 'shell.overlay', id: 'dsh-prompt-rewind-dialog', order: 950 }, (): ReactNode => <ConfirmDialog env={env} />)
  })

  // The banner of a session with an interrupted rewind: Continue / Roll back.
  ctx.slots.inject('shell.overlay', () => {
    p.surfaces.push('interrupted-banner')
    return ctx.slots.register({ name: 'shell.overlay', id: 'dsh-prompt-rewind-interrupted', order: 951 }, (): ReactNode => <InterruptedBanner env={env} />)
  })

  // `/rewind` and `/undo`: a bare call opens the candidate picker.
  ctx.inject(['commandUi'], (sub) => {
    for (const command of ['rewind', 'undo']) {
      sub.effect(() => sub.commandUi!.decorate({
        name: command,
        available: () => true,
        ui: {
          kind: 'popupSelect',
          options: async (session: { sessionId: string }) => {
            const t = locale.getSnapshot().t
            let candidates: Candidate[]
            try {
              candidates = (await rpc('candidates', session.sessionId, {})).candidates
            } catch (error) {
              throw new Error(t('picker.failed', { message: (error as Error).message }))
            }
            const rows = pickerRows(candidates, t)
            report({ type: 'picker-open', command, rows: rows.length })
            return rows
          },
          onSelect: (option: { id: string; label: string }, session: { sessionId: string }) => {
            const seq = seqOfRow(option.id)
            if (seq === undefined) return
            const target = messageBySeq(faceOf(ctx, session.sessionId), seq) ?? { seq, text: '', images: [] }
            // Not awaited: the command UI settles (and clears its command line) once this returns;
            // the refill waits for that before it touches the composer.
            void runRewind(ctx, session.sessionId, target, /^\s*\/(rewind|undo)(\s.*)?$/s).then((outcome) => {
              report({ type: 'rewind', via: `/${command}`, sessionId: session.sessionId, seq, ...outcome })
              if (!outcome.ok) notify(ctx, session.sessionId, locale.getSnapshot().t('result.failed', { message: outcome.message }))
            })
          },
        },
      }), `dsh-prompt-rewind: /${command} picker`)
    }
    p.surfaces.push('command-picker')
  })

  // Settings → Rewind history (with the config card).
  ctx.slots.inject('settings.section', () => {
    p.surfaces.push('settings-section')
    return ctx.slots.register({
      name: 'settings.section',
      id: 'rewind',
      order: 60,
      label: () => locale.getSnapshot().t('settings.nav'),
    }, (): ReactNode => <HistorySection env={env} />)
  })
  // The same config card on the Plugins page: in DSH's own "Plugin configuration" tab, keyed by the
  // host's settings namespace (shown only while the host serves that namespace) ...
  ctx.slots.inject('settings.plugin.item', () => {
    p.surfaces.push('plugins-item')
    return ctx.slots.register({ name: 'settings.plugin.item', key: 'dsh-rewind' },
      (): ReactNode => <ConfigCard env={env} site="plugins-item" />)
  })
  // ... and in a tab of its own, which is there whether or not the host has a settings service.
  ctx.slots.inject('settings.plugins.tab', () => {
    p.surfaces.push('plugins-tab')
    return ctx.slots.register({
      name: 'settings.plugins.tab',
      id: 'dsh-prompt-rewind',
      order: 60,
      label: () => locale.getSnapshot().t('plugins.tab'),
    }, (): ReactNode => <ConfigCard env={env} site="plugins" />)
  })
}

/**
 * Show a line on a session's composer (DSH's own notice surface), when the
 * conversation service is there.
 * @param ctx - plugin context.
 * @param sessionId - session.
 * @param text - message.
 */
function notify(ctx: Ctx, sessionId: string, text: string): void {
  try {
    const conversation = ctx.get('conversation') as { input?: { for(actx: unknown): { notify(level: 'info' | 'error', text: string): void } } } | undefined
    const scope = ctx.sessions.binding(sessionId)?.ctx
    if (conversation?.input !== undefined && scope !== undefined) conversation.input.for(scope).notify('error', text)
  } catch { /* no composer notice surface */ }
}
