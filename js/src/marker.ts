/**
 * The conversation half on DSH's log: the live log as the planner reads it (serialized once per
 * event), DSH's own surface fold, the candidates, the rewind's marker (where it is, whether it
 * is in the log) and the withdrawal of pending steering. Read and appended through
 * `contract/session.ts`, whichever reader the host offers.
 */
import type { Addon } from './native.ts'
import { callNative } from './native.ts'
import type { HostAgent, HostSession } from './host.ts'
import { eventAt, eventsBetween, eventsOf, logLength, surfaceNodes } from './contract/session.ts'

/**
 * The serialized log per session. DSH's log is append-only and every event is deep-frozen when it
 * is accepted, so the JSON of the events already serialized stays valid and only newer ones are
 * added (read through `contract/session.ts`, whichever reader the host offers). A shorter log (a
 * session object reused for another log) starts over.
 */
const serialized = new WeakMap<object, { length: number; body: string }>()

/** The live log as the planner reads it (a JSON array of the session's events). */
export function eventsJson(session: HostSession): string {
  const length = logLength(session)
  let cached = serialized.get(session)
  if (cached === undefined || cached.length > length) cached = { length: 0, body: '' }
  if (cached.length < length) {
    const added = eventsBetween(session, cached.length, length).map(e => JSON.stringify(e)).join(',')
    cached = { length, body: cached.body === '' ? added : `${cached.body},${added}` }
    serialized.set(session, cached)
  }
  return `[${cached.body}]`
}

/**
 * DSH's own fold of the session's surface, handed to the planner so the plan is made on it
 * (`contract/session.ts` `surfaceNodes`); `undefined` where the host has none (the planner folds
 * the log itself).
 */
export function hostFold(session: HostSession): number[] | undefined {
  const nodes = surfaceNodes(session)
  return nodes === undefined ? undefined : [...nodes]
}

/** Candidates of a session, newest first. */
export function candidates(session: HostSession): Addon.BindingCandidate[] {
  return callNative(native => native.listCandidates(eventsJson(session), hostFold(session)))
}

export function withdraw(agent: HostAgent, ids: readonly string[]): string[] {
  const removed: string[] = []
  for (const id of ids) {
    try {
      if (agent.inbox.remove(id)) removed.push(id)
    } catch {
      // Already claimed or gone: nothing to withdraw.
    }
  }
  return removed
}

/**
 * Where the conversation as it was just before an in-place rewind ends in `session`'s log: at the
 * rewind's marker, less the command that ran the rewind when it directly precedes the marker (its
 * `command/done` follows the marker, so a seed holding it would show a command that never ends).
 * `undefined` when the marker is not in the log.
 */
export function markerSeq(session: HostSession, markerId: string | null | undefined): number | undefined {
  if (markerId == null) return undefined
  const at = eventsOf(session).find(e => e.type === 'user/message' && (e.data as { id?: unknown } | undefined)?.id === markerId)?.seq
  if (at === undefined) return undefined
  return eventAt(session, at - 1)?.type === 'command/run' ? at - 1 : at
}

/** Whether the marker `markerId` is in `session`'s log (the conversation half of a rewind happened). */
export function hasMarker(session: HostSession, markerId: string | null | undefined): boolean {
  return markerId != null && eventsOf(session).some(e => e.type === 'user/message' && (e.data as { id?: unknown } | undefined)?.id === markerId)
}

/** The in-place plan of a rewind of `session` to `target` (`@<seq>` or `<n>`), on DSH's own fold. */
export function planRewind(session: HostSession, target: string): Addon.BindingPlan {
  return callNative(native => native.planRewind(eventsJson(session), target, hostFold(session)))
}

/** The plan of a fork rewind of `session` to `target`, on DSH's own fold. */
export function planFork(session: HostSession, target: string): Addon.BindingForkPlan {
  return callNative(native => native.planFork(eventsJson(session), target, hostFold(session)))
}

/** The one-line preview of the message at `targetSeq`, as the candidate list shows it (else `fallback`). */
export function targetPreview(session: HostSession, targetSeq: number, fallback: string): string {
  return candidates(session).find(c => c.seq === targetSeq)?.preview ?? fallback
}
