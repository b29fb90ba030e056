/**
 * The job service with a scripted executor: the bounded wait and its
 * hand-off, results equal to the tool's content, a cancelled open call
 * cancelling its job, cancel_generation on a running batch, owners, and
 * shutdown releasing waiters.
 */

import assert from "node:assert/strict";
import type { ImageRequest, RunHooks, RunOutcome } from "../generation/request.ts";
import type { ToolContext } from "../mcp/tool.ts";
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
): ToolContext {
  return {
    signal,
    scope: keyPrefix ? { keyPrefix, projectId: null, userId: 1, permission: "write" } : undefined,
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
    const [job] = await jobs.store.list("key:k", 1);
    for (
      let i = 0;
      i < 100 && job && (await jobs.store.summary(job.id, "key:k"))?.state === "running";
      i++
    ) {
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal((await jobs.store.summary(job.id, "key:k"))?.state, "cancelled");
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
