'use strict'
// The asynchronous loaders (fromFileAsync, parseAsync, fromYamlAsync): they run on the libuv
// thread pool, resolve to a working policy, and reject with the errors the sync loaders throw.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { tw, FINANCE, FIXTURES } = require('./helpers.js')

const ACCOUNTANT = { mode: 'supervised', roles: ['accountant'], permissions: ['invoices.manage'], tenant: 'b-42' }

/** A policy text with `n` tools (large enough that compiling it takes many milliseconds). */
function manyTools(n) {
  const lines = ['policy "many" version 2', 'effects none, write', 'mode agent { restrict none }']
  for (let i = 0; i < n; i++) lines.push(`tool read_${i} { effect none }`)
  return lines.join('\n') + '\n'
}

test('fromFileAsync resolves to a policy that decides as fromFile', async () => {
  const promise = tw.Policy.fromFileAsync(FINANCE)
  assert.ok(promise instanceof Promise)
  const policy = await promise
  assert.ok(policy instanceof tw.Policy)
  const sync = tw.Policy.fromFile(FINANCE)
  assert.deepEqual([policy.name, policy.version, policy.toolNames], [sync.name, sync.version, sync.toolNames])
  const request = new tw.Request(ACCOUNTANT)
  const offered = policy.offer(request, policy.toolNames, { query: 'delete invoice 7' })
  assert.deepEqual(offered, sync.offer(request, sync.toolNames, { query: 'delete invoice 7' }))
  assert.ok(offered.includes('delete_invoice'))
  const v = policy.checkCall(request, 'delete_invoice', { invoice_id: 7, business_id: 'b-42' }, { query: 'delete invoice 7' })
  assert.equal(v.decision, 'confirm')
})

test('parseAsync names the text as parse does', async () => {
  const policy = await tw.Policy.parseAsync(manyTools(3), 'many.warden')
  assert.deepEqual([policy.name, policy.version, policy.toolNames], ['many', 2, ['read_0', 'read_1', 'read_2']])
  const v = policy.checkCall(new tw.Request({ mode: 'agent' }), 'read_1', {})
  assert.deepEqual([v.decision, v.source], ['allow', 'many.warden:5:1'])
  const unnamed = await tw.Policy.parseAsync(manyTools(1))
  assert.equal(unnamed.checkCall(new tw.Request({ mode: 'agent' }), 'read_0', {}).source, '<string>:4:1')
})

test('fromYamlAsync loads the YAML with its legacy catalog', async () => {
  const dir = path.join(FIXTURES, 'yaml')
  const p = await tw.Policy.fromYamlAsync(path.join(dir, 'tool_policies.yaml'), path.join(dir, 'tools.yaml'))
  assert.deepEqual([p.name, p.version, p.toolNames.length], ['tool_policies', 1, 8])
  const v = p.checkCall(new tw.Request(), 'alterar_plano', { new_plan_id: 'CONTROLE_100' })
  assert.deepEqual([v.decision, v.stage], ['confirm', 'confirmation'])
  await assert.rejects(tw.Policy.fromYamlAsync(path.join(dir, 'duplicate_key.yaml')), (e) => {
    assert.ok(e instanceof tw.PolicyError)
    assert.ok(e.diagnostics.length > 0)
    return true
  })
})

test('a policy with errors rejects with PolicyError carrying every diagnostic', async () => {
  const file = path.join(FIXTURES, 'check', 'undefined_effect.warden')
  let sync
  try {
    tw.Policy.fromFile(file)
  } catch (e) {
    sync = e
  }
  await assert.rejects(tw.Policy.fromFileAsync(file), (e) => {
    assert.ok(e instanceof tw.PolicyError && e instanceof Error)
    assert.equal(e.name, 'PolicyError')
    assert.equal(e.code, 'PolicyError')
    assert.deepEqual(
      e.diagnostics.map((d) => [d.file, d.line, d.column, d.code, d.severity]),
      [
        [file, 6, 30, 'undefined-effect', 'error'],
        [file, 7, 30, 'undefined-effect', 'error'],
      ],
    )
    assert.equal(e.diagnostics[0].help, 'did you mean `write`?')
    assert.deepEqual(e.diagnostics, sync.diagnostics)
    assert.equal(e.message, sync.message)
    return true
  })
  await assert.rejects(tw.Policy.parseAsync('policy "x" version 1\neffects none\nmode chat { }\ntool t { effect wirte }\n', 'inline.warden'), (e) => {
    assert.ok(e instanceof tw.PolicyError)
    assert.deepEqual(
      e.diagnostics.map((d) => [d.file, d.line, d.column, d.code, d.text]),
      [['inline.warden', 4, 17, 'undefined-effect', 'wirte']],
    )
    return true
  })
  await assert.rejects(tw.Policy.fromFileAsync(path.join(FIXTURES, 'nope.warden')), (e) => {
    assert.ok(e instanceof tw.PolicyError)
    assert.deepEqual(e.diagnostics.map((d) => [d.code, d.file, d.line]), [['unreadable', null, null]])
    return true
  })
})

test('wrong types reject with TypeError (nothing is thrown synchronously)', async () => {
  const cases = [
    [() => tw.Policy.fromFileAsync(42), 'path must be a string, not number'],
    [() => tw.Policy.parseAsync({ text: 'x' }), 'text must be a string, not object'],
    [() => tw.Policy.parseAsync('policy "x" version 1', 7), 'name must be a string, not number'],
    [() => tw.Policy.fromYamlAsync(undefined), 'path must be a string, not undefined'],
    [() => tw.Policy.fromYamlAsync('a.yaml', ['b']), 'legacy must be a string, not array'],
  ]
  for (const [call, message] of cases) {
    let promise
    assert.doesNotThrow(() => {
      promise = call()
    })
    await assert.rejects(promise, { name: 'TypeError', message })
  }
})

test('the event loop keeps running while a large policy loads', async () => {
  const text = manyTools(20000)
  let ticks = 0
  let loading = true
  const tick = () => {
    if (!loading) return
    ticks += 1
    setImmediate(tick)
  }
  setImmediate(tick)
  const policy = await tw.Policy.parseAsync(text, 'many.warden')
  loading = false
  assert.equal(policy.toolNames.length, 20000)
  // A load on the calling thread would settle before the first setImmediate callback ran.
  assert.ok(ticks >= 1, `the event loop ran ${ticks} times during the load`)
})

test('loads run concurrently and each resolves to its own policy', async () => {
  const texts = [1, 2, 3, 4].map((n) => manyTools(n))
  const policies = await Promise.all(texts.map((t, i) => tw.Policy.parseAsync(t, `p${i}.warden`)))
  assert.deepEqual(
    policies.map((p) => p.toolNames.length),
    [1, 2, 3, 4],
  )
})
