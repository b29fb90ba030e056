/**
 * The HTTP face of a `worker` replica: only `GET /healthz`. A
 * worker takes its jobs from the shared PostgreSQL queue, never from
 * clients, so `/mcp` is not served (404) and no API key is ever checked.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { type HealthFields, healthResponse } from "./health.ts";
import type { HttpServerHandle } from "./server.ts";

/** Options of {@link startHealthServer}. */
export interface HealthServerOptions {
  /** Interface to listen on. */
  hostname: string;
  /** 0 picks a free port. */
  port: number;
  /** The fields of `/healthz` besides `status` (`unavailable` makes it 503, see health.ts). */
  health: () => HealthFields | Promise<HealthFields>;
}

/** Starts a server that answers `/healthz` and nothing else. */
export function startHealthServer(options: HealthServerOptions): Promise<HttpServerHandle> {
  const server = Deno.serve({
    hostname: options.hostname,
    port: options.port,
    onListen: () => {},
  }, async (request) => {
    if (new URL(request.url).pathname !== "/healthz") {
      return new Response(
        "not found: this replica is a worker (server.role); it serves only /healthz\n",
        {
          status: 404,
        },
      );
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response(null, { status: 405, headers: { allow: "GET, HEAD" } });
    }
    return healthResponse(await options.health());
  });
  const addr = server.addr as Deno.NetAddr;
  log("info", "http", `worker health on http://${addr.hostname}:${addr.port}/healthz`);
  return Promise.resolve({
    addr,
    finished: server.finished,
    cancelRequest: () => false,
    async shutdown(graceMs: number) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<void>((r) => timer = setTimeout(r, graceMs));
      await Promise.race([server.shutdown(), expired]);
      clearTimeout(timer);
    },
  });
}
