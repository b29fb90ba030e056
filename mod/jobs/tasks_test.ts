/**
 * Jobs as MCP tasks: a task's TTL is the client's request within the
 * documented bounds and is reported at creation; `tasks/list` pages with
 * its cursor, newest first, without repeating or skipping a task.
 */

import assert from "node:assert/strict";
import type { ImageRequest } from "../generation/request.ts";
import { checkImageRequest } from "../generation/request_check.ts";
import type { StartedTask, ToolContext } from "../mcp/tool.ts";
import { MemoryJobStore } from "./memory_store.ts";
import { JobService } from "./service.ts";
import { JobTasks } from "./tasks.ts";
import { MIN_TASK_TTL_MS, taskTtlMs } from "./types.ts";

const HOUR = 3_600_000;

const request = (): ImageRequest => ({
  tool: "generate_image",
  mode: "text_to_image",
  positive: "a cat",
  negative: "",
  size: "square_512",
  name: null,
  seeds: [1],
  receivedAt: Date.now(),
});

async function service(): Promise<JobService> {
  const jobs = new JobService({
    store: new MemoryJobStore({ queueLimit: 20, resultTtlMs: HOUR, maxResultBytes: 1 << 20 }),
    execute: async (_job, hooks) => {
      await hooks.onItems([{ type: "image", data: "cG5n", mimeType: "image/png" }], 1);
      return { state: "succeeded", error: null };
    },
    checkRequest: (r) => checkImageRequest(r, { maxCount: 10 }),
    maxWaitMs: Infinity,
    resultTtlSeconds: HOUR / 1000,
    queueLimit: 20,
    stepsPerImage: 2,
    worker: "test",
    pollMs: 20,
  });
  await jobs.start();
  return jobs;
}

/** Submits a task asking for `ttl` ms; returns what the client is told at creation. */
async function startTask(jobs: JobService, ttl?: number): Promise<StartedTask> {
  let started: StartedTask | undefined;
  const context: ToolContext = {
    signal: new AbortController().signal,
    scope: undefined,
    progress: () => Promise.resolve(),
    startTask: (task) => started = task,
    ...(ttl === undefined ? {} : { taskTtlMs: ttl }),
  };
  await jobs.submit(request(), context);
  assert.ok(started);
  return started;
}

Deno.test("taskTtlMs: the request within [1 minute, result_ttl_seconds], the longest by default", () => {
  assert.equal(taskTtlMs(120_000, HOUR), 120_000);
  assert.equal(taskTtlMs(1, HOUR), MIN_TASK_TTL_MS);
  assert.equal(taskTtlMs(1e12, HOUR), HOUR);
  assert.equal(taskTtlMs(undefined, HOUR), HOUR);
  assert.equal(taskTtlMs(Number.NaN, HOUR), HOUR);
});

Deno.test("a task's TTL is the client's request within bounds, reported at creation and kept after it ends", async () => {
  const jobs = await service();
  const tasks = new JobTasks(jobs);
  try {
    for (
      const [asked, given] of [[120_000, 120_000], [5, MIN_TASK_TTL_MS], [1e12, HOUR], [
        undefined,
        HOUR,
      ]] as const
    ) {
      const started = await startTask(jobs, asked);
      assert.equal(started.ttlMs, given, `asked ${asked}`);
      const done = await tasks.untilDone(started.id, undefined, new AbortController().signal);
      assert.equal(done?.state, "completed");
      // Kept its TTL from creation (and at least a minute after it ended).
      assert.ok(done!.ttlMs! >= given, `${done!.ttlMs} >= ${given}`);
      assert.ok(done!.ttlMs! < given + MIN_TASK_TTL_MS + 5_000, `${done!.ttlMs}`);
    }
  } finally {
    await jobs.dispose();
  }
});

Deno.test("tasks/list pages with its cursor: newest first, every task once, a foreign cursor refused", async () => {
  const jobs = await service();
  const tasks = new JobTasks(jobs);
  try {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await startTask(jobs)).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await tasks.list(undefined, 2, cursor);
      assert.ok(page);
      assert.ok(page.tasks.length <= 2);
      seen.push(...page.tasks.map((t) => t.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, made.reverse());
    assert.equal(await tasks.list(undefined, 2, "not-a-cursor"), null);
    // A task created while paging does not shift the pages after the cursor.
    const first = await tasks.list(undefined, 2);
    await startTask(jobs);
    const second = await tasks.list(undefined, 2, first!.nextCursor);
    assert.deepEqual(second!.tasks.map((t) => t.id), seen.slice(2, 4));
  } finally {
    await jobs.dispose();
  }
});
