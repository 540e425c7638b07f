// ESM entry of the mcp adapter (the CommonJS module is the implementation).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const adapter = require('./mcp.js')

export default adapter
export const { mcpGuard, McpGuard } = adapter
