/**
 * `Deno.serve` behind a {@link ConnectionGuard}, as every HTTP face of the
 * server runs (the MCP server and a worker's `/healthz`): the guard owns
 * the public port and its limits; `Deno.serve` listens on a Unix socket in
 * a directory only this process's user may enter (mode 0700, under the
 * temporary directory, removed when the server stops), so no local process
 * can reach it past the guard. On Windows, which has no
 * `Deno.serve({ path })`, it listens on loopback TCP.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import type { AddressRange, ForwardedHeader } from "./client_address.ts";
import { ConnectionGuard, type ConnectionLimits } from "./connection_guard.ts";

/** The defaults of config `[server]` for the connection limits. */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headerTimeoutMs: 10_000,
  bodyMinBytesPerSecond: 32_768,
  idleTimeoutMs: 60_000,
  maxConnections: 512,
  maxConnectionsPerClient: 32,
  clientConnectionsPerSecond: 50,
  maxPendingHeads: 128,
};

/** Where and how a guarded server listens. */
export interface GuardedServeOptions {
  /** Public interface. */
  hostname: string;
  /** Public port; 0 picks a free one. */
  port: number;
  /** The guard's limits (defaults: {@link DEFAULT_CONNECTION_LIMITS}). */
  limits?: Partial<ConnectionLimits>;
  /** Proxies whose client address header is believed (default none). */
  trustedProxies?: readonly AddressRange[];
  /** The header trusted proxies name the client in (default `x-forwarded-for`). */
  forwardedHeader?: ForwardedHeader;
}

/** A running guarded server. */
export interface GuardedServer {
  /** The public address (port resolved when 0 was asked). */
  addr: Deno.NetAddr;
  /** Resolves when the server has stopped. */
  finished: Promise<void>;
  /** Stops accepting, waits for requests in flight (at most `graceMs`), then closes. */
  shutdown(graceMs: number): Promise<void>;
}

/** Where the inner `Deno.serve` listens, and how to clean up after it. */
async function innerListener(): Promise<{
  listen: { path: string } | { hostname: string; port: number };
  remove(): Promise<void>;
}> {
  if (Deno.build.os === "windows") {
    return { listen: { hostname: "127.0.0.1", port: 0 }, remove: () => Promise.resolve() };
  }
  // mkdtemp creates the directory 0700; the chmod states it rather than trusting the umask.
  const dir = await Deno.makeTempDir({ prefix: "sd15-mcp-http-" });
  await Deno.chmod(dir, 0o700);
  let removed: Promise<void> | undefined;
  return {
    listen: { path: `${dir}/http.sock` },
    remove: () => removed ??= Deno.remove(dir, { recursive: true }).catch(() => {}),
  };
}

/** Starts `handler` behind a guard; see the module documentation. */
export async function serveGuarded(
  options: GuardedServeOptions,
  handler: Deno.ServeHandler,
): Promise<GuardedServer> {
  let guard: ConnectionGuard | undefined;
  let server: Deno.HttpServer | undefined;
  const inner = await innerListener();
  try {
    server = Deno.serve({
      ...inner.listen,
      onListen: () => {},
      onError: (error) => {
        log("error", "http", "unhandled error", { error: String(error) });
        return new Response("internal server error\n", { status: 500 });
      },
    }, handler);
    const innerAddr = server.addr as Deno.Addr as Deno.UnixAddr | Deno.NetAddr;
    guard = ConnectionGuard.start({
      ...DEFAULT_CONNECTION_LIMITS,
      ...options.limits,
      hostname: options.hostname,
      port: options.port,
      target: "path" in innerAddr
        ? { transport: "unix", path: innerAddr.path }
        : { hostname: innerAddr.hostname, port: innerAddr.port },
      trustedProxies: options.trustedProxies,
      forwardedHeader: options.forwardedHeader,
    });
  } catch (error) {
    // E.g. the public port is taken: nothing may stay listening.
    await guard?.close().catch(() => {});
    await server?.shutdown().catch(() => {});
    await inner.remove();
    throw error;
  }
  const front = guard;
  const inside = server;
  return {
    addr: front.addr,
    finished: inside.finished.finally(() => inner.remove()),
    async shutdown(graceMs: number) {
      await front.stopAccepting();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<boolean>((r) => timer = setTimeout(() => r(true), graceMs));
      const timedOut = await Promise.race([inside.shutdown().then(() => false), expired]);
      clearTimeout(timer);
      if (timedOut) log("warn", "http", `shutdown grace of ${graceMs} ms ran out`);
      await front.close();
      // Before the caller may exit: the socket's directory goes with the server.
      await inner.remove();
    },
  };
}
