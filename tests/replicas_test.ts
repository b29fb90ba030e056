/**
 * Scale-out end to end (docs/deploy.md): three real server processes on one real
 * PostgreSQL — two `all` replicas (engine and front) and one `front` (no
 * models) — sharing one job queue. Observed from the job rows, never
 * assumed: calls through the front are all served by both engines at once in
 * creation order; a cancellation sent to one replica stops the job another
 * runs (2025: `notifications/cancelled`; 2026-07-28: a closed stream, and
 * `tasks/cancel` of a task made elsewhere); a PostgreSQL outage mid-run loses no job and runs none twice; a
 * worker killed with SIGKILL fails its job after the lease while the others
 * finish.
 *
 * Needs a PostgreSQL server (`DATABASE_URL`, as CI sets it): the embedded
 * default serves a single replica. Without it the test is reported ignored.
 */

import assert from "node:assert/strict";
import { createKey } from "../mod/auth/create_key.ts";
import type { Database } from "../mod/db/mod.ts";
import { LEASE_LAPSED_REASON } from "../mod/jobs/mod.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { callAsTask, cancelTask, connectHttpV2, getTask, pollTask } from "./helpers/mcp_v2.ts";
import { openTestDatabase, usingPostgresServer } from "./helpers/postgres.ts";
import { type Replica, startReplica, until } from "./helpers/replica.ts";
import { pngs, texts } from "./helpers/results.ts";
import { ignoredFor } from "./helpers/ignore.ts";

/**
 * Replicas share a queue only on a PostgreSQL server (start one with
 * `bash .ci/postgres.sh | tail -n 1`).
 */
const noServer = usingPostgresServer()
  ? undefined
  : "DATABASE_URL is unset (replicas share a PostgreSQL server)";

/** Steps per image: a few tenths of a second per image on the tiny models. */
const STEPS = 60;
/** Long enough to ride out the outage below (postgres.js reconnects with a backoff). */
const LEASE_SECONDS = 8;

interface JobRow {
  id: string;
  seq: number;
  worker: string | null;
  state: string;
  error: string | null;
  started: number | null;
  finished: number | null;
  step: number | null;
  items: number;
  images: number;
}

async function jobRows(db: Database): Promise<JobRow[]> {
  const rows = await db.query<Record<string, unknown>>(
    `SELECT id, seq, worker, state, error, images,
            extract(epoch FROM started_at) * 1000 AS started,
            extract(epoch FROM finished_at) * 1000 AS finished,
            (progress->>'step')::int AS step,
            (SELECT count(*) FROM mcp_generation_items i WHERE i.job_id = j.id) AS items
       FROM mcp_generation_jobs j ORDER BY seq`,
  );
  return rows.map((r) => ({
    id: String(r.id),
    seq: Number(r.seq),
    worker: r.worker as string | null,
    state: String(r.state),
    error: r.error as string | null,
    images: Number(r.images),
    started: r.started === null ? null : Number(r.started),
    finished: r.finished === null ? null : Number(r.finished),
    step: r.step === null ? null : Number(r.step),
    items: Number(r.items),
  }));
}

/** The replica whose worker name is in `row` (worker names start with the pid). */
const ranOn = (row: JobRow, replica: Replica) => row.worker?.startsWith(`${replica.pid}-`) ?? false;

/**
 * The client id a raw client sends back (`Mcp-Session-Id`, issued at
 * `initialize`): cancellation belongs to the key and this id (mod/http/in_flight.ts).
 */
const CLIENT_ID = crypto.randomUUID().replaceAll("-", "");

/** POSTs one JSON-RPC message to `/mcp` as the raw client (key + {@link CLIENT_ID}). */
function post(port: number, key: string, message: Record<string, unknown>): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "MCP-API-Key": key,
      "Mcp-Session-Id": CLIENT_ID,
    },
    body: JSON.stringify({ jsonrpc: "2.0", ...message }),
  });
}

/** A raw `tools/call` over streamable HTTP with a chosen JSON-RPC id; resolves with the SSE text. */
async function rawCall(
  port: number,
  key: string,
  id: string,
  name: string,
  args: Record<string, unknown>,
): Promise<string> {
  const response = await post(port, key, {
    id,
    method: "tools/call",
    params: { name, arguments: args },
  });
  return await response.text();
}

/** Sends `notifications/cancelled` for `requestId`; resolves with the HTTP status. */
async function notifyCancelled(port: number, key: string, requestId: string): Promise<number> {
  const response = await post(port, key, {
    method: "notifications/cancelled",
    params: { requestId, reason: "test" },
  });
  await response.body?.cancel();
  return response.status;
}

Deno.test({
  ...ignoredFor(noServer, "replicas: two engines and a front on one PostgreSQL share one queue"),
  async fn(t) {
    const tdb = await openTestDatabase("replicas");
    const sections = `[generation]\nsteps = ${STEPS}\nseed = 7\nqueue_limit = 20\n` +
      `max_wait_seconds = 120\n\n[jobs]\nlease_seconds = ${LEASE_SECONDS}\n` +
      // One key sends every call here: the per-tenant limits are not what this test is about.
      `max_jobs_per_key = 0\nmax_images_per_key = 0\n`;
    const replicas: Replica[] = [];
    let ok = true;
    try {
      const key =
        (await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" })).key;
      // One at a time: the machine running the tests is small.
      const a = await startReplica("all", tdb.url, sections);
      replicas.push(a);
      const b = await startReplica("all", tdb.url, sections);
      replicas.push(b);
      const front = await startReplica("front", tdb.url, sections);
      replicas.push(front);

      ok = await t.step(
        "12 concurrent calls through the front: all served, both engines at once, FIFO",
        async () => {
          const client = await connectHttp(front.port, { "MCP-API-Key": key });
          try {
            const results = await Promise.all(
              Array.from({ length: 12 }, (_, i) =>
                client.callTool(
                  { name: "generate_image", arguments: { positive_prompt: `cat ${i}` } },
                  undefined,
                  {
                    timeout: 300_000,
                  },
                )),
            );
            for (const r of results) {
              assert.equal(r.isError, undefined, texts(r));
              assert.equal(pngs(r).length, 1);
            }
          } finally {
            await client.close();
          }
          const rows = await jobRows(tdb.db);
          assert.equal(rows.length, 12);
          assert.ok(
            rows.every((r) => r.state === "succeeded" && r.items >= 1),
            JSON.stringify(rows),
          );
          // The front runs nothing; both engines ran some.
          assert.equal(
            rows.filter((r) => ranOn(r, front)).length,
            0,
          );
          const onA = rows.filter((r) => ranOn(r, a));
          const onB = rows.filter((r) => ranOn(r, b));
          assert.equal(onA.length + onB.length, 12);
          assert.ok(onA.length > 0 && onB.length > 0, `A ran ${onA.length}, B ran ${onB.length}`);
          // Busy at once: a job on A and a job on B whose run times overlap.
          const overlap = onA.some((x) =>
            onB.some((y) => x.started! < y.finished! && y.started! < x.finished!)
          );
          assert.ok(overlap, "the two engines never ran at the same time");
          // FIFO: jobs start in creation order (claims take the lowest seq; the
          // timestamps of two claims made at the same moment may differ by a hair).
          for (let i = 1; i < rows.length; i++) {
            assert.ok(
              rows[i].started! >= rows[i - 1].started! - 20,
              `job ${rows[i].seq} started before job ${rows[i - 1].seq}`,
            );
          }
        },
      );

      ok = ok &&
        await t.step("a cancellation sent to one replica stops the job another runs", async () => {
          const before = (await jobRows(tdb.db)).length;
          // Held open by the front; cancelled by notifications/cancelled sent to A.
          const held = rawCall(front.port, key, "held-1", "generate_image", {
            positive_prompt: "a long batch",
            count: 10,
          });
          let row: JobRow | undefined;
          assert.ok(
            await until(async () => {
              row = (await jobRows(tdb.db))[before];
              return row?.state === "running" && (row.step ?? 0) >= 2;
            }),
            "the job never started",
          );
          const other = ranOn(row!, a) ? b : a;
          assert.equal(await notifyCancelled(other.port, key, "held-1"), 202);
          assert.ok(
            await until(async () => (await jobRows(tdb.db))[before].state !== "running", 20_000),
            "the job did not stop",
          );
          const ended = (await jobRows(tdb.db))[before];
          assert.equal(ended.state, "cancelled");
          // Stopped early: far from the 10 × STEPS the batch would take.
          assert.ok(ended.items < 2 * 10, `${ended.items} items`);
          await held;

          // cancel_generation at a replica that neither holds the call nor runs the job.
          const client = await connectHttp(front.port, { "MCP-API-Key": key });
          try {
            const handoff = rawCall(front.port, key, "held-2", "generate_image", {
              positive_prompt: "another long batch",
              count: 10,
            });
            let job: JobRow | undefined;
            assert.ok(
              await until(async () => {
                job = (await jobRows(tdb.db))[before + 1];
                return job?.state === "running" && (job.step ?? 0) >= 2;
              }),
              "the second job never started",
            );
            const runner = ranOn(job!, a) ? a : b;
            const elsewhere = runner === a ? b : a;
            const canceller = await connectHttp(elsewhere.port, { "MCP-API-Key": key });
            try {
              const answer = await canceller.callTool({
                name: "cancel_generation",
                arguments: { job_id: job!.id },
              });
              // No image was finished, so the answer is the cancellation as a tool error.
              assert.match(texts(answer), /was cancelled/);
            } finally {
              await canceller.close();
            }
            const stopped = (await jobRows(tdb.db))[before + 1];
            assert.equal(stopped.state, "cancelled");
            assert.ok(stopped.images === 10 && stopped.items < 2 * 10);
            await handoff;
          } finally {
            await client.close();
          }
        });

      ok = ok && await t.step(
        "2026-07-28: a stream closed at the front, and a task cancelled at another replica, stop the job an engine runs",
        async () => {
          const before = (await jobRows(tdb.db)).length;
          const running = async (index: number) => {
            let job: JobRow | undefined;
            assert.ok(
              await until(async () => {
                job = (await jobRows(tdb.db))[index];
                return job?.state === "running" && (job.step ?? 0) >= 2;
              }),
              `job ${index} never started`,
            );
            return job!;
          };
          const plain = await connectHttpV2(front.port, { "MCP-API-Key": key }, {
            capabilities: {},
          });
          try {
            const controller = new AbortController();
            const call = plain.client.callTool(
              { name: "generate_image", arguments: { positive_prompt: "a long batch", count: 10 } },
              { signal: controller.signal, timeout: 300_000 },
            );
            await running(before);
            // Closing the request's stream is a 2026-07-28 client's cancellation.
            controller.abort("changed my mind");
            await assert.rejects(call);
            assert.ok(
              await until(async () => (await jobRows(tdb.db))[before].state !== "running", 20_000),
              "the job did not stop",
            );
            const ended = (await jobRows(tdb.db))[before];
            assert.equal(ended.state, "cancelled");
            assert.ok(ended.items < 2 * 10, `${ended.items} items`);
          } finally {
            await plain.close();
          }

          // A task made at the front is the same job everywhere: polled and cancelled at A.
          const maker = await connectHttpV2(front.port, { "MCP-API-Key": key });
          const poller = await connectHttpV2(a.port, { "MCP-API-Key": key });
          try {
            const created = await callAsTask(maker, {
              name: "generate_image",
              arguments: { positive_prompt: "a long task", count: 10 },
            });
            const job = await running(before + 1);
            assert.equal(job.id, created.taskId);
            assert.match((await getTask(poller, created.taskId)).statusMessage ?? "", /running/);
            await cancelTask(poller, created.taskId);
            const done = await pollTask(poller, created.taskId);
            assert.equal(done.status, "cancelled");
            assert.equal((await jobRows(tdb.db))[before + 1].state, "cancelled");
          } finally {
            await maker.close();
            await poller.close();
          }
        },
      );

      ok = ok && await t.step(
        "a PostgreSQL outage mid-run: replicas reconnect, no job lost or run twice",
        async () => {
          const before = (await jobRows(tdb.db)).length;
          const client = await connectHttp(front.port, { "MCP-API-Key": key });
          try {
            const calls = Array.from({ length: 4 }, (_, i) =>
              client.callTool(
                { name: "generate_image", arguments: { positive_prompt: `dog ${i}` } },
                undefined,
                {
                  timeout: 300_000,
                },
              ));
            assert.ok(
              // Every job exists (a call arriving while the database is down is refused,
              // not lost) and one runs.
              await until(async () => {
                const rows = (await jobRows(tdb.db)).slice(before);
                return rows.length === 4 && rows.some((r) => r.state === "running");
              }),
              "the jobs were not all created, or none started",
            );
            await tdb.proxy.down();
            await new Promise((r) => setTimeout(r, 1500));
            await tdb.proxy.up();
            const results = await Promise.all(calls);
            for (const r of results) assert.equal(r.isError, undefined, texts(r));
          } finally {
            await client.close();
          }
          const rows = (await jobRows(tdb.db)).slice(before);
          assert.equal(rows.length, 4);
          for (const r of rows) {
            assert.equal(r.state, "succeeded", JSON.stringify(r));
            // Run twice would have appended a second set of items.
            assert.equal(r.items, 1, JSON.stringify(r));
          }
        },
      );

      ok = ok && await t.step(
        "kill -9 of a worker mid-job: its job fails after the lease, the others finish",
        async () => {
          const before = (await jobRows(tdb.db)).length;
          const client = await connectHttp(front.port, { "MCP-API-Key": key });
          try {
            const victimCall = client.callTool(
              {
                name: "generate_image",
                arguments: { positive_prompt: "victim", count: 10 },
              },
              undefined,
              { timeout: 300_000 },
            );
            let victim: JobRow | undefined;
            assert.ok(
              await until(async () => {
                victim = (await jobRows(tdb.db))[before];
                return victim?.state === "running" && (victim.step ?? 0) >= 1;
              }),
              "the job never started",
            );
            const dying = ranOn(victim!, a) ? a : b;
            const survivor = dying === a ? b : a;
            const others = Array.from({ length: 3 }, (_, i) =>
              client.callTool(
                { name: "generate_image", arguments: { positive_prompt: `after ${i}` } },
                undefined,
                {
                  timeout: 300_000,
                },
              ));
            await dying.kill();
            const killedAt = Date.now();
            const failed = await victimCall;
            assert.equal(failed.isError, true);
            assert.match(texts(failed), /the worker running it stopped/);
            assert.ok(
              Date.now() - killedAt >= LEASE_SECONDS * 1000 * 2 / 3 - 500,
              "failed before the lease ran out",
            );
            for (const r of await Promise.all(others)) {
              assert.equal(r.isError, undefined, texts(r));
            }
            const rows = (await jobRows(tdb.db)).slice(before);
            assert.equal(rows[0].error, LEASE_LAPSED_REASON);
            assert.ok(rows.slice(1).every((r) => r.state === "succeeded" && ranOn(r, survivor)));
          } finally {
            await client.close();
          }
        },
      );
    } finally {
      for (const r of replicas.reverse()) await r.stop().catch(() => {});
      if (!ok) {
        for (const r of replicas) {
          console.error(`--- ${r.role} ${r.pid} ---\n${r.stderr().slice(-6000)}`);
        }
      }
      await tdb.close();
    }
  },
});

Deno.test({
  ...ignoredFor(
    noServer,
    "replicas: a front starts without model files; a worker serves only /healthz",
  ),
  async fn() {
    const tdb = await openTestDatabase("roles");
    const replicas: Replica[] = [];
    try {
      // Models that do not exist: a front never opens them.
      const front = await startReplica("front", tdb.url, "", { root: "/nonexistent-models" });
      replicas.push(front);
      const health = await (await fetch(`http://127.0.0.1:${front.port}/healthz`)).json();
      assert.equal(health.role, "front");
      assert.deepEqual(health.shared, { running: 0, waiting: 0 });
      assert.equal(health.generation, undefined, "a front runs no job, so names no preset");

      const worker = await startReplica("worker", tdb.url, "");
      replicas.push(worker);
      const mcp = await fetch(`http://127.0.0.1:${worker.port}/mcp`, {
        method: "POST",
        body: "{}",
      });
      assert.equal(mcp.status, 404);
      assert.match(await mcp.text(), /worker \(server\.role\); it serves only \/healthz/);
      const workerHealth = await (await fetch(`http://127.0.0.1:${worker.port}/healthz`)).json();
      assert.equal(workerHealth.role, "worker");
      assert.equal(workerHealth.queue.running, false);
      assert.equal(workerHealth.generation.preset, "quality", "the preset its jobs run with");
    } finally {
      for (const r of replicas.reverse()) await r.stop().catch(() => {});
      await tdb.close();
    }
  },
});
