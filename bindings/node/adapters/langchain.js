'use strict'
// LangChain.js v1 (`langchain`): the human-in-the-loop middleware's `interruptOn`, with a `when`
// predicate backed by the policy, and tools whose body judges the call again when it runs.
//
//   const guard = langchainGuard(policy, { request, query: userText })
//   const tools = guard.tools([getInvoice, deleteInvoice])
//   const agent = createAgent({ model, tools, checkpointer,
//     middleware: [humanInTheLoopMiddleware({ interruptOn: guard.interruptOn(tools) })] })
//
// The middleware pauses a call the policy holds for confirmation; the human's approve (or edit:
// the edited call is the human's own) lets it run, confirmed by the runtime; reject keeps it from
// running. The model's own confirmation fields are stripped before the predicate, so a model
// that confirms itself still reaches the human.

const { TurnGuard } = require('./core.js')

class LangchainGuard extends TurnGuard {
  constructor(policy, options) {
    super(policy, options)
    // Tool call ids the middleware paused (only a paused call can come back approved).
    this.paused = new Set()
  }

  /** The `when` predicate: pause the call when the policy says `confirm`. */
  when(request) {
    const call = request && request.toolCall
    if (!call || typeof call.name !== 'string') return true // unreadable: ask the human
    const verdict = this.judge(call.name, call.args)
    if (verdict.decision === 'confirm') {
      if (call.id) this.paused.add(call.id)
      return true
    }
    return false // allow runs; deny is refused by the tool body with the blocked result
  }

  /** `interruptOn` for humanInTheLoopMiddleware: every tool of `tools` (or names). */
  interruptOn(tools, { allowedDecisions = ['approve', 'edit', 'reject'] } = {}) {
    const out = {}
    for (const t of tools) {
      const name = typeof t === 'string' ? t : t.name
      out[name] = { allowedDecisions, when: (request) => this.when(request) }
    }
    return out
  }

  /** `t` (a LangChain tool) as a tool of the same name and schema whose body is guarded. */
  tool(t) {
    const { tool } = require('@langchain/core/tools')
    const guard = this
    return tool(
      async (input, config) => {
        const id = config && config.toolCall && config.toolCall.id
        // A paused call runs only after the human approved it (or edited it: then the edited
        // arguments are the human's own call): confirm it against the call as it runs now.
        const pending = id && guard.paused.has(id) ? guard.judge(t.name, input).pending : undefined
        if (id) guard.paused.delete(id)
        let verdict
        try {
          verdict = guard.execute(t.name, input, pending || undefined)
        } catch (e) {
          return JSON.stringify({ ok: false, error: e.message, metadata: { blocked_by_policy: true } })
        }
        if (verdict.decision !== 'allow') return JSON.stringify(verdict.toJSON())
        return t.invoke(verdict.argsForExecution, config)
      },
      { name: t.name, description: t.description, schema: t.schema },
    )
  }

  /** Every tool of `tools`, guarded. */
  tools(tools) {
    return tools.map((t) => this.tool(t))
  }
}

/** A LangChain guard for one user turn: `langchainGuard(policy, { request, query | intent, turn })`. */
function langchainGuard(policy, options) {
  return new LangchainGuard(policy, options)
}

module.exports = { langchainGuard, LangchainGuard }
