/**
 * MCP Apps (the `io.modelcontextprotocol/ui` extension, SEP-1865, stable
 * 2026-01-26; https://github.com/modelcontextprotocol/ext-apps, file
 * `specification/2026-01-26/apps.mdx`) as this server takes part in it: the
 * wire strings, the extension it advertises and the check of a client's
 * settings.
 *
 * Written by hand rather than with `@modelcontextprotocol/ext-apps/server`:
 * its `registerAppTool` / `registerAppResource` wrap the SDK's high-level
 * `McpServer.registerTool` / `registerResource` (zod shapes), while this
 * server uses the low-level `Server` with hand-written JSON Schemas; what
 * they add on the wire is two `_meta` keys and a resource, written here.
 *
 * @module
 */

import type { McpExtension } from "../mcp/mod.ts";

/** The extension identifier (the key in `capabilities.extensions`). */
export const UI_EXTENSION_ID = "io.modelcontextprotocol/ui";

/** The MIME type of an MCP Apps HTML view (`RESOURCE_MIME_TYPE` in ext-apps). */
export const MCP_APP_MIME_TYPE = "text/html;profile=mcp-app";

/**
 * The tool `_meta` keys of the extension: `ui` (`{ resourceUri }`) and the
 * flat `ui/resourceUri` that the spec keeps, deprecated, for hosts built
 * before it, as ext-apps' own `registerAppTool` still does.
 */
export const UI_TOOL_META_KEYS = ["ui", "ui/resourceUri"] as const;

/**
 * Whether a client's `capabilities.extensions["io.modelcontextprotocol/ui"]`
 * says it renders this server's views: the extension is advertised and its
 * `mimeTypes` (required by the spec) include {@link MCP_APP_MIME_TYPE}. A
 * client that advertises the extension without `mimeTypes` is taken at its
 * word; one whose `mimeTypes` lack the type renders other kinds of view.
 */
export function acceptsMcpApps(settings: unknown): boolean {
  if (settings === null || typeof settings !== "object") return false;
  const types = (settings as { mimeTypes?: unknown }).mimeTypes;
  if (types === undefined) return true;
  return Array.isArray(types) && types.includes(MCP_APP_MIME_TYPE);
}

/** The extension as the server advertises it (settings mirror the client's: the view types it serves). */
export const MCP_APPS_EXTENSION: McpExtension = {
  id: UI_EXTENSION_ID,
  settings: { mimeTypes: [MCP_APP_MIME_TYPE] },
  accepts: acceptsMcpApps,
  toolMetaKeys: UI_TOOL_META_KEYS,
};
