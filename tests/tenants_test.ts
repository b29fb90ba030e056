/**
 * Shared deployments over real HTTP with real SDK clients and a real
 * PostgreSQL (`DATABASE_URL`, or the embedded default): one key flooding the
 * queue with batch hand-offs is held to its own limits while another key's
 * requests get through as fast as without the flood (its own latency,
 * measured in the same test, is the yardstick: no fixed number of
 * milliseconds) and ahead of the flood's backlog; one key's results cannot
 * push out another's;
 * keys of one project (read keys too) see its jobs; `tools/list` shows a
 * read key only the tools it may call.
 */

import assert from "node:assert/strict";
import type { Client } from "../mod/mcp/client_sdk.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { startAppFromConfig } from "./helpers/app_from_config.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";
import { createTestKey as createKey } from "./helpers/log_secrets.ts";
import { openTestDatabase, type TestDatabase } from "./helpers/postgres.ts";
import { pngs, texts } from "./helpers/results.ts";
import { type TempConfig, writeTinyConfig } from "./helpers/tiny_config.ts";

type Result = Awaited<ReturnType<Client["callTool"]>>;

const job = (r: Result) =>
  (r.structuredContent ?? {}) as {
    job_id?: string;
    state?: string;
    queue_position?: number;
    generations?: Array<{ job_id: string; state: string; key: string | null }>;
  };

function call(client: Client, name: string, args: Record<string, unknown>): Promise<Result> {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 }) as Promise<
    Result
  >;
}

interface Setup {
  port: number;
  tdb: TestDatabase;
  close(): Promise<void>;
}

async function serve(sections: string): Promise<Setup> {
  const tdb = await openTestDatabase("tenants");
  let temp: TempConfig | undefined;
  try {
    temp = await writeTinyConfig(sections);
    const app = await startAppFromConfig(temp.path, tdb.url);
    return {
      port: app.http!.port,
      tdb,
      async close() {
        await app.shutdown();
        await tdb.close();
        await temp!.remove();
      },
    };
  } catch (error) {
    await tdb.close();
    await temp?.remove();
    throw error;
  }
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
};

/**
 * The victim's requests: 30 calls, one after another — a generation handed
 * off (max_wait_seconds) every tenth, list_generations and get_generation in
 * between; every one must succeed. Returns each latency and the jobs made.
 */
async function victimRequests(v: Client): Promise<{ latencies: number[]; jobs: string[] }> {
  const latencies: number[] = [];
  const timed = async (name: string, args: Record<string, unknown>) => {
    const start = performance.now();
    const result = await call(v, name, args);
    latencies.push(performance.now() - start);
    assert.equal(result.isError, undefined, `${name}: ${texts(result)}`);
    return result;
  };
  const jobs: string[] = [];
  for (let i = 0; i < 30; i++) {
    if (i % 10 === 0) {
      const handoff = await timed("generate_image", { positive_prompt: `victim ${i}` });
      assert.match(texts(handoff), /Call get_generation with job_id/);
      jobs.push(job(handoff).job_id!);
    } else if (i % 2) {
      await timed("list_generations", {});
    } else {
      await timed("get_generation", { job_id: jobs.at(-1), wait_seconds: 0 });
    }
  }
  return { latencies, jobs };
}

/**
 * How much slower the victim may be during the flood than just before it,
 * by median: a victim that waits behind the flood is many times slower, while
 * the load of other processes on the machine slows both measurements alike.
 */
const MAX_SLOWDOWN = 5;

Deno.test("tenants: one key's 10 x count 10 hand-offs are held to its own limits; another key gets through, as fast as without them and ahead of their backlog", async () => {
  // Slow images (500 steps), so the flood's jobs stay queued and running throughout; the
  // defaults of [jobs] apply (4 jobs and 20 images a key), queue_limit is the default 8.
  const s = await serve(`[generation]\nsteps = 500\nmax_wait_seconds = 0.1\nmax_count = 10\n`);
  const flooder = await createKey(s.tdb.db, { projectId: 1, userId: 1, permission: "write" });
  const victim = await createKey(s.tdb.db, { projectId: 2, userId: 2, permission: "write" });
  const f = await connectHttp(s.port, { "MCP-API-Key": flooder.key });
  const v = await connectHttp(s.port, { "MCP-API-Key": victim.key });
  try {
    // Measured once the models are loaded (tools/list waits for them): the attack, not start-up.
    await v.listTools();
    // The victim's baseline: the same requests before the flood, with its own job running as
    // one of the flood's will (then cancelled, so they count against nothing).
    const alone = await victimRequests(v);
    for (const id of alone.jobs) await call(v, "cancel_generation", { job_id: id });
    // The attack: 10 batches at once, then more, one after another, until the victim is done.
    let attacking = true;
    const results: Result[] = [];
    const flood = (async () => {
      results.push(
        ...await Promise.all(
          Array.from(
            { length: 10 },
            (_, i) => call(f, "generate_image", { positive_prompt: `flood ${i}`, count: 10 }),
          ),
        ),
      );
      while (attacking) {
        results.push(await call(f, "generate_image", { positive_prompt: "more", count: 10 }));
      }
    })();
    // The victim's requests while the flood arrives and holds the queue.
    const { latencies, jobs: victimJobs } = await victimRequests(v);
    attacking = false;
    await flood;
    const accepted = results.filter((r) => !r.isError);
    const refused = results.filter((r) => r.isError);
    // 20 images a key: two batches of 10 in, every other one refused at once with the key's
    // own usage.
    assert.equal(accepted.length, 2, results.map(texts).join("\n"));
    assert.ok(refused.length >= 8);
    for (const r of accepted) assert.match(texts(r), /Call get_generation with job_id/);
    const held = accepted.map((r) => job(r).job_id!);
    for (const r of refused) {
      const text = texts(r);
      assert.ok(
        text.startsWith(
          "this call's 10 images would bring this API key to 30 images queued or running, over " +
            "jobs.max_images_per_key = 20; it has 2 generations queued or running (20 images); " +
            "wait for one to finish, or cancel one (list_generations shows them). ",
        ),
        text,
      );
      // When to retry: one of the key's own two jobs must end first (10 images free the room).
      const named =
        /When to retry: generation (gen_[A-Za-z0-9_-]{22}) \((running|queued)[^)]*\) must end first/
          .exec(text);
      assert.ok(named && held.includes(named[1]), text);
    }
    assert.equal(victimJobs.length, 3, "every victim call got through");
    const median = (values: number[]) => percentile(values, 0.5);
    console.log(
      `victim: ${latencies.length} requests during ${results.length} flood calls, p50 ${
        median(latencies).toFixed(0)
      } ms, p99 ${percentile(latencies, 0.99).toFixed(0)} ms (${
        latencies.map(Math.round).join(" ")
      }); alone p50 ${median(alone.latencies).toFixed(0)} ms, p99 ${
        percentile(alone.latencies, 0.99).toFixed(0)
      } ms`,
    );
    const ratio = median(latencies) / median(alone.latencies);
    assert.ok(
      ratio <= MAX_SLOWDOWN,
      `victim p50 ${median(latencies).toFixed(0)} ms during the flood, ${
        median(alone.latencies).toFixed(0)
      } ms before it: ${ratio.toFixed(1)}x (at most ${MAX_SLOWDOWN}x)`,
    );
    // Served ahead of the flood's backlog: none of the flood's jobs has finished yet.
    for (const r of accepted) {
      const state = job(await call(f, "get_generation", { job_id: job(r).job_id, wait_seconds: 0 }))
        .state;
      assert.ok(state === "queued" || state === "running", `a flood job is ${state}`);
    }
    // The victim's last job counts the running job and the flood's waiting batch ahead of it.
    const status = await call(v, "get_generation", { job_id: victimJobs[2], wait_seconds: 0 });
    assert.match(texts(status), /jobs? ahead of it \(1 running, \d+ waiting\)/);
    for (const r of accepted) await call(f, "cancel_generation", { job_id: job(r).job_id });
    for (const id of victimJobs) await call(v, "cancel_generation", { job_id: id });
  } finally {
    await f.close();
    await v.close();
    await s.close();
  }
});

Deno.test("tenants: results are capped per key; another key's flood of results does not push out mine", async () => {
  // A tiny image's result is about 80 KB: a 0.25 MiB cap per key holds three.
  const s = await serve(
    `[generation]\nsteps = 2\nmax_count = 3\n[jobs]\nmax_result_mib_per_key = 0.25\nmax_result_mib = 1\n`,
  );
  const mine = await createKey(s.tdb.db, { projectId: 1, userId: 1, permission: "write" });
  const theirs = await createKey(s.tdb.db, { projectId: 2, userId: 2, permission: "write" });
  const me = await connectHttp(s.port, { "MCP-API-Key": mine.key });
  const them = await connectHttp(s.port, { "MCP-API-Key": theirs.key });
  try {
    const first = await call(me, "list_generations", {});
    assert.equal(job(first).generations?.length, 0);
    const kept = await call(me, "generate_image", { positive_prompt: "mine", count: 1 });
    assert.equal(pngs(kept).length, 1, texts(kept));
    const [myJob] = job(await call(me, "list_generations", {})).generations!;
    for (let i = 0; i < 3; i++) {
      const batch = await call(them, "generate_image", {
        positive_prompt: `theirs ${i}`,
        count: 3,
      });
      assert.equal(pngs(batch).length, 3, texts(batch));
    }
    // Mine is still there, with its image.
    assert.equal(pngs(await call(me, "get_generation", { job_id: myJob.job_id })).length, 1);
    // Theirs: only the newest batch fits their own cap; the oldest went first.
    const listed = job(await call(them, "list_generations", {})).generations!;
    assert.equal(listed.length, 1, JSON.stringify(listed));
    assert.equal(listed[0].state, "succeeded");
  } finally {
    await me.close();
    await them.close();
    await s.close();
  }
});

Deno.test("tenants: keys of one project, read keys too, list and fetch its jobs; only the maker cancels; a read key is listed only what it may call", async () => {
  const s = await serve(`[generation]\nsteps = 2\nmax_wait_seconds = 30\n`);
  const keys = {
    writer: await createKey(s.tdb.db, { projectId: 42, userId: 1, permission: "write" }),
    teammate: await createKey(s.tdb.db, { projectId: 42, userId: 2, permission: "write" }),
    reader: await createKey(s.tdb.db, { projectId: 42, userId: 3, permission: "read" }),
    otherReader: await createKey(s.tdb.db, { projectId: 43, userId: 4, permission: "read" }),
    unbound: await createKey(s.tdb.db, { projectId: null, userId: 5, permission: "read" }),
  };
  const clients: Record<string, Client> = {};
  for (const [name, key] of Object.entries(keys)) {
    clients[name] = await connectHttp(s.port, { "MCP-API-Key": key.key });
  }
  try {
    const made = await call(clients.writer, "generate_image", {
      positive_prompt: "team lighthouse",
    });
    assert.equal(pngs(made).length, 1, texts(made));
    const [entry] = job(await call(clients.writer, "list_generations", {})).generations!;
    assert.equal(entry.key, null, "the caller's own job names no key");
    for (const name of ["teammate", "reader"]) {
      const listed = await call(clients[name], "list_generations", {});
      assert.deepEqual(
        job(listed).generations?.map((g) => [g.job_id, g.key]),
        [[entry.job_id, keys.writer.prefix]],
      );
      assert.match(texts(listed), /by key \w+ {2}"team lighthouse"/);
      const fetched = await call(clients[name], "get_generation", { job_id: entry.job_id });
      assert.deepEqual(pngs(fetched), pngs(made), name);
    }
    for (const name of ["otherReader", "unbound"]) {
      assert.equal(job(await call(clients[name], "list_generations", {})).generations?.length, 0);
      const hidden = await call(clients[name], "get_generation", { job_id: entry.job_id });
      assert.equal(hidden.isError, true);
      assert.match(texts(hidden), /no generation job/);
    }
    // Cancelling: a read key may not; a teammate sees the job but it is not its own.
    assert.match(
      texts(await call(clients.reader, "cancel_generation", { job_id: entry.job_id })),
      /has read permission/,
    );
    assert.match(
      texts(await call(clients.teammate, "cancel_generation", { job_id: entry.job_id })),
      /made by another API key of project 42; only that key can cancel it/,
    );
    // tools/list: a read key sees exactly the read-only tools; a write key all of them.
    const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);
    assert.deepEqual(await names(clients.reader), ["get_generation", "list_generations"]);
    assert.deepEqual(await names(clients.writer), IMAGE_TOOL_NAMES);
  } finally {
    for (const c of Object.values(clients)) await c.close();
    await s.close();
  }
});

/** A raw 2025-era `tools/call` of `generate_image` by `key`: the HTTP response and its JSON-RPC result. */
async function rawGenerate(
  port: number,
  key: string,
  era: "legacy" | "modern" = "legacy",
): Promise<{ status: number; retryAfter: string | null; text: string; isError: boolean }> {
  const modern = era === "modern";
  const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-api-key": key,
      // 2026-07-28: the revision and the standard headers on every request, no session.
      ...(modern
        ? {
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "generate_image",
        }
        : {}),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: "generate_image",
        arguments: { positive_prompt: "raw" },
        ...(modern
          ? {
            _meta: {
              "io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {},
            },
          }
          : {}),
      },
    }),
  });
  const body = await response.text();
  // A stream (the call went through) carries its one message as an SSE `data:` line.
  const json = body.startsWith("{") ? body : body.split("\n").find((l) => l.startsWith("data: "))!
    .slice(6);
  const result = (JSON.parse(json) as {
    result: { isError?: boolean; content: Array<{ text?: string }> };
  }).result;
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    text: result.content.map((c) => c.text ?? "").join("\n"),
    isError: result.isError === true,
  };
}

Deno.test("tenants: a project and a key at their queue shares leave room for a third tenant; a full queue answers with Retry-After and the setting's name", async () => {
  // Slow images (500 steps), so every job stays queued or running; the defaults: queue_limit 8
  // (9 slots), queue_share_per_key 2, queue_share_per_project 3.
  const s = await serve(`[generation]\nsteps = 500\nmax_wait_seconds = 0.1\n`);
  const keys = [];
  for (const [projectId, userId] of [[1, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6]]) {
    keys.push(await createKey(s.tdb.db, { projectId, userId, permission: "write" }));
  }
  const [, , b, c, d, e] = keys.map((k) => k.key);
  const clients = await Promise.all(keys.map((k) => connectHttp(s.port, { "MCP-API-Key": k.key })));
  const [a1, a2, bc, cc] = clients;
  const made: Array<[Client, string]> = [];
  const generate = async (client: Client, count = 1) => {
    const result = await call(client, "generate_image", { positive_prompt: "held", count });
    assert.equal(result.isError, undefined, texts(result));
    made.push([client, job(result).job_id!]);
  };
  try {
    await a1.listTools();
    // Project 1 (two keys) takes six slots, past its share of 3 while 3 slots stay free; its
    // first job, 10 images, runs throughout.
    await generate(a1, 10);
    for (const client of [a2, a1, a2, a1, a2]) await generate(client);
    // Key B (project 2) takes its share of 2; a third is refused by its share: 1 slot is left.
    await generate(bc);
    await generate(bc);
    const past = await rawGenerate(s.port, b);
    assert.equal(past.isError, true);
    assert.match(past.text, /generation\.queue_share_per_key = 2/);
    assert.match(past.text, /retry in about (\d+) s \(retry_after_seconds = \1\)/);
    assert.match(past.retryAfter ?? "", /^[1-9]\d*$/, "a share refusal carries Retry-After");
    // A third tenant within its share finds room: the last slot.
    await generate(cc);
    // Now the queue is truly full: every tenant is refused, with Retry-After and queue_limit.
    // Both protocol eras: a 2025 answer streams, a 2026-07-28 one is one JSON body.
    for (const [key, era] of [[d, "legacy"], [e, "modern"]] as const) {
      const full = await rawGenerate(s.port, key, era);
      assert.equal(full.status, 200);
      assert.equal(full.isError, true);
      assert.match(
        full.text,
        /the generation queue is full \(1 running, 8 waiting, generation\.queue_limit = 8\)/,
      );
      const said = /retry_after_seconds = (\d+)/.exec(full.text)?.[1];
      assert.ok(said && Number(said) >= 1, full.text);
      assert.equal(full.retryAfter, said, `${era}: Retry-After is the time the text says`);
    }
    // A call that goes through has no Retry-After.
    await call(cc, "cancel_generation", { job_id: made.at(-1)![1] });
    const fits = await rawGenerate(s.port, c);
    assert.equal(fits.isError, false, fits.text);
    assert.equal(fits.retryAfter, null);
  } finally {
    for (const [client, id] of made) {
      await call(client, "cancel_generation", { job_id: id }).catch(() => {});
    }
    await Promise.all(clients.map((client) => client.close()));
    await s.close();
  }
});
