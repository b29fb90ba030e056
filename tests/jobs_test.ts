/**
 * Generation jobs end to end, on the tiny models made slow by config (many
 * steps) so that a call outlasts `max_wait_seconds` (1, or 0.5 where only
 * the hand-off matters): hand-off and
 * `get_generation` over real stdio and real HTTP, pixel identity with a
 * direct call, cancellation of a running batch, owners, expiry, `/healthz`,
 * a client that disconnects (its job goes on), and a server killed mid-job
 * and restarted on the same PostgreSQL.
 */

import assert from "node:assert/strict";
import { createKey } from "../mod/auth/create_key.ts";
import { decodeImageInput, readPngText, toRgbImage } from "../mod/image/mod.ts";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { followStderr, HTTP_LISTENING } from "./helpers/child_stderr.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";
import { untilEnded } from "./helpers/job_results.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { assertClientSafe, contents, pngs, texts } from "./helpers/results.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

/** The most steps config allows: one image takes seconds (about 9 ms a step on a busy 2-core machine). */
const SLOW = 500;
/** Client request timeout for every call: far shorter than a slow image. */
const CLIENT_TIMEOUT = 10_000;

type Result = Awaited<ReturnType<Client["callTool"]>>;

const structured = (r: Result) =>
  (r.structuredContent ?? {}) as {
    job_id?: string;
    state?: string;
    progress?: { image: number; step: number; images_done: number } | null;
    generations?: Array<{ job_id: string; state: string }>;
  };

async function pixels(png: Uint8Array): Promise<Uint8Array> {
  const decoded = await decodeImageInput("input_image", png.toBase64());
  return (await toRgbImage(decoded, decoded.width, decoded.height)).data;
}

function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  onprogress?: () => void,
): Promise<Result> {
  // Every answer, an image, a hand-off, a list or an error, is one any client can take.
  return (client.callTool({ name, arguments: args }, undefined, {
    timeout: CLIENT_TIMEOUT,
    onprogress,
  }) as Promise<Result>).then((result) => {
    assertClientSafe(result, name);
    return result;
  });
}

/** A call that must hand off: no image, not an error, a job id and what to do next. */
function assertHandoff(result: Result): string {
  assert.equal(result.isError, undefined, texts(result));
  assert.equal(pngs(result).length, 0, "the call should have handed off");
  assert.match(texts(result), /Call get_generation with job_id "gen_[A-Za-z0-9_-]{22}"/);
  // Which preset will make the images (the tiny configs' quality preset, a few PNDM steps).
  assert.match(
    texts(result),
    /\nIt runs with the quality preset \(pndm, \d+ steps, guidance 7\.5, full VAE\)\.\n/,
  );
  const id = structured(result).job_id!;
  assert.match(id, /^gen_[A-Za-z0-9_-]{22}$/);
  assert.match(structured(result).state!, /^(queued|running)$/);
  return id;
}

/** Calls get_generation until the job has ended (each call waits up to max_wait_seconds). */
async function fetchResult(client: Client, id: string, onprogress?: () => void) {
  if (!onprogress) return await untilEnded(client, id, { timeoutMs: CLIENT_TIMEOUT });
  for (let i = 0; i < 600; i++) {
    const result = await call(client, "get_generation", { job_id: id }, onprogress);
    const state = structured(result).state;
    if (state !== "queued" && state !== "running") return result;
  }
  throw new Error(`job ${id} did not end`);
}

/** Calls get_generation until the job reports `ready` on its progress. */
async function waitFor(
  client: Client,
  id: string,
  ready: (s: ReturnType<typeof structured>) => boolean,
) {
  for (let i = 0; i < 600; i++) {
    const result = await call(client, "get_generation", { job_id: id, wait_seconds: 0.2 });
    const s = structured(result);
    if (s.state !== "queued" && s.state !== "running") {
      throw new Error(`job ${id} ended before the test could act: ${texts(result)}`);
    }
    if (ready(s)) return;
  }
  throw new Error(`job ${id} never got ready`);
}

Deno.test("jobs: a call longer than max_wait_seconds hands off; get_generation returns the direct call's image", async () => {
  const temp = await writeTinyConfig(
    `[generation]\nseed = 4321\nsteps = ${SLOW}\nmax_wait_seconds = 1\n` +
      `[jobs]\nresult_ttl_seconds = 2\n`,
  );
  const direct = await writeTinyConfig(
    `[generation]\nseed = 4321\nsteps = ${SLOW}\nmax_wait_seconds = 0\n`,
  );
  const tdb = await openTestDatabase("jobs_direct");
  try {
    let fetched: Uint8Array;
    const session = await connectStdio(["--config", temp.path]);
    try {
      let progress = 0;
      const first = await call(session.client, "generate_image", {
        positive_prompt: "a slow lighthouse",
        size: "square_512",
      }, () => progress++);
      const id = assertHandoff(first);
      const done = await fetchResult(session.client, id, () => progress++);
      assert.equal(done.isError, undefined, texts(done));
      assert.equal(structured(done).state, undefined, "a finished job returns the tool's content");
      [fetched] = pngs(done);
      assert.equal(contents(done).length, 1);
      assert.ok(progress > 0, "no progress notification reached the client");
      // Fetching again returns the same image.
      const again = await call(session.client, "get_generation", { job_id: id });
      assert.deepEqual(pngs(again)[0], fetched);

      const listed = await call(session.client, "list_generations", {});
      assert.deepEqual(structured(listed).generations?.map((g) => [g.job_id, g.state]), [
        [id, "succeeded"],
      ]);
      assert.match(texts(listed), /a slow lighthouse/);

      // result_ttl_seconds = 2: then the id is gone, with an error that says it may have expired.
      await new Promise((r) => setTimeout(r, 2500));
      const expired = await call(session.client, "get_generation", { job_id: id });
      assert.equal(expired.isError, true);
      assert.match(texts(expired), new RegExp(`no generation job "${id}".*expired`));
      assert.equal(
        structured(await call(session.client, "list_generations", {})).generations?.length,
        0,
      );
    } finally {
      await session.close();
    }

    // max_wait_seconds = 0 waits until done: the plain result, as before jobs (over HTTP).
    const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
    const app = await startAppFromConfig(direct.path, tdb.url);
    try {
      const client = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
      try {
        const result = await client.callTool(
          {
            name: "generate_image",
            arguments: { positive_prompt: "a slow lighthouse", size: "square_512" },
          },
          undefined,
          { timeout: 600_000 },
        );
        assert.deepEqual(Object.keys(result).sort(), ["content"]);
        const [png] = pngs(result);
        assert.equal(readPngText(png).seed, "4321");
        assert.equal(readPngText(fetched).seed, "4321");
        assert.deepEqual(await pixels(fetched), await pixels(png));
      } finally {
        await client.close();
      }
    } finally {
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
    await direct.remove();
  }
});

Deno.test("jobs: cancel_generation removes a queued job and stops a running batch, keeping its finished images", async () => {
  const temp = await writeTinyConfig(
    `[generation]\nseed = 77\nsteps = ${SLOW}\nmax_wait_seconds = 0.5\nmax_count = 3\n`,
  );
  const session = await connectStdio(["--config", temp.path]);
  try {
    const client = session.client;
    const batch = assertHandoff(
      await call(client, "generate_image", { positive_prompt: "three foxes", count: 3 }),
    );
    const queued = assertHandoff(
      await call(client, "generate_image", { positive_prompt: "later" }),
    );
    const waiting = await call(client, "get_generation", { job_id: queued, wait_seconds: 0 });
    assert.equal(structured(waiting).state, "queued");
    // The running batch is ahead of it, and counts.
    assert.match(
      texts(waiting),
      /position 2 in the queue, 1 job ahead of it \(1 running, 0 waiting\)/,
    );
    const removed = await call(client, "cancel_generation", { job_id: queued });
    assert.match(texts(removed), /left the queue before it started/);
    assert.equal(
      structured(await call(client, "list_generations", {})).generations?.[0].state,
      "cancelled",
    );

    // Once the first image is finished, cancel: the batch stops and keeps it.
    await waitFor(client, batch, (s) => (s.progress?.images_done ?? 0) >= 1);
    const cancelled = await call(client, "cancel_generation", { job_id: batch });
    assert.equal(cancelled.isError, undefined, texts(cancelled));
    const images = pngs(cancelled);
    assert.ok(images.length >= 1 && images.length < 3, `${images.length} images`);
    assert.match(texts(cancelled), /^\[1\/3\] seed 77, size square_512/);
    assert.match(
      texts(cancelled),
      new RegExp(`generation ${batch} was cancelled after ${images.length} of 3`),
    );
    assert.equal(readPngText(images[0]).seed, "77");
    const later = await call(client, "get_generation", { job_id: batch });
    assert.deepEqual(pngs(later), images);
    // The stop is logged at a step boundary of the image after the kept ones.
    assert.match(session.stderr(), /\[generation\] cancelled .*"seed":7[89]/);
    // The engine is free again: a new call is accepted.
    const next = await call(client, "get_generation", { job_id: batch, wait_seconds: 0 });
    assert.equal(next.isError, undefined);
  } finally {
    await session.close();
    await temp.remove();
  }
});

Deno.test("jobs over HTTP: another key cannot see, fetch or cancel a job; /healthz shows progress; a batch is fetched with short client timeouts", async () => {
  const tdb = await openTestDatabase("jobs_http");
  const temp = await writeTinyConfig(
    `[generation]\nseed = 9\nsteps = ${SLOW}\nmax_wait_seconds = 0.5\nmax_count = 3\n`,
  );
  try {
    const owner = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
    const other = await createKey(tdb.db, { projectId: null, userId: 2, permission: "write" });
    const reader = await createKey(tdb.db, { projectId: null, userId: 1, permission: "read" });
    const app = await startAppFromConfig(temp.path, tdb.url);
    const port = app.http!.port;
    const a = await connectHttp(port, { "MCP-API-Key": owner.key });
    const b = await connectHttp(port, { "MCP-API-Key": other.key });
    const r = await connectHttp(port, { "MCP-API-Key": reader.key });
    try {
      const id = assertHandoff(
        await call(a, "generate_image", { positive_prompt: "secret harbour", count: 2 }),
      );
      await waitFor(a, id, (s) => s.state === "running" && (s.progress?.step ?? 0) >= 1);

      const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).json();
      assert.equal(health.queue.running, true);
      assert.equal(health.running_job.images, 2);
      assert.ok(health.running_job.step >= 1);
      const healthText = JSON.stringify(health);
      assert.ok(!healthText.includes("secret") && !healthText.includes(owner.prefix), healthText);

      // Another key: the same answer as for an id that never existed.
      const unknown = "gen_AAAAAAAAAAAAAAAAAAAAAA";
      const missing = texts(await call(b, "get_generation", { job_id: unknown }));
      for (
        const [client, tool] of [[b, "get_generation"], [b, "cancel_generation"], [
          r,
          "get_generation",
        ]] as const
      ) {
        const refused = await call(client, tool, { job_id: id });
        assert.equal(refused.isError, true, tool);
        assert.equal(texts(refused), missing.replace(unknown, id));
      }
      assert.equal(structured(await call(b, "list_generations", {})).generations?.length, 0);
      // A read key may read (list) but not cancel.
      assert.equal((await call(r, "list_generations", {})).isError, undefined);
      const readCancel = await call(r, "cancel_generation", { job_id: id });
      assert.match(texts(readCancel), /has read permission/);

      const done = await fetchResult(a, id);
      assert.equal(done.isError, undefined, texts(done));
      assert.deepEqual(contents(done).map((c) => c.type), ["text", "image", "text", "image"]);
      assert.deepEqual(pngs(done).map((p) => readPngText(p).seed), ["9", "10"]);
      assert.match(texts(done), /^\[1\/2\] seed 9, size square_512 \(512x512\)/);
      const after = await (await fetch(`http://127.0.0.1:${port}/healthz`)).json();
      assert.deepEqual(after.queue, { running: false, waiting: 0, limit: 8 });
      assert.equal(after.running_job, null);
    } finally {
      await a.close();
      await b.close();
      await r.close();
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
  }
});

Deno.test("jobs over HTTP: an SDK client that disconnects before the hand-off leaves its job running; the key lists and fetches it", async () => {
  const tdb = await openTestDatabase("jobs_disconnect");
  // A long wait: the call is still open, before any hand-off, when its client goes away.
  const temp = await writeTinyConfig(
    `[generation]\nseed = 21\nsteps = ${SLOW}\nmax_wait_seconds = 60\nmax_count = 2\n`,
  );
  try {
    const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
    const app = await startAppFromConfig(temp.path, tdb.url);
    try {
      const first = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
      let progressed!: () => void;
      const progress = new Promise<void>((r) => progressed = r);
      const pending = first.callTool(
        { name: "generate_image", arguments: { positive_prompt: "left behind", count: 2 } },
        undefined,
        { timeout: 600_000, onprogress: () => progressed() },
      );
      pending.catch(() => {});
      await progress;
      // The client goes away (its connection closes) without cancelling.
      await first.close();
      await assert.rejects(pending);
      const again = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
      try {
        const listed = structured(await call(again, "list_generations", {})).generations!;
        assert.equal(listed.length, 1);
        assert.equal(listed[0].state, "running", "the disconnect cancelled the job");
        // Each call waits at most 5 s: under the client's 10 s timeout.
        const done = await untilEnded(again, listed[0].job_id, {
          waitSeconds: 5,
          timeoutMs: CLIENT_TIMEOUT,
        });
        assert.equal(done.isError, undefined, texts(done));
        assert.deepEqual(pngs(done).map((p) => readPngText(p).seed), ["21", "22"]);
      } finally {
        await again.close();
      }
    } finally {
      await app.shutdown();
    }
  } finally {
    await tdb.close();
    await temp.remove();
  }
});

Deno.test("jobs over HTTP: after a kill -9 and a restart on the same PostgreSQL, the running job fails with its reason and the queued one runs", async () => {
  const tdb = await openTestDatabase("jobs_restart");
  const temp = await writeTinyConfig(
    `[generation]\nseed = 5\nsteps = ${SLOW}\nmax_wait_seconds = 0.5\n`,
  );
  const key = await createKey(tdb.db, { projectId: null, userId: 1, permission: "write" });
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", temp.path, "--transport", "http"],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", DATABASE_URL: tdb.url },
  }).spawn();
  const stderr = followStderr(child.stderr);
  try {
    const port = Number((await stderr.waitFor(HTTP_LISTENING, "listening"))[1]);
    const drained = stderr.drain();
    const first = await connectHttp(port, { "MCP-API-Key": key.key });
    const running = assertHandoff(await call(first, "generate_image", { positive_prompt: "one" }));
    const queued = assertHandoff(await call(first, "generate_image", { positive_prompt: "two" }));
    await waitFor(first, running, (s) => s.state === "running" && (s.progress?.step ?? 0) >= 1);
    child.kill("SIGKILL");
    await child.status;
    await drained;
    await first.close().catch(() => {});

    const app = await startAppFromConfig(temp.path, tdb.url);
    try {
      const client = await connectHttp(app.http!.port, { "MCP-API-Key": key.key });
      try {
        const failed = await call(client, "get_generation", { job_id: running });
        assert.equal(failed.isError, true);
        assert.equal(texts(failed), "the server restarted while this job was running");
        const done = await fetchResult(client, queued);
        assert.equal(done.isError, undefined, texts(done));
        assert.equal(readPngText(pngs(done)[0]).seed, "5");
        const listed = structured(await call(client, "list_generations", {})).generations!;
        assert.deepEqual(listed.map((g) => [g.job_id, g.state]), [
          [queued, "succeeded"],
          [running, "failed"],
        ]);
      } finally {
        await client.close();
      }
    } finally {
      await app.shutdown();
    }
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await tdb.close();
    await temp.remove();
  }
});
