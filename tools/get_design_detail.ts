/**
 * `get-design-detail`: reads one design source, without vector embeddings,
 * through the backend internal API (`GET /internal/designs/{design_id}`),
 * which checks the scope and proxies the AI-v2 design detail.
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
  type DesignCodeToolOptions,
  designIdJson,
  designIdSchema,
  designScopeRefusal,
  readOnlyBackendAnnotations,
  runDetailRequest,
} from "../mod/backend/mod.ts";

const schema = argumentsSchema({ design_id: designIdSchema });

const ACTION = "Failed to retrieve design detail";

/**
 * Creates the `get-design-detail` tool (read-only, idempotent, open world).
 * The result is `{ design: { ... } }`.
 *
 * @param backend The backend client.
 * @param options Clock for error timestamps.
 * @returns The tool definition.
 */
export function createGetDesignDetailTool(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition<typeof schema> {
  const now = options.now ?? (() => new Date());
  return {
    name: "get-design-detail",
    title: "Get design detail",
    description: "Read one design source in full (without vector embeddings): its name, " +
      "Figma file/page/node ids, image and JSON schema references and other stored metadata.",
    inputSchema: {
      type: "object",
      properties: { design_id: designIdJson },
      required: ["design_id"],
      additionalProperties: false,
    },
    annotations: readOnlyBackendAnnotations("Get design detail"),
    errorResult: (message) => backendErrorResult(ACTION, message, now()),
    validate: schema,
    async handle(args, context) {
      // A design id carries its project number, so the scope is checked before the call.
      const refusal = designScopeRefusal(context.scope, args.design_id);
      if (refusal !== undefined) return backendErrorResult(ACTION, refusal, now());
      return await runDetailRequest(backend, context, {
        key: "design",
        id: args.design_id,
        action: ACTION,
        now,
      });
    },
  };
}
