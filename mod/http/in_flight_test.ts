import assert from "node:assert/strict";
import { clientIdOf, InFlightRequests, newClientId, SESSION_HEADER } from "./in_flight.ts";

Deno.test("a cancellation reaches the request of the same key and id", () => {
  const registry = new InFlightRequests();
  const cancelled: string[] = [];
  const a = registry.register("keyA", 1, () => cancelled.push("a1"));
  registry.register("keyB", 1, () => cancelled.push("b1"));
  registry.register("keyA", "1", () => cancelled.push("a'1'"));
  assert.equal(registry.cancel("keyA", 1), true);
  assert.deepEqual(cancelled, ["a1"]);
  assert.equal(registry.cancel("keyC", 1), false);
  a.release();
  assert.equal(registry.cancel("keyA", 1), false, "a released request is gone");
  assert.equal(registry.size, 2);
});

Deno.test("an ambiguous id (two live requests of one key) cancels nothing", () => {
  const registry = new InFlightRequests();
  let count = 0;
  const first = registry.register("k", 7, () => count++);
  registry.register("k", 7, () => count++);
  assert.equal(registry.cancel("k", 7), false);
  assert.equal(count, 0);
  first.release();
  assert.equal(registry.cancel("k", 7), true);
  assert.equal(count, 1);
});

Deno.test("client ids are 128 random bits in hex, and only that shape is read back", () => {
  const a = newClientId();
  const b = newClientId();
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(a, b);
  const withId = (value: string) =>
    new Request("http://x/mcp", { headers: { [SESSION_HEADER]: value } });
  assert.equal(clientIdOf(withId(a)), a);
  assert.equal(clientIdOf(withId("not-one-of-ours")), null);
  assert.equal(clientIdOf(new Request("http://x/mcp")), null);
});
