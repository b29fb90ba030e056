/**
 * Throttled, fire-and-forget `last_used_at` writes: at most one per key per
 * interval from this process (and, through the conditional UPDATE, across
 * processes), never awaited on the request path. A failed write is logged
 * without secrets and forgotten, so the next request tries again.
 *
 * @module
 */

import type { Queryable } from "../db/mod.ts";
import { log } from "../log/mod.ts";
import { touchLastUsed } from "./key_store.ts";

/** Options for {@link LastUsedRecorder}. */
export interface LastUsedOptions {
  /** Minimum time between writes for one key, in ms (the contract's "once per minute": 60,000). */
  intervalMs: number;
  /** Bound on one write, in ms (default 5,000). */
  timeoutMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
  /** Called after each attempted write (tests): whether a row changed, or the error. */
  onWrite?: (keyPrefix: string, result: boolean | Error) => void;
}

/** Records key use in the background; see the module documentation. */
export class LastUsedRecorder {
  readonly #db: Queryable;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #onWrite?: LastUsedOptions["onWrite"];
  /** Key prefix → when this process last started a write for it. */
  readonly #started = new Map<string, number>();
  readonly #pending = new Set<Promise<void>>();

  /** Creates a recorder writing to `db`. */
  constructor(db: Queryable, options: LastUsedOptions) {
    if (!(options.intervalMs >= 0)) {
      throw new Error(`last_used_at interval must be >= 0 ms, got ${options.intervalMs}`);
    }
    this.#db = db;
    this.#intervalMs = options.intervalMs;
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#now = options.now ?? Date.now;
    this.#onWrite = options.onWrite;
  }

  /** Notes a successful use of `keyPrefix`; returns at once. */
  record(keyPrefix: string): void {
    const now = this.#now();
    const last = this.#started.get(keyPrefix);
    if (last !== undefined && now - last < this.#intervalMs) return;
    this.#started.set(keyPrefix, now);
    if (this.#started.size > 10_000) this.#sweep(now);
    const write = touchLastUsed(this.#db, keyPrefix, this.#intervalMs, this.#timeoutMs)
      .then((written) => this.#onWrite?.(keyPrefix, written))
      .catch((error: unknown) => {
        // Forget the attempt so the next request retries; the request itself already succeeded.
        if (this.#started.get(keyPrefix) === now) this.#started.delete(keyPrefix);
        log("warn", "auth", "could not update last_used_at", {
          keyPrefix,
          error: error instanceof Error ? error.message : String(error),
        });
        this.#onWrite?.(keyPrefix, error instanceof Error ? error : new Error(String(error)));
      });
    const tracked = write.finally(() => this.#pending.delete(tracked));
    this.#pending.add(tracked);
  }

  /** Resolves when every write started so far has finished (shutdown, tests). */
  async settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  #sweep(now: number): void {
    for (const [prefix, at] of this.#started) {
      if (now - at >= this.#intervalMs) this.#started.delete(prefix);
    }
  }
}
