/**
 * The fork choice of the confirm dialog: run the engine command
 * `/prompt-rewind --fork @<seq>` on the session, find the child it created
 * (the host's history entry of that fork names it), switch the view to the
 * child and refill its composer with the target's text. The original session
 * is left as it is and stays in the session list.
 */
import { commandsOf, currentSessionId, keepArgs, MISSING_COMMANDS, refillComposer, sessionsOf, type Ctx, type MessageInfo, type Refill } from './host.ts'
import { rpc } from './rpc.ts'

/** How a fork ended, from the client's point of view. */
export type ForkOutcome =
  | { readonly ok: true; readonly text: string; readonly childSessionId: string; readonly opened: boolean; readonly refill: Refill; readonly images: number }
  | { readonly ok: false; readonly message: string }

/** The slice of the sessions service used to show the child. */
interface SessionsNav {
  open?(id: string): void
  refresh?(): Promise<void>
  list: { getSnapshot(): { current?: string; byId?: Record<string, unknown> } }
  binding(id: string): unknown
}

/** How long the view may take to list and show the child. */
const OPEN_TIMEOUT_MS = 8000

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

/**
 * Fork the conversation before `target` into a new session and open it.
 * @param ctx - plugin context.
 * @param sessionId - the session the dialog belongs to (the parent).
 * @param target - the target message (its text refills the child's composer).
 * @param keep - planned files to leave as they are (unticked in the dialog).
 * @returns the outcome.
 */
export async function runFork(ctx: Ctx, sessionId: string, target: MessageInfo, keep: readonly string[] = []): Promise<ForkOutcome> {
  const commands = commandsOf(ctx)
  if (commands === undefined) return { ok: false, message: MISSING_COMMANDS }
  let answer
  try {
    answer = await commands.execute(sessionId, `/prompt-rewind --fork @${target.seq}${keepArgs(keep)}`, [])
  } catch (error) {
    return { ok: false, message: String((error as Error)?.message ?? error) }
  }
  if (!answer.ok || answer.value === undefined) return { ok: false, message: answer.error?.message ?? 'command not accepted' }
  const result = answer.value.result
  if (result.kind !== 'success') return { ok: false, message: result.text }
  let childSessionId: string | undefined
  try {
    const history = await rpc('history', sessionId, {})
    childSessionId = history.entries.find(e => e.sessionId === sessionId && e.targetSeq === target.seq && e.fork !== undefined)?.fork?.childSessionId
  } catch (error) {
    return { ok: false, message: `the fork ran, but its new session could not be looked up: ${(error as Error).message}` }
  }
  if (childSessionId === undefined) return { ok: false, message: 'the fork ran, but the history names no new session' }
  const opened = await openSession(ctx, childSessionId)
  const refill = opened ? await refillComposer(ctx, childSessionId, target) : { refill: 'switched' as const, images: 0 }
  return { ok: true, text: result.text, childSessionId, opened, ...refill }
}

/**
 * Show a session: wait until the list knows it, select it, wait until it is
 * current and bound.
 * @param ctx - plugin context.
 * @param id - session id.
 * @returns whether the view shows it.
 */
export async function openSession(ctx: Ctx, id: string): Promise<boolean> {
  const sessions = sessionsOf(ctx) as SessionsNav | undefined
  if (sessions === undefined || typeof sessions.open !== 'function') return false
  const deadline = Date.now() + OPEN_TIMEOUT_MS
  const listed = (): boolean => sessions.list.getSnapshot().byId?.[id] !== undefined
  while (!listed() && Date.now() < deadline) {
    try { await sessions.refresh?.() } catch { /* retried until the deadline */ }
    if (!listed()) await sleep(100)
  }
  try { sessions.open(id) } catch { return false }
  while (Date.now() < deadline) {
    let bound = false
    try { bound = sessions.binding(id) !== undefined } catch { bound = false }
    if (currentSessionId(ctx) === id && bound) return true
    await sleep(50)
  }
  return false
}
