/**
 * The refusal desk on real TCP connections: an answer waits for the
 * request head, arrives whole, is followed by a FIN rather than a reset
 * even when the client still sends, and the desk's bound gives way to the
 * clients that send their head.
 */

import assert from "node:assert/strict";
import { RefusalDesk, refusalResponse } from "./refusal.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const HEAD = "POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}";

/** A listener whose accepted connections `refuse` hands to `desk`. */
function front(desk: RefusalDesk, waitForHeadMs = 30_000) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const response = refusalResponse({
    status: 429,
    message: "this client has 1 open connections (server.max_connections_per_client = 1)",
    limit: { setting: "server.max_connections_per_client", value: 1 },
    retryAfterSeconds: 1,
  });
  const answered: boolean[] = [];
  const loop = (async () => {
    for await (const conn of listener) {
      answered.push(desk.answer(conn, response, { waitForHeadMs }) !== null);
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    answered,
    connect: () =>
      Deno.connect({ hostname: "127.0.0.1", port: (listener.addr as Deno.NetAddr).port }),
    async close() {
      listener.close();
      await loop;
      desk.close();
      await desk.idle();
    },
  };
}

/** Reads until the peer closes; `reset` when the connection was reset instead. */
async function readAll(conn: Deno.Conn): Promise<{ text: string; reset: boolean }> {
  const buffer = new Uint8Array(65536);
  let text = "";
  for (;;) {
    let n: number | null;
    try {
      n = await conn.read(buffer);
    } catch (error) {
      if (error instanceof Deno.errors.ConnectionReset) return { text, reset: true };
      throw error;
    }
    if (n === null) return { text, reset: false };
    text += dec.decode(buffer.subarray(0, n));
  }
}

/** Whether `conn` has something to read within `ms` (the read goes on in the background). */
function readsWithin(conn: Deno.Conn, ms: number) {
  const buffer = new Uint8Array(1);
  let timer: ReturnType<typeof setTimeout>;
  const read = conn.read(buffer).then((n) => n !== null, () => true);
  return {
    early: Promise.race([read, new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms))])
      .finally(() => clearTimeout(timer)),
    byte: read.then(() => dec.decode(buffer)),
  };
}

Deno.test("a refusal is a status with retry-after and a JSON-RPC error naming the limit", () => {
  const text = dec.decode(refusalResponse({
    status: 503,
    message: "the server has 9 open connections (server.max_connections = 9); retry in 1 s",
    limit: { setting: "server.max_connections", value: 9 },
    retryAfterSeconds: 1,
  }));
  const [head, body] = text.split("\r\n\r\n");
  assert.match(head, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
  assert.match(head, /\r\nretry-after: 1(\r\n|$)/);
  assert.match(head, /\r\nconnection: close(\r\n|$)/);
  assert.match(head, new RegExp(`\r\ncontent-length: ${enc.encode(body).length}(\r\n|$)`));
  assert.deepEqual(JSON.parse(body), {
    jsonrpc: "2.0",
    error: {
      code: -32000,
      message: "the server has 9 open connections (server.max_connections = 9); retry in 1 s",
      data: { limit: "server.max_connections", value: 9, retry_after_seconds: 1 },
    },
    id: null,
  });
  // A refusal that is not about a limit has neither.
  const plain = dec.decode(refusalResponse({ status: 400, message: "not HTTP/1.x" }));
  assert.doesNotMatch(plain, /retry-after|"data"/);
});

Deno.test("the answer waits for the request head, then comes whole and ends with a FIN", async () => {
  const desk = new RefusalDesk({ capacity: 4 });
  const f = front(desk);
  try {
    const conn = await f.connect();
    // Before the head nothing is written: a client still about to write its request
    // (Deno's fetch) takes bytes on an idle connection for a broken server.
    const probe = readsWithin(conn, 300);
    assert.equal(await probe.early, false, "the answer came before the request");
    // The head, split across writes, and split inside its empty line.
    await conn.write(enc.encode("POST /mcp HTTP/1.1\r\nhost: a\r\n\r"));
    await conn.write(enc.encode("\n{}"));
    const first = await probe.byte;
    const { text, reset } = await readAll(conn);
    conn.close();
    assert.equal(reset, false);
    assert.match(first + text, /^HTTP\/1\.1 429 Too Many Requests\r\n/);
    assert.match(text, /retry-after: 1\r\n/);
    assert.match(text, /"limit":"server\.max_connections_per_client"/);
    await desk.idle();
    assert.deepEqual(desk.stats, { answered: 1, unanswered: 0, failed: 0, inProgress: 0 });
  } finally {
    await f.close();
  }
});

Deno.test("a client still sending after the answer reads it, then a FIN, not a reset", async () => {
  const desk = new RefusalDesk({ capacity: 4 });
  const f = front(desk);
  try {
    const conn = await f.connect();
    await conn.write(enc.encode("POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 300000\r\n\r\n"));
    const probe = readsWithin(conn, 30_000);
    assert.equal(await probe.early, true);
    // The body goes on after the answer: the desk drains it rather than resetting.
    for (let i = 0; i < 30; i++) await conn.write(new Uint8Array(10_000));
    await conn.closeWrite();
    const { text, reset } = await readAll(conn);
    conn.close();
    assert.equal(reset, false, "the connection was reset");
    assert.match((await probe.byte) + text, /^HTTP\/1\.1 429 /);
  } finally {
    await f.close();
  }
});

Deno.test("a full desk closes the oldest answer still waiting for its head, so a new one is answered", async () => {
  const desk = new RefusalDesk({ capacity: 2 });
  const f = front(desk);
  try {
    const silent = [await f.connect(), await f.connect()];
    for (let i = 0; i < 200 && desk.stats.inProgress < 2; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(desk.stats.inProgress, 2);
    const client = await f.connect();
    await client.write(enc.encode(HEAD));
    const { text } = await readAll(client);
    client.close();
    assert.match(text, /^HTTP\/1\.1 429 /);
    // The first silent one was closed unanswered, the second still waits.
    assert.equal((await readAll(silent[0])).text, "");
    assert.equal(desk.stats.unanswered, 1);
    await silent[1].write(enc.encode(HEAD));
    assert.match((await readAll(silent[1])).text, /^HTTP\/1\.1 429 /);
    for (const conn of silent) conn.close();
    assert.equal(desk.stats.answered, 2);
  } finally {
    await f.close();
  }
});

Deno.test("a desk full of answers already written closes a new refusal unanswered, and counts it", async () => {
  // The answered client keeps its connection open, and the answer lingers for it.
  const desk = new RefusalDesk({ capacity: 1, lingerMs: 60_000 });
  const f = front(desk, 0);
  try {
    const lingering = await f.connect();
    const probe = readsWithin(lingering, 30_000);
    assert.equal(await probe.early, true);
    const next = await f.connect();
    const { text } = await readAll(next);
    next.close();
    assert.equal(text, "");
    assert.deepEqual(desk.stats, { answered: 1, unanswered: 1, failed: 0, inProgress: 1 });
    lingering.close();
    await desk.idle();
    assert.equal(desk.stats.inProgress, 0);
  } finally {
    await f.close();
  }
});
