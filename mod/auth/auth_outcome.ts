/**
 * What authenticating one HTTP request yields, and the interface the HTTP
 * server calls per `POST /mcp` request.
 *
 * @module
 */

import type { Scope } from "../mcp/tool.ts";

/** A refused request. `message` is safe to send and log: it never holds a secret. */
export interface AuthFailure {
  /** Discriminant: always false for a refusal (true is the success branch of {@link AuthOutcome}). */
  ok: false;
  /** 401: no valid credentials; 503: the key database is unavailable (fail closed). */
  status: 401 | 503;
  /** Why, for the client. Distinguishes nothing secret. */
  message: string;
  /** A key was presented and refused (adds `error="invalid_token"` to the challenge). */
  invalidToken?: boolean;
  /** For a 503: seconds the client should wait before retrying (default 5). */
  retryAfterSeconds?: number;
}

/** The result of {@link Authenticator.authenticate}. */
export type AuthOutcome = { ok: true; scope: Scope } | AuthFailure;

/** Authenticates `POST /mcp` requests. */
export interface Authenticator {
  /**
   * Checks one request's `X-MCP-Token` and API key. `source` is who sent it
   * (a client address key, see mod/http/client_address.ts); wrong secrets
   * are budgeted per source. Never throws.
   */
  authenticate(request: Request, source?: string): Promise<AuthOutcome>;
  /** Waits for background `last_used_at` writes; does not close the database (the caller owns it). */
  close(): Promise<void>;
}
