'use strict'
// OpenAI Agents JS (`@openai/agents`): every function tool gets a `needsApproval` backed by the
// policy and an `invoke` that judges the call again when it runs; the agent of each user turn
// sees only the tools the policy offers.
//
//   const guard = agentsGuard(policy, { request })
//   const agent = new Agent({ name, model, tools: guard.tools([getInvoice, deleteInvoice]) })
//   const context = guard.context(userText)
//   let result = await run(guard.agentFor(agent, userText), userText, { context })
//   while (result.interruptions.length) {          // held by the policy: ask the user
//     for (const item of result.interruptions) userSaysYes(item) ? result.state.approve(item) : result.state.reject(item)
//     result = await run(guard.agentFor(agent, userText), result.state)
//   }
//
// The held call is kept in the run context (`context.toolwarden.held`, by call id), so it
// travels with `result.state.toString()` / `RunState.fromString(...)`. A call runs only after
// `approve` (the user's yes), confirmed against its pending call; the model's own confirmation
// fields are stripped first, so a model that confirms itself still reaches the human.

const { TurnGuard, PendingCall } = require('./core.js')
const { Turn } = require('../index.js')

class AgentsGuard {
  constructor(policy, { request } = {}) {
    this.policy = policy
    this.request = request
    // Validates the policy and request once.
    new TurnGuard(policy, { request })
  }

  /** The run context of one user turn: pass as `run(agent, input, { context })`. */
  context(query, extra = {}) {
    if (typeof query !== 'string') throw new TypeError('query must be a string')
    return { ...extra, toolwarden: { query, held: {}, transactional_calls: 0 } }
  }

  /** A guard over one turn's state (kept in the run context). */
  turnOf(runContext) {
    const state = runContext && runContext.context && runContext.context.toolwarden
    if (!state || typeof state.query !== 'string') {
      throw new TypeError('the run context was not made by guard.context(query)')
    }
    const turn = new Turn(state.transactional_calls || 0)
    return { state, guard: new TurnGuard(this.policy, { request: this.request, query: state.query, turn }) }
  }

  /** `agent` cloned with only the tools the policy offers for `query`. */
  agentFor(agent, query) {
    const guard = new TurnGuard(this.policy, { request: this.request, query })
    const tools = agent.tools || []
    const shown = new Set(guard.visible(tools.map((t) => t.name)))
    return agent.clone({ tools: tools.filter((t) => shown.has(t.name)) })
  }

  /** `tool` (a function tool from `tool({...})`) with the policy's approval and guard. */
  tool(t) {
    if (!t || t.type !== 'function' || typeof t.invoke !== 'function') return t
    const name = t.name
    const invoke = t.invoke
    return {
      ...t,
      needsApproval: async (runContext, input, callId) => {
        const { state, guard } = this.turnOf(runContext)
        const verdict = guard.judge(name, input)
        if (verdict.decision === 'confirm') {
          if (callId) state.held[callId] = verdict.pending.toJSON()
          return true
        }
        return false // allow runs; deny is refused by invoke with the blocked result
      },
      invoke: async (runContext, input, details) => {
        const { state, guard } = this.turnOf(runContext)
        const callId = details && details.toolCall && details.toolCall.callId
        const held = callId ? state.held[callId] : undefined
        if (callId) delete state.held[callId]
        let verdict
        try {
          // Parsed strictly (duplicate keys, deep nesting refused); the runner invokes a held
          // call only after `approve`: that is the user's yes.
          verdict = guard.execute(name, input || '{}', held ? PendingCall.fromJSON(held) : undefined)
        } catch (e) {
          return JSON.stringify({ ok: false, error: e.message, metadata: { blocked_by_policy: true } })
        }
        state.transactional_calls = guard.turn.transactionalCalls
        if (verdict.decision !== 'allow') return JSON.stringify(verdict.toJSON())
        return invoke(runContext, JSON.stringify(verdict.argsForExecution), details)
      },
    }
  }

  /** Every tool of `tools`, guarded. */
  tools(tools) {
    return tools.map((t) => this.tool(t))
  }
}

/** An OpenAI Agents JS guard: `agentsGuard(policy, { request })`. */
function agentsGuard(policy, options) {
  return new AgentsGuard(policy, options)
}

module.exports = { agentsGuard, AgentsGuard }
