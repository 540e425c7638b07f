'use strict'
// Vercel AI SDK (`ai`): per tool a `needsApproval` function backed by the policy, the tools a
// step may see (`activeTools` / `prepareStep`), and `execute` guarded so a deny becomes a tool
// error the model reads.
//
//   const guard = aiGuard(policy, { request, query: userText })
//   const tools = guard.tools(myTools)
//   await generateText({ model, tools, activeTools: guard.activeTools(tools), messages, stopWhen })
//
// A call the policy holds for confirmation comes back as a `tool-approval-request`; the user's
// `tool-approval-response` lets the SDK execute it, and only then is it confirmed (the model's own
// `confirmed: true` never counts).

const { TurnGuard, ToolBlockedError } = require('./core.js')

/** The toolCallIds the user approved, read from AI SDK messages (request id -> call id). */
function approvedCallIds(messages) {
  const callOf = new Map()
  const approved = new Set()
  for (const m of Array.isArray(messages) ? messages : []) {
    if (!Array.isArray(m && m.content)) continue
    for (const part of m.content) {
      if (m.role === 'assistant' && part && part.type === 'tool-approval-request') callOf.set(part.approvalId, part.toolCallId)
    }
  }
  for (const m of Array.isArray(messages) ? messages : []) {
    if (m.role !== 'tool' || !Array.isArray(m.content)) continue
    for (const part of m.content) {
      if (part && part.type === 'tool-approval-response' && part.approved === true && callOf.has(part.approvalId)) {
        approved.add(callOf.get(part.approvalId))
      }
    }
  }
  return approved
}

class AiGuard extends TurnGuard {
  constructor(policy, options) {
    super(policy, options)
    // toolCallId -> the pending call the approval request was raised for.
    this.pending = new Map()
    this.lastTools = {}
  }

  /** The names of `tools` (an AI SDK tool set) the model may see: pass as `activeTools`. */
  activeTools(tools) {
    return this.visible(Object.keys(tools || this.lastTools))
  }

  /** A `prepareStep` for generateText / streamText: each step sees only the visible tools. */
  get prepareStep() {
    return () => ({ activeTools: this.activeTools(this.lastTools) })
  }

  /**
   * The `needsApproval` function of tool `name`: true when the policy asks the user, or when
   * the tool's own `own` rule (a boolean, or a function of the input and call options that may
   * return a promise) asks for approval of a call the policy allows. A call the policy denies
   * is never put to the user: `execute` refuses it with the reason, which the model reads.
   */
  needsApproval(name, own) {
    if (own !== undefined && own !== null && typeof own !== 'boolean' && typeof own !== 'function') {
      throw new TypeError(`the needsApproval of tool ${name} must be a boolean or a function, not ${Array.isArray(own) ? 'array' : typeof own}`)
    }
    return (input, options = {}) => {
      const verdict = this.judge(name, input)
      if (verdict.decision === 'confirm') {
        if (options.toolCallId) this.pending.set(options.toolCallId, verdict.pending)
        return true
      }
      if (verdict.decision !== 'allow') return false
      // The policy allows it: the tool's own rule may still ask the user.
      if (typeof own === 'function') return own(input, options)
      return own === true
    }
  }

  /**
   * `tools` with `needsApproval` and a guarded `execute` on every tool (a new object). A tool's
   * own `needsApproval` is kept and composed with the policy's: approval is asked when either
   * asks for it.
   */
  tools(tools) {
    const out = {}
    for (const [name, tool] of Object.entries(tools)) {
      const execute = tool.execute
      out[name] = {
        ...tool,
        needsApproval: this.needsApproval(name, tool.needsApproval),
        execute: async (input, options = {}) => {
          let pending = this.pending.get(options.toolCallId)
          if (!pending && approvedCallIds(options.messages).has(options.toolCallId)) {
            pending = this.judge(name, input).pending
          }
          this.pending.delete(options.toolCallId)
          const args = this.authorize(name, input, pending || undefined)
          if (typeof execute !== 'function') throw new TypeError(`tool ${name} has no execute function`)
          return execute(args, options)
        },
      }
    }
    this.lastTools = out
    return out
  }
}

/** An AI SDK guard for one user turn: `aiGuard(policy, { request, query | intent, turn })`. */
function aiGuard(policy, options) {
  return new AiGuard(policy, options)
}

module.exports = { aiGuard, AiGuard, ToolBlockedError, approvedCallIds }
