import type { Policy, Request } from '../index'

/** The OpenAI Agents JS guard: approval hooks and guarded tools, state in the run context. */
export declare class AgentsGuard {
  constructor(policy: Policy, options: { request: Request })
  /** The run context of one user turn (`run(agent, input, { context })`). */
  context<T extends Record<string, unknown>>(query: string, extra?: T): T & { toolwarden: { query: string; held: Record<string, unknown>; transactional_calls: number } }
  /** `agent` cloned with only the tools the policy offers for `query`. */
  agentFor<A extends { tools: any[]; clone(config: { tools: any[] }): A }>(agent: A, query: string): A
  /** A function tool with the policy's `needsApproval` and a guarded `invoke`. */
  tool<T>(tool: T): T
  tools<T>(tools: T[]): T[]
}

export declare function agentsGuard(policy: Policy, options: { request: Request }): AgentsGuard
