// Types of the public API. The native classes and their methods come from binding.d.ts, which
// napi-rs generates from the Rust source on `npm run build`; this file adds what index.js adds.

import type { Diagnostic, Intent, Request, ToolSet } from './binding'

export {
  Diagnostic,
  Explanation,
  Intent,
  PendingCall,
  Policy,
  PolicyWatcher,
  Request,
  ToolSet,
  Turn,
  Verdict,
} from './binding'

/** A tool as an agent holds it: a name, or an OpenAI, Anthropic or MCP tool schema object. */
export type Tool = string | Record<string, unknown>

/** Where the intent of an evaluation comes from: a query to classify, or the intent itself. */
export interface EvalOptions {
  query?: string
  intent?: Intent | string | string[]
}

declare module './binding' {
  interface Policy {
    /**
     * The tools the model may see (decision allow or confirm), in input order, as the very
     * items given: names and/or tool schema objects, or a prepared `ToolSet`.
     */
    offer<T extends Tool>(request: Request, tools: readonly T[] | ToolSet<T>, options?: EvalOptions): T[]
    /** `offer` over tool schema objects (names allowed too); MCP annotations only tighten. */
    offerSchemas<T extends Tool>(request: Request, schemas: readonly T[] | ToolSet<T>, options?: EvalOptions): T[]
    /** A prepared tool set: the items read once, for `offer` and `offerSchemas` on every turn. */
    tools<T extends Tool>(items: readonly T[]): ToolSet<T>
  }
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  interface ToolSet<T extends Tool = Tool> {
    /** The items the set was made from, in order (frozen). */
    readonly items: readonly T[]
  }
}

/** A policy failed to load: `message` is the rendered report, `diagnostics` every diagnostic. */
export declare class PolicyError extends Error {
  readonly code: 'PolicyError'
  readonly diagnostics: Diagnostic[]
}

/** The request names a mode, connector tier or intent the policy does not declare. */
export declare class RequestError extends Error {
  readonly code: 'RequestError'
}

/** The package version. */
export declare const version: string
