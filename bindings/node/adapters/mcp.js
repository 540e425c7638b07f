'use strict'
// MCP TypeScript SDK client: a wrapper around a connected `Client` whose `listTools` returns
// only the tools the policy offers (MCP annotations may only hide a tool, never show one) and
// whose `callTool` judges each call before it reaches the server.
//
//   const guarded = mcpGuard(client, policy, { request, query: userText })
//   const { tools } = await guarded.listTools()
//   const result = await guarded.callTool({ name, arguments: args })
//
// A blocked call never reaches the server: the result is an MCP tool error (`isError: true`)
// whose text is the policy's JSON result, with that result in `_meta.toolwarden`. A call held
// for confirmation carries `_meta.toolwarden.pending_call`; once the user approves, repeat it
// with `callTool(params, { approved: PendingCall.fromJSON(pending_call) })`.

const { TurnGuard, PendingCall } = require('./core.js')

function blockedResult(verdict) {
  const json = verdict.toJSON()
  return {
    content: [{ type: 'text', text: JSON.stringify(json) }],
    isError: true,
    _meta: { toolwarden: json },
  }
}

class McpGuard extends TurnGuard {
  constructor(client, policy, options) {
    super(policy, options)
    if (!client || typeof client.listTools !== 'function' || typeof client.callTool !== 'function') {
      throw new TypeError('client must be an MCP Client (with listTools and callTool)')
    }
    this.client = client
    // Names the server listed that the policy (or their annotations) hid.
    this.hidden = new Set()
  }

  /** `client.listTools(...)` with `tools` filtered by the policy, in the server's order. */
  async listTools(params, options) {
    const listed = await this.client.listTools(params, options)
    const tools = Array.isArray(listed.tools) ? listed.tools : []
    const shown = this.policy.offerSchemas(this.request, tools, this.options)
    const visible = new Set(shown)
    for (const t of tools) if (!visible.has(t)) this.hidden.add(t.name)
    for (const t of shown) this.hidden.delete(t.name)
    return { ...listed, tools: shown }
  }

  /**
   * `client.callTool(params, ...)` once the policy allows the call; otherwise the blocked
   * result, without contacting the server. `approved` is the pending call the user approved.
   */
  async callTool(params, { approved, resultSchema, requestOptions } = {}) {
    if (!params || typeof params.name !== 'string') throw new TypeError('params.name must be a string')
    const args = params.arguments === undefined ? {} : params.arguments
    if (approved !== undefined && !(approved instanceof PendingCall)) {
      throw new TypeError('approved must be a PendingCall')
    }
    if (this.hidden.has(params.name)) {
      // Listed, then hidden (by the policy or by its annotations): never called, even when its
      // name alone would pass.
      return {
        content: [{ type: 'text', text: `\`${params.name}\` was not offered for this request; it is not called` }],
        isError: true,
      }
    }
    const verdict = this.execute(params.name, args, approved)
    if (verdict.decision !== 'allow') return blockedResult(verdict)
    return this.client.callTool({ ...params, arguments: verdict.argsForExecution }, resultSchema, requestOptions)
  }
}

/** An MCP client guard for one user turn: `mcpGuard(client, policy, { request, query | intent, turn })`. */
function mcpGuard(client, policy, options) {
  return new McpGuard(client, policy, options)
}

module.exports = { mcpGuard, McpGuard }
