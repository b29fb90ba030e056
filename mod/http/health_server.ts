/**
 * The HTTP face of a `worker` replica: only `GET /healthz`. A worker takes
 * its jobs from the shared PostgreSQL queue, never from clients, so `/mcp`
 * is not served (404) and no API key is ever checked. Its port has the same
 * connection guard as a front's (`guarded_serve.ts`): a worker's port is
 * usually reachable by its load balancer and orchestrator, and idle
 * connections there must not exhaust the file descriptors its database
 * connections need.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { type GuardedServeOptions, serveGuarded } from "./guarded_serve.ts";
import { type HealthFields, healthResponse } from "./health.ts";
import type { HttpServerHandle } from "./server.ts";

/** Options of {@link startHealthServer}: where it listens and the guard's limits, then what it reports. */
export interface HealthServerOptions extends GuardedServeOptions {
  /** The fields of `/healthz` besides `status` (`unavailable` makes it 503, see health.ts). */
  health: () => HealthFields | Promise<HealthFields>;
}

/** Starts a server that answers `/healthz` and nothing else. */
export async function startHealthServer(options: HealthServerOptions): Promise<HttpServerHandle> {
  const served = await serveGuarded(options, async (request) => {
    if (new URL(request.url).pathname !== "/healthz") {
      return new Response(
        "not found: this replica is a worker (server.role); it serves only /healthz\n",
        { status: 404 },
      );
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response(null, { status: 405, headers: { allow: "GET, HEAD" } });
    }
    return healthResponse(await options.health());
  });
  const addr = served.addr;
  log("info", "http", `worker health on http://${addr.hostname}:${addr.port}/healthz`);
  return { ...served, cancelRequest: () => false };
}
