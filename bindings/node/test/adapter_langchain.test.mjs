// The LangChain.js adapter against the real `langchain` v1 agent, its human-in-the-loop
// middleware, and @langchain/core's fake chat model (`fakeModel` from @langchain/core/testing).
import test from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import { createAgent, humanInTheLoopMiddleware } from 'langchain'
import { tool } from '@langchain/core/tools'
import { AIMessage } from '@langchain/core/messages'
import { fakeModel } from '@langchain/core/testing'
import { MemorySaver, Command } from '@langchain/langgraph'
import { Policy, Request } from 'toolwarden'
import { langchainGuard } from 'toolwarden/adapters/langchain'

const FINANCE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'policies', 'finance.warden')
const policy = Policy.fromFile(FINANCE)
const request = new Request({ mode: 'supervised', roles: ['accountant'], permissions: ['invoices.manage'], tenant: 'b-42' })

function setup(query, calls, ran) {
  const schema = z.object({ invoice_id: z.number(), business_id: z.string(), approve_writes: z.boolean().optional() })
  const make = (name) =>
    tool(
      async (args) => {
        ran.push([name, args])
        return `${name} ran`
      },
      { name, description: name, schema },
    )
  const guard = langchainGuard(policy, { request, query })
  const tools = guard.tools([make('get_invoice'), make('delete_invoice')])
  const model = fakeModel()
    .respondWithTools(calls.map(([name, args], i) => ({ name, args, id: `call_${i}` })))
    .respond(new AIMessage('done'))
  const agent = createAgent({
    model,
    tools,
    checkpointer: new MemorySaver(),
    middleware: [humanInTheLoopMiddleware({ interruptOn: guard.interruptOn(tools) })],
  })
  return { agent, guard }
}

const config = (id) => ({ configurable: { thread_id: id } })

test('approve: a self-confirming call is paused for the human, then runs without the field', async () => {
  const ran = []
  const { agent } = setup('delete invoice 7', [['delete_invoice', { invoice_id: 7, business_id: 'b-42', approve_writes: true }]], ran)
  const first = await agent.invoke({ messages: [{ role: 'user', content: 'delete invoice 7' }] }, config('a'))
  assert.ok(first.__interrupt__ && first.__interrupt__.length === 1, 'the call is paused')
  assert.deepEqual(ran, [])
  await agent.invoke(new Command({ resume: { decisions: [{ type: 'approve' }] } }), config('a'))
  assert.deepEqual(ran, [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]])
})

test('edit: the edited call is the human own and runs; reject: nothing runs', async () => {
  const ran = []
  const { agent } = setup('delete invoice 7', [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]], ran)
  await agent.invoke({ messages: [{ role: 'user', content: 'delete invoice 7' }] }, config('e'))
  await agent.invoke(
    new Command({ resume: { decisions: [{ type: 'edit', editedAction: { name: 'delete_invoice', args: { invoice_id: 8, business_id: 'b-42' } } }] } }),
    config('e'),
  )
  assert.deepEqual(ran, [['delete_invoice', { invoice_id: 8, business_id: 'b-42' }]])

  const kept = []
  const r = setup('delete invoice 7', [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]], kept)
  await r.agent.invoke({ messages: [{ role: 'user', content: 'delete invoice 7' }] }, config('r'))
  await r.agent.invoke(new Command({ resume: { decisions: [{ type: 'reject', message: 'no' }] } }), config('r'))
  assert.deepEqual(kept, [])
})

test('allowed calls run without a pause; denied ones return the blocked result', async () => {
  const ran = []
  const { agent } = setup(
    'show invoice 7',
    [
      ['get_invoice', { invoice_id: 7, business_id: 'b-42' }],
      ['delete_invoice', { invoice_id: 7, business_id: 'b-42' }],
    ],
    ran,
  )
  const out = await agent.invoke({ messages: [{ role: 'user', content: 'show invoice 7' }] }, config('d'))
  assert.equal(out.__interrupt__, undefined)
  assert.deepEqual(ran, [['get_invoice', { invoice_id: 7, business_id: 'b-42' }]])
  const blocked = out.messages.find((m) => m.tool_call_id === 'call_1')
  assert.equal(JSON.parse(blocked.content).metadata.stage, 'intent')
})
