/**
 * The shape every MCP tool in `tools/` has: its hand-written JSON Schema, its
 * zod validation and its handler. The MCP server (see `server.ts`) lists the
 * definitions, validates arguments, checks the caller's scope and calls the
 * handler; handlers never see unvalidated input.
 *
 * @module
 */

import type { z } from "zod";

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
  type: "text";
  text: string;
}

/** Image content of a tool result (`data` is base64). */
export interface ImageContent {
  type: "image";
  data: string;
  mimeType: string;
}

/** What a tool handler returns: the MCP `CallToolResult`. */
export interface ToolResult {
  content: Array<TextContent | ImageContent>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
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
  /** Aborted when the client cancels the request or goes away. */
  signal: AbortSignal;
  /** The caller's scope; undefined over stdio. */
  scope?: Scope;
  /**
   * Reports progress; a no-op unless the request carried a progressToken.
   * `progress` must increase with every call.
   */
  progress(progress: number, total?: number, message?: string): Promise<void>;
}

/** One MCP tool: schema for `tools/list`, zod schema for validation, handler. */
export interface ToolDefinition<Schema extends z.ZodType = z.ZodType> {
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
  /** Validates raw arguments; failures become field-level tool errors. */
  validate: Schema;
  /**
   * Shapes this tool's error results (scope refusal, invalid arguments, a
   * thrown {@link ToolError}); default {@link errorResult}. The design-code
   * tools use it to add the contract's `structuredContent: { error, timestamp }`.
   */
  errorResult?: (message: string) => ToolResult;
  /** Runs the tool on validated arguments. Expected failures return `isError: true`. */
  handle(args: z.output<Schema>, context: ToolContext): Promise<ToolResult>;
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
