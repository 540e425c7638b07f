// The Vercel AI SDK adapter against the real `ai` package and its own mock model (ai/test).
import test from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { generateText, tool, jsonSchema, stepCountIs } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { Policy, Request } from 'toolwarden'
import { aiGuard } from 'toolwarden/adapters/ai'

const FINANCE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'policies', 'finance.warden')
const policy = Policy.fromFile(FINANCE)
const request = new Request({ mode: 'supervised', roles: ['accountant'], permissions: ['invoices.manage'], tenant: 'b-42' })
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
}

function financeTools(ran) {
  const make = (name) =>
    tool({
      description: name,
      inputSchema: jsonSchema({ type: 'object', additionalProperties: true }),
      execute: async (args) => {
        ran.push([name, args])
        return { ok: true, tool: name }
      },
    })
  return Object.fromEntries(['search_invoices', 'get_invoice', 'create_invoice', 'delete_invoice', 'export_business_data'].map((n) => [n, make(n)]))
}

/** A mock model that plays `script`: one response (tool calls or text) per call; records prompts and tools. */
function scripted(script) {
  const seen = []
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      seen.push({ tools: (options.tools || []).map((t) => t.name), prompt: options.prompt })
      const step = script[seen.length - 1] || { text: 'done' }
      if (step.calls) {
        return {
          content: step.calls.map(([toolName, input], i) => ({
            type: 'tool-call',
            toolCallId: `call-${seen.length}-${i}`,
            toolName,
            input: JSON.stringify(input),
          })),
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        }
      }
      return { content: [{ type: 'text', text: step.text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
    },
  })
  return { model, seen }
}

test('the model sees only the tools the policy offers for the query', async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'show invoice 7' })
  const tools = guard.tools(financeTools(ran))
  const { model, seen } = scripted([{ text: 'here it is' }])
  await generateText({ model, tools, prepareStep: guard.prepareStep, prompt: 'show invoice 7' })
  assert.deepEqual(seen[0].tools, ['search_invoices', 'get_invoice'])
  assert.deepEqual(guard.activeTools(tools), ['search_invoices', 'get_invoice'])
})

test('a self-confirming model still reaches the human; the approved call runs without the field', async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'delete invoice 7' })
  const tools = guard.tools(financeTools(ran))
  const call = { invoice_id: 7, business_id: 'b-42', approve_writes: true, confirmed: true }
  const { model, seen } = scripted([{ calls: [['delete_invoice', call]] }, { text: 'deleted' }])
  const first = await generateText({ model, tools, activeTools: guard.activeTools(tools), prompt: 'delete invoice 7', stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [], 'nothing runs before the user approves')
  const approval = first.content.find((p) => p.type === 'tool-approval-request')
  assert.ok(approval, JSON.stringify(first.content))
  assert.equal(approval.toolCall.toolName, 'delete_invoice')

  // The user approves: the SDK executes the call, confirmed against the pending call.
  const messages = [
    { role: 'user', content: 'delete invoice 7' },
    ...first.response.messages,
    { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }] },
  ]
  const second = await generateText({ model, tools, activeTools: guard.activeTools(tools), messages, stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]])
  assert.equal(second.text, 'deleted')
  assert.equal(guard.turn.transactionalCalls, 1)
  assert.equal(seen.length, 2)
})

test('a user who declines keeps the call from running', async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'delete invoice 7' })
  const tools = guard.tools(financeTools(ran))
  const { model } = scripted([{ calls: [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]] }, { text: 'ok, kept it' }])
  const first = await generateText({ model, tools, prompt: 'delete invoice 7' })
  const approval = first.content.find((p) => p.type === 'tool-approval-request')
  const messages = [
    { role: 'user', content: 'delete invoice 7' },
    ...first.response.messages,
    { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: false }] },
  ]
  await generateText({ model, tools, messages, stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [])
  assert.equal(guard.turn.transactionalCalls, 0)
})

test('a denied call becomes a tool error the model reads', async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'show invoice 7' })
  const tools = guard.tools(financeTools(ran))
  // The model calls a tool it was never offered (delete under a read query).
  const { model, seen } = scripted([{ calls: [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]] }, { text: 'sorry' }])
  const result = await generateText({ model, tools, prompt: 'show invoice 7', stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [])
  const error = result.steps[0].content.find((p) => p.type === 'tool-error')
  assert.ok(error, JSON.stringify(result.steps[0].content))
  const blocked = JSON.parse(error.error.message)
  assert.equal(blocked.ok, false)
  assert.equal(blocked.metadata.blocked_by_policy, true)
  assert.equal(blocked.metadata.stage, 'intent')
  // The second model call's prompt carries the error as the tool's result.
  const toolMessage = seen[1].prompt.find((m) => m.role === 'tool')
  assert.match(JSON.stringify(toolMessage), /blocked_by_policy/)
})

test('an allowed call runs at once', async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'show invoice 7' })
  const tools = guard.tools(financeTools(ran))
  const { model } = scripted([{ calls: [['get_invoice', { invoice_id: 7, business_id: 'b-42' }]] }, { text: 'here' }])
  const result = await generateText({ model, tools, prompt: 'show invoice 7', stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [['get_invoice', { invoice_id: 7, business_id: 'b-42' }]])
  assert.equal(result.text, 'here')
})

// A tool's own `needsApproval` is composed with the policy's: approval when either asks.

/** The finance tools with `needsApproval` set on `name` to `own`. */
function withOwnApproval(ran, name, own) {
  const tools = financeTools(ran)
  tools[name] = { ...tools[name], needsApproval: own }
  return tools
}

/** The approval requests of a generateText result, as [toolName, input] pairs. */
function approvalRequests(result) {
  return result.content.filter((p) => p.type === 'tool-approval-request').map((p) => [p.toolCall.toolName, p.toolCall.input])
}

test("a tool's own needsApproval: true asks the user for a call the policy allows", async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'show invoice 7' })
  const tools = guard.tools(withOwnApproval(ran, 'get_invoice', true))
  const call = { invoice_id: 7, business_id: 'b-42' }
  const { model } = scripted([{ calls: [['get_invoice', call]] }, { text: 'here' }])
  const first = await generateText({ model, tools, prompt: 'show invoice 7', stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [])
  assert.deepEqual(approvalRequests(first), [['get_invoice', call]])

  const approval = first.content.find((p) => p.type === 'tool-approval-request')
  const messages = [
    { role: 'user', content: 'show invoice 7' },
    ...first.response.messages,
    { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }] },
  ]
  const second = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [['get_invoice', call]])
  assert.equal(second.text, 'here')
  // A read-only call: nothing counted against the turn's transactional limit.
  assert.equal(guard.turn.transactionalCalls, 0)
})

test("a tool's own needsApproval function decides for allowed calls, and may return a promise", async () => {
  const ran = []
  const seenByOwn = []
  const own = async (input, options) => {
    seenByOwn.push([input.invoice_id, typeof options.toolCallId])
    return input.invoice_id === 8
  }
  const guard = aiGuard(policy, { request, query: 'show invoices 7 and 8' })
  const tools = guard.tools(withOwnApproval(ran, 'get_invoice', own))
  const seven = { invoice_id: 7, business_id: 'b-42' }
  const eight = { invoice_id: 8, business_id: 'b-42' }
  const { model } = scripted([{ calls: [['get_invoice', seven], ['get_invoice', eight]] }, { text: 'here' }])
  const first = await generateText({ model, tools, prompt: 'show invoices 7 and 8', stopWhen: stepCountIs(3) })
  assert.deepEqual(seenByOwn, [[7, 'string'], [8, 'string']])
  assert.deepEqual(ran, [['get_invoice', seven]])
  assert.deepEqual(approvalRequests(first), [['get_invoice', eight]])
})

test("a tool's own needsApproval: false does not skip the confirmation the policy asks for", async () => {
  const ran = []
  let asked = 0
  const guard = aiGuard(policy, { request, query: 'delete invoice 7' })
  const tools = guard.tools(
    withOwnApproval(ran, 'delete_invoice', () => {
      asked += 1
      return false
    }),
  )
  const call = { invoice_id: 7, business_id: 'b-42' }
  const { model } = scripted([{ calls: [['delete_invoice', call]] }, { text: 'deleted' }])
  const first = await generateText({ model, tools, prompt: 'delete invoice 7', stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [])
  assert.deepEqual(approvalRequests(first), [['delete_invoice', call]])
  // The policy asked already: the tool's own rule is not consulted.
  assert.equal(asked, 0)
})

test("a tool's own needsApproval never puts a call the policy denies to the user", async () => {
  const ran = []
  const guard = aiGuard(policy, { request, query: 'show invoice 7' })
  const tools = guard.tools(withOwnApproval(ran, 'delete_invoice', true))
  const { model } = scripted([{ calls: [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]] }, { text: 'sorry' }])
  const result = await generateText({ model, tools, prompt: 'show invoice 7', stopWhen: stepCountIs(3) })
  assert.deepEqual(ran, [])
  assert.deepEqual(approvalRequests(result), [])
  const error = result.steps[0].content.find((p) => p.type === 'tool-error')
  assert.ok(error, JSON.stringify(result.steps[0].content))
  assert.equal(JSON.parse(error.error.message).metadata.stage, 'intent')
})

test("a tool's own needsApproval of the wrong type is a TypeError", () => {
  const guard = aiGuard(policy, { request, query: 'show invoice 7' })
  assert.throws(() => guard.tools(withOwnApproval([], 'get_invoice', 'yes')), {
    name: 'TypeError',
    message: 'the needsApproval of tool get_invoice must be a boolean or a function, not string',
  })
  assert.throws(() => guard.needsApproval('get_invoice', 1), {
    name: 'TypeError',
    message: 'the needsApproval of tool get_invoice must be a boolean or a function, not number',
  })
})
