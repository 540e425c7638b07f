'use strict'
// Confirmation across turns (finance.warden's approve_writes, retail.warden's pending call and
// blocked shape), as the Python suite's test_confirmation.py: only a literal true confirms, the
// held call is bound to its arguments by a digest, the pending call survives a JSON round trip,
// and one transactional call runs per turn.
const test = require('node:test')
const assert = require('node:assert/strict')
const { tw, finance, retail, RETAIL } = require('./helpers.js')

const ADMIN = {
  roles: ['admin'],
  permissions: ['invoices.manage', 'reports.export', 'workflows.manage'],
  tenant: 'b-42',
}

test('a write call without approval is held, then runs once approved', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised', ...ADMIN })
  const intent = p.classify('create a new invoice for customer 12')
  assert.equal(intent.name, 'write')
  let turn = new tw.Turn()
  const args = { customer_id: 'c-12', amount: 100 }
  let v = p.checkCall(request, 'create_invoice', args, { turn, intent })
  assert.deepEqual([v.decision, v.stage], ['confirm', 'confirmation'])
  assert.ok(v.needsConfirmation && !v.isAllowed && !v.isDenied)
  assert.equal(
    v.reason,
    '`create_invoice` needs confirmation: ask the user, then repeat the call with ' +
      '`approve_writes` or `confirmed` set to true (mode `supervised` confirms effect `write`)',
  )
  const pending = v.pending
  assert.equal(pending.tool, 'create_invoice')
  assert.deepEqual(pending.args, args)
  assert.equal(pending.transactionStatus, 'AWAITING_CONFIRMATION')
  assert.equal(pending.policy, 'finance-assistant')
  assert.equal(pending.policyVersion, 1)
  assert.equal(pending.digest.length, 64)
  const out = v.toJSON()
  assert.equal(out.ok, false)
  assert.equal(out.confirmation_required, true)
  assert.deepEqual(out.confirmation_fields, ['approve_writes', 'confirmed'])
  assert.equal(out.metadata.stage, 'confirmation')
  assert.deepEqual(out.pending_call, pending.toJSON())
  assert.equal(turn.transactionalCalls, 0)

  // Only the literal true approves; the held call never carries the approval field.
  for (const notTrue of ['true', 1, false, null, 'yes']) {
    const held = p.checkCall(request, 'create_invoice', { ...args, approve_writes: notTrue }, { turn, intent })
    assert.deepEqual([held.decision, held.stage], ['confirm', 'confirmation'], String(notTrue))
    assert.equal(held.pending.digest, pending.digest)
  }

  // The pending call is kept between turns as plain JSON...
  const stored = JSON.stringify(pending)
  const restored = tw.PendingCall.fromJSON(stored)
  assert.deepEqual(restored.toJSON(), pending.toJSON())
  assert.deepEqual(tw.PendingCall.fromJSON(JSON.parse(stored)).toJSON(), pending.toJSON())

  // ...and the next turn ("yes") is classified `read`: the forced name keeps the tool reachable.
  const yes = p.classify('yes')
  assert.ok(yes.name === 'read' && yes.fallback)
  const next = request.withForced([restored.tool])
  assert.deepEqual(p.offer(next, ['create_invoice', 'delete_invoice'], { intent: yes }), ['create_invoice'])
  turn = new tw.Turn()
  v = p.checkCall(next, 'create_invoice', { ...args, approve_writes: true }, { turn, pending: restored, intent: yes })
  assert.deepEqual([v.decision, v.stage], ['allow', null])
  assert.deepEqual(v.argsForExecution, args)
  assert.equal(v.confirmationReceived, true)
  assert.equal(turn.transactionalCalls, 1)
  assert.equal(v.toJSON().ok, true)
})

test('a confirmed call with other arguments is denied (digest mismatch)', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised', ...ADMIN })
  let v = p.checkCall(request, 'create_invoice', { customer_id: 'c-12', amount: 100 }, { intent: 'write' })
  const pending = v.pending.toJSON()
  v = p.checkCall(
    request,
    'create_invoice',
    { customer_id: 'c-12', amount: 100000, approve_writes: true },
    { pending, intent: 'write' },
  )
  assert.deepEqual([v.decision, v.stage], ['deny', 'confirmation'])
  assert.equal(v.reason, 'the arguments of `create_invoice` differ from the call the user confirmed')
  const tampered = { ...pending, args: { customer_id: 'c-12', amount: 1 } }
  v = p.checkCall(
    request,
    'create_invoice',
    { customer_id: 'c-12', amount: 1, approve_writes: true },
    { pending: tampered, intent: 'write' },
  )
  assert.deepEqual([v.decision, v.stage], ['deny', 'confirmation'])
  assert.equal(v.reason, 'the pending call is corrupt: its digest does not match its own tool and arguments')
})

test("the retail confirm result has seed 004's shape", () => {
  const p = retail()
  const v = p.checkCall(new tw.Request(), 'alterar_plano', { new_plan_id: 'CONTROLE_100', confirmed: 'true' })
  const digest = v.pending.digest
  assert.deepEqual(v.toJSON(), {
    ok: false,
    decision: 'confirm',
    tool: 'alterar_plano',
    error:
      '`alterar_plano` needs confirmation: ask the user, then repeat the call with ' +
      '`confirmed` or `confirmation` set to true (`alterar_plano` says `confirm always`)',
    metadata: {
      blocked_by_policy: true,
      stage: 'confirmation',
      operation_type: 'transactional',
      effect: 'write',
      policy_source: `${RETAIL}:19:66`,
    },
    confirmation_required: true,
    confirmation_fields: ['confirmed', 'confirmation'],
    transaction_status: 'AWAITING_CONFIRMATION',
    pending_call: {
      tool: 'alterar_plano',
      args: { new_plan_id: 'CONTROLE_100' },
      digest,
      transaction_status: 'AWAITING_CONFIRMATION',
      policy: 'retail-agent',
      policy_version: 1,
    },
  })
  assert.deepEqual(JSON.parse(JSON.stringify(v)), v.toJSON())
})

test('one transactional call per turn, and reads never count (turn limit)', () => {
  const p = retail()
  const request = new tw.Request({ mode: 'agent' })
  const turn = new tw.Turn()
  let v = p.checkCall(request, 'consultar_plano', {}, { turn })
  assert.ok(v.decision === 'allow' && turn.transactionalCalls === 0)
  const held = p.checkCall(request, 'alterar_plano', '{"new_plan_id": "X"}', { turn }).pending
  v = p.checkCall(request, 'alterar_plano', '{"new_plan_id": "X", "confirmation": true}', { turn, pending: held })
  assert.equal(v.decision, 'allow')
  assert.deepEqual(v.argsForExecution, { new_plan_id: 'X' })
  assert.equal(turn.transactionalCalls, 1)
  v = p.checkCall(request, 'devolver_pedido', { order_id: 1, reason: 'r', confirmed: true }, { turn, strict: false })
  assert.deepEqual([v.decision, v.stage], ['deny', 'turn_limit'])
  assert.equal(turn.transactionalCalls, 1)
  assert.equal(p.checkCall(request, 'consultar_plano', {}, { turn }).decision, 'allow')
})

test('one turn shared by many async calls runs at most the limit', async () => {
  const p = retail()
  const request = new tw.Request({ mode: 'agent' })
  const turn = new tw.Turn()
  const args = { order_id: 1, reason: 'r', confirmed: true }
  const verdicts = await Promise.all(
    Array.from({ length: 50 }, async () => {
      await new Promise((resolve) => setImmediate(resolve))
      return p.checkCall(request, 'devolver_pedido', args, { turn, strict: false }).decision
    }),
  )
  assert.equal(verdicts.filter((d) => d === 'allow').length, 1)
  assert.equal(verdicts.filter((d) => d === 'deny').length, 49)
  assert.equal(turn.transactionalCalls, 1)
})

test('missing required arguments are listed', () => {
  const v = retail().checkCall(new tw.Request(), 'devolver_pedido', { confirmed: true })
  assert.deepEqual([v.decision, v.stage], ['deny', 'requires'])
  assert.deepEqual(v.missing, ['order_id', 'reason'])
  assert.deepEqual(v.toJSON().metadata.missing, ['order_id', 'reason'])
})

test('a malformed pending call is an error naming it', () => {
  assert.throws(() => retail().checkCall(new tw.Request(), 'alterar_plano', {}, { pending: { tool: 'x' } }), {
    message: /^pending is not a pending call/,
  })
  assert.throws(() => tw.PendingCall.fromJSON('{"tool": "x", "extra": 1}'), { message: /^text is not a pending call/ })
  assert.throws(() => tw.PendingCall.fromJSON('not json'), { message: /^text is not a pending call/ })
})

const NO_PENDING =
  '`devolver_pedido` carries a confirmation, but no call is awaiting confirmation: only the user ' +
  'confirms, so call it without the confirmation field, ask the user, then repeat it with the ' +
  'pending call'

test('a confirmation with no pending call is denied by default (strict)', () => {
  const p = retail()
  const request = new tw.Request()
  const args = { order_id: '123', reason: 'r', confirmed: true }
  const turn = new tw.Turn()
  let v = p.checkCall(request, 'devolver_pedido', args, { turn })
  assert.deepEqual([v.decision, v.stage, v.reason], ['deny', 'confirmation', NO_PENDING])
  assert.equal(turn.transactionalCalls, 0)
  const held = p.checkCall(request, 'devolver_pedido', p.stripConfirmation(args), { turn })
  assert.equal(held.decision, 'confirm')
  v = p.checkCall(request, 'devolver_pedido', args, { turn, pending: held.pending })
  assert.equal(v.decision, 'allow')
  assert.deepEqual(v.argsForExecution, { order_id: '123', reason: 'r' })
  assert.equal(turn.transactionalCalls, 1)
  v = p.checkCall(request, 'devolver_pedido', args, { strict: false })
  assert.equal(v.decision, 'allow')
})

test('stripConfirmation removes only the confirm fields', () => {
  assert.deepEqual(
    finance().stripConfirmation({ invoice_id: 7, approve_writes: true, confirmed: 'true', confirmation: true }),
    { invoice_id: 7, confirmation: true },
  )
  const p = retail()
  assert.deepEqual(p.stripConfirmation('{"order_id": 1, "confirmation": true}'), { order_id: 1 })
  const original = { order_id: 1, confirmed: true }
  p.stripConfirmation(original)
  assert.deepEqual(original, { order_id: 1, confirmed: true })
  assert.throws(() => p.stripConfirmation('[1]'), { message: 'args must be a JSON object' })
  assert.throws(() => p.stripConfirmation([1]), {
    name: 'TypeError',
    message: 'args must be an object or JSON text (a string), not array',
  })
  assert.throws(() => p.stripConfirmation('{"confirmed": false, "confirmed": true}'), { message: /duplicate key/ })
})

test('a pending call reaches its tool when "yes" classifies as read', () => {
  const p = finance()
  const request = new tw.Request({ mode: 'supervised', ...ADMIN })
  const args = { customer_id: 'c-12', amount: 100 }
  const held = p.checkCall(request, 'create_invoice', args, { query: 'create a new invoice' }).pending
  const confirmed = { ...args, approve_writes: true }
  let v = p.checkCall(request, 'create_invoice', confirmed, { query: 'yes' })
  assert.deepEqual([v.decision, v.stage], ['deny', 'intent'])
  const turn = new tw.Turn()
  v = p.checkCall(request, 'create_invoice', confirmed, { turn, pending: held, query: 'yes' })
  assert.equal(v.decision, 'allow')
  assert.deepEqual(v.argsForExecution, args)
  assert.equal(turn.transactionalCalls, 1)
  v = p.checkCall(request, 'create_invoice', { ...confirmed, amount: 1 }, { pending: held, query: 'yes' })
  assert.deepEqual([v.decision, v.stage], ['deny', 'intent'])
  const analyzer = new tw.Request({ mode: 'analyzer', ...ADMIN })
  v = p.checkCall(analyzer, 'create_invoice', confirmed, { pending: held, query: 'yes' })
  assert.deepEqual([v.decision, v.stage], ['deny', 'mode'])
})
