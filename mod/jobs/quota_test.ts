/**
 * When a call refused by a per-key or per-project limit should be retried:
 * the jobs holding the room in the order they should end, enough of them
 * for the call to fit, with the time from their estimates or their place.
 */

import assert from "node:assert/strict";
import { type HeldJob, QuotaError, quotaError, retryHint } from "./quota.ts";
import type { OwnerLimits } from "./types.ts";

const LIMITS: OwnerLimits = {
  perKey: { jobs: 2, images: 5, resultBytes: 1 << 20 },
  perProject: { jobs: 3, images: 6 },
};
const KEY = { owner: "key:a", project: 7 };

const job = (id: string, fields: Partial<HeldJob>): HeldJob => ({
  id,
  own: true,
  images: 1,
  progress: null,
  place: null,
  etaMs: null,
  ...fields,
});

Deno.test("a refusal says what must end before the same call fits", () => {
  const jobs = quotaError(KEY, 1, { key: { jobs: 2, images: 2 }, project: null }, LIMITS);
  assert.ok(jobs instanceof QuotaError);
  assert.equal(jobs.category, "busy");
  assert.equal(jobs.whose, "key");
  assert.deepEqual(jobs.frees, { jobs: 1, images: 0 });
  const images = quotaError(KEY, 3, { key: { jobs: 1, images: 4 }, project: null }, LIMITS);
  assert.deepEqual(images?.frees, { jobs: 0, images: 2 });
  // More images than the limit allows at all: no wait helps.
  assert.equal(
    quotaError(KEY, 6, { key: { jobs: 0, images: 0 }, project: null }, LIMITS)?.frees,
    null,
  );
  const project = quotaError(
    KEY,
    1,
    { key: { jobs: 1, images: 1 }, project: { jobs: 3, images: 3 } },
    LIMITS,
  );
  assert.equal(project?.whose, "project");
  assert.deepEqual(project?.frees, { jobs: 1, images: 0 });
});

Deno.test("the hint names the job that ends first, with its estimate", () => {
  const refusal = new QuotaError("full", "key", { jobs: 1, images: 0 });
  const held = [
    job("gen_queued", { place: 2, etaMs: 95_000 }),
    job("gen_running", { progress: { step: 3, steps: 20 }, etaMs: 40_000 }),
  ];
  assert.equal(
    retryHint(refusal, held, false),
    "When to retry: generation gen_running (running, step 3 of 20) must end first, in about " +
      "40 s (estimated from this server's measured step times). Retry then, or call " +
      'get_generation with job_id "gen_running": it waits for the job to end.',
  );
  // Before a whole image was measured the estimate covers the steps only.
  assert.match(retryHint(refusal, held, true)!, /must end first, in at least about 40 s/);
});

Deno.test("images to free can take several jobs; the hint gives the last one's time", () => {
  const refusal = new QuotaError("full", "project", { jobs: 0, images: 4 });
  const held = [
    job("gen_b", { images: 2, place: 2, etaMs: 60_000, own: false }),
    job("gen_a", { images: 3, progress: { step: 1, steps: 4 }, etaMs: 10_000 }),
    job("gen_c", { images: 1, place: 3, etaMs: 90_000 }),
  ];
  assert.equal(
    retryHint(refusal, held, false),
    "When to retry: 2 of them must end first, the last of those generation gen_b (queued, " +
      "position 2 in the queue, made by another API key of the project), in about 1 min " +
      "(estimated from this server's measured step times). Retry then, or call " +
      'get_generation with job_id "gen_b": it waits for the job to end.',
  );
});

Deno.test("without estimates the hint goes by the queue: running first, then by place", () => {
  const refusal = new QuotaError("full", "key", { jobs: 1, images: 0 });
  const hint = retryHint(refusal, [
    job("gen_later", { place: 3 }),
    job("gen_now", { progress: null }),
  ], true);
  assert.equal(
    hint,
    "When to retry: generation gen_now (running) must end first; this server has not measured " +
      "a step yet, so there is no time estimate. To retry as soon as it can fit, call " +
      'get_generation with job_id "gen_now": it waits for the job to end, then retry.',
  );
});

Deno.test("no hint when no wait helps or the held jobs cannot free enough", () => {
  assert.equal(retryHint(new QuotaError("x", "key", null), [job("gen_a", {})], false), null);
  const two = new QuotaError("x", "key", { jobs: 2, images: 0 });
  assert.equal(retryHint(two, [job("gen_a", { etaMs: 1 })], false), null);
});
