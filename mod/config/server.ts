/**
 * The `[server]`, `[auth]` and `[backend]` parts of the resolved config: the
 * transport and its HTTP limits, the checks that keep an HTTP server from
 * starting unprotected (the CloudFront secret outside "local", a shared
 * database for fronts and workers), the trusted proxies, API-key checking,
 * and the design-code backend read from the environment.
 *
 * @module
 */

import { parseAddressRange } from "../http/client_address.ts";
import { ConfigError } from "./error.ts";
import type { ResolvedConfig } from "./resolved.ts";
import type { RawConfig } from "./schema.ts";

/**
 * Resolves `[server]`, `[auth]` and `[backend]` with their secrets from the
 * environment.
 *
 * @param raw validated raw config
 * @param env environment variables (`MCP_ENV`, `CLOUDFRONT_SECRET_HEADER`,
 *   `DATABASE_URL`, `BACKEND_INTERNAL_URL`, `BACKEND_INTERNAL_API_KEY`)
 * @param where the config file, or "defaults", for error messages
 * @param abs makes a path from the config absolute
 * @throws ConfigError naming the key or variable that is missing or wrong
 */
export function resolveServer(
  raw: Pick<RawConfig, "server" | "auth" | "backend">,
  env: Record<string, string | undefined>,
  where: string,
  abs: (path: string) => string,
): Pick<ResolvedConfig, "server" | "auth" | "backend"> {
  const nonEmpty = (v: string | undefined) => v === undefined || v === "" ? undefined : v;

  const environment = nonEmpty(env.MCP_ENV) ?? raw.server.environment;
  const cloudfrontSecret = nonEmpty(env.CLOUDFRONT_SECRET_HEADER);
  if (raw.server.transport === "http" && environment !== "local" && !cloudfrontSecret) {
    throw new ConfigError(
      `${where}: server.environment is "${environment}" but CLOUDFRONT_SECRET_HEADER is not set; ` +
        `set it (X-MCP-Token is required outside "local"), or set MCP_ENV=local for local use`,
    );
  }

  if (raw.server.role !== "all") {
    if (raw.server.transport !== "http") {
      throw new ConfigError(
        `${where}: server.role = "${raw.server.role}" needs server.transport = "http", got "${raw.server.transport}"`,
      );
    }
    if (!nonEmpty(env.DATABASE_URL)) {
      throw new ConfigError(
        `${where}: server.role = "${raw.server.role}" needs DATABASE_URL: fronts and workers share ` +
          `the job queue through a PostgreSQL server (the embedded database serves one replica)`,
      );
    }
  }

  const trustedProxies = raw.server.trusted_proxies.map((entry, i) => {
    try {
      return parseAddressRange(entry);
    } catch (error) {
      throw new ConfigError(
        `${where}: server.trusted_proxies[${i}]: ${(error as Error).message} ` +
          `(write an address such as "10.0.0.7" or a range such as "10.0.0.0/8")`,
      );
    }
  });

  let backend: ResolvedConfig["backend"];
  const backendUrl = nonEmpty(env.BACKEND_INTERNAL_URL);
  if (backendUrl) {
    let parsed: URL;
    try {
      parsed = new URL(backendUrl);
    } catch {
      throw new ConfigError(`BACKEND_INTERNAL_URL is not a valid URL: "${backendUrl}"`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new ConfigError(`BACKEND_INTERNAL_URL must be http(s), got "${parsed.protocol}"`);
    }
    backend = {
      url: backendUrl.replace(/\/+$/, ""),
      apiKey: nonEmpty(env.BACKEND_INTERNAL_API_KEY),
      timeoutMs: raw.backend.timeout_ms,
      maxResponseBytes: raw.backend.max_response_bytes,
    };
  }

  return {
    server: {
      transport: raw.server.transport,
      host: raw.server.host,
      port: raw.server.port,
      environment,
      allowedOrigins: raw.server.allowed_origins.map((o) => new URL(o).origin),
      shutdownGraceMs: raw.server.shutdown_grace_seconds * 1000,
      dataDir: abs(raw.server.data_dir),
      headerTimeoutMs: raw.server.header_timeout_seconds * 1000,
      bodyMinBytesPerSecond: raw.server.body_min_bytes_per_second,
      idleTimeoutMs: raw.server.idle_timeout_seconds * 1000,
      maxConnections: raw.server.max_connections,
      // Shares of max_connections: a smaller max_connections lowers them with it.
      maxConnectionsPerClient: Math.min(
        raw.server.max_connections_per_client,
        raw.server.max_connections,
      ),
      clientConnectionsPerSecond: raw.server.client_connections_per_second,
      maxPendingHeads: Math.min(raw.server.max_pending_heads, raw.server.max_connections),
      trustedProxies,
      forwardedHeader: raw.server.forwarded_header,
      maxRequestsPerKey: raw.server.max_requests_per_key,
      role: raw.server.role,
    },
    auth: {
      cacheTtlMs: raw.auth.cache_seconds * 1000,
      dbTimeoutMs: raw.auth.db_timeout_ms,
      lastUsedIntervalMs: raw.auth.last_used_interval_seconds * 1000,
      scryptConcurrency: raw.auth.scrypt_concurrency,
      verifyQueueLimit: raw.auth.verify_queue_limit,
      failuresPerMinute: raw.auth.failures_per_minute,
      unknownPrefixCacheMs: raw.auth.unknown_prefix_cache_ms,
      databaseUrl: nonEmpty(env.DATABASE_URL),
      cloudfrontSecret,
    },
    backend,
  };
}
