/**
 * `/snapshot-auto-cleanup show | on | off | max-age <days> | max-size <size|0> |
 * run [--apply] [--max-size <size>] | run --current [--apply]`.
 */
import type { HostAgent, HostAgents, HostContext } from './host.ts'
import type { CleanupPort, SweepReport } from './ports.ts'
import type { SettingsModel } from './settings.ts'
import { toRewindError } from './errors.ts'
import { forkAncestors } from './fork.ts'
import { type Locale, format } from './locales.ts'
import { formatBytes, parseSize } from '../../shared/format.ts'

/** Sessions with a live agent (never swept). */
function liveAgents(ctx: HostContext): HostAgent[] {
  const agents = ctx.get('agents') as HostAgents | undefined
  try {
    return agents?.list() ?? []
  } catch {
    return []
  }
}

/**
 * The sessions a sweep must keep: every live session, and every session a live forked session
 * reads its earlier checkpoints from (its fork ancestors).
 */
export async function keptSessions(ctx: HostContext): Promise<string[]> {
  const kept = new Set<string>()
  for (const agent of liveAgents(ctx)) {
    kept.add(agent.session.header.id)
    for (const link of await forkAncestors(ctx, agent.session.header, agent.session)) kept.add(link.sessionId)
  }
  return [...kept]
}

function sweepText(locale: Locale, report: SweepReport): string {
  if (report.items.length === 0) return format(locale, 'cleanupNothing')
  const head = format(locale, report.applied ? 'cleanupApplied' : 'cleanupDryRun', { n: report.items.length, size: formatBytes(report.bytes) })
  return [head, ...report.items.map(i => `- ${i.sessionId} (${formatBytes(i.bytes)})`)].join('\n')
}

/** Run the command. */
export async function cleanupCommand(
  deps: { ctx: HostContext; cleanup: () => CleanupPort; settings: SettingsModel; locale: () => Locale },
  agent: HostAgent,
  rawInput: string,
): Promise<{ kind: 'success'; text: string } | { kind: 'error'; text: string }> {
  const locale = deps.locale()
  const words = rawInput.trim().split(/\s+/).filter(w => w !== '')
  const usage = { kind: 'error' as const, text: format(locale, 'cleanupUsage') }
  const sub = words[0] ?? 'show'
  try {
    if (sub === 'show' && words.length <= 1) {
      const s = deps.settings.get()
      if (!deps.settings.persistent) return { kind: 'success', text: format(locale, 'cleanupUnavailable') }
      const last = await deps.cleanup().lastSweep()
      const lines = [
        format(locale, 'cleanupStatus', {
          state: format(locale, s.cleanup.enabled ? 'on' : 'off'),
          days: s.cleanup.maxAgeDays,
          last: last === undefined ? format(locale, 'never') : new Date(last.at).toISOString(),
        }),
        format(locale, 'cleanupQuotaStatus', { max: s.cleanup.maxSizeBytes === 0 ? format(locale, 'cleanupQuotaNone') : formatBytes(s.cleanup.maxSizeBytes) }),
      ]
      if (last !== undefined) {
        const quotaFreed = last.quota?.freed ?? 0
        lines.push(format(locale, 'cleanupLastFreed', { size: formatBytes(last.bytes + quotaFreed), n: last.removed + (last.quota?.removed ?? 0), quota: formatBytes(quotaFreed) }))
      }
      // What the size quota removed last, and when (it runs whether or not the age rule is on).
      const lastQuota = await deps.cleanup().lastQuota().catch(() => undefined)
      if (lastQuota !== undefined) {
        lines.push(format(locale, 'cleanupLastQuota', { time: new Date(lastQuota.at).toISOString(), n: lastQuota.sessions.length, size: formatBytes(lastQuota.freed), sessions: lastQuota.sessions.join(', ') }))
      }
      return { kind: 'success', text: lines.join('\n') }
    }
    if ((sub === 'on' || sub === 'off') && words.length === 1) {
      if (!deps.settings.persistent) return { kind: 'error', text: format(locale, 'cleanupUnavailable') }
      await deps.settings.update({ cleanup: { enabled: sub === 'on' } })
      return { kind: 'success', text: format(locale, sub === 'on' ? 'cleanupEnabled' : 'cleanupDisabled') }
    }
    if (sub === 'max-age' && words.length === 2) {
      const days = Number(words[1])
      if (!/^\d+$/.test(words[1]!) || !Number.isSafeInteger(days) || days < 1 || days > 3650) return usage
      if (!deps.settings.persistent) return { kind: 'error', text: format(locale, 'cleanupUnavailable') }
      await deps.settings.update({ cleanup: { maxAgeDays: days } })
      return { kind: 'success', text: format(locale, 'cleanupMaxAge', { days }) }
    }
    if (sub === 'max-size' && words.length === 2) {
      const bytes = words[1] === '0' ? 0 : parseSize(words[1]!)
      if (bytes === undefined) return usage
      if (!deps.settings.persistent) return { kind: 'error', text: format(locale, 'cleanupUnavailable') }
      // Out of range: refused by the settings model with the field named (nothing written).
      await deps.settings.update({ cleanup: { maxSizeBytes: bytes } })
      return { kind: 'success', text: bytes === 0 ? format(locale, 'cleanupMaxSizeOff') : format(locale, 'cleanupMaxSize', { size: formatBytes(bytes) }) }
    }
    if (sub === 'run') {
      const rest = words.slice(1)
      // `--max-size <size>`: the size quota after the age rule (not with --current).
      let maxBytes: number | undefined
      const at = rest.indexOf('--max-size')
      if (at !== -1) {
        maxBytes = parseSize(rest[at + 1] ?? '')
        if (maxBytes === undefined) return usage
        rest.splice(at, 2)
      }
      const flags = new Set(rest)
      if (flags.size !== rest.length || [...flags].some(f => f !== '--apply' && f !== '--current')) return usage
      const current = flags.has('--current')
      if (current && maxBytes !== undefined) return usage
      const apply = flags.has('--apply')
      // Without a settings service the policy fails closed: no sweep deletes anything.
      if (!deps.settings.persistent) return { kind: 'error', text: format(locale, 'cleanupUnavailable') }
      const sessionId = agent.session.header.id
      const report = await deps.cleanup().sweep({
        maxAgeDays: deps.settings.get().cleanup.maxAgeDays,
        active: current ? [] : await keptSessions(deps.ctx),
        apply,
        ...(current ? { onlySession: sessionId } : {}),
      })
      if (maxBytes === undefined) return { kind: 'success', text: sweepText(locale, report) }
      const quota = await deps.cleanup().quotaSweep({
        maxBytes,
        active: await keptSessions(deps.ctx),
        apply,
        already: report.items.map(i => i.sessionId),
      })
      const lines = [sweepText(locale, report)]
      if (quota.items.length > 0) {
        const freed = quota.items.reduce((sum, i) => sum + i.bytes, 0)
        lines.push(
          format(locale, quota.applied ? 'cleanupQuotaApplied' : 'cleanupQuotaDryRun', { max: formatBytes(maxBytes), n: quota.items.length, size: formatBytes(freed), after: formatBytes(quota.bytes) }),
          ...quota.items.map(i => `- ${i.sessionId} (${formatBytes(i.bytes)})`),
        )
      }
      if (quota.bytes > maxBytes) lines.push(format(locale, 'cleanupQuotaOver'))
      return { kind: 'success', text: lines.join('\n') }
    }
    return usage
  } catch (error) {
    const e = toRewindError(error)
    return { kind: 'error', text: format(locale, 'cleanupError', { code: e.code, message: e.message }) }
  }
}
