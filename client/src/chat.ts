/**
 * One reader for a session's chat nodes, whichever client contract the page speaks.
 *
 * Two shapes are known, told apart at run time by what the services hold (never by a
 * version string):
 *
 * - `session-face` (DSH 0.1.0-rc.8 … 0.1.1): the session face carries the chat store,
 *   `ctx.sessions.binding(id).session.getSnapshot().chat.nodes`, and the face's own
 *   `subscribe` reports changes.
 * - `ui-conversation` (DSH 0.1.2-alpha.1 and later): the chat moved to the
 *   `uiConversation` service's "chat" view,
 *   `ctx.uiConversation.binding(id).target('chat').getSnapshot().nodes`, whose `subscribe`
 *   both reports changes and activates the view (the first subscriber does). See
 *   zq0929/deepseek-harness @ 5593cc250aae228449197efd2413192165e3377f
 *   `packages/client/ui-conversation/README.md` ("Conversation assembly":
 *   `ctx.uiConversation.binding(binding).target(targetId)`) and
 *   `packages/client/ui-chat/src/client/contract/snapshot.ts` (`ChatSnapshot.nodes` is a
 *   `ChatNodeStore` with `get(key)` and `values()`, hidden nodes included).
 *
 * In both shapes a node is `{key, kind, anchorSeq, visibility, data}` and a human message
 * is kind `user` or `steering` with `data.seq` / `data.content` (rc.8
 * `packages/client/ui-conversation/src/client/conversation-nodes/message.ts`; 0.2.1-alpha.2
 * `packages/client/ui-chat/tests/chat-snapshot-fixture.client.ts`).
 *
 * Pure of DOM and of DSH types: every service is read as an untrusted shape and any
 * throw counts as "not there".
 */

/** A chat view node as both client contracts hold it. */
export interface ViewNode {
  readonly key: string
  readonly kind: string
  readonly anchorSeq: number
  readonly visibility?: 'visible' | 'hidden'
  readonly data?: unknown
}

/** The keyed node store of a chat snapshot (`get` by render key, `values` in any order). */
export interface NodeStore {
  get(key: string): ViewNode | undefined
  values(): readonly ViewNode[]
}

/** Which client contract a reader found. */
export type ChatShape = 'session-face' | 'ui-conversation'

/** A session's chat nodes, read live. */
export interface ChatReader {
  readonly shape: ChatShape
  /** The object read from (the face, or the view source): a new one means a new reader is due. */
  readonly source: object
  /** @returns the current node store, or undefined while the view has none. */
  nodes(): NodeStore | undefined
  /** @param listener - called on every change. @returns the unsubscribe function. */
  subscribe(listener: () => void): () => void
}

/** The services a reader is built from (each optional). */
export interface ChatServices {
  /** The rc.8 `sessions` service. */
  readonly sessions?: unknown
  /** The 0.1.2+ `uiConversation` service. */
  readonly uiConversation?: unknown
}

const EMPTY: readonly ViewNode[] = []

interface Observable { getSnapshot(): unknown; subscribe(listener: () => void): () => void }

function isObservable(value: unknown): value is Observable {
  return typeof value === 'object' && value !== null
    && typeof (value as Observable).getSnapshot === 'function'
    && typeof (value as Observable).subscribe === 'function'
}

/**
 * The node store inside one chat snapshot value: a `{get, values}` store, or a plain
 * array of nodes (wrapped, keyed by `key`).
 * @param nodes - the snapshot's `nodes` field (untrusted).
 * @returns the store, or undefined when it is neither.
 */
export function storeOf(nodes: unknown): NodeStore | undefined {
  if (Array.isArray(nodes)) {
    const list = nodes.filter(isNode)
    return { get: key => list.find(n => n.key === key), values: () => list }
  }
  if (typeof nodes !== 'object' || nodes === null) return undefined
  const store = nodes as Partial<NodeStore>
  if (typeof store.values !== 'function' || typeof store.get !== 'function') return undefined
  return {
    get: (key) => {
      try {
        const node = store.get!.call(nodes, key)
        return isNode(node) ? node : undefined
      } catch {
        return undefined
      }
    },
    values: () => {
      try {
        const all = store.values!.call(nodes)
        return Array.isArray(all) ? all.filter(isNode) : [...(all as Iterable<unknown>)].filter(isNode)
      } catch {
        return EMPTY
      }
    },
  }
}

function isNode(value: unknown): value is ViewNode {
  return typeof value === 'object' && value !== null
    && typeof (value as ViewNode).key === 'string' && typeof (value as ViewNode).kind === 'string'
    && typeof (value as ViewNode).anchorSeq === 'number'
}

/**
 * The rc.8 session face of a session, when the `sessions` service holds one.
 * @param sessions - the `sessions` service (untrusted).
 * @param sessionId - session.
 * @returns the face.
 */
export function faceIn(sessions: unknown, sessionId: string): Observable | undefined {
  try {
    const binding = (sessions as { binding?(id: string): { session?: unknown } | undefined } | undefined)?.binding?.(sessionId)
    return isObservable(binding?.session) ? binding.session : undefined
  } catch {
    return undefined
  }
}

/**
 * The 0.1.2+ "chat" view source of a session, when the `uiConversation` service holds one.
 * @param ui - the `uiConversation` service (untrusted).
 * @param sessionId - session.
 * @returns the view source.
 */
export function chatTargetIn(ui: unknown, sessionId: string): Observable | undefined {
  try {
    const binding = (ui as { binding?(id: string): { target?(name: string): unknown } | undefined } | undefined)?.binding?.(sessionId)
    const target = binding?.target?.('chat')
    return isObservable(target) ? target : undefined
  } catch {
    return undefined
  }
}

function faceNodes(face: Observable): NodeStore | undefined {
  try {
    return storeOf((face.getSnapshot() as { chat?: { nodes?: unknown } } | undefined)?.chat?.nodes)
  } catch {
    return undefined
  }
}

function targetNodes(target: Observable): NodeStore | undefined {
  try {
    return storeOf((target.getSnapshot() as { nodes?: unknown } | undefined)?.nodes)
  } catch {
    return undefined
  }
}

function safeSubscribe(source: Observable, listener: () => void): () => void {
  try {
    const off = source.subscribe(listener)
    return typeof off === 'function' ? () => { try { off() } catch { /* already gone */ } } : () => {}
  } catch {
    return () => {}
  }
}

/**
 * A reader of one session's chat nodes. The rc.8 face is used when its snapshot carries a
 * `chat` store; otherwise the `uiConversation` "chat" view; otherwise there is none.
 * @param services - the services the page offers.
 * @param sessionId - session.
 * @returns the reader, or undefined when neither contract is there for this session.
 */
export function chatReader(services: ChatServices, sessionId: string): ChatReader | undefined {
  const face = faceIn(services.sessions, sessionId)
  if (face !== undefined && faceNodes(face) !== undefined) {
    return { shape: 'session-face', source: face, nodes: () => faceNodes(face), subscribe: l => safeSubscribe(face, l) }
  }
  const target = chatTargetIn(services.uiConversation, sessionId)
  if (target !== undefined) {
    // The face (when there is one) still reports session changes a view may follow.
    return {
      shape: 'ui-conversation',
      source: target,
      nodes: () => targetNodes(target),
      subscribe: (l) => {
        const offTarget = safeSubscribe(target, l)
        const offFace = face === undefined ? () => {} : safeSubscribe(face, l)
        return () => { offTarget(); offFace() }
      },
    }
  }
  return undefined
}

/**
 * Every chat node a reader holds (visible and hidden).
 * @param reader - the reader.
 * @returns the nodes ([] without a reader or a store).
 */
export function nodesOf(reader: ChatReader | undefined): readonly ViewNode[] {
  return reader?.nodes()?.values() ?? EMPTY
}
