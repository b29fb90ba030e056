/**
 * `tools/list` over loopback streamable HTTP: latency and throughput, (a)
 * idle and (b) while a long generation runs. (b) measures the target
 * "tools/list answers within 100 ms while a generation runs".
 *
 * Set-up, as tests/http_test.ts does it: the app started in-process
 * (`startApp`, HTTP transport, port 0) on the tiny model set
 * (`tests/fixtures/tiny`, built here if missing) with `[generation] steps =
 * 200`, a test database (`openTestDatabase`: embedded PostgreSQL, or
 * `DATABASE_URL`) holding one write API key. Requests are raw `fetch` POSTs
 * of `{"jsonrpc":"2.0","method":"tools/list"}` with `Accept:
 * application/json, text/event-stream` and `MCP-API-Key`; the whole SSE
 * response is read, so a sample is the full round trip including
 * authentication (scrypt once, then the verification cache) and the
 * per-request MCP server.
 *
 * (b) keeps a generation running through every measured request: before
 * each iteration, if the previous `generate_image` call (SDK client, with a
 * progress token, so the server streams one notification per step) has
 * finished, a new one is started and the iteration waits for its first
 * progress notification, outside the measured span. On the tiny models a
 * 200-step 512×512 generation takes about a second, so several are run.
 *
 * Measurement: `Deno.bench` times each iteration (one request for the
 * "sequential" benches, a batch of {@link BATCH} requests with
 * {@link CONCURRENCY} in flight for the "concurrent" ones) and prints avg,
 * min/max, p75 and p99. Every single request's latency is also recorded; the
 * last bench (`summary and shutdown`, not a measurement) logs p50/p99/max per
 * scenario and the throughput to stderr, then shuts the app down.
 *
 * Run: `deno bench -P=test bench/http_bench.ts`.
 *
 * @module
 */

import { join } from "node:path";
import { createKey } from "../mod/auth/create_key.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { log, setLogLevel } from "../mod/log/mod.ts";
import { buildTinyModelSet } from "../tests/fixtures/builder/mod.ts";
import { openTestDatabase } from "../tests/helpers/postgres.ts";
import { connectHttp } from "../tests/helpers/http_client.ts";
import { ROOT } from "../tests/helpers/paths.ts";
import {
  benchSummaryAndShutdown,
  inLanes,
  percentile,
  timeToolsList,
} from "../tests/helpers/tools_list_bench.ts";
import { writeTinyConfig } from "../tests/helpers/tiny_config.ts";

/** Requests per iteration of a concurrent bench. */
const BATCH = 64;
/** Requests in flight in a concurrent bench. */
const CONCURRENCY = 8;
/** The target: tools/list within 100 ms while a generation runs. */
const TARGET_MS = 100;

await buildTinyModelSet(join(ROOT, "tests/fixtures/tiny/models"));
const tdb = await openTestDatabase("http_bench");
const { key } = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
const temp = await writeTinyConfig(`[generation]\nsteps = 200\n`);
const config = await loadConfig({
  path: temp.path,
  overrides: { transport: "http" },
  env: { DATABASE_URL: tdb.url },
});
const app = await startApp(config);
const url = `http://127.0.0.1:${app.http!.port}/mcp`;
// Per-request info lines would cost stderr writes inside the measured spans.
setLogLevel("warn");

const HEADERS = { "mcp-api-key": key };

/** One tools/list round trip; returns its latency in ms. */
async function listTools(): Promise<number> {
  const { status, text, ms } = await timeToolsList(url, HEADERS);
  if (status !== 200 || !text.includes('"generate_image"')) {
    throw new Error(`tools/list failed: HTTP ${status}: ${text.slice(0, 200)}`);
  }
  return ms;
}

/** BATCH requests, CONCURRENCY at a time; returns each latency. */
function listToolsConcurrently(): Promise<number[]> {
  return inLanes(BATCH, CONCURRENCY, listTools);
}

// --- the background generation for (b) ------------------------------------

const generator = await connectHttp(app.http!.port, { "MCP-API-Key": key });
let running: Promise<unknown> | null = null;
let generations = 0;
let stepsSeen = 0;
const stop = new AbortController();

/** Makes sure a generation is between its first and last step. */
async function ensureGenerating(): Promise<void> {
  if (running) return;
  let firstStep!: () => void;
  const started = new Promise<void>((resolve) => firstStep = resolve);
  generations++;
  let seen = 0;
  running = generator.callTool(
    {
      name: "generate_image",
      arguments: { positive_prompt: "a slow lighthouse", size: "square_512" },
    },
    undefined,
    {
      signal: stop.signal,
      timeout: 600_000,
      onprogress: () => {
        seen++;
        stepsSeen++;
        if (seen === 1) firstStep();
      },
    },
  ).catch(() => {}).finally(() => {
    running = null;
    firstStep();
  });
  await started;
}

// --- recorded latencies -----------------------------------------------------

const samples: Record<string, number[]> = {};
const batches: Record<string, { requests: number; ms: number }> = {};
const record = (scenario: string, ms: number[]) => (samples[scenario] ??= []).push(...ms);

function benchSequential(scenario: string, group: string, busy: boolean): void {
  Deno.bench({
    name: `sequential (${scenario})`,
    group,
    baseline: !busy,
    n: 300,
    warmup: 20,
    async fn(b) {
      if (busy) await ensureGenerating();
      b.start();
      const ms = await listTools();
      b.end();
      record(`sequential ${scenario}`, [ms]);
    },
  });
}

function benchConcurrent(scenario: string, group: string, busy: boolean): void {
  Deno.bench({
    name: `${CONCURRENCY} concurrent × ${BATCH} (${scenario})`,
    group,
    n: 10,
    warmup: 2,
    async fn(b) {
      if (busy) await ensureGenerating();
      b.start();
      const started = performance.now();
      const latencies = await listToolsConcurrently();
      const ms = performance.now() - started;
      b.end();
      record(`concurrent ${scenario}`, latencies);
      const total = (batches[scenario] ??= { requests: 0, ms: 0 });
      total.requests += BATCH;
      total.ms += ms;
    },
  });
}

const IDLE = "tools/list, idle";
const BUSY = "tools/list, during a 200-step generation";
benchSequential("idle", IDLE, false);
benchConcurrent("idle", IDLE, false);
benchSequential("generating", BUSY, true);
benchConcurrent("generating", BUSY, true);

benchSummaryAndShutdown(async () => {
  setLogLevel("info");
  for (const [scenario, ms] of Object.entries(samples)) {
    const sorted = [...ms].sort((a, b) => a - b);
    const p99 = percentile(sorted, 99);
    log("info", "bench", scenario, {
      requests: sorted.length,
      p50Ms: +percentile(sorted, 50).toFixed(2),
      p99Ms: +p99.toFixed(2),
      maxMs: +sorted[sorted.length - 1].toFixed(2),
      ...(scenario.includes("generating") ? { within100msAtP99: p99 < TARGET_MS } : {}),
    });
  }
  for (const [scenario, t] of Object.entries(batches)) {
    log("info", "bench", `throughput ${scenario}`, {
      requests: t.requests,
      concurrency: CONCURRENCY,
      requestsPerSecond: Math.round((t.requests / t.ms) * 1000),
    });
  }
  log("info", "bench", "background generations", { started: generations, stepsSeen });
  stop.abort(new Error("benchmark finished"));
  await running;
  await generator.close();
  await app.shutdown();
  await tdb.close();
  await temp.remove();
});
