/**
 * Scale-out benchmark (docs/deploy.md "Measured"): jobs per minute through one `front` with
 * one and then two `worker` replicas, and the claim latency from enqueue
 * (`created_at`) to start (`started_at`) on an idle worker, both read from the
 * job rows. Needs a PostgreSQL server (`DATABASE_URL`); without it the
 * benches are ignored.
 *
 * What it models is the deployment in docs/deploy.md: one engine per GPU,
 * engines that do not share their compute. Here each worker is pinned to its
 * own CPU (`taskset`) and runs ONNX Runtime on one thread, and the models are
 * the test-sized graphs built wider ({@link BENCH_DIMS}, into the bench cache
 * outside the repository), so that a job is engine-bound (about 1.5 s of one
 * core at 20 steps) as a real one is, rather than dominated by the per-job costs of the
 * front and PostgreSQL that the tiny models leave on top.
 */

import { join } from "node:path";
import { createKey } from "../mod/auth/create_key.ts";
import { benchCacheDir } from "../bench/full_models.ts";
import { buildTinyModelSet } from "./fixtures/builder/model_set.ts";
import type { ModelDims } from "./fixtures/builder/options.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { openTestDatabase, type TestDatabase, usingPostgresServer } from "./helpers/postgres.ts";
import { type Replica, startReplica } from "./helpers/replica.ts";

const ignore = !usingPostgresServer();
if (ignore) console.log("tests/replicas_bench.ts ignored: DATABASE_URL is unset");

const JOBS = 8;
// One key sends every job: the per-key limits (for tenants) are off, as an operator's load test sets.
const SECTIONS = `[generation]\nsteps = 20\nseed = 3\nqueue_limit = 32\nmax_wait_seconds = 300\n` +
  `[jobs]\nmax_jobs_per_key = 0\nmax_images_per_key = 0\n`;

/** The bench set's widths: the tiny graphs' structure, wide enough that a job is engine-bound. */
export const BENCH_DIMS: ModelDims = {
  blockChannels: [64, 128, 256],
  hiddenSize: 64,
  vaeChannels: 16,
  timeCondDim: 256,
};

/** Builds (or reuses) the bench-width set; returns its root and lock. */
async function benchModels(): Promise<{ root: string; lock: string }> {
  const dir = join(benchCacheDir(), "replicas-bench");
  const set = await buildTinyModelSet(join(dir, "models"), {
    dims: BENCH_DIMS,
    lockPath: join(dir, "models.lock"),
  });
  return { root: set.root, lock: set.lockPath };
}

interface Setup {
  models: { root: string; lock: string };
  tdb: TestDatabase;
  front: Replica;
  workers: Replica[];
  client: Client;
}
let setup: Setup | null = null;

async function ready(workers: number): Promise<Setup> {
  if (!setup) {
    const models = await benchModels();
    const tdb = await openTestDatabase("replicas_bench");
    const key = (await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" })).key;
    const front = await startReplica("front", tdb.url, SECTIONS, models);
    const client = await connectHttp(front.port, { "MCP-API-Key": key });
    setup = { models, tdb, front, workers: [], client };
    addEventListener("unload", () => {
      // Deno.bench has no "after all": the processes are killed when the bench process ends.
      for (const r of setup ? [setup.front, ...setup.workers] : []) {
        try {
          Deno.kill(r.pid, "SIGKILL");
        } catch { /* gone */ }
      }
    });
  }
  // Workers are only ever added: the one-worker bench runs before the two-worker one.
  // Worker i owns CPU i (mod the CPUs there are), as worker i would own GPU i.
  const cpus = navigator.hardwareConcurrency;
  while (setup.workers.length < workers) {
    const cpu = setup.workers.length % cpus;
    setup.workers.push(
      await startReplica("worker", setup.tdb.url, SECTIONS, { ...setup.models, cpu }),
    );
  }
  return setup;
}

async function runJobs(client: Client, n: number): Promise<void> {
  const results = await Promise.all(
    Array.from(
      { length: n },
      (_, i) =>
        client.callTool(
          { name: "generate_image", arguments: { positive_prompt: `bench ${i}` } },
          undefined,
          {
            timeout: 600_000,
          },
        ),
    ),
  );
  for (const r of results) if (r.isError) throw new Error(JSON.stringify(r.content));
}

async function throughput(b: Deno.BenchContext, workers: number) {
  const s = await ready(workers);
  await runJobs(s.client, workers); // every worker warm
  b.start();
  const t0 = performance.now();
  await runJobs(s.client, JOBS);
  const ms = performance.now() - t0;
  b.end();
  console.log(
    `replicas: ${workers} worker(s): ${JOBS} jobs in ${(ms / 1000).toFixed(1)} s = ${
      (JOBS / (ms / 60_000)).toFixed(1)
    } jobs/min`,
  );
}

Deno.bench({
  name: `${JOBS} jobs through a front, one worker`,
  group: "replicas",
  baseline: true,
  n: 1,
  warmup: 0,
  ignore,
  // Async functions: the bench runner awaits only those.
  async fn(b) {
    await throughput(b, 1);
  },
});

Deno.bench({
  name: `${JOBS} jobs through a front, two workers`,
  group: "replicas",
  n: 1,
  warmup: 0,
  ignore,
  async fn(b) {
    await throughput(b, 2);
  },
});

Deno.bench({
  name: "claim latency: enqueue to start on an idle worker",
  n: 1,
  warmup: 0,
  ignore,
  async fn(b) {
    const s = await ready(2);
    const before = Number(
      (await s.tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM mcp_generation_jobs"))[0].n,
    );
    b.start();
    // One at a time, so a worker is idle when each is created.
    for (let i = 0; i < 5; i++) await runJobs(s.client, 1);
    b.end();
    const rows = await s.tdb.db.query<{ ms: number }>(
      `SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM mcp_generation_jobs
        ORDER BY seq OFFSET $1`,
      [before],
    );
    const ms = rows.map((r) => Number(r.ms)).sort((x, y) => x - y);
    console.log(
      `replicas: claim latency over ${ms.length} jobs: median ${
        ms[Math.floor(ms.length / 2)].toFixed(1)
      } ms, ` +
        `max ${ms[ms.length - 1].toFixed(1)} ms`,
    );
    // The last bench: stop everything.
    await s.client.close();
    for (const r of [s.front, ...s.workers]) await r.stop();
    await s.tdb.close();
    setup = null;
  },
});
