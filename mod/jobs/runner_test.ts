/**
 * The runner against a stalled database (a real PostgreSQL, the embedded
 * default or `DATABASE_URL`, behind a proxy that stops forwarding): a worker
 * that cannot renew its lease for a whole lease stops its job, which ends
 * once, as `failed` with the lease's reason, as soon as the database answers
 * again; the job queued behind it runs once.
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

Deno.test({
  name:
    "runner: a lease that cannot be renewed stops the job, which ends failed once the database answers; the next job runs once",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const tdb = await openTestDatabase("runner_stall");
    // As the server's pool: every statement gives up after a bound.
    const pool = await tdb.connect({ queryTimeoutMs: 1_000, migrate: false });
    const leaseMs = 3_000;
    const store = new PostgresJobStore(pool, {
      queueLimit: 5,
      resultTtlMs: 60_000,
      maxResultBytes: 1 << 20,
    }, {
      replica: "w",
      leaseMs,
    });
    const runs = new Map<string, number>();
    let abortReason: string | undefined;
    let started!: () => void;
    const running = new Promise<void>((r) => started = r);
    const execute = async (job: ClaimedJob, hooks: RunHooks): Promise<RunOutcome> => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      if (job.request.positive !== "long") {
        await hooks.onItems([{ type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }], 1);
        return { state: "succeeded", error: null };
      }
      hooks.onProgress({ image: 1, images: 1, step: 1, steps: 2 });
      started();
      await new Promise<void>((r) =>
        hooks.signal.addEventListener("abort", () => r(), { once: true })
      );
      abortReason = (hooks.signal.reason as Error)?.message;
      return { state: "cancelled", error: null };
    };
    const runner = new JobRunner({
      store,
      execute,
      worker: "w",
      pollMs: 100,
      leaseMs,
      checkRequest: (r) => checkImageRequest(r, { maxCount: 2 }),
    });
    const state = async (id: string) =>
      (await tdb.db.query<{ state: string; error: string | null }>(
        "SELECT state, error FROM mcp_generation_jobs WHERE id = $1",
        [id],
      ))[0];
    try {
      // Queued through a pool of the test's own (no bound: a busy machine may be slow).
      const queue = new PostgresJobStore(tdb.db, {
        queueLimit: 5,
        resultTtlMs: 60_000,
        maxResultBytes: 1 << 20,
      });
      const long = await queue.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: request("long"),
      });
      const next = await queue.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: request("next"),
      });
      runner.start();
      await running;
      tdb.proxy.stall();
      try {
        // Within a lease (plus the renewal's own bound) of the last renewal, the job stops.
        assert.ok(
          await until(() => abortReason !== undefined, 3 * leaseMs),
          "the job was not stopped",
        );
        assert.equal(abortReason, LEASE_LAPSED_REASON);
        await sleep(500);
      } finally {
        tdb.proxy.resume();
      }
      assert.ok(
        await until(async () => (await state(next.id)).state === "succeeded", 30_000),
        JSON.stringify(await state(next.id)),
      );
      assert.deepEqual(await state(long.id), { state: "failed", error: LEASE_LAPSED_REASON });
      assert.deepEqual(Object.fromEntries(runs), { [long.id]: 1, [next.id]: 1 });
    } finally {
      tdb.proxy.resume();
      await runner.stop(false);
      await store.close();
      await tdb.close();
    }
  },
});
