/**
 * The `ready` gate: the handshake (`initialize`, or `server/discover` under
 * 2026-07-28) is answered while the models load; `tools/list` and
 * `tools/call` wait for them, and fail with the start-up error naming it.
 */

import assert from "node:assert/strict";
import { createMcpServer } from "./server.ts";
import { connectLegacy, connectModern } from "./testing.ts";
import type { ProtocolEra } from "./tasks.ts";
import type { ToolDefinition } from "./tool.ts";

const echo = {
  name: "echo",
  description: "echoes",
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: true },
  validate: { safeParse: (v: unknown) => ({ success: true, data: v }) },
  handle: () => Promise.resolve({ content: [{ type: "text", text: "hi" }] }),
} as unknown as ToolDefinition;

const eras: Array<[string, (ready: Promise<void>) => ReturnType<typeof connectLegacy>]> = [
  ["2025 era", (ready) => connectLegacy(createMcpServer({ tools: [echo], ready }))],
  [
    "2026-07-28",
    (ready) => connectModern((era: ProtocolEra) => createMcpServer({ tools: [echo], ready, era })),
  ],
];

async function settledSoon(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(() => settled = true, () => settled = true);
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 2));
  return settled;
}

for (const [label, connect] of eras) {
  Deno.test(`ready (${label}): the handshake does not wait; tools/list and tools/call do`, async () => {
    let open!: () => void;
    const { client, close } = await connect(new Promise<void>((r) => open = r));
    try {
      const listed = client.listTools();
      const called = client.callTool({ name: "echo", arguments: {} });
      assert.equal(await settledSoon(listed), false);
      assert.equal(await settledSoon(called), false);
      open();
      assert.deepEqual((await listed).tools.map((t) => t.name), ["echo"]);
      assert.deepEqual((await called).content, [{ type: "text", text: "hi" }]);
    } finally {
      await close();
    }
  });

  Deno.test(`ready (${label}): a rejected start is a JSON-RPC error naming it`, async () => {
    let fail!: (e: Error) => void;
    const ready = new Promise<void>((_, reject) => fail = reject);
    ready.catch(() => {});
    const { client, close } = await connect(ready);
    try {
      const listed = client.listTools();
      fail(new Error("unet: file not found"));
      await assert.rejects(listed, /could not start its tools: unet: file not found/);
      await assert.rejects(
        client.callTool({ name: "echo", arguments: {} }),
        /could not start its tools: unet: file not found/,
      );
    } finally {
      await close();
    }
  });
}
