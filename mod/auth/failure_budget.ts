/**
 * The wrong-secret budget of API-key verification, per key prefix **and
 * source** (the client address key the HTTP server passes: an IPv4
 * address, an IPv6 /64, or what a trusted proxy names), in a sliding window
 * (a minute). With `limit` = `[auth] failures_per_minute`:
 *
 * - **per source**: after `limit` wrong secrets for a prefix from one
 *   source, that source's further unverified attempts on the prefix are
 *   refused without scrypt (`spent`). Guesses from elsewhere do not spend
 *   the owner's budget, so a known prefix and 10 wrong secrets a minute
 *   from an attacker no longer lock the owner out, cached or not.
 * - **per prefix, under attack from many sources**: once `limit` different
 *   sources have had wrong secrets for a prefix within the window, sources
 *   that have not verified its right secret in the last
 *   `goodSourceTtlMs` share an allowance of `limit` verifications per
 *   window (beyond it `paced`, to be answered 503 with `Retry-After`). The
 *   right secret is still verified at that bounded rate, sources that
 *   verified it recently are not paced, and the scrypt work one prefix can
 *   cost stays bounded however many addresses guess at it.
 *
 * The caller checks the success cache first, so a key in active use skips
 * all of this. Memory is bounded: at most `maxPrefixes` prefixes (least
 * recently touched dropped first), per prefix at most `4 × limit` failing
 * sources and {@link MAX_GOOD_SOURCES} good ones.
 *
 * @module
 */

/** Options for {@link FailureBudget}. */
export interface FailureBudgetOptions {
  /** Wrong secrets per prefix per source within the window (>= 1); see the module documentation. */
  limit: number;
  /** The window, in ms (default 60,000). */
  windowMs?: number;
  /** How long a source that verified a prefix's right secret is not paced, in ms (default 24 h). */
  goodSourceTtlMs?: number;
  /** Most prefixes tracked; the least recently touched are dropped first (default 10,000). */
  maxPrefixes?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** Most sources remembered per prefix as having verified its right secret. */
export const MAX_GOOD_SOURCES = 32;

/**
 * May a source try a secret for a prefix now: `ok`; `spent` (this source's
 * budget for it is used up); `paced` (the prefix is under attack from many
 * sources and its allowance is used up until `retryAfterMs` from now).
 */
export type BudgetVerdict =
  | { kind: "ok" }
  | { kind: "spent" }
  | { kind: "paced"; retryAfterMs: number };

interface PrefixState {
  /** Source → times of its recent failures, oldest first, at most `limit` kept. */
  failures: Map<string, number[]>;
  /** Times of verifications admitted under attack, oldest first. */
  allowance: number[];
  /** Source → when it last verified the right secret. */
  good: Map<string, number>;
}

/** See the module documentation. */
export class FailureBudget {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #goodTtlMs: number;
  readonly #maxPrefixes: number;
  readonly #now: () => number;
  readonly #prefixes = new Map<string, PrefixState>();

  /** Creates an empty budget. */
  constructor(options: FailureBudgetOptions) {
    if (!Number.isInteger(options.limit) || options.limit < 1) {
      throw new Error(`failure limit must be a positive integer, got ${options.limit}`);
    }
    this.#limit = options.limit;
    this.#windowMs = options.windowMs ?? 60_000;
    this.#goodTtlMs = options.goodSourceTtlMs ?? 24 * 3_600_000;
    this.#maxPrefixes = options.maxPrefixes ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** Prefixes tracked now (tests). */
  get size(): number {
    return this.#prefixes.size;
  }

  /** Whether `source` may try a secret for `prefix` now; consumes nothing. */
  verdict(prefix: string, source: string): BudgetVerdict {
    const state = this.#state(prefix, false);
    if (!state) return { kind: "ok" };
    const now = this.#now();
    if (this.#recent(state.failures.get(source), now).length >= this.#limit) {
      return { kind: "spent" };
    }
    if (!this.#underAttack(state, now) || this.#isGood(state, source, now)) return { kind: "ok" };
    const used = this.#trim(state.allowance, now);
    if (used.length < this.#limit) return { kind: "ok" };
    return { kind: "paced", retryAfterMs: Math.max(1, used[0] + this.#windowMs - now) };
  }

  /**
   * {@link verdict}, and when it is `ok` for a prefix under attack, takes
   * one verification of its allowance (call right before running scrypt).
   */
  admit(prefix: string, source: string): BudgetVerdict {
    const verdict = this.verdict(prefix, source);
    if (verdict.kind !== "ok") return verdict;
    const state = this.#state(prefix, false);
    const now = this.#now();
    if (state && this.#underAttack(state, now) && !this.#isGood(state, source, now)) {
      state.allowance.push(now);
    }
    return verdict;
  }

  /** Whether `source` verified the right secret of `prefix` recently (it is not paced). */
  isGood(prefix: string, source: string): boolean {
    const state = this.#prefixes.get(prefix);
    return state !== undefined && this.#isGood(state, source, this.#now());
  }

  /** Records one wrong secret for `prefix` from `source`. */
  fail(prefix: string, source: string): void {
    const state = this.#state(prefix, true)!;
    const now = this.#now();
    const times = this.#recent(state.failures.get(source), now);
    times.push(now);
    // Only the newest `limit` matter: exhaustion lasts until the oldest of them leaves the window.
    if (times.length > this.#limit) times.splice(0, times.length - this.#limit);
    state.failures.delete(source);
    state.failures.set(source, times);
    if (state.failures.size > 4 * this.#limit) {
      state.failures.delete(state.failures.keys().next().value!);
    }
  }

  /** Records that `source` verified the right secret of `prefix`. */
  succeed(prefix: string, source: string): void {
    const state = this.#state(prefix, true)!;
    state.good.delete(source);
    state.good.set(source, this.#now());
    if (state.good.size > MAX_GOOD_SOURCES) state.good.delete(state.good.keys().next().value!);
  }

  /** Whether `limit` different sources failed on `state`'s prefix within the window. */
  #underAttack(state: PrefixState, now: number): boolean {
    let sources = 0;
    for (const [source, times] of state.failures) {
      if (this.#recent(times, now).length === 0) state.failures.delete(source);
      else sources++;
    }
    return sources >= this.#limit;
  }

  #isGood(state: PrefixState, source: string, now: number): boolean {
    const at = state.good.get(source);
    return at !== undefined && now - at < this.#goodTtlMs;
  }

  /** The prefix's state (most recently touched last), created when `create`. */
  #state(prefix: string, create: boolean): PrefixState | undefined {
    let state = this.#prefixes.get(prefix);
    if (state) {
      this.#prefixes.delete(prefix);
      if (!create && this.#idle(state)) return undefined;
      this.#prefixes.set(prefix, state);
      return state;
    }
    if (!create) return undefined;
    state = { failures: new Map(), allowance: [], good: new Map() };
    this.#prefixes.set(prefix, state);
    if (this.#prefixes.size > this.#maxPrefixes) {
      this.#prefixes.delete(this.#prefixes.keys().next().value!);
    }
    return state;
  }

  /** True (and the state may be dropped) when nothing in it still counts. */
  #idle(state: PrefixState): boolean {
    const now = this.#now();
    this.#underAttack(state, now); // drops sources without recent failures
    this.#trim(state.allowance, now);
    for (const [source, at] of state.good) {
      if (now - at >= this.#goodTtlMs) state.good.delete(source);
    }
    return state.failures.size === 0 && state.allowance.length === 0 && state.good.size === 0;
  }

  /** `times` without the entries that left the window (in place). */
  #trim(times: number[], now: number): number[] {
    const since = now - this.#windowMs;
    let drop = 0;
    while (drop < times.length && times[drop] <= since) drop++;
    if (drop > 0) times.splice(0, drop);
    return times;
  }

  #recent(times: number[] | undefined, now: number): number[] {
    return times ? this.#trim(times, now) : [];
  }
}
