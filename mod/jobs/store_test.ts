/**
 * The same contract run against both job stores: the in-memory one and the
 * PostgreSQL one (a real server with DATABASE_URL, else the embedded
 * default).
 */

import assert from "node:assert/strict";
import type { ImageRequest } from "../generation/request.ts";
import { ToolError } from "../mcp/tool.ts";
import { openTestDatabase } from "../../tests/helpers/postgres.ts";
import { newJobId } from "./job_id.ts";
import { MemoryJobStore } from "./memory_store.ts";
import { PostgresJobStore } from "./postgres_store.ts";
import type { JobEvent, JobItem, JobStore, StoreLimits } from "./types.ts";

const text = (prompt = "a cat", seeds = [1]): ImageRequest => ({
  tool: "generate_image",
  mode: "text_to_image",
  positive: prompt,
  negative: "",
  size: "square_512",
  name: null,
  seeds,
  receivedAt: 1_700_000_000_000,
});

const LIMITS: StoreLimits = { queueLimit: 2, resultTtlMs: 3_600_000, maxResultBytes: 1_000_000 };

type Open = (limits: StoreLimits) => Promise<{
  store: JobStore;
  /** Another store on the same database, with other limits. */
  withLimits(limits: StoreLimits): JobStore;
  close(): Promise<void>;
}>;

const stores: Array<[string, Open]> = [
  ["memory", (limits) => {
    const store = new MemoryJobStore(limits);
    return Promise.resolve({
      store,
      withLimits: (other) => new MemoryJobStore(other),
      close: () => store.close(),
    });
  }],
  ["postgres", async (limits) => {
    const tdb = await openTestDatabase("jobs_store");
    // A 1 ms lease: by the time recovery runs, the claims of the test's gone "worker" expired.
    const store = new PostgresJobStore(tdb.db, limits, { leaseMs: 1 });
    return {
      store,
      withLimits: (other) => new PostgresJobStore(tdb.db, other),
      async close() {
        await store.close();
        await tdb.close();
      },
    };
  }],
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const [kind, open] of stores) {
  Deno.test(`${kind} store: FIFO claims, queue limit, positions, owners`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const a = await store.create({ id: newJobId(), owner: "key:a", request: text("one") });
      const b = await store.create({
        id: newJobId(),
        owner: "key:a",
        request: text("two", [5, 6, 7]),
      });
      const c = await store.create({ id: newJobId(), owner: "key:b", request: text("three") });
      // 3 waiting > queue_limit 2: the fourth is refused with the old text.
      await assert.rejects(
        store.create({ id: newJobId(), owner: "key:a", request: text() }),
        (e) =>
          e instanceof ToolError && e.category === "busy" &&
          /queue is full \(0 running, 3 waiting, generation\.queue_limit = 2\)/.test(e.message),
      );
      await assert.rejects(store.assertRoom(), /queue is full/);
      assert.deepEqual(await store.position(c.seq), { jobsAhead: 2, imagesAhead: 4 });
      assert.deepEqual(await store.counts(), { queued: 3, running: 0 });

      const first = await store.claim("w1");
      assert.equal(first?.id, a.id);
      assert.equal(first?.request.positive, "one");
      assert.deepEqual(await store.counts(), { queued: 2, running: 1 });
      assert.equal((await store.summary(a.id, "key:a"))?.state, "running");
      // Another owner cannot see, list or cancel it.
      assert.equal(await store.summary(a.id, "key:b"), null);
      assert.equal(await store.get(a.id, "key:b"), null);
      assert.equal(await store.cancel(a.id, "key:b"), "unknown");
      assert.deepEqual((await store.list("key:a", 10)).map((j) => j.id), [b.id, a.id]);
      assert.deepEqual((await store.list("key:b", 10)).map((j) => j.id), [c.id]);
      assert.equal((await store.list("key:a", 10))[0].images, 3);

      // A queued job leaves the queue when cancelled; the next claim skips it.
      assert.equal(await store.cancel(b.id, "key:a"), "removed");
      assert.equal((await store.summary(b.id, "key:a"))?.state, "cancelled");
      await store.finish(a.id, { state: "succeeded", error: null });
      assert.equal((await store.claim("w1"))?.id, c.id);
      assert.equal(await store.claim("w1"), null);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: progress, items, cancellation events, end state`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const job = await store.create({ id: newJobId(), owner: "o", request: text("x", [1, 2]) });
      const events: JobEvent[] = [];
      const unsubscribe = store.subscribe(job.id, (e) => events.push(e));
      await store.claim("w");
      const progress = { image: 1, images: 2, step: 3, steps: 4, imagesDone: 0 };
      store.progress(job.id, progress);
      const first: JobItem[] = [
        { type: "text", text: "[1/2] seed 1" },
        { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
      ];
      await store.append(job.id, 0, first);
      // The same write again, as the runner retries one whose commit reply was lost:
      // nothing is stored twice, and the byte count is not added twice.
      await store.append(job.id, 0, first);
      await store.append(job.id, 2, [{ type: "text", text: "[2/2] seed 2" }]);
      await store.append(job.id, 2, [{ type: "text", text: "[2/2] seed 2" }]);
      assert.equal(await store.cancel(job.id, "o"), "stopping");
      assert.equal((await store.summary(job.id, "o"))?.cancelRequested, true);
      await store.finish(job.id, { state: "cancelled", error: null });
      unsubscribe();
      assert.deepEqual(events.map((e) => e.type), ["state", "progress", "cancel", "state"]);
      assert.deepEqual(events[1], { type: "progress", progress });
      const record = await store.get(job.id, "o");
      assert.equal(record?.state, "cancelled");
      assert.equal(record?.cancelRequested, false);
      assert.deepEqual(record?.items, [...first, { type: "text", text: "[2/2] seed 2" }]);
      assert.equal(
        record?.resultBytes,
        "[1/2] seed 1".length + "iVBORw0KGgo=".length + "[2/2] seed 2".length,
      );
      assert.ok(record!.expiresAt!.getTime() > Date.now() + 3_500_000);
      assert.equal(await store.cancel(job.id, "o"), "finished");
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: decoded inputs survive the round trip`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const image = { width: 2, height: 1, data: new Uint8Array([1, 2, 3, 250, 251, 252]) };
      const mask = { width: 2, height: 1, data: new Uint8Array([0, 1]) };
      const request: ImageRequest = {
        ...text("inpaint me"),
        tool: "inpaint_image",
        mode: "inpaint_image",
        image,
        mask,
      };
      await store.create({ id: newJobId(), owner: "o", request });
      const claimed = await store.claim("w");
      assert.deepEqual(claimed?.request, request);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: results expire, the byte cap drops the oldest, restarts fail running jobs`, async () => {
    const { store, withLimits, close } = await open({
      queueLimit: 10,
      resultTtlMs: 3_600_000,
      maxResultBytes: 25,
    });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const job = await store.create({ id: newJobId(), owner: "o", request: text() });
        await store.claim("w");
        await store.append(job.id, 0, [{ type: "text", text: "0123456789" }]);
        await store.finish(job.id, { state: "succeeded", error: null });
        ids.push(job.id);
      }
      // 30 bytes over a 25-byte cap: the oldest result is gone, the two newest stay.
      assert.equal(await store.get(ids[0], "o"), null);
      assert.equal((await store.get(ids[1], "o"))?.state, "succeeded");
      assert.equal((await store.get(ids[2], "o"))?.state, "succeeded");

      const running = await store.create({ id: newJobId(), owner: "o", request: text() });
      const queued = await store.create({ id: newJobId(), owner: "o", request: text() });
      await store.claim("w");
      assert.deepEqual(
        await store.recover("the server restarted"),
        kind === "memory" ? [] : [
          running.id,
        ],
      );
      if (kind === "postgres") {
        const failed = await store.summary(running.id, "o");
        assert.equal(failed?.state, "failed");
        assert.equal(failed?.error, "the server restarted");
        assert.equal((await store.summary(queued.id, "o"))?.state, "queued");
      }
      // Past the TTL a finished job is invisible, then purged.
      const short = withLimits({ queueLimit: 10, resultTtlMs: 200, maxResultBytes: 25 });
      const brief = await short.create({ id: newJobId(), owner: "p", request: text() });
      let claimed = await short.claim("w");
      while (claimed && claimed.id !== brief.id) claimed = await short.claim("w");
      assert.equal(claimed?.id, brief.id);
      await short.finish(brief.id, { state: "succeeded", error: null });
      await sleep(300);
      assert.equal(await short.get(brief.id, "p"), null);
      assert.ok(await short.purgeExpired() >= 1);
      assert.equal((await short.list("p", 10)).length, 0);
    } finally {
      await close();
    }
  });
}
