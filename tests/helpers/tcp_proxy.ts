/**
 * A TCP proxy for tests that stands between postgres.js and a database
 * server and can take the database "down" (drop every connection and stop
 * listening, so new connections are refused as by a stopped server), bring it
 * back on the same port, slow every chunk down, or stall: stop forwarding
 * while every connection stays open and new ones are accepted, as a stopped
 * server process, a frozen disk or VM or a network path that drops packets
 * look to a client (no error, no answer), then forward again. It works the
 * same in front of a real PostgreSQL server's TCP port and the embedded
 * server's Unix socket.
 *
 * @module
 */

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Where the proxy forwards to: a TCP address or a Unix socket. */
export type ProxyTarget = { hostname: string; port: number } | { path: string };

/** A running proxy on 127.0.0.1. */
export class TcpProxy {
  /** The port the proxy listens on. */
  readonly port: number;
  #listener: Deno.Listener | undefined;
  readonly #target: ProxyTarget;
  readonly #connections = new Set<Deno.Conn>();
  readonly #pumps = new Set<Promise<void>>();
  #down = false;
  #delayMs = 0;
  /** While stalled: resolves when forwarding resumes. */
  #stalled: { promise: Promise<void>; resume: () => void } | null = null;
  #accepting: Promise<void> = Promise.resolve();

  private constructor(listener: Deno.Listener, target: ProxyTarget) {
    this.#listener = listener;
    this.#target = target;
    this.port = (listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#acceptLoop(listener);
  }

  /** Starts a proxy to `hostname:port` (or a Unix socket `path`) on a free loopback port. */
  static start(target: ProxyTarget): TcpProxy {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    return new TcpProxy(listener, target);
  }

  /** True while connections are being refused. */
  get isDown(): boolean {
    return this.#down;
  }

  /** Drops every open connection and stops listening (connects get ECONNREFUSED), like a stopped server. */
  async down(): Promise<void> {
    this.#down = true;
    try {
      this.#listener?.close();
    } catch {
      // already closed
    }
    this.#listener = undefined;
    for (const conn of this.#connections) this.#closeConn(conn);
    this.#connections.clear();
    await this.#accepting;
  }

  /** Listens on the same port again and forwards connections. */
  async up(): Promise<void> {
    if (this.#listener) return;
    for (let attempt = 0;; attempt++) {
      try {
        this.#listener = Deno.listen({ hostname: "127.0.0.1", port: this.port });
        break;
      } catch (error) {
        if (attempt >= 50) throw error;
        await sleep(100);
      }
    }
    this.#down = false;
    this.#accepting = this.#acceptLoop(this.#listener);
  }

  /**
   * Stops forwarding: bytes already read are held, nothing more is read from
   * either side, and new connections are accepted but not connected onwards.
   * Nothing is closed, so the client sees no error, only silence.
   */
  stall(): void {
    if (this.#stalled) return;
    let resume!: () => void;
    const promise = new Promise<void>((r) => resume = r);
    this.#stalled = { promise, resume };
  }

  /** Forwards again after {@link stall}: what was held goes on, in order. */
  resume(): void {
    const stalled = this.#stalled;
    this.#stalled = null;
    stalled?.resume();
  }

  /** True between {@link stall} and {@link resume}. */
  get isStalled(): boolean {
    return this.#stalled !== null;
  }

  /** Resolves at once, or when a stall ends. */
  async #flowing(): Promise<void> {
    while (this.#stalled) await this.#stalled.promise;
  }

  /** Holds every forwarded chunk (both directions) for `ms` before passing it on. */
  setDelay(ms: number): void {
    this.#delayMs = ms;
  }

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
    this.resume();
    await this.down();
    await Promise.allSettled([...this.#pumps]);
  }

  async #acceptLoop(listener: Deno.Listener): Promise<void> {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await listener.accept();
      } catch {
        return; // listener closed
      }
      if (this.#down) {
        this.#closeConn(client);
        continue;
      }
      this.#connections.add(client);
      const started = this.#forward(client).finally(() => this.#pumps.delete(started));
      this.#pumps.add(started);
    }
  }

  async #forward(client: Deno.Conn): Promise<void> {
    await this.#flowing();
    let server: Deno.Conn;
    try {
      server = "path" in this.#target
        ? await Deno.connect({ transport: "unix", path: this.#target.path })
        : await Deno.connect({ hostname: this.#target.hostname, port: this.#target.port });
    } catch {
      this.#closeConn(client);
      this.#connections.delete(client);
      return;
    }
    if (this.#down) {
      this.#closeConn(client);
      this.#closeConn(server);
      this.#connections.delete(client);
      return;
    }
    this.#connections.add(server);
    const done = () => {
      this.#closeConn(client);
      this.#closeConn(server);
      this.#connections.delete(client);
      this.#connections.delete(server);
    };
    await Promise.all([
      this.#pump(client, server).finally(done),
      this.#pump(server, client).finally(done),
    ]);
  }

  async #pump(from: Deno.Conn, to: Deno.Conn): Promise<void> {
    const buffer = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buffer);
        if (n === null) return;
        const chunk = buffer.slice(0, n);
        if (this.#delayMs > 0) await sleep(this.#delayMs);
        await this.#flowing();
        let written = 0;
        while (written < chunk.length) written += await to.write(chunk.subarray(written));
      }
    } catch {
      // A side closed: the other is closed by the caller.
    }
  }

  #closeConn(conn: Deno.Conn): void {
    try {
      conn.close();
    } catch {
      // already closed
    }
  }
}
