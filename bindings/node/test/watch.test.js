'use strict'
// Policy.watch: a broken edit keeps the good policy; a fixed edit takes effect.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { tw } = require('./helpers.js')

const good = (name) => `policy "w" version 1
effects none, write
mode m { }
default mode m
tool ${name} { effect none }
`

const offered = (watcher) => watcher.policy().offer(new tw.Request({ mode: 'm' }), ['a', 'b'])

test('a broken edit keeps the good policy and a fixed edit takes effect', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolwarden-'))
  const file = path.join(dir, 'p.warden')
  fs.writeFileSync(file, good('a'))
  const watcher = tw.Policy.watch(file, { watch: false })
  assert.equal(watcher.generation, 1)
  assert.deepEqual(offered(watcher), ['a'])

  fs.writeFileSync(file, 'policy "w"\neffects none\ntool b { effect nonee }\n')
  assert.throws(() => watcher.reloadNow(), tw.PolicyError)
  assert.equal(watcher.generation, 1)
  assert.equal(watcher.rejected, 1)
  assert.match(watcher.lastError, /undefined effect `nonee`/)
  assert.deepEqual(offered(watcher), ['a'])

  fs.writeFileSync(file, good('b'))
  assert.equal(watcher.reloadNow(), 2)
  assert.equal(watcher.lastError, null)
  assert.deepEqual(offered(watcher), ['b'])
  fs.rmSync(dir, { recursive: true })
})

test('a watched file reloads on its own after an edit', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolwarden-'))
  const file = path.join(dir, 'p.warden')
  fs.writeFileSync(file, good('a'))
  const watcher = tw.Policy.watch(file)
  assert.deepEqual(offered(watcher), ['a'])
  fs.writeFileSync(file, good('b'))
  for (let i = 0; i < 100 && watcher.generation < 2; i++) await new Promise((r) => setTimeout(r, 50))
  assert.equal(watcher.generation, 2)
  assert.deepEqual(offered(watcher), ['b'])
  fs.rmSync(dir, { recursive: true })
})

test('a policy that never loaded throws PolicyError', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolwarden-'))
  const file = path.join(dir, 'bad.warden')
  fs.writeFileSync(file, 'tool x { }\n')
  assert.throws(() => tw.Policy.watch(file), tw.PolicyError)
  assert.throws(() => tw.Policy.watch(file, { watch: 'yes' }), {
    name: 'TypeError',
    message: 'watch must be a boolean, not string',
  })
  fs.rmSync(dir, { recursive: true })
})
