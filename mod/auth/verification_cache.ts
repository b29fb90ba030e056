/**
 * The fast path of key verification: a successful scrypt check is remembered
 * while the key keeps being used, so scrypt runs once per key instead of on
 * every MCP request, as Unkey and Kinde cache verifications for a short TTL
 * (docs.kinde.com "API key best practice"). The TTL slides: every
 * hit pushes the expiry out again, so an active key never falls back to
 * scrypt at a fixed moment (with a fixed 30 s entry, an active key once waited
 * 10.7 s behind a scrypt flood when its entry expired). Failures are never
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
  /**
   * SHA-256(key) → expiry time and SHA-256 of the stored hash and salt it
   * was verified against. Neither the key nor the hash is kept.
   */
  readonly #entries = new Map<string, { expires: number; stored: string }>();

  /** Creates an empty cache. */
  constructor(options: VerificationCacheOptions) {
    if (!(options.ttlMs >= 0)) throw new Error(`cache TTL must be >= 0 ms, got ${options.ttlMs}`);
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** The cache id of a presented key: its SHA-256, so the key itself is never kept. */
  static keyId(key: string): string {
    return sha256Hex(key);
  }

  /** Number of remembered successes (expired ones included until touched or evicted). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * True when key `id` has a fresh success against `stored` (a re-keyed row,
   * with another hash or salt, misses); the hit slides the expiry forward.
   */
  hit(id: string, stored: StoredHash): boolean {
    if (!this.holds(id)) return false;
    if (this.#entries.get(id)!.stored !== storedDigest(stored)) return false;
    this.remember(id, stored);
    return true;
  }

  /**
   * True when key `id` has a fresh success against some stored hash. Lets
   * the caller refuse a throttled prefix's unknown keys before reading the
   * row; a true answer still needs {@link hit} against the current row.
   */
  holds(id: string): boolean {
    const entry = this.#entries.get(id);
    if (entry === undefined) return false;
    if (entry.expires <= this.#now()) {
      this.#entries.delete(id);
      return false;
    }
    return true;
  }

  /** Records a verified success of key `id` against `stored` (no-op when the TTL is 0). */
  remember(id: string, stored: StoredHash): void {
    if (this.#ttlMs <= 0) return;
    // Delete first so the entry moves to the end: Map order is then least recently used first.
    this.#entries.delete(id);
    this.#entries.set(id, { expires: this.#now() + this.#ttlMs, stored: storedDigest(stored) });
    if (this.#entries.size <= this.#maxEntries) return;
    const now = this.#now();
    for (const [entry, { expires }] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && expires > now) break;
      this.#entries.delete(entry);
    }
  }

  /** Forgets everything. */
  clear(): void {
    this.#entries.clear();
  }
}

/** A fixed-size stand-in for a stored hash and salt. */
function storedDigest(stored: StoredHash): string {
  // The separator cannot occur in hex, so the pair is unambiguous.
  return sha256Hex(`${stored.keyHash}\n${stored.salt}`);
}
