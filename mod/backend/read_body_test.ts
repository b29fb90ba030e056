import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { createBackendClient } from "./backend_client.ts";
import { readCappedText } from "./read_body.ts";
import { startFakeBackend } from "./testing.ts";

/** A body of `chunks` chunks of 64 KiB, counting how many were pulled and whether it was cancelled. */
function endlessBody(chunks: number) {
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (state.pulled === chunks) return controller.close();
      state.pulled++;
      controller.enqueue(new Uint8Array(64 * 1024).fill(0x20));
    },
    cancel() {
      state.cancelled = true;
    },
  }, { highWaterMark: 0 });
  return { stream, state };
}

Deno.test("readCappedText() reads a body within the cap, multi-byte text intact", async () => {
  const text = '{"name":"デザイン"}';
  deepStrictEqual(await readCappedText(new Response(text), 1024), { ok: true, text });
  deepStrictEqual(await readCappedText(new Response(null), 1024), { ok: true, text: "" });
  const exact = new TextEncoder().encode(text).byteLength;
  deepStrictEqual(await readCappedText(new Response(text), exact), { ok: true, text });
});

Deno.test("readCappedText() refuses a declared Content-Length over the cap without reading", async () => {
  const { stream, state } = endlessBody(1_000_000);
  const response = new Response(stream, { headers: { "content-length": "200000000" } });
  deepStrictEqual(await readCappedText(response, 8 * 1024 * 1024), {
    ok: false,
    maxBytes: 8 * 1024 * 1024,
    declared: 200_000_000,
  });
  ok(state.pulled <= 1, `pulled ${state.pulled} chunks`);
});

Deno.test("readCappedText() stops an undeclared body at the cap and cancels the stream", async () => {
  const { stream, state } = endlessBody(1_000_000); // 64 GB if read to the end
  const result = await readCappedText(new Response(stream), 1024 * 1024);
  strictEqual(result.ok, false);
  if (result.ok) return;
  strictEqual(result.read, 1024 * 1024 + 64 * 1024);
  strictEqual(state.pulled, 17, "16 chunks fit, the 17th passes the cap");
  strictEqual(state.cancelled, true);
});

Deno.test("the backend client refuses an answer over max_response_bytes as invalid", async () => {
  const backend = await startFakeBackend(() => ({
    text: JSON.stringify({ data: "x".repeat(5000) }),
  }));
  try {
    const small = createBackendClient({
      baseUrl: backend.url,
      timeoutMs: 5000,
      maxResponseBytes: 4096,
    });
    const outcome = await small.send({ method: "GET", path: ["internal", "designs"] });
    strictEqual(outcome.ok, false);
    if (outcome.ok) return;
    strictEqual(outcome.kind, "invalid_response");
    ok(outcome.message.includes("more than the 4096-byte limit"), outcome.message);
    ok(outcome.message.includes("max_response_bytes"), outcome.message);
    const big = createBackendClient({
      baseUrl: backend.url,
      timeoutMs: 5000,
      maxResponseBytes: 8192,
    });
    strictEqual((await big.send({ method: "GET", path: ["internal", "designs"] })).ok, true);
  } finally {
    await backend.close();
  }
});

Deno.test("the backend client caps a streamed answer with no Content-Length", async () => {
  const { stream, state } = endlessBody(1_000_000);
  const client = createBackendClient({
    baseUrl: "http://backend.invalid",
    timeoutMs: 5000,
    maxResponseBytes: 256 * 1024,
    fetch: () => Promise.resolve(new Response(stream, { status: 200 })),
  });
  const outcome = await client.send({ method: "GET", path: ["internal", "code"] });
  strictEqual(outcome.ok, false);
  if (outcome.ok) return;
  strictEqual(outcome.kind, "invalid_response");
  ok(outcome.message.includes("passed 327680 bytes"), outcome.message);
  strictEqual(state.cancelled, true);
});
