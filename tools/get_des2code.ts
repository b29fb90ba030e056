/**
 * `get-des2code`: reads the latest des2code summary of a design from the
 * backend internal API (`GET /internal/des2code/{design_id}`), which returns
 * the latest PostgreSQL-backed result and its S3 artifact reference.
 *
 * Source: the design-code HTTP I/O contract ("Tool 入力", "`get-des2code` 成功",
 * "Error response"). An empty match list is a success with
 * `matched_code_count: 0`.
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
  readOnlyBackendAnnotations,
  snippet,
} from "../mod/backend/mod.ts";

const schema = argumentsSchema({ design_id: designIdSchema });

const ACTION = "Failed to retrieve des2code result";

/**
 * Creates the `get-des2code` tool (read-only, idempotent, open world).
 *
 * The backend's result object is returned as `structuredContent` unchanged
 * (`design_id`, `status`, `matched_code_count`, `matched_codes`, `artifact`,
 * `error`, `processed_at`).
 *
 * @param backend The backend client.
 * @param options Clock for error timestamps.
 * @returns The tool definition.
 */
export function createGetDes2CodeTool(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition<typeof schema> {
  const now = options.now ?? (() => new Date());
  return {
    name: "get-des2code",
    title: "Get des2code result",
    description: "Read the latest des2code result of a design: its status, the matched code " +
      "components ranked by similarity (code_id, name, similarity scores) and the stored " +
      "result artifact. Use after trigger-des2code; an empty match list is a valid result.",
    inputSchema: {
      type: "object",
      properties: { design_id: designIdJson },
      required: ["design_id"],
      additionalProperties: false,
    },
    annotations: readOnlyBackendAnnotations("Get des2code result"),
    errorResult: (message) => backendErrorResult(ACTION, message, now()),
    validate: schema,
    async handle(args, context) {
      const refusal = designScopeRefusal(context.scope, args.design_id);
      if (refusal !== undefined) return backendErrorResult(ACTION, refusal, now());

      const call = await callBackend(
        backend,
        {
          method: "GET",
          path: ["internal", "des2code", args.design_id],
        },
        context,
        { action: ACTION, notFound: "Des2Code result not found for this design", now },
      );
      if (!call.ok) return call.result;

      const result = call.data;
      if (typeof result !== "object" || result === null || Array.isArray(result)) {
        return backendErrorResult(
          ACTION,
          `Invalid backend response: expected a des2code result object, got ${
            result === null ? "null" : Array.isArray(result) ? "an array" : typeof result
          }`,
          now(),
        );
      }
      const fields = result as Record<string, unknown>;
      const status = typeof fields.status === "string" ? snippet(fields.status, 100) : "unknown";
      const count = typeof fields.matched_code_count === "number"
        ? fields.matched_code_count
        : Array.isArray(fields.matched_codes)
        ? fields.matched_codes.length
        : 0;
      return backendSuccessResult(
        `Des2Code result for design ID ${args.design_id}: status ${status}, ` +
          `${count} matched code${count === 1 ? "" : "s"}`,
        fields,
        true,
      );
    },
  };
}
