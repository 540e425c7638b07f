import type { Policy } from '../index'
import { TurnGuard, type TurnOptions } from './core'

type Decision = 'approve' | 'edit' | 'reject'

/** The LangChain.js guard: `interruptOn` for humanInTheLoopMiddleware and guarded tools. */
export declare class LangchainGuard extends TurnGuard {
  /** The `when` predicate: true when the policy asks the human. */
  when(request: { toolCall: { name: string; args: Record<string, unknown>; id?: string } }): boolean
  interruptOn(tools: ReadonlyArray<string | { name: string }>, options?: { allowedDecisions?: Decision[] }): Record<string, { allowedDecisions: Decision[]; when: (request: any) => boolean }>
  tool<T>(tool: T): T
  tools<T>(tools: T[]): T[]
}

export declare function langchainGuard(policy: Policy, options: TurnOptions): LangchainGuard
