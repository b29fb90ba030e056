/**
 * The connection guard in front of a real `Deno.serve`, driven over raw TCP
 * so that requests can be dribbled, left unfinished or left unread.
 */

import assert from "node:assert/strict";
import type net from "node:net";
import {
  openFrom,
  parseResponse,
  readToEnd,
  requestFrom,
} from "../../tests/helpers/from_address.ts";
import type { AddressRange } from "./client_address.ts";
import { ConnectionGuard, type ConnectionLimits } from "./connection_guard.ts";
import { CLIENT_ADDRESS_HEADER } from "./request_head.ts";
import { DEFAULT_CONNECTION_LIMITS } from "./guarded_serve.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function setup(
  limits: Partial<ConnectionLimits>,
  handler?: Deno.ServeHandler,
  proxies: { trustedProxies?: AddressRange[]; forwardedHeader?: "forwarded" } = {},
) {
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
    maxConnectionsPerClient: 100,
    clientConnectionsPerSecond: 1000,
    maxPendingHeads: 100,
    ...limits,
    ...proxies,
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
    // The client's own connection header does not reach the server beside the guard's.
    const seen = await fetch(`http://127.0.0.1:${s.port}/x`, {
      method: "POST",
      body: "hello",
      headers: { connection: "keep-alive" },
    });
    assert.equal(await seen.text(), "got 5 bytes");
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
    assert.match(text, /slower than 10000 bytes\/s \(server\.body_min_bytes_per_second = 10000\)/);
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
    await extra.write(enc.encode("POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"));
    const text = await readAll(extra);
    extra.close();
    assert.match(text, /^HTTP\/1\.1 503 Service Unavailable/);
    assert.match(text, /retry-after: 1/);
    assert.match(text, /server\.max_connections = 3/);
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

/** The server's view of a request: the client address header and any connection header. */
const echo: Deno.ServeHandler = (request) =>
  Response.json({
    address: request.headers.get(CLIENT_ADDRESS_HEADER),
    connection: request.headers.get("connection"),
  });

/** Opens `count` connections from `from` that send nothing; rejects nothing (refused ones end). */
async function idle(from: string, port: number, count: number): Promise<net.Socket[]> {
  const out: net.Socket[] = [];
  for (let i = 0; i < count; i++) out.push(await openFrom(from, port));
  return out;
}

Deno.test("the server is told the TCP peer's address; a client's own copy of the header is dropped", async () => {
  const s = setup({}, echo);
  try {
    const r = await requestFrom("127.0.0.7", s.port, {
      method: "GET",
      path: "/",
      headers: {
        [CLIENT_ADDRESS_HEADER]: "6.6.6.6",
        "X-SD15-Client-Address": "7.7.7.7",
        "x-forwarded-for": "8.8.8.8",
        connection: "keep-alive, x-foo",
      },
    });
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { address: "127.0.0.7", connection: "close" });
  } finally {
    await s.close();
  }
});

Deno.test("one address holds at most max_connections_per_client; another address still gets in", async () => {
  const s = setup({ maxConnectionsPerClient: 5 }, echo);
  const held = await idle("127.0.0.2", s.port, 5);
  try {
    await until(() => s.guard.connectionsOf("127.0.0.2") === 5);
    const refused = await requestFrom("127.0.0.2", s.port, { method: "GET", path: "/" });
    assert.equal(refused.status, 429);
    assert.ok(refused.headers.some(([k, v]) => k === "retry-after" && v === "1"));
    assert.match(refused.body, /has 5 open connections.*server\.max_connections_per_client/);
    const other = await requestFrom("127.0.0.3", s.port, { method: "GET", path: "/" });
    assert.equal(other.status, 200);
    assert.equal(JSON.parse(other.body).address, "127.0.0.3");
  } finally {
    for (const socket of held) socket.destroy();
    await s.close();
  }
});

Deno.test("an address that connects faster than client_connections_per_second is refused past its burst", async () => {
  const s = setup({ clientConnectionsPerSecond: 5 }, echo);
  try {
    // The bucket holds twice the rate; the 11th connect within a moment is refused.
    const statuses: number[] = [];
    for (let i = 0; i < 14; i++) {
      statuses.push((await requestFrom("127.0.0.4", s.port, { method: "GET", path: "/" })).status);
    }
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(200));
    assert.ok(statuses.slice(10).includes(429), statuses.join(","));
    const r = await requestFrom("127.0.0.4", s.port, { method: "GET", path: "/" });
    if (r.status === 429) assert.match(r.body, /server\.client_connections_per_second/);
    assert.equal(
      (await requestFrom("127.0.0.5", s.port, { method: "GET", path: "/" })).status,
      200,
      "another address is not slowed",
    );
  } finally {
    await s.close();
  }
});

Deno.test("past max_pending_heads with every address within its share, a new connection closes the oldest one still without a head", async () => {
  const s = setup({ maxPendingHeads: 4 }, echo);
  const held: net.Socket[] = [];
  try {
    for (let i = 0; i < 4; i++) held.push(...await idle(`127.0.1.${i + 1}`, s.port, 1));
    // The oldest has sent part of its head.
    held[0].write("GET / HTTP/1.1\r\nhost: a\r\n");
    await until(() => s.guard.pendingHeads === 4);
    const oldest = readToEnd(held[0]);
    const r = await requestFrom("127.0.2.1", s.port, { method: "GET", path: "/" });
    assert.equal(r.status, 200, "the new client is served");
    assert.equal(s.guard.pendingHeads, 3);
    // Closed for the new one: answered once its head has ended, as a client reads best.
    await until(() => s.guard.refusals.inProgress === 1);
    held[0].write("\r\n");
    const evicted = parseResponse(await oldest);
    assert.equal(evicted.status, 503);
    assert.ok(evicted.headers.some(([k, v]) => k === "retry-after" && v === "1"));
    assert.match(evicted.body, /server\.max_pending_heads = 4/);
    assert.equal(JSON.parse(evicted.body).error.data.limit, "server.max_pending_heads");
  } finally {
    for (const socket of held) socket.destroy();
    await s.close();
  }
});

Deno.test("pending heads full of one address: another address gets in, taking the flood's oldest; the flood's next connection reads 503 at once, its head unread", async () => {
  const s = setup({ maxPendingHeads: 8 }, echo);
  const held: net.Socket[] = [];
  try {
    held.push(...await idle("127.0.3.1", s.port, 8));
    await until(() => s.guard.pendingHeads === 8);
    const oldest = readToEnd(held[0]);
    const r = await requestFrom("127.0.3.2", s.port, { method: "GET", path: "/" });
    assert.equal(r.status, 200, "the client that sends little is served");
    assert.equal(JSON.parse(r.body).address, "127.0.3.2");
    // The flood's oldest was closed for it, answered once its head ends.
    await until(() => s.guard.refusals.inProgress === 1);
    held[0].write("GET / HTTP/1.1\r\nhost: a\r\n\r\n");
    const evicted = parseResponse(await oldest);
    assert.equal(evicted.status, 503);
    assert.match(
      evicted.body,
      /server\.max_pending_heads = 8\); this one was closed: its client held the most of them \(8\)/,
    );
    // The flood fills the budget again: with all 8 of 8 waiting heads it holds its share (8 / 1),
    // so its next connection is answered before it sends a byte: no head of it is ever read.
    held.push(...await idle("127.0.3.1", s.port, 1));
    await until(() => s.guard.pendingHeads === 8);
    const next = await openFrom("127.0.3.1", s.port);
    held.push(next);
    const early = parseResponse(await readToEnd(next, 5_000));
    assert.equal(early.status, 503);
    assert.ok(early.headers.some(([k, v]) => k === "retry-after" && v === "1"));
    const error = JSON.parse(early.body).error;
    assert.equal(error.data.limit, "server.max_pending_heads");
    assert.match(
      error.message,
      /this client holds 8, at least its share \(8 for 1 client\)/,
    );
    assert.equal(s.guard.pendingHeads, 8, "the refused connection never waited for its head");
  } finally {
    for (const socket of held) socket.destroy();
    await s.close();
  }
});

Deno.test("pending heads full of 20 flooding addresses: a 21st address always gets in, one within its share is never closed", async () => {
  const s = setup({ maxPendingHeads: 40 }, echo);
  const held: net.Socket[] = [];
  try {
    // The victim's connection waits with the flood, within its share (40 / 21 → the floor, 4).
    const victim = await openFrom("127.0.4.100", s.port);
    held.push(victim);
    const victimRead = readToEnd(victim, 5_000);
    await until(() => s.guard.pendingHeads === 1);
    // 20 addresses, 3 each (all within their share: 4), then 3 more from the first five.
    for (let i = 0; i < 20; i++) held.push(...await idle(`127.0.4.${i + 1}`, s.port, 2));
    await until(() => s.guard.pendingHeads === 41 - 1);
    const before = s.guard.refusals.inProgress;
    for (let i = 0; i < 5; i++) held.push(...await idle(`127.0.4.${i + 1}`, s.port, 3));
    await until(() => s.guard.refusals.inProgress >= before + 15);
    assert.equal(s.guard.pendingHeads, 40);
    // Each flooder's extra connection took an equal's slot or was refused: never the victim's.
    for (let round = 0; round < 3; round++) {
      const r = await requestFrom("127.0.4.200", s.port, { method: "GET", path: "/" });
      assert.equal(r.status, 200, `round ${round}`);
    }
    victim.write("GET / HTTP/1.1\r\nhost: a\r\n\r\n");
    const answer = parseResponse(await victimRead);
    assert.equal(answer.status, 200, "the victim's waiting connection was not closed");
    assert.equal(JSON.parse(answer.body).address, "127.0.4.100");
  } finally {
    for (const socket of held) socket.destroy();
    await s.close();
  }
});

Deno.test("open connections full of one address: another address gets in by closing one of the flood's still sending its head, not one being served", async () => {
  const h = held();
  const s = setup(
    { maxConnections: 6, maxConnectionsPerClient: 100, maxPendingHeads: 6 },
    h.handler,
  );
  const sockets: net.Socket[] = [];
  try {
    // Four of the flood's requests are being served (held), two of its connections wait for heads.
    const served = Array.from(
      { length: 4 },
      () => requestFrom("127.0.5.1", s.port, { method: "POST", path: "/", body: "x" }),
    );
    await until(() => s.guard.connections === 4 && s.guard.pendingHeads === 0);
    sockets.push(...await idle("127.0.5.1", s.port, 2));
    await until(() => s.guard.connections === 6);
    const firstIdle = readToEnd(sockets[0], 5_000);
    const victim = requestFrom("127.0.5.2", s.port, { method: "POST", path: "/", body: "y" });
    await until(() => s.guard.refusals.inProgress === 1);
    sockets[0].write("GET / HTTP/1.1\r\nhost: a\r\n\r\n");
    const evicted = parseResponse(await firstIdle);
    assert.equal(evicted.status, 503);
    assert.equal(JSON.parse(evicted.body).error.data.limit, "server.max_connections");
    // The flood holds 5 of 6, over its share (6 / 2 = 3, raised to the floor of 4): its next
    // is refused at once.
    const early = parseResponse(await readToEnd(await openFrom("127.0.5.1", s.port), 5_000));
    assert.equal(early.status, 503);
    assert.match(
      early.body,
      /server\.max_connections = 6\); this client holds 5, at least its share \(4 for 2 clients\)/,
    );
    h.release();
    assert.equal((await victim).status, 200);
    for (const r of await Promise.all(served)) assert.equal(r.status, 200, "no response was cut");
  } finally {
    h.release();
    for (const socket of sockets) socket.destroy();
    await s.close();
  }
});

Deno.test("behind a trusted proxy the client is the first untrusted address from the right of X-Forwarded-For", async () => {
  const trustedProxies = [{ address: "127.0.0.1", prefixLength: 32 }, {
    address: "10.0.0.0",
    prefixLength: 8,
  }];
  const s = setup({ maxConnectionsPerClient: 2 }, async (request) => {
    await new Promise((r) => setTimeout(r, request.headers.get("x-slow") ? 500 : 0));
    return echo(request, undefined as unknown as Deno.ServeHandlerInfo);
  }, { trustedProxies });
  try {
    const via = (xff: string, headers: Record<string, string> = {}) =>
      requestFrom("127.0.0.1", s.port, {
        method: "GET",
        path: "/",
        headers: { "x-forwarded-for": xff, ...headers },
      });
    const cases: Array<[string, string]> = [
      ["203.0.113.9", "203.0.113.9"],
      ["6.6.6.6, 203.0.113.9, 10.1.2.3", "203.0.113.9"], // the forged 6.6.6.6 is left of it
      ["[2001:db8::1]:443", "2001:db8::1"],
      ["unknown, 10.0.0.5", "10.0.0.5"], // not an address: the walk stops at the last trusted
      ["", "127.0.0.1"], // no usable entry: the proxy itself
    ];
    for (const [xff, client] of cases) {
      const r = await via(xff);
      assert.equal(r.status, 200, xff);
      assert.equal(JSON.parse(r.body).address, client, xff);
    }
    // The named client's share counts, not the proxy's: two slow requests of 198.51.100.1 are
    // its whole share; a third is refused while 198.51.100.2 passes.
    const slow = [via("198.51.100.1", { "x-slow": "1" }), via("198.51.100.1", { "x-slow": "1" })];
    await until(() => s.guard.connectionsOf("198.51.100.1") === 2);
    assert.equal((await via("198.51.100.1")).status, 429);
    assert.equal((await via("198.51.100.2")).status, 200);
    for (const r of await Promise.all(slow)) assert.equal(r.status, 200);
    // A peer that is not a trusted proxy cannot name a client.
    const direct = await requestFrom("127.0.0.9", s.port, {
      method: "GET",
      path: "/",
      headers: { "x-forwarded-for": "203.0.113.9" },
    });
    assert.equal(JSON.parse(direct.body).address, "127.0.0.9");
  } finally {
    await s.close();
  }
});

Deno.test("Forwarded (RFC 7239) names the client when configured", async () => {
  const s = setup({}, echo, {
    trustedProxies: [{ address: "127.0.0.1", prefixLength: 32 }],
    forwardedHeader: "forwarded",
  });
  try {
    const r = await requestFrom("127.0.0.1", s.port, {
      method: "GET",
      path: "/",
      headers: {
        forwarded: 'for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"',
        "x-forwarded-for": "6.6.6.6",
      },
    });
    assert.equal(JSON.parse(r.body).address, "2001:db8:cafe::17");
  } finally {
    await s.close();
  }
});

Deno.test("a folded header line is refused", async () => {
  const s = setup({}, echo);
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
    await conn.write(
      enc.encode(
        `GET / HTTP/1.1\r\nhost: a\r\nx-a: b\r\n ${CLIENT_ADDRESS_HEADER}: 1.2.3.4\r\n\r\n`,
      ),
    );
    const text = await readAll(conn);
    conn.close();
    assert.match(text, /^HTTP\/1\.1 400 Bad Request/);
    assert.match(text, /folded/);
  } finally {
    await s.close();
  }
});

/** Waits (up to 60 s) until `condition` holds. */
async function eventually(condition: () => boolean) {
  for (let i = 0; i < 6000 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
}

/** A handler that holds every request until `release()`: admitted connections stay open. */
function held() {
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  return {
    release,
    handler: async (request: Request) => {
      await request.text();
      await gate;
      return new Response("served");
    },
  };
}

/** One raw request on a new connection: what came back, as {@link parseResponse} reads it. */
async function rawRequest(port: number): Promise<{ status: number; head: string; body: string }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(enc.encode("POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"));
    const text = await readAll(conn);
    const end = text.indexOf("\r\n\r\n");
    const head = end === -1 ? text : text.slice(0, end);
    return {
      status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1] ?? 0),
      head,
      body: end === -1 ? "" : text.slice(end + 4),
    };
  } finally {
    conn.close();
  }
}

/** Asserts a refusal: `status`, `retry-after` of whole seconds, a JSON-RPC error naming `limits`. */
function assertRefusal(
  status: number,
  retryAfter: string | null,
  body: string,
  expected: number,
  limits: Record<string, number>,
) {
  assert.equal(status, expected, body);
  assert.match(retryAfter ?? "", /^[1-9]\d*$/, `retry-after: ${retryAfter}`);
  const error = JSON.parse(body).error;
  assert.equal(error.code, -32000);
  assert.ok(error.data.limit in limits, error.data.limit);
  assert.equal(error.data.value, limits[error.data.limit]);
  assert.equal(String(error.data.retry_after_seconds), retryAfter);
  assert.ok(
    error.message.includes(`${error.data.limit} = ${error.data.value}`),
    `the message names the setting and its value: ${error.message}`,
  );
}

const PER_CLIENT = {
  "server.max_connections_per_client": DEFAULT_CONNECTION_LIMITS.maxConnectionsPerClient,
  "server.client_connections_per_second": DEFAULT_CONNECTION_LIMITS.clientConnectionsPerSecond,
};

Deno.test("300 fetches at once from one client: 32 served, every other one reads 429 with retry-after", async () => {
  const h = held();
  const s = setup(DEFAULT_CONNECTION_LIMITS, h.handler);
  try {
    const url = `http://127.0.0.1:${s.port}/mcp`;
    const outcomes = Array.from(
      { length: 300 },
      () =>
        fetch(url, { method: "POST", body: "{}" }).then(async (r) => ({
          status: r.status,
          retryAfter: r.headers.get("retry-after"),
          body: await r.text(),
        }), (error) => ({ status: 0, retryAfter: null, body: String(error?.cause ?? error) })),
    );
    // The admitted ones are held until every refusal has been answered.
    await eventually(() => s.guard.connections + s.guard.refusals.answered >= 300);
    h.release();
    const results = await Promise.all(outcomes);
    const served = results.filter((r) => r.status === 200);
    assert.equal(served.length, DEFAULT_CONNECTION_LIMITS.maxConnectionsPerClient);
    for (const r of results.filter((r) => r.status !== 200)) {
      assertRefusal(r.status, r.retryAfter, r.body, 429, PER_CLIENT);
    }
    assert.deepEqual(s.guard.refusals, { answered: 268, unanswered: 0, failed: 0, inProgress: 0 });
  } finally {
    h.release();
    await s.close();
  }
});

Deno.test("300 raw TCP requests at once from one client: 32 served, every other one reads 429 with retry-after", async () => {
  const h = held();
  const s = setup(DEFAULT_CONNECTION_LIMITS, h.handler);
  try {
    const outcomes = Array.from({ length: 300 }, () => rawRequest(s.port));
    await eventually(() => s.guard.connections + s.guard.refusals.answered >= 300);
    h.release();
    const results = await Promise.all(outcomes);
    assert.equal(results.filter((r) => r.status === 200).length, 32);
    for (const r of results.filter((r) => r.status !== 200)) {
      const retryAfter = /\r\nretry-after: (\S+)/.exec(r.head)?.[1] ?? null;
      assertRefusal(r.status, retryAfter, r.body, 429, PER_CLIENT);
    }
  } finally {
    h.release();
    await s.close();
  }
});

Deno.test("300 at once past max_connections: every connection over it reads 503 with retry-after", async () => {
  const h = held();
  const s = setup(
    { maxConnections: 200, maxConnectionsPerClient: 1000, maxPendingHeads: 200 },
    h.handler,
  );
  try {
    const outcomes = Array.from({ length: 300 }, () => rawRequest(s.port));
    await eventually(() => s.guard.connections + s.guard.refusals.answered >= 300);
    h.release();
    const results = await Promise.all(outcomes);
    assert.equal(results.filter((r) => r.status === 200).length, 200);
    const refused = results.filter((r) => r.status !== 200);
    assert.equal(refused.length, 100);
    for (const r of refused) {
      const retryAfter = /\r\nretry-after: (\S+)/.exec(r.head)?.[1] ?? null;
      assertRefusal(r.status, retryAfter, r.body, 503, { "server.max_connections": 200 });
    }
  } finally {
    h.release();
    await s.close();
  }
});

Deno.test("100 connections at once from one address past max_pending_heads: 8 served, every other one reads 503 with retry-after", async () => {
  const s = setup({ maxPendingHeads: 8 }, echo);
  try {
    const conns = await Promise.all(
      Array.from({ length: 100 }, () => Deno.connect({ hostname: "127.0.0.1", port: s.port })),
    );
    await eventually(() => s.guard.pendingHeads + s.guard.refusals.inProgress >= 100);
    const results = await Promise.all(conns.map(async (conn) => {
      await conn.write(enc.encode("GET / HTTP/1.1\r\nhost: a\r\n\r\n"));
      const text = await readAll(conn);
      conn.close();
      return text;
    }));
    assert.equal(results.filter((t) => /^HTTP\/1\.1 200 /.test(t)).length, 8);
    const refused = results.filter((t) => !/^HTTP\/1\.1 200 /.test(t));
    for (const text of refused) {
      const [head, body] = text.split("\r\n\r\n");
      const retryAfter = /\r\nretry-after: (\S+)/.exec(head)?.[1] ?? null;
      assertRefusal(
        Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
        retryAfter,
        body,
        503,
        { "server.max_pending_heads": 8 },
      );
    }
  } finally {
    await s.close();
  }
});

Deno.test("past the refusals it may answer at once, the guard closes the rest unread and counts each", async () => {
  const h = held();
  // 280 refusals at once, at most 20 answered at a time.
  const s = setup({ maxConnections: 20, maxConnectionsPerClient: 1000 }, h.handler);
  try {
    const outcomes = Array.from({ length: 300 }, () => rawRequest(s.port));
    await eventually(() => {
      const r = s.guard.refusals;
      return s.guard.connections + r.answered + r.unanswered + r.failed >= 300;
    });
    h.release();
    const results = await Promise.all(outcomes);
    const stats = s.guard.refusals;
    const unread = results.filter((r) => r.status === 0).length;
    const refused = results.filter((r) => r.status === 503);
    assert.equal(results.filter((r) => r.status === 200).length, 20);
    assert.equal(unread + refused.length, 280);
    assert.equal(unread, stats.unanswered, JSON.stringify(stats));
    assert.equal(refused.length, stats.answered);
    for (const r of refused) assert.match(r.head, /\r\nretry-after: 1/);
  } finally {
    h.release();
    await s.close();
  }
});

Deno.test("a client over its connect rate is told in retry-after when its next connection is allowed", async () => {
  const s = setup({ clientConnectionsPerSecond: 0.5 }, echo);
  try {
    assert.equal(
      (await requestFrom("127.0.0.6", s.port, { method: "GET", path: "/" })).status,
      200,
    );
    const r = await requestFrom("127.0.0.6", s.port, { method: "GET", path: "/" });
    assert.equal(r.status, 429);
    // One connection per 2 s: the bucket (twice the rate, at least 1) is empty for up to 2 s.
    const retryAfter = Number(r.headers.find(([k]) => k === "retry-after")?.[1]);
    assert.ok(retryAfter === 1 || retryAfter === 2, `retry-after ${retryAfter}`);
    const error = JSON.parse(r.body).error;
    assert.equal(error.data.limit, "server.client_connections_per_second");
    assert.equal(error.data.value, 0.5);
    assert.match(error.message, new RegExp(`retry in ${retryAfter} s$`));
  } finally {
    await s.close();
  }
});
