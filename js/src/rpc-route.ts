/**
 * The RPC route's transport: which requests are the host's own (Host, Origin and peer checks), the
 * bounded JSON body, and the JSON answer. What each endpoint does is `rpc.ts`'s.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Codes, RewindError } from './errors.ts'

/** Largest accepted request body. */
const MAX_BODY = 64 * 1024

const LOOPBACK_PEERS = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1'])

/** Where the route is served: the listener's port, bind address and protocol. */
export interface ServedAt {
  port: number
  /** The configured bind literal (rc.8: loopback only; 0.2.x: any concrete local address). */
  host?: string
  /** `'https:'` when the listener serves TLS (0.2.x); `'http:'` otherwise. */
  protocol?: string
}

function isWildcardLiteral(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase()
  return h === '0.0.0.0' || h === '::' || h === '::0' || h === '::ffff:0.0.0.0' || h === ''
}

function isLoopbackLiteral(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase()
  return h === '::1' || h === 'localhost' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)
}

/** The `host:port` authority of a bind literal (IPv6 in brackets). */
function authorityOf(host: string, port: number): string {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase()
  return h.includes(':') ? `[${h}]:${port}` : `${h}:${port}`
}

/**
 * Whether a request is the host's own: addressed to the served authority and, when it comes over
 * a socket, from a peer the listener serves. The served authorities are the loopback names of the
 * port plus the configured bind literal; the scheme is the listener's (`https:` when DSH serves
 * TLS, zq0929/deepseek-harness @5593cc25 `packages/host/webserver/src/index.ts` `WebServer.protocol`).
 * A loopback or wildcard listener takes loopback peers only (a Host header alone can be forged by
 * a non-browser client); a listener DSH binds to one other local address serves that network, as
 * DSH's own pages do, so the Host and Origin checks decide. A request with no socket is DSH's in-process worker tunnel (same
 * file: "The Web Worker tunnel has no socket"). An Origin, when present (every browser `fetch`
 * POST), must name a served authority with the listener's scheme.
 */
export function trustedRequest(req: IncomingMessage, served: number | ServedAt): boolean {
  const at: ServedAt = typeof served === 'number' ? { port: served } : served
  const bind = typeof at.host === 'string' && at.host !== '' ? at.host : '127.0.0.1'
  const scheme = at.protocol === 'https:' ? 'https:' : 'http:'
  const socket = (req as { socket?: { remoteAddress?: string } }).socket
  if (socket !== undefined && socket !== null) {
    const peer = String(socket.remoteAddress ?? '')
    // Every interface at once (a wildcard bind) or loopback: the peer must be this machine.
    const network = !isLoopbackLiteral(bind) && !isWildcardLiteral(bind)
    if (!network && !LOOPBACK_PEERS.has(peer)) return false
  }
  const allowed = new Set([`127.0.0.1:${at.port}`, `localhost:${at.port}`, `[::1]:${at.port}`])
  if (!isWildcardLiteral(bind)) allowed.add(authorityOf(bind, at.port))
  const host = String(req.headers.host ?? '').toLowerCase()
  if (!allowed.has(host)) return false
  const origin = req.headers.origin
  if (origin !== undefined) {
    let authority: string
    try {
      const url = new URL(String(origin))
      if (url.protocol !== scheme) return false
      authority = url.host.toLowerCase()
    } catch {
      return false
    }
    if (!allowed.has(authority)) return false
  }
  return true
}

export function send(res: ServerResponse, status: number, payload: unknown): void {
  let body: string
  try {
    body = JSON.stringify(payload)
  } catch (error) {
    body = JSON.stringify({ ok: false, error: { code: Codes.failed, message: `unserializable response: ${(error as Error).message}`, details: {} } })
  }
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
  res.end(body)
}

export async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  let size = 0
  let over = false
  // The whole upload is read (and what is over the limit dropped), so the answer is not cut off
  // by a reset and the connection stays usable for the next request.
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY) over = true
    else chunks.push(chunk as Buffer)
  }
  if (over) throw new RewindError(Codes.badRequest, `request body over ${MAX_BODY} bytes`)
  const text = Buffer.concat(chunks).toString('utf8')
  if (text.trim() === '') return {}
  try {
    return JSON.parse(text)
  } catch {
    throw new RewindError(Codes.badRequest, 'request body is not JSON')
  }
}
