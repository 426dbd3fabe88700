/**
 * Structural view of the DSH 0.1.0-rc.8 host surfaces this plugin touches. Only the members the
 * plugin reads or calls are declared; the real objects carry more. Keeping these structural (and
 * not importing `@deepseek-ai/*` types) keeps the built plugin free of runtime DSH imports, so it
 * loads from any DSH installation that provides these shapes.
 */

/** A session event envelope (`{type, seq, time, data, ...}`). */
export interface HostEvent {
  readonly type: string
  readonly seq: number
  readonly time: number
  readonly data: any
  readonly ignorable?: true
  readonly surfaceOp?: unknown
  readonly sourceEventSeqs?: readonly number[]
}

/**
 * The session header. rc.8 (format 0) names a fork child's inherited prefix `seedLength`; format
 * 2+ marks it `isSeeded` and keeps the count on the live session (`contract/session.ts`).
 */
export interface HostSessionHeader {
  readonly id: string
  readonly version?: number
  readonly cwd?: string
  readonly parentSession?: string
  readonly origin?: string
  readonly delegationDepth?: number
  readonly seedLength?: number
  readonly isSeeded?: boolean
  /** Not a header field upstream; some persistence listings carry it beside the header. */
  readonly inheritedEventCount?: number
  readonly agentPreset?: string
}

/**
 * A live session. Which log reader exists depends on the release: rc.8 has `events`; 0.1.2+
 * has `snapshotEvents()` / `eventAt()` / `seq` and no `events`. Read it only through
 * `contract/session.ts`.
 */
export interface HostSession {
  readonly header: HostSessionHeader
  readonly events?: readonly HostEvent[]
  snapshotEvents?(fromSeq?: number, toSeqExclusive?: number): readonly HostEvent[]
  eventAt?(seq: number): HostEvent | undefined
  readonly seq?: number
  readonly inheritedEventCount?: number
  append(type: 'user/message', data: unknown, opts: { surfaceOp: unknown; sourceEventSeqs?: number[] }): HostEvent
}

/** The inbox of an agent (pending input). */
export interface HostInbox {
  readonly nextTurn: readonly { id: string }[]
  readonly nextStep: readonly { id: string }[]
  remove(messageId: string): boolean
}

/** A live agent. */
export interface HostAgent {
  readonly id: string
  readonly session: HostSession
  readonly inbox: HostInbox
  readonly status: 'idle' | 'running'
  cancel(cause: { kind: 'user' }, options?: { keepInbox?: boolean }): void
  whenIdle(): Promise<void>
  runMaintenance?<T>(task: (signal: AbortSignal) => Promise<T>): Promise<T>
}

/** A tool execution as seen by the tool pipeline events and as the fs intent actor. */
export interface HostToolExecution {
  readonly callId: string
  readonly name: string
  readonly arguments: unknown
  readonly agent?: HostAgent
}

/** A tool result as seen by `tools/post-execute` / `tools/result`. */
export interface HostToolResult {
  readonly isError: boolean
}

/** A resolved filesystem target. */
export interface HostFsTarget {
  readonly targetKey: string
  readonly displayPath: string
}

/** The `fs` service subset used to re-sync observations after a restore. */
export interface HostFs {
  resolve(path: string, opts?: { cwd?: string }): Promise<HostFsTarget>
  processPath(target: HostFsTarget): string
  stat(target: HostFsTarget): Promise<{ version: string } | undefined>
}

/** A command invocation. */
export interface HostCommandInvocation {
  readonly commandId: string
  readonly agent: HostAgent
  readonly rawInput: string
  readonly signal: AbortSignal
}

/** A command result. */
export type HostCommandResult = { kind: 'success'; text?: string } | { kind: 'error'; text: string }

/** A command definition. */
export interface HostCommandDefinition {
  name: string
  description: string
  input?: { hint: string }
  recordInput?: boolean
  handler(inv: HostCommandInvocation): HostCommandResult | Promise<HostCommandResult>
}

/** A settings scope returned by `settings.register`. */
export interface HostSettingsScope<T> {
  get(): T
  watch(callback: (next: T, prev: T) => void | Promise<void>): () => void
  update(patch: object): Promise<void>
}

/** The settings service subset. */
export interface HostSettings {
  register<T>(ns: string, schema: unknown, options?: { applies?: 'live' | 'restart'; base?: Partial<T> }): HostSettingsScope<T>
  get(ns: string): unknown
}

/** The workspace registry subset (absent in headless compositions). */
export interface HostWorkspaceRegistry {
  resolveByPath(path: string): Promise<{ id: string } | undefined>
  list?(): { id: string; sessionIds?: readonly string[] }[]
}

/** The web server subset. */
export interface HostWebServer {
  readonly port: number
  readonly host: string
  /** 0.2.x: `'https:'` when the listener serves TLS (zq0929 @5593cc25 `packages/host/webserver/src/index.ts`). */
  readonly protocol?: 'http:' | 'https:'
  register(route: {
    kind: 'exact' | 'prefix'
    path: string
    handler: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void | Promise<void>
  }): () => void
}

/** The agent registry subset. */
export interface HostAgents {
  get(id: string): HostAgent | undefined
  list(): HostAgent[]
}

/** A cordis logger. */
export interface HostLogger {
  info(...args: unknown[]): void
  warn(...args: unknown[]): void
  error(...args: unknown[]): void
  debug(...args: unknown[]): void
}

/** The cordis context subset the plugin uses (services are optional on purpose). */
export interface HostContext {
  on(name: string, listener: (...args: any[]) => any, options?: { prepend?: boolean; global?: boolean }): () => void
  emit(name: string, ...args: unknown[]): void
  inject(deps: string[], callback: (ctx: HostContext) => void): void
  effect(execute: () => () => void, label?: string): void
  logger(name: string): HostLogger
  readonly commands: { register(def: HostCommandDefinition): () => void }
  readonly agents?: HostAgents
  readonly fs?: HostFs
  readonly settings?: HostSettings
  readonly webServer?: HostWebServer
  readonly workspaceRegistry?: HostWorkspaceRegistry
  get(name: string): unknown
}
