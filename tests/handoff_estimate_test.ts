/**
 * The time a hand-off says is left accounts for the load ahead of its job:
 * the running job's remaining steps and every queued job before it, each
 * by this engine's measured per-image time. Measured once, said against
 * took, for a job queued behind two others, over real HTTP with the tiny
 * models (real ONNX Runtime) and jobs in a real PostgreSQL (`DATABASE_URL`,
 * else embedded). A ratio of two times of the same run, so a busy machine
 * slows both; an estimate that ignored the queue would say a third.
 */

import assert from "node:assert/strict";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";
import { createTestKey as createKey } from "./helpers/log_secrets.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

type Result = Awaited<ReturnType<Client["callTool"]>>;

function call(client: Client, name: string, args: Record<string, unknown>): Promise<Result> {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 }) as Promise<
    Result
  >;
}

const status = (r: Result) =>
  (r.structuredContent ?? {}) as { job_id?: string; state?: string; eta_seconds?: number | null };

/** Resolves when job `id` has ended, polling every 100 ms. */
async function ended(client: Client, id: string): Promise<void> {
  for (;;) {
    const r = await call(client, "get_generation", { job_id: id, wait_seconds: 0 });
    if (status(r).state === undefined) return; // the result itself: it ended
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

Deno.test("a hand-off queued behind two jobs estimates the time they take too (said vs took)", async () => {
  const tdb = await openTestDatabase("handoff_estimate");
  const temp = await writeTinyConfig(`[generation]\nsteps = 300\nmax_wait_seconds = 0.1\n`);
  const app = await startAppFromConfig(temp.path, tdb.url);
  const key = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
  const c = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
  try {
    // Two images measured first (the first of a process is a warm-up).
    for (let i = 0; i < 2; i++) {
      await ended(
        c,
        status(await call(c, "generate_image", { positive_prompt: `warm ${i}` })).job_id!,
      );
    }
    const ids: string[] = [];
    let said = 0;
    const start = performance.now();
    for (let i = 0; i < 3; i++) {
      const handoff = await call(c, "generate_image", { positive_prompt: `queued ${i}` });
      ids.push(status(handoff).job_id!);
      if (i === 2) {
        assert.equal(status(handoff).state, "queued");
        said = status(handoff).eta_seconds!;
      }
    }
    await ended(c, ids[2]);
    const took = (performance.now() - start) / 1000;
    const ratio = said / took;
    console.log(
      `third of three queued jobs: said ${said} s, took ${took.toFixed(1)} s (${
        ratio.toFixed(2)
      }x)`,
    );
    assert.ok(said > 0, "an estimate was given");
    // Ignoring the two jobs ahead it would say about a third of what it took.
    assert.ok(ratio >= 0.6 && ratio <= 1.7, `said ${said} s, took ${took.toFixed(1)} s`);
  } finally {
    await c.close();
    await app.shutdown();
    await tdb.close();
    await temp.remove();
  }
});
