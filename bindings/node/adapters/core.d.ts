import type { Intent, PendingCall, Policy, Request, Turn, Verdict } from '../index'

/** One user turn: who asks, the intent (`query` to classify, or `intent`), the turn's count. */
export interface TurnOptions {
  request: Request
  query?: string
  intent?: Intent | string | string[]
  turn?: Turn
}

/** A call the policy did not allow; `message` is its JSON result (seed 004's blocked shape). */
export declare class ToolBlockedError extends Error {
  readonly verdict: Verdict
}

/** The policy over one user turn, shared by the adapters. */
export declare class TurnGuard {
  constructor(policy: Policy, options: TurnOptions)
  readonly policy: Policy
  readonly request: Request
  readonly turn: Turn
  /** The names the model may see, in order. */
  visible(names: readonly string[]): string[]
  /** The arguments without the policy's confirmation fields. */
  strip(args: Record<string, unknown> | string): Record<string, unknown>
  /** The decision on the model's call, its confirmation fields stripped, without counting it. */
  judge(tool: string, args: Record<string, unknown> | string): Verdict
  /** The decision on a call about to run (confirmed against `pending` when the user approved). */
  execute(tool: string, args: Record<string, unknown> | string, pending?: PendingCall): Verdict
  /** `execute`, throwing `ToolBlockedError` unless allowed; returns the arguments to run with. */
  authorize(tool: string, args: Record<string, unknown> | string, pending?: PendingCall): Record<string, unknown>
}
