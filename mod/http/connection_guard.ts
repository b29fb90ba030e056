/**
 * A TCP front for the HTTP server that bounds what a slow or idle client
 * can hold: `Deno.serve` has no header, body or idle deadline and no
 * connection cap (400 connections dribbling headers stayed open for good),
 * so the public port is a `Deno.listen` socket here, and each accepted
 * connection is relayed to the real `Deno.serve` listening on loopback
 * (127.0.0.1, a free port) only once its request head is complete.
 *
 * Per connection:
 * - **one request**: the front appends `connection: close` to the request
 *   head, so `Deno.serve` closes the connection after its response. Every
 *   request's head is then the first bytes of a connection, the only place
 *   the front has to find it (no HTTP parsing past the head). The cost is a
 *   TCP handshake per request.
 * - **header deadline**: the head must be complete within `headerTimeoutMs`
 *   of the connection opening, and at most {@link MAX_HEAD_BYTES}; else 408
 *   or 431, and the connection closes. Until then no inner connection exists.
 * - **body rate**: while the front waits for body bytes, the client must
 *   keep up `bodyMinBytesPerSecond` on average after a grace of
 *   `headerTimeoutMs` (time spent waiting on the server, e.g. while it
 *   authenticates, is not counted). The body phase ends when
 *   `content-length` bytes arrived or the response starts.
 * - **idle**: a response write that the client does not take for
 *   `idleTimeoutMs` (it stopped reading) closes the connection.
 * - **connection cap**: past `maxConnections` open connections, a new one
 *   is answered 503 with `retry-after` and closed at once.
 *
 * HTTP/2 with prior knowledge (h2c) is not relayed: request lines must be
 * HTTP/1.0 or 1.1. The inner server sees 127.0.0.1 as the peer; nothing in
 * this server uses the peer address (clients are identified by API key).
 *
 * @module
 */

import { log } from "../log/mod.ts";

/** The limits of the module documentation (config `[server]`). */
export interface ConnectionLimits {
  /** Time from connect to a complete request head. */
  headerTimeoutMs: number;
  /** Least average body rate after the grace, in bytes per second. */
  bodyMinBytesPerSecond: number;
  /** Longest a response write may wait for a client that does not read. */
  idleTimeoutMs: number;
  /** Most open connections; one more gets 503. */
  maxConnections: number;
}

/** Largest request head accepted (request line and headers). */
export const MAX_HEAD_BYTES = 64 * 1024;

/** Options of {@link ConnectionGuard.start}. */
export interface ConnectionGuardOptions extends ConnectionLimits {
  /** Public interface and port (0 = any free port). */
  hostname: string;
  /** Public port. */
  port: number;
  /** Where `Deno.serve` listens (loopback). */
  target: { hostname: string; port: number };
}

type Phase = "head" | "body" | "response";

interface Connection {
  client: Deno.Conn;
  inner?: Deno.Conn;
  phase: Phase;
  openedAt: number;
  /** Milliseconds spent waiting for client bytes during the body phase. */
  clientWaitMs: number;
  /** When the current read from the client began, if one is pending in the body phase. */
  waitingSince: number | null;
  bodyReceived: number;
  bodyExpected: number;
  /** When the current write to the client began, if one is pending. */
  writingSince: number | null;
  closed: boolean;
}

const LF = 0x0a;
const CR = 0x0d;
const encoder = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/** A complete raw HTTP/1.1 error response with a JSON-RPC error body. */
function rawResponse(status: number, reason: string, message: string, extra = ""): Uint8Array {
  const body = JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null });
  return encoder.encode(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\n` +
      `content-length: ${encoder.encode(body).length}\r\nconnection: close\r\n${extra}\r\n${body}`,
  );
}

/** The end of the head (index after the empty line) and where that empty line starts, or null. */
function findHeadEnd(bytes: Uint8Array, from: number): { end: number; blank: number } | null {
  let i = bytes.indexOf(LF, from);
  while (i !== -1) {
    if (bytes[i + 1] === LF) return { end: i + 2, blank: i + 1 };
    if (bytes[i + 1] === CR && bytes[i + 2] === LF) return { end: i + 3, blank: i + 1 };
    i = bytes.indexOf(LF, i + 1);
  }
  return null;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) written += await conn.write(bytes.subarray(written));
}

/** See the module documentation. */
export class ConnectionGuard {
  /** The public address (port resolved when 0 was asked). */
  readonly addr: Deno.NetAddr;
  readonly #listener: Deno.Listener;
  readonly #options: ConnectionGuardOptions;
  readonly #open = new Set<Connection>();
  readonly #relays = new Set<Promise<void>>();
  readonly #sweeper: ReturnType<typeof setInterval>;
  #accepting = true;
  readonly #acceptLoop: Promise<void>;

  private constructor(listener: Deno.Listener, options: ConnectionGuardOptions) {
    this.#listener = listener;
    this.#options = options;
    this.addr = listener.addr as Deno.NetAddr;
    const tick = Math.max(
      50,
      Math.min(1000, options.headerTimeoutMs / 4, options.idleTimeoutMs / 4),
    );
    this.#sweeper = setInterval(() => this.#sweep(), tick);
    this.#acceptLoop = this.#accept();
  }

  /** Listens on the public address; see {@link ConnectionGuardOptions}. */
  static start(options: ConnectionGuardOptions): ConnectionGuard {
    const listener = Deno.listen({ hostname: options.hostname, port: options.port });
    return new ConnectionGuard(listener, options);
  }

  /** Open client connections. */
  get connections(): number {
    return this.#open.size;
  }

  /**
   * Stops accepting (new connects are refused) and closes connections whose
   * request has not reached the server yet; requests already relayed go on.
   */
  async stopAccepting(): Promise<void> {
    if (!this.#accepting) return;
    this.#accepting = false;
    try {
      this.#listener.close();
    } catch { /* already closed */ }
    await this.#acceptLoop;
    for (const c of this.#open) if (c.phase === "head") this.#close(c);
  }

  /**
   * Stops accepting, lets relays finish passing on what the server already
   * sent (at most `lingerMs`), then closes every connection.
   */
  async close(lingerMs = 3000): Promise<void> {
    await this.stopAccepting();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...this.#relays]),
      new Promise<void>((r) => timer = setTimeout(r, lingerMs)),
    ]);
    clearTimeout(timer);
    clearInterval(this.#sweeper);
    for (const c of this.#open) this.#close(c);
  }

  async #accept(): Promise<void> {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await this.#listener.accept();
      } catch {
        return; // listener closed
      }
      if (this.#open.size >= this.#options.maxConnections) {
        log("warn", "http", "connection refused: too many open connections", {
          open: this.#open.size,
          max: this.#options.maxConnections,
        });
        const refusal = rawResponse(
          503,
          "Service Unavailable",
          `the server has ${this.#open.size} open connections (server.max_connections); retry shortly`,
          "retry-after: 1\r\n",
        );
        writeAll(client, refusal).catch(() => {}).finally(() => {
          try {
            client.close();
          } catch { /* gone */ }
        });
        continue;
      }
      const c: Connection = {
        client,
        phase: "head",
        openedAt: Date.now(),
        clientWaitMs: 0,
        waitingSince: null,
        bodyReceived: 0,
        bodyExpected: 0,
        writingSince: null,
        closed: false,
      };
      this.#open.add(c);
      const relay: Promise<void> = this.#relay(c).catch(() => {}).finally(() => {
        this.#close(c);
        this.#relays.delete(relay);
      });
      this.#relays.add(relay);
    }
  }

  /** Answers `response` (when nothing was sent yet) and closes. */
  #refuse(c: Connection, response: Uint8Array, why: string): void {
    log("warn", "http", `connection closed: ${why}`);
    const client = c.client;
    c.closed = true; // stop the pumps from writing
    this.#open.delete(c);
    try {
      c.inner?.close();
    } catch { /* gone */ }
    writeAll(client, response).catch(() => {}).finally(() => {
      try {
        client.close();
      } catch { /* gone */ }
    });
  }

  #close(c: Connection): void {
    this.#open.delete(c);
    if (c.closed) return;
    c.closed = true;
    for (const conn of [c.client, c.inner]) {
      try {
        conn?.close();
      } catch { /* already closed */ }
    }
  }

  #sweep(): void {
    const now = Date.now();
    const o = this.#options;
    for (const c of this.#open) {
      if (c.phase === "head" && now - c.openedAt > o.headerTimeoutMs) {
        this.#refuse(
          c,
          rawResponse(
            408,
            "Request Timeout",
            `the request head did not arrive within ${o.headerTimeoutMs} ms (server.header_timeout_seconds)`,
          ),
          "request head too slow",
        );
      } else if (c.phase === "body") {
        const waited = c.clientWaitMs + (c.waitingSince === null ? 0 : now - c.waitingSince);
        const owed = ((waited - o.headerTimeoutMs) * o.bodyMinBytesPerSecond) / 1000;
        if (c.bodyReceived < owed) {
          this.#refuse(
            c,
            rawResponse(
              408,
              "Request Timeout",
              `the request body arrives slower than ${o.bodyMinBytesPerSecond} bytes/s (server.body_min_bytes_per_second)`,
            ),
            "request body too slow",
          );
        }
      } else if (c.writingSince !== null && now - c.writingSince > o.idleTimeoutMs) {
        log("warn", "http", "connection closed: the client stopped reading its response", {
          idleTimeoutMs: o.idleTimeoutMs,
        });
        this.#close(c);
      }
    }
  }

  /** 431: the head is over {@link MAX_HEAD_BYTES}, whether or not its end has been read. */
  #refuseHeadTooLarge(c: Connection): void {
    this.#refuse(
      c,
      rawResponse(
        431,
        "Request Header Fields Too Large",
        `the request head is over ${MAX_HEAD_BYTES} bytes`,
      ),
      "request head too large",
    );
  }

  async #relay(c: Connection): Promise<void> {
    const buffer = new Uint8Array(64 * 1024);
    // The head.
    let head: Uint8Array = new Uint8Array(0);
    let found: { end: number; blank: number } | null = null;
    while (!found) {
      const n = await c.client.read(buffer);
      if (n === null || c.closed) return;
      const from = Math.max(0, head.length - 3);
      head = concat(head, buffer.subarray(0, n));
      found = findHeadEnd(head, from);
      if (!found && head.length > MAX_HEAD_BYTES) {
        this.#refuseHeadTooLarge(c);
        return;
      }
    }
    if (found.end > MAX_HEAD_BYTES) {
      this.#refuseHeadTooLarge(c);
      return;
    }
    const text = latin1.decode(head.subarray(0, found.blank));
    const lines = text.split("\n").map((l) => l.replace(/\r$/, ""));
    if (!/^[A-Za-z]+ \S+ HTTP\/1\.[01]$/.test(lines[0])) {
      this.#refuse(
        c,
        rawResponse(400, "Bad Request", "the request line is not HTTP/1.0 or HTTP/1.1"),
        "not an HTTP/1.x request",
      );
      return;
    }
    let expected = 0;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === "content-length" && /^\d+$/.test(value)) expected = Number(value);
      if (name === "transfer-encoding" && /chunked/i.test(value)) expected = Infinity;
    }
    // Relay: the head with `connection: close`, then whatever body came with it.
    try {
      c.inner = await Deno.connect(this.#options.target);
    } catch (error) {
      this.#refuse(
        c,
        rawResponse(503, "Service Unavailable", "the server is shutting down"),
        `inner connect failed: ${(error as Error).message}`,
      );
      return;
    }
    if (c.closed) {
      c.inner.close();
      return;
    }
    const rest = head.subarray(found.end);
    c.bodyExpected = expected;
    c.bodyReceived = rest.length;
    c.phase = c.bodyReceived >= expected ? "response" : "body";
    const down = this.#pumpDown(c);
    const up = (async () => {
      await writeAll(
        c.inner!,
        concat(head.subarray(0, found.blank), encoder.encode("connection: close\r\n")),
      );
      await writeAll(c.inner!, head.subarray(found.blank));
      for (;;) {
        c.waitingSince = c.phase === "body" ? Date.now() : null;
        const n = await c.client.read(buffer);
        if (c.waitingSince !== null) c.clientWaitMs += Date.now() - c.waitingSince;
        c.waitingSince = null;
        if (n === null) {
          // Mirror a half-close, as if the client were connected directly.
          await c.inner!.closeWrite().catch(() => {});
          return;
        }
        c.bodyReceived += n;
        if (c.phase === "body" && c.bodyReceived >= c.bodyExpected) c.phase = "response";
        await writeAll(c.inner!, buffer.subarray(0, n));
      }
    })().catch(() => {});
    await down;
    // The response is complete: FIN after its last byte, then a short linger
    // for the client to close, so unread request bytes cannot turn the close
    // into a reset that discards the response.
    await c.client.closeWrite().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([up, new Promise<void>((r) => timer = setTimeout(r, 2000))]);
    clearTimeout(timer);
  }

  /** Inner → client, until the server closes (after its one response). */
  async #pumpDown(c: Connection): Promise<void> {
    const buffer = new Uint8Array(64 * 1024);
    let interimSeen = false;
    try {
      for (;;) {
        const n = await c.inner!.read(buffer);
        if (n === null || c.closed) return;
        const chunk = buffer.subarray(0, n);
        // An interim "100 Continue" does not end the body phase; the real response does.
        const interim = !interimSeen && latin1.decode(chunk.subarray(0, 13)) === "HTTP/1.1 100 ";
        if (interim) interimSeen = true;
        else c.phase = "response";
        c.writingSince = Date.now();
        await writeAll(c.client, chunk);
        c.writingSince = null;
      }
    } catch {
      // Either side closed; the caller closes both.
    }
  }
}
