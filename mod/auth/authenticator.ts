/**
 * Per-request authentication of `POST /mcp` (contract §5): the
 * `X-MCP-Token` shared secret, then the API key — format, row
 * lookup on every request ({@link KeyLookup}: single flight per prefix,
 * queued up to `dbTimeoutMs`, fail closed), the {@link VerificationCache}
 * (sliding TTL) and else scrypt through the {@link VerificationGate} (one run
 * per prefix in flight, a failure budget per prefix and source, a bounded
 * queue), revocation and expiry — and a throttled background `last_used_at`
 * write. One tenant flooding a prefix with wrong secrets cannot starve other
 * keys' verifications, nor lock out the owner of that prefix from another
 * address, cached or not (`failure_budget.ts`).
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
import { parseApiKey, prefixForLog, presentedKey } from "./api_key.ts";
import type { Authenticator, AuthFailure, AuthOutcome } from "./auth_outcome.ts";
import { constantTimeEqual } from "./constant_time.ts";
import { nodeScrypt, type ScryptFunction, verifyApiKey } from "./key_hash.ts";
import { findActiveKey } from "./key_store.ts";
import { KeyLookup } from "./key_lookup.ts";
import { LastUsedRecorder } from "./last_used.ts";
import { VerificationCache } from "./verification_cache.ts";
import { type GateResult, VerificationGate } from "./verification_gate.ts";

/** Options for {@link createAuthenticator}. */
export interface AuthenticatorOptions {
  /** Where `mcp_api_keys` lives. Not closed by the authenticator. */
  db: Queryable;
  /** Deployment environment; `local` skips the `X-MCP-Token` check. */
  environment: string;
  /** `CLOUDFRONT_SECRET_HEADER`; required unless `environment` is `local`. */
  cloudfrontSecret?: string;
  /** How long a successful scrypt verification is remembered after its last use, in ms. */
  cacheTtlMs: number;
  /** Minimum time between `last_used_at` writes per key, in ms (default 60,000). */
  lastUsedIntervalMs: number;
  /** Longest wait for the key lookup, queueing included, before answering 503, in ms. */
  dbTimeoutMs: number;
  /** Most scrypt runs at once (default 4; each takes 16 MiB and a core for ~50–80 ms). */
  maxConcurrentScrypt?: number;
  /** Prefixes that may wait for a scrypt run; beyond it 503 with `Retry-After` at once (default 32). */
  verifyQueueLimit?: number;
  /** Wrong secrets per prefix per source per minute before 401 without scrypt (default 10). */
  failuresPerMinute?: number;
  /** How long an unknown prefix is answered from memory, in ms (default 2,000; 0 = never). */
  unknownPrefixCacheMs?: number;
  /** Key lookups at once (default 4, the pool size of mod/db); the rest queue. */
  maxConcurrentLookups?: number;
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
const BUSY = "too many API key verifications in progress; retry in a second";
const PACED =
  "too many wrong secrets for this API key from many addresses; verifications of it are paced, retry shortly";

function unauthorized(message: string, invalidToken: boolean): AuthFailure {
  return { ok: false, status: 401, message, invalidToken };
}

function unavailable(message: string): AuthFailure {
  return { ok: false, status: 503, message };
}

/** postgres.js codes for a pooled connection that died while idle. */
const STALE_CONNECTION_CODES = new Set(["CONNECTION_CLOSED", "ECONNRESET", "EPIPE"]);

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
  const cache = new VerificationCache({ ttlMs: options.cacheTtlMs });
  const gate = new VerificationGate({
    concurrency: options.maxConcurrentScrypt ?? 4,
    queueLimit: options.verifyQueueLimit ?? 32,
    failureLimit: options.failuresPerMinute ?? 10,
  });
  const lastUsed = new LastUsedRecorder(options.db, {
    intervalMs: options.lastUsedIntervalMs,
    timeoutMs: Math.max(options.dbTimeoutMs, 1_000),
    onWrite: options.onLastUsedWrite,
  });
  const lookups = new KeyLookup({
    timeoutMs: options.dbTimeoutMs,
    unknownTtlMs: options.unknownPrefixCacheMs ?? 2_000,
    concurrency: options.maxConcurrentLookups ?? 4,
    // A pooled connection the server closed (restart, failover) fails its next
    // query with CONNECTION_CLOSED; the SELECT is idempotent, so it is retried
    // once on a fresh connection instead of answering 503.
    find: (prefix) =>
      findActiveKey(options.db, prefix).catch((error: unknown) => {
        if (error instanceof DatabaseError && STALE_CONNECTION_CODES.has(error.code)) {
          return findActiveKey(options.db, prefix);
        }
        throw error;
      }),
  });

  const refuse = (failure: AuthFailure, reason: string, keyPrefix?: string): AuthFailure => {
    log(failure.status === 503 ? "warn" : "info", "auth", `request refused: ${reason}`, {
      status: failure.status,
      // Only the generated prefix shape is printed; anything else could hold a secret.
      ...(keyPrefix !== undefined ? prefixForLog(keyPrefix) : {}),
    });
    return failure;
  };

  // Refusals of a flood (spent budget, crowded lane) would otherwise write a log line per
  // guess: per prefix and reason, one line a minute says how many were left out.
  const floodLines = new Map<string, { until: number; suppressed: number }>();
  const refuseFlood = (failure: AuthFailure, reason: string, prefix: string): AuthFailure => {
    const id = `${reason}\n${prefix}`;
    const now = Date.now();
    const seen = floodLines.get(id);
    if (seen && now < seen.until) {
      seen.suppressed++;
      return failure;
    }
    floodLines.delete(id);
    floodLines.set(id, { until: now + 60_000, suppressed: 0 });
    if (floodLines.size > 10_000) floodLines.delete(floodLines.keys().next().value!);
    log("info", "auth", `request refused: ${reason}`, {
      status: failure.status,
      ...prefixForLog(prefix),
      // Lines left out for this prefix and reason in the minute before this one.
      ...(seen ? { alsoRefusedSincePreviousLine: seen.suppressed } : {}),
      nextLineInSeconds: 60,
    });
    return failure;
  };

  const authenticate = async (request: Request, source: string): Promise<AuthOutcome> => {
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

    const id = VerificationCache.keyId(parsed.key);
    const known = cache.holds(id);
    const budget = known ? { kind: "ok" as const } : gate.budget(prefix, source);
    if (budget.kind === "spent") {
      // Nothing to learn from the row: unknown, wrong and throttled all answer 401, so a
      // flood of guesses from a spent source costs neither a query nor scrypt.
      return refuseFlood(
        unauthorized("invalid API key", true),
        "failure budget spent: too many wrong secrets for this prefix from this source in the last minute",
        prefix,
      );
    }
    if (budget.kind === "paced") {
      return refuseFlood(
        { ...unavailable(PACED), retryAfterSeconds: Math.ceil(budget.retryAfterMs / 1000) },
        "prefix under attack from many sources: verification allowance used up",
        prefix,
      );
    }
    // A key with a fresh success is served ahead of unknown ones (a flood of guesses queues behind).
    const found = await lookups.lookup(prefix, known);
    switch (found.kind) {
      case "error": {
        // DatabaseError messages are already free of the DSN password.
        const text = found.error instanceof Error ? found.error.message : String(found.error);
        return refuse(unavailable(UNAVAILABLE), `key lookup failed: ${text}`, prefix);
      }
      case "timeout":
        return refuse(
          unavailable(UNAVAILABLE),
          `key lookup took longer than ${options.dbTimeoutMs} ms`,
          prefix,
        );
      case "overloaded":
        return refuse(unavailable(UNAVAILABLE), found.reason, prefix);
      case "unknown":
        return refuse(
          unauthorized("invalid API key", true),
          found.cached ? "unknown or deleted key (remembered)" : "unknown or deleted key",
          prefix,
        );
      case "row":
        break;
    }
    const row = found.row;

    if (!cache.hit(id, row)) {
      let verdict: GateResult;
      try {
        verdict = await gate.verify(prefix, source, id, async () => {
          const matches = await verifyApiKey(parsed.key, row, scrypt);
          if (matches) cache.remember(id, row);
          return matches;
        });
      } catch (error) {
        const text = error instanceof Error ? error.message : String(error);
        return refuse(
          unavailable("authentication temporarily unavailable; try again later"),
          `scrypt failed: ${text}`,
          prefix,
        );
      }
      if (verdict === "busy") {
        return refuse(
          { ...unavailable(BUSY), retryAfterSeconds: 1 },
          `verification queue full (${gate.running} running, ${gate.queued} waiting)`,
          prefix,
        );
      }
      if (verdict === "crowded") {
        // A flood of guesses at one prefix, not an overloaded server: logged at info level.
        return refuseFlood(
          { ...unavailable(BUSY), retryAfterSeconds: 1 },
          "too many different keys for this prefix are waiting for verification",
          prefix,
        );
      }
      if (verdict === "throttled") {
        // Same answer as a wrong secret: a guesser learns nothing from hitting the budget.
        return refuseFlood(
          unauthorized("invalid API key", true),
          "failure budget spent: too many wrong secrets for this prefix from this source in the last minute",
          prefix,
        );
      }
      if (verdict === "paced") {
        const paced = gate.budget(prefix, source);
        return refuseFlood(
          {
            ...unavailable(PACED),
            retryAfterSeconds: paced.kind === "paced" ? Math.ceil(paced.retryAfterMs / 1000) : 1,
          },
          "prefix under attack from many sources: verification allowance used up",
          prefix,
        );
      }
      if (verdict === "mismatch") {
        return refuse(unauthorized("invalid API key", true), "wrong secret", prefix);
      }
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
    async authenticate(request: Request, source?: string): Promise<AuthOutcome> {
      try {
        // Requests without a source (no HTTP front: tests, tools) share one budget per prefix.
        return await authenticate(request, source ?? "");
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
