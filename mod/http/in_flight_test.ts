import assert from "node:assert/strict";
import { InFlightRequests, jsonRpcMessages } from "./in_flight.ts";

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

Deno.test("jsonRpcMessages accepts one message or a batch, skipping non-objects", () => {
  assert.deepEqual(jsonRpcMessages({ id: 1 }), [{ id: 1 }]);
  assert.deepEqual(jsonRpcMessages([{ id: 1 }, null, 3, { id: 2 }]), [{ id: 1 }, { id: 2 }]);
  assert.deepEqual(jsonRpcMessages("x"), []);
});
