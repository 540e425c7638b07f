// The package loaded with `import`: named and default exports, one decision end to end.
import test from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import toolwarden, { Policy, Request, Turn, PolicyError } from 'toolwarden'

const FINANCE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'policies', 'finance.warden')

test('import loads the addon and decides as require does', () => {
  assert.equal(toolwarden.Policy, Policy)
  const policy = Policy.fromFile(FINANCE)
  const request = new Request({ mode: 'supervised', roles: ['accountant'], permissions: ['invoices.manage'], tenant: 'b-42' })
  assert.deepEqual(policy.offer(request, ['get_invoice', 'delete_invoice', 'rm_rf'], { query: 'delete invoice 7' }), [
    'get_invoice',
    'delete_invoice',
  ])
  const v = policy.checkCall(request, 'delete_invoice', { invoice_id: 7, business_id: 'b-42' }, { turn: new Turn(), query: 'delete invoice 7' })
  assert.equal(v.decision, 'confirm')
  assert.throws(() => Policy.parse('policy "x"'), PolicyError)
})
