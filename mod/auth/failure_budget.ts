/**
 * Per-prefix failure budget (issue 10): after `limit` wrong secrets for one
 * key prefix within a sliding window (a minute), further unverified attempts
 * on that prefix are refused without running scrypt, so guessing at a prefix
 * costs the server nothing once the budget is spent. The caller checks the
 * success cache first, so the owner of a key in active use is never locked out.
 *
 * @module
 */

/** Options for {@link FailureBudget}. */
export interface FailureBudgetOptions {
  /** Failures allowed per prefix within the window (>= 1). */
  limit: number;
  /** The window, in ms (default 60,000). */
  windowMs?: number;
  /** Most prefixes tracked; the least recently failed are dropped first (default 10,000). */
  maxPrefixes?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** Counts wrong secrets per prefix in a sliding window; see the module documentation. */
export class FailureBudget {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #maxPrefixes: number;
  readonly #now: () => number;
  /** Prefix → times of its recent failures, oldest first, at most `limit` kept. */
  readonly #failures = new Map<string, number[]>();

  /** Creates an empty budget. */
  constructor(options: FailureBudgetOptions) {
    if (!Number.isInteger(options.limit) || options.limit < 1) {
      throw new Error(`failure limit must be a positive integer, got ${options.limit}`);
    }
    this.#limit = options.limit;
    this.#windowMs = options.windowMs ?? 60_000;
    this.#maxPrefixes = options.maxPrefixes ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** True when `prefix` has had `limit` failures within the window. */
  exhausted(prefix: string): boolean {
    return this.#recent(prefix).length >= this.#limit;
  }

  /** Records one wrong secret for `prefix`. */
  fail(prefix: string): void {
    const times = this.#recent(prefix);
    times.push(this.#now());
    // Only the newest `limit` matter: exhaustion lasts until the oldest of them leaves the window.
    if (times.length > this.#limit) times.splice(0, times.length - this.#limit);
    this.#failures.delete(prefix);
    this.#failures.set(prefix, times);
    if (this.#failures.size > this.#maxPrefixes) {
      const oldest = this.#failures.keys().next().value;
      if (oldest !== undefined) this.#failures.delete(oldest);
    }
  }

  /** Prefixes tracked now (tests). */
  get size(): number {
    return this.#failures.size;
  }

  #recent(prefix: string): number[] {
    const times = this.#failures.get(prefix);
    if (!times) return [];
    const since = this.#now() - this.#windowMs;
    let drop = 0;
    while (drop < times.length && times[drop] <= since) drop++;
    if (drop > 0) times.splice(0, drop);
    if (times.length === 0) this.#failures.delete(prefix);
    return times;
  }
}
