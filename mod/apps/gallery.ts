/**
 * The gallery view: one self-contained HTML file (`gallery.html`: inline CSS
 * and script, no other origin, so the hosts' default MCP Apps CSP holds)
 * served as a `ui://` resource, and the `_meta` that links a tool to it.
 * What the view does is written at the top of the HTML file.
 *
 * @module
 */

import html from "./gallery.html" with { type: "text" };
import type { ResourceDefinition, ToolDefinition, ZodSchema } from "../mcp/mod.ts";
import { MCP_APP_MIME_TYPE } from "./mcp_apps.ts";

/** The view's resource URI. */
export const GALLERY_URI = "ui://generate-image-sd15-mcp/gallery.html";

/** The gallery's HTML, as `resources/read` returns it. */
export const GALLERY_HTML: string = html;

/**
 * The view's `ui` resource metadata: no `csp` (it needs no origin at all,
 * so the restrictive default applies) and a host-drawn border.
 */
const UI_RESOURCE_META = { ui: { prefersBorder: true } } as const;

/** The gallery as a resource: listed, and read by hosts that render MCP Apps. */
export const GALLERY_RESOURCE: ResourceDefinition = {
  uri: GALLERY_URI,
  name: "gallery",
  title: "Generated images",
  description: "MCP Apps view of generated images: each image at full size with its prompt, " +
    "seed, size and time; live progress of a generation job until its images arrive; " +
    "save, again (a new seed) and cancel buttons that call this server's tools.",
  mimeType: MCP_APP_MIME_TYPE,
  _meta: UI_RESOURCE_META,
  contentMeta: UI_RESOURCE_META,
  read: () => GALLERY_HTML,
};

/** The tool `_meta` that names the gallery as the view of the tool's results. */
export const GALLERY_TOOL_META: Readonly<Record<string, unknown>> = {
  ui: { resourceUri: GALLERY_URI },
  "ui/resourceUri": GALLERY_URI,
};

/** `tool` with its results shown in the gallery by hosts that render MCP Apps. */
export function withGalleryView<Schema extends ZodSchema>(
  tool: ToolDefinition<Schema>,
): ToolDefinition<Schema> {
  return { ...tool, _meta: { ...tool._meta, ...GALLERY_TOOL_META } };
}
