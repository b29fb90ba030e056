/**
 * Resources, templates and extensions in the MCP server, through real SDK
 * clients (v2, both eras) over an in-memory transport: `resources/list` /
 * `resources/read` of the static resources, `resources/templates/list` and
 * reads through a template (which decides what a caller may see), the
 * not-found error, the advertised capabilities, and tool `_meta` keys of an
 * extension listed only to a client that advertised it.
 */

import assert from "node:assert/strict";
import { z } from "zod";
import { type McpExtension, toolMetaFor } from "./extension.ts";
import type { ResourceDefinition, ResourceTemplateDefinition } from "./resource.ts";
import { createMcpServer } from "./server.ts";
import type { ProtocolEra } from "./tasks.ts";
import { connectLegacy, connectModern } from "./testing.ts";
import type { Scope, ToolDefinition } from "./tool.ts";

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

const PIXEL = btoa(String.fromCharCode(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a));

/**
 * `note://{owner}/{n}`: note n of an owner, readable only by that owner
 * (`stdio` over stdio, the key prefix over HTTP); odd notes are text, even
 * ones bytes. Every call is recorded.
 */
function notes(reads: Array<[string, Scope | undefined]>): ResourceTemplateDefinition {
  return {
    uriTemplate: "note://{owner}/{n}",
    name: "note",
    title: "A note",
    description: "One note of its owner.",
    read(uri, scope) {
      reads.push([uri, scope]);
      const match = /^note:\/\/([^/]+)\/(\d+)$/.exec(uri);
      if (!match || match[1] !== (scope?.keyPrefix ?? "stdio")) return Promise.resolve(null);
      const n = Number(match[2]);
      return Promise.resolve(
        n % 2 ? { uri, mimeType: "text/plain", text: `note ${n}` } : {
          uri,
          mimeType: "image/png",
          blob: PIXEL,
        },
      );
    },
  };
}

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

interface Setup {
  resources?: ResourceDefinition[];
  templates?: ResourceTemplateDefinition[];
  extensions?: McpExtension[];
  scope?: Scope;
}

function build(setup: Setup, era: ProtocolEra = "legacy") {
  return createMcpServer({
    tools: [TOOL],
    era,
    scope: setup.scope,
    resources: setup.resources ?? [PAGE],
    templates: setup.templates ?? [],
    extensions: setup.extensions ?? [EXTENSION],
  });
}

/** A client of each era against the server `setup` describes. */
const eras = [
  [
    "2025 era",
    (caps: Record<string, unknown>, setup: Setup = {}) => connectLegacy(build(setup), caps),
  ],
  [
    "2026-07-28",
    (caps: Record<string, unknown>, setup: Setup = {}) =>
      connectModern((era) => build(setup, era), caps),
  ],
] as const;

for (const [label, connect] of eras) {
  Deno.test(`${label}: resources/list and resources/read serve the static resources`, async () => {
    const { client, close } = await connect({});
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
      await close();
    }
  });

  Deno.test(`${label}: a template is listed, and reads go through it for the caller`, async () => {
    const reads: Array<[string, Scope | undefined]> = [];
    const scope: Scope = { keyPrefix: "k1", projectId: 1, userId: 1, permission: "read" };
    const { client, close } = await connect({}, { templates: [notes(reads)], scope });
    try {
      assert.deepEqual((await client.listResourceTemplates()).resourceTemplates, [{
        uriTemplate: "note://{owner}/{n}",
        name: "note",
        title: "A note",
        description: "One note of its owner.",
      }]);
      assert.deepEqual((await client.readResource({ uri: "note://k1/3" })).contents, [
        { uri: "note://k1/3", mimeType: "text/plain", text: "note 3" },
      ]);
      assert.deepEqual((await client.readResource({ uri: "note://k1/4" })).contents, [
        { uri: "note://k1/4", mimeType: "image/png", blob: PIXEL },
      ]);
      // Another owner's note and a URI of no template are both simply not found.
      for (const uri of ["note://k2/3", "memo://k1/3"]) {
        await assert.rejects(client.readResource({ uri }), (e: Error & { code: number }) => {
          assert.equal(e.code, -32602);
          assert.match(e.message, /Resource not found/);
          assert.match(e.message, /note:\/\/\{owner\}\/\{n\}/);
          return true;
        });
      }
      // The static resource is found first, without asking the template.
      await client.readResource({ uri: PAGE.uri });
      assert.deepEqual(reads.map(([uri, s]) => [uri, s?.keyPrefix]), [
        ["note://k1/3", "k1"],
        ["note://k1/4", "k1"],
        ["note://k2/3", "k1"],
        ["memo://k1/3", "k1"],
      ]);
    } finally {
      await close();
    }
  });

  Deno.test(`${label}: resources/read of an unknown URI is -32602 naming the URI`, async () => {
    const { client, close } = await connect({});
    try {
      const error = await client.readResource({ uri: "view://example/nope" }).then(
        () => null,
        (e: unknown) => e as Error & { code: number; data: unknown },
      );
      assert.ok(error, "the read failed");
      // -32002 of the 2025 revisions, sent as 2026-07-28's -32602 in both eras by the SDK (SEP-2164).
      assert.equal(error.code, -32602);
      assert.match(error.message, /view:\/\/example\/nope/);
      assert.match(error.message, /view:\/\/example\/page/);
      assert.deepEqual(error.data, { uri: "view://example/nope" });
    } finally {
      await close();
    }
  });

  Deno.test(`${label}: without resources or extensions nothing of them is advertised`, async () => {
    const { client, close } = await connect({}, { resources: [], extensions: [] });
    try {
      const caps = client.getServerCapabilities();
      assert.equal(caps?.resources, undefined);
      assert.equal(caps?.extensions, undefined);
      // (The v2 client's listResources() answers an empty list itself; the request goes out.)
      await assert.rejects(client.request({ method: "resources/list" }), /Method not found/);
    } finally {
      await close();
    }
  });

  Deno.test(`${label}: an extension's tool _meta keys are listed only to a client that advertised it`, async () => {
    const plain = await connect({});
    const aware = await connect({ extensions: { "example.org/views": {} } });
    try {
      const [withoutIt] = (await plain.client.listTools()).tools;
      assert.deepEqual(withoutIt._meta, { other: 1 });
      const [withIt] = (await aware.client.listTools()).tools;
      assert.deepEqual(withIt._meta, { view: { uri: PAGE.uri }, other: 1 });
    } finally {
      await plain.close();
      await aware.close();
    }
  });
}

Deno.test("toolMetaFor: unknown capabilities keep every key; nothing left is no _meta", () => {
  const meta = { view: 1 };
  assert.deepEqual(toolMetaFor(meta, [EXTENSION], undefined), { view: 1 });
  assert.equal(toolMetaFor(meta, [EXTENSION], {}), undefined);
  assert.deepEqual(toolMetaFor(meta, [EXTENSION], { extensions: { "example.org/views": {} } }), {
    view: 1,
  });
  assert.equal(toolMetaFor(undefined, [EXTENSION], undefined), undefined);
});
