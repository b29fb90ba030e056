/**
 * Per-request authentication of `POST /mcp` (contract §5, issue 5 items
 * 3–5, 7): the `X-MCP-Token` shared secret, then the API key — format, row
 * lookup on every request (bounded wait, fail closed), scrypt verification
 * through the {@link VerificationCache}, revocation and expiry — and a
 * throttled background `last_used_at` write.
 *
 * Messages: "invalid API key" covers unknown, deleted and wrong-secret keys
 * alike; "API key revoked" / "API key expired" are said only after the secret
 * has been verified, so they tell nothing to someone who merely knows a prefix.
 *
 * @module
 */

import { DatabaseError, type Queryable } from "../db/mod.ts";
import { log } from "../log/mod.ts";
import type { Scope } from "../mcp/tool.ts";
import { parseApiKey, presentedKey } from "./api_key.ts";
import type { Authenticator, AuthFailure, AuthOutcome } from "./auth_outcome.ts";
import { ConcurrencyLimit } from "../queue/mod.ts";
import { constantTimeEqual } from "./constant_time.ts";
import { nodeScrypt, type ScryptFunction, verifyApiKey } from "./key_hash.ts";
import { type ApiKeyRecord, findActiveKey } from "./key_store.ts";
import { LastUsedRecorder } from "./last_used.ts";
import { VerificationCache } from "./verification_cache.ts";

/** Options for {@link createAuthenticator}. */
export interface AuthenticatorOptions {
  /** Where `mcp_api_keys` lives. Not closed by the authenticator. */
  db: Queryable;
  /** Deployment environment; `local` skips the `X-MCP-Token` check. */
  environment: string;
  /** `CLOUDFRONT_SECRET_HEADER`; required unless `environment` is `local`. */
  cloudfrontSecret?: string;
  /** How long a successful scrypt verification is remembered, in ms. */
  cacheTtlMs: number;
  /** Minimum time between `last_used_at` writes per key, in ms (60,000 per the issue). */
  lastUsedIntervalMs: number;
  /** Longest wait for the key lookup before answering 503, in ms. */
  dbTimeoutMs: number;
  /** Most scrypt runs at once (default 4; each takes 16 MiB and a core for ~50–80 ms). */
  maxConcurrentScrypt?: number;
  /**
   * Most key lookups outstanding at once, including ones abandoned after
   * `dbTimeoutMs` that the pool has not finished yet (default 128). Beyond it
   * requests get 503 at once, so a stalled database cannot pile up work.
   */
  maxOutstandingLookups?: number;
  /** scrypt implementation (tests count runs with it). */
  scrypt?: ScryptFunction;
  /** Observes background `last_used_at` writes (tests). */
  onLastUsedWrite?: (keyPrefix: string, result: boolean | Error) => void;
}

/** The authenticator plus a hook tests and shutdown use. */
export interface KeyAuthenticator extends Authenticator {
  /** Resolves when background `last_used_at` writes started so far are done. */
  settle(): Promise<void>;
}

const MISSING_KEY =
  "missing API key: send MCP-API-Key: guinness_<prefix>_<secret> or Authorization: Bearer guinness_<prefix>_<secret>";
const UNAVAILABLE = "authentication database unavailable; try again later";

function unauthorized(message: string, invalidToken: boolean): AuthFailure {
  return { ok: false, status: 401, message, invalidToken };
}

function unavailable(message: string): AuthFailure {
  return { ok: false, status: 503, message };
}

/** postgres.js codes for a pooled connection that died while idle. */
const STALE_CONNECTION_CODES = new Set(["CONNECTION_CLOSED", "ECONNRESET", "EPIPE"]);

/** Marker for a lookup that outlived the bounded wait. */
const TIMED_OUT = Symbol("timed out");

/**
 * Creates the authenticator the HTTP server calls for every `POST /mcp`.
 * Throws when the environment is not `local` and no `cloudfrontSecret` is
 * given (a production server must not start without it).
 */
export function createAuthenticator(options: AuthenticatorOptions): KeyAuthenticator {
  const local = options.environment === "local";
  const secret = options.cloudfrontSecret;
  if (!local && !secret) {
    throw new Error(
      `environment is "${options.environment}" but CLOUDFRONT_SECRET_HEADER is not set; ` +
        `set it, or use environment "local" for development without X-MCP-Token`,
    );
  }
  if (!(options.dbTimeoutMs > 0)) {
    throw new Error(`database timeout must be > 0 ms, got ${options.dbTimeoutMs}`);
  }
  const scrypt = options.scrypt ?? nodeScrypt;
  const limit = new ConcurrencyLimit(options.maxConcurrentScrypt ?? 4);
  const cache = new VerificationCache({ ttlMs: options.cacheTtlMs });
  const lastUsed = new LastUsedRecorder(options.db, {
    intervalMs: options.lastUsedIntervalMs,
    timeoutMs: Math.max(options.dbTimeoutMs, 1_000),
    onWrite: options.onLastUsedWrite,
  });
  const maxOutstanding = options.maxOutstandingLookups ?? 128;
  let outstanding = 0;

  /** The key row, waiting at most dbTimeoutMs; TIMED_OUT when the database is too slow. */
  const lookup = async (prefix: string): Promise<ApiKeyRecord | null | typeof TIMED_OUT> => {
    outstanding++;
    // A pooled connection the server closed (restart, failover) fails its next
    // query with CONNECTION_CLOSED; the SELECT is idempotent, so it is retried
    // once on a fresh connection instead of answering 503.
    const query = findActiveKey(options.db, prefix)
      .catch((error: unknown) => {
        if (error instanceof DatabaseError && STALE_CONNECTION_CODES.has(error.code)) {
          return findActiveKey(options.db, prefix);
        }
        throw error;
      })
      .finally(() => outstanding--);
    // Once abandoned, a late failure is expected and must not become an unhandled rejection.
    query.catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), options.dbTimeoutMs);
    });
    try {
      return await Promise.race([query, deadline]);
    } finally {
      clearTimeout(timer);
    }
  };

  const refuse = (failure: AuthFailure, reason: string, keyPrefix?: string): AuthFailure => {
    log(failure.status === 503 ? "warn" : "info", "auth", `request refused: ${reason}`, {
      status: failure.status,
      ...(keyPrefix ? { keyPrefix } : {}),
    });
    return failure;
  };

  const authenticate = async (request: Request): Promise<AuthOutcome> => {
    if (!local) {
      const token = request.headers.get("x-mcp-token");
      if (token === null || token === "") {
        return refuse(unauthorized("missing X-MCP-Token header", false), "no X-MCP-Token");
      }
      if (!constantTimeEqual(token, secret!)) {
        return refuse(unauthorized("invalid X-MCP-Token header", false), "wrong X-MCP-Token");
      }
    }

    const presented = presentedKey(request.headers);
    if (presented.kind === "missing") {
      return refuse(unauthorized(MISSING_KEY, false), "no API key");
    }
    if (presented.kind === "unsupported-scheme") {
      return refuse(
        unauthorized(
          "unsupported Authorization scheme: use Authorization: Bearer <API key>",
          false,
        ),
        "Authorization header without Bearer",
      );
    }
    const parsed = parseApiKey(presented.value);
    if (!parsed) {
      return refuse(
        unauthorized("malformed API key: expected guinness_<prefix>_<secret>", true),
        `malformed key in ${presented.header}`,
      );
    }
    const prefix = parsed.prefix;

    if (outstanding >= maxOutstanding) {
      return refuse(unavailable(UNAVAILABLE), `${outstanding} key lookups outstanding`, prefix);
    }
    let row: ApiKeyRecord | null | typeof TIMED_OUT;
    try {
      row = await lookup(prefix);
    } catch (error) {
      // DatabaseError messages are already free of the DSN password.
      const text = error instanceof Error ? error.message : String(error);
      return refuse(unavailable(UNAVAILABLE), `key lookup failed: ${text}`, prefix);
    }
    if (row === TIMED_OUT) {
      return refuse(
        unavailable(UNAVAILABLE),
        `key lookup took longer than ${options.dbTimeoutMs} ms`,
        prefix,
      );
    }
    if (row === null) {
      return refuse(unauthorized("invalid API key", true), "unknown or deleted key", prefix);
    }

    let matches: boolean;
    try {
      const record = row;
      matches = await cache.verify(
        parsed.key,
        record,
        () => limit.run(() => verifyApiKey(parsed.key, record, scrypt)),
      );
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      return refuse(
        unavailable("authentication temporarily unavailable; try again later"),
        `scrypt failed: ${text}`,
        prefix,
      );
    }
    if (!matches) {
      return refuse(unauthorized("invalid API key", true), "wrong secret", prefix);
    }
    if (row.revoked) return refuse(unauthorized("API key revoked", true), "revoked key", prefix);
    if (row.expired) return refuse(unauthorized("API key expired", true), "expired key", prefix);

    lastUsed.record(prefix);
    const scope: Scope = {
      keyPrefix: prefix,
      projectId: row.projectId,
      userId: row.userId,
      permission: row.permission,
    };
    return { ok: true, scope };
  };

  return {
    async authenticate(request: Request): Promise<AuthOutcome> {
      try {
        return await authenticate(request);
      } catch (error) {
        // Fail closed on anything unforeseen; the message is generic on purpose.
        const text = error instanceof Error ? error.name : typeof error;
        return refuse(
          unavailable("authentication temporarily unavailable; try again later"),
          `unexpected ${text}`,
        );
      }
    },
    settle: () => lastUsed.settle(),
    close: () => lastUsed.settle(),
  };
}
