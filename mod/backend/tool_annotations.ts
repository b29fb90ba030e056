/**
 * The annotations of the five read-only design-code tools. The MCP server
 * decides permissions by `readOnlyHint` (a `read` key may call only read-only
 * tools), so these tools declare it in one place.
 *
 * @module
 */

import type { ToolAnnotations } from "../mcp/tool.ts";

/**
 * Annotations of a read tool that calls the backend: read-only, not
 * destructive, idempotent, open world.
 *
 * @param title The tool's display title.
 * @returns A fresh annotations object.
 */
export function readOnlyBackendAnnotations(title: string): ToolAnnotations {
  return {
    title,
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: true,
  };
}
