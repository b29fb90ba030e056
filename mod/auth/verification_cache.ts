/**
 * The fast path of key verification: a successful scrypt check is remembered
 * for a short time, so scrypt runs once per key per window instead of on
 * every MCP request (reference mcp-and-auth.md §5.3). Concurrent first
 * requests for one key share one check. Failures are never remembered.
 *
 * The cache answers only "does this key match this stored hash"; the key's
 * row (revocation, expiry, deletion) is still read on every request, so a
 * revoked key is refused on its next request whatever the cache holds.
 *
 * @module
 */

import { sha256Hex } from "./constant_time.ts";
import type { StoredHash } from "./key_hash.ts";

/** Options for {@link VerificationCache}. */
export interface VerificationCacheOptions {
  /** How long a success is remembered, in ms (0 disables remembering; sharing stays). */
  ttlMs: number;
  /** Most entries kept; the oldest go first (default 10,000). */
  maxEntries?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** Remembers successful key verifications for a TTL; see the module documentation. */
export class VerificationCache {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  /** SHA-256(key, key_hash, salt) → expiry time. Neither the key nor the hash is kept. */
  readonly #entries = new Map<string, number>();
  readonly #inflight = new Map<string, Promise<boolean>>();

  /** Creates an empty cache. */
  constructor(options: VerificationCacheOptions) {
    if (!(options.ttlMs >= 0)) throw new Error(`cache TTL must be >= 0 ms, got ${options.ttlMs}`);
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** Number of remembered successes (expired ones included until swept). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * True when `key` matches `stored`: from memory when a success for this key
   * AND this stored hash is fresh (a re-keyed row misses), else by `check`,
   * shared with any concurrent call for the same pair.
   */
  async verify(key: string, stored: StoredHash, check: () => Promise<boolean>): Promise<boolean> {
    // The separator cannot occur in a key or in hex, so the triple is unambiguous.
    const id = sha256Hex(`${key}\n${stored.keyHash}\n${stored.salt}`);
    const expires = this.#entries.get(id);
    if (expires !== undefined) {
      if (expires > this.#now()) return true;
      this.#entries.delete(id);
    }
    let pending = this.#inflight.get(id);
    if (!pending) {
      pending = check().then((ok) => {
        if (ok && this.#ttlMs > 0) this.#remember(id);
        return ok;
      }).finally(() => this.#inflight.delete(id));
      this.#inflight.set(id, pending);
    }
    return await pending;
  }

  /** Forgets everything. */
  clear(): void {
    this.#entries.clear();
  }

  #remember(id: string): void {
    this.#entries.delete(id);
    this.#entries.set(id, this.#now() + this.#ttlMs);
    if (this.#entries.size <= this.#maxEntries) return;
    // Map iteration is insertion order, so the first entries are the oldest.
    const now = this.#now();
    for (const [entry, expiry] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && expiry > now) break;
      this.#entries.delete(entry);
    }
  }
}
