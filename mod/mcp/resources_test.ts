/**
 * Resources and extensions in the MCP server, through a real SDK client over
 * an in-memory transport: `resources/list` / `resources/read` of the
 * configured resources (and the not-found error), the advertised
 * capabilities, and tool `_meta` keys of an extension listed only to a
 * client that advertised it.
 */

import assert from "node:assert/strict";
import { z } from "zod";
import { type McpExtension, toolMetaFor } from "./extension.ts";
import { RESOURCE_NOT_FOUND, type ResourceDefinition } from "./resource.ts";
import { Client, InMemoryTransport, McpError } from "./sdk.ts";
import { createMcpServer } from "./server.ts";
import type { ToolDefinition } from "./tool.ts";

const EXTENSION: McpExtension = {
  id: "example.org/views",
  settings: { kinds: ["page"] },
  accepts: (settings) => typeof settings === "object" && settings !== null,
  toolMetaKeys: ["view"],
};

const PAGE: ResourceDefinition = {
  uri: "view://example/page",
  name: "page",
  title: "A page",
  description: "A static page.",
  mimeType: "text/html",
  _meta: { listing: true },
  contentMeta: { content: true },
  read: () => Promise.resolve("<!doctype html><p>hello</p>"),
};

const TOOL: ToolDefinition = {
  name: "echo",
  description: "Echoes.",
  inputSchema: { type: "object", properties: {} },
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  _meta: { view: { uri: PAGE.uri }, other: 1 },
  validate: z.object({}),
  handle: () => Promise.resolve({ content: [{ type: "text", text: "ok" }] }),
};

async function connect(
  capabilities: Record<string, unknown>,
  options: { resources?: ResourceDefinition[]; extensions?: McpExtension[] } = {},
) {
  const server = createMcpServer({
    tools: [TOOL],
    resources: options.resources ?? [PAGE],
    extensions: options.extensions ?? [EXTENSION],
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "unit", version: "1" }, { capabilities });
  await client.connect(clientSide);
  return client;
}

Deno.test("resources/list and resources/read serve the configured resources", async () => {
  const client = await connect({});
  try {
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps?.resources, {});
    assert.deepEqual(caps?.extensions, { "example.org/views": { kinds: ["page"] } });
    const listed = await client.listResources();
    assert.deepEqual(listed.resources, [{
      uri: PAGE.uri,
      name: "page",
      title: "A page",
      description: "A static page.",
      mimeType: "text/html",
      _meta: { listing: true },
    }]);
    const read = await client.readResource({ uri: PAGE.uri });
    assert.deepEqual(read.contents, [{
      uri: PAGE.uri,
      mimeType: "text/html",
      text: "<!doctype html><p>hello</p>",
      _meta: { content: true },
    }]);
    assert.deepEqual((await client.listResourceTemplates()).resourceTemplates, []);
  } finally {
    await client.close();
  }
});

Deno.test("resources/read of an unknown URI is JSON-RPC -32002 naming the URI", async () => {
  const client = await connect({});
  try {
    const error = await client.readResource({ uri: "view://example/nope" }).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof McpError, String(error));
    assert.equal(error.code, RESOURCE_NOT_FOUND);
    assert.match(error.message, /view:\/\/example\/nope/);
    assert.match(error.message, /view:\/\/example\/page/);
    assert.deepEqual(error.data, { uri: "view://example/nope" });
  } finally {
    await client.close();
  }
});

Deno.test("without resources or extensions nothing of them is advertised", async () => {
  const client = await connect({}, { resources: [], extensions: [] });
  try {
    const caps = client.getServerCapabilities();
    assert.equal(caps?.resources, undefined);
    assert.equal(caps?.extensions, undefined);
    await assert.rejects(client.listResources(), /Method not found/);
  } finally {
    await client.close();
  }
});

Deno.test("an extension's tool _meta keys are listed only to a client that advertised it", async () => {
  const plain = await connect({});
  const aware = await connect({ extensions: { "example.org/views": {} } });
  try {
    const [withoutIt] = (await plain.listTools()).tools;
    assert.deepEqual(withoutIt._meta, { other: 1 });
    const [withIt] = (await aware.listTools()).tools;
    assert.deepEqual(withIt._meta, { view: { uri: PAGE.uri }, other: 1 });
  } finally {
    await plain.close();
    await aware.close();
  }
});

Deno.test("toolMetaFor: unknown capabilities keep every key; nothing left is no _meta", () => {
  const meta = { view: 1 };
  assert.deepEqual(toolMetaFor(meta, [EXTENSION], undefined), { view: 1 });
  assert.equal(toolMetaFor(meta, [EXTENSION], {}), undefined);
  assert.deepEqual(toolMetaFor(meta, [EXTENSION], { extensions: { "example.org/views": {} } }), {
    view: 1,
  });
  assert.equal(toolMetaFor(undefined, [EXTENSION], undefined), undefined);
});
