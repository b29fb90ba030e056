/**
 * Builds the MCP server: the low-level SDK `Server` with hand-written JSON
 * Schemas. One instance serves one stdio session, or one HTTP request in
 * stateless mode (a new server and transport per request).
 *
 * @module
 */

import { z } from "zod";
import { checkToolScope, toolsForScope } from "../auth/tool_scope.ts";
import { log } from "../log/mod.ts";
import { type McpExtension, toolMetaFor } from "./extension.ts";
import { RESOURCE_NOT_FOUND, type ResourceDefinition } from "./resource.ts";
import {
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type McpMessage,
  type McpServer,
  type McpTransport,
  ReadResourceRequestSchema,
  Server,
} from "./sdk.ts";
import {
  errorResult,
  type Scope,
  type ToolDefinition,
  ToolError,
  type ToolResult,
} from "./tool.ts";
import { formatValidationError } from "./validation.ts";

/** Name and version reported in `initialize`. */
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
 * `tools/call` as the SDK's `CallToolRequestSchema`, except that a
 * non-object `arguments` is set aside instead of failing the parse: the SDK
 * would answer it with JSON-RPC -32603 and a raw zod dump, while a bad
 * argument is the tool's problem (an `isError` result the model can fix).
 * The SDK re-validates the parsed request against its own schema, which the
 * replacement `{}` satisfies.
 */
const CallToolRequest = z.object({
  method: z.literal("tools/call"),
  params: z.preprocess(
    (params) => {
      if (params === null || typeof params !== "object" || Array.isArray(params)) return params;
      const args = (params as { arguments?: unknown }).arguments;
      if (
        args === undefined || (args !== null && typeof args === "object" && !Array.isArray(args))
      ) {
        return params;
      }
      return { ...params, arguments: {}, [NOT_AN_OBJECT]: describeValue(args) };
    },
    z.looseObject({
      name: z.string(),
      arguments: z.record(z.string(), z.unknown()).optional(),
      [NOT_AN_OBJECT]: z.string().optional(),
    }),
  ),
});

/** Options of {@link createMcpServer}. */
export interface McpServerOptions {
  /** The tools to list and serve, in listing order. */
  tools: readonly ToolDefinition[];
  /** The caller's scope (HTTP); undefined for stdio. `tools/list` shows it only the tools it may call. */
  scope?: Scope;
  /**
   * Whether an aborted call was cancelled by its client rather than left by
   * a client that disconnected (see `ToolContext.cancelled`). Default: every
   * abort is a cancellation, as over stdio.
   */
  cancelled?: () => boolean;
  /** Server instructions shown to the client at initialize. */
  instructions?: string;
  /**
   * Resources served by `resources/list` and `resources/read` (with the
   * `resources` capability); none, and the capability is not advertised.
   * They do not wait for {@link ready}.
   */
  resources?: readonly ResourceDefinition[];
  /** Extensions advertised in `capabilities.extensions` (see `extension.ts`). */
  extensions?: readonly McpExtension[];
  /**
   * Settles when the tools can run (the model check and engine start-up).
   * `initialize` is answered at once; `tools/list` and `tools/call` wait for
   * it, and fail with its error when it rejects.
   */
  ready?: Promise<void>;
}

/**
 * A JSON-RPC error answer with its message as the error itself says it. The
 * SDK's `McpError` puts "MCP error <code>: " before its message, and that
 * message goes on the wire; a client that turns the answer back into an
 * `McpError` (the SDK's own client does) adds the prefix again, so users saw
 * "MCP error -32602: MCP error -32602: Unknown tool: x".
 */
export function withoutErrorPrefix(message: McpMessage): McpMessage {
  if (!("error" in message) || message.error === undefined) return message;
  const prefix = `MCP error ${message.error.code}: `;
  let text = message.error.message;
  while (text.startsWith(prefix)) text = text.slice(prefix.length);
  return text === message.error.message
    ? message
    : { ...message, error: { ...message.error, message: text } };
}

/** Creates a server that lists `tools` and dispatches calls to them. */
export function createMcpServer(options: McpServerOptions): McpServer {
  const resources = options.resources ?? [];
  const extensions = options.extensions ?? [];
  const server = new Server(SERVER_INFO, {
    capabilities: {
      tools: {},
      ...(resources.length ? { resources: {} } : {}),
      ...(extensions.length
        ? { extensions: Object.fromEntries(extensions.map((e) => [e.id, { ...e.settings }])) }
        : {}),
    },
    instructions: options.instructions,
  });
  // Every answer this server sends, the SDK's own errors included, leaves without the prefix.
  const connect = server.connect.bind(server);
  server.connect = (transport: McpTransport) => {
    const send = transport.send.bind(transport);
    transport.send = (message, sendOptions) => send(withoutErrorPrefix(message), sendOptions);
    return connect(transport);
  };
  const byName = new Map(options.tools.map((t) => [t.name, t]));

  const ready = async () => {
    try {
      await options.ready;
    } catch (error) {
      throw new McpError(
        ErrorCode.InternalError,
        `the server could not start its tools: ${(error as Error)?.message ?? String(error)}`,
      );
    }
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    await ready();
    // Known after this session's `initialize` (stdio); unknown on a stateless HTTP request.
    const client = server.getClientCapabilities();
    return {
      tools: toolsForScope(options.scope, options.tools).map((t) => {
        const meta = toolMetaFor(t._meta, extensions, client);
        return {
          name: t.name,
          ...(t.title ? { title: t.title } : {}),
          description: t.description,
          inputSchema: t.inputSchema as { type: "object"; [k: string]: unknown },
          annotations: t.annotations,
          ...(meta ? { _meta: meta } : {}),
        };
      }),
    };
  });

  if (resources.length) {
    const byUri = new Map(resources.map((r) => [r.uri, r]));
    // Static documents: no engine needed, so these answer while the models load.
    server.setRequestHandler(ListResourcesRequestSchema, () => ({
      resources: resources.map((r) => ({
        uri: r.uri,
        name: r.name,
        ...(r.title ? { title: r.title } : {}),
        ...(r.description ? { description: r.description } : {}),
        mimeType: r.mimeType,
        ...(r._meta ? { _meta: { ...r._meta } } : {}),
      })),
    }));
    server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: [] }));
    server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
      const resource = byUri.get(request.params.uri);
      if (!resource) {
        throw new McpError(
          RESOURCE_NOT_FOUND,
          `Resource not found: ${request.params.uri} (resources/list shows ${
            resources.map((r) => r.uri).join(", ")
          })`,
          { uri: request.params.uri },
        );
      }
      return {
        contents: [{
          uri: resource.uri,
          mimeType: resource.mimeType,
          text: await resource.read(),
          ...(resource.contentMeta ? { _meta: { ...resource.contentMeta } } : {}),
        }],
      };
    });
  }

  server.setRequestHandler(CallToolRequest, async (request, extra) => {
    await ready();
    const tool = byName.get(request.params.name);
    if (!tool) {
      // An unknown tool is a protocol problem, not a tool execution error.
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    }
    const fail = tool.errorResult ?? errorResult;
    const refusal = checkToolScope(options.scope, tool.annotations.readOnlyHint);
    if (refusal) return fail(refusal);
    const notAnObject = request.params[NOT_AN_OBJECT];
    if (notAnObject !== undefined) {
      return fail(
        `invalid arguments for ${tool.name}: arguments: must be an object of named arguments, got ${notAnObject}`,
      );
    }
    const parsed = tool.validate.safeParse(request.params.arguments ?? {});
    if (!parsed.success) {
      return fail(formatValidationError(tool.name, parsed.error.issues));
    }
    const progressToken = extra._meta?.progressToken;
    let lastProgress = -Infinity;
    const context = {
      signal: extra.signal,
      scope: options.scope,
      cancelled: options.cancelled,
      async progress(progress: number, total?: number, message?: string) {
        // The spec requires progress to increase; duplicates are dropped.
        if (progressToken === undefined || progress <= lastProgress || extra.signal.aborted) {
          return;
        }
        lastProgress = progress;
        try {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress, total, message },
          });
        } catch (error) {
          log("debug", "mcp", "progress notification not delivered", {
            error: (error as Error).message,
          });
        }
      },
    };
    try {
      const result: ToolResult = await tool.handle(parsed.data, context);
      return result;
    } catch (error) {
      if (error instanceof ToolError) return fail(error.message);
      if (extra.signal.aborted) return fail(`${tool.name} was cancelled`);
      log("error", "mcp", `tool ${tool.name} failed unexpectedly`, {
        error: (error as Error)?.stack ?? String(error),
      });
      return fail(`${tool.name} failed: ${(error as Error)?.message ?? String(error)}`);
    }
  });

  return server;
}
