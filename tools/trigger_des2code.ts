/**
 * `trigger-des2code`: queues a des2code matching job for one design through
 * the backend internal API (`POST /internal/des2code`). The backend checks the
 * design/project/organization scope in PostgreSQL and sends the SQS message.
 *
 * Source: the design-code HTTP I/O contract ("Tool 入力", "MCP 出力",
 * "冪等性と整合性"). Needs a `write` key: it is not read-only, and the MCP
 * server lets `read` keys call read-only tools only.
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
  organizationIdJson,
  organizationIdSchema,
  projectIdJson,
  projectIdSchema,
  projectScopeRefusal,
} from "../mod/backend/mod.ts";

const schema = argumentsSchema({
  design_id: designIdSchema,
  project_id: projectIdSchema,
  organization_id: organizationIdSchema,
});

const ACTION = "Failed to trigger des2code matching";

/**
 * Creates the `trigger-des2code` tool.
 *
 * Annotations: not read-only; not destructive (a new run replaces only the
 * design's "latest result" reference, earlier timestamped artifacts stay);
 * not idempotent (every call queues another job and writes another artifact,
 * although re-triggering is allowed); open world (calls the backend).
 *
 * @param backend The backend client.
 * @param options Clock for the result timestamp.
 * @returns The tool definition.
 */
export function createTriggerDes2CodeTool(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition<typeof schema> {
  const now = options.now ?? (() => new Date());
  return {
    name: "trigger-des2code",
    title: "Trigger des2code matching",
    description: "Queue a des2code job for a design: the backend matches the design against " +
      "the project's code components and stores a ranked result (it does not generate code). " +
      "Runs asynchronously; read the result later with get-des2code. Re-triggering a design " +
      "replaces its latest result. Requires an API key with write permission.",
    inputSchema: {
      type: "object",
      properties: {
        design_id: designIdJson,
        project_id: projectIdJson,
        organization_id: organizationIdJson,
      },
      required: ["design_id", "project_id", "organization_id"],
      additionalProperties: false,
    },
    annotations: {
      title: "Trigger des2code matching",
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true,
    },
    errorResult: (message) => backendErrorResult(ACTION, message, now()),
    validate: schema,
    async handle(args, context) {
      const refusal = projectScopeRefusal(context.scope, args.project_id) ??
        designScopeRefusal(context.scope, args.design_id);
      if (refusal !== undefined) return backendErrorResult(ACTION, refusal, now());

      const call = await callBackend(
        backend,
        {
          method: "POST",
          path: ["internal", "des2code"],
          body: {
            design_id: args.design_id,
            project_id: args.project_id,
            organization_id: args.organization_id,
          },
        },
        context,
        { action: ACTION, notFound: `Design not found: ${args.design_id}`, now },
      );
      if (!call.ok) return call.result;

      return backendSuccessResult(
        `Successfully triggered des2code matching for design ID: ${args.design_id}`,
        {
          success: true,
          design_id: args.design_id,
          project_id: args.project_id,
          organization_id: args.organization_id,
          timestamp: now().toISOString(),
        },
        false,
      );
    },
  };
}
