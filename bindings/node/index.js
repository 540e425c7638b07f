'use strict'
// toolwarden for Node.js: which tools an AI agent may see and call, decided by a policy.
//
// The compiled addon (binding.js loads it) implements everything; this module adds the error
// classes, maps `offer` results back to the caller's own tool objects (names or schemas, in
// input order) and prepared tool sets (`policy.tools(items)`).

const native = require('./binding.js')

const { Policy, PolicyWatcher, Request, Intent, Turn, PendingCall, Verdict, ToolSet } = native

/** A policy failed to load: `message` is the rendered report, `diagnostics` every diagnostic. */
class PolicyError extends Error {
  constructor(message, diagnostics) {
    super(message)
    this.name = 'PolicyError'
    this.code = 'PolicyError'
    this.diagnostics = diagnostics || []
  }
}

/** The request names a mode, tier or intent the policy does not declare (or no mode at all). */
class RequestError extends Error {
  constructor(message) {
    super(message)
    this.name = 'RequestError'
    this.code = 'RequestError'
  }
}

Object.defineProperty(PolicyError.prototype, 'name', { value: 'PolicyError' })
Object.defineProperty(RequestError.prototype, 'name', { value: 'RequestError' })

// The addon throws plain Errors tagged with `code`; give them their class (stack kept).
function classify(e) {
  if (e !== null && typeof e === 'object') {
    if (e.code === 'PolicyError' && !(e instanceof PolicyError)) {
      Object.setPrototypeOf(e, PolicyError.prototype)
      if (!Array.isArray(e.diagnostics)) e.diagnostics = []
    } else if (e.code === 'RequestError' && !(e instanceof RequestError)) {
      Object.setPrototypeOf(e, RequestError.prototype)
    }
  }
  return e
}

function wrapStatic(cls, name) {
  const raw = cls[name]
  Object.defineProperty(cls, name, {
    value: {
      [name](a, b) {
        try {
          return raw.call(this, a, b)
        } catch (e) {
          throw classify(e)
        }
      },
    }[name],
    writable: true,
    configurable: true,
  })
}

function wrapMethod(cls, name) {
  const raw = cls.prototype[name]
  Object.defineProperty(cls.prototype, name, {
    value: {
      [name](a, b, c, d) {
        try {
          return raw.call(this, a, b, c, d)
        } catch (e) {
          throw classify(e)
        }
      },
    }[name],
    writable: true,
    configurable: true,
  })
}

// The asynchronous loaders: a promise whatever happens (a wrong type rejects with TypeError,
// a policy that does not load with PolicyError), the error classified as the sync ones are.
function wrapAsyncStatic(cls, name) {
  const raw = cls[name]
  Object.defineProperty(cls, name, {
    value: {
      [name](a, b) {
        let promise
        try {
          promise = raw.call(this, a, b)
        } catch (e) {
          return Promise.reject(classify(e))
        }
        return promise.then(undefined, (e) => {
          throw classify(e)
        })
      },
    }[name],
    writable: true,
    configurable: true,
  })
}

for (const name of ['fromFile', 'parse', 'fromYaml', 'watch']) wrapStatic(Policy, name)
for (const name of ['fromFileAsync', 'parseAsync', 'fromYamlAsync']) wrapAsyncStatic(Policy, name)
for (const name of ['explain', 'checkCall']) wrapMethod(Policy, name)
wrapMethod(PolicyWatcher, 'reloadNow')

// The items a prepared set was made from, returned by `offer` (kept off the native object).
const itemsOf = new WeakMap()

const rawOffer = Policy.prototype.offerIndices
const rawOfferSchemas = Policy.prototype.offerSchemaIndices

// One scratch buffer for the visible indexes, grown as needed: evaluation is synchronous, so
// no two calls ever share it at once.
let scratch = new Uint32Array(256)

function visible(policy, raw, request, tools, options, items) {
  if (!Array.isArray(items)) {
    throw new TypeError(`tools must be an array of tool names or tool schema objects, or a ToolSet, not ${describe(items)}`)
  }
  if (scratch.length < items.length) scratch = new Uint32Array(items.length)
  let query, intent
  if (options !== undefined && options !== null) {
    if (typeof options !== 'object') throw new TypeError(`options must be an options object, not ${describe(options)}`)
    query = options.query
    intent = options.intent
  }
  const n = raw.call(policy, request, tools, query, intent, scratch)
  const out = new Array(n)
  for (let i = 0; i < n; i++) out[i] = items[scratch[i]]
  return out
}

function allStrings(tools) {
  for (let i = 0; i < tools.length; i++) if (typeof tools[i] !== 'string') return false
  return true
}

Object.defineProperties(Policy.prototype, {
  /**
   * The tools the model may see (decision allow or confirm), in input order, as the very items
   * given: an array of tool names and/or tool schema objects (OpenAI, Anthropic, MCP), or a
   * prepared `ToolSet` from `policy.tools(items)`.
   */
  offer: {
    value: function offer(request, tools, options) {
      try {
        if (tools instanceof ToolSet) return visible(this, rawOffer, request, tools, options, itemsOf.get(tools))
        if (Array.isArray(tools) && !allStrings(tools)) return visible(this, rawOfferSchemas, request, tools, options, tools)
        return visible(this, rawOffer, request, tools, options, tools)
      } catch (e) {
        throw classify(e)
      }
    },
    writable: true,
    configurable: true,
  },
  /** `offer` for tool schema objects (names allowed too): the visible schemas, unchanged. */
  offerSchemas: {
    value: function offerSchemas(request, schemas, options) {
      try {
        const items = schemas instanceof ToolSet ? itemsOf.get(schemas) : schemas
        return visible(this, rawOfferSchemas, request, schemas, options, items)
      } catch (e) {
        throw classify(e)
      }
    },
    writable: true,
    configurable: true,
  },
  /**
   * A prepared tool set: `items` (tool names and/or schema objects) read once, for `offer` and
   * `offerSchemas` on every turn. The set keeps a frozen copy of the array.
   */
  tools: {
    value: function tools(items) {
      if (!Array.isArray(items)) {
        throw new TypeError(`tools must be an array of tool names or tool schema objects, not ${describe(items)}`)
      }
      const copy = Object.freeze(items.slice())
      const set = allStrings(copy) ? ToolSet.fromNames(copy) : ToolSet.fromSchemas(copy)
      itemsOf.set(set, copy)
      return set
    },
    writable: true,
    configurable: true,
  },
})

Object.defineProperty(ToolSet.prototype, 'items', {
  /** The items the set was made from, in order (a frozen array). */
  get() {
    return itemsOf.get(this) || Object.freeze(this.names)
  },
  configurable: true,
})

// Sets made directly with ToolSet.fromNames / fromSchemas offer their names / schemas too.
for (const name of ['fromNames', 'fromSchemas']) {
  const raw = ToolSet[name]
  Object.defineProperty(ToolSet, name, {
    value: {
      [name](items) {
        const set = raw.call(this, items)
        if (!itemsOf.has(set)) itemsOf.set(set, Object.freeze(Array.from(items)))
        return set
      },
    }[name],
    writable: true,
    configurable: true,
  })
}

function describe(v) {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  return typeof v
}

module.exports = {
  Policy,
  PolicyWatcher,
  Request,
  Intent,
  Turn,
  PendingCall,
  Verdict,
  ToolSet,
  PolicyError,
  RequestError,
  version: require('./package.json').version,
}
