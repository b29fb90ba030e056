/**
 * The fast path of key verification: a successful scrypt check is remembered
 * while the key keeps being used, so scrypt runs once per key instead of on
 * every MCP request (reference mcp-and-auth.md §5.3). The TTL slides: every
 * hit pushes the expiry out again, so an active key never falls back to
 * scrypt at a fixed moment (issue 10: an active key waited 10.7 s behind a
 * scrypt flood when its fixed 30 s entry expired). Failures are never
 * remembered here; {@link FailureBudget} counts them.
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
  /** How long a success is remembered after its last use, in ms (0 disables remembering). */
  ttlMs: number;
  /** Most entries kept; the least recently used go first (default 10,000). */
  maxEntries?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** Remembers successful key verifications with a sliding TTL; see the module documentation. */
export class VerificationCache {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  /** SHA-256(key, key_hash, salt) → expiry time. Neither the key nor the hash is kept. */
  readonly #entries = new Map<string, number>();

  /** Creates an empty cache. */
  constructor(options: VerificationCacheOptions) {
    if (!(options.ttlMs >= 0)) throw new Error(`cache TTL must be >= 0 ms, got ${options.ttlMs}`);
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The cache id of `key` against `stored`: a re-keyed row (new hash or
   * salt) gets a different id, so an old success never applies to it.
   */
  static keyId(key: string, stored: StoredHash): string {
    // The separator cannot occur in a key or in hex, so the triple is unambiguous.
    return sha256Hex(`${key}\n${stored.keyHash}\n${stored.salt}`);
  }

  /** Number of remembered successes (expired ones included until touched or evicted). */
  get size(): number {
    return this.#entries.size;
  }

  /** True when a success for `id` is fresh; the hit slides its expiry forward. */
  hit(id: string): boolean {
    const expires = this.#entries.get(id);
    if (expires === undefined) return false;
    if (expires <= this.#now()) {
      this.#entries.delete(id);
      return false;
    }
    this.remember(id);
    return true;
  }

  /** Records a verified success for `id` (no-op when the TTL is 0). */
  remember(id: string): void {
    if (this.#ttlMs <= 0) return;
    // Delete first so the entry moves to the end: Map order is then least recently used first.
    this.#entries.delete(id);
    this.#entries.set(id, this.#now() + this.#ttlMs);
    if (this.#entries.size <= this.#maxEntries) return;
    const now = this.#now();
    for (const [entry, expiry] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && expiry > now) break;
      this.#entries.delete(entry);
    }
  }

  /** Forgets everything. */
  clear(): void {
    this.#entries.clear();
  }
}
