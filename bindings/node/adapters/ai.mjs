// ESM entry of the ai adapter (the CommonJS module is the implementation).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const adapter = require('./ai.js')

export default adapter
export const { aiGuard, AiGuard, ToolBlockedError, approvedCallIds } = adapter
