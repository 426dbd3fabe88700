/*
 * TEST SHIM — a `uiConversation`-shaped chat service built over the real DSH 0.1.0-rc.8 client
 * services. It is NOT a DSH 0.1.2+/0.2 client: no later DSH is installable here, so this shim lets
 * the browser test run the plugin's 0.1.2+ code path against a real rc.8 page.
 *
 * tests/web/e2e.mjs (mode `degraded`) prepends this file to the plugin's served client bundle and
 * renames the bundle's `window.__ModuleLoader__.load(` call to `window.__dshPromptRewindChatShim.load(`,
 * which hands the plugin's `apply` a context where, as on a 0.1.5+ client:
 *   - `conversationEvents` and `settingsScope` are gone (`get` answers undefined; an `inject`
 *     waiting for them never runs);
 *   - the session face's snapshot has no `chat` field;
 *   - `uiConversation` exists with the shape read from zq0929/deepseek-harness @
 *     5593cc250aae228449197efd2413192165e3377f (packages/client/ui-conversation/README.md,
 *     packages/client/ui-chat/src/client/contract/snapshot.ts):
 *       uiConversation.binding(sessionId).target('chat') → { getSnapshot() → { order, nodes }, subscribe }
 *       uiConversation.events.register(definition) → disposer
 *     Here `nodes` is the real rc.8 chat node store of the session, `subscribe` the real face's,
 *     and `events.register` forwards to the real rc.8 `conversationEvents` registry (which is what
 *     builds that store on rc.8).
 * Everything else is the real rc.8 context.
 */
;(function () {
  if (window.__dshPromptRewindChatShim !== undefined) return
  var hidden = { conversationEvents: true, settingsScope: true }
  var faces = new WeakMap()

  function realGet (ctx, name) {
    try { return ctx.get(name) } catch (e) { return undefined }
  }

  // The rc.8 face minus its `chat` field (0.1.2+ moved the chat out of the face).
  function faceWithoutChat (face) {
    if (face === undefined || face === null) return face
    var known = faces.get(face)
    if (known !== undefined) return known
    var snapshots = new WeakMap()
    var shim = {
      getSnapshot: function () {
        var snapshot = face.getSnapshot()
        if (snapshot === null || typeof snapshot !== 'object') return snapshot
        var copy = snapshots.get(snapshot)
        if (copy === undefined) {
          copy = Object.assign({}, snapshot)
          delete copy.chat
          snapshots.set(snapshot, copy)
        }
        return copy
      },
      subscribe: function (listener) { return face.subscribe(listener) },
    }
    if (typeof face.readAttachment === 'function') shim.readAttachment = function (id) { return face.readAttachment(id) }
    faces.set(face, shim)
    return shim
  }

  function sessionsShim (sessions) {
    if (sessions === undefined) return undefined
    return {
      list: sessions.list,
      open: function (id) { return sessions.open(id) },
      refresh: function () { return sessions.refresh() },
      binding: function (id) {
        var binding = sessions.binding(id)
        return binding === undefined ? undefined : { ctx: binding.ctx, session: faceWithoutChat(binding.session) }
      },
    }
  }

  function uiConversationShim (sessions, conversationEvents) {
    if (sessions === undefined || conversationEvents === undefined) return undefined
    return {
      binding: function (sessionId) {
        var binding = sessions.binding(sessionId)
        if (binding === undefined) throw new Error('[chat shim] no session binding for ' + sessionId)
        var face = binding.session
        return {
          target: function (name) {
            if (name !== 'chat') return undefined
            return {
              getSnapshot: function () {
                var chat = face.getSnapshot().chat
                return chat === undefined ? undefined : { order: [], nodes: chat.nodes }
              },
              subscribe: function (listener) { return face.subscribe(listener) },
            }
          },
        }
      },
      events: { register: function (definition) { return conversationEvents.register(definition) } },
    }
  }

  function shimContext (ctx) {
    function get (name) {
      if (hidden[name]) return undefined
      if (name === 'sessions') return sessionsShim(realGet(ctx, 'sessions'))
      if (name === 'uiConversation') return uiConversationShim(realGet(ctx, 'sessions'), realGet(ctx, 'conversationEvents'))
      return realGet(ctx, name)
    }
    return new Proxy(ctx, {
      get: function (target, prop) {
        if (prop === 'get') return get
        if (prop === 'inject') {
          return function (deps, fn) {
            // A retired service never arrives; the shimmed ones wait for the real services behind them.
            if (deps.some(function (d) { return hidden[d] })) return undefined
            var real = []
            deps.forEach(function (d) {
              if (d === 'uiConversation') real.push('sessions', 'conversationEvents')
              else real.push(d)
            })
            return target.inject(real, function (sub) { return fn(shimContext(sub)) })
          }
        }
        var value = Reflect.get(target, prop, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  window.__dshPromptRewindChatShim = {
    active: true,
    load: function (registration) {
      var factory = registration.factory
      return window.__ModuleLoader__.load({
        id: registration.id,
        factory: function (require) {
          var exports = factory(require)
          var wrapped = Object.assign({}, exports)
          wrapped.apply = function (ctx, config) { return exports.apply(shimContext(ctx), config) }
          return wrapped
        },
      })
    },
  }
})()
