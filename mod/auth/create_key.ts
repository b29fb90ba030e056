/**
 * Creating an API key: a fresh CSPRNG key, its scrypt hash with a new salt,
 * and the row. The full key exists only in the return value: it is shown
 * once and cannot be recovered from the database.
 *
 * @module
 */

import { DatabaseError, type Queryable } from "../db/mod.ts";
import { generateApiKey } from "./api_key.ts";
import { hashApiKey, nodeScrypt, type ScryptFunction } from "./key_hash.ts";
import { insertKey, type Permission } from "./key_store.ts";

/** What a new key is for. */
export interface CreateKeyOptions {
  /** Project the key may act on, or null for any project. */
  projectId: number | null;
  /** Owning user, or null. */
  userId: number | null;
  /** `read` (read-only tools) or `write` (all tools). */
  permission: Permission;
  /** Label shown by `keys list`. */
  name?: string | null;
  /** When the key stops working, or null/undefined for never. */
  expiresAt?: Date | null;
  /** scrypt implementation (tests). */
  scrypt?: ScryptFunction;
}

/** A newly created key. */
export interface CreatedKey {
  /** The full key `guinness_<prefix>_<secret>`: show it once, never store or log it. */
  key: string;
  /** The non-secret prefix. */
  prefix: string;
}

/** SQLSTATE unique_violation (PostgreSQL Appendix A). */
const UNIQUE_VIOLATION = "23505";

/**
 * Generates, hashes and stores a new key. A prefix collision (62^12 space,
 * so practically never) is retried with a new key.
 */
export async function createKey(db: Queryable, options: CreateKeyOptions): Promise<CreatedKey> {
  for (let attempt = 1;; attempt++) {
    const generated = generateApiKey();
    const stored = await hashApiKey(generated.key, options.scrypt ?? nodeScrypt);
    try {
      await insertKey(db, {
        keyPrefix: generated.prefix,
        keyHash: stored.keyHash,
        salt: stored.salt,
        projectId: options.projectId,
        userId: options.userId,
        permission: options.permission,
        name: options.name ?? null,
        expiresAt: options.expiresAt ?? null,
      });
      return { key: generated.key, prefix: generated.prefix };
    } catch (error) {
      if (error instanceof DatabaseError && error.code === UNIQUE_VIOLATION && attempt < 3) {
        continue;
      }
      throw error;
    }
  }
}
