/**
 * The shape every MCP tool in `tools/` has: its hand-written JSON Schema, its
 * zod validation and its handler. The MCP server (see `server.ts`) lists the
 * definitions, validates arguments, checks the caller's scope and calls the
 * handler; handlers never see unvalidated input.
 *
 * @module
 */

import type { z } from "zod";

// zod types reach public signatures only through the bare aliases below:
// `deno doc --lint` counts a direct `z.ZodType<…>` in an exported signature as
// a reference to a private (third-party) type, but accepts a plain alias.

/** Any zod schema (zod v4 `z.ZodType`): what a tool's `validate` may be. */
export type ZodSchema = z.ZodType;

/** One zod v4 validation issue (`z.core.$ZodIssue`): path, code and message. */
export type ZodIssue = z.core.$ZodIssue;

/** The zod object shape (`z.ZodRawShape`): field name → field schema. */
export type ZodShape = z.ZodRawShape;

/**
 * The value `Schema` parses to — zod's `z.output<Schema>`, spelt as the
 * indexed access zod itself uses (`Schema["_zod"]["output"]`).
 */
export type SchemaOutput<Schema extends ZodSchema> = Schema["_zod"]["output"];

/**
 * A zod schema whose parsed value is `Output` and whose accepted input is
 * `Input` — the information of `z.ZodType<Output, Input>` without naming zod
 * generics in public signatures. Any zod schema with that output and input
 * is assignable to it, and `z.output` / `SchemaOutput` of it is `Output`.
 */
export type ZodField<Output, Input = Output> = ZodSchema & {
  readonly _zod: { readonly output: Output; readonly input: Input };
};

/** A JSON Schema object, written by hand and shown verbatim in `tools/list`. */
export type JsonSchema = { readonly [key: string]: unknown };

/** MCP tool annotations (all hints). */
export interface ToolAnnotations {
  /** Display name. */
  title?: string;
  /** The tool does not modify its environment. */
  readOnlyHint: boolean;
  /** May perform destructive updates (meaningful only when not read-only). */
  destructiveHint: boolean;
  /** Repeated calls with the same arguments have no additional effect. */
  idempotentHint: boolean;
  /** Interacts with an open world of external entities. */
  openWorldHint: boolean;
}

/** Text content of a tool result. */
export interface TextContent {
  /** MCP content kind: always `text`. */
  type: "text";
  /** The text shown to the model (UTF-8, free form). */
  text: string;
}

/** Image content of a tool result (`data` is base64). */
export interface ImageContent {
  /** MCP content kind: always `image`. */
  type: "image";
  /** The image bytes, base64-encoded (no `data:` prefix). */
  data: string;
  /** MIME type of `data`, e.g. `image/png`. */
  mimeType: string;
}

/**
 * A link to a resource the client may read with `resources/read` (MCP
 * 2025-06-18 and later; older revisions have no such content block).
 */
export interface ResourceLinkContent {
  /** MCP content kind: always `resource_link`. */
  type: "resource_link";
  /** The resource's URI. */
  uri: string;
  /** Programmatic name (e.g. a file name). */
  name: string;
  /** Human title. */
  title?: string;
  /** What it is, for the model and the user. */
  description?: string;
  /** MIME type of the resource's content. */
  mimeType?: string;
  /** Size of the raw content in bytes (before base64). */
  size?: number;
  /** Who the resource is for (`user`, `assistant`). */
  annotations?: { audience?: Array<"user" | "assistant">; priority?: number };
}

/** What a tool handler returns: the MCP `CallToolResult`. */
export interface ToolResult {
  /** Content blocks in order: text, images and resource links. */
  content: Array<TextContent | ImageContent | ResourceLinkContent>;
  /** Machine-readable result object, when the tool defines one. */
  structuredContent?: Record<string, unknown>;
  /** True for a tool-level failure the model should see (MCP `isError`); absent or false on success. */
  isError?: boolean;
  /** Further `CallToolResult` fields (e.g. `_meta`) pass through unchanged. */
  [key: string]: unknown;
}

/**
 * Who is calling, from the API key that authenticated the HTTP request.
 * Absent for stdio, where the process is local and needs no key.
 */
export interface Scope {
  /** The key's non-secret prefix, for logs. */
  keyPrefix: string;
  /** The project the key is bound to, or null for an unbound key. */
  projectId: number | null;
  /** The user that owns the key, or null. */
  userId: number | null;
  /** `read` keys may call only read-only tools; `write` keys every tool. */
  permission: "read" | "write";
}

/** Per-call context handed to a tool handler. */
export interface ToolContext {
  /** Aborted when the client cancels the request or goes away: stop waiting. */
  signal: AbortSignal;
  /**
   * Whether the abort of {@link signal} is the client cancelling the call
   * (`notifications/cancelled`, or a stdio client that is gone), so the work
   * it started should stop too. False when an HTTP client only disconnected:
   * MCP 2025-11-25 says a disconnection SHOULD NOT be taken as a
   * cancellation, so a job the call started goes on, listed and fetchable.
   * Absent: every abort is a cancellation.
   */
  cancelled?(): boolean;
  /** The caller's scope; undefined over stdio. */
  scope?: Scope;
  /**
   * The MCP revision the client speaks for this call (`2025-11-25`; the one
   * negotiated by `initialize`, or the request's own under 2026-07-28).
   * Absent when the server does not say: results then hold only what every
   * revision has (no `resource_link`).
   */
  protocolVersion?: string;
  /**
   * Reports progress; a no-op unless the request carried a progressToken.
   * `progress` must increase with every call.
   */
  progress(progress: number, total?: number, message?: string): Promise<void>;
  /**
   * Present when the call runs as a task (the client can poll for its
   * result, see `tasks.ts`): a tool that starts a long job hands the job
   * over here as soon as it exists, instead of waiting for it, and returns
   * at once; its return value is then not sent.
   */
  startTask?(task: StartedTask): void;
  /** With {@link startTask}: the TTL in ms the client asked for (2025-11-25 `params.task.ttl`), if any. */
  taskTtlMs?: number;
}

/** A job a tool started and handed over as a task (see {@link ToolContext.startTask}). */
export interface StartedTask {
  /** The job id, which is the task id. */
  id: string;
  /** When the job was created. */
  createdAt: Date;
  /** Its TTL in ms from creation (the client's request within the server's bounds). */
  ttlMs: number;
}

/**
 * Whether a tool may run as a task: MCP 2025-11-25's `execution.taskSupport`
 * (`optional`: the client chooses). Under 2026-07-28 the server decides, for
 * the tools that allow it, when the client accepts the tasks extension.
 */
export interface ToolExecution {
  /** `optional` or `required` lets a call run as a task; `forbidden` (the default) does not. */
  taskSupport: "optional" | "required" | "forbidden";
}

/** One MCP tool: schema for `tools/list`, zod schema for validation, handler. */
export interface ToolDefinition<Schema extends ZodSchema = ZodSchema> {
  /** Tool name as listed. */
  name: string;
  /** Optional human title. */
  title?: string;
  /** What the tool does, for the model choosing it. */
  description: string;
  /** Hand-written JSON Schema, listed verbatim. */
  inputSchema: JsonSchema;
  /** Behaviour hints; `readOnlyHint` also decides which key scopes may call it. */
  annotations: ToolAnnotations;
  /**
   * The tool's `_meta` in `tools/list` (e.g. MCP Apps' `ui.resourceUri`).
   * Keys an extension owns are listed only to clients that may use it
   * (see `extension.ts`).
   */
  _meta?: Readonly<Record<string, unknown>>;
  /** Whether calls may run as tasks, listed as the tool's `execution`. */
  execution?: ToolExecution;
  /** Validates raw arguments; failures become field-level tool errors. */
  validate: Schema;
  /**
   * Shapes this tool's error results (scope refusal, invalid arguments, a
   * thrown {@link ToolError}); default {@link errorResult}. The design-code
   * tools use it to add the contract's `structuredContent: { error, timestamp }`.
   */
  errorResult?: (message: string) => ToolResult;
  /** Runs the tool on validated arguments. Expected failures return `isError: true`. */
  handle(args: SchemaOutput<Schema>, context: ToolContext): Promise<ToolResult>;
}

/**
 * A failure that should reach the model as a tool error (`isError: true`),
 * with text it can act on. `category` follows the contract's error classes.
 */
export class ToolError extends Error {
  /** The contract's error class. */
  readonly category:
    | "input"
    | "image"
    | "configuration"
    | "inference"
    | "out_of_memory"
    | "saving"
    | "busy"
    | "scope"
    | "backend";

  /** Creates a tool error of the given class. */
  constructor(category: ToolError["category"], message: string) {
    super(message);
    this.name = "ToolError";
    this.category = category;
  }
}

/** Builds an `isError: true` result with one text item. */
export function errorResult(text: string, structuredContent?: Record<string, unknown>): ToolResult {
  const result: ToolResult = { content: [{ type: "text", text }], isError: true };
  if (structuredContent) result.structuredContent = structuredContent;
  return result;
}
