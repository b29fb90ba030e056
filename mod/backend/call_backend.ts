/**
 * One backend call from inside a design-code tool handler: passes the
 * caller's signal and project scope to the client, and turns a failure into
 * the contract's error result.
 *
 * @module
 */

import type { ToolContext, ToolResult } from "../mcp/tool.ts";
import { describeBackendFailure } from "./failure_message.ts";
import { backendErrorResult } from "./tool_results.ts";
import type { BackendClient, BackendRequest } from "./types.ts";

/** Options every design-code tool factory takes. */
export interface DesignCodeToolOptions {
  /** Clock for result timestamps. @default () => new Date() */
  now?: () => Date;
}

/** How a tool names its failures. */
export interface FailureWording {
  /** Text before the colon, e.g. "Failed to retrieve des2code result". */
  action: string;
  /** The not-found sentence, e.g. "Des2Code result not found for this design". */
  notFound: string;
  /** Clock for the error `timestamp`. */
  now: () => Date;
}

/** The payload of a successful call, or the error result to return as is. */
export type BackendCallResult =
  | { ok: true; data: unknown }
  | { ok: false; result: ToolResult };

/**
 * Sends `request` with the context's signal and, when the caller's key is
 * bound to a project, its `X-MCP-Project-ID`.
 *
 * @param backend The backend client.
 * @param request The request.
 * @param context The tool call's context.
 * @param wording How to word a failure.
 * @returns The unwrapped payload, or an `isError` result.
 */
export async function callBackend(
  backend: BackendClient,
  request: BackendRequest,
  context: ToolContext,
  wording: FailureWording,
): Promise<BackendCallResult> {
  const outcome = await backend.send(request, {
    signal: context.signal,
    projectId: context.scope?.projectId ?? null,
  });
  if (outcome.ok) return { ok: true, data: outcome.data };
  const message = describeBackendFailure(outcome, wording.notFound);
  return { ok: false, result: backendErrorResult(wording.action, message, wording.now()) };
}
