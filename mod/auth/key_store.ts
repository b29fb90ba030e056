/**
 * The SQL behind API keys: the per-request lookup, creation, listing,
 * revocation, soft deletion and the throttled `last_used_at` write. Every
 * statement is plain PostgreSQL, run on a server or the embedded default alike.
 *
 * @module
 */

import type { Queryable } from "../db/mod.ts";
import { log } from "../log/mod.ts";

/** Permission of a key. */
export type Permission = "read" | "write";

/** What a stored key is: its prefix, its scrypt hash and salt, and what it may do. */
export interface StoredKey {
  /** Non-secret prefix. */
  keyPrefix: string;
  /** scrypt output, hex. */
  keyHash: string;
  /** scrypt salt, hex text. */
  salt: string;
  /** Bound project, or null for an unbound key. */
  projectId: number | null;
  /** Owning user, or null. */
  userId: number | null;
  /** `read` or `write`. */
  permission: Permission;
}

/** A key row as the authenticator needs it; validity is computed by the database clock. */
export interface ApiKeyRecord extends StoredKey {
  /** `revoked_at` is set. */
  revoked: boolean;
  /** `expires_at` is set and not in the future. */
  expired: boolean;
}

/** Lifecycle state shown by `keys list`. */
export type KeyState = "active" | "revoked" | "expired" | "deleted";

/** One key as listed: everything except the hash and salt. */
export interface ApiKeyListing {
  /** Non-secret prefix. */
  keyPrefix: string;
  /** Label, or null. */
  name: string | null;
  /** Bound project, or null. */
  projectId: number | null;
  /** Owning user, or null. */
  userId: number | null;
  /** `read` or `write`. */
  permission: string;
  /** When it was created. */
  createdAt: Date;
  /** Last successful use (throttled), or null. */
  lastUsedAt: Date | null;
  /** When it expires, or null. */
  expiresAt: Date | null;
  /** Derived state; `deleted` wins over `revoked`, which wins over `expired`. */
  state: KeyState;
}

/** What `keys create` stores. */
export interface NewApiKey extends StoredKey {
  /** Label, or null. */
  name: string | null;
  /** Expiry, or null for none. */
  expiresAt: Date | null;
}

/** bigint columns arrive as strings; ids must fit a JS number exactly. */
function toId(value: unknown, column: string): number | null {
  if (value === null || value === undefined) return null;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new Error(`mcp_api_keys.${column} is not a safe integer: ${String(value)}`);
  }
  return n;
}

/**
 * Reads the key row for `prefix` with `deleted_at IS NULL` (contract §5).
 * Revocation and expiry are evaluated with the database's `now()` so app and
 * database clocks cannot disagree. Returns null for an unknown or deleted prefix.
 */
export async function findActiveKey(
  db: Queryable,
  prefix: string,
  timeoutMs?: number,
): Promise<ApiKeyRecord | null> {
  const rows = await db.query(
    `SELECT key_prefix, key_hash, salt, project_id, user_id, permission,
            revoked_at IS NOT NULL AS revoked,
            (expires_at IS NOT NULL AND expires_at <= now()) AS expired
       FROM mcp_api_keys
      WHERE key_prefix = $1 AND deleted_at IS NULL`,
    [prefix],
    // Runs on every request: parsed and planned once per pooled connection.
    { timeoutMs, prepare: true },
  );
  if (rows.length === 0) return null;
  const row = rows[0];
  let permission: Permission = "read";
  if (row.permission === "write" || row.permission === "read") {
    permission = row.permission;
  } else {
    // A row written by something else with an unknown permission gets the least privilege.
    log("warn", "auth", "API key has an unknown permission; treating it as read", {
      keyPrefix: prefix,
      permission: String(row.permission),
    });
  }
  return {
    keyPrefix: String(row.key_prefix),
    keyHash: String(row.key_hash ?? ""),
    salt: String(row.salt ?? ""),
    projectId: toId(row.project_id, "project_id"),
    userId: toId(row.user_id, "user_id"),
    permission,
    revoked: row.revoked === true,
    expired: row.expired === true,
  };
}

/** Inserts a new key row. Rejects (unique violation) when the prefix exists, even deleted. */
export async function insertKey(db: Queryable, key: NewApiKey): Promise<void> {
  await db.query(
    `INSERT INTO mcp_api_keys (key_prefix, key_hash, salt, project_id, user_id, permission, name, expires_at)
     VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6, $7, $8::timestamptz)`,
    [
      key.keyPrefix,
      key.keyHash,
      key.salt,
      key.projectId === null ? null : String(key.projectId),
      key.userId === null ? null : String(key.userId),
      key.permission,
      key.name,
      key.expiresAt,
    ],
  );
}

/** All keys, oldest first, deleted ones included (state `deleted`). Never the hash or salt. */
export async function listKeys(db: Queryable): Promise<ApiKeyListing[]> {
  const rows = await db.query(
    `SELECT key_prefix, name, project_id, user_id, permission, created_at, last_used_at, expires_at,
            CASE WHEN deleted_at IS NOT NULL THEN 'deleted'
                 WHEN revoked_at IS NOT NULL THEN 'revoked'
                 WHEN expires_at IS NOT NULL AND expires_at <= now() THEN 'expired'
                 ELSE 'active' END AS state
       FROM mcp_api_keys
      ORDER BY created_at, id`,
  );
  return rows.map((row) => ({
    keyPrefix: String(row.key_prefix),
    name: row.name === null ? null : String(row.name),
    projectId: toId(row.project_id, "project_id"),
    userId: toId(row.user_id, "user_id"),
    permission: String(row.permission),
    createdAt: row.created_at as Date,
    lastUsedAt: (row.last_used_at as Date | null) ?? null,
    expiresAt: (row.expires_at as Date | null) ?? null,
    state: row.state as KeyState,
  }));
}

/** Result of a revoke or delete: done now, done before, or no such prefix. */
export type ChangeResult = "changed" | "unchanged" | "unknown";

/**
 * `changed` only when the UPDATE returned the row of `prefix` itself: the
 * database confirms which key it changed, not merely that something ran.
 */
async function changed(
  db: Queryable,
  prefix: string,
  rows: readonly Record<string, unknown>[],
): Promise<ChangeResult> {
  if (rows.length === 1 && rows[0].key_prefix === prefix) return "changed";
  if (rows.length > 0) {
    throw new Error(
      `the database changed ${rows.length} rows (${
        rows.map((r) => String(r.key_prefix)).join(", ")
      }) for prefix ${prefix}`,
    );
  }
  return await exists(db, prefix) ? "unchanged" : "unknown";
}

/** Sets `revoked_at` on a live key. `unchanged` when it was already revoked or is deleted. */
export async function revokeKey(db: Queryable, prefix: string): Promise<ChangeResult> {
  const rows = await db.query(
    `UPDATE mcp_api_keys SET revoked_at = now()
      WHERE key_prefix = $1 AND deleted_at IS NULL AND revoked_at IS NULL
      RETURNING key_prefix`,
    [prefix],
  );
  return await changed(db, prefix, rows);
}

/** Soft-deletes a key (sets `deleted_at`). `unchanged` when it was already deleted. */
export async function deleteKey(db: Queryable, prefix: string): Promise<ChangeResult> {
  const rows = await db.query(
    `UPDATE mcp_api_keys SET deleted_at = now()
      WHERE key_prefix = $1 AND deleted_at IS NULL
      RETURNING key_prefix`,
    [prefix],
  );
  return await changed(db, prefix, rows);
}

async function exists(db: Queryable, prefix: string): Promise<boolean> {
  const rows = await db.query("SELECT 1 AS found FROM mcp_api_keys WHERE key_prefix = $1", [
    prefix,
  ]);
  return rows.length > 0;
}

/**
 * Sets `last_used_at = now()` unless it was set less than `intervalMs` ago
 * (the conditional UPDATE keeps several server processes to one write per
 * window too). Returns true when a row was written.
 */
export async function touchLastUsed(
  db: Queryable,
  prefix: string,
  intervalMs: number,
  timeoutMs?: number,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE mcp_api_keys SET last_used_at = now()
      WHERE key_prefix = $1 AND deleted_at IS NULL
        AND (last_used_at IS NULL OR last_used_at < now() - $2::double precision * interval '1 millisecond')
      RETURNING 1 AS written`,
    [prefix, intervalMs],
    { timeoutMs },
  );
  return rows.length > 0;
}
