/**
 * The gallery's resource and tool linking, and the view's HTML as a document
 * that needs no origin: the MCP Apps default CSP (`default-src 'none'`, inline
 * script and style, `data:` images) must hold for it. The view's behaviour is
 * tested in a real browser (tests/apps_browser_test.ts).
 */

import assert from "node:assert/strict";
import { z } from "zod";
import type { ToolDefinition } from "../mcp/mod.ts";
import {
  acceptsMcpApps,
  GALLERY_HTML,
  GALLERY_RESOURCE,
  GALLERY_URI,
  MCP_APP_MIME_TYPE,
  MCP_APPS_EXTENSION,
  withGalleryView,
} from "./mod.ts";

Deno.test("the gallery is a ui:// resource of the MCP Apps MIME type", async () => {
  assert.match(GALLERY_URI, /^ui:\/\//);
  assert.equal(GALLERY_RESOURCE.uri, GALLERY_URI);
  assert.equal(GALLERY_RESOURCE.mimeType, "text/html;profile=mcp-app");
  assert.equal(MCP_APP_MIME_TYPE, "text/html;profile=mcp-app");
  assert.equal(await GALLERY_RESOURCE.read(), GALLERY_HTML);
  assert.equal(MCP_APPS_EXTENSION.id, "io.modelcontextprotocol/ui");
  assert.deepEqual(MCP_APPS_EXTENSION.settings, { mimeTypes: ["text/html;profile=mcp-app"] });
});

Deno.test("the view is one HTML5 document that loads nothing from anywhere", () => {
  assert.match(GALLERY_HTML, /^<!doctype html>/i);
  assert.match(GALLERY_HTML, /<\/html>\s*$/);
  // No element that fetches: external scripts, styles, frames, objects, or forms posting away.
  assert.doesNotMatch(GALLERY_HTML, /<(link|iframe|object|embed|base|form)\b/i);
  assert.doesNotMatch(GALLERY_HTML, /<script\b[^>]*\bsrc=/i);
  assert.doesNotMatch(GALLERY_HTML, /\b(src|href|action)=["']?(https?:)?\/\//i);
  // No CSS or script fetch: @import, url(), fetch, XHR, WebSocket, workers, EventSource.
  assert.doesNotMatch(GALLERY_HTML, /@import|url\(/i);
  assert.doesNotMatch(
    GALLERY_HTML,
    /\b(fetch|XMLHttpRequest|WebSocket|EventSource|Worker|importScripts)\s*\(/,
  );
  assert.doesNotMatch(GALLERY_HTML, /\bnew (XMLHttpRequest|WebSocket|EventSource|Worker)\b/);
  // Not a word of storage either: a sandboxed view may have no origin.
  assert.doesNotMatch(GALLERY_HTML, /\b(localStorage|sessionStorage|indexedDB|document\.cookie)\b/);
});

Deno.test("acceptsMcpApps follows the client's mimeTypes", () => {
  assert.equal(acceptsMcpApps({ mimeTypes: ["text/html;profile=mcp-app"] }), true);
  assert.equal(acceptsMcpApps({ mimeTypes: ["text/uri-list"] }), false);
  assert.equal(acceptsMcpApps({ mimeTypes: "text/html;profile=mcp-app" }), false);
  assert.equal(acceptsMcpApps({}), true, "advertised without the required mimeTypes");
  assert.equal(acceptsMcpApps(undefined), false);
  assert.equal(acceptsMcpApps(null), false);
});

Deno.test("withGalleryView adds both resource URI keys and keeps the tool", () => {
  const tool: ToolDefinition = {
    name: "t",
    description: "d",
    inputSchema: { type: "object" },
    annotations: {
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    },
    _meta: { kept: true },
    validate: z.object({}),
    handle: () => Promise.resolve({ content: [] }),
  };
  const linked = withGalleryView(tool);
  assert.deepEqual(linked._meta, {
    kept: true,
    ui: { resourceUri: GALLERY_URI },
    "ui/resourceUri": GALLERY_URI,
  });
  assert.equal(linked.handle, tool.handle);
  assert.equal(tool._meta && "ui" in tool._meta, false, "the original is not changed");
});
