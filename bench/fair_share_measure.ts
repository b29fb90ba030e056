/**
 * Measures what a client that sends little gets from a server under a
 * `tools/list` flood, from one address and spread over many (the numbers in
 * docs/deploy.md "One client's flood and the others"). Not a test: it
 * prints a table, once.
 *
 * Set-up, as tests/fair_share_http_test.ts: a real server process
 * (`main.ts --transport http`, tiny models, a test database: embedded
 * PostgreSQL, or `DATABASE_URL`) with the per-client caps raised
 * (`max_connections_per_client = 512`, `client_connections_per_second =
 * 100000`), so that only the global budgets (`max_pending_heads` 128,
 * `max_connections` 512) are left. The flood (`bench/flood_attacker.ts`,
 * a Worker) keeps N `tools/list` requests in flight, half with a valid key
 * and half with well-formed unknown prefixes, from 127.0.0.1 or spread
 * round-robin over 127.0.0.10, 127.0.0.11, …; the second client
 * (127.0.0.2, its own key) makes {@link CALLS} sequential calls meanwhile.
 *
 * Per scenario: the second client's calls served (its success rate), its
 * median and slowest call, its share of all the calls served while the
 * flood ran (it sends one at a time, the flood hundreds; the flood's count
 * includes its first second, before the second client starts), and the
 * flood's statuses.
 *
 * Run: `deno run -P=test bench/fair_share_measure.ts [--loops 300,1000] [--addresses 1,20]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createKey } from "../mod/auth/create_key.ts";
import { openDatabase } from "../mod/db/mod.ts";
import { mcpPostFrom } from "../tests/helpers/from_address.ts";
import { formatStatuses, startFlood } from "../tests/helpers/flood.ts";
import { openTestDatabase } from "../tests/helpers/postgres.ts";
import { startReplica } from "../tests/helpers/replica.ts";

/** The second client's sequential calls per scenario. */
const CALLS = 60;

const { values } = parseArgs({
  args: Deno.args,
  options: {
    loops: { type: "string", default: "300,1000" },
    addresses: { type: "string", default: "1,20" },
  },
});
const loopCounts = values.loops.split(",").map(Number);
const addressCounts = values.addresses.split(",").map(Number);

const tdb = await openTestDatabase("fair_share_measure");
const db = await openDatabase({ url: tdb.directUrl, embeddedDir: "" });
const victim = await createKey(db, { projectId: 1, userId: 1, permission: "read" });
const flooder = await createKey(db, { projectId: 2, userId: 2, permission: "read" });
await db.close();
const server = await startReplica("all", tdb.url, "", {
  server: { max_connections_per_client: 512, client_connections_per_second: 100_000 },
});
const port = server.port;
const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

async function call(
  from: string,
  key: string,
): Promise<{ ok: boolean; status: number; ms: number }> {
  const started = performance.now();
  const r = await mcpPostFrom(from, port, key, body, 20_000);
  return {
    ok: r.status === 200 && /"tools":\[\{/.test(r.body),
    status: r.status,
    ms: performance.now() - started,
  };
}

/** The second client's calls, and the flood's statuses meanwhile (none alone). */
async function scenario(loops: number, addresses: number) {
  const flood = loops === 0 ? null : await startFlood({
    url: `http://127.0.0.1:${port}/mcp`,
    concurrency: loops,
    credentials: [{ kind: "valid", key: flooder.key }, { kind: "unknown-prefix" }],
    from: addresses === 1
      ? ["127.0.0.1"]
      : Array.from({ length: addresses }, (_, i) => `127.0.0.${10 + i}`),
  });
  if (flood) await new Promise((r) => setTimeout(r, 1_000));
  const started = performance.now();
  const calls = [];
  for (let i = 0; i < CALLS; i++) calls.push(await call("127.0.0.2", victim.key));
  const seconds = (performance.now() - started) / 1000;
  const statuses = (await flood?.stop()) ?? {};
  return { calls, seconds, statuses };
}

// Both keys verified once (scrypt), then answered from the verification cache.
await call("127.0.0.2", victim.key);
await call("127.0.0.1", flooder.key);
const rows: string[] = [
  "| flood | second client served | its median, slowest | its share of calls served | flood's statuses |",
  "| --- | --- | --- | --- | --- |",
];
const scenarios: Array<[number, number]> = [[0, 0]];
for (const addresses of addressCounts) {
  for (const loops of loopCounts) scenarios.push([loops, addresses]);
}
for (const [loops, addresses] of scenarios) {
  const { calls, seconds, statuses } = await scenario(loops, addresses);
  const served = calls.filter((c) => c.ok).length;
  const ms = calls.map((c) => c.ms).sort((a, b) => a - b);
  // The flood's 200s over the whole flood; scaled to the second client's span for its share.
  const floodServed = statuses[200] ?? 0;
  const failed = calls.filter((c) => !c.ok).map((c) => c.status);
  rows.push(
    `| ${
      loops === 0
        ? "none"
        : `${loops} loops from ${addresses} address${addresses === 1 ? "" : "es"}`
    } | ` +
      `${served} of ${calls.length}${
        failed.length ? ` (${formatStatuses(count(failed))})` : ""
      } | ` +
      `${ms[ms.length >> 1].toFixed(0)} ms, ${ms.at(-1)!.toFixed(0)} ms | ` +
      `${loops === 0 ? "all" : `${((100 * served) / (served + floodServed)).toFixed(1)} %`} | ` +
      `${loops === 0 ? "" : formatStatuses(statuses)} (${seconds.toFixed(1)} s) |`,
  );
  console.error(rows.at(-1));
  await new Promise((r) => setTimeout(r, 2_000));
}
await server.stop();
await tdb.close();
console.log(rows.join("\n"));

function count(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}
