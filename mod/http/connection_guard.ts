/**
 * A TCP front for the HTTP server that bounds what a slow, idle or greedy
 * client can hold: `Deno.serve` has no header, body or idle deadline and no
 * connection cap (400 connections dribbling headers stayed open for good),
 * so the public port is a `Deno.listen` socket here, and each accepted
 * connection is relayed to the real `Deno.serve` only once its request
 * head is complete. That server listens on a Unix socket in a private
 * directory (`server.ts`), so no local process can reach it past these
 * limits.
 *
 * Per connection:
 * - **one request**: the front replaces the request's `connection` header
 *   with `connection: close`, so `Deno.serve` closes the connection after
 *   its response. Every request's head is then the first bytes of a
 *   connection, the only place the front has to find it (no HTTP parsing
 *   past the head). The cost is a TCP handshake per request.
 * - **client address**: the head reaches the server with
 *   `CLIENT_ADDRESS_HEADER` (request_head.ts) set to the client's address (any such
 *   header the client sent is removed): the TCP peer, or the address a
 *   trusted proxy names (`client_address.ts`).
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
 *
 * Across connections:
 * - **connection cap**: past `maxConnections` open connections, a new one
 *   is refused with 503.
 * - **per-client share**: one client (an IPv4 address or IPv6 /64) may hold
 *   at most `maxConnectionsPerClient` of them and open at most
 *   `clientConnectionsPerSecond` a second (bursts of twice that); beyond,
 *   429 (`peer_limits.ts`). A connection from a trusted proxy is counted
 *   for the client it names, once its head names it.
 * - **heads**: at most `maxPendingHeads` connections may be waiting for
 *   their request head.
 * - **fair shares**: when either global budget (`maxConnections`,
 *   `maxPendingHeads`) is full, the connection that gives way is taken from
 *   the client address holding the most of it, never from one within its
 *   share while another holds more (`fair_share.ts`): a client that sends
 *   little is not pushed out by a flood, from one address or from many. A
 *   newcomer whose address already holds its share is refused at once
 *   without reading its head (503, written straight away, then the
 *   connection is drained briefly and closed), so refusing a flood costs
 *   little; when every address is within its share the oldest waiting head
 *   of the largest holders is closed, so that connections which send
 *   nothing, from however many addresses, cannot keep a new client out: its
 *   head arrives long before it is the oldest.
 *
 * A refused connection is never just closed: `refusal.ts` answers it (after
 * its request head, so that the client reads the answer, except for the
 * over-share refusal above) with the status, `retry-after` where waiting
 * helps, and a JSON-RPC error naming the setting and its value, at most
 * `maxConnections` answers at a time.
 * Refusals are logged once, then at most every 10 s per reason with how
 * many were left out, so that a flood does not flood the log.
 *
 * HTTP/2 with prior knowledge (h2c) is not relayed: request lines must be
 * HTTP/1.0 or 1.1, and headers may not be folded (obs-fold).
 *
 * @module
 */

import { concatBytes } from "../bytes/mod.ts";
import { log } from "../log/mod.ts";
import {
  type AddressRange,
  AddressSet,
  clientAddress,
  clientKey,
  type ForwardedHeader,
} from "./client_address.ts";
import { type FairDecision, FairShare } from "./fair_share.ts";
import { PeerLimits } from "./peer_limits.ts";
import { bodyLength, forwardedHead, parseRequestHead } from "./request_head.ts";
import {
  findHeadEnd,
  type LateBytes,
  LINGER_MS,
  MAX_HEAD_BYTES,
  type Refusal,
  RefusalDesk,
  RefusalLog,
  refusalResponse,
  type RefusalStats,
  writeAll,
} from "./refusal.ts";

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
  /** Most open connections of one client; one more gets 429. */
  maxConnectionsPerClient: number;
  /** New connections one client may open per second (bursts of twice that); more get 429. */
  clientConnectionsPerSecond: number;
  /** Most connections waiting for their request head; one more closes the oldest. */
  maxPendingHeads: number;
}

export { MAX_HEAD_BYTES };

/** Options of {@link ConnectionGuard.start}. */
export interface ConnectionGuardOptions extends ConnectionLimits {
  /** Public interface and port (0 = any free port). */
  hostname: string;
  /** Public port. */
  port: number;
  /** Where `Deno.serve` listens: a Unix socket, or loopback TCP where there are none. */
  target: Deno.UnixConnectOptions | (Deno.ConnectOptions & { transport?: "tcp" });
  /** Proxies whose client address header is believed (none: the TCP peer is the client). */
  trustedProxies?: readonly AddressRange[];
  /** The header trusted proxies name the client in (default `x-forwarded-for`). */
  forwardedHeader?: ForwardedHeader;
  /**
   * Most refused connections being answered at once (`refusal.ts`); past
   * it a refused connection is closed unanswered. Default `maxConnections`.
   */
  maxAnswering?: number;
}

type Phase = "head" | "body" | "response";

interface Connection {
  client: Deno.Conn;
  inner?: Deno.Conn;
  /** The TCP peer's address. */
  peer: string;
  /** Whether the peer is a trusted proxy (the client is named in the head). */
  proxied: boolean;
  /** The request head read so far (head phase). */
  head: Uint8Array;
  /** Refused while its head was being read: where the relay's last read goes. */
  late: LateBytes | null;
  /** The client key counted in the per-client limits, once counted. */
  key: string | null;
  /**
   * The address the connection counts for in the global budgets' fair
   * shares: the TCP peer's key, then for a proxy's connection the client
   * its head names.
   */
  holder: string;
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

/** Reads the status line of a response (an interim 100 is passed on, not the end of the response). */
const latin1 = new TextDecoder("latin1");

/** Which of an address's connections gives way first: still sending its head, then its body, then being answered. */
const PHASE_RANK: Record<Phase, number> = { head: 0, body: 1, response: 2 };

/** See the module documentation. */
export class ConnectionGuard {
  /** The public address (port resolved when 0 was asked). */
  readonly addr: Deno.NetAddr;
  readonly #listener: Deno.Listener;
  readonly #options: ConnectionGuardOptions;
  readonly #open = new Set<Connection>();
  /** {@link #open} by address, for the `maxConnections` budget's fair shares. */
  readonly #openShare: FairShare<Connection>;
  /** Connections still waiting for their head, by address, oldest first. */
  readonly #heads: FairShare<Connection>;
  readonly #peers: PeerLimits;
  readonly #trusted: AddressSet;
  readonly #forwardedHeader: ForwardedHeader;
  readonly #refusals = new RefusalLog();
  readonly #desk: RefusalDesk;
  readonly #relays = new Set<Promise<void>>();
  readonly #sweeper: ReturnType<typeof setInterval>;
  #accepting = true;
  readonly #acceptLoop: Promise<void>;

  private constructor(listener: Deno.Listener, options: ConnectionGuardOptions) {
    this.#listener = listener;
    this.#options = options;
    this.addr = listener.addr as Deno.NetAddr;
    this.#peers = new PeerLimits({
      maxOpen: options.maxConnectionsPerClient,
      ratePerSecond: options.clientConnectionsPerSecond,
      burst: Math.max(1, 2 * options.clientConnectionsPerSecond),
    });
    this.#openShare = new FairShare({
      budget: options.maxConnections,
      evictWithinShare: false,
      rank: (c) => PHASE_RANK[c.phase],
    });
    this.#heads = new FairShare({ budget: options.maxPendingHeads, evictWithinShare: true });
    this.#trusted = new AddressSet(options.trustedProxies ?? []);
    this.#forwardedHeader = options.forwardedHeader ?? "x-forwarded-for";
    const capacity = options.maxAnswering ?? options.maxConnections;
    this.#desk = new RefusalDesk({
      capacity,
      onUnanswered: () =>
        this.#refusals.note(
          `closed unanswered: ${capacity} refusals were being answered (server.max_connections)`,
          { answering: capacity },
        ),
    });
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

  /** Open connections still waiting for their request head. */
  get pendingHeads(): number {
    return this.#heads.size;
  }

  /** How many refusals were answered, closed unanswered, or are being answered now. */
  get refusals(): RefusalStats {
    return this.#desk.stats;
  }

  /** Open connections counted for the client with address `address`. */
  connectionsOf(address: string): number {
    return this.#peers.open(clientKey(address));
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
    for (const c of this.#open) {
      if (c.phase !== "head") continue;
      this.#refuse(
        c,
        {
          status: 503,
          message: "the server is shutting down; retry shortly (another replica may answer)",
          retryAfterSeconds: 1,
        },
        null,
        LINGER_MS,
      );
    }
  }

  /**
   * Stops accepting, lets relays finish passing on what the server already
   * sent (at most `lingerMs`), then closes every connection.
   */
  async close(lingerMs = 3000): Promise<void> {
    await this.stopAccepting();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...this.#relays, this.#desk.idle()]),
      new Promise<void>((r) => timer = setTimeout(r, lingerMs)),
    ]);
    clearTimeout(timer);
    clearInterval(this.#sweeper);
    for (const c of this.#open) this.#close(c);
    this.#desk.close();
  }

  /**
   * Counts a connection of client `address` in the per-client limits; on
   * refusal returns the 429 answer to send.
   */
  #admitClient(address: string): Refusal | null {
    const key = clientKey(address);
    const refusal = this.#peers.admit(key);
    if (refusal === null) return null;
    const o = this.#options;
    if (refusal === "rate") {
      const rate = o.clientConnectionsPerSecond;
      const wait = Math.max(1, Math.ceil(this.#peers.nextTokenMs(key) / 1000));
      this.#refusals.note("a client connects too fast", { client: key, perSecond: rate });
      return {
        status: 429,
        message: `this client opens connections faster than ${rate} a second, in bursts of at ` +
          `most ${this.#peers.burst} (server.client_connections_per_second = ${rate}); ` +
          `retry in ${wait} s`,
        limit: { setting: "server.client_connections_per_second", value: rate },
        retryAfterSeconds: wait,
      };
    }
    const max = o.maxConnectionsPerClient;
    this.#refusals.note("a client has too many open connections", { client: key, max });
    return {
      status: 429,
      message: `this client has ${this.#peers.open(key)} open connections, the most allowed ` +
        `(server.max_connections_per_client = ${max}); retry when one has finished`,
      limit: { setting: "server.max_connections_per_client", value: max },
      retryAfterSeconds: 1,
    };
  }

  async #accept(): Promise<void> {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await this.#listener.accept();
      } catch {
        return; // listener closed
      }
      const o = this.#options;
      const peer = (client.remoteAddr as Deno.NetAddr).hostname;
      const proxied = !this.#trusted.empty && this.#trusted.has(peer);
      const holder = clientKey(peer);
      // A proxy's connections are counted for the client its head names, once it is read.
      if (!proxied) {
        const refusal = this.#admitClient(peer);
        if (refusal) {
          this.#desk.answer(client, refusalResponse(refusal), { waitForHeadMs: o.headerTimeoutMs });
          continue;
        }
      }
      if (!this.#makeRoom(client, holder, this.#openShare, "connections")) {
        if (!proxied) this.#peers.release(holder);
        continue;
      }
      if (!this.#makeRoom(client, holder, this.#heads, "heads")) {
        if (!proxied) this.#peers.release(holder);
        continue;
      }
      const c: Connection = {
        client,
        peer,
        proxied,
        head: new Uint8Array(0),
        late: null,
        key: proxied ? null : holder,
        holder,
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
      this.#openShare.add(holder, c);
      this.#heads.add(holder, c);
      const relay: Promise<void> = this.#relay(c).catch(() => {}).finally(() => {
        this.#close(c);
        this.#relays.delete(relay);
      });
      this.#relays.add(relay);
    }
  }

  /**
   * When `budget` is full, frees a slot for a new connection of `holder`
   * (`fair_share.ts`), or refuses `client` and returns false.
   */
  #makeRoom(
    client: Deno.Conn,
    holder: string,
    budget: FairShare<Connection>,
    which: "connections" | "heads",
  ): boolean {
    if (!budget.full) return true;
    const o = this.#options;
    const decision = budget.decide(holder);
    const [setting, max] = which === "connections"
      ? ["server.max_connections", o.maxConnections]
      : ["server.max_pending_heads", o.maxPendingHeads];
    const what = which === "connections"
      ? `the server has ${max} open connections (${setting} = ${max})`
      : `${max} connections awaited their request head (${setting} = ${max})`;
    const limit = { setting, value: max };
    if (decision.kind === "evict") {
      this.#refusals.note(
        which === "connections"
          ? "too many open connections; closed one of the client holding the most"
          : "too many connections without a request head; closed one of the client holding the most",
        { max, client: decision.holder, held: decision.held },
      );
      this.#evict(decision, {
        status: 503,
        message: `${what}; this one was closed: its client held the most of them ` +
          `(${decision.held}); retry in 1 s`,
        limit,
        retryAfterSeconds: 1,
      });
      return true;
    }
    if (decision.reason === "over-share") {
      // The flood itself: answered at once, without reading its head (refusal.ts).
      this.#refusals.note(`${which}: a client over its fair share was refused`, {
        max,
        client: holder,
        held: decision.held,
        share: decision.share,
      });
      this.#desk.answer(
        client,
        refusalResponse({
          status: 503,
          message: `${what}; this client holds ${decision.held}, at least its share ` +
            `(${decision.share} for ${decision.addresses} client${
              decision.addresses === 1 ? "" : "s"
            }); retry in 1 s`,
          limit,
          retryAfterSeconds: 1,
        }),
        { waitForHeadMs: 0 },
      );
      return false;
    }
    this.#refusals.note(
      which === "connections" ? "too many open connections" : "too many pending heads",
      { open: this.#open.size, max },
    );
    this.#desk.answer(
      client,
      refusalResponse({
        status: 503,
        message: which === "connections"
          ? `the server has ${max} open connections, the most allowed (${setting} = ${max}); ` +
            `retry in 1 s`
          : `${max} connections were waiting for their request head, the most allowed ` +
            `(${setting} = ${max}); retry in 1 s`,
        limit,
        retryAfterSeconds: 1,
      }),
      { waitForHeadMs: o.headerTimeoutMs },
    );
    return false;
  }

  /**
   * Closes `decision.item` for a newcomer: answered with `refusal` once its
   * head has ended when it is still sending it, at once while it sends its
   * body; a connection already being answered is cut.
   */
  #evict(decision: FairDecision<Connection> & { kind: "evict" }, refusal: Refusal): void {
    const c = decision.item;
    if (c.phase === "response") {
      this.#close(c);
      return;
    }
    this.#refuse(c, refusal, null, c.phase === "head" ? Infinity : 0);
  }

  /** Forgets `c` in every count (once). */
  #forget(c: Connection): void {
    this.#open.delete(c);
    this.#openShare.delete(c.holder, c);
    this.#heads.delete(c.holder, c);
    if (c.key !== null) {
      this.#peers.release(c.key);
      c.key = null;
    }
  }

  /**
   * Answers `refusal` to an admitted connection whose response has not
   * begun, and closes it (`refusal.ts`); `why` is logged unless null. A
   * connection still in its head phase is answered once its head has ended,
   * within what is left of its header deadline and at most `awaitHeadMs`
   * (0: at once).
   */
  #refuse(c: Connection, refusal: Refusal, why: string | null, awaitHeadMs = 0): void {
    if (why !== null) log("warn", "http", `connection closed: ${why}`);
    c.closed = true; // the relay stops; the desk owns the client socket from here
    this.#forget(c);
    try {
      c.inner?.close();
    } catch { /* gone */ }
    const left = c.openedAt + this.#options.headerTimeoutMs - Date.now();
    c.late = this.#desk.answer(c.client, refusalResponse(refusal), {
      waitForHeadMs: c.phase === "head" ? Math.max(0, Math.min(left, awaitHeadMs)) : 0,
      before: c.head,
    });
  }

  #close(c: Connection): void {
    this.#forget(c);
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
    this.#peers.prune();
    for (const c of this.#open) {
      if (c.phase === "head" && now - c.openedAt > o.headerTimeoutMs) {
        this.#refuse(c, {
          status: 408,
          message: `the request head did not arrive within ${o.headerTimeoutMs} ms ` +
            `(server.header_timeout_seconds = ${o.headerTimeoutMs / 1000})`,
          limit: { setting: "server.header_timeout_seconds", value: o.headerTimeoutMs / 1000 },
        }, null);
        this.#refusals.note("request head too slow", { headerTimeoutMs: o.headerTimeoutMs });
      } else if (c.phase === "body") {
        const waited = c.clientWaitMs + (c.waitingSince === null ? 0 : now - c.waitingSince);
        const owed = ((waited - o.headerTimeoutMs) * o.bodyMinBytesPerSecond) / 1000;
        if (c.bodyReceived < owed) {
          const rate = o.bodyMinBytesPerSecond;
          this.#refuse(c, {
            status: 408,
            message: `the request body arrives slower than ${rate} bytes/s ` +
              `(server.body_min_bytes_per_second = ${rate})`,
            limit: { setting: "server.body_min_bytes_per_second", value: rate },
          }, "request body too slow");
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
      { status: 431, message: `the request head is over ${MAX_HEAD_BYTES} bytes` },
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
      if (n === null || c.closed) {
        // Refused meanwhile: what this read returned may end the head the answer waits for.
        if (n !== null) c.late?.(buffer.subarray(0, n));
        return;
      }
      const from = Math.max(0, head.length - 3);
      head = c.head = concatBytes([head, buffer.subarray(0, n)]);
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
    this.#heads.delete(c.holder, c);
    const parsed = parseRequestHead(head.subarray(0, found.blank));
    if ("problem" in parsed) {
      this.#refuse(c, { status: 400, message: parsed.problem }, parsed.why);
      return;
    }
    const { headers } = parsed;
    const address = c.proxied
      ? clientAddress(c.peer, headers, this.#trusted, this.#forwardedHeader)
      : c.peer;
    if (c.proxied) {
      const refusal = this.#admitClient(address);
      if (refusal) {
        this.#refuse(c, refusal, null);
        return;
      }
      c.key = clientKey(address);
      this.#openShare.move(c.holder, c.key, c);
      c.holder = c.key;
    }
    const expected = bodyLength(headers);
    const rewritten = forwardedHead(parsed, address);
    // Relay: the rewritten head, then whatever body came with it.
    try {
      c.inner = await Deno.connect(this.#options.target as Deno.ConnectOptions);
    } catch (error) {
      this.#refuse(
        c,
        {
          status: 503,
          message: "the server is shutting down; retry shortly (another replica may answer)",
          retryAfterSeconds: 1,
        },
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
      await writeAll(c.inner!, rewritten);
      if (rest.length > 0) await writeAll(c.inner!, rest);
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
