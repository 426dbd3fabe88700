/**
 * The DSH client services this bundle touches, typed to the slice it uses,
 * and the session-level operations built on them (run a rewind, refill the
 * composer, read a session's chat nodes). Every service is optional at run
 * time: a missing one disables the surface that needs it and nothing else.
 */
import { chatReader, nodesOf, type ChatReader, type ViewNode } from './chat.ts'
import { MARKER_KIND, TARGET_KINDS, type ChatRow, type RewindMarker } from './hidden.ts'
import { Store } from './store.ts'

export { MARKER_KIND, nodesOf, type ChatReader, type ViewNode }

/** The slice of the `sessions` service used here (rc.8; may be absent on later clients). */
export interface SessionsService {
  list: { getSnapshot(): { current?: string; byId?: Record<string, { cwd?: string }> }; subscribe(fn: () => void): () => void }
  binding(id: string): { session: SessionFace; ctx: unknown } | undefined
  open?(id: string): void
  refresh?(): Promise<void>
}

/** The slice of the rc.8 session face used here (attachments; the chat is read through {@link chatReader}). */
export interface SessionFace {
  readAttachment?(attachmentId: string): Promise<{ ok: boolean; value?: { attachment: { mediaType?: string; name?: string }; data: Uint8Array } }>
  getSnapshot(): unknown
  subscribe(listener: () => void): () => void
}

/** The engine-command channel (`remote.commands`). */
export interface RemoteCommands {
  execute(sessionId: string, line: string, args: unknown[]): Promise<{ ok: boolean; value?: { commandId: string; result: { kind: string; text: string } }; error?: { message?: string } }>
}

/**
 * The slice of the browser plugin context used here. Services are read with `get` (which
 * answers undefined for a service the page does not have), never as required injects, so a
 * missing service disables the surfaces that need it and nothing else.
 */
export interface Ctx {
  get(name: string): unknown
  effect(fn: () => (() => void) | void, label?: string): () => void
  inject(deps: string[], fn: (sub: Ctx) => void): void
  slots: {
    register(options: Record<string, unknown>, component: (props: Record<string, unknown>) => unknown): () => void
    inject(name: string, fn: () => (() => void) | void): void
  }
  locale?: { getSnapshot(): { active: string; revision: number }; subscribe(fn: () => void): () => void }
  commandUi?: { decorate(decoration: unknown): () => void }
  conversationEvents?: { register(definition: unknown): () => void }
  settingsScope?: { bind(options: { namespace: string }): { getSnapshot(): { value?: { preference?: string } }; subscribe(fn: () => void): () => void } }
}


/**
 * One service of the page, or undefined when it has none (or refuses the read).
 * @param ctx - plugin context.
 * @param name - service name.
 * @returns the service.
 */
export function service<T>(ctx: Pick<Ctx, 'get'>, name: string): T | undefined {
  try {
    return (ctx.get(name) ?? undefined) as T | undefined
  } catch {
    return undefined
  }
}

/** @returns the `sessions` service, when the page has it. */
export function sessionsOf(ctx: Pick<Ctx, 'get'>): SessionsService | undefined {
  return service<SessionsService>(ctx, 'sessions')
}

/** @returns the engine-command channel, when the page has it. */
export function commandsOf(ctx: Pick<Ctx, 'get'>): RemoteCommands | undefined {
  const direct = service<RemoteCommands>(ctx, 'remote.commands')
  if (typeof direct?.execute === 'function') return direct
  const nested = service<{ commands?: RemoteCommands }>(ctx, 'remote')?.commands
  return typeof nested?.execute === 'function' ? nested : undefined
}

/**
 * The session a session-scoped slot last rendered for: the current session on a page
 * without the `sessions` service.
 */
export const slotSession = new Store<string | undefined>(undefined)

/**
 * Note the session a session-scoped slot renders for (see {@link currentSessionId}).
 * @param sessionId - the slot's `sessionId` prop.
 */
export function noteSlotSession(sessionId: string | undefined): void {
  if (typeof sessionId === 'string' && sessionId !== '') slotSession.set(sessionId)
}

/**
 * The session currently on screen, if any: the `sessions` list's current one, else the
 * one a session-scoped slot last rendered for.
 * @param ctx - plugin context.
 * @returns its id.
 */
export function currentSessionId(ctx: Pick<Ctx, 'get'>): string | undefined {
  const sessions = sessionsOf(ctx)
  if (sessions === undefined) return slotSession.getSnapshot()
  try {
    return sessions.list.getSnapshot().current
  } catch {
    return undefined
  }
}

/**
 * A session's rc.8 face, if the client holds it (attachments are read through it).
 * @param ctx - plugin context.
 * @param sessionId - session id.
 * @returns the face.
 */
export function faceOf(ctx: Pick<Ctx, 'get'>, sessionId: string): SessionFace | undefined {
  try {
    return sessionsOf(ctx)?.binding(sessionId)?.session
  } catch {
    return undefined
  }
}

/**
 * The reader of a session's chat nodes, on either client contract (see `chat.ts`).
 * @param ctx - plugin context.
 * @param sessionId - session id.
 * @returns the reader, or undefined when the page holds no chat for it.
 */
export function readerOf(ctx: Pick<Ctx, 'get'>, sessionId: string): ChatReader | undefined {
  return chatReader({ sessions: sessionsOf(ctx), uiConversation: service(ctx, 'uiConversation') }, sessionId)
}

/**
 * The cordis context of a session's binding (the composer's per-session scope), if any.
 * @param ctx - plugin context.
 * @param sessionId - session id.
 * @returns the scope.
 */
function bindingScope(ctx: Pick<Ctx, 'get'>, sessionId: string): unknown {
  try {
    return sessionsOf(ctx)?.binding(sessionId)?.ctx
  } catch {
    return undefined
  }
}

/**
 * Rows and rewind markers of a session, ready for `computeHidden`.
 * @param nodes - the session's chat nodes.
 * @returns rows (markers excluded) and markers.
 */
export function rowsAndMarkers(nodes: readonly ViewNode[]): { rows: ChatRow[]; markers: RewindMarker[] } {
  const rows: ChatRow[] = []
  const markers: RewindMarker[] = []
  for (const node of nodes) {
    if (node.kind === MARKER_KIND) {
      const data = node.data as RewindMarker | undefined
      if (data !== undefined) markers.push({ markerSeq: data.markerSeq, targetSeq: data.targetSeq })
    } else {
      rows.push({ key: node.key, kind: node.kind, anchorSeq: node.anchorSeq })
    }
  }
  return { rows, markers }
}

/** A durable image of a message (an `image` content block's attachment reference). */
export interface ImageRef { readonly attachmentId: string; readonly mediaType: string; readonly name?: string }

/** Seq, text and images of a human message row. */
export interface MessageInfo { readonly seq: number; readonly text: string; readonly images: readonly ImageRef[] }

/**
 * Seq and plain text of the human message rendered under one anchor key.
 * @param reader - the session's chat.
 * @param key - `data-chat-anchor-key` of the row.
 * @returns the message, or undefined when the row is not a human message.
 */
export function messageOf(reader: ChatReader | undefined, key: string): MessageInfo | undefined {
  const node = reader?.nodes()?.get(key)
  if (node === undefined || !TARGET_KINDS.has(node.kind)) return undefined
  return messageOfNode(node)
}

/**
 * Seq and text of a human message node.
 * @param node - chat node.
 * @returns the message, or undefined when the node carries no seq.
 */
export function messageOfNode(node: ViewNode): MessageInfo | undefined {
  const data = node.data as { seq?: unknown; content?: readonly { type?: string; text?: string; attachment?: { attachmentId?: unknown; mediaType?: unknown; name?: unknown } }[] } | undefined
  const seq = typeof data?.seq === 'number' ? data.seq : node.anchorSeq
  if (!Number.isSafeInteger(seq)) return undefined
  const blocks = data?.content ?? []
  const text = blocks.filter(b => b?.type === 'text' && typeof b.text === 'string').map(b => b.text).join('')
  const images: ImageRef[] = []
  for (const b of blocks) {
    const a = b?.type === 'image' ? b.attachment : undefined
    if (a !== undefined && typeof a.attachmentId === 'string' && typeof a.mediaType === 'string') {
      images.push({ attachmentId: a.attachmentId, mediaType: a.mediaType, ...(typeof a.name === 'string' ? { name: a.name } : {}) })
    }
  }
  return { seq, text, images }
}

/**
 * Find a session's human message by log seq.
 * @param reader - the session's chat.
 * @param seq - log seq.
 * @returns the message.
 */
export function messageBySeq(reader: ChatReader | undefined, seq: number): MessageInfo | undefined {
  for (const node of nodesOf(reader)) {
    if (TARGET_KINDS.has(node.kind) && node.anchorSeq === seq) return messageOfNode(node)
  }
  return undefined
}

/** The failure a rewind or fork reports on a page without the engine-command channel. */
export const MISSING_COMMANDS = 'the page has no engine-command channel (client service "remote.commands")'

/**
 * Rewinds this client runs itself (`<sessionId>:<targetSeq>`): their refill is done by
 * {@link runRewind}, so the marker observer leaves them alone.
 */
export const ownRewinds = new Set<string>()

/**
 * @param sessionId - session id.
 * @param seq - target seq.
 * @returns the {@link ownRewinds} key.
 */
export function ownRewindKey(sessionId: string, seq: number): string {
  return `${sessionId}:${seq}`
}

/**
 * The `--keep` options of the engine command for files the user unticked: one quoted (JSON
 * string) path each, so a path holding spaces or commas stays whole. Each is the path's exact
 * spelling as the preview listed it (`hex:…` for a name that is not valid UTF-8), never the
 * display form two such names may share.
 * @param keep - workspace-relative paths, spelled.
 * @returns the options, each with its leading space.
 */
export function keepArgs(keep: readonly string[]): string {
  return keep.map(p => ` --keep ${JSON.stringify(p)}`).join('')
}

/** How a rewind ended, from the client's point of view. */
export type RewindOutcome =
  | { readonly ok: true; readonly text: string; readonly refill: Refill; readonly images: number }
  | { readonly ok: false; readonly message: string }

/**
 * Run the engine command `/prompt-rewind @<seq>` on a session, then refill
 * that session's composer with the target's text.
 * @param ctx - plugin context.
 * @param sessionId - the session to rewind.
 * @param target - the target message (seq, text and images, read before the rewind).
 * @param pendingCommand - when the rewind comes from a slash command, the composer still holds
 *   that command line while the command UI settles; a draft matching this pattern is waited out
 *   (and then counts as empty) instead of being kept as the user's draft.
 * @param keep - planned files to leave as they are (unticked in the dialog).
 * @param keepGit - leave the workspace's git repository as it is (`--keep-git`): the files alone
 *   come back.
 * @returns the outcome.
 */
export async function runRewind(ctx: Ctx, sessionId: string, target: MessageInfo, pendingCommand?: RegExp, keep: readonly string[] = [], keepGit = false): Promise<RewindOutcome> {
  const seq = target.seq
  const own = ownRewindKey(sessionId, seq)
  ownRewinds.add(own)
  const commands = commandsOf(ctx)
  if (commands === undefined) {
    ownRewinds.delete(own)
    return { ok: false, message: MISSING_COMMANDS }
  }
  let answer
  try {
    answer = await commands.execute(sessionId, `/prompt-rewind @${seq}${keepArgs(keep)}${keepGit ? ' --keep-git' : ''}`, [])
  } catch (error) {
    ownRewinds.delete(own)
    return { ok: false, message: String((error as Error)?.message ?? error) }
  }
  if (!answer.ok || answer.value === undefined) {
    ownRewinds.delete(own)
    return { ok: false, message: answer.error?.message ?? 'command not accepted' }
  }
  const result = answer.value.result
  if (result.kind !== 'success') {
    ownRewinds.delete(own)
    return { ok: false, message: result.text }
  }
  return { ok: true, text: result.text, ...await refillComposer(ctx, sessionId, target, pendingCommand) }
}

interface SessionInput {
  setDraft(text: string): void
  addImages?(ids: readonly string[]): boolean
  state: { getSnapshot(): { draft: string } }
}

/** What the composer refill did. */
export type Refill = 'filled' | 'kept-draft' | 'switched' | 'no-composer' | 'empty'

/** How long a pending slash-command line may stay in the composer before it counts as ours to replace. */
const COMMAND_SETTLE_MS = 3000

/**
 * Put the rewound message's text back into its session's composer — never
 * over a non-empty draft, and not at all when another session is on screen.
 * Uses the conversation service's per-session input when present, the
 * composer textarea otherwise.
 * @param ctx - plugin context.
 * @param sessionId - the rewound session.
 * @param target - the message to put back (text, and its images when the composer service is there).
 * @param pendingCommand - a draft matching this is the command that ran the rewind (see {@link runRewind}).
 * @returns what happened, and how many images were re-attached.
 */
export async function refillComposer(ctx: Ctx, sessionId: string, target: MessageInfo, pendingCommand?: RegExp): Promise<{ refill: Refill; images: number }> {
  const refill = await refillText(ctx, sessionId, target.text, pendingCommand, target.images.length > 0)
  if (refill !== 'filled' || target.images.length === 0) return { refill, images: 0 }
  return { refill, images: await reattachImages(ctx, sessionId, target.images) }
}

interface ConversationService {
  input?: { for(actx: unknown): SessionInput }
  createDraftImages?(files: readonly File[]): readonly { id: string }[]
}

/**
 * Re-attach a message's durable images to its session's composer as new draft images.
 * @param ctx - plugin context.
 * @param sessionId - session.
 * @param images - the images.
 * @returns how many were attached (0 when the services are missing or a read fails).
 */
async function reattachImages(ctx: Ctx, sessionId: string, images: readonly ImageRef[]): Promise<number> {
  try {
    const conversation = ctx.get('conversation') as ConversationService | undefined
    const face = faceOf(ctx, sessionId)
    const scope = bindingScope(ctx, sessionId)
    if (conversation?.input === undefined || conversation.createDraftImages === undefined || face?.readAttachment === undefined || scope === undefined) return 0
    const files: File[] = []
    for (const [i, image] of images.entries()) {
      const read = await face.readAttachment(image.attachmentId)
      if (!read.ok || read.value === undefined) return 0
      const type = read.value.attachment.mediaType ?? image.mediaType
      files.push(new File([read.value.data as BlobPart], image.name ?? `image-${i + 1}.${type.split('/')[1] ?? 'png'}`, { type }))
    }
    const drafts = conversation.createDraftImages(files)
    const input = conversation.input.for(scope)
    return input.addImages?.(drafts.map(d => d.id)) === true ? drafts.length : 0
  } catch {
    return 0
  }
}

async function refillText(ctx: Ctx, sessionId: string, text: string, pendingCommand: RegExp | undefined, hasImages: boolean): Promise<Refill> {
  if (text === '' && !hasImages) return 'empty'
  if (currentSessionId(ctx) !== sessionId) return 'switched'
  let input: SessionInput | undefined
  try {
    const conversation = ctx.get('conversation') as ConversationService | undefined
    const scope = bindingScope(ctx, sessionId)
    if (conversation?.input !== undefined && scope !== undefined) input = conversation.input.for(scope)
  } catch {
    input = undefined
  }
  const area = (): HTMLTextAreaElement | null => document.querySelector<HTMLTextAreaElement>('[data-composer-card] textarea, textarea[data-phase]')
  const draft = (): string | undefined => (input !== undefined ? input.state.getSnapshot().draft : area()?.value)
  const isCommand = (value: string | undefined): boolean => pendingCommand !== undefined && value !== undefined && pendingCommand.test(value)
  if (isCommand(draft())) {
    const deadline = Date.now() + COMMAND_SETTLE_MS
    while (isCommand(draft()) && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 50))
    if (currentSessionId(ctx) !== sessionId) return 'switched'
  }
  const current = draft()
  if (current === undefined) return 'no-composer'
  if (current.trim() !== '' && !isCommand(current)) return 'kept-draft'
  if (input !== undefined) {
    input.setDraft(text)
    return 'filled'
  }
  const el = area()
  if (el === null) return 'no-composer'
  const setter = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value')?.set
  setter?.call(el, text)
  el.dispatchEvent(new Event('input', { bubbles: true }))
  return 'filled'
}
