'use strict'
// Argument rules from Node: `context` sets on the Request, and the rules that fired, typed, on
// the verdict (`source`, `outcome`, `reference`, `value`, `problem`).
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { tw, FIXTURES } = require('./helpers.js')

const EVERY_RULE = path.join(FIXTURES, 'rules', 'every_rule.warden')
const policy = () => tw.Policy.fromFile(EVERY_RULE)
const fired = (v) => v.rules.map((r) => [r.source, r.outcome, r.reference, r.value ?? null, r.problem ?? null])

test('a payee in the request context passes; no rule fires', () => {
  const request = new tw.Request({ context: { contacts: ['alice'], hosts: [] } })
  assert.deepEqual(request.contextNames, ['contacts', 'hosts'])
  const v = policy().checkCall(request, 'send_money', { recipient: 'alice', amount: 50, currency: 'EUR' }, { intent: 'write' })
  assert.equal(v.decision, 'allow')
  assert.deepEqual(v.rules, [])
})

test('a payee outside the context set asks the user, naming the rule and the value', () => {
  const request = new tw.Request({ context: { contacts: ['alice'] } })
  const v = policy().checkCall(request, 'send_money', { recipient: 'mallory', amount: 50, currency: 'EUR' }, { intent: 'write' })
  assert.equal(v.decision, 'confirm')
  assert.equal(v.stage, 'arguments')
  // The rule also reads the user's query, which a named intent does not carry: it says so.
  assert.deepEqual(fired(v), [
    [`${EVERY_RULE}:38:3`, 'confirm', 'recipient', 'mallory', "the user's query is not known"],
  ])
})

test('deny wins over confirm, and every rule that fired is listed', () => {
  const request = new tw.Request({ context: { contacts: ['alice'] } })
  const v = policy().checkCall(request, 'send_money', { recipient: 'alice', amount: 20000, currency: 'EUR' }, { intent: 'write' })
  assert.equal(v.decision, 'deny')
  assert.deepEqual(fired(v), [
    [`${EVERY_RULE}:39:3`, 'confirm', 'amount', '20000', null],
    [`${EVERY_RULE}:40:3`, 'deny', 'amount', '20000', null],
  ])
})

test('an absent context set fails closed: the rule fires with its problem', () => {
  const v = policy().checkCall(new tw.Request({}), 'send_money', { recipient: 'alice', amount: 50, currency: 'EUR' }, { intent: 'write' })
  assert.equal(v.decision, 'confirm')
  const [[source, outcome, reference, , problem]] = fired(v)
  assert.deepEqual([source, outcome, reference], [`${EVERY_RULE}:38:3`, 'confirm', 'recipient'])
  assert.equal(typeof problem, 'string')
})

test('a context of the wrong shape is a TypeError naming the field', () => {
  assert.throws(() => new tw.Request({ context: ['alice'] }), TypeError)
  assert.throws(() => new tw.Request({ context: { contacts: 'alice' } }), /context\.contacts/)
})
