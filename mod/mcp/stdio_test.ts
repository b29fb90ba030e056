import assert from "node:assert/strict";
import type { McpMessage as JSONRPCMessage } from "./sdk.ts";
import { DenoStdioTransport } from "./stdio.ts";

/** A transport fed from chunks, collecting what it writes. */
function harness(chunks: Uint8Array[], maxMessageBytes?: number) {
  const written: string[] = [];
  const input = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
  const decoder = new TextDecoder();
  const output = new WritableStream<Uint8Array>({
    write(chunk) {
      written.push(decoder.decode(chunk));
    },
  });
  const transport = new DenoStdioTransport({ input, output, maxMessageBytes });
  const messages: JSONRPCMessage[] = [];
  transport.onmessage = (m) => messages.push(m);
  const closed = new Promise<void>((r) => transport.onclose = r);
  return { transport, messages, written, closed };
}

const enc = (s: string) => new TextEncoder().encode(s);
const ping = (id: number) => JSON.stringify({ jsonrpc: "2.0", id, method: "ping" });

Deno.test("messages split across chunks and several per chunk are parsed in order", async () => {
  const text = `${ping(1)}\n${ping(2)}\r\n${ping(3)}\n`;
  const bytes = enc(text);
  const chunks = [bytes.subarray(0, 5), bytes.subarray(5, 40), bytes.subarray(40)];
  const h = harness(chunks);
  await h.transport.start();
  await h.closed;
  assert.deepEqual(h.messages.map((m) => (m as { id: number }).id), [1, 2, 3]);
});

Deno.test("a 30 MB message (beyond the SDK's 10 MiB default) is accepted", async () => {
  const big = "A".repeat(30_000_000);
  const line = enc(
    JSON.stringify({
      jsonrpc: "2.0",
      id: 9,
      method: "tools/call",
      params: { name: "inpaint_image", x: big },
    }) + "\n",
  );
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < line.length; i += 65536) chunks.push(line.slice(i, i + 65536));
  const h = harness(chunks);
  await h.transport.start();
  await h.closed;
  assert.equal(h.messages.length, 1);
  const params = (h.messages[0] as unknown as { params: { x: string } }).params;
  assert.equal(params.x.length, 30_000_000);
});

Deno.test("an oversized line is refused with a JSON-RPC error and the next message still works", async () => {
  const h = harness([enc("x".repeat(200) + "\n" + ping(5) + "\n")], 100);
  await h.transport.start();
  await h.closed;
  await h.transport.close();
  assert.deepEqual(h.messages.map((m) => (m as { id: number }).id), [5]);
  const reply = JSON.parse(h.written.join(""));
  assert.equal(reply.error.code, -32600);
  assert.match(reply.error.message, /larger than 100 bytes/);
  assert.equal(reply.id, null);
});

Deno.test("invalid JSON gets a parse error and does not stop the stream", async () => {
  const h = harness([enc(`{not json\n${ping(6)}\n`)]);
  await h.transport.start();
  await h.closed;
  await h.transport.close();
  assert.deepEqual(h.messages.map((m) => (m as { id: number }).id), [6]);
  assert.equal(JSON.parse(h.written.join("")).error.code, -32700);
});

Deno.test("send writes one JSON line", async () => {
  const h = harness([]);
  await h.transport.send({ jsonrpc: "2.0", id: 1, result: {} });
  await h.transport.close();
  assert.equal(h.written.join(""), `{"jsonrpc":"2.0","id":1,"result":{}}\n`);
});

Deno.test("with oninputend set, the end of input leaves the transport open for replies", async () => {
  const h = harness([enc(ping(1) + "\n")]);
  let ended = false;
  h.transport.oninputend = () => ended = true;
  let closed = false;
  h.transport.onclose = () => closed = true;
  await h.transport.start();
  for (let i = 0; i < 50 && !ended; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(ended, true);
  assert.equal(closed, false);
  await h.transport.send({ jsonrpc: "2.0", id: 1, result: {} });
  await h.transport.close();
  assert.equal(closed, true);
  assert.equal(h.written.join(""), `{"jsonrpc":"2.0","id":1,"result":{}}\n`);
});

Deno.test("settled waits for a reply or a cancellation of every request received", async () => {
  const cancel2 = JSON.stringify({
    jsonrpc: "2.0",
    method: "notifications/cancelled",
    params: { requestId: 2 },
  });
  const h = harness([enc(`${ping(1)}\n${ping(2)}\n${ping(3)}\n${cancel2}\n`)]);
  h.transport.oninputend = () => {};
  await h.transport.start();
  await new Promise((r) => setTimeout(r, 10));
  let settled = false;
  const waiting = h.transport.settled().then(() => settled = true);
  await h.transport.send({ jsonrpc: "2.0", id: 1, result: {} });
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(settled, false, "request 3 is still open (2 was cancelled)");
  await h.transport.send({ jsonrpc: "2.0", id: 3, result: {} });
  await waiting;
  assert.equal(settled, true);
  await h.transport.close();
});

Deno.test("batches, over-budget JSON and big non-image messages are refused; the stream goes on", async () => {
  const batch = JSON.stringify([JSON.parse(ping(1)), JSON.parse(ping(2))]);
  const flood = `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"x":[` +
    "{},".repeat(150_000) + "{}]}}}";
  const bigPing = JSON.stringify({
    jsonrpc: "2.0",
    id: 4,
    method: "ping",
    params: { _meta: { x: "A".repeat(2 * 1024 * 1024) } },
  });
  const h = harness([enc(`${batch}\n${flood}\n${bigPing}\n${ping(5)}\n`)]);
  await h.transport.start();
  await h.closed;
  await h.transport.close();
  for (let i = 0; i < 100 && h.written.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(h.messages.map((m) => (m as { id: number }).id), [5]);
  const replies = h.written.join("").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(replies.map((r) => r.error.code), [-32600, -32600, -32600]);
  assert.match(replies[0].error.message, /batches are not supported/);
  assert.match(replies[1].error.message, /more than 100,000 values/);
  assert.match(replies[2].error.message, /over the 1048576-byte limit/);
  assert.equal(replies[2].id, 4);
});
