/**
 * A counting semaphore: at most `limit` tasks run at once, the rest wait in
 * FIFO order. Bounds work whose cost is memory or a blocking thread per call:
 * scrypt runs (16 MiB and one CPU each) and input-image decodes (up to 40
 * megapixels each).
 *
 * @module
 */

/** Runs tasks with at most `limit` in flight. */
export class ConcurrencyLimit {
  readonly #limit: number;
  #active = 0;
  readonly #waiting: Array<() => void> = [];

  /** Creates a limit; `limit` must be a positive integer. */
  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new Error(`concurrency limit must be a positive integer, got ${limit}`);
    }
    this.#limit = limit;
  }

  /** Tasks running now. */
  get active(): number {
    return this.#active;
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Runs `task` when a slot is free and resolves or rejects with it. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#active >= this.#limit) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    } else {
      this.#active++;
    }
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter, so #active stays counted.
      if (next) next();
      else this.#active--;
    }
  }
}
