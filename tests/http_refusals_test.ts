/**
 * Every refusal over HTTP is one a client can read and act on, end to end:
 * a real server process (`main.ts --transport http`, tiny models, API keys
 * in a real PostgreSQL) and one client on the same loopback address.
 *
 * - 300 connections at once with `fetch`, then 300 raw TCP requests at
 *   once: each is served, or reads 429 with `retry-after` and a JSON-RPC
 *   error naming the setting that refused it and its value (the per-client
 *   share, `max_connections_per_client`, or the connect rate,
 *   `client_connections_per_second`). Before, 268 of 300 such connections
 *   were closed before any answer could be read.
 * - Six generations at once from one key (`max_jobs_per_key = 4`): four
 *   are queued, two refused with the limit and when to retry (the key's
 *   own job that must end first, and `get_generation` on it).
 *
 * The global cap (`max_connections`), the pending-head budget and the bound
 * on refusals answered at once are driven the same way, against the guard
 * alone, in mod/http/connection_guard_test.ts.
 */

import assert from "node:assert/strict";
import { createTestKey } from "./helpers/log_secrets.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { startReplica, until } from "./helpers/replica.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** What one request got back: a status (0: none could be read), `retry-after`, the body. */
interface Outcome {
  status: number;
  retryAfter: string | null;
  body: string;
  error?: string;
}

/** The JSON-RPC messages of an SSE (or JSON) response body. */
function messages(body: string): Array<Record<string, unknown>> {
  const lines = body.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
  if (lines.length === 0 && body.trim().startsWith("{")) lines.push(body);
  return lines.map((l) => JSON.parse(l));
}

const listTools = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

function headers(key: string): Record<string, string> {
  return {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-api-key": key,
  };
}

/** POST /mcp with `fetch`. */
async function fetchMcp(port: number, key: string, body: string): Promise<Outcome> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: headers(key),
      body,
    });
    return { status: r.status, retryAfter: r.headers.get("retry-after"), body: await r.text() };
  } catch (error) {
    return {
      status: 0,
      retryAfter: null,
      body: "",
      error: String((error as Error).cause ?? error),
    };
  }
}

/** POST /mcp written by hand on a new TCP connection, read until the server closes. */
async function rawMcp(port: number, key: string, body: string): Promise<Outcome> {
  const bytes = enc.encode(body);
  const head = `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n` +
    Object.entries(headers(key)).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
    `content-length: ${bytes.length}\r\n\r\n`;
  let conn: Deno.Conn;
  try {
    conn = await Deno.connect({ hostname: "127.0.0.1", port });
  } catch (error) {
    return { status: 0, retryAfter: null, body: "", error: String(error) };
  }
  let text = "";
  try {
    await conn.write(enc.encode(head));
    await conn.write(bytes);
    const buffer = new Uint8Array(65536);
    for (;;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      text += dec.decode(buffer.subarray(0, n));
    }
  } catch (error) {
    return { status: 0, retryAfter: null, body: text, error: String(error) };
  } finally {
    conn.close();
  }
  const end = text.indexOf("\r\n\r\n");
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0);
  const retryAfter = /\r\nretry-after: (\S+)/i.exec(text.slice(0, end))?.[1] ?? null;
  let payload = end === -1 ? "" : text.slice(end + 4);
  if (/\r\ntransfer-encoding: chunked/i.test(text.slice(0, end))) payload = unchunk(payload);
  return { status, retryAfter, body: payload };
}

/** The body of a chunked transfer coding. */
function unchunk(text: string): string {
  let out = "";
  for (let at = 0;;) {
    const eol = text.indexOf("\r\n", at);
    const size = parseInt(text.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 4 + size;
  }
}

/** The per-client limits at their defaults, by setting. */
const PER_CLIENT: Record<string, number> = {
  "server.max_connections_per_client": 32,
  "server.client_connections_per_second": 50,
};

/** Asserts every outcome is a served `tools/list` or a readable per-client refusal; returns the refused count. */
function assertReadable(outcomes: Outcome[]): number {
  const unread = outcomes.filter((o) => o.status === 0);
  assert.equal(
    unread.length,
    0,
    `${unread.length} of ${outcomes.length} got no readable answer: ${unread[0]?.error}`,
  );
  let refused = 0;
  for (const o of outcomes) {
    if (o.status === 200) {
      const result = messages(o.body).find((m) => "result" in m)?.result as
        | { tools: unknown[] }
        | undefined;
      assert.ok(result && result.tools.length > 0, o.body.slice(0, 300));
      continue;
    }
    refused++;
    assert.equal(o.status, 429, o.body);
    assert.match(o.retryAfter ?? "", /^[1-9]\d*$/, `retry-after ${o.retryAfter}`);
    const error = JSON.parse(o.body).error;
    assert.ok(error.data.limit in PER_CLIENT, error.data.limit);
    assert.equal(error.data.value, PER_CLIENT[error.data.limit]);
    assert.equal(String(error.data.retry_after_seconds), o.retryAfter);
    assert.ok(error.message.includes(`${error.data.limit} = ${error.data.value}`), error.message);
  }
  return refused;
}

Deno.test({
  name: "HTTP refusals are readable: 300 connections at once, six generations of one key",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const tdb = await openTestDatabase("http_refusals");
    const { key } = await createTestKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
    // Generations slow enough (many steps) to hold the key's share while the test looks.
    const server = await startReplica(
      "all",
      tdb.url,
      "[generation]\nsteps = 500\nmax_wait_seconds = 1\n",
    );
    const port = server.port;
    /**
     * Until this client's connect budget is full again: one request is served again, then the
     * time the budget takes to refill from empty (its burst of 100 at 50 a second, the
     * server's `client_connections_per_second` default), so a step's own requests all fit.
     */
    const rested = async () => {
      const served = await until(
        async () => (await fetchMcp(port, key, listTools)).status === 200,
        30_000,
      );
      await new Promise((r) => setTimeout(r, (100 / 50) * 1000));
      return served;
    };
    try {
      await t.step("300 fetches at once from one client: every one served or read", async () => {
        assert.ok(await rested());
        const outcomes = await Promise.all(
          Array.from({ length: 300 }, () => fetchMcp(port, key, listTools)),
        );
        const refused = assertReadable(outcomes);
        // The connect budget is 100 at once (twice client_connections_per_second).
        assert.ok(refused >= 100, `${refused} refused`);
      });

      await t.step(
        "300 raw TCP requests at once from one client: every one served or read",
        async () => {
          assert.ok(await rested());
          const outcomes = await Promise.all(
            Array.from({ length: 300 }, () => rawMcp(port, key, listTools)),
          );
          const refused = assertReadable(outcomes);
          assert.ok(refused >= 100, `${refused} refused`);
        },
      );

      await t.step(
        "six generations at once from one key: two refused, told when to retry",
        async () => {
          assert.ok(await rested());
          const call = (i: number) =>
            JSON.stringify({
              jsonrpc: "2.0",
              id: 10 + i,
              method: "tools/call",
              params: { name: "generate_image", arguments: { positive_prompt: `a cat ${i}` } },
            });
          const outcomes = await Promise.all(
            Array.from({ length: 6 }, (_, i) => fetchMcp(port, key, call(i))),
          );
          const results = outcomes.map((o) => {
            assert.equal(o.status, 200, o.body.slice(0, 300));
            return messages(o.body).find((m) => "result" in m)!.result as {
              isError?: boolean;
              content: Array<{ type: string; text?: string }>;
              structuredContent?: { job_id?: string };
            };
          });
          const refused = results.filter((r) => r.isError);
          const started = results.filter((r) => !r.isError).map((r) => r.structuredContent?.job_id);
          assert.equal(refused.length, 2, JSON.stringify(results.map((r) => r.content[0]?.text)));
          for (const r of refused) {
            const text = r.content.map((c) => c.text).join("\n");
            assert.match(text, /jobs\.max_jobs_per_key = 4/);
            const named =
              /When to retry: generation (gen_[A-Za-z0-9_-]{22}) \((running|queued, position \d+ in the queue)[^)]*\) must end first/
                .exec(text);
            assert.ok(named, text);
            assert.ok(started.includes(named[1]), `${named[1]} is one of the key's own jobs`);
            assert.match(text, new RegExp(`call get_generation with job_id "${named[1]}"`));
          }
          // The engine is left free for the next test.
          for (const id of started) {
            await fetchMcp(
              port,
              key,
              JSON.stringify({
                jsonrpc: "2.0",
                id: 99,
                method: "tools/call",
                params: { name: "cancel_generation", arguments: { job_id: id } },
              }),
            );
          }
        },
      );
    } finally {
      await server.stop();
      await tdb.close();
    }
  },
});
