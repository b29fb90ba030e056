import assert from "node:assert/strict";
import { checkMessage } from "./message_checks.ts";
import { MAX_SMALL_MESSAGE_BYTES } from "./limits.ts";

const enc = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));

Deno.test("checkMessage parses one message", () => {
  const checked = checkMessage(enc({ jsonrpc: "2.0", id: 1, method: "ping" }));
  assert.deepEqual(checked, { ok: true, message: { jsonrpc: "2.0", id: 1, method: "ping" } });
});

Deno.test("checkMessage refuses JSON-RPC batches with -32600", () => {
  const checked = checkMessage(enc([{ jsonrpc: "2.0", id: 1, method: "ping" }]));
  assert.equal(checked.ok, false);
  if (checked.ok) return;
  assert.equal(checked.code, -32600);
  assert.match(checked.error, /batches are not supported/);
});

Deno.test("checkMessage answers bad JSON with -32700", () => {
  const checked = checkMessage(enc("{nope"));
  assert.equal(!checked.ok && checked.code, -32700);
});

Deno.test("checkMessage allows more than 1 MiB only for tools/call of an image-input tool", () => {
  const filler = "A".repeat(MAX_SMALL_MESSAGE_BYTES);
  const ping = checkMessage(
    enc({ jsonrpc: "2.0", id: 7, method: "ping", params: { _meta: { filler } } }),
  );
  assert.equal(ping.ok, false);
  if (!ping.ok) {
    assert.equal(ping.status, 413);
    assert.equal(ping.id, 7);
    assert.match(ping.error, /only tools\/call of generate_guided_image and inpaint_image/);
  }
  const call = (name: string) =>
    checkMessage(enc({
      jsonrpc: "2.0",
      id: 8,
      method: "tools/call",
      params: { name, arguments: { input_image: filler } },
    }));
  assert.equal(call("inpaint_image").ok, true);
  assert.equal(call("generate_guided_image").ok, true);
  assert.equal(call("generate_image").ok, false);
});
