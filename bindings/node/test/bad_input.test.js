'use strict'
// Bad input: wrong types throw TypeError with a message naming the parameter, bad values throw
// Error with a message, huge inputs stay bounded as in Rust, and nothing crashes the process.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { tw, finance } = require('./helpers.js')

test('wrong argument types throw TypeError naming the parameter', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised' })
  const cases = [
    [() => p.offer(request, 'get_invoice'), 'tools must be an array of tool names or tool schema objects, or a ToolSet, not string'],
    [() => p.offer(request, [1]), 'tools[0] must be a tool name (string) or a tool schema object, not number'],
    [() => p.offer(request, 5), 'tools must be an array of tool names or tool schema objects, or a ToolSet, not number'],
    [() => p.offer(request, [], { query: 3 }), 'query must be a string, not number'],
    [() => p.offer(request, [], { intent: 3 }), 'intent must be an Intent, a string or an array of strings, not number'],
    [() => p.offer(request, [], 'x'), 'options must be an options object, not string'],
    [() => p.offer('supervised', []), 'request must be a Request, not string'],
    [() => p.offer({ mode: 'supervised' }, []), 'request must be a Request, not object'],
    [() => p.checkCall(request, 3, {}), 'tool must be a string, not number'],
    [() => p.checkCall(request, 'get_invoice', [1]), 'args must be an object or JSON text (a string), not array'],
    [() => p.checkCall(request, 'get_invoice', 7), 'args must be an object or JSON text (a string), not number'],
    [() => p.checkCall(request, 'get_invoice', null), 'args must be an object or JSON text (a string), not null'],
    [() => p.checkCall(request, 'get_invoice', { a: () => 1 }), 'args is not representable as JSON'],
    [() => p.checkCall(request, 'get_invoice', { a: Symbol('s') }), 'args is not representable as JSON'],
    [() => p.checkCall(request, 'get_invoice', { a: NaN }), 'args is not representable as JSON'],
    [() => p.checkCall(request, 'get_invoice', {}, { turn: 1 }), 'turn must be a Turn, not number'],
    [() => p.checkCall(request, 'get_invoice', {}, { turn: {} }), 'turn must be a Turn, not object'],
    [() => p.checkCall(request, 'get_invoice', {}, { pending: 'x' }), 'pending must be a PendingCall or its JSON object, not string'],
    [() => p.checkCall(request, 'get_invoice', {}, { strict: 'no' }), 'strict must be a boolean, not string'],
    [() => p.explain(request, ['get_invoice']), 'tool must be a string, not array'],
    [() => p.classify(Buffer.from('x')), 'text must be a string, not object'],
    [() => p.tools([1]), 'tools[0] must be a tool name (string) or a tool schema object, not number'],
    [() => tw.Policy.parse(null), 'text must be a string, not null'],
    [() => tw.Policy.fromFile(42), 'path must be a string, not number'],
    [() => new tw.Request({ mode: 1 }), 'mode must be a string, not number'],
    [() => new tw.Request('supervised'), 'options must be an options object, not string'],
    [() => new tw.Request({ roles: 'admin' }), 'roles must be an array of strings, not string'],
    [() => new tw.Request({ permissions: [1] }), 'permissions[0] must be a string, not number'],
    [() => new tw.Request({ tenant: 42 }), 'tenant must be a string, not number'],
    [() => new tw.Request({ connectors: ['task'] }), 'connectors must be an object of tier -> array of servers or null, not array'],
    [() => new tw.Request({ connectors: { task: 'github' } }), 'connectors.task must be an array of strings, not string'],
    [() => new tw.Request({ forced: 5 }), 'forced must be an array of strings, not number'],
    [() => new tw.Turn(-1), 'transactionalCalls must be a non-negative integer, not number'],
    [() => new tw.Turn(1.5), 'transactionalCalls must be a non-negative integer, not number'],
    [() => tw.PendingCall.fromJSON([]), 'text must be a PendingCall or its JSON object, not array'],
    [() => tw.Intent.named(3), 'name must be a string, not number'],
  ]
  for (const [call, message] of cases) {
    assert.throws(call, (e) => {
      assert.ok(e instanceof TypeError, `${message}: got ${e && e.name}: ${e && e.message}`)
      assert.ok(e.message.startsWith(message), `${JSON.stringify(e.message)} should start with ${JSON.stringify(message)}`)
      return true
    })
  }
  const turn = new tw.Turn()
  assert.throws(() => {
    turn.transactionalCalls = 'many'
  }, { name: 'TypeError', message: 'transactionalCalls must be a non-negative integer, not string' })
  assert.equal(turn.transactionalCalls, 0)
})

test('bad values throw Error with a message, and odd but well-typed input is decided', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised', tenant: 'b-42', roles: ['accountant'], permissions: ['invoices.view'] })
  assert.throws(() => p.checkCall(request, 'get_invoice', '{"a": 1, "a": 2}'), { message: /duplicate key/ })
  assert.throws(() => p.checkCall(request, 'get_invoice', '{"a": '), { message: /^args: the arguments are not acceptable JSON/ })
  assert.throws(() => p.offer(request, [], { query: 'x', intent: 'read' }), { message: /give query or intent, not both/ })
  assert.throws(() => p.offer(new tw.Request({ mode: 'chaos' }), ['get_invoice']), (e) => e instanceof tw.RequestError && /unknown mode `chaos`/.test(e.message))
  assert.throws(() => p.checkCall(request, 'get_invoice', {}, { intent: 'nope' }), (e) => e instanceof tw.RequestError && /unknown intent `nope`/.test(e.message))
  // A lone surrogate becomes U+FFFD in UTF-8: an unknown name, denied.
  assert.deepEqual(p.offer(request, ['get_invoice', '\ud800']), ['get_invoice'])
  assert.deepEqual(p.offer(request, ['', '\x00', 'é'.repeat(10_000)]), [])
  // A property whose value is undefined is absent, as JSON.stringify reads it.
  assert.deepEqual(p.checkCall(request, 'get_invoice', { invoice_id: 7, note: undefined }).argsForExecution, { invoice_id: 7 })
  const v = p.checkCall(request, '', {})
  assert.deepEqual([v.decision, v.stage], ['deny', 'identity'])
})

test('huge and hostile inputs are bounded as in Rust', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised', tenant: 'b-42', roles: ['accountant'], permissions: ['invoices.view'] })
  assert.equal(p.classify('x '.repeat(1_000_000)).truncated, true)
  assert.equal(p.classify('x'.repeat(1000)).truncated, false)
  // Argument text over 1 MiB is refused; so is nesting deeper than 64 levels.
  assert.throws(() => p.checkCall(request, 'get_invoice', JSON.stringify({ a: 'x'.repeat(1024 * 1024) })), {
    message: /over the limit of 1048576 bytes/,
  })
  assert.throws(() => p.checkCall(request, 'get_invoice', '['.repeat(100) + ']'.repeat(100)), { message: /args:/ })
  // Objects: a cycle, a deep chain and a shared-object blow-up all stop with an error.
  const cyclic = {}
  cyclic.self = cyclic
  assert.throws(() => p.checkCall(request, 'get_invoice', cyclic), { name: 'TypeError', message: /nesting depth/ })
  let deep = {}
  for (let i = 0; i < 10_000; i++) deep = { d: deep }
  assert.throws(() => p.checkCall(request, 'get_invoice', deep), { name: 'TypeError', message: /nesting depth/ })
  let dag = { leaf: 1 }
  for (let i = 0; i < 60; i++) dag = { a: dag, b: dag }
  assert.throws(() => p.checkCall(request, 'get_invoice', dag), { name: 'TypeError', message: /value count/ })
  // Nesting the policy accepts from text is denied at stage `requires` when it comes as an object.
  let seventy = {}
  for (let i = 0; i < 70; i++) seventy = { d: seventy }
  const v = p.checkCall(request, 'get_invoice', seventy)
  assert.deepEqual([v.decision, v.stage], ['deny', 'requires'])
  // 100,000 names in one offer are simply decided.
  const many = Array.from({ length: 100_000 }, (_, i) => (i % 2 ? 'get_invoice' : `t${i}`))
  assert.equal(p.offer(request, many).length, 50_000)
})

test('nothing crashes the Node process', () => {
  // Every hostile call in a child process; it must finish normally and report each error.
  const script = `
    const tw = require(${JSON.stringify(path.resolve(__dirname, '..'))})
    const p = tw.Policy.fromFile(${JSON.stringify(path.resolve(__dirname, '..', '..', '..', 'policies', 'finance.warden'))})
    const r = new tw.Request({ mode: 'supervised' })
    const cyclic = []; cyclic.push(cyclic)
    const cycObj = {}; cycObj.a = [cycObj]
    const proxy = new Proxy({}, { ownKeys() { throw new Error('trap') } })
    const getter = { get x() { throw new Error('getter') } }
    const calls = [
      () => p.checkCall(r, 'get_invoice', cycObj),
      () => p.checkCall(r, 'get_invoice', proxy),
      () => p.checkCall(r, 'get_invoice', getter),
      () => p.offer(r, cyclic),
      () => p.offer(r, [proxy]),
      () => p.offer(r, [getter]),
      () => p.offer(r, new Array(5)),
      () => p.offer(r, [{ name: 'get_invoice', annotations: cycObj }]),
      () => p.tools([{ get name() { throw new Error('name') } }]),
      () => p.checkCall(r, 'get_invoice', {}, { get turn() { throw new Error('opt') } }),
      () => tw.Policy.parse('policy "x"\\n'.repeat(1000)),
      () => tw.Policy.fromFile('/dev/zero'),
      () => tw.Policy.fromFile('/'),
      () => tw.PendingCall.fromJSON('{"tool":1}'),
      () => new tw.Request({ connectors: proxy }),
      () => p.explain.call({}, r, 'x'),
      () => tw.Policy.prototype.checkCall.call(null, r, 'x', {}),
    ]
    let errors = 0
    for (const call of calls) { try { call() } catch (e) { if (e instanceof Error) errors++ } }
    process.stdout.write('errors ' + errors + ' of ' + calls.length)
  `
  const out = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(out.signal, null, out.stderr)
  assert.equal(out.status, 0, out.stderr)
  assert.equal(out.stdout, 'errors 17 of 17')
})
