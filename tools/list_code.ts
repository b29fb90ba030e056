/**
 * `list-code`: lists the compact metadata of a project's code sources (code
 * components) through the backend internal API (`GET /internal/code`), which
 * checks the scope and proxies the AI-v2 code source list.
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
 * Creates the `list-code` tool (read-only, idempotent, open world).
 *
 * @param backend The backend client.
 * @param options Clock for error timestamps.
 * @returns The tool definition.
 */
export function createListCodeTool(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition<typeof listArgumentsSchema> {
  return createListTool(backend, options, {
    name: "list-code",
    title: "List code",
    description: "List the code sources (imported code components) of a project as compact " +
      "metadata, e.g. code _id, name and type. Paged with limit and offset; total_count gives " +
      "the full number. Use a code _id with get-code-detail.",
    resource: "code",
    itemKeys: ["code", "codes"],
    nouns: ["code source", "code sources"],
    action: "Failed to list code",
  });
}
