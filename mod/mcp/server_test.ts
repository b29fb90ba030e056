/**
 * The MCP server's dispatch, through a real SDK client (v1 1.32) over an
 * in-memory transport: scope refusals and invalid arguments use each tool's own error
 * shape, and a refused call never reaches the tool's I/O.
 */

import assert from "node:assert/strict";
import { createBackendClient } from "../backend/mod.ts";
import { startFakeBackend } from "../backend/testing.ts";
import { createDesignCodeTools } from "../../tools/design_code.ts";
import { CallToolResultSchema } from "./client_sdk.ts";
import { createMcpServer } from "./server.ts";
import { connectV1 } from "./testing.ts";
import type { Scope } from "./tool.ts";

function connect(scope: Scope | undefined, backendUrl: string) {
  const backend = createBackendClient({ baseUrl: backendUrl, timeoutMs: 2000 });
  return connectV1(createMcpServer({ tools: createDesignCodeTools(backend), scope }));
}

const readKey: Scope = { keyPrefix: "abc", projectId: 42, userId: 7, permission: "read" };

Deno.test("a read key calling trigger-des2code gets the contract's error shape and no backend call", async () => {
  const backend = await startFakeBackend();
  const { client, close } = await connect(readKey, backend.url);
  try {
    const result = await client.callTool({
      name: "trigger-des2code",
      arguments: { design_id: "42_abc_1:2", project_id: 42, organization_id: 1 },
    });
    assert.equal(result.isError, true);
    const structured = result.structuredContent as { error: string; timestamp: string };
    assert.match(structured.error, /read permission/);
    assert.ok(!Number.isNaN(Date.parse(structured.timestamp)));
    assert.equal(backend.requests.length, 0);
  } finally {
    await close();
    await backend.close();
  }
});

Deno.test("invalid design-code arguments get the contract's error shape, field named", async () => {
  const backend = await startFakeBackend();
  const { client, close } = await connect(undefined, backend.url);
  try {
    const result = await client.callTool({
      name: "list-designs",
      arguments: { project_id: 0, limit: 500 },
    });
    assert.equal(result.isError, true);
    const structured = result.structuredContent as { error: string; timestamp: string };
    assert.match(structured.error, /project_id/);
    assert.match(structured.error, /limit/);
    assert.equal(typeof structured.timestamp, "string");
    assert.equal(backend.requests.length, 0);
  } finally {
    await close();
    await backend.close();
  }
});

Deno.test("a read key may call read-only design-code tools", async () => {
  const backend = await startFakeBackend(() => ({ json: { ok: true, data: { items: [] } } }));
  const { client, close } = await connect(readKey, backend.url);
  try {
    const result = await client.callTool({ name: "list-code", arguments: { project_id: 42 } });
    assert.equal(result.isError, undefined);
    assert.equal(backend.requests.length, 1);
  } finally {
    await close();
    await backend.close();
  }
});

Deno.test("non-object arguments are a tool error naming what was sent, not a JSON-RPC error", async () => {
  const backend = await startFakeBackend(() => ({ json: { ok: true, data: { items: [] } } }));
  const { client, close } = await connect(undefined, backend.url);
  try {
    for (
      const [value, described] of [[5, "a number"], ["x", "a string"], [[1], "an array"], [
        null,
        "null",
      ]] as const
    ) {
      const result = await client.request(
        { method: "tools/call", params: { name: "list-code", arguments: value as never } },
        CallToolResultSchema,
      );
      assert.equal(result.isError, true, JSON.stringify(value));
      const text = (result.content[0] as { text: string }).text;
      assert.ok(
        text.endsWith(
          `invalid arguments for list-code: arguments: must be an object of named arguments, got ${described}`,
        ),
        text,
      );
      // The design-code tools keep their contract shape for this error too.
      assert.match((result.structuredContent as { error: string }).error, /must be an object/);
    }
    assert.equal(backend.requests.length, 0);
    // A well-formed calls still go through.
    const ok = await client.callTool({ name: "list-code", arguments: { project_id: 42 } });
    assert.equal(ok.isError, undefined);
    assert.equal(backend.requests.length, 1);
  } finally {
    await close();
    await backend.close();
  }
});
