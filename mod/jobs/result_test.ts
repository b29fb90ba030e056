import assert from "node:assert/strict";
import { formatDuration, StepTimer } from "./estimate.ts";
import { jobResult, statusResult } from "./result.ts";
import type { JobRecord } from "./types.ts";

const job = (over: Partial<JobRecord>): JobRecord => ({
  id: "gen_AAAAAAAAAAAAAAAAAAAAAA",
  owner: "o",
  tool: "generate_image",
  state: "succeeded",
  images: 1,
  prompt: "p",
  seq: 1,
  createdAt: new Date(0),
  startedAt: null,
  finishedAt: null,
  expiresAt: null,
  progress: null,
  error: null,
  cancelRequested: false,
  resultBytes: 0,
  items: [],
  ...over,
});

const png = { type: "image" as const, data: "AAAA", mimeType: "image/png" };

Deno.test("a finished job's result is the tool's content: errors only without images", () => {
  assert.deepEqual(jobResult(job({ items: [png] })), { content: [png] });
  // A one-image tool error: exactly the error result the tool returned before jobs.
  assert.deepEqual(jobResult(job({ state: "failed", error: "out of memory" })), {
    content: [{ type: "text", text: "out of memory" }],
    isError: true,
  });
  // A batch whose every image failed: its [i/N] texts, isError.
  const failed = [{ type: "text" as const, text: "[1/2] failed: x" }, {
    type: "text" as const,
    text: "[2/2] failed: x",
  }];
  assert.deepEqual(jobResult(job({ state: "failed", images: 2, items: failed })), {
    content: failed,
    isError: true,
  });
  // Stopped part-way: the finished images plus what happened; not an error.
  const partial = jobResult(job({
    state: "failed",
    images: 3,
    error: "the server restarted while this job was running",
    items: [{ type: "text", text: "[1/3] seed 1" }, png],
  }));
  assert.equal(partial.isError, undefined);
  assert.match(
    (partial.content[2] as { text: string }).text,
    /failed: the server restarted .*\(1 of 3 images were finished\)/,
  );
  assert.equal(jobResult(job({ state: "cancelled" })).isError, true);
});

Deno.test("the status names the job, the queue position, the estimate and the next call", () => {
  const queued = statusResult({
    job: job({ state: "queued", images: 2 }),
    position: { jobsAhead: 1, imagesAhead: 3 },
    etaMs: 125_000,
    waitSeconds: 50,
  });
  const text = (queued.content[0] as { text: string }).text;
  assert.match(
    text,
    /is queued \(generate_image, 2 images\): position 2 in the queue, 1 job ahead/,
  );
  assert.match(text, /Estimated time left: about 2 min 5 s/);
  assert.match(text, /Call get_generation with job_id "gen_A{22}" .*waits up to 50 s/);
  assert.equal(queued.isError, undefined);
  assert.deepEqual(
    { ...queued.structuredContent, created_at: undefined },
    {
      job_id: "gen_AAAAAAAAAAAAAAAAAAAAAA",
      state: "queued",
      tool: "generate_image",
      images: 2,
      progress: null,
      queue_position: 2,
      eta_seconds: 125,
      created_at: undefined,
    },
  );
  const running = statusResult({
    job: job({
      state: "running",
      images: 3,
      progress: { image: 2, images: 3, step: 7, steps: 25, imagesDone: 1 },
    }),
    position: null,
    etaMs: null,
    waitSeconds: Infinity,
  });
  const runningText = (running.content[0] as { text: string }).text;
  assert.match(runningText, /still running .*: image 2 of 3, step 7 of 25; 1 finished/);
  assert.match(runningText, /No time estimate yet/);
});

Deno.test("estimates come from measured steps and per-image overhead", () => {
  let now = 0;
  const timer = new StepTimer(() => now);
  assert.equal(timer.estimateMs({ stepsLeftInImage: 5, imagesAfter: 0, stepsPerImage: 5 }), null);
  timer.imageStart();
  for (let s = 1; s <= 4; s++) {
    now += s === 1 ? 500 : 100; // the first step carries prompt encoding
    timer.step(s);
  }
  now += 300; // VAE decode and PNG encode
  timer.imageDone();
  assert.equal(timer.stepMs, 100);
  // overhead = 1100 total - 4 steps x 100 = 700 per image.
  assert.equal(timer.estimateMs({ stepsLeftInImage: 2, imagesAfter: 1, stepsPerImage: 4 }), 2000);
  assert.equal(formatDuration(59_400), "about 59 s");
  assert.equal(formatDuration(3_725_000), "about 1 h 2 min");
});
