/**
 * What `list-designs` and `list-code` share: their arguments (both take the
 * same four), and the handler body — scope check,
 * `GET /internal/<resource>?project_id&organization_id&limit&offset`, and the
 * contract's list result.
 *
 * Source: the design-code HTTP I/O contract ("Tool 入力", "`list-designs` /
 * `list-code` 成功"). {@link createListTool} builds either tool from what
 * differs between them.
 *
 * @module
 */

import type { JsonSchema, ToolContext, ToolDefinition, ToolResult } from "../mcp/tool.ts";
import { callBackend, type DesignCodeToolOptions } from "./call_backend.ts";
import {
  type ArgumentsSchema,
  argumentsSchema,
  limitJson,
  limitSchema,
  offsetJson,
  offsetSchema,
  optionalOrganizationIdJson,
  optionalOrganizationIdSchema,
  projectIdJson,
  projectIdSchema,
} from "./fields.ts";
import { type ListArguments, toListPage } from "./list_page.ts";
import { projectScopeRefusal } from "./project_scope.ts";
import { readOnlyBackendAnnotations } from "./tool_annotations.ts";
import { backendErrorResult, backendSuccessResult } from "./tool_results.ts";
import type { BackendClient } from "./types.ts";

/** Validates the arguments of a list tool (defaults applied: limit 20, offset 0). */
export const listArgumentsSchema: ArgumentsSchema<{
  project_id: typeof projectIdSchema;
  organization_id: typeof optionalOrganizationIdSchema;
  limit: typeof limitSchema;
  offset: typeof offsetSchema;
}> = argumentsSchema({
  project_id: projectIdSchema,
  organization_id: optionalOrganizationIdSchema,
  limit: limitSchema,
  offset: offsetSchema,
});

/** The JSON Schema of {@link listArgumentsSchema}, as `tools/list` shows it. */
export const listArgumentsJson: JsonSchema = {
  type: "object",
  properties: {
    project_id: projectIdJson,
    organization_id: optionalOrganizationIdJson,
    limit: limitJson,
    offset: offsetJson,
  },
  required: ["project_id"],
  additionalProperties: false,
};

/** What differs between the two list tools. */
export interface ListSpec {
  /** Last path segment: `designs` or `code`. */
  resource: string;
  /** Keys that may hold the item array besides `items` and `results`. */
  itemKeys: readonly string[];
  /** Singular and plural noun for the summary, e.g. `["design", "designs"]`. */
  nouns: readonly [string, string];
  /** Text before the colon of an error. */
  action: string;
  /** Clock for error timestamps. */
  now: () => Date;
}

/**
 * Runs one list request.
 *
 * @param backend The backend client.
 * @param args Validated arguments (defaults applied).
 * @param context The tool call's context.
 * @param spec What to list.
 * @returns The success or error result.
 */
export async function runListRequest(
  backend: BackendClient,
  args: ListArguments,
  context: ToolContext,
  spec: ListSpec,
): Promise<ToolResult> {
  const refusal = projectScopeRefusal(context.scope, args.project_id);
  if (refusal !== undefined) return backendErrorResult(spec.action, refusal, spec.now());

  const call = await callBackend(
    backend,
    {
      method: "GET",
      path: ["internal", spec.resource],
      query: {
        project_id: args.project_id,
        organization_id: args.organization_id,
        limit: args.limit,
        offset: args.offset,
      },
    },
    context,
    {
      action: spec.action,
      notFound: `Project not found: ${args.project_id}`,
      now: spec.now,
    },
  );
  if (!call.ok) return call.result;

  const listed = toListPage(call.data, args, spec.itemKeys);
  if (!listed.ok) return backendErrorResult(spec.action, listed.message, spec.now());
  const { page } = listed;
  const noun = (count: number) => count === 1 ? spec.nouns[0] : spec.nouns[1];
  return backendSuccessResult(
    `Found ${page.total_count} ${noun(page.total_count)} in project ${page.project_id}; ` +
      `returned ${page.returned_count} (offset ${page.offset}, limit ${page.limit})`,
    page,
    true,
  );
}

/** What a list tool is called and how it describes itself, besides its {@link ListSpec}. */
export interface ListToolSpec extends Omit<ListSpec, "now"> {
  /** Tool name as listed, e.g. `list-code`. */
  name: string;
  /** Display title (also the annotations' title). */
  title: string;
  /** What the tool does, for the model choosing it. */
  description: string;
}

/**
 * Creates a list tool (read-only, idempotent, open world) on the shared
 * arguments, handler and error shape.
 *
 * @param backend The backend client.
 * @param options Clock for error timestamps.
 * @param spec What the tool lists and how it is named.
 * @returns The tool definition.
 */
export function createListTool(
  backend: BackendClient,
  options: DesignCodeToolOptions,
  spec: ListToolSpec,
): ToolDefinition<typeof listArgumentsSchema> {
  const now = options.now ?? (() => new Date());
  const { name, title, description, ...list } = spec;
  return {
    name,
    title,
    description,
    inputSchema: listArgumentsJson,
    annotations: readOnlyBackendAnnotations(title),
    errorResult: (message) => backendErrorResult(spec.action, message, now()),
    validate: listArgumentsSchema,
    handle(args, context) {
      return runListRequest(backend, args, context, { ...list, now });
    },
  };
}
