// ESM entry point: the same objects as the CommonJS entry (one addon instance per process).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const toolwarden = require('./index.js')

export const {
  Policy,
  PolicyWatcher,
  Request,
  Intent,
  Turn,
  PendingCall,
  Verdict,
  ToolSet,
  PolicyError,
  RequestError,
  version,
} = toolwarden
export default toolwarden
