/**
 * The shared handler body of `get-design-detail` and `get-code-detail`:
 * `GET /internal/<resource>/<id>`, the record normalized by
 * {@link toDetailRecord}, the returned record's project checked against the
 * caller's scope, and the contract's `{ design }` / `{ code }` result.
 *
 * Source: the design-code HTTP I/O contract ("Detail 成功").
 *
 * @module
 */

import type { ToolContext, ToolResult } from "../mcp/tool.ts";
import { callBackend } from "./call_backend.ts";
import { toDetailRecord } from "./detail_record.ts";
import { recordScopeRefusal } from "./project_scope.ts";
import { snippet } from "./snippet.ts";
import { backendErrorResult, backendSuccessResult } from "./tool_results.ts";
import type { BackendClient } from "./types.ts";

/** The path segment and capitalized noun of each detail resource. */
const RESOURCES = {
  design: { segment: "designs", noun: "Design" },
  code: { segment: "code", noun: "Code" },
} as const;

/** What differs between the two detail tools. */
export interface DetailSpec {
  /** Which record: also the result's only key and the id's noun. */
  key: "design" | "code";
  /** The design or code id from the arguments. */
  id: string;
  /** Text before the colon of an error. */
  action: string;
  /** Clock for error timestamps. */
  now: () => Date;
}

/**
 * Runs one detail request. Checks on the id made before the call (the
 * design id's project number) are the caller's.
 *
 * @param backend The backend client.
 * @param context The tool call's context.
 * @param spec What to read.
 * @returns The success or error result.
 */
export async function runDetailRequest(
  backend: BackendClient,
  context: ToolContext,
  spec: DetailSpec,
): Promise<ToolResult> {
  const { key, id, action, now } = spec;
  const { segment, noun } = RESOURCES[key];
  const call = await callBackend(
    backend,
    { method: "GET", path: ["internal", segment, id] },
    context,
    { action, notFound: `${noun} not found: ${id}`, now },
  );
  if (!call.ok) return call.result;

  const detail = toDetailRecord(call.data, key);
  if (!detail.ok) return backendErrorResult(action, detail.message, now());
  const leak = recordScopeRefusal(context.scope, detail.record, key);
  if (leak !== undefined) return backendErrorResult(action, leak, now());

  const name = typeof detail.record.name === "string"
    ? ` (${snippet(detail.record.name, 200)})`
    : "";
  return backendSuccessResult(
    `${noun} detail for ${key} ID ${id}${name}`,
    { [key]: detail.record },
    true,
  );
}
