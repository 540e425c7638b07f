'use strict'
// The Node surface: loading and PolicyError diagnostics, YAML import, offer over names and
// schemas, prepared tool sets, Request fields, and one policy shared by concurrent async calls.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { tw, finance, FIXTURES } = require('./helpers.js')

const DEMO = `
policy "demo" version 1
effects none, write
intents write > read
fallback read
keywords write { en "create", "add" }
matrix standard {
        none   write
  read  allow  deny
  write allow  confirm
}
mode supervised { matrix standard }
confirm fields "confirmed"
tool list_notes  { effect none }
tool create_note { effect write }
`

const ACCOUNTANT = { mode: 'supervised', roles: ['accountant'], permissions: ['invoices.manage'], tenant: 'b-42' }

test('the crate doc example reads the same in Node', () => {
  const policy = tw.Policy.parse(DEMO, 'demo.warden')
  const request = new tw.Request({ mode: 'supervised' })
  const intent = policy.classify('please create a note')
  assert.equal(intent.name, 'write')
  assert.deepEqual(intent.intents, ['write'])
  assert.deepEqual(intent.hits, [{ keyword: 'create', intent: 'write', lang: 'en', span: [7, 13] }])
  assert.equal(intent.fallback, false)
  assert.deepEqual(policy.offer(request, ['list_notes', 'create_note', 'rm_rf'], { intent }), ['list_notes', 'create_note'])
  const v = policy.checkCall(request, 'create_note', { text: 'hi' }, { turn: new tw.Turn(), intent })
  assert.equal(v.decision, 'confirm')
  const ok = policy.checkCall(request, 'list_notes', {}, { intent })
  assert.deepEqual([ok.decision, ok.stage, ok.reason, ok.source], ['allow', null, '`list_notes` may run', 'demo.warden:14:1'])
  assert.deepEqual(policy.explain(request, 'list_notes', { intent }), {
    tool: 'list_notes',
    decision: 'allow',
    stage: null,
    reason: '`list_notes` (none) is allowed',
    source: 'demo.warden:14:1',
  })
  assert.deepEqual([policy.name, policy.version], ['demo', 1])
  assert.deepEqual(policy.toolNames, ['list_notes', 'create_note'])
  assert.deepEqual(policy.modes, ['supervised'])
  assert.deepEqual(policy.intents, ['write', 'read'])
  assert.equal(policy.defaultMode, null)
})

test('a policy with errors throws PolicyError with every diagnostic', () => {
  const file = path.join(FIXTURES, 'check', 'undefined_effect.warden')
  assert.throws(() => tw.Policy.fromFile(file), (e) => {
    assert.ok(e instanceof tw.PolicyError && e instanceof Error)
    assert.equal(e.name, 'PolicyError')
    assert.deepEqual(
      e.diagnostics.map((d) => [d.file, d.line, d.column, d.code, d.severity]),
      [
        [file, 6, 30, 'undefined-effect', 'error'],
        [file, 7, 30, 'undefined-effect', 'error'],
      ],
    )
    assert.equal(e.diagnostics[0].message, 'undefined effect `wirte`')
    assert.equal(e.diagnostics[0].help, 'did you mean `write`?')
    assert.equal(e.diagnostics[0].text, 'wirte')
    assert.equal(
      e.diagnostics[1].help,
      'declared effects are `none`, `write`, `delete`; add `execute` to `effects` to declare it',
    )
    assert.ok(e.message.startsWith('  × undefined effect `wirte`\n'))
    assert.ok(e.message.includes(`╭─[${file}:6:30]`))
    assert.ok(e.message.endsWith('2 errors, 0 warnings'))
    assert.ok(e.message.includes(e.diagnostics[0].rendered.trimEnd()))
    assert.ok(e.stack.includes('PolicyError'))
    return true
  })
})

test('parse errors point into the named text', () => {
  assert.throws(
    () => tw.Policy.parse('policy "x" version 1\neffects none\nmode chat { }\ntool t { effect wirte }\n', 'inline.warden'),
    (e) => {
      assert.equal(e.diagnostics.length, 1)
      const [d] = e.diagnostics
      assert.deepEqual([d.file, d.line, d.column, d.code, d.text], ['inline.warden', 4, 17, 'undefined-effect', 'wirte'])
      assert.equal(d.help, 'declared effects are `none`; add `wirte` to `effects` to declare it')
      return true
    },
  )
})

test('an unreadable file is a diagnostic without a place', () => {
  const missing = path.join(FIXTURES, 'nope.warden')
  assert.throws(() => tw.Policy.fromFile(missing), (e) => {
    assert.equal(e.diagnostics.length, 1)
    const [d] = e.diagnostics
    assert.deepEqual([d.code, d.file, d.line, d.column], ['unreadable', null, null, null])
    assert.ok(d.message.startsWith(`cannot read \`${missing}\``))
    return true
  })
})

test("fromYaml loads seed 004's tool_policies with the legacy catalog", () => {
  const dir = path.join(FIXTURES, 'yaml')
  const p = tw.Policy.fromYaml(path.join(dir, 'tool_policies.yaml'), path.join(dir, 'tools.yaml'))
  assert.deepEqual([p.name, p.version], ['tool_policies', 1])
  assert.deepEqual(p.toolNames, [
    'consultar_plano',
    'alterar_plano',
    'devolver_pedido',
    'consultar_pedido',
    'cancelar_pedido',
    'reembolsar',
    'apagar_cliente',
    'sincronizar',
  ])
  const v = p.checkCall(new tw.Request(), 'alterar_plano', { new_plan_id: 'CONTROLE_100' })
  assert.deepEqual([v.decision, v.stage, v.source], ['confirm', 'confirmation', `${path.join(dir, 'tool_policies.yaml')}:14:27`])
  assert.throws(() => tw.Policy.fromYaml(path.join(dir, 'duplicate_key.yaml')), (e) => {
    assert.ok(e instanceof tw.PolicyError)
    assert.ok(e.diagnostics.length > 0)
    assert.ok(e.diagnostics.every((d) => d.file === null || d.file === path.join(dir, 'duplicate_key.yaml')))
    return true
  })
})

test('offer keeps the shape (and identity) of OpenAI, Anthropic and MCP schemas', () => {
  const p = finance()
  const request = new tw.Request(ACCOUNTANT)
  const openai = { type: 'function', function: { name: 'search_invoices', parameters: { type: 'object' } } }
  const responses = { type: 'function', name: 'get_invoice', parameters: {} }
  const anthropic = { name: 'delete_invoice', description: 'Delete', input_schema: { type: 'object' } }
  const mcp = { name: 'create_invoice', inputSchema: {}, annotations: { readOnlyHint: false } }
  const unknown = { name: 'rm_rf', input_schema: {} }
  const tools = [openai, responses, anthropic, mcp, unknown, 'get_invoice']
  const shown = p.offer(request, tools, { query: 'delete invoice 7' })
  assert.deepEqual(shown, [openai, responses, anthropic, 'get_invoice'])
  assert.ok(shown[0] === openai && shown[2] === anthropic)
  assert.deepEqual(p.offerSchemas(request, tools, { query: 'delete invoice 7' }), shown)
  const liar = { name: 'delete_invoice', inputSchema: {}, annotations: { readOnlyHint: true } }
  assert.deepEqual(p.offer(request, [liar], { query: 'delete invoice 7' }), [liar])
  assert.deepEqual(p.offer(request, [liar], { query: 'show invoice 7' }), [])
  const destructive = { name: 'create_invoice', inputSchema: {}, annotations: { destructiveHint: true } }
  assert.deepEqual(p.offer(request, [destructive], { query: 'create an invoice' }), [])
  // Only the keys a decision reads are converted: a handler function beside the schema is fine.
  const withHandler = { name: 'get_invoice', input_schema: {}, execute: () => 1 }
  assert.deepEqual(p.offer(request, [withHandler]), [withHandler])
})

test('a tool schema without a name is an error naming its index', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised' })
  assert.throws(() => p.offer(request, ['get_invoice', { description: 'x' }]), { message: /^tools\[1\]: the schema has no name/ })
  assert.throws(() => p.offer(request, [{ type: 'function', function: {} }]), {
    message: 'tools[0]: the OpenAI tool has no function.name',
  })
  assert.throws(() => p.offer(request, [{ name: '' }]), { message: 'tools[0]: name is empty' })
  assert.throws(() => p.offer(request, [{ type: 'function', function: { name: 3 } }]), {
    message: 'tools[0]: function.name is not a string',
  })
  assert.throws(() => p.offer(request, [{ name: 'get_invoice', annotations: { readOnlyHint: 'yes' } }]), {
    message: /^tools\[0\]: annotations/,
  })
})

test('prepared tool sets decide exactly as offer over the same items', () => {
  const p = finance()
  const request = new tw.Request(ACCOUNTANT)
  const names = [...p.toolNames, 'rm_rf', 'mcp__x__y']
  const set = p.tools(names)
  assert.ok(set instanceof tw.ToolSet)
  assert.equal(set.size, names.length)
  assert.deepEqual(set.names, names)
  assert.deepEqual(set.items, names)
  assert.ok(Object.isFrozen(set.items))
  for (const query of ['delete invoice 7', 'show invoices', 'create an invoice', 'export the data', 'yes']) {
    assert.deepEqual(p.offer(request, set, { query }), p.offer(request, names, { query }), query)
  }
  assert.deepEqual(p.offer(request, set, { query: 'delete invoice 7' }), ['search_invoices', 'get_invoice', 'delete_invoice'])
  // A set of schemas returns the schemas, and their annotations still only tighten.
  const schemas = [
    { name: 'get_invoice', inputSchema: {} },
    { name: 'create_invoice', inputSchema: {}, annotations: { destructiveHint: true } },
    { type: 'function', function: { name: 'create_invoice' } },
  ]
  const schemaSet = p.tools(schemas)
  const shown = p.offerSchemas(request, schemaSet, { query: 'create an invoice' })
  assert.deepEqual(shown, [schemas[0], schemas[2]])
  assert.ok(shown[0] === schemas[0])
  assert.deepEqual(p.offer(request, schemaSet, { query: 'create an invoice' }), shown)
  assert.deepEqual(p.offerSchemas(request, schemas, { query: 'create an invoice' }), shown)
  // The set is a copy: changing the array afterwards changes nothing.
  const mutable = ['get_invoice']
  const copySet = p.tools(mutable)
  mutable.push('search_invoices')
  assert.deepEqual(p.offer(request, copySet), ['get_invoice'])
  // A set serves a reloaded policy too (it holds names, not a policy).
  const other = tw.Policy.parse(DEMO, 'demo.warden')
  assert.deepEqual(other.offer(new tw.Request({ mode: 'supervised' }), other.tools(['list_notes', 'nope'])), ['list_notes'])
  assert.throws(() => p.tools([{ description: 'x' }]), { message: /^tools\[0\]: the schema has no name/ })
  assert.throws(() => p.tools('get_invoice'), { name: 'TypeError' })
})

test('a Request round-trips its fields', () => {
  const r = new tw.Request({
    mode: 'supervised',
    roles: ['admin'],
    permissions: ['invoices.view'],
    tenant: 'b-42',
    connectors: { session: ['github'], task: null },
    forced: ['delete_invoice'],
  })
  assert.deepEqual([r.mode, r.roles, r.permissions, r.tenant, r.connectors, r.forced], [
    'supervised',
    ['admin'],
    ['invoices.view'],
    'b-42',
    { session: ['github'] },
    ['delete_invoice'],
  ])
  assert.equal(new tw.Request().mode, null)
  assert.equal(new tw.Request({}).tenant, null)
  assert.deepEqual(r.withForced([]).forced, [])
  assert.deepEqual(r.forced, ['delete_invoice'])
})

test('Intent.named and Intent.union decide like a classified query', () => {
  const p = finance()
  const request = new tw.Request(ACCOUNTANT)
  const tools = ['get_invoice', 'create_invoice', 'delete_invoice']
  assert.deepEqual(p.offer(request, tools, { intent: tw.Intent.named('destructive') }), p.offer(request, tools, { intent: 'destructive' }))
  assert.deepEqual(p.offer(request, tools, { intent: tw.Intent.union(['write', 'destructive']) }), p.offer(request, tools, { intent: ['write', 'destructive'] }))
  assert.deepEqual(tw.Intent.union(['write', 'destructive']).intents, ['write', 'destructive'])
  assert.deepEqual(p.offer(request, tools, { intent: 'destructive' }), ['get_invoice', 'delete_invoice'])
  assert.equal(p.classify('show invoice 7').toJSON().name, 'read')
})

test('one policy is shared by many concurrent async calls', async () => {
  const p = finance()
  const request = new tw.Request({ mode: 'autonomous', roles: ['admin'], permissions: ['invoices.manage'], tenant: 'b-42' })
  const tools = Array.from({ length: 40 }, () => ['search_invoices', 'get_invoice', 'create_invoice', 'delete_invoice', 'rm_rf']).flat()
  const expected = p.offer(request, tools, { query: 'delete invoice 7' })
  const results = await Promise.all(
    Array.from({ length: 400 }, async (_, i) => {
      await new Promise((resolve) => setImmediate(resolve))
      const query = i % 2 === 0 ? 'delete invoice 7' : 'show invoices'
      return [i, p.offer(request, tools, { query }), p.checkCall(request, 'delete_invoice', { invoice_id: i }, { query }).decision]
    }),
  )
  for (const [i, shown, decision] of results) {
    if (i % 2 === 0) {
      assert.deepEqual(shown, expected)
      assert.equal(decision, 'allow')
    } else {
      assert.deepEqual(shown, Array.from({ length: 40 }, () => ['search_invoices', 'get_invoice']).flat())
      assert.equal(decision, 'deny')
    }
  }
})

test('the ESM and CommonJS entry points export the same objects', async () => {
  const esm = await import('../index.mjs')
  assert.equal(esm.Policy, tw.Policy)
  assert.equal(esm.PolicyError, tw.PolicyError)
  assert.equal(esm.default, tw)
  const viaExports = await import('toolwarden')
  assert.equal(viaExports.Policy, tw.Policy)
  assert.equal(require('toolwarden').Policy, tw.Policy)
  assert.equal(tw.version, require('../package.json').version)
})
