import assert from "node:assert/strict";
import { SharedLimit } from "./shared_limit.ts";

/** A task that runs until `release()` is called. */
function gate() {
  let release!: () => void;
  const done = new Promise<void>((r) => release = r);
  return { release, task: () => done };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("one owner gets at most its share; another owner takes the free slot at once", async () => {
  const limit = new SharedLimit(2, 1);
  const a1 = gate();
  const a2 = gate();
  const b1 = gate();
  const started: string[] = [];
  const run = (owner: string, name: string, g: ReturnType<typeof gate>) =>
    limit.run(owner, () => {
      started.push(name);
      return g.task();
    });
  const runs = [run("a", "a1", a1), run("a", "a2", a2)];
  await tick();
  assert.deepEqual(started, ["a1"], "the second task of owner a waits though a slot is free");
  assert.equal(limit.active, 1);
  assert.equal(limit.waiting, 1);
  runs.push(run("b", "b1", b1));
  await tick();
  assert.deepEqual(started, ["a1", "b1"], "owner b is not queued behind owner a");
  a1.release();
  await runs[0];
  await tick();
  assert.deepEqual(started, ["a1", "b1", "a2"]);
  b1.release();
  a2.release();
  await Promise.all(runs);
  assert.equal(limit.active, 0);
  assert.equal(limit.activeOf("a"), 0);
});

Deno.test("a freed slot goes to the first waiter whose owner is below its share", async () => {
  const limit = new SharedLimit(2, 1);
  const gates = Array.from({ length: 4 }, gate);
  const started: string[] = [];
  const owners = ["a", "b", "a", "c"];
  const runs = owners.map((owner, i) =>
    limit.run(owner, () => {
      started.push(`${owner}${i}`);
      return gates[i].task();
    })
  );
  await tick();
  assert.deepEqual(started, ["a0", "b1"]);
  gates[1].release(); // b finishes: a2 is first in line but a is at its share, so c3 starts
  await tick();
  await tick();
  assert.deepEqual(started, ["a0", "b1", "c3"]);
  gates[0].release();
  await tick();
  await tick();
  assert.deepEqual(started, ["a0", "b1", "c3", "a2"]);
  gates[2].release();
  gates[3].release();
  await Promise.all(runs);
});

Deno.test("tasks without an owner count only against the limit; errors free the slot", async () => {
  const limit = new SharedLimit(2, 1);
  const a = gate();
  const b = gate();
  const runs = [limit.run(null, a.task), limit.run(null, b.task)];
  await tick();
  assert.equal(limit.active, 2);
  a.release();
  b.release();
  await Promise.all(runs);
  await assert.rejects(limit.run("x", () => Promise.reject(new Error("boom"))), /boom/);
  assert.equal(limit.active, 0);
  assert.equal(limit.activeOf("x"), 0);
  assert.throws(() => new SharedLimit(1, 2), /above the limit/);
  assert.throws(() => new SharedLimit(0, 1), /positive integer/);
});
