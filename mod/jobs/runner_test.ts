/**
 * The runner against a stalled database (a real PostgreSQL, the embedded
 * default or `DATABASE_URL`, behind a proxy that stops forwarding): a worker
 * that cannot renew its lease for a whole lease stops its job, which ends
 * once, as `failed` with the lease's reason, as soon as the database answers
 * again; the job queued behind it runs once. A stall well inside the lease
 * changes nothing: the job goes on and succeeds.
 */

import assert from "node:assert/strict";
import type { ImageRequest, RunHooks, RunOutcome } from "../generation/request.ts";
import { checkImageRequest } from "../generation/request_check.ts";
import { openTestDatabase } from "../../tests/helpers/postgres.ts";
import { newJobId } from "./job_id.ts";
import { PostgresJobStore } from "./postgres_store.ts";
import { JobRunner } from "./runner.ts";
import { type ClaimedJob, LEASE_LAPSED_REASON } from "./types.ts";

const request = (prompt: string): ImageRequest => ({
  tool: "generate_image",
  mode: "text_to_image",
  positive: prompt,
  negative: "",
  size: "square_512",
  name: null,
  seeds: [1],
  receivedAt: Date.now(),
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `condition` every 50 ms for at most `ms`; whether it held. */
async function until(condition: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await condition()) return true;
    await sleep(50);
  }
  return false;
}

/** A runner on a pool bounded like the server's, one "long" job that waits, one quick "next". */
async function harness(label: string, leaseMs: number) {
  const tdb = await openTestDatabase(label);
  // As the server's pool: every statement gives up after a bound.
  const pool = await tdb.connect({ queryTimeoutMs: 1_000, migrate: false });
  const limits = { queueLimit: 5, resultTtlMs: 60_000, maxResultBytes: 1 << 20 };
  const store = new PostgresJobStore(pool, limits, { replica: "w", leaseMs });
  const runs = new Map<string, number>();
  let abortReason: string | undefined;
  let started!: () => void;
  const running = new Promise<void>((r) => started = r);
  let finish!: () => void;
  const released = new Promise<void>((r) => finish = r);
  const execute = async (job: ClaimedJob, hooks: RunHooks): Promise<RunOutcome> => {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    const image = [{ type: "image" as const, data: "iVBORw0KGgo=", mimeType: "image/png" }];
    if (job.request.positive !== "long") {
      await hooks.onItems(image, 1);
      return { state: "succeeded", error: null };
    }
    hooks.onProgress({ image: 1, images: 1, step: 1, steps: 2 });
    started();
    const aborted = new Promise<void>((r) =>
      hooks.signal.addEventListener("abort", () => r(), { once: true })
    );
    await Promise.race([aborted, released]);
    if (hooks.signal.aborted) {
      abortReason = (hooks.signal.reason as Error)?.message;
      return { state: "cancelled", error: null };
    }
    await hooks.onItems(image, 1);
    return { state: "succeeded", error: null };
  };
  const runner = new JobRunner({
    store,
    execute,
    worker: "w",
    pollMs: 100,
    leaseMs,
    checkRequest: (r) => checkImageRequest(r, { maxCount: 2 }),
  });
  // Queued through a pool of the test's own (no bound: a busy machine may be slow).
  const queue = new PostgresJobStore(tdb.db, limits);
  const create = async (prompt: string) =>
    (await queue.create({ id: newJobId(), owner: "o", project: null, request: request(prompt) }))
      .id;
  const long = await create("long");
  const next = await create("next");
  return {
    tdb,
    long,
    next,
    runs,
    abortReason: () => abortReason,
    /** Starts the runner; resolves once the long job runs. */
    async start() {
      runner.start();
      await running;
    },
    /** Lets the long job finish. */
    release: finish,
    async state(id: string) {
      return (await tdb.db.query<{ state: string; error: string | null }>(
        "SELECT state, error FROM mcp_generation_jobs WHERE id = $1",
        [id],
      ))[0];
    },
    async close() {
      tdb.proxy.resume();
      finish();
      await runner.stop(false);
      await store.close();
      await tdb.close();
    },
  };
}

Deno.test({
  name:
    "runner: a lease that cannot be renewed stops the job, which ends failed once the database answers; the next job runs once",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const leaseMs = 3_000;
    const h = await harness("runner_stall", leaseMs);
    try {
      await h.start();
      h.tdb.proxy.stall();
      try {
        // Within a lease (plus the renewal's own bound) of the last renewal, the job stops.
        assert.ok(
          await until(() => h.abortReason() !== undefined, 3 * leaseMs),
          "the job was not stopped",
        );
        assert.equal(h.abortReason(), LEASE_LAPSED_REASON);
        await sleep(500);
      } finally {
        h.tdb.proxy.resume();
      }
      assert.ok(
        await until(async () => (await h.state(h.next)).state === "succeeded", 30_000),
        JSON.stringify(await h.state(h.next)),
      );
      assert.deepEqual(await h.state(h.long), { state: "failed", error: LEASE_LAPSED_REASON });
      assert.deepEqual(Object.fromEntries(h.runs), { [h.long]: 1, [h.next]: 1 });
    } finally {
      await h.close();
    }
  },
});

Deno.test({
  name: "runner: a stall well inside the lease changes nothing; the job goes on and succeeds",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    // Renewals every 2 s; a 1.5 s stall ends long before a third of the lease is left.
    const leaseMs = 6_000;
    const h = await harness("runner_short_stall", leaseMs);
    try {
      await h.start();
      h.tdb.proxy.stall();
      await sleep(1_500);
      h.tdb.proxy.resume();
      // Past the moment the lease would have run out without a renewal since the stall began.
      await sleep(leaseMs);
      assert.equal(h.abortReason(), undefined);
      h.release();
      assert.ok(
        await until(async () => (await h.state(h.next)).state === "succeeded", 30_000),
        JSON.stringify(await h.state(h.next)),
      );
      assert.deepEqual(await h.state(h.long), { state: "succeeded", error: null });
      assert.deepEqual(Object.fromEntries(h.runs), { [h.long]: 1, [h.next]: 1 });
    } finally {
      await h.close();
    }
  },
});
