/**
 * An HTTP server listing only the six design-code tools (no models needed;
 * their backend, `http://127.0.0.1:9`, is never called by `tools/list`), for
 * the authentication benchmarks (bench/auth_bench.ts, auth_flood_bench.ts).
 *
 * @module
 */

import { authFailureResponse } from "../../mod/auth/auth_response.ts";
import { createBackendClient } from "../../mod/backend/mod.ts";
import {
  type HttpServerHandle,
  type HttpServerOptions,
  startHttpServer,
} from "../../mod/http/mod.ts";
import { createMcpServer, type Scope } from "../../mod/mcp/mod.ts";
import { createDesignCodeTools } from "../../tools/design_code.ts";

/**
 * Starts `startHttpServer` on 127.0.0.1, a free port, no allowed origins,
 * with `authenticator` and the real auth failure responses.
 *
 * @param authenticator Decides every request (the real one, or a stub that accepts all).
 * @returns The running server; `addr.port` is its port.
 */
export async function startDesignCodeServer(
  authenticator: HttpServerOptions["authenticator"],
): Promise<HttpServerHandle> {
  const tools = createDesignCodeTools(
    createBackendClient({ baseUrl: "http://127.0.0.1:9", timeoutMs: 1_000 }),
  );
  return await startHttpServer({
    hostname: "127.0.0.1",
    port: 0,
    allowedOrigins: [],
    authenticator,
    authFailureResponse: (outcome) => authFailureResponse(outcome),
    createServer: (scope: Scope) => createMcpServer({ tools, scope }),
  });
}
