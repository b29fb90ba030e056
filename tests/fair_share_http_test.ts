/**
 * A flood cannot push out a client that sends little, end to end: a real
 * server process (`main.ts --transport http`, tiny models, API keys in a
 * real PostgreSQL: `DATABASE_URL`, else embedded) with the per-client caps
 * raised as a deployment behind an address-merging proxy must raise them
 * (`max_connections_per_client = 512`, `client_connections_per_second =
 * 100000`), so that only the global budgets (`max_pending_heads` 128,
 * `max_connections` 512) stand between one client and the rest.
 *
 * One client (127.0.0.1) floods `tools/list` from 300, then 1,000
 * concurrent loops (a Worker: `bench/flood_attacker.ts`), half of them
 * with a valid key and half with well-formed keys of unknown prefixes,
 * while a second client (127.0.0.2, its own key) makes sequential
 * `tools/list` calls: every one of them must be served (no 503, no closed
 * connection). Before the fair shares (`mod/http/fair_share.ts`), 15 of 16
 * of the second client's calls read 503 under the 1,000-loop flood. The
 * flood must itself have met a full budget (503s of its own), or the test
 * would prove nothing.
 *
 * Bounded: each flood runs until the second client has made at least
 * {@link VICTIM_CALLS} calls over at least {@link VICTIM_MS} (at most
 * {@link PHASE_LIMIT_MS}), then stops; everything is on 127.0.0.0/8.
 */

import assert from "node:assert/strict";
import { mcpPostFrom } from "./helpers/from_address.ts";
import { formatStatuses, startFlood } from "./helpers/flood.ts";
import { ignoredFor } from "./helpers/ignore.ts";
import { createTestKey } from "./helpers/log_secrets.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { startReplica, until } from "./helpers/replica.ts";

/** The second client's calls per flood, at least. */
const VICTIM_CALLS = 10;
/** How long the second client calls under each flood, at least. */
const VICTIM_MS = 3_000;
/** The most a flood runs. */
const PHASE_LIMIT_MS = 30_000;

const listTools = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

/** One `tools/list` from `from`; the status and whether a tool list came back. */
async function list(from: string, port: number, key: string) {
  const r = await mcpPostFrom(from, port, key, listTools, 20_000);
  return { status: r.status, listed: /"tools":\[\{/.test(r.body), body: r.body };
}

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "not Linux (distinct loopback source addresses)",
    "fair shares: one address flooding tools/list from 300, then 1,000 loops cannot refuse another client's sequential calls",
  ),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const tdb = await openTestDatabase("fair_share");
    const victim = await createTestKey(tdb.db, { projectId: 1, userId: 1, permission: "read" });
    const flooder = await createTestKey(tdb.db, { projectId: 2, userId: 2, permission: "read" });
    const server = await startReplica("all", tdb.url, "", {
      server: { max_connections_per_client: 512, client_connections_per_second: 100_000 },
    });
    const port = server.port;
    try {
      // Both keys verified once (scrypt), then answered from the verification cache.
      assert.ok(await until(async () => (await list("127.0.0.2", port, victim.key)).listed));
      assert.ok((await list("127.0.0.1", port, flooder.key)).listed);
      const floods = new Map<number, Record<number, number>>();
      for (const concurrency of [300, 1_000]) {
        await t.step(`${concurrency} loops from 127.0.0.1`, async () => {
          const flood = await startFlood({
            url: `http://127.0.0.1:${port}/mcp`,
            concurrency,
            credentials: [{ kind: "valid", key: flooder.key }, { kind: "unknown-prefix" }],
            from: ["127.0.0.1"],
          });
          const calls: Array<{ status: number; listed: boolean; body: string; ms: number }> = [];
          try {
            // The flood at full strength before the first measured call.
            await new Promise((r) => setTimeout(r, 1_000));
            const started = performance.now();
            while (
              (calls.length < VICTIM_CALLS || performance.now() - started < VICTIM_MS) &&
              performance.now() - started < PHASE_LIMIT_MS
            ) {
              const t0 = performance.now();
              calls.push({
                ...await list("127.0.0.2", port, victim.key),
                ms: performance.now() - t0,
              });
            }
          } finally {
            const statuses = await flood.stop();
            const ms = calls.map((c) => c.ms).sort((a, b) => a - b);
            console.error(
              `${concurrency} loops: flood ${formatStatuses(statuses)}; second client ` +
                `${calls.length} calls, ${formatStatuses(count(calls.map((c) => c.status)))}, ` +
                `median ${ms[ms.length >> 1]?.toFixed(0)} ms, max ${ms.at(-1)?.toFixed(0)} ms`,
            );
            floods.set(concurrency, statuses);
          }
          assert.ok(calls.length >= VICTIM_CALLS, `only ${calls.length} calls`);
          if (concurrency === 1_000) {
            // 1,000 loops always fill the 128 pending heads: the flood read the budget's 503s.
            const statuses = floods.get(concurrency)!;
            assert.ok(
              (statuses[503] ?? 0) > 0,
              `the flood met no full budget: ${formatStatuses(statuses)}`,
            );
          }
          const failed = calls.filter((c) => c.status !== 200 || !c.listed);
          assert.equal(
            failed.length,
            0,
            `${failed.length} of ${calls.length} calls failed: ${failed[0]?.status} ${
              failed[0]?.body.slice(0, 300)
            }`,
          );
        });
      }
    } finally {
      await server.stop();
      await tdb.close();
    }
  },
});

/** Status → count. */
function count(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}
