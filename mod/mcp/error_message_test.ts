/**
 * A JSON-RPC error reaches the client with one "MCP error <code>:" prefix
 * (the one the client's own McpError adds), for the server's own errors and
 * the SDK's alike: on the wire the message is the error alone.
 */

import assert from "node:assert/strict";
import { Client, InMemoryTransport, type McpMessage } from "./sdk.ts";
import { createMcpServer, withoutErrorPrefix } from "./server.ts";

async function connect(ready?: Promise<void>) {
  const server = createMcpServer({ tools: [], ready });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const wire: McpMessage[] = [];
  const onmessage = () => clientSide.onmessage;
  await server.connect(serverSide);
  const client = new Client({ name: "unit", version: "1" });
  await client.connect(clientSide);
  // Record what arrives on the client's side, then hand it on.
  const deliver = onmessage()!;
  clientSide.onmessage = (message, extra) => {
    wire.push(message);
    deliver(message, extra);
  };
  return { client, wire, close: () => client.close() };
}

Deno.test("an unknown tool: one prefix at the client, the bare message on the wire", async () => {
  const { client, wire, close } = await connect();
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

Deno.test("a failed start-up (tools/list): one prefix at the client", async () => {
  const { client, close } = await connect(Promise.reject(new Error("no model files")));
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

Deno.test("withoutErrorPrefix: only a matching prefix goes; other messages stay as they are", () => {
  const error = (code: number, message: string) =>
    ({ jsonrpc: "2.0", id: 1, error: { code, message } }) as McpMessage;
  assert.deepEqual(
    withoutErrorPrefix(error(-32602, "MCP error -32602: MCP error -32602: x")),
    error(-32602, "x"),
  );
  const other = error(-32603, "MCP error -32602: x");
  assert.equal(withoutErrorPrefix(other), other);
  const result = { jsonrpc: "2.0", id: 1, result: {} } as McpMessage;
  assert.equal(withoutErrorPrefix(result), result);
});
