// Per-call figures for the Node binding, on the same generated policy as the Rust bench
// (benches/evaluator.rs: `evaluate/offer_all/180`, `evaluate/check_call/180`) and the Python
// one (bindings/python/benches/bench_offer.py).
//
// Run in bindings/node after `npm run build`:   npm run bench
// and compare with `cargo bench --bench evaluator -- 'evaluate/(offer_all|decide_one)/180|check_call'`.

import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Policy, Request, Intent, version } from 'toolwarden'

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const EFFECTS = ['none', 'write', 'delete', 'export', 'execute']
const SERVERS = ['github', 'slack', 'drive', 'jira']

/** The text benches/evaluator.rs generates, line for line. */
function policyText(n) {
  const s = ['policy "bench" version 1\n', 'effects none, write, delete, export, execute\n']
  s.push('intents destructive > execute > export > write > read\nfallback read\n')
  s.push('include "lexicon/standard.warden"\n')
  s.push(
    'matrix standard {\n              none   write  delete export execute\n' +
      '  read        allow  deny   deny   deny   deny\n  write       allow  allow  deny   deny   deny\n' +
      '  destructive allow  deny   allow  deny   deny\n  export      allow  deny   deny   allow  deny\n' +
      '  execute     allow  deny   deny   deny   allow\n}\n',
  )
  s.push('mode analyzer { matrix standard restrict none }\n')
  s.push('mode supervised { matrix standard confirm write, delete, export, execute }\n')
  s.push('mode autonomous { matrix standard confirm export, execute }\n')
  s.push('default mode supervised\n')
  s.push('roles { owner > admin > manager > accountant > clerk > viewer, auditor > viewer, support > viewer }\n')
  for (let g = 0; g < 8; g++) {
    s.push(`permission "area${g}.manage" implies "area${g}.add", "area${g}.delete", "area${g}.view", "area${g}.export"\n`)
  }
  s.push('tiers task > session > project\nconnectors prefix "mcp__"\nunknown deny\n')
  s.push('confirm fields "confirmed"\ntenant arg "business_id"\nlimit transactional 1 per turn\n')
  for (let i = 0; i < n; i++) {
    const effect = EFFECTS[i % 5]
    const perm = { none: 'view', write: 'add', delete: 'delete' }[effect] || 'export'
    const name = i % 3 === 0 ? `mcp__${SERVERS[i % 4]}__tool_${i}` : `tool_${i}`
    const roles = i % 7 === 0 ? ' roles accountant' : ''
    s.push(`tool ${name} { effect ${effect} permissions "area${i % 8}.${perm}" tenant required${roles} }\n`)
  }
  return s.join('')
}

/** [best, median] of `repeat` runs of `number` calls, in microseconds per call. */
function timings(fn, number, repeat = 15) {
  for (let i = 0; i < number; i++) fn() // warm up the JIT and the caches
  const runs = []
  for (let r = 0; r < repeat; r++) {
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < number; i++) fn()
    runs.push(Number(process.hrtime.bigint() - t0) / number / 1000)
  }
  runs.sort((a, b) => a - b)
  return [runs[0], runs[Math.floor(runs.length / 2)]]
}

const policy = Policy.parse(policyText(180), path.join(REPO, 'policies', 'bench.warden'))
const names = policy.toolNames
if (names.length !== 180) throw new Error(`expected 180 tools, got ${names.length}`)
const request = new Request({
  mode: 'supervised',
  roles: ['accountant'],
  permissions: ['area0.manage', 'area1.manage', 'area2.view', 'area3.manage'],
  tenant: 'b-42',
  connectors: { session: ['github', 'drive'] },
})
const intent = Intent.named('write')
const prepared = policy.tools(names)
const schemas = names.map((name) => ({ type: 'function', function: { name, parameters: {} } }))
const preparedSchemas = policy.tools(schemas)
const args = { business_id: 'b-42', amount: 120.5, lines: [{ sku: 'A-1', qty: 2 }], confirmed: true }
const argsText = JSON.stringify(args)
const visible = policy.offer(request, prepared, { intent })
const one = ['tool_1']

const rows = [
  ['offer, 180 names, prepared', () => policy.offer(request, prepared, { intent }), 20_000],
  ['offer, 180 names', () => policy.offer(request, names, { intent }), 5_000],
  ['offer, 180 schemas, prepared', () => policy.offerSchemas(request, preparedSchemas, { intent }), 20_000],
  ['offer, 180 OpenAI schemas', () => policy.offerSchemas(request, schemas, { intent }), 1_000],
  ['offer, 1 name', () => policy.offer(request, one, { intent }), 50_000],
  ['checkCall (object args)', () => policy.checkCall(request, 'tool_1', args, { intent, strict: false }), 50_000],
  ['checkCall (JSON text args)', () => policy.checkCall(request, 'tool_1', argsText, { intent, strict: false }), 50_000],
  ['classify (short query)', () => policy.classify('please create a new invoice'), 20_000],
]
console.log(`node ${process.versions.node}, toolwarden ${version}; ${visible.length} of 180 visible`)
console.log(`${''.padEnd(30)} ${'best'.padStart(11)} ${'median'.padStart(11)}`)
for (const [label, fn, number] of rows) {
  const [best, median] = timings(fn, number)
  console.log(`${label.padEnd(30)} ${best.toFixed(2).padStart(8)} µs ${median.toFixed(2).padStart(8)} µs`)
}
