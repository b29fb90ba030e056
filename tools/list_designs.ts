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
  backendErrorResult,
  type DesignCodeToolOptions,
  listArgumentsJson,
  listArgumentsSchema,
  readOnlyBackendAnnotations,
  runListRequest,
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
  const now = options.now ?? (() => new Date());
  return {
    name: "list-designs",
    title: "List designs",
    description: "List the design sources (imported Figma frames/components) of a project as " +
      "compact metadata: design _id, name, file_id, page_id, node_id, component_id. Paged " +
      "with limit and offset; total_count gives the full number. Use a design _id with " +
      "get-design-detail, trigger-des2code or get-des2code.",
    inputSchema: listArgumentsJson,
    annotations: readOnlyBackendAnnotations("List designs"),
    errorResult: (message) => backendErrorResult("Failed to list designs", message, now()),
    validate: listArgumentsSchema,
    handle(args, context) {
      return runListRequest(backend, args, context, {
        resource: "designs",
        itemKeys: ["designs"],
        nouns: ["design", "designs"],
        action: "Failed to list designs",
        now,
      });
    },
  };
}
