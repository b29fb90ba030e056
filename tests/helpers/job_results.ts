/**
 * Following a generation job from a test: `get_generation` until the job
 * has ended.
 *
 * @module
 */

import type { Client } from "../../mod/mcp/client_sdk.ts";
import { assertClientSafe } from "./results.ts";

/** A `tools/call` result as the SDK client returns it. */
export type CallResult = Awaited<ReturnType<Client["callTool"]>>;

/**
 * Calls `get_generation` for `id` until the job is neither queued nor
 * running, and returns that answer. With several clients (one per server)
 * it asks them in turn. Each call waits `waitSeconds` (default: the
 * server's own bound), so keep it under the clients' request timeout.
 */
export async function untilEnded(
  clients: Client | readonly Client[],
  id: string,
  options: { waitSeconds?: number; timeoutMs?: number; tries?: number } = {},
): Promise<CallResult> {
  const list = Array.isArray(clients) ? clients : [clients as Client];
  const args = options.waitSeconds === undefined
    ? { job_id: id }
    : { job_id: id, wait_seconds: options.waitSeconds };
  for (let i = 0; i < (options.tries ?? 600); i++) {
    const result = await list[i % list.length].callTool(
      { name: "get_generation", arguments: args },
      undefined,
      { timeout: options.timeoutMs ?? 60_000 },
    ) as CallResult;
    assertClientSafe(result, `get_generation ${id}`);
    const state = (result.structuredContent as { state?: string } | undefined)?.state;
    if (state !== "queued" && state !== "running") return result;
  }
  throw new Error(`job ${id} did not end`);
}
