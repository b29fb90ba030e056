/**
 * The per-client share of the connection guard: at most `maxOpen`
 * connections open at once per client key, and new connections at most
 * `ratePerSecond` a second per key (a token bucket holding up to
 * `burst`). Keys are those of `client_address.ts`.
 *
 * Memory stays bounded by recent activity: a key is kept while it has open
 * connections or its bucket is refilling, and {@link PeerLimits.prune}
 * drops the rest.
 *
 * @module
 */

/** Options of {@link PeerLimits}. */
export interface PeerLimitsOptions {
  /** Most open connections per key. */
  maxOpen: number;
  /** New connections per key per second, on average. */
  ratePerSecond: number;
  /** Most new connections per key in a burst (the bucket's size). */
  burst: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** Why a connection was refused. */
export type PeerRefusal = "rate" | "share";

interface Entry {
  open: number;
  tokens: number;
  at: number;
}

/** See the module documentation. */
export class PeerLimits {
  readonly #o: PeerLimitsOptions;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  /** Creates empty limits. */
  constructor(options: PeerLimitsOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** Open connections of `key`. */
  open(key: string): number {
    return this.#entries.get(key)?.open ?? 0;
  }

  /** The most new connections one key may open in a burst. */
  get burst(): number {
    return this.#o.burst;
  }

  /** Milliseconds until `key` may open a connection again (0: it may now). */
  nextTokenMs(key: string): number {
    const entry = this.#entries.get(key);
    if (!entry) return 0;
    this.#refill(entry, this.#now());
    return entry.tokens >= 1 ? 0 : ((1 - entry.tokens) * 1000) / this.#o.ratePerSecond;
  }

  /** Keys tracked now (tests). */
  get size(): number {
    return this.#entries.size;
  }

  #refill(entry: Entry, now: number): void {
    const rate = this.#o.ratePerSecond / 1000;
    entry.tokens = Math.min(this.#o.burst, entry.tokens + (now - entry.at) * rate);
    entry.at = now;
  }

  /**
   * Admits one new connection of `key` (counted open until
   * {@link release}), or says why not: `rate` when it connects faster than
   * its rate, `share` when it already has `maxOpen` open.
   */
  admit(key: string): PeerRefusal | null {
    const now = this.#now();
    let entry = this.#entries.get(key);
    if (!entry) {
      entry = { open: 0, tokens: this.#o.burst, at: now };
      this.#entries.set(key, entry);
    } else {
      this.#refill(entry, now);
    }
    if (entry.tokens < 1) return "rate";
    entry.tokens -= 1;
    if (entry.open >= this.#o.maxOpen) return "share";
    entry.open++;
    return null;
  }

  /** One connection of `key` closed. */
  release(key: string): void {
    const entry = this.#entries.get(key);
    if (entry && entry.open > 0) entry.open--;
  }

  /** Forgets keys with nothing open and a full bucket. */
  prune(): void {
    const now = this.#now();
    for (const [key, entry] of this.#entries) {
      if (entry.open > 0) continue;
      this.#refill(entry, now);
      if (entry.tokens >= this.#o.burst) this.#entries.delete(key);
    }
  }
}
