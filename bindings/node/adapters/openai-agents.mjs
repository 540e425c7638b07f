// ESM entry of the openai-agents adapter (the CommonJS module is the implementation).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const adapter = require('./openai-agents.js')

export default adapter
export const { agentsGuard, AgentsGuard } = adapter
