import type { Policy } from '../index'
import { ToolBlockedError, TurnGuard, type TurnOptions } from './core'

export { ToolBlockedError }

/** The Vercel AI SDK guard of one user turn. */
export declare class AiGuard extends TurnGuard {
  /** The names of `tools` the model may see: pass as `activeTools`. */
  activeTools(tools?: Record<string, unknown>): string[]
  /** A `prepareStep` returning `{ activeTools }` for the tools last given to `tools()`. */
  readonly prepareStep: () => { activeTools: string[] }
  /** The `needsApproval` function of one tool: true when the policy asks the user. */
  needsApproval(name: string): (input: unknown, options?: { toolCallId?: string }) => boolean
  /** The tools with `needsApproval` and a guarded `execute` (a deny throws `ToolBlockedError`). */
  tools<T extends Record<string, any>>(tools: T): T
}

export declare function aiGuard(policy: Policy, options: TurnOptions): AiGuard
/** The toolCallIds the user approved, read from AI SDK messages. */
export declare function approvedCallIds(messages: unknown): Set<string>
