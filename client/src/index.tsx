/**
 * dsh-prompt-rewind, browser half. Registered through DSH's client module
 * loader; React and every DSH service come from the host page.
 *
 * Surfaces, each independent of the others (a missing slot or service
 * removes that surface only):
 * - `conversation.session.header.actions`: mounts the message-scoped portals
 *   that put ↶ into every human message's action row;
 * - `shell.overlay`: the confirm dialog, and the banner of a session with an interrupted rewind;
 * - the marker Definition (`conversationEvents` on rc.8, `uiConversation.events` from
 *   0.1.2): a hidden chat node per rewind marker, from which the rows of each executed
 *   rewind are hidden (the nodes stay in the store); on a page with neither registry the
 *   markers come from the host's rewind history (`markerSeq`), and without that nothing is
 *   hidden;
 * - `commandUi`: the `/rewind` and `/undo` candidate picker;
 * - `settings.section` (id `rewind`, order 60): Rewind history + the config card;
 * - `settings.plugin.item` (key `dsh-rewind`) and `settings.plugins.tab`: the same
 *   config card on the Plugins page.
 *
 * The chat is read through `chat.ts` on either client contract (the rc.8 session face's
 * `chat`, or the `uiConversation` "chat" view). No service is a required inject: the
 * plugin starts at once and every surface waits for (or probes) what it needs, so a page
 * without some service never leaves the plugin pending; a service still missing after
 * {@link SERVICE_GRACE_MS} is named in one console warning saying what degrades.
 */
import type { ReactNode } from 'react'
import { computeHidden, freshMarkers, markerDefinition, markersFromHistory, visibleTargetSeqs, type RewindMarker } from './hidden.ts'
import { missingServices, missingWarnings } from './services.ts'
import { messageBySeq, nodesOf, ownRewindKey, ownRewinds, readerOf, refillComposer, rowsAndMarkers, runRewind, currentSessionId, service, sessionsOf, slotSession, type ChatReader, type Ctx } from './host.ts'
import { pickerRows, seqOfRow, type Candidate } from './picker.ts'
import { rpc } from './rpc.ts'
import { createLocaleStore, rewindsSeen, SettingsModel, Store } from './store.ts'
import { CSS } from './styles.ts'
import { ConfigCard, ConfirmDialog, HistorySection, InterruptedBanner, MessagePortals, type Env } from './ui.tsx'

/** Plugin name (the cordis name of the browser half). */
export const name = 'dsh-prompt-rewind'
/**
 * No required service: a required inject the page lacks would leave the plugin pending
 * with no word (later DSH clients retired some of the services used here). Every surface
 * waits for, or probes, its own services instead.
 */
export const inject: string[] = []

/** How long after start a service may still arrive before it is reported missing. */
export const SERVICE_GRACE_MS = 10_000

interface Probe {
  applied: number
  surfaces: string[]
  missing: string[]
  /** Where the chat was read from last (`session-face`, `ui-conversation`), or `none`. */
  chat?: string
  /** Where rewind markers come from: `conversationEvents`, `uiConversation.events`, `history`, or `none`. */
  markerSource?: string
  /** Console warnings given. */
  warnings: string[]
  events: Record<string, unknown>[]
  hidden: string[]
  markers: RewindMarker[]
  locale?: string
}

declare global {
  interface Window { __dshPromptRewind?: Probe }
}

function probe(): Probe {
  window.__dshPromptRewind ??= { applied: 0, surfaces: [], missing: [], warnings: [], events: [], hidden: [], markers: [] }
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

/** Where rewind markers are read from, once a registry took the marker Definition. */
const markerRegistry = new Store<'conversationEvents' | 'uiConversation.events' | undefined>(undefined)

/** Least time between two history reads for markers (pages without an event registry). */
const HISTORY_MARKERS_MS = 1500

/**
 * Keep a stylesheet hiding the rewound rows of the session on screen, and
 * refill the composer for rewinds this client did not run itself (a typed
 * `/rewind @<seq>` or `/rewind 2`): a marker that appears while its session
 * is on screen puts its target's text back, under the same rules.
 *
 * Markers come from the chat's marker nodes (the Definition registered in an event
 * registry); on a page with no registry, from the host's rewind history entries that
 * carry a `markerSeq`.
 * @param ctx - plugin context.
 * @param report - diagnostics sink.
 * @returns disposer.
 */
function followHiddenRows(ctx: Ctx, report: (event: Record<string, unknown>) => void): () => void {
  const style = document.createElement('style')
  style.id = 'dsh-prompt-rewind-hidden'
  document.head.appendChild(style)
  let sessionId: string | undefined
  let reader: ChatReader | undefined
  let offReader: (() => void) | undefined
  let frame = 0
  let disposed = false
  // A marker counts as new (a rewind that just happened) only when its target row was already on
  // screen, not hidden, in the previous pass. Markers that arrive together with their target (a
  // session opened, a page reloaded, older history paged in) never refill anything.
  let seen = new Set<number>()
  let visibleTargets = new Set<number>()
  // Markers from the host's history (pages without an event registry).
  let historyMarkers: { sessionId: string; markers: RewindMarker[] } | undefined
  let historyAt = 0
  let historyTimer: ReturnType<typeof setTimeout> | undefined
  const readHistory = (): void => {
    if (disposed || markerRegistry.getSnapshot() !== undefined || sessionId === undefined) return
    const wait = historyAt + HISTORY_MARKERS_MS - Date.now()
    if (wait > 0) {
      historyTimer ??= setTimeout(() => { historyTimer = undefined; readHistory() }, wait)
      return
    }
    historyAt = Date.now()
    const id = sessionId
    rpc('history', id, {}).then(
      (history) => {
        if (disposed || id !== sessionId) return
        historyMarkers = { sessionId: id, markers: markersFromHistory(history.entries, id) }
        schedule()
      },
      () => { /* no history: nothing hidden on a guess */ },
    )
  }
  const sync = (): void => {
    frame = 0
    const { rows, markers: nodeMarkers } = rowsAndMarkers(nodesOf(reader))
    const fromHistory = markerRegistry.getSnapshot() === undefined && historyMarkers?.sessionId === sessionId ? historyMarkers!.markers : []
    const bySeq = new Map<number, RewindMarker>()
    for (const m of [...nodeMarkers, ...fromHistory]) bySeq.set(m.markerSeq, m)
    const result = computeHidden(rows, [...bySeq.values()])
    if (sessionId !== undefined) {
      for (const marker of freshMarkers(result.applied, seen, visibleTargets)) {
        if (ownRewinds.delete(ownRewindKey(sessionId, marker.targetSeq))) continue
        const id = sessionId
        const target = messageBySeq(reader, marker.targetSeq) ?? { seq: marker.targetSeq, text: '', images: [] }
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
    p.chat = reader?.shape ?? 'none'
    p.markerSource = markerRegistry.getSnapshot() ?? (historyMarkers !== undefined ? 'history' : 'none')
    const css = keys.length === 0 ? '' : `${keys.map(k => `[data-chat-flow-key][data-chat-anchor-key="${cssEscape(k)}"]`).join(',\n')}{display:none !important}`
    if (style.textContent !== css) style.textContent = css
  }
  const schedule = (): void => { if (frame === 0 && !disposed) frame = requestAnimationFrame(sync) }
  const onChange = (): void => { schedule(); readHistory() }
  const follow = (): void => {
    const next = currentSessionId(ctx)
    // Looked up on every pass: a view may bind late, and a session may get a new face.
    const nextReader = next === undefined ? undefined : readerOf(ctx, next)
    if (next === sessionId && nextReader?.source === reader?.source) return
    offReader?.()
    if (next !== sessionId) { seen = new Set(); visibleTargets = new Set(); historyMarkers = undefined; historyAt = 0 }
    sessionId = next
    reader = nextReader
    offReader = reader?.subscribe(onChange)
    onChange()
  }
  // The session list (rc.8) and the header's session (every page) say which session is on screen;
  // a short poll covers a chat view that binds after its session is current.
  let offList = (): void => {}
  try { offList = sessionsOf(ctx)?.list.subscribe(follow) ?? offList } catch { /* no session list */ }
  const offSlot = slotSession.subscribe(follow)
  const offRegistry = markerRegistry.subscribe(onChange)
  const offSeen = rewindsSeen.subscribe(readHistory)
  const poll = setInterval(() => { if (reader === undefined) follow() }, 500)
  follow()
  return () => {
    disposed = true
    offList()
    offSlot()
    offRegistry()
    offSeen()
    clearInterval(poll)
    if (historyTimer !== undefined) clearTimeout(historyTimer)
    offReader?.()
    if (frame !== 0) cancelAnimationFrame(frame)
    style.remove()
  }
}

/**
 * Register the marker Definition in the first event registry the page offers: rc.8's
 * `conversationEvents`, or from 0.1.2 `uiConversation.events` (same Definition interface:
 * zq0929/deepseek-harness @ 5593cc250aae228449197efd2413192165e3377f
 * `packages/client/ui-conversation/README.md`, "Target packages … register with
 * `ctx.uiConversation.events.register(...)`"; `packages/client/ui-chat/tests/conversation-node-definitions.client.spec.ts`).
 * @param ctx - plugin context.
 * @param p - diagnostics probe.
 */
function registerMarkers(ctx: Ctx, p: Probe): void {
  const take = (sub: Ctx, name: 'conversationEvents' | 'uiConversation.events', registry: { register?(definition: unknown): () => void } | undefined): void => {
    if (markerRegistry.getSnapshot() !== undefined || typeof registry?.register !== 'function') return
    let off: (() => void) | undefined
    try {
      off = registry.register(markerDefinition)
    } catch (error) {
      console.warn(`[dsh-prompt-rewind] the marker definition could not be registered in ${name}: ${(error as Error)?.message ?? error}`)
      return
    }
    markerRegistry.set(name)
    p.surfaces.push('marker-definition')
    sub.effect(() => () => {
      try { off?.() } catch { /* registry already gone */ }
      if (markerRegistry.getSnapshot() === name) markerRegistry.set(undefined)
    }, `dsh-prompt-rewind: marker definition (${name})`)
  }
  ctx.inject(['conversationEvents'], (sub) => { take(sub, 'conversationEvents', service(sub, 'conversationEvents')) })
  ctx.inject(['uiConversation'], (sub) => {
    take(sub, 'uiConversation.events', service<{ events?: { register?(definition: unknown): () => void } }>(sub, 'uiConversation')?.events)
  })
}

/**
 * After the grace period, name each service still missing in one console warning with
 * what degrades, and say so when the session on screen has no chat to read.
 * @param ctx - plugin context.
 * @param p - diagnostics probe.
 */
function reportMissing(ctx: Ctx, p: Probe): void {
  const has = (name: string): boolean => service(ctx, name) !== undefined
  p.missing = missingServices(has)
  const id = currentSessionId(ctx)
  for (const text of missingWarnings({ has, markerRegistry: markerRegistry.getSnapshot(), chatReadable: id === undefined || readerOf(ctx, id) !== undefined })) {
    if (p.warnings.includes(text)) continue
    p.warnings.push(text)
    console.warn(`[dsh-prompt-rewind] ${text}`)
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
  p.missing = missingServices(name => service(ctx, name) !== undefined)
  const { store: locale, dispose: disposeLocale } = createLocaleStore(service<Ctx['locale']>(ctx, 'locale'), service<Ctx['settingsScope']>(ctx, 'settingsScope'))
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
  ctx.effect(() => {
    const timer = setTimeout(() => { reportMissing(ctx, p) }, SERVICE_GRACE_MS)
    return () => { clearTimeout(timer) }
  }, 'dsh-prompt-rewind: missing services')

  // Rewind markers → hidden nodes in each session's chat store.
  registerMarkers(ctx, p)
  ctx.effect(() => followHiddenRows(ctx, report), 'dsh-prompt-rewind: hidden rows')

  ctx.inject(['slots'], (sub) => { mountSlots(sub, env, locale, p) })
  // `/rewind` and `/undo`: a bare call opens the candidate picker.
  ctx.inject(['commandUi'], (sub) => { decorateCommands(sub, env, locale, report, p) })
}

/**
 * The slot surfaces: ↶ buttons, dialog, banner, settings pages.
 * @param ctx - a context with the slots service.
 * @param env - plugin environment.
 * @param locale - locale store.
 * @param p - diagnostics probe.
 */
function mountSlots(ctx: Ctx, env: Env, locale: Env['locale'], p: Probe): void {
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
 * The `/rewind` and `/undo` candidate pickers.
 * @param sub - a context with the command UI service.
 * @param env - plugin environment.
 * @param locale - locale store.
 * @param report - diagnostics sink.
 * @param p - diagnostics probe.
 */
function decorateCommands(sub: Ctx, env: Env, locale: Env['locale'], report: Env['report'], p: Probe): void {
  const ctx = env.ctx
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
          const target = messageBySeq(readerOf(ctx, session.sessionId), seq) ?? { seq, text: '', images: [] }
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
    const scope = sessionsOf(ctx)?.binding(sessionId)?.ctx
    if (conversation?.input !== undefined && scope !== undefined) conversation.input.for(scope).notify('error', text)
  } catch { /* no composer notice surface */ }
}
