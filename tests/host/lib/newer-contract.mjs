/**
 * THE NEWER-CONTRACT SHIM — a documented test double of the DSH session contract of 0.1.2 and
 * later, installed over the real DSH 0.1.0-rc.8 service spine **for the plugin under test only**.
 * It is not a real 0.1.5 or 0.2 host: DSH's own services keep running rc.8 code on rc.8 objects;
 * the plugin sees them through the views below, which follow these upstream files:
 *
 *   zq0929/deepseek-harness @5593cc250aae228449197efd2413192165e3377f (0.2.1-alpha.2)
 *     packages/core/session/src/index.ts   `Session`: no `events` getter; `snapshotEvents(from?,
 *                                          to?)` (frozen, reused until the next append), `eventAt`,
 *                                          `seq`, `inheritedEventCount`, `surface`;
 *                                          `validateSessionHeader` refuses `seedLength`, requires
 *                                          `isSeeded`; header `version` is the format number
 *     packages/core/session/src/types.ts   `SurfaceOp` replace `{op, startSeq, endSeq}`
 *   knyazev741/deepseek-harness @1376315fcef1ad2f03463b0293f56a352fd9a1c9 (0.2.1-alpha.1 line)
 *     packages/core/session/src/surface.ts `isReplaceOp`: exactly the keys op, startSeq, endSeq;
 *                                          anything else "carries an invalid replace surfaceOp",
 *                                          refused before the log changes
 *     packages/core/agent/src/index.ts     `CreateAgentOptions`: `meta.isSeeded` + top-level
 *                                          `inheritedEventCount`
 *   knyazev741/deepseek-harness @8173fb8d415a2b16169f3029dff8ad3c5fcea772
 *     packages/session/session-format-v3-to-v4/src/message-sources.ts  format 4 admits any
 *                                          non-empty source kind except the literal `'plugin'`
 *   DSH 0.1.7+ settings (public plugin contract scripts): the settings service has no `register`.
 *
 * What the views do:
 *   session   `events` is absent (reading it gives `undefined`, as on 0.1.2+); `snapshotEvents`,
 *             `eventAt`, `seq`; the header reports `version: <format>`, `isSeeded`, and no
 *             `seedLength`; `inheritedEventCount` is on the session; events read through the view
 *             carry replace ops spelled `{op, startSeq, endSeq}`; `append` refuses the rc.8
 *             spelling (and, at format 4, the source kind `'plugin'`) before anything is written,
 *             then hands rc.8 the op in its own spelling.
 *   agents    `get` / `list` give agent views; `create` refuses `meta.seedLength` as 0.2.x does
 *             and maps `isSeeded` + `inheritedEventCount` onto rc.8's `seedLength`.
 *   settings  without `register` (unless `settingsRegister: true`).
 *   listeners every DSH event the plugin listens to gets the views in place of the rc.8 objects.
 *
 * What it cannot show: the rc.8 log still holds rc.8 vocabulary (no `system/message` node 0, chunk
 * rows, tool results in rc.8's shape); the planner's fixtures of formats 2, 3 and 4 cover those.
 */

const SHIM = Symbol('newer-contract-shim')

/**
 * Wrap a plugin module so that it sees the newer contract.
 * @param {{name?: string, inject?: unknown, apply: Function}} plugin
 * @param {{format?: number, settingsRegister?: boolean, headerVersion?: number, logReaders?: boolean}} [options]
 *   `headerVersion`: what the header says (default `format`; a lie tests the spelling retry);
 *   `logReaders: false`: no log reader at all (a contract the plugin cannot meet)
 */
export function newerContract(plugin, options = {}) {
  const format = options.format ?? 3
  const views = new Views(format, options.settingsRegister === true, options)
  return {
    name: plugin.name,
    inject: plugin.inject,
    ...(plugin.Config === undefined ? {} : { Config: plugin.Config }),
    [SHIM]: views,
    apply(ctx, config) {
      return plugin.apply(views.ctx(ctx), config)
    },
  }
}

/** The views of one shimmed plugin (caches keep identities stable). */
class Views {
  constructor(format, settingsRegister, options = {}) {
    this.format = format
    /** The version the header reports (default: the format); a test of the spelling retry lies here. */
    this.headerVersion = options.headerVersion ?? format
    /** `false`: the session offers no log reader at all (neither `events` nor `snapshotEvents`). */
    this.logReaders = options.logReaders !== false
    this.settingsRegister = settingsRegister
    this.sessions = new WeakMap()
    this.agents = new WeakMap()
    this.events = new WeakMap()
    this.headers = new WeakMap()
    this.reals = new WeakMap()
    this.contexts = new WeakMap()
    this.snapshots = new WeakMap()
  }

  /** The real object behind a view (or the object itself). */
  real(value) {
    return (value !== null && typeof value === 'object' && this.reals.get(value)) || value
  }

  event(real) {
    if (real === null || typeof real !== 'object') return real
    const op = real.surfaceOp
    if (op === undefined || op === null || op.op !== 'replace' || !('start' in op)) return real
    let view = this.events.get(real)
    if (view === undefined) {
      const { start, end, ...rest } = op
      view = Object.freeze({ ...real, surfaceOp: Object.freeze({ ...rest, startSeq: start, endSeq: end }) })
      this.events.set(real, view)
      this.reals.set(view, real)
    }
    return view
  }

  header(real) {
    let view = this.headers.get(real)
    if (view === undefined) {
      const { seedLength, ...rest } = real
      view = Object.freeze({ ...rest, version: this.headerVersion, isSeeded: typeof seedLength === 'number' && seedLength > 0 })
      this.headers.set(real, view)
    }
    return view
  }

  snapshot(real) {
    // One frozen array per length of the real log (rc.8's `events` is a new frozen array per append).
    const events = real.events
    let cached = this.snapshots.get(real)
    if (cached === undefined || cached.source !== events) {
      cached = { source: events, view: Object.freeze(events.map(e => this.event(e))) }
      this.snapshots.set(real, cached)
    }
    return cached.view
  }

  session(real) {
    if (real === null || typeof real !== 'object') return real
    let view = this.sessions.get(real)
    if (view !== undefined) return view
    const views = this
    const methods = {
      snapshotEvents(from = 0, to = real.events.length) {
        const all = views.snapshot(real)
        return from === 0 && to === all.length ? all : Object.freeze(all.slice(from, to))
      },
      eventAt(seq) {
        const e = real.events[seq]
        return e === undefined ? undefined : views.event(e)
      },
      append(type, data, opts) {
        return views.event(views.append(real, type, data, opts))
      },
    }
    view = new Proxy(real, {
      get(target, key) {
        if (key === 'events') return undefined
        if (key === 'header') return views.header(target.header)
        if (key === 'seq') return target.events.length
        if (key === 'inheritedEventCount') return target.header.seedLength ?? 0
        if (!views.logReaders && (key === 'snapshotEvents' || key === 'eventAt' || key === 'seq')) return undefined
        if (Object.hasOwn(methods, key)) return methods[key]
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
      has(target, key) {
        if (key === 'events') return false
        return key in methods || key === 'seq' || key === 'inheritedEventCount' || Reflect.has(target, key)
      },
    })
    this.sessions.set(real, view)
    this.reals.set(view, real)
    return view
  }

  append(real, type, data, opts) {
    const op = opts?.surfaceOp
    let translated = op
    if (op !== undefined && op !== null && op.op === 'replace') {
      const keys = Object.keys(op).sort().join(',')
      if (keys !== 'endSeq,op,startSeq' || !Number.isSafeInteger(op.startSeq) || !Number.isSafeInteger(op.endSeq)) {
        throw new Error(`session event "${type}" carries an invalid replace surfaceOp`)
      }
      translated = { op: 'replace', start: op.startSeq, end: op.endSeq }
    }
    if (this.format >= 4 && data?.source?.kind === 'plugin') {
      throw new Error(`session event "${type}" message source kind "plugin" is not admitted in session format 4`)
    }
    return real.append(type, data, opts === undefined ? opts : { ...opts, ...(translated === undefined ? {} : { surfaceOp: translated }) })
  }

  agent(real) {
    if (real === null || typeof real !== 'object') return real
    let view = this.agents.get(real)
    if (view !== undefined) return view
    const views = this
    view = new Proxy(real, {
      get(target, key) {
        if (key === 'session') return views.session(target.session)
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    this.agents.set(real, view)
    this.reals.set(view, real)
    return view
  }

  /** An argument the plugin hands rc.8: views back to their objects, one level deep (`{agent}`). */
  unview(value) {
    if (value === null || typeof value !== 'object') return value
    const real = this.reals.get(value)
    if (real !== undefined) return real
    if (Object.getPrototypeOf(value) === Object.prototype && (value.agent !== undefined || value.session !== undefined)) {
      return { ...value, ...(value.agent !== undefined ? { agent: this.real(value.agent) } : {}), ...(value.session !== undefined ? { session: this.real(value.session) } : {}) }
    }
    return value
  }

  /** An object whose `agent` member is shown as a view (a tool execution, an invocation). */
  withAgent(real) {
    if (real === null || typeof real !== 'object' || real.agent === undefined) return real
    // DSH freezes invocations and executions: a fresh object that inherits every other member.
    const view = Object.create(real)
    Object.defineProperty(view, 'agent', { value: this.agent(real.agent), enumerable: true })
    return view
  }

  agentsService(real) {
    const views = this
    return {
      get: id => views.agent(real.get(id)),
      list: () => real.list().map(a => views.agent(a)),
      async create(options) {
        const meta = options.meta ?? {}
        if (Object.hasOwn(meta, 'seedLength')) throw new Error('session header has invalid field "seedLength"')
        const { isSeeded, ...rest } = meta
        const { inheritedEventCount, ...others } = options
        if (isSeeded === true && !Number.isSafeInteger(inheritedEventCount)) throw new Error('seeded session requires an inherited event count')
        // The seed as the plugin read it (newer spelling) goes to rc.8 in rc.8's own, as a newer
        // host would take its own spelling back.
        const seed = Array.isArray(others.seed) ? others.seed.map(e => views.real(e)) : others.seed
        const handle = await real.create({ ...others, ...(seed === undefined ? {} : { seed }), meta: { ...rest, ...(isSeeded === true ? { seedLength: inheritedEventCount } : {}) } })
        return { agent: views.agent(handle.agent), dispose: () => handle.dispose() }
      },
      resume: async (o) => {
        const handle = await real.resume(o)
        return { agent: views.agent(handle.agent), dispose: () => handle.dispose() }
      },
    }
  }

  sessionsService(real) {
    const views = this
    return new Proxy(real, {
      get(target, key) {
        if (key === 'get') return id => views.session(target.get(id))
        if (key === 'list') return () => target.list().map(s => views.session(s))
        if (key === 'flush') return session => target.flush(views.real(session))
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  settingsService(real) {
    if (this.settingsRegister || real === undefined || real === null) return real
    return new Proxy(real, {
      get(target, key) {
        if (key === 'register') return undefined
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
      has(target, key) {
        return key !== 'register' && Reflect.has(target, key)
      },
    })
  }

  jobsService(real) {
    if (real === undefined || real === null || typeof real.onJobDone !== 'function') return real
    const views = this
    return new Proxy(real, {
      get(target, key) {
        if (key === 'onJobDone') return listener => target.onJobDone((snapshot, owner) => listener(snapshot, views.agent(owner)))
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  service(name, value) {
    if (value === undefined || value === null) return value
    switch (name) {
      case 'agents': return this.agentsService(value)
      case 'sessions': return this.sessionsService(value)
      case 'settings': return this.settingsService(value)
      case 'jobs': return this.jobsService(value)
      default: return value
    }
  }

  /** The listener's arguments as the newer contract shows them. */
  args(name, args) {
    switch (name) {
      case 'agent/created':
      case 'agent/disposed':
        return [args[0] && typeof args[0] === 'object' ? { ...args[0], agent: this.agent(args[0].agent) } : args[0], ...args.slice(1)]
      case 'session/event':
        return [this.session(args[0]), this.event(args[1]), ...args.slice(2)]
      case 'session/created':
      case 'session/disposed':
        return [this.session(args[0]), ...args.slice(1)]
      case 'tools/execute':
      case 'tools/post-execute':
      case 'tools/result':
        return [this.withAgent(args[0]), ...args.slice(1)]
      case 'fs/write-intent':
      case 'fs/edit-intent':
        return [args[0], this.withAgent(args[1]), ...args.slice(2)]
      default:
        return args
    }
  }

  ctx(real) {
    let view = this.contexts.get(real)
    if (view !== undefined) return view
    const views = this
    view = new Proxy(real, {
      get(target, key) {
        switch (key) {
          case 'on':
            return (name, listener, opts) => target.on(name, (...args) => listener(...views.args(name, args)), opts)
          case 'inject':
            return (deps, callback) => target.inject(deps, sub => callback(views.ctx(sub)))
          case 'emit':
            // What the plugin emits reaches rc.8's services with rc.8's objects (an actor's agent).
            return (name, ...args) => target.emit(name, ...args.map(a => views.unview(a)))
          case 'get':
            return name => views.service(name, target.get(name))
          case 'commands': {
            const commands = target.commands
            return { register: def => commands.register({ ...def, handler: inv => def.handler(views.withAgent(inv)) }) }
          }
          case 'agents':
          case 'sessions':
          case 'settings':
          case 'jobs':
            return views.service(key, Reflect.get(target, key))
          default: {
            const value = Reflect.get(target, key)
            // `logger` is a callable service with members of its own (`buffer`, `exporter`): as is.
            return typeof value === 'function' && key !== 'logger' ? value.bind(target) : value
          }
        }
      },
    })
    this.contexts.set(real, view)
    return view
  }
}

/** Whether `plugin` is wrapped by the shim. */
export function isShimmed(plugin) {
  return plugin !== null && typeof plugin === 'object' && SHIM in plugin
}
