/**
 * Builds the MCP server: the SDK's low-level `Server` with hand-written JSON
 * Schemas. One instance serves one stdio connection, or one HTTP request
 * (a new instance per request, in either era); the serving entries
 * (`createMcpHandler`, `serveStdio`) answer `initialize` and
 * `server/discover`, check the 2026-07-28 envelope and headers, and tell
 * the factory which era the instance serves.
 *
 * @module
 */

import { z } from "zod";
import { checkToolScope, toolsForScope } from "./tool_scope.ts";
import { log } from "../log/mod.ts";
import { type McpExtension, toolMetaFor } from "./extension.ts";
import {
  RESOURCE_NOT_FOUND,
  type ResourceDefinition,
  type ResourceTemplateDefinition,
} from "./resource.ts";
import {
  CLIENT_CAPABILITIES_KEY,
  type McpHandlerContext,
  type McpRequest,
  type McpServer,
  type McpServerCapabilities,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  Server,
} from "./sdk.ts";
import {
  createTaskResult,
  LEGACY_TASK_CAPABILITIES,
  type ProtocolEra,
  registerTaskHandlers,
  type TaskBackend,
  TASKS_EXTENSION_ID,
} from "./tasks.ts";
import {
  errorResult,
  type Scope,
  type StartedTask,
  type ToolContext,
  type ToolDefinition,
  ToolError,
  type ToolResult,
} from "./tool.ts";
import { formatValidationError } from "./validation.ts";

/** Name and version reported in `initialize` and in every 2026-07-28 result's `_meta`. */
export const SERVER_INFO = { name: "generate-image-sd15-mcp", version: "0.1.0" } as const;

/** Marks a `tools/call` whose `arguments` was present but not an object. */
const NOT_AN_OBJECT = "__argumentsNotAnObject";

/** What `arguments` was, for the message: "an array", "a string", "null". */
function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  const type = typeof value;
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/**
 * `tools/call` params, except that a non-object `arguments` is set aside
 * instead of failing the parse: the SDK's own schema would answer it with a
 * JSON-RPC error and a raw zod dump, while a bad argument is the tool's
 * problem (an `isError` result the model can fix). `task` is 2025-11-25's
 * request for a task.
 */
const CallToolParams = z.preprocess(
  (params) => {
    if (params === null || typeof params !== "object" || Array.isArray(params)) return params;
    const args = (params as { arguments?: unknown }).arguments;
    if (args === undefined || (args !== null && typeof args === "object" && !Array.isArray(args))) {
      return params;
    }
    return { ...params, arguments: {}, [NOT_AN_OBJECT]: describeValue(args) };
  },
  z.looseObject({
    name: z.string(),
    arguments: z.record(z.string(), z.unknown()).optional(),
    task: z.looseObject({ ttl: z.unknown().optional() }).optional(),
    [NOT_AN_OBJECT]: z.string().optional(),
  }),
);

/**
 * The SDK's `Server`, except that `tools/call` goes to the handler as the
 * client sent it: the SDK validates the request against its own schema
 * first (a non-object `arguments` would be a JSON-RPC error, see
 * {@link CallToolParams}) and the result against `CallToolResult` (a task
 * handle is not one). The handler below validates both itself.
 */
class ToolServer extends Server {
  protected override _wrapHandler(
    method: string,
    handler: (request: McpRequest, ctx: McpHandlerContext) => Promise<Record<string, unknown>>,
  ): (request: McpRequest, ctx: McpHandlerContext) => Promise<Record<string, unknown>> {
    return method === "tools/call" ? handler : super._wrapHandler(method, handler);
  }
}

/** Options of {@link createMcpServer}. */
export interface McpServerOptions {
  /** The tools to list and serve, in listing order. */
  tools: readonly ToolDefinition[];
  /** The protocol era this instance serves (the entry says; default the 2025 era). */
  era?: ProtocolEra;
  /** The caller's scope (HTTP); undefined for stdio. `tools/list` shows it only the tools it may call. */
  scope?: Scope;
  /**
   * The 2025-era revision of a stateless HTTP request (its `MCP-Protocol-Version`
   * header, 2025-03-26 when absent). Over stdio the one `initialize` negotiated
   * is used; under 2026-07-28 the request's own `_meta` names it.
   */
  protocolVersion?: string;
  /**
   * Whether an aborted call was cancelled by its client rather than left by
   * a client that disconnected (see `ToolContext.cancelled`). Default: every
   * abort is a cancellation, as over stdio and under 2026-07-28 HTTP.
   */
  cancelled?: () => boolean;
  /** Server instructions shown to the client at `initialize` / `server/discover`. */
  instructions?: string;
  /**
   * Static resources served by `resources/list` and `resources/read` (with
   * the `resources` capability). They do not wait for {@link ready}.
   */
  resources?: readonly ResourceDefinition[];
  /**
   * Resource templates listed by `resources/templates/list`; `resources/read`
   * tries each, in order, after the static resources.
   */
  templates?: readonly ResourceTemplateDefinition[];
  /** Extensions advertised in `capabilities.extensions` (see `extension.ts`). */
  extensions?: readonly McpExtension[];
  /**
   * Where tasks live: with it, calls of tools whose `execution.taskSupport`
   * allows it may run as tasks (see `tasks.ts`); without, no call does.
   */
  tasks?: TaskBackend;
  /**
   * Settles when the tools can run (the model check and engine start-up).
   * `initialize` and `server/discover` are answered at once; `tools/list`
   * and `tools/call` wait for it, and fail with its error when it rejects.
   */
  ready?: Promise<void>;
}

/** Whether calls of `tool` may run as tasks. */
function runsAsTask(tool: ToolDefinition): boolean {
  const support = tool.execution?.taskSupport;
  return support === "optional" || support === "required";
}

/** Creates a server that lists `tools` and dispatches calls to them. */
export function createMcpServer(options: McpServerOptions): McpServer {
  const era = options.era ?? "legacy";
  const resources = options.resources ?? [];
  const templates = options.templates ?? [];
  const extensions = options.extensions ?? [];
  const tasks = options.tasks;
  const advertised: Record<string, unknown> = Object.fromEntries(
    extensions.map((e) => [e.id, { ...e.settings }]),
  );
  // 2026-07-28 tasks are an extension; 2025-11-25's are a capability (SEP-2663 "Backward Compatibility").
  if (tasks && era === "modern") advertised[TASKS_EXTENSION_ID] = {};
  const server = new ToolServer(SERVER_INFO, {
    capabilities: {
      tools: {},
      ...(resources.length || templates.length ? { resources: {} } : {}),
      ...(tasks && era === "legacy" ? { tasks: LEGACY_TASK_CAPABILITIES } : {}),
      ...(Object.keys(advertised).length ? { extensions: advertised } : {}),
    } as McpServerCapabilities,
    instructions: options.instructions,
  });
  server.onerror = (error) => log("debug", "mcp", "protocol error", { error: error.message });
  const byName = new Map(options.tools.map((t) => [t.name, t]));

  const ready = async () => {
    try {
      await options.ready;
    } catch (error) {
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `the server could not start its tools: ${(error as Error)?.message ?? String(error)}`,
      );
    }
  };

  /**
   * The client's capabilities: on 2026-07-28 from the request's own `_meta`;
   * in the 2025 era from `initialize` (stdio), unknown on a stateless HTTP request.
   */
  const clientCapabilities = (ctx: McpHandlerContext) =>
    era === "modern"
      ? (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_KEY] as
        | { extensions?: Record<string, unknown> }
        | undefined ?? {}
      : server.getClientCapabilities();

  /** The revision a request was sent for: what its results may contain (e.g. `resource_link`). */
  const protocolVersion = (ctx: McpHandlerContext): string | undefined =>
    era === "modern"
      ? ((ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[
        PROTOCOL_VERSION_META_KEY
      ] as string | undefined) ?? "2026-07-28"
      : server.getNegotiatedProtocolVersion() ?? options.protocolVersion;

  server.setRequestHandler("tools/list", async (_request, ctx) => {
    await ready();
    const client = clientCapabilities(ctx);
    return {
      tools: toolsForScope(options.scope, options.tools).map((t) => {
        const meta = toolMetaFor(t._meta, extensions, client);
        return {
          name: t.name,
          ...(t.title ? { title: t.title } : {}),
          description: t.description,
          inputSchema: t.inputSchema as { type: "object"; [k: string]: unknown },
          annotations: t.annotations,
          // The SDK leaves `execution` out under 2026-07-28, where the server decides.
          ...(tasks && t.execution ? { execution: { ...t.execution } } : {}),
          ...(meta ? { _meta: meta } : {}),
        };
      }),
    };
  });

  if (resources.length || templates.length) {
    const byUri = new Map(resources.map((r) => [r.uri, r]));
    // Static documents and job images: no engine needed, so these answer while the models load.
    server.setRequestHandler("resources/list", () => ({
      resources: resources.map((r) => ({
        uri: r.uri,
        name: r.name,
        ...(r.title ? { title: r.title } : {}),
        ...(r.description ? { description: r.description } : {}),
        mimeType: r.mimeType,
        ...(r._meta ? { _meta: { ...r._meta } } : {}),
      })),
    }));
    server.setRequestHandler("resources/templates/list", () => ({
      resourceTemplates: templates.map((t) => ({
        uriTemplate: t.uriTemplate,
        name: t.name,
        ...(t.title ? { title: t.title } : {}),
        ...(t.description ? { description: t.description } : {}),
        ...(t.mimeType ? { mimeType: t.mimeType } : {}),
      })),
    }));
    server.setRequestHandler("resources/read", async (request) => {
      const uri = request.params.uri;
      const resource = byUri.get(uri);
      if (resource) {
        return {
          contents: [{
            uri: resource.uri,
            mimeType: resource.mimeType,
            text: await resource.read(),
            ...(resource.contentMeta ? { _meta: { ...resource.contentMeta } } : {}),
          }],
        };
      }
      for (const template of templates) {
        const read = await template.read(uri, options.scope);
        if (!read) continue;
        const { blob, text } = read;
        return {
          contents: [{
            uri: read.uri,
            mimeType: read.mimeType,
            ...(blob !== undefined ? { blob } : { text: text ?? "" }),
          }],
        };
      }
      // A URI of a template's form that reads as nothing: say when such a resource exists.
      const family = templates.find((t) => uri.startsWith(t.uriTemplate.split("{")[0]));
      if (family) {
        throw new ProtocolError(
          RESOURCE_NOT_FOUND,
          `Resource not found: ${uri} (the template ${family.uriTemplate}: ${
            family.description ?? family.name
          })`,
          { uri },
        );
      }
      // Encoded as -32602 on the wire in both eras (SEP-2164, MCP 2026-07-28 server/resources).
      throw new ProtocolError(
        RESOURCE_NOT_FOUND,
        `Resource not found: ${uri} (resources/list shows ${
          resources.map((r) => r.uri).join(", ") || "none"
        }${
          templates.length
            ? `; resources/templates/list shows ${templates.map((t) => t.uriTemplate).join(", ")}`
            : ""
        })`,
        { uri },
      );
    });
  }

  if (tasks) registerTaskHandlers(server, era, tasks, options.scope);

  server.setRequestHandler("tools/call", { params: CallToolParams }, async (params, ctx) => {
    await ready();
    const tool = byName.get(params.name);
    if (!tool) {
      // An unknown tool is a protocol problem, not a tool execution error.
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
    }
    // 2025-11-25: the client asks (`params.task`), and a tool that runs no tasks refuses with
    // -32601; 2026-07-28: the server decides, for a client whose request accepts tasks.
    let asTask = false;
    if (tasks && era === "legacy" && params.task !== undefined) {
      if (!runsAsTask(tool)) {
        throw new ProtocolError(
          ProtocolErrorCode.MethodNotFound,
          `${tool.name} does not run as a task (its execution.taskSupport is "forbidden"); ` +
            `call it without params.task`,
        );
      }
      asTask = true;
    } else if (tasks && era === "modern" && runsAsTask(tool)) {
      asTask = clientCapabilities(ctx)?.extensions?.[TASKS_EXTENSION_ID] !== undefined;
    }
    const fail = tool.errorResult ?? errorResult;
    const refusal = checkToolScope(options.scope, tool.annotations.readOnlyHint);
    if (refusal) return fail(refusal);
    const notAnObject = params[NOT_AN_OBJECT];
    if (notAnObject !== undefined) {
      return fail(
        `invalid arguments for ${tool.name}: arguments: must be an object of named arguments, got ${notAnObject}`,
      );
    }
    const parsed = tool.validate.safeParse(params.arguments ?? {});
    if (!parsed.success) {
      return fail(formatValidationError(tool.name, parsed.error.issues));
    }
    const signal = ctx.mcpReq.signal;
    const progressToken = ctx.mcpReq._meta?.progressToken;
    let lastProgress = -Infinity;
    let started: StartedTask | undefined;
    const context: ToolContext = {
      signal,
      scope: options.scope,
      cancelled: options.cancelled,
      protocolVersion: protocolVersion(ctx),
      async progress(progress: number, total?: number, message?: string) {
        // The spec requires progress to increase; duplicates are dropped.
        if (progressToken === undefined || progress <= lastProgress || signal.aborted) return;
        lastProgress = progress;
        try {
          await ctx.mcpReq.notify({
            method: "notifications/progress",
            params: { progressToken, progress, total, message },
          });
        } catch (error) {
          log("debug", "mcp", "progress notification not delivered", {
            error: (error as Error).message,
          });
        }
      },
      ...(asTask ? { startTask: (task: StartedTask) => void (started = task) } : {}),
      ...(asTask && typeof params.task?.ttl === "number" ? { taskTtlMs: params.task.ttl } : {}),
    };
    let result: ToolResult;
    try {
      result = await tool.handle(parsed.data, context);
    } catch (error) {
      if (error instanceof ToolError) return fail(error.message);
      if (signal.aborted) return fail(`${tool.name} was cancelled`);
      log("error", "mcp", `tool ${tool.name} failed unexpectedly`, {
        error: (error as Error)?.stack ?? String(error),
      });
      return fail(`${tool.name} failed: ${(error as Error)?.message ?? String(error)}`);
    }
    if (started) return createTaskResult(started, era);
    return result;
  });

  return server;
}
