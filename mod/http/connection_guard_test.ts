/**
 * The connection guard in front of a real `Deno.serve`, driven over raw TCP
 * so that requests can be dribbled, left unfinished or left unread.
 */

import assert from "node:assert/strict";
import { ConnectionGuard, type ConnectionLimits } from "./connection_guard.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function setup(limits: Partial<ConnectionLimits>, handler?: Deno.ServeHandler) {
  const inner = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    handler ?? (async (request) => {
      const body = await request.text();
      return new Response(`got ${body.length} bytes`);
    }),
  );
  const target = inner.addr as Deno.NetAddr;
  const guard = ConnectionGuard.start({
    headerTimeoutMs: 10_000,
    bodyMinBytesPerSecond: 1,
    idleTimeoutMs: 10_000,
    maxConnections: 100,
    ...limits,
    hostname: "127.0.0.1",
    port: 0,
    target: { hostname: target.hostname, port: target.port },
  });
  return {
    guard,
    port: guard.addr.port,
    async close() {
      await guard.close();
      await inner.shutdown();
    },
  };
}

/** Reads until the peer closes (or `limit` bytes); returns the text. */
async function readAll(conn: Deno.Conn): Promise<string> {
  const buffer = new Uint8Array(65536);
  let text = "";
  for (;;) {
    const n = await conn.read(buffer).catch(() => null);
    if (n === null) return text;
    text += dec.decode(buffer.subarray(0, n));
  }
}

async function until(condition: () => boolean) {
  for (let i = 0; i < 400 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
}

Deno.test("a request passes through the guard, one per connection", async () => {
  const s = setup({});
  try {
    const response = await fetch(`http://127.0.0.1:${s.port}/x`, { method: "POST", body: "hello" });
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "got 5 bytes");
    assert.equal(response.headers.get("connection"), "close");
    // Raw, with the body in a later write and LF-only line ends.
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
    await conn.write(enc.encode("POST /y HTTP/1.1\nhost: a\ncontent-length: 3\n\n"));
    await conn.write(enc.encode("abc"));
    const text = await readAll(conn);
    conn.close();
    assert.match(text, /^HTTP\/1\.1 200 OK/);
    assert.match(text, /got 3 bytes$/);
    await until(() => s.guard.connections === 0);
    assert.equal(s.guard.connections, 0);
  } finally {
    await s.close();
  }
});

Deno.test("50 connections dribbling their headers are answered 408 and closed at the header deadline", async () => {
  const s = setup({ headerTimeoutMs: 300 });
  try {
    const conns = await Promise.all(
      Array.from({ length: 50 }, () => Deno.connect({ hostname: "127.0.0.1", port: s.port })),
    );
    for (const conn of conns) await conn.write(enc.encode("POST /mcp HTTP/1.1\r\nhost: a\r\n"));
    const dribble = setInterval(() => {
      for (const conn of conns) conn.write(enc.encode("x")).catch(() => {});
    }, 50);
    const answers = await Promise.all(conns.map(readAll));
    clearInterval(dribble);
    for (const conn of conns) conn.close();
    for (const text of answers) {
      assert.match(text, /^HTTP\/1\.1 408 Request Timeout/);
      assert.match(text, /server\.header_timeout_seconds/);
    }
    assert.equal(s.guard.connections, 0);
  } finally {
    await s.close();
  }
});

Deno.test("a body slower than the minimum rate is answered 408 after the grace", async () => {
  const s = setup({ headerTimeoutMs: 200, bodyMinBytesPerSecond: 10_000 });
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
    await conn.write(
      enc.encode("POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 100000\r\n\r\n0123456789"),
    );
    const dribble = setInterval(() => conn.write(enc.encode("x")).catch(() => {}), 50);
    const text = await readAll(conn);
    clearInterval(dribble);
    conn.close();
    assert.match(text, /^HTTP\/1\.1 408 Request Timeout/);
    assert.match(text, /slower than 10000 bytes\/s \(server\.body_min_bytes_per_second\)/);
  } finally {
    await s.close();
  }
});

Deno.test("past max_connections a new connection gets 503 with retry-after; freed slots are reused", async () => {
  const s = setup({ maxConnections: 3 });
  try {
    const held = await Promise.all(
      Array.from({ length: 3 }, () => Deno.connect({ hostname: "127.0.0.1", port: s.port })),
    );
    await until(() => s.guard.connections === 3);
    const extra = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
    const text = await readAll(extra);
    extra.close();
    assert.match(text, /^HTTP\/1\.1 503 Service Unavailable/);
    assert.match(text, /retry-after: 1/);
    assert.match(text, /server\.max_connections/);
    held[0].close();
    await until(() => s.guard.connections === 2);
    const response = await fetch(`http://127.0.0.1:${s.port}/`, { method: "POST", body: "" });
    assert.equal(response.status, 200);
    await response.body?.cancel();
    for (const conn of held.slice(1)) conn.close();
  } finally {
    await s.close();
  }
});

Deno.test("a client that stops reading its response is disconnected after the idle deadline", async () => {
  const big = new Uint8Array(64 * 1024 * 1024);
  const s = setup({ idleTimeoutMs: 300 }, () => new Response(big));
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
    await conn.write(enc.encode("GET / HTTP/1.1\r\nhost: a\r\n\r\n"));
    await until(() => s.guard.connections === 0);
    assert.equal(s.guard.connections, 0, "the unread connection is still open");
    conn.close();
  } finally {
    await s.close();
  }
});

Deno.test("a request line that is not HTTP/1.x (h2c prior knowledge) gets 400", async () => {
  const s = setup({});
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
    await conn.write(enc.encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    const text = await readAll(conn);
    conn.close();
    assert.match(text, /^HTTP\/1\.1 400 Bad Request/);
  } finally {
    await s.close();
  }
});

Deno.test("closing the guard mid-response still delivers the whole response", async () => {
  let sent = 0;
  const s = setup({}, () => {
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await new Promise((r) => setTimeout(r, 50));
        controller.enqueue(enc.encode(`event ${sent}\n`));
        if (++sent === 10) controller.close();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  const response = await fetch(`http://127.0.0.1:${s.port}/`, { method: "POST", body: "{}" });
  const reading = response.text();
  await until(() => sent >= 2);
  // Closing waits (bounded) for running relays to pass on what the server still sends.
  await s.guard.stopAccepting();
  await s.close();
  const text = await reading;
  assert.equal(text.split("\n").filter((l) => l.startsWith("event")).length, 10);
});
