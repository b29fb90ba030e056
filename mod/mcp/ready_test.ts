import assert from "node:assert/strict";
import { Client, InMemoryTransport } from "./sdk.ts";
import { createMcpServer } from "./server.ts";
import type { ToolDefinition } from "./tool.ts";

const echo = {
  name: "echo",
  description: "echoes",
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: true },
  validate: { safeParse: (v: unknown) => ({ success: true, data: v }) },
  handle: () => Promise.resolve({ content: [{ type: "text", text: "hi" }] }),
} as unknown as ToolDefinition;

async function connect(ready: Promise<void>) {
  const server = createMcpServer({ tools: [echo], ready });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "unit", version: "1" });
  await client.connect(clientSide);
  return client;
}

async function settledSoon(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(() => settled = true, () => settled = true);
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 2));
  return settled;
}

Deno.test("ready: initialize does not wait; tools/list and tools/call do", async () => {
  let open!: () => void;
  const client = await connect(new Promise<void>((r) => open = r));
  const listed = client.listTools();
  const called = client.callTool({ name: "echo", arguments: {} });
  assert.equal(await settledSoon(listed), false);
  assert.equal(await settledSoon(called), false);
  open();
  assert.deepEqual((await listed).tools.map((t) => t.name), ["echo"]);
  assert.deepEqual((await called).content, [{ type: "text", text: "hi" }]);
  await client.close();
});

Deno.test("ready: a rejected start is a JSON-RPC error naming it, for list and call", async () => {
  let fail!: (e: Error) => void;
  const ready = new Promise<void>((_, reject) => fail = reject);
  ready.catch(() => {});
  const client = await connect(ready);
  const listed = client.listTools();
  fail(new Error("unet: file not found"));
  await assert.rejects(listed, /could not start its tools: unet: file not found/);
  await assert.rejects(
    client.callTool({ name: "echo", arguments: {} }),
    /could not start its tools: unet: file not found/,
  );
  await client.close();
});
