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
import { QueueFullError, queueShares } from "./queue_full.ts";
import type { StoredPreview } from "./types.ts";
import {
  type JobEvent,
  type JobItem,
  type JobStore,
  LEASE_LAPSED_REASON,
  type OwnerLimits,
  type StoreLimits,
} from "./types.ts";

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
  /** A store on the same database whose claims lapse at once (a worker that died). */
  lapsing: JobStore;
  close(): Promise<void>;
}>;

const stores: Array<[string, Open]> = [
  ["memory", (limits) => {
    const store = new MemoryJobStore(limits);
    return Promise.resolve({
      store,
      withLimits: (other) => new MemoryJobStore(other),
      lapsing: store,
      close: () => store.close(),
    });
  }],
  ["postgres", async (limits) => {
    const tdb = await openTestDatabase("jobs_store");
    const store = new PostgresJobStore(tdb.db, limits, { leaseMs: 60_000 });
    return {
      store,
      withLimits: (other) => new PostgresJobStore(tdb.db, other),
      // A 1 ms lease: by the time recovery runs, the claims of the test's gone "worker" expired.
      lapsing: new PostgresJobStore(tdb.db, limits, { leaseMs: 1 }),
      async close() {
        await store.close();
        await tdb.close();
      },
    };
  }],
];

/** A viewer (or creator) without a project. */
const as = (owner: string, project: number | null = null) => ({ owner, project });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const [kind, open] of stores) {
  Deno.test(`${kind} store: queue shares keep room for a third tenant; a full queue names its key`, async () => {
    // 5 slots (1 running + queue_limit 4); shares: a key 1, a project 2, so 2 slots are reserved.
    const unlimited = { jobs: Infinity, images: Infinity };
    const limits: StoreLimits = {
      ...LIMITS,
      queueLimit: 4,
      perOwner: {
        perKey: { ...unlimited, resultBytes: Infinity },
        perProject: unlimited,
        queueShares: queueShares(1, 2),
      },
    };
    const { store, close } = await open(limits);
    const add = (owner: string, project: number | null) =>
      store.create({ id: newJobId(), owner, project, request: text() });
    const share = (key: string) => (e: unknown) =>
      e instanceof QueueFullError && e.category === "busy" && e.limitKey === key &&
      e.message.includes(`${key} = `) && e.retryAfterSeconds === null;
    try {
      // Project 1 (two keys) takes its share, then one more while 2 slots stay free after it.
      await add("key:p1a", 1);
      await add("key:p1b", 1);
      await add("key:p1a", 1);
      // One more would leave 1 free: refused by the share, naming its key.
      await assert.rejects(add("key:p1b", 1), share("generation.queue_share_per_key"));
      await assert.rejects(
        store.assertRoom(as("key:p1c", 1), 1),
        share("generation.queue_share_per_project"),
      );
      // Key B (no project) within its share takes a slot; past it, refused by the key's share.
      await add("key:b", null);
      await assert.rejects(add("key:b", null), share("generation.queue_share_per_key"));
      // A third tenant within its share finds room: the last slot.
      await add("key:c", null);
      // Now truly full: refused for everyone, naming queue_limit.
      await assert.rejects(add("key:d", null), (e) =>
        share("generation.queue_limit")(e) &&
        /queue is full \(0 running, 5 waiting, generation\.queue_limit = 4\)/.test(
          (e as Error).message,
        ));
      await assert.rejects(store.assertRoom(as("key:e"), 1), QueueFullError);
      assert.deepEqual(await store.counts(), { queued: 5, running: 0 });
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: FIFO claims, queue limit, positions, owners`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const a = await store.create({
        id: newJobId(),
        owner: "key:a",
        project: null,
        request: text("one"),
      });
      const b = await store.create({
        id: newJobId(),
        owner: "key:a",
        project: null,
        request: text("two", [5, 6, 7]),
      });
      const c = await store.create({
        id: newJobId(),
        owner: "key:b",
        project: null,
        request: text("three"),
      });
      // 3 waiting > queue_limit 2: the fourth is refused with the old text.
      await assert.rejects(
        store.create({ id: newJobId(), owner: "key:a", project: null, request: text() }),
        (e) =>
          e instanceof ToolError && e.category === "busy" &&
          /queue is full \(0 running, 3 waiting, generation\.queue_limit = 2\)/.test(e.message),
      );
      await assert.rejects(store.assertRoom(as("key:c"), 1), /queue is full/);
      assert.deepEqual(await store.position(c.seq), {
        running: [],
        waiting: [
          { tool: "generate_image", images: 1, progress: null },
          { tool: "generate_image", images: 3, progress: null },
        ],
      });
      assert.deepEqual(await store.counts(), { queued: 3, running: 0 });

      const first = await store.claim("w1");
      assert.equal(first?.id, a.id);
      assert.equal(first?.request.positive, "one");
      assert.deepEqual(await store.counts(), { queued: 2, running: 1 });
      // The running job is ahead of every queued one.
      const behind = await store.position(c.seq);
      assert.deepEqual(behind.running.map((r) => r.id), [a.id]);
      assert.deepEqual(behind.waiting.map((w) => w.images), [3]);
      assert.equal((await store.summary(a.id, as("key:a")))?.state, "running");
      // Another owner cannot see, list or cancel it.
      assert.equal(await store.summary(a.id, as("key:b")), null);
      assert.equal(await store.get(a.id, as("key:b")), null);
      assert.equal(await store.cancel(a.id, "key:b"), "unknown");
      assert.deepEqual((await store.list(as("key:a"), 10)).map((j) => j.id), [b.id, a.id]);
      assert.deepEqual((await store.list(as("key:b"), 10)).map((j) => j.id), [c.id]);
      assert.equal((await store.list(as("key:a"), 10))[0].images, 3);

      // A queued job leaves the queue when cancelled; the next claim skips it.
      assert.equal(await store.cancel(b.id, "key:a"), "removed");
      assert.equal((await store.summary(b.id, as("key:a")))?.state, "cancelled");
      await store.finish(first!.claim, { state: "succeeded", error: null });
      assert.equal((await store.claim("w1"))?.id, c.id);
      assert.equal(await store.claim("w1"), null);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: previews are stored with the result, counted in its bytes, and a delivery read skips the PNGs they stand for`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const job = await store.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: text("x", [1, 2]),
      });
      const { claim } = (await store.claim("w"))!;
      const items: JobItem[] = [
        { type: "text", text: "[1/2] seed 1" },
        { type: "image", data: "AAAA", mimeType: "image/png" },
        { type: "text", text: "[2/2] seed 2" },
        { type: "image", data: "BBBBBBBB", mimeType: "image/png" },
      ];
      assert.equal(await store.append(claim, 0, items), true);
      const preview: StoredPreview = {
        image: 2,
        budget: 5,
        mimeType: "image/jpeg",
        width: 8,
        height: 8,
        data: "/9j/",
        full: { width: 16, height: 16, bytes: 6 },
      };
      assert.equal(await store.attachPreviews(claim, [preview]), true);
      await store.finish(claim, { state: "succeeded", error: null });
      const bytes = items.reduce(
        (n, i) => n + (i.type === "image" ? i.data.length : i.text.length),
        0,
      );
      const record = await store.get(job.id, as("o"));
      assert.deepEqual(record?.items, items);
      assert.deepEqual(record?.previews, [preview]);
      assert.equal(record?.resultBytes, bytes + "/9j/".length);
      // Read for delivery within the previews' budget: the second image is not read.
      const delivered = await store.get(job.id, as("o"), { budget: 5 });
      if (kind === "postgres") {
        assert.deepEqual(delivered?.items.map((i) => i.type === "image" ? i.data : i.text), [
          "[1/2] seed 1",
          "AAAA",
          "[2/2] seed 2",
          "",
        ]);
      }
      assert.deepEqual(delivered?.previews, [preview]);
      // Within another budget every image is read (its previews would be made again).
      assert.deepEqual((await store.get(job.id, as("o"), { budget: 6 }))?.items, items);
      // A claim that no longer holds stores nothing.
      assert.equal(await store.attachPreviews(claim, [preview]), false);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: progress, items, cancellation events, end state`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const job = await store.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: text("x", [1, 2]),
      });
      const events: JobEvent[] = [];
      const unsubscribe = store.subscribe(job.id, (e) => events.push(e));
      const { claim } = (await store.claim("w"))!;
      const progress = { image: 1, images: 2, step: 3, steps: 4, imagesDone: 0 };
      store.progress(claim, progress);
      const first: JobItem[] = [
        { type: "text", text: "[1/2] seed 1" },
        { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
      ];
      assert.equal(await store.append(claim, 0, first), true);
      // The same write again, as the runner retries one whose commit reply was lost:
      // nothing is stored twice, and the byte count is not added twice.
      assert.equal(await store.append(claim, 0, first), true);
      await store.append(claim, 2, [{ type: "text", text: "[2/2] seed 2" }]);
      await store.append(claim, 2, [{ type: "text", text: "[2/2] seed 2" }]);
      assert.equal(await store.cancel(job.id, "o"), "stopping");
      assert.equal((await store.summary(job.id, as("o")))?.cancelRequested, true);
      await store.finish(claim, { state: "cancelled", error: null });
      unsubscribe();
      assert.deepEqual(events.map((e) => e.type), ["state", "progress", "cancel", "state"]);
      assert.deepEqual(events[1], { type: "progress", progress });
      const record = await store.get(job.id, as("o"));
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
      await store.create({ id: newJobId(), owner: "o", project: null, request });
      const claimed = await store.claim("w");
      assert.deepEqual(claimed?.request, request);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: results expire, the byte cap drops the oldest, restarts fail running jobs`, async () => {
    const { store, withLimits, lapsing, close } = await open({
      queueLimit: 10,
      resultTtlMs: 3_600_000,
      maxResultBytes: 25,
    });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const job = await store.create({
          id: newJobId(),
          owner: "o",
          project: null,
          request: text(),
        });
        const { claim } = (await store.claim("w"))!;
        await store.append(claim, 0, [{ type: "text", text: "0123456789" }]);
        await store.finish(claim, { state: "succeeded", error: null });
        ids.push(job.id);
      }
      // 30 bytes over a 25-byte cap: the oldest result is gone, the two newest stay.
      assert.equal(await store.get(ids[0], as("o")), null);
      assert.equal((await store.get(ids[1], as("o")))?.state, "succeeded");
      assert.equal((await store.get(ids[2], as("o")))?.state, "succeeded");

      const running = await store.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: text(),
      });
      const queued = await store.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: text(),
      });
      assert.equal((await lapsing.claim("w"))?.id, running.id);
      await sleep(20);
      assert.deepEqual(
        await store.recover("the server restarted"),
        kind === "memory" ? [] : [
          running.id,
        ],
      );
      if (kind === "postgres") {
        const failed = await store.summary(running.id, as("o"));
        assert.equal(failed?.state, "failed");
        assert.equal(failed?.error, "the server restarted");
        assert.equal((await store.summary(queued.id, as("o")))?.state, "queued");
      }
      // Past the TTL a finished job is invisible, then purged.
      const short = withLimits({ queueLimit: 10, resultTtlMs: 200, maxResultBytes: 25 });
      const brief = await short.create({
        id: newJobId(),
        owner: "p",
        project: null,
        request: text(),
      });
      let claimed = await short.claim("w");
      while (claimed && claimed.id !== brief.id) claimed = await short.claim("w");
      assert.equal(claimed?.id, brief.id);
      await short.finish(claimed!.claim, { state: "succeeded", error: null });
      await sleep(300);
      assert.equal(await short.get(brief.id, as("p")), null);
      assert.ok(await short.purgeExpired() >= 1);
      assert.equal((await short.list(as("p"), 10)).length, 0);
    } finally {
      await close();
    }
  });
}

/** Per-owner limits for the tests below: 2 jobs / 5 images a key, 3 jobs / 6 images a project. */
const OWNER_LIMITS: OwnerLimits = {
  perKey: { jobs: 2, images: 5, resultBytes: 25 },
  perProject: { jobs: 3, images: 6 },
};

const busy = (pattern: RegExp) => (e: unknown) =>
  e instanceof ToolError && e.category === "busy" && pattern.test(e.message);

for (const [kind, open] of stores) {
  Deno.test(`${kind} store: per-key and per-project limits, apart from queue_limit, with the caller's usage`, async () => {
    const { store, close } = await open({ ...LIMITS, queueLimit: 20, perOwner: OWNER_LIMITS });
    try {
      const create = (owner: string, project: number | null, seeds: number[]) =>
        store.create({ id: newJobId(), owner, project, request: text("q", seeds) });
      await create("key:a", 7, [1, 2]);
      // Images over the key's limit: said with the key's own usage.
      await assert.rejects(
        create("key:a", 7, [1, 2, 3, 4]),
        busy(
          /^this call's 4 images would bring this API key to 6 images queued or running, over jobs\.max_images_per_key = 5; it has 1 generation queued or running \(2 images\)/,
        ),
      );
      await assert.rejects(
        store.assertRoom(as("key:a", 7), 6),
        busy(/asks for 6 images, more than this API key may .*max_images_per_key = 5/),
      );
      await create("key:a", 7, [3]);
      await assert.rejects(
        create("key:a", 7, [4]),
        busy(
          /^this API key already has 2 generations queued or running \(3 images\), the most allowed \(jobs\.max_jobs_per_key = 2\); wait for one to finish, or cancel one/,
        ),
      );
      await assert.rejects(store.assertRoom(as("key:a", 7), 1), busy(/max_jobs_per_key = 2/));
      // Another key of the same project: its own limits pass, the project's do not.
      await create("key:b", 7, [5]);
      await assert.rejects(
        create("key:b", 7, [6]),
        busy(
          /^project 7 \(all its API keys together\) already has 3 generations queued or running \(4 images\), the most allowed \(jobs\.max_jobs_per_project = 3\)/,
        ),
      );
      // Other tenants are not affected, and the queue itself had room throughout.
      await create("key:c", 8, [7, 8, 9]);
      await create("key:d", null, [10]);
      assert.deepEqual(await store.counts(), { queued: 5, running: 0 });
      // A job that ends gives its room back (running jobs still count).
      const claimed = await store.claim("w");
      await assert.rejects(create("key:a", 7, [1]), busy(/max_jobs_per_key/));
      await store.finish(claimed!.claim, { state: "succeeded", error: null });
      await create("key:a", 7, [1]);
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: keys of one project see each other's jobs; only the owner cancels`, async () => {
    const { store, close } = await open(LIMITS);
    try {
      const job = await store.create({
        id: newJobId(),
        owner: "key:writer",
        project: 5,
        request: text("team work"),
      });
      for (const viewer of [as("key:writer", 5), as("key:reader", 5)]) {
        assert.equal((await store.summary(job.id, viewer))?.owner, "key:writer");
        assert.equal((await store.get(job.id, viewer))?.project, 5);
        assert.deepEqual((await store.list(viewer, 10)).map((j) => j.id), [job.id]);
      }
      // Another project, or a key without one, sees nothing.
      for (const viewer of [as("key:other", 6), as("key:unbound")]) {
        assert.equal(await store.summary(job.id, viewer), null);
        assert.equal((await store.list(viewer, 10)).length, 0);
      }
      // Unbound keys never see each other's jobs.
      const lone = await store.create({
        id: newJobId(),
        owner: "key:unbound",
        project: null,
        request: text(),
      });
      assert.equal(await store.summary(lone.id, as("key:other-unbound")), null);
      assert.equal(await store.cancel(job.id, "key:reader"), "unknown");
      assert.equal(await store.cancel(job.id, "key:writer"), "removed");
    } finally {
      await close();
    }
  });

  Deno.test(`${kind} store: results are capped per key, and one key filling the store pushes out its own`, async () => {
    const { store, close } = await open({
      queueLimit: 20,
      resultTtlMs: 3_600_000,
      maxResultBytes: 40,
      perOwner: OWNER_LIMITS,
    });
    try {
      const finished = async (owner: string, bytes: number) => {
        const job = await store.create({ id: newJobId(), owner, project: null, request: text() });
        const claimed = await store.claim("w");
        assert.equal(claimed?.id, job.id);
        await store.append(claimed!.claim, 0, [{ type: "text", text: "x".repeat(bytes) }]);
        await store.finish(claimed!.claim, { state: "succeeded", error: null });
        return job.id;
      };
      const mine = await finished("key:victim", 10);
      // The flooder: 10 bytes at a time, over its own 25-byte cap and the 40-byte total.
      const flood: string[] = [];
      for (let i = 0; i < 6; i++) flood.push(await finished("key:flood", 10));
      const kept = async (id: string) =>
        (await store.get(id, as(id === mine ? "key:victim" : "key:flood"))) !== null;
      assert.equal(await kept(mine), true, "another key's results pushed out mine");
      // The flooder keeps its newest two (20 bytes <= 25), the oldest went first.
      assert.deepEqual(await Promise.all(flood.map(kept)), [
        false,
        false,
        false,
        false,
        true,
        true,
      ]);
      // Past the global cap the biggest holder loses first: a third key's results evict the
      // flooder's, not the victim's smaller share.
      const third = [await finished("key:third", 10), await finished("key:third", 10)];
      assert.equal(await kept(mine), true);
      // 10 + 10 + 10 + 10 = 40 kept: the flooder is down to its newest, the third key (as much
      // held, but newer) keeps both.
      assert.deepEqual(await Promise.all(flood.map(kept)), [
        false,
        false,
        false,
        false,
        false,
        true,
      ]);
      assert.equal((await store.list(as("key:third"), 10)).length, 2);
      assert.ok(await store.get(third[1], as("key:third")), "the newest result is kept");
      // A key's single newest result is kept even over its own cap: its caller waits for it.
      const big = await finished("key:big", 30);
      assert.ok(await store.get(big, as("key:big")));
    } finally {
      await close();
    }
  });
}

Deno.test("postgres store: a second server on the same database never fails a live worker's job", async () => {
  const tdb = await openTestDatabase("jobs_live_lease");
  // The embedded database has no LISTEN connection to show a worker alive: the lease decides.
  const embedded = { ...tdb.db, kind: "embedded" as const };
  const first = new PostgresJobStore(embedded, LIMITS, { replica: "first", leaseMs: 60_000 });
  const second = new PostgresJobStore(embedded, LIMITS, { replica: "second", leaseMs: 60_000 });
  try {
    const job = await first.create({ id: newJobId(), owner: "o", project: null, request: text() });
    const claimed = await first.claim("first");
    assert.equal(claimed?.id, job.id);
    // The second server starts: recovery and the lease sweep leave the running job alone.
    assert.deepEqual(await second.recover("the server restarted"), []);
    assert.deepEqual(await second.expireLeases("the worker running it stopped"), []);
    assert.equal((await second.summary(job.id, as("o")))?.state, "running");
    assert.deepEqual(await first.renew(claimed!.claim), { held: true, cancelRequested: false });
    // Once its lease has lapsed (a worker that stopped renewing), it is failed.
    const lapsing = new PostgresJobStore(embedded, LIMITS, { replica: "third", leaseMs: 1 });
    await lapsing.renew(claimed!.claim);
    await sleep(20);
    assert.deepEqual(await second.recover("the server restarted"), [job.id]);
    assert.equal((await second.summary(job.id, as("o")))?.error, "the server restarted");
  } finally {
    await first.close();
    await second.close();
    await tdb.close();
  }
});

Deno.test("postgres store: writes of a claim that no longer holds change nothing; a lapsed claim ends failed, whoever writes first", async () => {
  const tdb = await openTestDatabase("jobs_fencing");
  const store = new PostgresJobStore(tdb.db, { ...LIMITS, queueLimit: 5 }, { leaseMs: 500 });
  const one: JobItem = { type: "text", text: "[1/2] seed 1" };
  const two: JobItem = { type: "text", text: "[2/2] seed 2" };
  try {
    // Both orders of the two writers a resumed database may see first: the worker's own
    // late end, and the lease sweep of any replica.
    for (const first of ["worker", "sweep"] as const) {
      const job = await store.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: text("x", [1, 2]),
      });
      const { claim } = (await store.claim("w"))!;
      // Another claim of the same job (one that lost the row) writes nothing.
      const stranger = { ...claim, token: crypto.randomUUID() };
      assert.equal(await store.append(stranger, 0, [one]), false);
      assert.deepEqual(await store.renew(stranger), { held: false, cancelRequested: false });
      await store.finish(stranger, { state: "succeeded", error: null });
      assert.equal((await store.summary(job.id, as("o")))?.state, "running");
      // The holder's writes land while its lease holds.
      assert.equal(await store.append(claim, 0, [one]), true);
      assert.deepEqual(await store.renew(claim), { held: true, cancelRequested: false });
      // Past the lease (the worker lost the database for that long) it is never revived,
      await sleep(700);
      assert.deepEqual(await store.renew(claim), { held: false, cancelRequested: false });
      assert.equal(await store.append(claim, 1, [two]), false);
      // and the job ends once, as failed with the lease's reason, whatever the worker reports.
      if (first === "worker") {
        await store.finish(claim, { state: "succeeded", error: null });
        assert.deepEqual(await store.expireLeases(LEASE_LAPSED_REASON), []);
      } else {
        assert.deepEqual(await store.expireLeases(LEASE_LAPSED_REASON), [job.id]);
        await store.finish(claim, { state: "succeeded", error: null });
      }
      const record = await store.get(job.id, as("o"));
      assert.equal(record?.state, "failed", first);
      assert.equal(record?.error, LEASE_LAPSED_REASON, first);
      // The image finished before the lease lapsed is kept and returned.
      assert.deepEqual(record?.items, [one], first);
    }
  } finally {
    await store.close();
    await tdb.close();
  }
});

Deno.test({
  name: "postgres store: a claim whose answer was lost goes back to the queue, then runs once",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const tdb = await openTestDatabase("jobs_lost_claim");
    // Every statement of this pool gives up after 300 ms, as the server's pool does.
    const pool = await tdb.connect({ queryTimeoutMs: 300, migrate: false });
    const store = new PostgresJobStore(pool, LIMITS, { leaseMs: 60_000 });
    try {
      const job = await store.create({
        id: newJobId(),
        owner: "o",
        project: null,
        request: text(),
      });
      // The database answers, but too late: the claim lands on the row after the caller gave up.
      tdb.proxy.setDelay(800);
      await assert.rejects(
        store.claim("w"),
        (e: Error & { code?: string }) => e.code === "TIMEOUT",
      );
      tdb.proxy.setDelay(0);
      const row = async () =>
        (await tdb.db.query<{ state: string; lease_token: string | null }>(
          "SELECT state, lease_token FROM mcp_generation_jobs WHERE id = $1",
          [job.id],
        ))[0];
      // The row is taken by a claim nobody holds.
      for (let i = 0; i < 100 && (await row()).state !== "running"; i++) await sleep(50);
      const lost = await row();
      assert.equal(lost.state, "running");
      assert.ok(lost.lease_token);
      // The next claims put it back in the queue and take it again, under a claim of their own
      // (until the lost claim's late answer is in, they send none: it might still land).
      let claimed = null;
      for (let i = 0; i < 100 && !claimed; i++) {
        claimed = await store.claim("w").catch((e: Error & { code?: string }) => {
          assert.equal(e.code, "TIMEOUT", e.message);
          return sleep(50).then(() => null);
        });
      }
      assert.equal(claimed?.id, job.id);
      assert.notEqual(claimed?.claim.token, lost.lease_token);
      assert.deepEqual(await row(), { state: "running", lease_token: claimed!.claim.token });
      // It runs once: nothing else to claim, and the lost claim can write nothing.
      assert.equal(await store.claim("w"), null);
      const stale = { ...claimed!.claim, token: lost.lease_token! };
      assert.equal(await store.append(stale, 0, [{ type: "text", text: "stale" }]), false);
      await store.finish(claimed!.claim, { state: "succeeded", error: null });
      assert.equal((await store.summary(job.id, as("o")))?.state, "succeeded");
    } finally {
      tdb.proxy.setDelay(0);
      await store.close();
      await tdb.close();
    }
  },
});

Deno.test("postgres store: a finished result's delivered content is read once; who may see it is asked on every read", async () => {
  const tdb = await openTestDatabase("jobs_finished_cache");
  const store = new PostgresJobStore(tdb.db, LIMITS, { leaseMs: 60_000 });
  // Another replica on the same database (its own process memory).
  const replica = new PostgresJobStore(tdb.db, LIMITS, { leaseMs: 60_000 });
  try {
    const job = await store.create({ id: newJobId(), owner: "o", project: 7, request: text() });
    const { claim } = (await store.claim("w"))!;
    const first: JobItem[] = [{ type: "image", data: "AAAA", mimeType: "image/png" }];
    assert.equal(await store.append(claim, 0, first), true);
    // A running job's items are read each time: they still grow.
    assert.deepEqual((await store.get(job.id, as("o"), { budget: 5 }))?.items, first);
    const second: JobItem = { type: "image", data: "BBBB", mimeType: "image/png" };
    assert.equal(await store.append(claim, 1, [second]), true);
    await store.finish(claim, { state: "succeeded", error: null });
    const items = [...first, second];
    assert.deepEqual((await store.get(job.id, as("o"), { budget: 5 }))?.items, items);
    // Changed behind the store's back (nothing in the server does: a finished job's items are
    // written only under its claim), the content read again comes from this process...
    await tdb.db.query(
      `UPDATE mcp_generation_items SET data = decode('Q0NDQw==', 'base64') WHERE job_id = $1`,
      [job.id],
    );
    assert.deepEqual((await store.get(job.id, as("o"), { budget: 5 }))?.items, items);
    // ...for another key of the project as well, while a read within another budget, a
    // resource read (no budget) and another replica read the database.
    assert.deepEqual((await store.get(job.id, as("k", 7), { budget: 5 }))?.items, items);
    const changed = items.map((i) => ({ ...i, data: "Q0NDQw==" }));
    assert.deepEqual((await store.get(job.id, as("o"), { budget: 6 }))?.items, changed);
    assert.deepEqual((await store.get(job.id, as("o")))?.items, changed);
    assert.deepEqual((await replica.get(job.id, as("o"), { budget: 5 }))?.items, changed);
    // Who may see it is the database's answer every time: another project's key, an owner
    // without the project, and everyone once the result expired or was deleted, read nothing.
    assert.equal(await store.get(job.id, as("k", 8), { budget: 5 }), null);
    assert.equal(await store.get(job.id, as("other"), { budget: 5 }), null);
    await tdb.db.query(
      `UPDATE mcp_generation_jobs SET expires_at = now() - interval '1 second' WHERE id = $1`,
      [job.id],
    );
    assert.equal(await store.get(job.id, as("o"), { budget: 5 }), null);
    assert.equal(await store.purgeExpired(), 1);
    assert.equal(await store.get(job.id, as("o"), { budget: 5 }), null);
  } finally {
    await store.close();
    await replica.close();
    await tdb.close();
  }
});
