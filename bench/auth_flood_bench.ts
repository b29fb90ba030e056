/**
 * The key-flood load test: a valid user's `tools/list` latency while 128
 * concurrent wrong-secret requests hammer an existing key prefix, reported
 * with the attack's throughput; and the first request of fresh keys during
 * the same flood. Targets: the valid user's p99 under 100 ms; a fresh key
 * authenticates in under 1 s and an active key never waits 1 s.
 *
 * Set-up, as auth_bench.ts: an HTTP server from `startHttpServer` (mod/http)
 * with the real authenticator in production mode (the `X-MCP-Token` check
 * runs; the key row is read from the test database on every request; the
 * `[auth]` defaults of config.toml), listing the six design-code tools (no
 * models needed). The test database is embedded PostgreSQL, or the server named
 * by `DATABASE_URL`; the authenticator's pool connects to it directly.
 *
 * The attack: {@link ATTACKERS} loops in a Worker (flood_attacker.ts: another
 * thread, so the attacker's client work is not on the server's event loop), each sending
 * `tools/list` with the right `X-MCP-Token` and `guinness_<victim
 * prefix>_<random secret>` back to back, reading every answer. The victim is
 * the valid user's own prefix: the worst case, since it shares the row
 * lookups and the prefix's failure budget with the attacker. The valid user
 * authenticates once before the attack (an active key, in the success
 * cache), then is measured one request at a time during it. Fresh keys are
 * created before the attack and used for the first time during it.
 *
 * The last bench (`summary and shutdown`, not a measurement) logs to stderr:
 * the valid user's p50/p99/max without and with the attack, fresh keys'
 * first-request latencies without and with it (each is one scrypt run), the attack's requests per second and its status
 * codes, and whether each target was met.
 *
 * Run: `deno bench -P=test bench/auth_flood_bench.ts`.
 *
 * @module
 */

import { openDatabase } from "../mod/db/mod.ts";
import { log, setLogLevel } from "../mod/log/mod.ts";
import { startDesignCodeServer } from "../tests/helpers/design_code_server.ts";
import { openTestDatabase } from "../tests/helpers/postgres.ts";
import {
  benchSummaryAndShutdown,
  percentile as nearestRank,
  timeToolsList,
} from "../tests/helpers/tools_list_bench.ts";
import { createAuthenticator } from "../mod/auth/authenticator.ts";
import { type CreatedKey, createKey } from "../mod/auth/create_key.ts";
import type { AttackStart } from "./flood_attacker.ts";

/** Concurrent wrong-secret requests. */
const ATTACKERS = 128;
/** Fresh keys whose first request is timed during the flood. */
const FRESH_KEYS = 8;
/** Targets, in ms: the valid user's p99, and a fresh key's first request. */
const P99_TARGET_MS = 100;
const FRESH_TARGET_MS = 1_000;

setLogLevel("info");
const tdb = await openTestDatabase("auth_flood_bench");
const db = await openDatabase({ url: tdb.directUrl, embeddedDir: "" });
const user = await createKey(db, { projectId: 1, userId: 1, permission: "read" });
const fresh: CreatedKey[] = [];
const freshIdleKeys: CreatedKey[] = [];
for (let i = 0; i < FRESH_KEYS; i++) {
  freshIdleKeys.push(await createKey(db, { projectId: 1, userId: 1, permission: "read" }));
  fresh.push(await createKey(db, { projectId: 1, userId: 1, permission: "read" }));
}
const cloudfrontSecret = crypto.randomUUID();
const authenticator = createAuthenticator({
  db,
  environment: "production",
  cloudfrontSecret,
  // The config defaults (`[auth]` in config.toml).
  cacheTtlMs: 30_000,
  lastUsedIntervalMs: 60_000,
  dbTimeoutMs: 2_000,
  maxConcurrentScrypt: 4,
  verifyQueueLimit: 32,
  failuresPerMinute: 10,
  unknownPrefixCacheMs: 2_000,
});
const server = await startDesignCodeServer(authenticator);
const url = `http://127.0.0.1:${server.addr.port}/mcp`;

/** One tools/list round trip with `key`; returns status and latency. */
function listTools(key: string): Promise<{ status: number; ms: number }> {
  return timeToolsList(url, { "x-mcp-token": cloudfrontSecret, "mcp-api-key": key });
}

/** A valid user's request; throws unless it succeeded. */
async function validList(key: string): Promise<number> {
  const { status, ms } = await listTools(key);
  if (status !== 200) throw new Error(`a valid key got HTTP ${status}`);
  return ms;
}

// The user's key is active: verified once, then served from the success cache.
await validList(user.key);
const idle: number[] = [];
for (let i = 0; i < 200; i++) idle.push(await validList(user.key));
// The same without an attack, for comparison: one scrypt per first request.
const freshIdle: number[] = [];
for (const key of freshIdleKeys) freshIdle.push(await validList(key.key));

const attacker = new Worker(new URL("./flood_attacker.ts", import.meta.url), { type: "module" });
const attack = { started: 0, stopped: 0, statuses: {} as Record<string, number> };
/** Resolves with the attacker's next message of `type`. */
function attackerSays(type: string): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const listen = (event: MessageEvent) => {
      if (event.data?.type !== type) return;
      attacker.removeEventListener("message", listen);
      resolve(event.data);
    };
    attacker.addEventListener("message", listen);
  });
}
const started = attackerSays("started");
attacker.postMessage(
  {
    type: "start",
    url,
    token: cloudfrontSecret,
    prefix: user.prefix,
    concurrency: ATTACKERS,
  } satisfies AttackStart,
);
await started;
attack.started = performance.now();
// Let the flood reach its steady state (the prefix's failure budget spent) before measuring.
await new Promise((resolve) => setTimeout(resolve, 1_000));

const underAttack: number[] = [];
const freshFirst: number[] = [];

Deno.bench({
  name: `tools/list by an active key, ${ATTACKERS} wrong-secret requests on its prefix`,
  group: "flood",
  n: 300,
  warmup: 10,
  async fn(b) {
    b.start();
    const ms = await validList(user.key);
    b.end();
    underAttack.push(ms);
  },
});

let nextFresh = 0;
Deno.bench({
  name: `first request of a fresh key during the flood (${FRESH_KEYS} keys)`,
  group: "fresh",
  n: FRESH_KEYS,
  warmup: 0,
  async fn(b) {
    // Deno.bench may call fn more than n times: only a key's first use is a sample.
    const first = nextFresh < FRESH_KEYS;
    const key = fresh[nextFresh++ % FRESH_KEYS].key;
    b.start();
    const ms = await validList(key);
    b.end();
    if (first) freshFirst.push(ms);
  },
});

/** {@link nearestRank}, to 0.01 ms. */
function percentile(values: number[], p: number): number {
  return +nearestRank(values, p).toFixed(2);
}

benchSummaryAndShutdown(async () => {
  const done = attackerSays("done");
  attacker.postMessage({ type: "stop" });
  attack.statuses = (await done).statuses as Record<string, number>;
  attack.stopped = performance.now();
  setLogLevel("info");
  const seconds = (attack.stopped - attack.started) / 1000;
  const total = Object.values(attack.statuses).reduce((a, b) => a + b, 0);
  log("info", "bench", "active key, no attack", {
    requests: idle.length,
    p50Ms: percentile(idle, 50),
    p99Ms: percentile(idle, 99),
    maxMs: percentile(idle, 100),
  });
  log("info", "bench", `active key during the ${ATTACKERS}-way wrong-secret flood`, {
    requests: underAttack.length,
    p50Ms: percentile(underAttack, 50),
    p99Ms: percentile(underAttack, 99),
    maxMs: percentile(underAttack, 100),
    p99UnderTarget: percentile(underAttack, 99) < P99_TARGET_MS,
    neverWaitedOneSecond: percentile(underAttack, 100) < FRESH_TARGET_MS,
  });
  log("info", "bench", "fresh keys' first request, no attack", {
    keys: freshIdle.length,
    msEach: freshIdle.map((ms) => +ms.toFixed(1)),
    maxMs: percentile(freshIdle, 100),
  });
  log("info", "bench", "fresh keys' first request during the flood", {
    keys: freshFirst.length,
    msEach: freshFirst.map((ms) => +ms.toFixed(1)),
    maxMs: percentile(freshFirst, 100),
    underOneSecond: percentile(freshFirst, 100) < FRESH_TARGET_MS,
  });
  log("info", "bench", "the attack", {
    concurrent: ATTACKERS,
    seconds: +seconds.toFixed(1),
    requests: total,
    requestsPerSecond: Math.round(total / seconds),
    statuses: attack.statuses,
  });
  await server.shutdown(5_000);
  await authenticator.close();
  await db.close();
  await tdb.close();
});
