/**
 * The HTTP answer to a failed authentication: 401 or 503 with a JSON-RPC
 * error body, so MCP clients show the reason, and for 401 a
 * `WWW-Authenticate: Bearer` challenge (RFC 6750 §3; MCP authorization spec:
 * "401 for invalid or expired tokens").
 *
 * @module
 */

import type { AuthFailure } from "./auth_outcome.ts";

/** JSON-RPC error code for authentication failures (implementation-defined server error range). */
export const AUTH_ERROR_CODE: -32001 = -32001;

/** Seconds a client should wait before retrying after a 503. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * Builds the response for a failed {@link AuthFailure}: its status, body
 * `{"jsonrpc":"2.0","error":{"code":-32001,"message":…},"id":…}` (`id` is
 * `requestId` when the caller parsed one, else null), `Cache-Control:
 * no-store`, and for 401 `WWW-Authenticate: Bearer realm="mcp"` with
 * `error="invalid_token"` when a credential was presented but refused (RFC 6750
 * §3.1: a request with no credential gets the bare challenge).
 */
export function authFailureResponse(
  outcome: AuthFailure,
  requestId: string | number | null = null,
): Response {
  const headers = new Headers({
    "content-type": "application/json",
    "cache-control": "no-store",
  });
  if (outcome.status === 401) {
    headers.set(
      "www-authenticate",
      outcome.invalidToken ? 'Bearer realm="mcp", error="invalid_token"' : 'Bearer realm="mcp"',
    );
  } else {
    headers.set("retry-after", String(outcome.retryAfterSeconds ?? RETRY_AFTER_SECONDS));
  }
  const body = {
    jsonrpc: "2.0",
    error: { code: AUTH_ERROR_CODE, message: outcome.message },
    id: requestId,
  };
  return new Response(JSON.stringify(body), { status: outcome.status, headers });
}
