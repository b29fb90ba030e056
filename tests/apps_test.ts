/**
 * MCP Apps without a browser, with real SDK clients: over real stdio and
 * real HTTP the server advertises the resources capability and the
 * `io.modelcontextprotocol/ui` extension, `resources/list` and
 * `resources/read` return the gallery, the image and job tools name it in
 * `_meta.ui.resourceUri` for a client that renders MCP Apps (and, over
 * stateless HTTP, for every client), and a stdio client that did not
 * advertise the extension gets the tool listing it always got. The view's
 * behaviour is tested in tests/apps_browser_test.ts.
 */

import assert from "node:assert/strict";
import { GALLERY_HTML, GALLERY_URI, MCP_APP_MIME_TYPE, UI_EXTENSION_ID } from "../mod/apps/mod.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { startHttpApp } from "./helpers/http_app.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { TINY_CONFIG } from "./helpers/paths.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";

/** What a host that renders MCP Apps advertises at initialize. */
const APPS_CLIENT = { extensions: { [UI_EXTENSION_ID]: { mimeTypes: [MCP_APP_MIME_TYPE] } } };

/** The tools whose results the gallery shows. */
const VIEWED = IMAGE_TOOL_NAMES.filter((name) => name !== "cancel_generation");

type Listed = Awaited<ReturnType<Client["listTools"]>>["tools"];

/** Tool name → the view its `_meta` names (both keys must agree), or undefined. */
function views(tools: Listed): Record<string, string | undefined> {
  return Object.fromEntries(tools.map((tool) => {
    const meta = tool._meta as
      | { ui?: { resourceUri?: string }; "ui/resourceUri"?: string }
      | undefined;
    assert.equal(meta?.ui?.resourceUri, meta?.["ui/resourceUri"], tool.name);
    return [tool.name, meta?.ui?.resourceUri];
  }));
}

function expectedViews(tools: Listed): Record<string, string | undefined> {
  return Object.fromEntries(
    tools.map((t) => [t.name, VIEWED.includes(t.name) ? GALLERY_URI : undefined]),
  );
}

async function assertGalleryServed(client: Client) {
  const caps = client.getServerCapabilities();
  assert.deepEqual(caps?.resources, {});
  assert.deepEqual(caps?.extensions, { [UI_EXTENSION_ID]: { mimeTypes: [MCP_APP_MIME_TYPE] } });
  const listed = await client.listResources();
  assert.deepEqual(listed.resources, [{
    uri: GALLERY_URI,
    name: "gallery",
    title: "Generated images",
    description: listed.resources[0]?.description,
    mimeType: MCP_APP_MIME_TYPE,
    _meta: { ui: { prefersBorder: true } },
  }]);
  assert.match(String(listed.resources[0].description), /full size/);
  const read = await client.readResource({ uri: GALLERY_URI });
  assert.deepEqual(read.contents, [{
    uri: GALLERY_URI,
    mimeType: MCP_APP_MIME_TYPE,
    text: GALLERY_HTML,
    _meta: { ui: { prefersBorder: true } },
  }]);
  // Resource not found: -32602 in both eras (MCP 2026-07-28's code, which the SDK sends to all).
  await assert.rejects(
    client.readResource({ uri: "ui://generate-image-sd15-mcp/nothing.html" }),
    /-32602.*Resource not found: ui:\/\/generate-image-sd15-mcp\/nothing\.html/,
  );
  // The one template is the job images' (their full-size PNGs), not a view.
  assert.deepEqual(
    (await client.listResourceTemplates()).resourceTemplates.map((t) => [t.name, t.uriTemplate]),
    [["generation_image", "generation://jobs/{job_id}/images/{index}"]],
  );
}

Deno.test("apps over stdio: the gallery is listed and read; tools name it for an MCP Apps client only", async (t) => {
  const session = await connectStdio(["--config", TINY_CONFIG], {}, APPS_CLIENT);
  const apps = session.client;
  const plain = await connectStdio(["--config", TINY_CONFIG]);
  try {
    await t.step("resources/list and resources/read", () => assertGalleryServed(apps));
    await t.step("an MCP Apps client sees _meta.ui.resourceUri on the viewed tools", async () => {
      const tools = (await apps.listTools()).tools;
      assert.deepEqual(views(tools), expectedViews(tools));
    });
    await t.step("a client without the extension sees no _meta at all", async () => {
      const tools = (await plain.client.listTools()).tools;
      assert.ok(tools.length > 0);
      for (const tool of tools) assert.equal(tool._meta, undefined, tool.name);
      // It can still read the resource: resources are core MCP.
      assert.equal(
        ((await plain.client.readResource({ uri: GALLERY_URI })).contents[0] as { text?: string })
          .text,
        GALLERY_HTML,
      );
    });
  } finally {
    await session.close();
    await plain.close();
  }
});

Deno.test("apps over HTTP: the gallery with any key, never without one; tools name it", async (t) => {
  const server = await startHttpApp("apps_http");
  try {
    for (
      const [label, headers] of [
        ["a write key", { "MCP-API-Key": server.writeKey }],
        ["a read key (resources are read-only)", { authorization: `Bearer ${server.readKey}` }],
      ] as const
    ) {
      await t.step(
        `resources/list, resources/read and the tools' views with ${label}`,
        async () => {
          const client = await connectHttp(server.port, headers, APPS_CLIENT);
          const plain = await connectHttp(server.port, headers);
          try {
            await assertGalleryServed(client);
            // Stateless HTTP: each request is a new server that never saw the client's
            // initialize, so the tools name the view for every client.
            for (const c of [client, plain]) {
              const tools = (await c.listTools()).tools;
              assert.deepEqual(views(tools), expectedViews(tools));
            }
          } finally {
            await client.close();
            await plain.close();
          }
        },
      );
    }
    await t.step("no key gets 401 before any MCP work, for resources too", async () => {
      for (const method of ["resources/list", "resources/read"]) {
        const response = await fetch(`http://127.0.0.1:${server.port}/mcp`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { uri: GALLERY_URI } }),
        });
        assert.equal(response.status, 401, method);
        await response.body?.cancel();
      }
    });
  } finally {
    await server.close();
  }
});
