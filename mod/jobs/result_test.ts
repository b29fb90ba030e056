import assert from "node:assert/strict";
import { formatDuration, StepTimer } from "./estimate.ts";
import { jobResult, LIST_TEXT_LIMIT, listResult, statusResult } from "./result.ts";
import { assertClientSafe } from "../../tests/helpers/results.ts";
import type { JobRecord } from "./types.ts";

const job = (over: Partial<JobRecord>): JobRecord => ({
  id: "gen_AAAAAAAAAAAAAAAAAAAAAA",
  owner: "o",
  project: null,
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
  ttlMs: null,
  items: [],
  previews: [],
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
  const work = { tool: "generate_image" as const, images: 3, progress: null };
  const queued = statusResult({
    job: job({ state: "queued", images: 2 }),
    // The running job is ahead of every queued one: it counts.
    position: { running: [{ ...work, id: "gen_B" }], waiting: [] },
    etaMs: 125_000,
    waitSeconds: 50,
    sampling: "fast preset (lcm, 4 steps, guidance 1, tiny VAE)",
  });
  const text = (queued.content[0] as { text: string }).text;
  // Which preset will make the images.
  assert.match(text, /\nIt runs with the fast preset \(lcm, 4 steps, guidance 1, tiny VAE\)\.\n/);
  assert.match(
    text,
    /is queued \(generate_image, 2 images\): position 2 in the queue, 1 job ahead of it \(1 running, 0 waiting\)/,
  );
  assert.match(
    text,
    /Estimated time left: about 2 min 5 s \(from this server's measured step times\)/,
  );
  const third = statusResult({
    job: job({ state: "queued" }),
    position: { running: [{ ...work, id: "gen_B" }], waiting: [work] },
    etaMs: null,
    waitSeconds: 50,
  });
  assert.match(
    (third.content[0] as { text: string }).text,
    /position 3 in the queue, 2 jobs ahead of it \(1 running, 1 waiting\)/,
  );
  assert.equal(third.structuredContent?.queue_position, 3);
  assert.equal(third.structuredContent?.jobs_ahead, 2);
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
      jobs_ahead: 1,
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
  assert.doesNotMatch(runningText, /preset/, "not named when not known (a front replica)");
  assert.match(runningText, /still running .*: image 2 of 3, step 7 of 25; 1 finished/);
  assert.match(runningText, /No time estimate yet/);
  const early = statusResult({
    job: job({ state: "running" }),
    position: null,
    etaMs: 5000,
    etaLowerBound: true,
    waitSeconds: 50,
  });
  assert.match(
    (early.content[0] as { text: string }).text,
    /Estimated time left: at least about 5 s \(.*not measured until its first image is finished\)/,
  );
  assert.equal(running.structuredContent?.queue_position, null);
});

Deno.test("a project's list names the key of each job that is not the caller's", () => {
  const mine = job({ owner: "key:mine", project: 4, state: "queued" });
  const theirs = job({ id: "gen_BBBBBBBBBBBBBBBBBBBBBB", owner: "key:theirs", project: 4 });
  const listed = listResult([theirs, mine], "key:mine");
  const text = (listed.content[0] as { text: string }).text;
  assert.match(text, /gen_B{22} {2}succeeded {2}generate_image x1 {2}created \S+ {2}by key theirs/);
  assert.match(text, /gen_A{22} {2}queued {2}generate_image x1 {2}created \S+ {2}"p"/);
  const rows = listed.structuredContent?.generations as Array<{ key: string | null }>;
  assert.deepEqual(rows.map((r) => r.key), ["theirs", null]);
});

Deno.test("a long list's text stops under the limit and says how many it leaves out", () => {
  const long = "a very long prompt ".repeat(10);
  const jobs = Array.from({ length: 100 }, (_, i) =>
    job({
      id: `gen_${String(i).padStart(22, "C")}`,
      owner: i % 2 ? "key:mine" : "key:somebody-else",
      project: 4,
      images: 10,
      prompt: long,
      createdAt: new Date(Date.UTC(2026, 11, 2, 10, 0, i)),
    }));
  const listed = listResult(jobs, "key:mine");
  assertClientSafe(listed, "100 jobs");
  const text = (listed.content[0] as { text: string }).text;
  assert.ok(text.length <= LIST_TEXT_LIMIT, `${text.length}`);
  const shown = text.split("\n").filter((l) => l.startsWith("gen_")).length;
  assert.ok(shown >= 30 && shown < 100, `${shown} shown`);
  assert.match(
    text,
    new RegExp(
      `\\.\\.\\. and ${100 - shown} older jobs not shown here to keep this text short ` +
        `\\(structuredContent lists all 100; a smaller limit shows the newest\\)\\.\\n` +
        `get_generation with a job_id returns its images\\.$`,
    ),
  );
  assert.equal((listed.structuredContent?.generations as unknown[]).length, 100);
  // The default limit, 20, fits whole.
  const twenty = listResult(jobs.slice(0, 20), "key:mine");
  assertClientSafe(twenty, "20 jobs");
  const all = (twenty.content[0] as { text: string }).text;
  assert.equal(all.split("\n").filter((l) => l.startsWith("gen_")).length, 20);
  assert.doesNotMatch(all, /not shown here/);
});

Deno.test("estimates: head, steps and tail measured per tool; medians ignore one-off slow steps", () => {
  let now = 0;
  const timer = new StepTimer(() => now);
  const work = (over: Partial<Parameters<StepTimer["estimateMs"]>[0]>) => ({
    tool: "generate_image",
    current: null,
    images: 1,
    stepsPerImage: 99,
    ...over,
  });
  assert.equal(timer.estimateMs(work({})), null, "no guess before a measured step");
  assert.equal(timer.measuredImage, false);
  /** One image: `head` ms before its first step ends, `steps` steps of `step` ms, a `tail`. */
  const image = (tool: string, head: number, steps: number, step: number, tail: number) => {
    timer.imageStart(tool);
    for (let s = 1; s <= steps; s++) {
      now += s === 1 ? head + step : step;
      timer.step(s, steps);
    }
    now += tail;
    timer.imageDone();
  };
  // The process's first image is a warm-up: 5x slower everywhere, used only while alone.
  image("generate_image", 2500, 4, 500, 1500);
  assert.equal(timer.measuredImage, true);
  assert.equal(timer.estimateMs(work({})), 2500 + 4 * 500 + 1500);
  image("generate_image", 500, 4, 100, 300);
  image("generate_image", 500, 4, 100, 300);
  // Steps: the median of 3 + 3 + 3 intervals is 100 (the warm-up's 500s are outvoted);
  // head and tail: the warm-up no longer counts.
  assert.equal(timer.stepMs, 100);
  assert.equal(timer.estimateMs(work({})), 500 + 4 * 100 + 300);
  // The running image at step 1 of 4: 3 steps and the tail left; then 2 whole images.
  assert.equal(
    timer.estimateMs(work({ current: { step: 1, steps: 4 }, images: 2 })),
    3 * 100 + 300 + 2 * 1200,
  );
  // One slow step (a GC pause, a late message) does not move the median.
  timer.imageStart("generate_image");
  now += 600;
  timer.step(1, 4);
  now += 5000;
  timer.step(2, 4);
  assert.equal(timer.stepMs, 100);
  timer.imageDone();
  // Another tool has its own timings (a ControlNet step costs more), and borrows until measured.
  assert.equal(timer.estimateMs(work({ tool: "generate_guided_image" })), 1200);
  image("generate_guided_image", 900, 4, 150, 300);
  assert.equal(timer.estimateMs(work({ tool: "generate_guided_image" })), 900 + 4 * 150 + 300);
  assert.equal(timer.estimateMs(work({})), 1200, "text-to-image keeps its own");
  // The measured step count of a tool replaces the configured one (PNDM makes steps + 1).
  image("generate_image", 500, 6, 100, 300);
  assert.equal(timer.estimateMs(work({ stepsPerImage: 4 })), 500 + 6 * 100 + 300);
  assert.equal(formatDuration(59_400), "about 59 s");
  assert.equal(formatDuration(3_725_000), "about 1 h 2 min");
});
