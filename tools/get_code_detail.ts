/**
 * `get-code-detail`: reads one code source, without vector embeddings,
 * through the backend internal API (`GET /internal/code/{code_id}`), which
 * checks the scope and proxies the AI-v2 code detail.
 *
 * Source: the design-code HTTP I/O contract ("Tool 入力", "Detail 成功").
 *
 * @module
 */

import type { ToolDefinition } from "../mod/mcp/tool.ts";
import {
  argumentsSchema,
  type BackendClient,
  backendErrorResult,
  codeIdJson,
  codeIdSchema,
  type DesignCodeToolOptions,
  readOnlyBackendAnnotations,
  runDetailRequest,
} from "../mod/backend/mod.ts";

const schema = argumentsSchema({ code_id: codeIdSchema });

const ACTION = "Failed to retrieve code detail";

/**
 * Creates the `get-code-detail` tool (read-only, idempotent, open world).
 * The result is `{ code: { ... } }`.
 *
 * A code id carries no project number, so the project scope is enforced by
 * the backend (`X-MCP-Project-ID`) and, as a second guard, on the returned
 * record's `project_id`.
 *
 * @param backend The backend client.
 * @param options Clock for error timestamps.
 * @returns The tool definition.
 */
export function createGetCodeDetailTool(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition<typeof schema> {
  const now = options.now ?? (() => new Date());
  return {
    name: "get-code-detail",
    title: "Get code detail",
    description: "Read one code source in full (without vector embeddings): its name, type, " +
      "source code, CSS and image reference.",
    inputSchema: {
      type: "object",
      properties: { code_id: codeIdJson },
      required: ["code_id"],
      additionalProperties: false,
    },
    annotations: readOnlyBackendAnnotations("Get code detail"),
    errorResult: (message) => backendErrorResult(ACTION, message, now()),
    validate: schema,
    handle(args, context) {
      return runDetailRequest(backend, context, {
        key: "code",
        id: args.code_id,
        action: ACTION,
        now,
      });
    },
  };
}
