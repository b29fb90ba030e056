/**
 * CORS for browser-based MCP clients on `/mcp`: which Origins may call, the
 * answer to a preflight (`OPTIONS /mcp`), and the headers added to actual
 * responses so that a page can read them.
 *
 * Allowed: the configured `server.allowed_origins`, plus the server's own
 * loopback origins (`http://127.0.0.1:<port>`, `http://localhost:<port>`,
 * `http://[::1]:<port>`). Those are safe to accept by default: a
 * DNS-rebinding page has the attacker's host name in its Origin, never the
 * loopback one, and nothing else can serve a page from the server's own
 * origin. Every other Origin is refused with 403 (MCP 2025-11-25 transports,
 * "Security Warning"). Requests without an Origin (non-browser clients) are
 * not CORS requests and pass unchanged.
 *
 * The header lists follow what the streamable HTTP transport sends and reads
 * (MCP 2025-11-25 and 2026-07-28 basic/transports): requests carry
 * `Content-Type`, `Accept`, `Mcp-Protocol-Version`, `Mcp-Session-Id`,
 * `Last-Event-ID` and, on 2026-07-28, `Mcp-Method` / `Mcp-Name`; this server
 * adds `MCP-API-Key`, `Authorization` and `X-MCP-Token`. Responses expose
 * `Mcp-Session-Id` and `Mcp-Protocol-Version` (and `WWW-Authenticate`, so a
 * page can tell an auth failure from a network error). No credentials mode:
 * keys travel in headers, never cookies.
 *
 * @module
 */

/** Methods a browser may use on `/mcp` (GET/DELETE reach the server, which answers 405). */
export const CORS_ALLOW_METHODS: readonly string[] = ["POST", "GET", "DELETE", "OPTIONS"];

/** Request headers a browser may send on `/mcp`. */
export const CORS_ALLOW_HEADERS: readonly string[] = [
  "Content-Type",
  "Accept",
  "Authorization",
  "MCP-API-Key",
  "X-MCP-Token",
  "Mcp-Protocol-Version",
  "Mcp-Session-Id",
  "Mcp-Method",
  "Mcp-Name",
  "Last-Event-ID",
];

/** Response headers a page may read. */
export const CORS_EXPOSE_HEADERS: readonly string[] = [
  "Mcp-Session-Id",
  "Mcp-Protocol-Version",
  "WWW-Authenticate",
];

/** How long a browser may cache a preflight answer, in seconds. */
export const CORS_MAX_AGE_SECONDS = 600;

/** The server's own loopback origins on `port`. */
export function loopbackOrigins(port: number): string[] {
  return [`http://127.0.0.1:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`];
}

/** The Origin policy of one running server. */
export class CorsPolicy {
  readonly #allowed: Set<string>;

  /**
   * A policy allowing `allowedOrigins` (already normalised by the config)
   * and, once the port is bound, the server's own loopback origins on `port`.
   */
  constructor(allowedOrigins: readonly string[], port?: number) {
    this.#allowed = new Set([...allowedOrigins, ...(port ? loopbackOrigins(port) : [])]);
  }

  /** Whether a request with this `Origin` header may reach `/mcp`. */
  allows(origin: string): boolean {
    return this.#allowed.has(origin);
  }

  /**
   * The answer to `OPTIONS /mcp`: 204 with the `Access-Control-*` headers
   * for an allowed Origin; without an Origin (not a browser preflight), a
   * plain 204 naming the methods. A disallowed Origin never gets here.
   */
  preflight(origin: string | null): Response {
    const headers = new Headers({ allow: CORS_ALLOW_METHODS.join(", ") });
    if (origin !== null) {
      headers.set("access-control-allow-origin", origin);
      headers.set("access-control-allow-methods", CORS_ALLOW_METHODS.join(", "));
      headers.set("access-control-allow-headers", CORS_ALLOW_HEADERS.join(", "));
      headers.set("access-control-max-age", String(CORS_MAX_AGE_SECONDS));
      headers.set("vary", "Origin");
    }
    return new Response(null, { status: 204, headers });
  }

  /**
   * Adds the CORS headers of an actual response for an allowed `origin`
   * (none when the request had no Origin). Returns the same response when
   * its headers can be changed, else a copy with the same body stream.
   */
  decorate(response: Response, origin: string | null): Response {
    if (origin === null) return response;
    const set = (headers: Headers) => {
      headers.set("access-control-allow-origin", origin);
      headers.set("access-control-expose-headers", CORS_EXPOSE_HEADERS.join(", "));
      headers.append("vary", "Origin");
    };
    try {
      set(response.headers);
      return response;
    } catch {
      // Immutable headers (e.g. a Response from fetch): copy, keeping the stream.
      const copy = new Response(response.body, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
      set(copy.headers);
      return copy;
    }
  }
}
