/**
 * The design-code toolset: the six tools of the design-code HTTP I/O contract
 * that delegate to the backend internal API. They are listed only when
 * `BACKEND_INTERNAL_URL` is configured (product contract §1, §6).
 *
 * Permissions: `trigger-des2code` is the only tool that is not read-only, so
 * the MCP server (which decides by `annotations.readOnlyHint`) lets only
 * `write` keys call it; the five read tools are open to `read` keys too.
 *
 * @module
 */

import type { ToolDefinition } from "../mod/mcp/tool.ts";
import {
  type BackendClient,
  type BackendClientOptions,
  createBackendClient,
  type DesignCodeToolOptions,
} from "../mod/backend/mod.ts";
import { createTriggerDes2CodeTool } from "./trigger_des2code.ts";
import { createGetDes2CodeTool } from "./get_des2code.ts";
import { createListDesignsTool } from "./list_designs.ts";
import { createListCodeTool } from "./list_code.ts";
import { createGetDesignDetailTool } from "./get_design_detail.ts";
import { createGetCodeDetailTool } from "./get_code_detail.ts";

/** The six tool names, in listing order. */
export const DESIGN_CODE_TOOL_NAMES: readonly string[] = [
  "trigger-des2code",
  "get-des2code",
  "list-designs",
  "list-code",
  "get-design-detail",
  "get-code-detail",
];

/**
 * Creates the six design-code tools on one backend client.
 *
 * @param backend The backend client (see `createBackendClient`).
 * @param options Clock for result timestamps.
 * @returns The tools, in the order of {@link DESIGN_CODE_TOOL_NAMES}.
 */
export function createDesignCodeTools(
  backend: BackendClient,
  options: DesignCodeToolOptions = {},
): ToolDefinition[] {
  return [
    createTriggerDes2CodeTool(backend, options),
    createGetDes2CodeTool(backend, options),
    createListDesignsTool(backend, options),
    createListCodeTool(backend, options),
    createGetDesignDetailTool(backend, options),
    createGetCodeDetailTool(backend, options),
  ];
}

/**
 * Whether the design-code tools are to be listed: only when a backend URL is
 * configured (a non-blank `BACKEND_INTERNAL_URL`).
 *
 * @param baseUrl The configured backend URL, or `undefined`.
 * @returns `true` when the toolset is enabled.
 */
export function designCodeToolsEnabled(baseUrl: string | undefined): boolean {
  return baseUrl !== undefined && baseUrl.trim() !== "";
}

/** Options of {@link createDesignCodeToolsIfConfigured}: the client options with an optional URL. */
export interface DesignCodeConfig extends Omit<BackendClientOptions, "baseUrl"> {
  /** `BACKEND_INTERNAL_URL`, or `undefined` when not configured. */
  baseUrl: string | undefined;
}

/**
 * Creates the six tools with their backend client when `baseUrl` is
 * configured, and no tools otherwise.
 *
 * @param config Backend URL (or `undefined`), API key, timeout.
 * @param options Clock for result timestamps.
 * @returns The tools, or `[]`.
 * @throws {TypeError} When `baseUrl` is set but not an http(s) URL.
 * @throws {RangeError} When `timeoutMs` is not a positive integer.
 *
 * @example
 * ```ts
 * // Normally from the resolved config; [] when BACKEND_INTERNAL_URL is unset.
 * const tools = createDesignCodeToolsIfConfigured({
 *   baseUrl: Deno.env.get("BACKEND_INTERNAL_URL"),
 *   apiKey: Deno.env.get("BACKEND_INTERNAL_API_KEY"),
 *   timeoutMs: 10_000,
 * });
 * ```
 */
export function createDesignCodeToolsIfConfigured(
  config: DesignCodeConfig,
  options: DesignCodeToolOptions = {},
): ToolDefinition[] {
  if (config.baseUrl === undefined || !designCodeToolsEnabled(config.baseUrl)) return [];
  return createDesignCodeTools(
    createBackendClient({ ...config, baseUrl: config.baseUrl }),
    options,
  );
}
