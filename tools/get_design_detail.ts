/**
 * `get-design-detail`: reads one design source, without vector embeddings,
 * through the backend internal API (`GET /internal/designs/{design_id}`),
 * which checks the scope and proxies the AI-v2 design detail.
 *
 * Source: `source/http-io-contract.ja.md` ("Tool 入力", "Detail 成功").
 *
 * @module
 */

import type { ToolDefinition } from "../mod/mcp/tool.ts";
import {
  argumentsSchema,
  type BackendClient,
  backendErrorResult,
  backendSuccessResult,
  callBackend,
  type DesignCodeToolOptions,
  designIdJson,
  designIdSchema,
  designScopeRefusal,
  recordScopeRefusal,
  toDetailRecord,
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
    annotations: {
      title: "Get design detail",
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: true,
    },
    validate: schema,
    async handle(args, context) {
      const refusal = designScopeRefusal(context.scope, args.design_id);
      if (refusal !== undefined) return backendErrorResult(ACTION, refusal, now());

      const call = await callBackend(
        backend,
        {
          method: "GET",
          path: ["internal", "designs", args.design_id],
        },
        context,
        { action: ACTION, notFound: `Design not found: ${args.design_id}`, now },
      );
      if (!call.ok) return call.result;

      const detail = toDetailRecord(call.data, "design");
      if (!detail.ok) return backendErrorResult(ACTION, detail.message, now());
      const leak = recordScopeRefusal(context.scope, detail.record, "design");
      if (leak !== undefined) return backendErrorResult(ACTION, leak, now());

      const name = typeof detail.record.name === "string" ? ` (${detail.record.name})` : "";
      return backendSuccessResult(
        `Design detail for design ID ${args.design_id}${name}`,
        { design: detail.record },
        true,
      );
    },
  };
}
