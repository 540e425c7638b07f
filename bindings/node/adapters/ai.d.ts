import type { Policy } from '../index'
import { ToolBlockedError, TurnGuard, type TurnOptions } from './core'

export { ToolBlockedError }

/** The options the AI SDK passes to a tool's `needsApproval`. */
export interface ToolApprovalOptions {
  toolCallId?: string
  messages?: unknown[]
  experimental_context?: unknown
}

/** A tool's own `needsApproval` function, as the AI SDK accepts it. */
export type ToolApprovalRule = (input: any, options: ToolApprovalOptions) => boolean | PromiseLike<boolean>

/** The Vercel AI SDK guard of one user turn. */
export declare class AiGuard extends TurnGuard {
  /** The names of `tools` the model may see: pass as `activeTools`. */
  activeTools(tools?: Record<string, unknown>): string[]
  /** A `prepareStep` returning `{ activeTools }` for the tools last given to `tools()`. */
  readonly prepareStep: () => { activeTools: string[] }
  /**
   * The `needsApproval` function of one tool: true when the policy asks the user, or when the
   * tool's own rule `own` asks for approval of a call the policy allows (a denied call is never
   * put to the user). A promise when `own` returns one.
   */
  needsApproval(name: string, own?: boolean | ToolApprovalRule): (input: unknown, options?: ToolApprovalOptions) => boolean | PromiseLike<boolean>
  /**
   * The tools with `needsApproval` (the policy's composed with the tool's own) and a guarded
   * `execute` (a deny throws `ToolBlockedError`).
   */
  tools<T extends Record<string, any>>(tools: T): T
}

export declare function aiGuard(policy: Policy, options: TurnOptions): AiGuard
/** The toolCallIds the user approved, read from AI SDK messages. */
export declare function approvedCallIds(messages: unknown): Set<string>
