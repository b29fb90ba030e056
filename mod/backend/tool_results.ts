/**
 * The MCP results of the design-code tools: success with a one-line text and
 * `structuredContent`, and the contract's error shape.
 *
 * Source: the design-code HTTP I/O contract, "MCP 出力" and "Error response":
 * `{ content: [{ type: "text", text: "Failed to retrieve des2code result: <error>" }],
 *    structuredContent: { error, timestamp }, isError: true }`.
 *
 * @module
 */

import { errorResult, type ToolResult } from "../mcp/tool.ts";

/**
 * The contract's error result: text `"<action>: <message>"`,
 * `structuredContent: { error: message, timestamp }`, `isError: true`.
 *
 * @param action What failed, e.g. "Failed to retrieve des2code result".
 * @param message Why, e.g. "Des2Code result not found for this design".
 * @param now The time of the failure.
 * @returns The result.
 */
export function backendErrorResult(action: string, message: string, now: Date): ToolResult {
  return errorResult(`${action}: ${message}`, { error: message, timestamp: now.toISOString() });
}

/**
 * A success result: the summary line first, then, when `withJson` is set, the
 * same `structuredContent` serialized as JSON text. MCP (2025-06-18, "Structured
 * Content") says a tool returning structured content SHOULD also return it as
 * text, for clients that show the model only `content`; the read tools need
 * that, or the model sees a count and no items.
 *
 * @param summary One line, e.g. "Found 2 designs in project 42".
 * @param structuredContent The contract's result object.
 * @param withJson Add the JSON text item.
 * @returns The result.
 */
export function backendSuccessResult(
  summary: string,
  structuredContent: Record<string, unknown>,
  withJson: boolean,
): ToolResult {
  const content: ToolResult["content"] = [{ type: "text", text: summary }];
  if (withJson) {
    // Indentation grows with depth × values, so a large answer is sent compact:
    // its size then stays that of the (capped) backend body.
    const compact = JSON.stringify(structuredContent);
    content.push({
      type: "text",
      text: compact.length <= MAX_INDENTED_CHARS
        ? JSON.stringify(structuredContent, null, 2)
        : compact,
    });
  }
  return { content, structuredContent };
}

/** Largest compact JSON text that is re-serialized with indentation, in characters. */
export const MAX_INDENTED_CHARS = 64 * 1024;
