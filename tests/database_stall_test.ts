/**
 * A stalled database, end to end: a real server process (`main.ts
 * --transport http`) whose PostgreSQL stops answering for 30 s without any
 * error or closed connection, as a frozen VM, a stalled disk or a network
 * partition look from the server, then resumes. Two ways:
 *
 * - the embedded default, with SIGSTOP to every process of its cluster, then
 *   SIGCONT;
 * - a PostgreSQL server (`DATABASE_URL`) behind a TCP proxy that stops
 *   forwarding (tests/helpers/tcp_proxy.ts), then forwards again.
 *
 * While stalled, `/healthz` answers 503 with the reason within
 * `auth.db_timeout_ms` + 1 s, every time, and a tool call is refused with
 * 503 as promptly; within 2 s after the database resumes `/healthz` answers
 * 200 again, with no restart. The job that was running ends as documented
 * (docs/database.md, "A stalled database"): its lease (`jobs.lease_seconds`,
 * shorter than the stall) could not be renewed, so it ends `failed` with the
 * lease's reason, keeping the images it had finished. The jobs queued behind
 * it wait and then run, each once; none is lost.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { type Database, openDatabase } from "../mod/db/mod.ts";
import { LEASE_LAPSED_REASON } from "../mod/jobs/mod.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { followStderr, HTTP_LISTENING } from "./helpers/child_stderr.ts";
import { stopCluster } from "./helpers/cluster_processes.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { ignoredFor } from "./helpers/ignore.ts";
import { untilEnded } from "./helpers/job_results.ts";
import { createTestKey, teeChildLog } from "./helpers/log_secrets.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase, type TestDatabase, usingPostgresServer } from "./helpers/postgres.ts";
import { pngs, texts } from "./helpers/results.ts";
import { type TempConfig, writeTinyConfig } from "./helpers/tiny_config.ts";

/** `auth.db_timeout_ms` of the server under test: the bound `/healthz` must keep. */
const DB_TIMEOUT_MS = 1_000;
/** `jobs.lease_seconds`: well inside the stall, so the running job's lease lapses. */
const LEASE_SECONDS = 6;
/** How long the database stays stalled. */
const STALL_MS = 30_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A server process and the database it uses, with a way to stall that database. */
interface Harness {
  port: number;
  /** The server's stderr so far. */
  stderr(): string;
  /** A pool of the test's own on the server's database (not to be used while stalled). */
  db: Database;
  /** Stops the database answering. */
  stall(): Promise<void>;
  /** Lets it answer again. */
  resume(): void;
  close(): Promise<void>;
}

/** `main.ts --transport http` on `config`, with `DATABASE_URL = url` ("" = the embedded default). */
async function startServer(config: TempConfig, url: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", config.path, "--transport", "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    // debug: one "job started" line per run of a job, to count them.
    env: { NO_COLOR: "1", DATABASE_URL: url, SD_MCP_LOG_LEVEL: "debug" },
  }).spawn();
  const stderr = followStderr(child.stderr);
  try {
    const port = Number((await stderr.waitFor(HTTP_LISTENING, "listening"))[1]);
    const drained = stderr.drain();
    return {
      port,
      stderr: () => stderr.text(),
      async stop() {
        try {
          child.kill("SIGTERM");
        } catch { /* gone */ }
        const status = await child.status;
        await drained;
        teeChildLog("database stall server", stderr.text());
        return status;
      },
    };
  } catch (error) {
    child.kill("SIGKILL");
    await child.status;
    throw error;
  }
}

const SECTIONS = `[auth]
db_timeout_ms = ${DB_TIMEOUT_MS}

[jobs]
lease_seconds = ${LEASE_SECONDS}

[generation]
steps = 60
max_wait_seconds = 0.5
max_count = 10
`;

async function embeddedHarness(): Promise<Harness> {
  const config = await writeTinyConfig(SECTIONS);
  const server = await startServer(config, "");
  const clusterDir = join(config.dir, "data", "postgres");
  // Joins the cluster the server runs, as another process (`deno task keys`) would.
  const db = await openDatabase({ embeddedDir: clusterDir });
  let stopped: Awaited<ReturnType<typeof stopCluster>> | undefined;
  return {
    port: server.port,
    stderr: server.stderr,
    db,
    async stall() {
      stopped = await stopCluster(clusterDir);
    },
    resume() {
      stopped?.resume();
      stopped = undefined;
    },
    async close() {
      stopped?.resume();
      await db.close();
      await server.stop();
      await config.remove();
    },
  };
}

async function serverHarness(): Promise<Harness> {
  const tdb: TestDatabase = await openTestDatabase("database_stall");
  const config = await writeTinyConfig(SECTIONS);
  // The server reaches PostgreSQL through the test's proxy.
  const server = await startServer(config, tdb.url);
  return {
    port: server.port,
    stderr: server.stderr,
    db: tdb.db,
    stall() {
      tdb.proxy.stall();
      return Promise.resolve();
    },
    resume() {
      tdb.proxy.resume();
    },
    async close() {
      tdb.proxy.resume();
      await server.stop();
      await config.remove();
      await tdb.close();
    },
  };
}

/** `GET /healthz`: its status, body and how long it took, bounded so a hang fails the test. */
async function health(port: number) {
  const started = performance.now();
  const response = await fetch(`http://127.0.0.1:${port}/healthz`, {
    signal: AbortSignal.timeout(DB_TIMEOUT_MS + 10_000),
  });
  const body = await response.json() as Record<string, unknown>;
  return { status: response.status, body, ms: performance.now() - started };
}

/** One authenticated `tools/list`: its status and how long it took. */
async function toolsList(port: number, key: string) {
  const started = performance.now();
  const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    signal: AbortSignal.timeout(DB_TIMEOUT_MS + 10_000),
  });
  await response.body?.cancel();
  return { status: response.status, ms: performance.now() - started };
}

interface JobRow {
  id: string;
  state: string;
  error: string | null;
  items: number;
  image: number | null;
}

async function jobRow(db: Database, id: string): Promise<JobRow> {
  const [row] = await db.query<Record<string, unknown>>(
    `SELECT id, state, error, (progress->>'image')::int AS image,
            (SELECT count(*) FROM mcp_generation_items i WHERE i.job_id = j.id) AS items
       FROM mcp_generation_jobs j WHERE id = $1`,
    [id],
  );
  return {
    id: String(row.id),
    state: String(row.state),
    error: row.error as string | null,
    items: Number(row.items),
    image: row.image === null ? null : Number(row.image),
  };
}

/** A generation that hands off (the server waits 0.5 s): its job id. */
async function handOff(client: Client, prompt: string, count: number): Promise<string> {
  const result = await client.callTool(
    { name: "generate_image", arguments: { positive_prompt: prompt, count } },
    undefined,
    { timeout: 60_000 },
  );
  const id = (result.structuredContent as { job_id?: string } | undefined)?.job_id;
  assert.ok(id, texts(result));
  return id;
}

/** How many times the server started running job `id`. */
const runs = (stderr: string, id: string) =>
  stderr.split("\n").filter((line) => line.includes("job started") && line.includes(id)).length;

for (const mode of ["embedded", "DATABASE_URL"] as const) {
  Deno.test({
    ...ignoredFor(
      mode === "DATABASE_URL" && !usingPostgresServer() ? "DATABASE_URL is unset" : undefined,
      `a stalled database (${mode}, ${
        mode === "embedded" ? "SIGSTOP to its cluster" : "a proxy that stops forwarding"
      }) for ${
        STALL_MS / 1000
      } s: /healthz 503 within db_timeout_ms, 200 soon after; the running job fails on its lease, queued ones run once`,
    ),
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const h = mode === "embedded" ? await embeddedHarness() : await serverHarness();
      let client: Client | undefined;
      try {
        const key = await createTestKey(h.db, { projectId: null, userId: 1, permission: "write" });
        const before = await health(h.port);
        assert.equal(before.status, 200, JSON.stringify(before.body));
        client = await connectHttp(h.port, { "MCP-API-Key": key.key });
        // A batch that is running when the database stalls, and two generations queued behind it.
        const running = await handOff(client, "running when it stalls", 10);
        const queued = [
          await handOff(client, "queued one", 1),
          await handOff(client, "queued two", 1),
        ];
        let row: JobRow | undefined;
        for (let i = 0; i < 600; i++) {
          row = await jobRow(h.db, running);
          if (row.state === "running" && row.image !== null) break;
          await sleep(50);
        }
        assert.equal(row?.state, "running", JSON.stringify(row));
        for (const id of queued) assert.equal((await jobRow(h.db, id)).state, "queued");

        await h.stall();
        const stalledAt = performance.now();
        const probes: Array<{ status: number; ms: number; reason: unknown }> = [];
        let call: { status: number; ms: number } | undefined;
        try {
          while (performance.now() - stalledAt < STALL_MS) {
            const probe = await health(h.port);
            probes.push({ status: probe.status, ms: probe.ms, reason: probe.body.reason });
            assert.equal(probe.status, 503, JSON.stringify(probe.body));
            assert.equal(probe.body.status, "unavailable");
            assert.equal(probe.body.database, "unavailable");
            assert.match(
              String(probe.body.reason),
              new RegExp(
                `^the database is unavailable \\(no answer to a SELECT 1 within ${DB_TIMEOUT_MS} ms, auth\\.db_timeout_ms`,
              ),
            );
            assert.ok(
              probe.ms < DB_TIMEOUT_MS + 1_000,
              `/healthz took ${Math.round(probe.ms)} ms while the database was stalled`,
            );
            // A tool call is refused as promptly (the key cannot be checked), as before.
            call ??= await toolsList(h.port, key.key);
            await sleep(500);
          }
        } finally {
          h.resume();
        }
        const resumedAt = performance.now();
        assert.ok(probes.length >= 10, `only ${probes.length} probes in ${STALL_MS} ms`);
        assert.equal(call?.status, 503);
        assert.ok(call!.ms < DB_TIMEOUT_MS + 1_000, `the tool call took ${call!.ms} ms`);

        // Back within 2 s, without a restart.
        let back: Awaited<ReturnType<typeof health>> | undefined;
        while (performance.now() - resumedAt < 2_000) {
          back = await health(h.port);
          if (back.status === 200) break;
          await sleep(50);
        }
        assert.equal(back?.status, 200, JSON.stringify(back?.body));
        const recoveredMs = performance.now() - resumedAt;
        assert.ok(
          recoveredMs < 2_000 + DB_TIMEOUT_MS,
          "/healthz did not answer 200 within 2 s of the database resuming",
        );
        const slowest = Math.max(...probes.map((p) => p.ms));
        console.log(
          `${mode}: ${probes.length} /healthz probes while stalled, all 503, slowest ` +
            `${Math.round(slowest)} ms (db_timeout_ms ${DB_TIMEOUT_MS}); a tool call 503 in ` +
            `${Math.round(call!.ms)} ms; 200 again ${Math.round(recoveredMs)} ms after it resumed`,
        );

        // The running job's lease lapsed during the stall: it ends failed with the lease's
        // reason (a killed worker's end), keeping the images it had finished.
        const failed = await untilEnded(client, running, { waitSeconds: 5 });
        assert.match(texts(failed), new RegExp(LEASE_LAPSED_REASON.slice(0, 60)));
        const ended = await jobRow(h.db, running);
        assert.equal(ended.state, "failed");
        assert.equal(ended.error, LEASE_LAPSED_REASON);
        assert.ok(ended.items < 2 * 10, `${ended.items} items: the batch went on`);
        assert.equal(pngs(failed).length * 2, ended.items, texts(failed));
        // The queued ones waited and ran, each once; none was lost.
        for (const id of queued) {
          const done = await untilEnded(client, id, { waitSeconds: 5 });
          assert.equal(done.isError, undefined, texts(done));
          assert.equal(pngs(done).length, 1, texts(done));
          assert.equal((await jobRow(h.db, id)).state, "succeeded");
        }
        for (const id of [running, ...queued]) {
          assert.equal(runs(h.stderr(), id), 1, `job ${id} started ${runs(h.stderr(), id)} times`);
        }
        assert.doesNotMatch(h.stderr(), /uncaught|Uncaught/);
      } finally {
        await client?.close().catch(() => {});
        await h.close();
      }
    },
  });
}
