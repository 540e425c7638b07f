'use strict'
// Shared fixtures: the shipped policies of the repository this package is built from.
const path = require('node:path')
const tw = require('..')

const REPO = path.resolve(__dirname, '..', '..', '..')
const POLICIES = path.join(REPO, 'policies')
const FINANCE = path.join(POLICIES, 'finance.warden')
const CONNECTORS = path.join(POLICIES, 'connectors.warden')
const RETAIL = path.join(POLICIES, 'retail.warden')
const FIXTURES = path.join(REPO, 'tests', 'fixtures')

let cache = {}
function load(file) {
  if (!cache[file]) cache[file] = tw.Policy.fromFile(file)
  return cache[file]
}

module.exports = {
  tw,
  REPO,
  FINANCE,
  CONNECTORS,
  RETAIL,
  FIXTURES,
  finance: () => load(FINANCE),
  connectors: () => load(CONNECTORS),
  retail: () => load(RETAIL),
}
