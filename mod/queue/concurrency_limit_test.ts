import { rejects, strictEqual, throws } from "node:assert";
import { ConcurrencyLimit } from "./concurrency_limit.ts";

Deno.test("at most `limit` tasks run at once, in FIFO order", async () => {
  const limit = new ConcurrencyLimit(2);
  let running = 0;
  let peak = 0;
  const order: number[] = [];
  const task = (i: number) => async () => {
    running++;
    peak = Math.max(peak, running);
    order.push(i);
    await new Promise((r) => setTimeout(r, 5));
    running--;
    return i;
  };
  const results = await Promise.all([0, 1, 2, 3, 4].map((i) => limit.run(task(i))));
  strictEqual(results.join(","), "0,1,2,3,4");
  strictEqual(peak, 2);
  strictEqual(order.join(","), "0,1,2,3,4");
  strictEqual(limit.active, 0);
  strictEqual(limit.waiting, 0);
});

Deno.test("a failing task frees its slot", async () => {
  const limit = new ConcurrencyLimit(1);
  await rejects(limit.run(() => Promise.reject(new Error("boom"))), /boom/);
  strictEqual(await limit.run(() => Promise.resolve(7)), 7);
  strictEqual(limit.active, 0);
});

Deno.test("the limit must be a positive integer", () => {
  throws(() => new ConcurrencyLimit(0), /positive integer, got 0/);
  throws(() => new ConcurrencyLimit(1.5), /positive integer, got 1.5/);
});
