/**
 * A TCP proxy for tests that stands between postgres.js and a database
 * server and can take the database "down" (drop every connection and stop
 * listening, so new connections are refused as by a stopped server), bring it
 * back on the same port, or slow every chunk down. It works the same in front
 * of a real PostgreSQL server's TCP port and the embedded server's Unix socket.
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

  /** Holds every forwarded chunk (both directions) for `ms` before passing it on. */
  setDelay(ms: number): void {
    this.#delayMs = ms;
  }

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
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
