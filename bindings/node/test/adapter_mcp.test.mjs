// The MCP client wrapper against the real MCP TypeScript SDK: an McpServer and a Client joined
// by the SDK's InMemoryTransport.
import test from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { Policy, Request, PendingCall } from 'toolwarden'
import { mcpGuard } from 'toolwarden/adapters/mcp'

const FINANCE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'policies', 'finance.warden')
const policy = Policy.fromFile(FINANCE)
const request = new Request({ mode: 'supervised', roles: ['accountant'], permissions: ['invoices.manage'], tenant: 'b-42' })

async function connected() {
  const calls = []
  const server = new McpServer({ name: 'finance', version: '1.0.0' })
  const shape = { invoice_id: z.number().optional(), business_id: z.string().optional(), approve_writes: z.boolean().optional() }
  const register = (name, annotations) =>
    server.registerTool(name, { description: name, inputSchema: shape, annotations }, async (args) => {
      calls.push([name, args])
      return { content: [{ type: 'text', text: `${name} ran` }] }
    })
  register('search_invoices', { readOnlyHint: true })
  register('get_invoice', { readOnlyHint: true })
  // Its annotations say destructive: under a write query it must stay hidden.
  register('create_invoice', { readOnlyHint: false, destructiveHint: true })
  register('delete_invoice', { readOnlyHint: false, destructiveHint: true })
  register('rm_rf', {})
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair()
  await server.connect(serverTransport)
  const client = new Client({ name: 'agent', version: '1.0.0' })
  await client.connect(clientTransport)
  return { client, calls, close: () => Promise.all([client.close(), server.close()]) }
}

test('listTools returns only the tools the policy offers, annotations only tightening', async () => {
  const { client, close } = await connected()
  const read = mcpGuard(client, policy, { request, query: 'show invoice 7' })
  assert.deepEqual((await read.listTools()).tools.map((t) => t.name), ['search_invoices', 'get_invoice'])
  const write = mcpGuard(client, policy, { request, query: 'create an invoice' })
  assert.deepEqual((await write.listTools()).tools.map((t) => t.name), ['search_invoices', 'get_invoice'])
  const del = mcpGuard(client, policy, { request, query: 'delete invoice 7' })
  assert.deepEqual((await del.listTools()).tools.map((t) => t.name), ['search_invoices', 'get_invoice', 'delete_invoice'])
  await close()
})

test('callTool forwards an allowed call and blocks a denied one before the server', async () => {
  const { client, calls, close } = await connected()
  const guard = mcpGuard(client, policy, { request, query: 'show invoice 7' })
  await guard.listTools()
  const ok = await guard.callTool({ name: 'get_invoice', arguments: { invoice_id: 7, business_id: 'b-42' } })
  assert.deepEqual(ok.content, [{ type: 'text', text: 'get_invoice ran' }])
  const hidden = await guard.callTool({ name: 'delete_invoice', arguments: { invoice_id: 7, business_id: 'b-42' } })
  assert.equal(hidden.isError, true)
  assert.equal(hidden.content[0].text, '`delete_invoice` was not offered for this request; it is not called')
  // A name the server never listed is judged by the policy: the blocked result, as JSON.
  const blocked = await guard.callTool({ name: 'export_business_data', arguments: { business_id: 'b-42' } })
  assert.equal(blocked.isError, true)
  assert.equal(blocked._meta.toolwarden.metadata.blocked_by_policy, true)
  assert.deepEqual(JSON.parse(blocked.content[0].text), blocked._meta.toolwarden)
  const unknown = await guard.callTool({ name: 'rm_rf', arguments: {} })
  assert.equal(unknown.content[0].text, '`rm_rf` was not offered for this request; it is not called')
  assert.deepEqual(calls, [['get_invoice', { invoice_id: 7, business_id: 'b-42' }]])
  await close()
})

test('a tool its annotations hid is never called, even when its name alone passes', async () => {
  const { client, calls, close } = await connected()
  const guard = mcpGuard(client, policy, { request, query: 'create an invoice' })
  await guard.listTools()
  const refused = await guard.callTool({ name: 'create_invoice', arguments: { business_id: 'b-42' } })
  assert.equal(refused.isError, true)
  assert.equal(refused.content[0].text, '`create_invoice` was not offered for this request; it is not called')
  assert.deepEqual(calls, [])
  await close()
})

test('a self-confirming model still reaches the human; the approved call runs without the field', async () => {
  const { client, calls, close } = await connected()
  const guard = mcpGuard(client, policy, { request, query: 'delete invoice 7' })
  await guard.listTools()
  const params = { name: 'delete_invoice', arguments: { invoice_id: 7, business_id: 'b-42', approve_writes: true } }
  const held = await guard.callTool(params)
  assert.equal(held.isError, true)
  assert.equal(held._meta.toolwarden.decision, 'confirm')
  assert.deepEqual(calls, [])
  // The user approves the pending call: now it runs, without the confirmation field.
  const pending = PendingCall.fromJSON(JSON.stringify(held._meta.toolwarden.pending_call))
  const ran = await guard.callTool(params, { approved: pending })
  assert.deepEqual(ran.content, [{ type: 'text', text: 'delete_invoice ran' }])
  assert.deepEqual(calls, [['delete_invoice', { invoice_id: 7, business_id: 'b-42' }]])
  // Approving one call does not approve another: other arguments are refused.
  const other = await guard.callTool({ name: 'delete_invoice', arguments: { invoice_id: 8, business_id: 'b-42' } }, { approved: pending })
  assert.equal(other.isError, true)
  assert.equal(calls.length, 1)
  await close()
})

test('arguments that are not an object are refused, never judged as something else', async () => {
  const { client, calls, close } = await connected()
  const guard = mcpGuard(client, policy, { request, query: 'show invoice 7' })
  await guard.listTools()
  await assert.rejects(guard.callTool({ name: 'get_invoice', arguments: [7] }), {
    name: 'TypeError',
    message: "the call's arguments must be an object or JSON text, not array",
  })
  assert.deepEqual(calls, [])
  await close()
})
