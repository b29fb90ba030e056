/**
 * A counting semaphore shared by owners (API keys): at most `limit` tasks
 * run at once, and at most `perOwner` of them for any one owner, so one
 * owner cannot hold every slot while others wait. Waiting tasks are served
 * in arrival order, skipping those whose owner already runs its share.
 * Tasks without an owner (stdio: one local client) count only against
 * `limit`.
 *
 * @module
 */

interface Waiter {
  owner: string | null;
  start: () => void;
}

/** Runs tasks with at most `limit` in flight, at most `perOwner` per owner. */
export class SharedLimit {
  readonly #limit: number;
  readonly #perOwner: number;
  #active = 0;
  readonly #byOwner = new Map<string, number>();
  readonly #waiting: Waiter[] = [];

  /** Creates a limit; both numbers must be positive integers, `perOwner` ≤ `limit`. */
  constructor(limit: number, perOwner: number) {
    for (const [name, value] of [["limit", limit], ["per-owner limit", perOwner]] as const) {
      if (!Number.isInteger(value) || value < 1) {
        throw new Error(`${name} must be a positive integer, got ${value}`);
      }
    }
    if (perOwner > limit) {
      throw new Error(`per-owner limit ${perOwner} is above the limit ${limit}`);
    }
    this.#limit = limit;
    this.#perOwner = perOwner;
  }

  /** Tasks running now. */
  get active(): number {
    return this.#active;
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Tasks of `owner` running now. */
  activeOf(owner: string): number {
    return this.#byOwner.get(owner) ?? 0;
  }

  /** Runs `task` for `owner` (null: no owner) when a slot is free for it. */
  async run<T>(owner: string | null, task: () => Promise<T>): Promise<T> {
    if (this.#mayStart(owner)) {
      this.#take(owner);
    } else {
      await new Promise<void>((start) => this.#waiting.push({ owner, start }));
    }
    try {
      return await task();
    } finally {
      this.#release(owner);
    }
  }

  #mayStart(owner: string | null): boolean {
    return this.#active < this.#limit && (owner === null || this.activeOf(owner) < this.#perOwner);
  }

  #take(owner: string | null): void {
    this.#active++;
    if (owner !== null) this.#byOwner.set(owner, this.activeOf(owner) + 1);
  }

  #release(owner: string | null): void {
    this.#active--;
    if (owner !== null) {
      const left = this.activeOf(owner) - 1;
      if (left > 0) this.#byOwner.set(owner, left);
      else this.#byOwner.delete(owner);
    }
    // The first waiter whose owner is below its share takes the slot.
    const next = this.#waiting.findIndex((w) => this.#mayStart(w.owner));
    if (next === -1) return;
    const [waiter] = this.#waiting.splice(next, 1);
    this.#take(waiter.owner);
    waiter.start();
  }
}
