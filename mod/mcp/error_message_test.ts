/**
 * A JSON-RPC error reaches the client with its message as the server wrote
 * it: on the wire the message is the error alone (the v1 SDK's server put
 * "MCP error <code>: " in front, and v1 clients added it again), so a v1
 * client shows one prefix and a v2 client none.
 */

import assert from "node:assert/strict";
import type { McpMessage } from "./sdk.ts";
import { createMcpServer } from "./server.ts";
import { connectLegacy, connectModern, connectV1 } from "./testing.ts";

/** Records what reaches the client's side of an in-memory pair. */
function tap(transport: { onmessage?: (m: McpMessage, e?: unknown) => void }): McpMessage[] {
  const wire: McpMessage[] = [];
  const deliver = transport.onmessage!;
  transport.onmessage = (message, extra) => {
    wire.push(message);
    deliver(message, extra);
  };
  return wire;
}

Deno.test("an unknown tool: one prefix at a v1 client, the bare message on the wire", async () => {
  const { client, close } = await connectV1(createMcpServer({ tools: [] }));
  const wire = tap(client.transport as never);
  try {
    await assert.rejects(client.callTool({ name: "make_video", arguments: {} }), (e: Error) => {
      assert.equal(e.message, "MCP error -32602: Unknown tool: make_video");
      return true;
    });
    const answer = wire.find((m) => "error" in m) as { error: { code: number; message: string } };
    assert.deepEqual(answer.error, { code: -32602, message: "Unknown tool: make_video" });
  } finally {
    await close();
  }
});

Deno.test("an unknown tool: a v2 client sees the message itself, in both eras", async () => {
  for (
    const connect of [
      () => connectLegacy(createMcpServer({ tools: [] })),
      () => connectModern((era) => createMcpServer({ tools: [], era })),
    ]
  ) {
    const { client, close } = await connect();
    try {
      await assert.rejects(client.callTool({ name: "make_video", arguments: {} }), (e: Error) => {
        assert.equal(e.message, "Unknown tool: make_video");
        assert.equal((e as Error & { code: number }).code, -32602);
        return true;
      });
    } finally {
      await close();
    }
  }
});

Deno.test("a failed start-up (tools/list): one prefix at a v1 client", async () => {
  const ready = Promise.reject(new Error("no model files"));
  ready.catch(() => {});
  const { client, close } = await connectV1(createMcpServer({ tools: [], ready }));
  try {
    await assert.rejects(client.listTools(), (e: Error) => {
      assert.equal(
        e.message,
        "MCP error -32603: the server could not start its tools: no model files",
      );
      return true;
    });
  } finally {
    await close();
  }
});
