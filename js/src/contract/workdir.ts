/**
 * Host contract: the session's effective working directory. DSH 0.2.x can move a session to
 * another directory after it started: a `working-directory/change` event `{cwd}` names the
 * directory later directory-based operations use, while the header keeps the original project
 * (zq0929/deepseek-harness @5593cc25 `packages/core/session/src/known-event-types.ts`; the event's
 * type is declared by the working-directory service, `SessionEventMap['working-directory/change']`:
 * "Effective working directory; the immutable Session header retains the original project").
 * The plugin tracks the workspace the session is in now: backups and scans follow the move. A
 * host without the event (rc.8) never moves a session, and the header's `cwd` applies.
 */
import { isAbsolute } from 'node:path'
import type { HostEvent, HostSession } from '../host.ts'
import { eventsOf } from './session.ts'

/** The event DSH 0.2.x appends when a session's working directory changes. */
export const WORKING_DIRECTORY_CHANGE = 'working-directory/change'

/** Per session: the latest effective directory (`null`: none recorded, the header applies). */
const effective = new Map<string, string | null>()

function cwdOf(event: HostEvent): string | undefined {
  if (event.type !== WORKING_DIRECTORY_CHANGE) return undefined
  const cwd = (event.data as { cwd?: unknown } | undefined)?.cwd
  return typeof cwd === 'string' && isAbsolute(cwd) ? cwd : undefined
}

/**
 * The directory the latest `working-directory/change` of the session names, or `undefined` when
 * it has none (read from the log once per session, then kept current by {@link observeCwd}).
 */
export function effectiveCwd(session: HostSession): string | undefined {
  const id = session.header.id
  const known = effective.get(id)
  if (known !== undefined) return known ?? undefined
  let found: string | null = null
  try {
    const events = eventsOf(session)
    for (let i = events.length - 1; i >= 0; i--) {
      const cwd = cwdOf(events[i]!)
      if (cwd !== undefined) {
        found = cwd
        break
      }
    }
  } catch {
    // A log that cannot be read: the header's cwd applies (and is looked at again next time).
    return undefined
  }
  effective.set(id, found)
  return found ?? undefined
}

/** Keep the effective directory current as events arrive. */
export function observeCwd(session: HostSession, event: HostEvent): void {
  const cwd = cwdOf(event)
  if (cwd !== undefined) effective.set(session.header.id, cwd)
}

/** Forget a disposed session. */
export function forgetCwd(sessionId: string): void {
  effective.delete(sessionId)
}
