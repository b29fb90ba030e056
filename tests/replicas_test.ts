/**
 * Two replicas on one PostgreSQL (issue 11, first steps): a `front` that
 * loads no models and a `worker` that runs the jobs. A call through the
 * front is run by the worker, its progress and result come back through the
 * job row, and a cancel sent to the front stops the job on the worker.
 */

import assert from "node:assert/strict";
import { createKey } from "../mod/auth/create_key.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { readPngText } from "../mod/image/mod.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { pngs, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

Deno.test("replicas: a front without models hands its jobs to a worker; progress, results and cancellation cross over", async () => {
  const tdb = await openTestDatabase("replicas");
  const sections = `[generation]\nseed = 21\nsteps = 500\nmax_count = 2\nmax_wait_seconds = 60\n`;
  const frontConfig = await writeTinyConfig(sections, { role: "front" });
  const workerConfig = await writeTinyConfig(sections, { role: "worker" });
  // The front must not need model files: point it at a folder that does not exist.
  const text = await Deno.readTextFile(frontConfig.path);
  await Deno.writeTextFile(
    frontConfig.path,
    text.replace(/^root = .*$/m, `root = ${JSON.stringify(`${frontConfig.dir}/no-models`)}`),
  );
  const env = { DATABASE_URL: tdb.url };
  const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
  const front = await startApp(
    await loadConfig({ path: frontConfig.path, overrides: { transport: "http" }, env }),
  );
  const worker = await startApp(
    await loadConfig({ path: workerConfig.path, overrides: { transport: "http" }, env }),
  );
  try {
    const workerUrl = `http://127.0.0.1:${worker.http!.port}`;
    const mcpOnWorker = await fetch(`${workerUrl}/mcp`, { method: "POST", body: "{}" });
    assert.equal(mcpOnWorker.status, 404);
    await mcpOnWorker.body?.cancel();
    assert.equal((await (await fetch(`${workerUrl}/healthz`)).json()).role, "worker");

    const client = await connectHttp(front.http!.port, { "MCP-API-Key": key.key });
    try {
      let progress = 0;
      const result = await client.callTool(
        { name: "generate_image", arguments: { positive_prompt: "made elsewhere" } },
        undefined,
        { timeout: 120_000, onprogress: () => progress++ },
      );
      assert.equal(result.isError, undefined, texts(result));
      const [png] = pngs(result);
      assert.equal(readPngText(png).seed, "21");
      assert.ok(progress > 0, "no progress reached the client through the front");

      // A batch through the front, cancelled through the front while the worker runs it.
      const batch = client.callTool(
        { name: "generate_image", arguments: { positive_prompt: "stop me", count: 2 } },
        undefined,
        { timeout: 120_000 },
      );
      const other = await connectHttp(front.http!.port, { "MCP-API-Key": key.key });
      try {
        let id: string | undefined;
        for (let i = 0; i < 600 && !id; i++) {
          const listed = await other.callTool({ name: "list_generations", arguments: {} });
          const jobs = (listed.structuredContent as {
            generations: Array<{ job_id: string; state: string }>;
          }).generations;
          if (jobs[0]?.state === "running") id = jobs[0].job_id;
          else await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(id, "the batch never started on the worker");
        const cancelled = await other.callTool({
          name: "cancel_generation",
          arguments: { job_id: id },
        });
        assert.match(texts(cancelled), new RegExp(`generation ${id} was cancelled`));
        const first = await batch;
        assert.match(texts(first), /was cancelled/);
        assert.ok(pngs(first).length < 2);
        const health = await (await fetch(`${workerUrl}/healthz`)).json();
        assert.equal(health.queue.running, false);
      } finally {
        await other.close();
      }
    } finally {
      await client.close();
    }
  } finally {
    await front.shutdown();
    await worker.shutdown();
    await tdb.close();
    await frontConfig.remove();
    await workerConfig.remove();
  }
});

/** Starts `main.ts` as a worker replica; resolves once it runs jobs. */
async function spawnWorker(configPath: string, databaseUrl: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", configPath, "--transport", "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", DATABASE_URL: databaseUrl },
  }).spawn();
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let stderr = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`worker exited before it ran:\n${stderr}`);
    stderr += value;
    if (/worker: running jobs/.test(stderr)) break;
  }
  const drained = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      stderr += value;
    }
  })();
  return {
    stderr: () => stderr,
    async kill() {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
      await child.status;
      await drained;
    },
  };
}

Deno.test("replicas: a worker killed mid-job (kill -9): its job fails with the reason after the lease, another worker runs the rest", async () => {
  const tdb = await openTestDatabase("replicas_kill");
  const sections = `[generation]\nseed = 3\nsteps = 500\nmax_wait_seconds = 0.5\n` +
    `[jobs]\nlease_seconds = 2\n`;
  const frontConfig = await writeTinyConfig(sections, { role: "front" });
  const workerConfig = await writeTinyConfig(sections, { role: "worker" });
  const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
  const front = await startApp(
    await loadConfig({
      path: frontConfig.path,
      overrides: { transport: "http" },
      env: { DATABASE_URL: tdb.url },
    }),
  );
  const workers: Array<Awaited<ReturnType<typeof spawnWorker>>> = [];
  try {
    workers.push(await spawnWorker(workerConfig.path, tdb.url));
    const client = await connectHttp(front.http!.port, { "MCP-API-Key": key.key });
    const call = (name: string, args: Record<string, unknown>) =>
      client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
    const jobId = (r: unknown) =>
      (r as { structuredContent: { job_id: string } }).structuredContent.job_id;
    const state = async (id: string) => {
      const r = await call("get_generation", { job_id: id, wait_seconds: 0.2 });
      return { r, s: (r.structuredContent as { state?: string } | undefined)?.state };
    };
    try {
      const doomed = jobId(await call("generate_image", { positive_prompt: "doomed" }));
      const next = jobId(await call("generate_image", { positive_prompt: "survivor" }));
      for (let i = 0; i < 600 && (await state(doomed)).s !== "running"; i++) { /* poll */ }
      await workers[0].kill();
      workers.push(await spawnWorker(workerConfig.path, tdb.url));
      let failed;
      for (let i = 0; i < 600; i++) {
        const { r, s } = await state(doomed);
        if (s === undefined) {
          failed = r;
          break;
        }
      }
      assert.equal(failed?.isError, true);
      assert.equal(texts(failed), "the worker running it stopped");
      let done;
      for (let i = 0; i < 600; i++) {
        const { r, s } = await state(next);
        if (s === undefined) {
          done = r;
          break;
        }
      }
      assert.equal(done?.isError, undefined, texts(done));
      assert.equal(readPngText(pngs(done)[0]).seed, "3");
      assert.match(workers[1].stderr(), /\[generation\] done .*"seed":3/);
    } finally {
      await client.close();
    }
  } finally {
    for (const w of workers) await w.kill();
    await front.shutdown();
    await tdb.close();
    await frontConfig.remove();
    await workerConfig.remove();
  }
});

Deno.test("replicas: 12 concurrent calls through a front are all served by two workers, both busy at once, started in creation order", async () => {
  const tdb = await openTestDatabase("replicas_many");
  const sections =
    `[generation]\nseed = 100\nsteps = 60\nmax_wait_seconds = 120\nqueue_limit = 20\n`;
  const frontConfig = await writeTinyConfig(sections, { role: "front" });
  const workerConfig = await writeTinyConfig(sections, { role: "worker" });
  const env = { DATABASE_URL: tdb.url };
  const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
  const load = (path: string) => loadConfig({ path, overrides: { transport: "http" }, env });
  const front = await startApp(await load(frontConfig.path));
  const workers = [
    await startApp(await load(workerConfig.path)),
    await startApp(await load(workerConfig.path)),
  ];
  const clients = await Promise.all(
    Array.from({ length: 12 }, () => connectHttp(front.http!.port, { "MCP-API-Key": key.key })),
  );
  try {
    const results = await Promise.all(clients.map((client, i) =>
      client.callTool(
        { name: "generate_image", arguments: { positive_prompt: `call ${i}` } },
        undefined,
        { timeout: 300_000 },
      )
    ));
    for (const result of results) {
      assert.equal(result.isError, undefined, texts(result));
      assert.equal(pngs(result).length, 1);
    }
    const rows = await tdb.db.query<
      { seq: string; worker: string; started_at: Date; finished_at: Date; state: string }
    >(
      "SELECT seq, worker, started_at, finished_at, state FROM mcp_generation_jobs ORDER BY seq",
    );
    assert.equal(rows.length, 12);
    assert.ok(rows.every((r) => r.state === "succeeded"));
    const names = new Set(rows.map((r) => r.worker));
    assert.equal(names.size, 2, `workers: ${[...names]}`);
    // Both engines busy at once: some job of one worker overlaps some job of the other.
    const overlap = rows.some((a) =>
      rows.some((b) =>
        a.worker !== b.worker && a.started_at < b.finished_at && b.started_at < a.finished_at
      )
    );
    assert.ok(overlap, "the two workers never ran jobs at the same time");
    // FIFO: each worker takes jobs in creation order, and no job starts before an older one
    // (two claims in the same instant may stamp now() either way, hence the small allowance).
    for (const name of names) {
      const mine = rows.filter((r) => r.worker === name);
      for (let i = 1; i < mine.length; i++) assert.ok(mine[i].started_at >= mine[i - 1].started_at);
    }
    for (let i = 1; i < rows.length; i++) {
      assert.ok(
        rows[i].started_at.getTime() >= rows[i - 1].started_at.getTime() - 100,
        `job ${rows[i].seq} started before job ${rows[i - 1].seq}`,
      );
    }
  } finally {
    for (const client of clients) await client.close();
    await front.shutdown();
    for (const worker of workers) await worker.shutdown();
    await tdb.close();
    await frontConfig.remove();
    await workerConfig.remove();
  }
});
