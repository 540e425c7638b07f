import type { PendingCall, Policy } from '../index'
import { TurnGuard, type TurnOptions } from './core'

/** A guarded MCP client: `listTools` filtered, `callTool` judged before the server sees it. */
export declare class McpGuard extends TurnGuard {
  constructor(client: any, policy: Policy, options: TurnOptions)
  listTools(params?: any, options?: any): Promise<any>
  callTool(params: { name: string; arguments?: Record<string, unknown> }, options?: { approved?: PendingCall; resultSchema?: any; requestOptions?: any }): Promise<any>
}

export declare function mcpGuard(client: any, policy: Policy, options: TurnOptions): McpGuard
