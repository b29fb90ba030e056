/**
 * `list-designs`: lists the compact metadata of a project's design sources
 * through the backend internal API (`GET /internal/designs`), which checks the
 * scope and proxies the AI-v2 design source list.
 *
 * Source: the design-code HTTP I/O contract ("Tool 入力", "`list-designs` /
 * `list-code` 成功"). An empty list is a success with count 0.
 *
 * @module
 */

import type { ToolDefinition } from "../mod/mcp/tool.ts";
import {
  type BackendClient,
  createListTool,
  type DesignCodeToolOptions,
  type listArgumentsSchema,
} from "../mod/backend/mod.ts";

/**
 * Creates the `list-designs` tool (read-only, idempotent, open world).
 *
 * @param backend The backend client.
 * @param options Clock for error timestamps.
 * @returns The tool definition.
 */
export function createListDesignsTool(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition<typeof listArgumentsSchema> {
  return createListTool(backend, options, {
    name: "list-designs",
    title: "List designs",
    description: "List the design sources (imported Figma frames/components) of a project as " +
      "compact metadata: design _id, name, file_id, page_id, node_id, component_id. Paged " +
      "with limit and offset; total_count gives the full number. Use a design _id with " +
      "get-design-detail, trigger-des2code or get-des2code.",
    resource: "designs",
    itemKeys: ["designs"],
    nouns: ["design", "designs"],
    action: "Failed to list designs",
  });
}
