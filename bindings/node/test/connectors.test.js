'use strict'
// Connector allowlists on policies/connectors.warden, as the Python suite's test_connectors.py:
// tier precedence task > session > project, null (tier unset) vs [] (zero connectors), the exact
// blocked message, and enforcement at execution for names never offered.
const test = require('node:test')
const assert = require('node:assert/strict')
const { tw, connectors, CONNECTORS } = require('./helpers.js')

const NONE = null
const EMPTY = []
const GITHUB = ['github']
const MAIL = ['mail']
const BOTH = ['github', 'mail']

// [task, session, project, deciding tier or null for unrestricted, github allowed, mail allowed]
const RESOLUTION = [
  [NONE, NONE, NONE, null, true, true],
  [GITHUB, NONE, NONE, 'task', true, false],
  [NONE, GITHUB, NONE, 'session', true, false],
  [NONE, NONE, GITHUB, 'project', true, false],
  [EMPTY, NONE, NONE, 'task', false, false],
  [NONE, EMPTY, NONE, 'session', false, false],
  [NONE, NONE, EMPTY, 'project', false, false],
  [MAIL, GITHUB, NONE, 'task', false, true],
  [GITHUB, MAIL, BOTH, 'task', true, false],
  [NONE, MAIL, GITHUB, 'session', false, true],
  [NONE, GITHUB, BOTH, 'session', true, false],
  [NONE, BOTH, EMPTY, 'session', true, true],
  [EMPTY, BOTH, BOTH, 'task', false, false],
  [NONE, EMPTY, BOTH, 'session', false, false],
  [NONE, NONE, BOTH, 'project', true, true],
]

const request = (task, session, project) => new tw.Request({ mode: 'chat', connectors: { task, session, project } })

for (const [task, session, project, tier, github, mail] of RESOLUTION) {
  test(`tiers ${JSON.stringify([task, session, project])}: the first tier set decides`, () => {
    const p = connectors()
    const req = request(task, session, project)
    const tools = ['mcp__github__create_issue', 'mcp__mail__send', 'read_file']
    const expected = tools.filter((_, i) => [github, mail, true][i])
    assert.deepEqual(p.offer(req, tools), expected)
    for (const [tool, server, allowed] of [
      ['mcp__github__create_issue', 'github', github],
      ['mcp__mail__send', 'mail', mail],
    ]) {
      const got = p.explain(req, tool)
      if (allowed) {
        assert.deepEqual([got.decision, got.stage], ['allow', null])
      } else {
        assert.deepEqual([got.decision, got.stage], ['deny', 'connector'])
        assert.equal(got.reason, `Connector ${server} is not enabled for this ${tier}`)
      }
    }
  })
}

test('a request keeps only the tiers set', () => {
  const req = request(NONE, EMPTY, BOTH)
  assert.deepEqual(req.connectors, { session: [], project: ['github', 'mail'] })
})

test('checkCall blocks a connector tool that was never offered', () => {
  const p = connectors()
  const req = request(['mail'], NONE, NONE)
  assert.deepEqual(p.offer(req, ['read_file', 'send_email']), ['read_file', 'send_email'])
  const turn = new tw.Turn()
  let v = p.checkCall(req, 'mcp__github__delete_repo', { repo: 'x' }, { turn })
  assert.deepEqual([v.decision, v.stage], ['deny', 'connector'])
  assert.equal(v.reason, 'Connector github is not enabled for this task')
  assert.equal(v.argsForExecution, null)
  assert.deepEqual(v.toJSON(), {
    ok: false,
    decision: 'deny',
    tool: 'mcp__github__delete_repo',
    error: 'Connector github is not enabled for this task',
    metadata: {
      blocked_by_policy: true,
      stage: 'connector',
      operation_type: 'transactional',
      effect: 'write',
      policy_source: `${CONNECTORS}:11:1`,
    },
  })
  v = p.checkCall(req, 'mcp__mail__send', { to: 'a@b.c' }, { turn })
  assert.deepEqual([v.decision, v.stage], ['allow', null])
  assert.deepEqual(v.argsForExecution, { to: 'a@b.c' })
})

test('an undeclared tier is a RequestError', () => {
  const req = new tw.Request({ mode: 'chat', connectors: { team: ['github'] } })
  assert.throws(() => connectors().offer(req, ['read_file']), (e) => {
    assert.ok(e instanceof tw.RequestError && e instanceof Error)
    assert.equal(e.message, 'unknown connector tier `team`; the policy declares `task`, `session`, `project`')
    return true
  })
})
