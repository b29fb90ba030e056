/**
 * What API-key authentication costs a `tools/list` over loopback streamable
 * HTTP (target: authenticated throughput at least half the unauthenticated
 * one).
 *
 * Set-up: two HTTP servers from `startHttpServer` (mod/http), identical but
 * for the authenticator: one with the real one (production mode, so the
 * `X-MCP-Token` check runs too; key row read from the test database on every
 * request; scrypt once, then the verification cache), one that accepts every
 * request with a fixed scope. The authenticator's pool connects to the
 * database directly (not through the test helper's proxy). Both list the six design-code tools (their
 * backend is never called by `tools/list`; no models are needed). The test
 * database is the embedded PostgreSQL, or the server named by `DATABASE_URL`.
 *
 * Requests are raw `fetch` POSTs of `{"jsonrpc":"2.0","id":1,"method":
 * "tools/list"}` with `Accept: application/json, text/event-stream`; the
 * whole SSE response is read, so one sample is a full round trip.
 * `Deno.bench` times fixed request counts ("sequential": one request per
 * iteration; "concurrent": {@link BATCH} requests with {@link CONCURRENCY} in
 * flight). Every request's latency is also recorded, and the last bench (not
 * a measurement) logs p50/p99 and the throughput of each variant to stderr,
 * with the authenticated/unauthenticated throughput ratio.
 *
 * Run: `deno bench -P=test bench/auth_bench.ts`.
 *
 * @module
 */

import { openDatabase } from "../mod/db/mod.ts";
import { log, setLogLevel } from "../mod/log/mod.ts";
import type { Scope } from "../mod/mcp/mod.ts";
import { startDesignCodeServer } from "../tests/helpers/design_code_server.ts";
import { openTestDatabase } from "../tests/helpers/postgres.ts";
import {
  benchSummaryAndShutdown,
  inLanes,
  percentile,
  timeToolsList,
} from "../tests/helpers/tools_list_bench.ts";
import { createAuthenticator } from "../mod/auth/authenticator.ts";
import { createKey } from "../mod/auth/create_key.ts";

/** Requests per iteration of a concurrent bench. */
const BATCH = 64;
/** Requests in flight in a concurrent bench. */
const CONCURRENCY = 8;

setLogLevel("warn");
const tdb = await openTestDatabase("auth_bench");
// Straight to the database: the test helper's fault-injection proxy would add two hops.
const db = await openDatabase({ url: tdb.directUrl, embeddedDir: "" });
const { key, prefix } = await createKey(db, { projectId: 1, userId: 1, permission: "read" });
const cloudfrontSecret = crypto.randomUUID();
const authenticator = createAuthenticator({
  db,
  environment: "production",
  cloudfrontSecret,
  // The config defaults (`[auth]` in config.toml).
  cacheTtlMs: 30_000,
  lastUsedIntervalMs: 60_000,
  dbTimeoutMs: 2_000,
});
const fixedScope: Scope = { keyPrefix: prefix, projectId: 1, userId: 1, permission: "read" };
const withAuth = await startDesignCodeServer(authenticator);
const withoutAuth = await startDesignCodeServer({
  authenticate: () => Promise.resolve({ ok: true as const, scope: fixedScope }),
});

const HEADERS = { "x-mcp-token": cloudfrontSecret, "mcp-api-key": key };

/** One tools/list round trip to `port`; returns its latency in ms. */
async function listTools(port: number): Promise<number> {
  const { status, text, ms } = await timeToolsList(`http://127.0.0.1:${port}/mcp`, HEADERS);
  if (status !== 200 || !text.includes('"list-designs"')) {
    throw new Error(`tools/list failed: HTTP ${status}: ${text.slice(0, 200)}`);
  }
  return ms;
}

/** BATCH requests, CONCURRENCY at a time; returns each latency. */
function listToolsConcurrently(port: number): Promise<number[]> {
  return inLanes(BATCH, CONCURRENCY, () => listTools(port));
}

/** The two servers compared: same app, with and without API-key checks. */
const VARIANTS = [
  ["unauthenticated", withoutAuth.addr.port],
  ["authenticated", withAuth.addr.port],
] as const;

const samples: Record<string, number[]> = {};
const totals: Record<string, { requests: number; ms: number }> = {};
function record(variant: string, latencies: number[], ms: number): void {
  (samples[variant] ??= []).push(...latencies);
  const total = (totals[variant] ??= { requests: 0, ms: 0 });
  total.requests += latencies.length;
  total.ms += ms;
}

for (const [variant, port] of VARIANTS) {
  Deno.bench({
    name: `sequential (${variant})`,
    group: "tools/list, sequential",
    baseline: variant === "unauthenticated",
    n: 300,
    warmup: 20,
    async fn(b) {
      b.start();
      const ms = await listTools(port);
      b.end();
      record(`sequential ${variant}`, [ms], ms);
    },
  });
}

for (const [variant, port] of VARIANTS) {
  Deno.bench({
    name: `${CONCURRENCY} concurrent × ${BATCH} (${variant})`,
    group: "tools/list, concurrent",
    baseline: variant === "unauthenticated",
    n: 10,
    warmup: 2,
    async fn(b) {
      b.start();
      const started = performance.now();
      const latencies = await listToolsConcurrently(port);
      const ms = performance.now() - started;
      b.end();
      record(`concurrent ${variant}`, latencies, ms);
    },
  });
}

benchSummaryAndShutdown(async () => {
  setLogLevel("info");
  const perSecond: Record<string, number> = {};
  for (const [variant, ms] of Object.entries(samples)) {
    const sorted = [...ms].sort((a, b) => a - b);
    const total = totals[variant];
    perSecond[variant] = (total.requests / total.ms) * 1000;
    log("info", "bench", variant, {
      requests: sorted.length,
      p50Ms: +percentile(sorted, 50).toFixed(2),
      p99Ms: +percentile(sorted, 99).toFixed(2),
      requestsPerSecond: Math.round(perSecond[variant]),
    });
  }
  for (const mode of ["sequential", "concurrent"]) {
    const ratio = perSecond[`${mode} authenticated`] / perSecond[`${mode} unauthenticated`];
    log("info", "bench", `${mode}: authenticated / unauthenticated throughput`, {
      ratio: +ratio.toFixed(3),
      atLeastHalf: ratio >= 0.5,
    });
  }
  await withAuth.shutdown(5_000);
  await withoutAuth.shutdown(5_000);
  await authenticator.close();
  await db.close();
  await tdb.close();
});
