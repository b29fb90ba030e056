/**
 * The embedded default database: PGlite (PostgreSQL compiled to WebAssembly)
 * on a data directory, served on 127.0.0.1 by pglite-socket so that
 * postgres.js stays the only client and the same SQL runs everywhere.
 *
 * PGlite is single-process: two processes must never open one data directory.
 * The first process to take an exclusive lock on `<dataDir>.lock` owns the
 * directory, runs the server and writes its port into the lock file; any
 * other process (e.g. `deno task keys` while the HTTP server runs) connects
 * to that port instead. The lock is an flock, so the kernel releases it when
 * the owner dies, and the next process that needs a connection takes over.
 *
 * @module
 */

import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import net from "node:net";
import { dirname, resolve } from "node:path";
import { DatabaseError } from "./database.ts";
import { log } from "../log/mod.ts";

/** Where to connect, and whether this process runs that server. */
export interface EmbeddedEndpoint {
  /** Always 127.0.0.1. */
  host: string;
  /** The pglite-socket server's port. */
  port: number;
  /** True when this process owns the data directory and runs the server. */
  owned: boolean;
}

/** Options for {@link EmbeddedPostgres}. */
export interface EmbeddedOptions {
  /** How long to wait for another process to publish its port (default 30 s: initdb takes seconds). */
  waitMs?: number;
  /** TCP connect timeout for one connection attempt (default 5 s). */
  connectTimeoutMs?: number;
}

/** What the owner writes into the lock file. */
interface LockInfo {
  pid: number;
  host: string;
  port: number;
}

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * One data directory of the embedded database, shared between processes as
 * described in the module documentation.
 */
export class EmbeddedPostgres {
  /** Absolute data directory. */
  readonly dataDir: string;
  readonly #lockPath: string;
  readonly #waitMs: number;
  readonly #connectTimeoutMs: number;
  #lockFile?: Deno.FsFile;
  #pglite?: PGlite;
  #server?: PGLiteSocketServer;
  #endpoint?: EmbeddedEndpoint;
  #resolving?: Promise<EmbeddedEndpoint>;
  #closed = false;

  /** Prepares (does not start) the embedded database for `dataDir`. */
  constructor(dataDir: string, options: EmbeddedOptions = {}) {
    this.dataDir = resolve(dataDir);
    this.#lockPath = `${this.dataDir}.lock`;
    this.#waitMs = options.waitMs ?? 30_000;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
  }

  /**
   * The server to connect to: this process's own, or another process's; when
   * the directory is free, this process takes it and starts the server.
   */
  endpoint(): Promise<EmbeddedEndpoint> {
    if (this.#closed) {
      return Promise.reject(
        new DatabaseError(
          `embedded database ${this.dataDir} is closed`,
          "EMBEDDED_UNAVAILABLE",
          true,
        ),
      );
    }
    if (this.#endpoint) return Promise.resolve(this.#endpoint);
    this.#resolving ??= this.#resolve().finally(() => this.#resolving = undefined);
    return this.#resolving;
  }

  /**
   * Opens a TCP connection to the current server (the socket factory handed to
   * postgres.js). When a foreign server refuses, its owner has gone: the
   * endpoint is looked up again once, which may make this process the owner.
   */
  async connect(): Promise<net.Socket> {
    let endpoint = await this.endpoint();
    try {
      return await this.#dial(endpoint);
    } catch (error) {
      if (endpoint.owned) throw error;
      this.#endpoint = undefined;
      endpoint = await this.endpoint();
      return await this.#dial(endpoint);
    }
  }

  /** Stops the server and PGlite if this process owns them, and releases the lock. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#resolving?.catch(() => {});
    const server = this.#server;
    const pglite = this.#pglite;
    this.#server = undefined;
    this.#pglite = undefined;
    this.#endpoint = undefined;
    try {
      await server?.stop();
      await pglite?.close();
    } finally {
      // The file is kept (deleting it could let two processes lock different
      // inodes); releasing the lock is what hands the directory over.
      this.#lockFile?.close();
      this.#lockFile = undefined;
    }
  }

  async #resolve(): Promise<EmbeddedEndpoint> {
    const deadline = Date.now() + this.#waitMs;
    await Deno.mkdir(dirname(this.dataDir), { recursive: true });
    for (;;) {
      const file = await Deno.open(this.#lockPath, { read: true, write: true, create: true });
      let keep = false;
      try {
        if (await file.tryLock(true)) {
          // Clear a dead owner's port at once so readers wait instead of dialling it.
          await file.truncate(0);
          const endpoint = await this.#start(file);
          keep = true;
          this.#lockFile = file;
          this.#endpoint = endpoint;
          return endpoint;
        }
      } finally {
        if (!keep) file.close();
      }
      const info = await this.#readLockInfo();
      if (info) {
        this.#endpoint = { host: info.host, port: info.port, owned: false };
        return this.#endpoint;
      }
      if (Date.now() > deadline) {
        throw new DatabaseError(
          `embedded database ${this.dataDir} is locked by another process that has not published its port in ${this.#waitMs} ms (lock file ${this.#lockPath})`,
          "EMBEDDED_UNAVAILABLE",
          true,
        );
      }
      await sleep(100);
    }
  }

  async #start(file: Deno.FsFile): Promise<EmbeddedEndpoint> {
    const started = performance.now();
    const pglite = await PGlite.create(this.dataDir);
    // maxConnections bounds clients of all processes together; each pool is small.
    const server = new PGLiteSocketServer({
      db: pglite,
      host: "127.0.0.1",
      port: 0,
      maxConnections: 32,
    });
    try {
      await server.start();
    } catch (error) {
      await pglite.close();
      throw error;
    }
    this.#pglite = pglite;
    this.#server = server;
    const conn = server.getServerConn();
    const port = Number(conn.slice(conn.lastIndexOf(":") + 1));
    const info: LockInfo = { pid: Deno.pid, host: "127.0.0.1", port };
    await file.write(new TextEncoder().encode(JSON.stringify(info) + "\n"));
    log("info", "db", "embedded PostgreSQL (PGlite) started", {
      dataDir: this.dataDir,
      port,
      ms: Math.round(performance.now() - started),
    });
    return { host: info.host, port, owned: true };
  }

  async #readLockInfo(): Promise<LockInfo | undefined> {
    try {
      const parsed = JSON.parse(await Deno.readTextFile(this.#lockPath)) as Partial<LockInfo>;
      if (typeof parsed.port === "number" && parsed.port > 0 && typeof parsed.host === "string") {
        return { pid: Number(parsed.pid), host: parsed.host, port: parsed.port };
      }
    } catch {
      // Empty or half-written: the owner is still starting.
    }
    return undefined;
  }

  #dial(endpoint: EmbeddedEndpoint): Promise<net.Socket> {
    return new Promise((resolvePromise, reject) => {
      const socket = net.connect({ host: endpoint.host, port: endpoint.port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(
          new DatabaseError(
            `embedded database at ${endpoint.host}:${endpoint.port} did not accept a connection within ${this.#connectTimeoutMs} ms`,
            "CONNECT_TIMEOUT",
            true,
          ),
        );
      }, this.#connectTimeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolvePromise(socket);
      });
      socket.once("error", (error: Error & { code?: string }) => {
        clearTimeout(timer);
        socket.destroy();
        reject(
          new DatabaseError(
            `embedded database at ${endpoint.host}:${endpoint.port} is unreachable: ${error.message}`,
            error.code ?? "ECONNREFUSED",
            true,
          ),
        );
      });
    });
  }
}
