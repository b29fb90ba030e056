import assert from "node:assert/strict";
import { ToolError } from "../mcp/tool.ts";
import { GenerationQueue } from "./generation_queue.ts";

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => resolve = r);
  return { promise, resolve };
}

Deno.test("jobs run one at a time, in arrival order", async () => {
  const queue = new GenerationQueue(10);
  const log: string[] = [];
  let active = 0;
  const gates = [deferred(), deferred(), deferred()];
  const runs = gates.map((gate, i) =>
    queue.run(async () => {
      active++;
      assert.equal(active, 1, "two jobs ran at once");
      log.push(`start ${i}`);
      await gate.promise;
      log.push(`end ${i}`);
      active--;
      return i;
    })
  );
  await Promise.resolve();
  assert.deepEqual(queue.stats(), { running: true, waiting: 2, limit: 10 });
  gates[2].resolve();
  gates[1].resolve();
  gates[0].resolve();
  assert.deepEqual(await Promise.all(runs), [0, 1, 2]);
  assert.deepEqual(log, ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]);
  assert.deepEqual(queue.stats(), { running: false, waiting: 0, limit: 10 });
});

Deno.test("a full queue refuses at once with a busy tool error naming the limit", async () => {
  const queue = new GenerationQueue(1);
  const gate = deferred();
  const first = queue.run(() => gate.promise);
  const second = queue.run(() => Promise.resolve("second"));
  await assert.rejects(queue.run(() => Promise.resolve("third")), (error: unknown) => {
    assert.ok(error instanceof ToolError);
    assert.equal(error.category, "busy");
    assert.match(error.message, /queue is full .*queue_limit = 1/);
    return true;
  });
  gate.resolve();
  await first;
  assert.equal(await second, "second");
});

Deno.test("a failing job frees the slot for the next", async () => {
  const queue = new GenerationQueue(2);
  const failing = queue.run(() => Promise.reject(new Error("boom")));
  const next = queue.run(() => Promise.resolve(7));
  await assert.rejects(failing, /boom/);
  assert.equal(await next, 7);
});

Deno.test("cancelling a waiting job removes it without running it", async () => {
  const queue = new GenerationQueue(2);
  const gate = deferred();
  const first = queue.run(() => gate.promise);
  const controller = new AbortController();
  let ran = false;
  const waiting = queue.run(() => {
    ran = true;
    return Promise.resolve();
  }, controller.signal);
  assert.equal(queue.stats().waiting, 1);
  controller.abort(new Error("client went away"));
  await assert.rejects(waiting, /client went away/);
  assert.equal(queue.stats().waiting, 0);
  gate.resolve();
  await first;
  await queue.idle();
  assert.equal(ran, false);
});

Deno.test("idle resolves once everything queued has finished", async () => {
  const queue = new GenerationQueue(3);
  await queue.idle();
  const gate = deferred();
  let done = false;
  const job = queue.run(async () => {
    await gate.promise;
    done = true;
  });
  const idle = queue.idle().then(() => done);
  gate.resolve();
  await job;
  assert.equal(await idle, true);
});

Deno.test("assertRoom refuses exactly when run would", async () => {
  const queue = new GenerationQueue(1);
  queue.assertRoom();
  const gate = deferred();
  const first = queue.run(() => gate.promise);
  queue.assertRoom(); // one may still wait
  const second = queue.run(() => Promise.resolve());
  assert.throws(() => queue.assertRoom(), /queue is full/);
  gate.resolve();
  await Promise.all([first, second]);
  queue.assertRoom();
});

Deno.test("close refuses new jobs but lets running and waiting ones finish", async () => {
  const queue = new GenerationQueue(2);
  const gate = deferred();
  const running = queue.run(() => gate.promise.then(() => "ran"));
  const waiting = queue.run(() => Promise.resolve("waited"));
  queue.close("shutting down");
  await assert.rejects(queue.run(() => Promise.resolve("new")), /shutting down/);
  assert.throws(() => queue.assertRoom(), /shutting down/);
  gate.resolve();
  assert.deepEqual(await Promise.all([running, waiting]), ["ran", "waited"]);
});
