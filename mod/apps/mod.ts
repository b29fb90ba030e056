/**
 * MCP Apps: the gallery view that hosts which render the
 * `io.modelcontextprotocol/ui` extension show next to the image and job
 * tools' results, the extension the server advertises, and the `_meta` that
 * links a tool to the view. Tool results do not change: a host without MCP
 * Apps sees exactly what it saw before.
 *
 * @module
 */

export {
  GALLERY_HTML,
  GALLERY_RESOURCE,
  GALLERY_TOOL_META,
  GALLERY_URI,
  withGalleryView,
} from "./gallery.ts";
export {
  acceptsMcpApps,
  MCP_APP_MIME_TYPE,
  MCP_APPS_EXTENSION,
  UI_EXTENSION_ID,
  UI_TOOL_META_KEYS,
} from "./mcp_apps.ts";
