/**
 * Jobs in a database that other processes share, end to end with real
 * server processes and the SDK client: a second HTTP server started on the
 * same embedded `data_dir` (or the same `DATABASE_URL`) leaves the first
 * one's running job alone, and a worker refuses a job row that the tools
 * could not have made (a `name` of `../../x` inserted into the shared
 * database) instead of writing outside `output.dir`.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { type Database, openDatabase } from "../mod/db/mod.ts";
import { newJobId } from "../mod/jobs/mod.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { followStderr, HTTP_LISTENING } from "./helpers/child_stderr.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";
import { untilEnded } from "./helpers/job_results.ts";
import { createTestKey as createKey, teeChildLog } from "./helpers/log_secrets.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase, usingPostgresServer } from "./helpers/postgres.ts";
import { assertClientSafe, pngs, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { ignoredFor } from "./helpers/ignore.ts";

type Result = Awaited<ReturnType<Client["callTool"]>>;

const state = (r: Result) =>
  (r.structuredContent ?? {}) as {
    job_id?: string;
    state?: string;
    progress?: { step: number } | null;
  };

function call(client: Client, name: string, args: Record<string, unknown>): Promise<Result> {
  return (client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 }) as Promise<
    Result
  >).then((result) => {
    assertClientSafe(result, name);
    return result;
  });
}

/** A server process (`main.ts --transport http`) on `configPath`; `databaseUrl` "" = embedded. */
async function startServer(configPath: string, databaseUrl: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", configPath, "--transport", "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", DATABASE_URL: databaseUrl },
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
        await child.status;
        await drained;
        teeChildLog("jobs server", stderr.text());
      },
    };
  } catch (error) {
    child.kill("SIGKILL");
    await child.status;
    throw error;
  }
}

if (!usingPostgresServer()) {
  console.log(
    "tests/jobs_processes_test.ts: the DATABASE_URL case is ignored: DATABASE_URL is unset (the " +
      "embedded case runs; start a server with `bash .ci/postgres.sh | tail -n 1` for both)",
  );
}

for (const mode of ["embedded", "DATABASE_URL"] as const) {
  Deno.test({
    ...ignoredFor(
      mode === "DATABASE_URL" && !usingPostgresServer() ? "DATABASE_URL is unset" : undefined,
      `jobs across processes (${mode}): a second server on the same database never fails the first one's running job`,
    ),
    async fn() {
      const temp = await writeTinyConfig(
        `[generation]\nseed = 3\nsteps = 500\nmax_wait_seconds = 0.5\nmax_count = 2\n`,
      );
      const tdb = mode === "DATABASE_URL" ? await openTestDatabase("jobs_two_servers") : null;
      const url = tdb?.url ?? "";
      const first = await startServer(temp.path, url);
      let second: Awaited<ReturnType<typeof startServer>> | undefined;
      let db: Database | undefined;
      try {
        // The key goes into the database the first server opened (its embedded cluster).
        db = tdb?.db ??
          await openDatabase({ embeddedDir: join(temp.dir, "data", "postgres") });
        const key = await createKey(db, { projectId: null, userId: 1, permission: "write" });
        const client = await connectHttp(first.port, { "MCP-API-Key": key.key });
        try {
          const handoff = await call(client, "generate_image", {
            positive_prompt: "two servers",
            count: 2,
          });
          const id = state(handoff).job_id!;
          assert.ok(id, texts(handoff));
          for (let i = 0; i < 600; i++) {
            const s = state(
              await call(client, "get_generation", { job_id: id, wait_seconds: 0.2 }),
            );
            if (s.state === "running" && (s.progress?.step ?? 0) >= 1) break;
            assert.match(s.state!, /^(queued|running)$/);
          }
          // The second server starts on the same database while the job runs.
          second = await startServer(temp.path, url);
          assert.doesNotMatch(second.stderr(), /jobs interrupted by a restart/);
          const row = async () =>
            (await db!.query<{ state: string; error: string | null }>(
              "SELECT state, error FROM mcp_generation_jobs WHERE id = $1",
              [id],
            ))[0];
          assert.deepEqual(await row(), { state: "running", error: null });
          // Through either server the owner fetches the finished batch.
          const other = await connectHttp(second.port, { "MCP-API-Key": key.key });
          let done: Result;
          try {
            done = await untilEnded([client, other], id);
          } finally {
            await other.close();
          }
          assert.equal(done.isError, undefined, texts(done));
          assert.equal(pngs(done).length, 2, texts(done));
          assert.deepEqual(await row(), { state: "succeeded", error: null });
        } finally {
          await client.close();
        }
      } finally {
        if (!tdb) await db?.close();
        await second?.stop();
        await first.stop();
        await tdb?.close();
        await temp.remove();
      }
    },
  });
}

Deno.test("jobs across processes: a job row the tools could not have made is refused by the worker, and nothing is written outside output.dir", async () => {
  const tdb = await openTestDatabase("jobs_bad_rows");
  const temp = await writeTinyConfig(
    `[generation]\nsteps = 2\nmax_wait_seconds = 2\nmax_count = 3\n` +
      `[output]\nsave = true\ndir = "out/images"\n`,
  );
  try {
    const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
    const app = await startAppFromConfig(temp.path, tdb.url);
    const client = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
    try {
      // Rows as another process could write them into the shared database.
      const request = {
        tool: "generate_image",
        mode: "text_to_image",
        positive: "escape",
        negative: "",
        size: "square_512",
        name: "../../escaped",
        seeds: [1],
        receivedAt: Date.now(),
      };
      const rows = {
        escape: request,
        tooMany: { ...request, name: null, seeds: Array.from({ length: 50 }, (_, i) => i) },
        wrongTool: { ...request, name: null, tool: "inpaint_image" },
      };
      const ids: Record<string, string> = {};
      for (const [what, row] of Object.entries(rows)) {
        ids[what] = newJobId();
        await tdb.db.query(
          `INSERT INTO mcp_generation_jobs (id, owner, tool, state, request, images)
           VALUES ($1, $2, 'generate_image', 'queued', $3::text::jsonb, $4)`,
          [ids[what], `key:${key.prefix}`, JSON.stringify(row), row.seeds.length],
        );
      }
      const expected: Record<string, RegExp> = {
        escape: /name: "\.\.\/\.\.\/escaped" is not a cleaned file label/,
        tooMany: /seeds: 50 images, but generate_image makes at most 3 \(generation\.max_count\)/,
        wrongTool: /tool: must be "generate_image" for mode "text_to_image"/,
      };
      for (const [what, id] of Object.entries(ids)) {
        const result = await untilEnded(client, id, { tries: 100 });
        assert.equal(result.isError, true, what);
        assert.match(texts(result), /^the stored request of this job is not one the tools make/);
        assert.match(texts(result), expected[what], what);
      }
      // A call through the tool boundary is cleaned and saved inside output.dir.
      const made = await call(client, "generate_image", {
        positive_prompt: "inside",
        name: "../../inside",
      });
      assert.equal(pngs(made).length, 1, texts(made));
      const files: string[] = [];
      const walk = async (dir: string) => {
        for await (const e of Deno.readDir(dir)) {
          const path = join(dir, e.name);
          if (e.isDirectory && e.name !== "data") await walk(path);
          else if (e.isFile && e.name.endsWith(".png")) files.push(path.slice(temp.dir.length + 1));
        }
      };
      await walk(temp.dir);
      assert.equal(files.length, 1, files.join(", "));
      assert.match(files[0], /^out\/images\/______inside_\d{8}_\d{6}_\d+\.png$/);
    } finally {
      await client.close();
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
  }
});
