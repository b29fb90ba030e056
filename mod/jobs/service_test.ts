/**
 * The job service with a scripted executor: the bounded wait and its
 * hand-off, results equal to the tool's content, a cancelled open call
 * cancelling its job, cancel_generation on a running batch, owners, and
 * shutdown releasing waiters.
 */

import assert from "node:assert/strict";
import type { ImageRequest, RunHooks, RunOutcome } from "../generation/request.ts";
import { checkImageRequest } from "../generation/request_check.ts";
import { type ToolContext, ToolError } from "../mcp/tool.ts";
import { DatabaseError } from "../db/mod.ts";
import { MemoryJobStore } from "./memory_store.ts";
import { JobService } from "./service.ts";
import type { ClaimedJob } from "./types.ts";

const request = (seeds = [1]): ImageRequest => ({
  tool: "generate_image",
  mode: "text_to_image",
  positive: "a cat",
  negative: "",
  size: "square_512",
  name: null,
  seeds,
  receivedAt: Date.now(),
});

/** An executor whose images finish only when the test says so. */
function scripted() {
  const gates: Array<() => void> = [];
  let started!: () => void;
  let startedOnce = new Promise<void>((r) => started = r);
  const execute = async (job: ClaimedJob, hooks: RunHooks): Promise<RunOutcome> => {
    const n = job.request.seeds.length;
    for (let i = 1; i <= n; i++) {
      hooks.onImageStart?.(i);
      hooks.onProgress({ image: i, images: n, step: 1, steps: 2 });
      started();
      const released = new Promise<void>((r) => gates.push(r));
      const aborted = new Promise<void>((r) =>
        hooks.signal.addEventListener("abort", () => r(), { once: true })
      );
      await Promise.race([released, aborted]);
      if (hooks.signal.aborted) return { state: "cancelled", error: null };
      hooks.onProgress({ image: i, images: n, step: 2, steps: 2 });
      await hooks.onItems(
        n > 1
          ? [{ type: "text", text: `[${i}/${n}] seed ${i}` }, {
            type: "image",
            data: `png${i}`,
            mimeType: "image/png",
          }]
          : [{ type: "image", data: "png", mimeType: "image/png" }],
        i,
      );
    }
    return { state: "succeeded", error: null };
  };
  return {
    execute,
    release: () => gates.shift()?.(),
    started: () => startedOnce,
    reset: () => startedOnce = new Promise<void>((r) => started = r),
  };
}

function context(
  keyPrefix?: string,
  signal = new AbortController().signal,
  progress: number[] = [],
  extra: Partial<ToolContext> & { projectId?: number } = {},
): ToolContext {
  const { projectId = null, ...rest } = extra;
  return {
    ...rest,
    signal,
    scope: keyPrefix ? { keyPrefix, projectId, userId: 1, permission: "write" } : undefined,
    progress: (p) => {
      progress.push(p);
      return Promise.resolve();
    },
  };
}

async function service(maxWaitMs: number, execute: ReturnType<typeof scripted>["execute"]) {
  const jobs = new JobService({
    store: new MemoryJobStore({ queueLimit: 3, resultTtlMs: 60_000, maxResultBytes: 1 << 20 }),
    execute,
    checkRequest: (r) => checkImageRequest(r, { maxCount: 10 }),
    maxWaitMs,
    resultTtlSeconds: 60,
    queueLimit: 3,
    stepsPerImage: 2,
    worker: "t",
  });
  await jobs.start();
  return jobs;
}

const text = (r: { content: Array<{ type: string; text?: string }> }) =>
  r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

Deno.test("a job done within the wait returns exactly the tool's content", async () => {
  const s = scripted();
  const jobs = await service(60_000, s.execute);
  try {
    const progress: number[] = [];
    const pending = jobs.submit(request(), context(undefined, undefined, progress));
    await s.started();
    s.release();
    const result = await pending;
    assert.deepEqual(result, { content: [{ type: "image", data: "png", mimeType: "image/png" }] });
    assert.deepEqual(progress, [1, 2]);
  } finally {
    await jobs.dispose();
  }
});

Deno.test("past the wait the call hands off; get_generation returns the same content later", async () => {
  const s = scripted();
  const jobs = await service(30, s.execute);
  try {
    const handoff = await jobs.submit(request([1, 2]), context("k1"));
    assert.equal(handoff.isError, undefined);
    const id = (handoff.structuredContent as { job_id: string }).job_id;
    assert.match(
      text(handoff),
      new RegExp(`^Generation ${id} is still running \\(generate_image, 2 images\\): image 1 of 2`),
    );
    assert.match(text(handoff), new RegExp(`Call get_generation with job_id "${id}"`));
    assert.match(text(handoff), /each call waits up to 0\.03 s/);
    // Not finished yet: get_generation answers the status again after its wait.
    const status = await jobs.get(id, Infinity, context("k1"));
    assert.equal((status.structuredContent as { state: string }).state, "running");
    // Another key sees nothing, with the same error as for an unknown id.
    const foreign = await jobs.get(id, 0, context("k2"));
    assert.equal(foreign.isError, true);
    assert.match(text(foreign), /no generation job .* another API key/);
    assert.equal(text(await jobs.cancel(id, context("k2"))), text(foreign));
    let done = status;
    while ((done.structuredContent as { state?: string } | undefined)?.state) {
      s.release();
      done = await jobs.get(id, Infinity, context("k1"));
    }
    assert.deepEqual(done, {
      content: [
        { type: "text", text: "[1/2] seed 1" },
        { type: "image", data: "png1", mimeType: "image/png" },
        { type: "text", text: "[2/2] seed 2" },
        { type: "image", data: "png2", mimeType: "image/png" },
      ],
    });
  } finally {
    await jobs.dispose();
  }
});

Deno.test("cancelling the open call cancels its job", async () => {
  const s = scripted();
  const jobs = await service(60_000, s.execute);
  try {
    const controller = new AbortController();
    const pending = jobs.submit(request(), context("k", controller.signal));
    await s.started();
    controller.abort();
    await pending;
    // The engine stopped the job; its id shows it cancelled.
    const [job] = await jobs.store.list({ owner: "key:k", project: null }, 1);
    for (
      let i = 0;
      i < 100 && job &&
      (await jobs.store.summary(job.id, { owner: "key:k", project: null }))?.state === "running";
      i++
    ) {
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(
      (await jobs.store.summary(job.id, { owner: "key:k", project: null }))?.state,
      "cancelled",
    );
  } finally {
    await jobs.dispose();
  }
});

Deno.test("cancel_generation stops a running batch and keeps its finished images", async () => {
  const s = scripted();
  const jobs = await service(1, s.execute);
  try {
    const handoff = await jobs.submit(request([1, 2, 3]), context("k"));
    const id = (handoff.structuredContent as { job_id: string }).job_id;
    s.release(); // image 1 done
    await new Promise((r) => setTimeout(r, 10));
    const cancelled = await jobs.cancel(id, context("k"));
    assert.equal(cancelled.isError, undefined);
    assert.deepEqual(cancelled.content.slice(0, 2), [
      { type: "text", text: "[1/3] seed 1" },
      { type: "image", data: "png1", mimeType: "image/png" },
    ]);
    assert.equal(
      text(cancelled).split("\n").at(-1),
      `generation ${id} was cancelled after 1 of 3 images; the finished ones are above`,
    );
    const again = await jobs.cancel(id, context("k"));
    assert.match(text(again), /had already ended \(cancelled\); nothing to cancel/);
  } finally {
    await jobs.dispose();
  }
});

Deno.test("shutdown refuses new jobs and releases waiters of jobs that will not run here", async () => {
  const s = scripted();
  const jobs = await service(60_000, s.execute);
  try {
    const running = jobs.submit(request(), context("k"));
    await s.started();
    const queued = jobs.submit(request(), context("k"));
    await new Promise((r) => setTimeout(r, 5));
    const stopped = jobs.close("shutting down now", false);
    await assert.rejects(jobs.submit(request(), context("k")), /shutting down now/);
    s.release();
    const first = await running;
    assert.equal(first.content[0].type, "image");
    await stopped;
    const second = await queued;
    assert.equal((second.structuredContent as { state: string }).state, "queued");
    assert.match(text(second), /shutting down; the job stays queued/);
  } finally {
    await jobs.dispose();
  }
});

Deno.test("a call whose client only disconnected stops waiting; its job goes on and is fetchable", async () => {
  const s = scripted();
  const jobs = await service(60_000, s.execute);
  try {
    const controller = new AbortController();
    // An HTTP disconnect: the signal aborts, but the client did not cancel.
    const gone = context("k", controller.signal, [], { cancelled: () => false });
    const pending = jobs.submit(request(), gone);
    await s.started();
    controller.abort();
    await pending;
    const [job] = await jobs.store.list({ owner: "key:k", project: null }, 1);
    assert.equal(job.state, "running");
    s.release();
    const done = await jobs.get(job.id, 60_000, context("k"));
    assert.deepEqual(done, { content: [{ type: "image", data: "png", mimeType: "image/png" }] });
  } finally {
    await jobs.dispose();
  }
});

Deno.test("a job whose stored request is not one the tools make fails with the reason and never runs", async () => {
  let ran = 0;
  const jobs = await service(60_000, () => {
    ran++;
    return Promise.resolve({ state: "succeeded", error: null });
  });
  try {
    const result = await jobs.submit({ ...request(), name: "../../x" }, context("k"));
    assert.equal(result.isError, true);
    assert.match(
      text(result),
      /^the stored request of this job is not one the tools make, so it was not run: name: "\.\.\/\.\.\/x" is not a cleaned file label/,
    );
    const many = await jobs.submit({ ...request(), tool: "inpaint_image" }, context("k"));
    assert.match(text(many), /tool: must be "generate_image" for mode "text_to_image"/);
    assert.equal(ran, 0);
  } finally {
    await jobs.dispose();
  }
});

Deno.test("keys of one project see each other's jobs; only the owner cancels", async () => {
  const s = scripted();
  const jobs = await service(1, s.execute);
  try {
    const mine = context("writer", undefined, [], { projectId: 3 });
    const mate = context("reader", undefined, [], { projectId: 3 });
    const id = (await jobs.submit(request(), mine)).structuredContent?.job_id as string;
    assert.match(text(await jobs.list(20, mate)), new RegExp(`${id} .* by key writer`));
    assert.match(
      text(await jobs.cancel(id, mate)),
      new RegExp(
        `generation ${id} was made by another API key of project 3; only that key can cancel it`,
      ),
    );
    assert.match(text(await jobs.cancel(id, context("stranger"))), /no generation job/);
    s.release();
    const fetched = await jobs.get(id, 60_000, mate);
    assert.deepEqual(fetched.content, [{ type: "image", data: "png", mimeType: "image/png" }]);
  } finally {
    await jobs.dispose();
  }
});

Deno.test("once no later call can fetch a hand-off: open calls wait until done, other jobs are cancelled", async () => {
  const s = scripted();
  const jobs = await service(60, s.execute);
  try {
    // Handed off: nobody waits for it any more.
    const first = (await jobs.submit(request(), context())).structuredContent?.job_id as string;
    await s.started();
    s.reset();
    const open = jobs.submit(request(), context());
    await new Promise((r) => setTimeout(r, 5));
    jobs.waitUntilDone();
    // The handed-off job is cancelled; the one an open call waits for is kept and runs.
    const cancelled = await jobs.cancelOwn(true);
    assert.deepEqual(cancelled, [first]);
    await s.started();
    await new Promise((r) => setTimeout(r, 150)); // far past max_wait (60 ms)
    s.release(); // the cancelled job's gate
    s.release();
    const answer = await open;
    assert.deepEqual(answer.content, [{ type: "image", data: "png", mimeType: "image/png" }]);
    assert.deepEqual(await jobs.cancelOwn(false), []);
  } finally {
    await jobs.dispose();
  }
});

Deno.test("a queued job's status counts the running job ahead of it", async () => {
  const s = scripted();
  const jobs = await service(1, s.execute);
  try {
    await jobs.submit(request([1, 2]), context("k"));
    const queued = await jobs.submit(request(), context("k"));
    assert.match(
      text(queued),
      /position 2 in the queue, 1 job ahead of it \(1 running, 0 waiting\)/,
    );
    assert.equal(queued.structuredContent?.queue_position, 2);
  } finally {
    jobs.abortRunning();
    await jobs.dispose();
  }
});

/** An in-memory store whose database "stops answering" while `away` is set. */
class StallingStore extends MemoryJobStore {
  away = false;
  #check(): void {
    if (this.away) {
      throw new DatabaseError(
        "database unavailable (postgres://u:***@db.internal/jobs): no answer within 1000 ms",
        "TIMEOUT",
        true,
      );
    }
  }
  override assertRoom(...args: Parameters<MemoryJobStore["assertRoom"]>) {
    this.#check();
    return super.assertRoom(...args);
  }
  override create(...args: Parameters<MemoryJobStore["create"]>) {
    this.#check();
    return super.create(...args);
  }
  override get(...args: Parameters<MemoryJobStore["get"]>) {
    this.#check();
    return super.get(...args);
  }
}

Deno.test("a database that stops answering: calls get a text that says what happened to the job and what to call, never the database's address", async () => {
  const s = scripted();
  const store = new StallingStore({ queueLimit: 3, resultTtlMs: 60_000, maxResultBytes: 1 << 20 });
  const jobs = new JobService({
    store,
    execute: s.execute,
    checkRequest: (r) => checkImageRequest(r, { maxCount: 10 }),
    maxWaitMs: 30,
    resultTtlSeconds: 60,
    queueLimit: 3,
    stepsPerImage: 2,
    worker: "t",
  });
  await jobs.start();
  try {
    store.away = true;
    // Before anything is queued: nothing was, and the caller may simply call again.
    await assert.rejects(
      jobs.assertRoom(context("k1")),
      (e: unknown) =>
        e instanceof ToolError && e.category === "busy" &&
        /^the database did not answer in time \(it is stalled or unreachable\), so no generation was queued/
          .test(e.message) &&
        !e.message.includes("db.internal"),
    );
    // While queueing: it may have been queued (the commit may have landed), so the text says
    // how to find out before calling again.
    await assert.rejects(
      jobs.submit(request(), context("k1")),
      (e: unknown) =>
        e instanceof ToolError && e.category === "busy" &&
        /it may not have been: once the server's \/healthz answers 200, list_generations shows it \(id gen_/
          .test(e.message) &&
        /call this tool again only if it is not listed$/.test(e.message),
    );
    // A job made while the database answered, whose state cannot be read when the wait ends.
    store.away = false;
    const handoff = await jobs.submit(request(), context("k1"));
    const id = (handoff.structuredContent as { job_id: string }).job_id;
    store.away = true;
    const abort = new AbortController();
    const reading = jobs.get(id, 0, context("k1", abort.signal));
    // The read is retried while the database is away (a restart is short); the call gives up.
    setTimeout(() => abort.abort(), 600);
    const result = await reading;
    assert.equal(result.isError, true);
    assert.match(
      text(result),
      new RegExp(
        `^the database did not answer in time \\(it is stalled or unreachable\\), so the state of generation ${id} cannot be read now\\. It stays stored`,
      ),
    );
    assert.match(text(result), new RegExp(`Call get_generation with job_id "${id}" once`));
    assert.doesNotMatch(text(result), /db\.internal/);
    store.away = false;
    s.release();
  } finally {
    store.away = false;
    await jobs.dispose();
  }
});

Deno.test("a call over the key's share is told which of its jobs must end first, and when", async () => {
  const s = scripted();
  const jobs = new JobService({
    store: new MemoryJobStore({
      queueLimit: 10,
      resultTtlMs: 60_000,
      maxResultBytes: 1 << 20,
      perOwner: {
        perKey: { jobs: 2, images: 10, resultBytes: 1 << 20 },
        perProject: { jobs: 10, images: 10 },
      },
    }),
    execute: s.execute,
    checkRequest: (r) => checkImageRequest(r, { maxCount: 10 }),
    maxWaitMs: 30,
    resultTtlSeconds: 60,
    queueLimit: 10,
    stepsPerImage: 2,
    worker: "t",
  });
  await jobs.start();
  const idOf = (r: { structuredContent?: Record<string, unknown> }) =>
    (r.structuredContent as { job_id: string }).job_id;
  try {
    const first = idOf(await jobs.submit(request(), context("k1")));
    await s.started();
    const second = idOf(await jobs.submit(request(), context("k1")));
    // Nothing measured yet: the running job is named, without a time.
    await assert.rejects(jobs.submit(request(), context("k1")), (e: Error) => {
      assert.match(e.message, /jobs\.max_jobs_per_key = 2/);
      assert.match(
        e.message,
        new RegExp(
          `When to retry: generation ${first} \\(running, step 1 of 2\\) must end first; ` +
            `this server has not measured a step yet, so there is no time estimate\\. .*` +
            `call get_generation with job_id "${first}": it waits for the job to end, then retry\\.$`,
        ),
      );
      return true;
    });
    // The image tools' early check says the same.
    await assert.rejects(jobs.assertRoom(context("k1")), /When to retry: generation/);
    // Another key is not refused, and is not told about k1's jobs.
    const other = await jobs.submit(request(), context("k2"));
    assert.equal(other.isError, undefined);
    // Once an image has been measured, the hint has a time: the first job ends, the second runs.
    s.reset();
    s.release();
    await s.started();
    const third = idOf(await jobs.submit(request(), context("k1")));
    await assert.rejects(jobs.submit(request(), context("k1")), (e: Error) => {
      assert.match(
        e.message,
        new RegExp(
          `When to retry: generation ${second} \\(running, step 1 of 2\\) must end first, in ` +
            `about [^(]+ \\(estimated from this server's measured step times\\)\\. Retry then, ` +
            `or call get_generation with job_id "${second}"`,
        ),
      );
      return true;
    });
    assert.notEqual(third, second);
    for (let i = 0; i < 4; i++) s.release();
  } finally {
    await jobs.cancelOwn(false);
    await jobs.dispose();
  }
});
