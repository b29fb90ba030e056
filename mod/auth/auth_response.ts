/**
 * The HTTP answer to a failed authentication: 401 or 503 with a JSON-RPC
 * error body, so MCP clients show the reason, and for 401 a challenge for
 * the API-key scheme, `WWW-Authenticate: ApiKey realm="mcp",
 * header="MCP-API-Key"` (RFC 9110 §11.6.1: a 401 carries at least one
 * challenge for a scheme the resource accepts).
 *
 * Not a `Bearer` challenge: under the MCP authorization spec
 * (modelcontextprotocol.io `specification/2025-11-25/basic/authorization`)
 * a `Bearer` 401 means "OAuth 2.1 resource server", and OAuth-capable
 * clients answer it by probing `/.well-known/oauth-protected-resource` and
 * `/.well-known/oauth-authorization-server` and then registering a client,
 * so a person saw "Dynamic Client Registration rejected" instead of this
 * server's reason. This server offers no OAuth; a key sent as
 * `Authorization: Bearer …` is still accepted.
 *
 * @module
 */

import type { AuthFailure } from "./auth_outcome.ts";

/** JSON-RPC error code for authentication failures (implementation-defined server error range). */
export const AUTH_ERROR_CODE: -32001 = -32001;

/**
 * The 401 challenge: the API-key scheme, naming the header that carries the
 * key (`Authorization: Bearer <key>` is accepted as well, for clients that
 * cannot send custom headers).
 */
export const API_KEY_CHALLENGE = 'ApiKey realm="mcp", header="MCP-API-Key"';

/** Seconds a client should wait before retrying after a 503. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * Builds the response for a failed {@link AuthFailure}: its status, body
 * `{"jsonrpc":"2.0","error":{"code":-32001,"message":…},"id":…}` (`id` is
 * `requestId` when the caller parsed one, else null), `Cache-Control:
 * no-store`, and for 401 `WWW-Authenticate:` {@link API_KEY_CHALLENGE}, with
 * `error="invalid_key"` added when a key was presented but refused (as RFC
 * 6750 §3.1 does for its scheme: a request with no key gets the bare
 * challenge).
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
      outcome.invalidToken ? `${API_KEY_CHALLENGE}, error="invalid_key"` : API_KEY_CHALLENGE,
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

/**
 * Paths where OAuth clients look for an authorization server after a 401:
 * RFC 9728 protected-resource metadata, RFC 8414 / OpenID Connect discovery
 * (at the root or with the resource's path appended), and the default
 * `/register`, `/authorize` and `/token` endpoints the MCP authorization
 * spec falls back to when no metadata is found.
 */
const OAUTH_PROBE =
  /^\/(?:\.well-known\/(?:oauth-protected-resource|oauth-authorization-server|openid-configuration)(?:\/.*)?|register|authorize|token)$/;

/** Whether `pathname` is one an OAuth client probes after a 401 ({@link noOAuthResponse} answers it). */
export function isOAuthProbe(pathname: string): boolean {
  return OAUTH_PROBE.test(pathname) || /^\/.+\/\.well-known\/(?:oauth|openid)/.test(pathname);
}

/**
 * The 404 for an OAuth probe. Claude Code and mcp-remote start OAuth on any
 * 401, whatever its challenge, send the server's configured headers along,
 * and show the body of the failed client registration to the person
 * ("Dynamic Client Registration rejected (HTTP 404): <body>"). So the body
 * is one line: the reason the credentials were refused (`outcome`, the
 * probe authenticated like a `POST /mcp`), or that they are accepted, and
 * that this server takes API keys, not OAuth.
 */
export function noOAuthResponse(outcome: AuthFailure | null): Response {
  const reason = outcome === null ? "this API key is accepted" : outcome.message;
  return new Response(
    `${reason} (this server offers no OAuth: it takes an API key in MCP-API-Key or ` +
      `Authorization: Bearer, and X-MCP-Token where the server requires it)\n`,
    {
      status: 404,
      headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" },
    },
  );
}
