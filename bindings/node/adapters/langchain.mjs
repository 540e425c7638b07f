// ESM entry of the langchain adapter (the CommonJS module is the implementation).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const adapter = require('./langchain.js')

export default adapter
export const { langchainGuard, LangchainGuard } = adapter
