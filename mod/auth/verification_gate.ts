/**
 * Who may run scrypt, and when (issue 10): one tenant hammering a prefix
 * with wrong secrets must not starve everyone else's verifications.
 *
 * - Per prefix, at most one scrypt is in flight; other candidates for that
 *   prefix wait their turn, and requests presenting the very same key share
 *   the in-flight result instead of queueing again.
 * - Per prefix, a {@link FailureBudget}: once spent, the answer is
 *   `throttled` without scrypt (checked when a request arrives and again
 *   when its turn comes).
 * - At most `failureLimit` distinct candidates wait per prefix: more could
 *   not all be tried before the budget stops them, so they are `crowded` at once.
 * - Globally, `concurrency` scrypt runs at once and at most `queueLimit`
 *   prefixes waiting for a run; beyond that the answer is `busy` at once
 *   (the caller answers 503 with `Retry-After`), never a long wait. Since a
 *   prefix holds at most one place in that queue, one prefix cannot fill it.
 *
 * @module
 */

import { ConcurrencyLimit } from "../queue/mod.ts";
import { FailureBudget } from "./failure_budget.ts";

/** Options for {@link VerificationGate}. */
export interface VerificationGateOptions {
  /** scrypt runs at once (each takes 16 MiB and a thread-pool thread for ~50–80 ms). */
  concurrency: number;
  /** Prefixes that may wait for a scrypt slot; more are refused as `busy`. */
  queueLimit: number;
  /** Wrong secrets per prefix per window before `throttled`. */
  failureLimit: number;
  /** The failure window, in ms (default 60,000). */
  windowMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/**
 * What became of one verification: the key matched, did not match, or was
 * not tried because the prefix spent its failure budget (`throttled`), the
 * global verification queue is full (`busy`), or too many distinct keys for
 * this prefix are already waiting (`crowded`).
 */
export type GateResult = "match" | "mismatch" | "throttled" | "busy" | "crowded";

/** One prefix's serial lane. */
interface Lane {
  /** Settles when the last candidate queued so far has had its turn. */
  tail: Promise<unknown>;
  /** Candidate id → its pending result (running or waiting). */
  pending: Map<string, Promise<GateResult>>;
}

/** Bounds and orders scrypt runs; see the module documentation. */
export class VerificationGate {
  readonly #slots: ConcurrencyLimit;
  readonly #queueLimit: number;
  readonly #failureLimit: number;
  readonly #budget: FailureBudget;
  readonly #lanes = new Map<string, Lane>();

  /** Creates an idle gate. */
  constructor(options: VerificationGateOptions) {
    if (!Number.isInteger(options.queueLimit) || options.queueLimit < 1) {
      throw new Error(
        `verification queue limit must be a positive integer, got ${options.queueLimit}`,
      );
    }
    this.#slots = new ConcurrencyLimit(options.concurrency);
    this.#queueLimit = options.queueLimit;
    this.#failureLimit = options.failureLimit;
    this.#budget = new FailureBudget({
      limit: options.failureLimit,
      windowMs: options.windowMs,
      now: options.now,
    });
  }

  /** True when `prefix` has spent its failure budget (no scrypt for it until failures age out). */
  exhausted(prefix: string): boolean {
    return this.#budget.exhausted(prefix);
  }

  /** scrypt runs in flight now. */
  get running(): number {
    return this.#slots.active;
  }

  /** Prefixes waiting for a scrypt slot now. */
  get queued(): number {
    return this.#slots.waiting;
  }

  /**
   * Verifies candidate `id` (a hash of the presented key and the stored
   * hash) for `prefix` with `check`, which runs scrypt and resolves true on
   * a match. Rejects only when `check` rejects.
   */
  verify(prefix: string, id: string, check: () => Promise<boolean>): Promise<GateResult> {
    let lane = this.#lanes.get(prefix);
    const shared = lane?.pending.get(id);
    if (shared) return shared;
    if (this.#budget.exhausted(prefix)) return Promise.resolve("throttled");
    if (this.#slots.waiting >= this.#queueLimit) return Promise.resolve("busy");
    if (lane && lane.pending.size >= this.#failureLimit) return Promise.resolve("crowded");
    if (!lane) {
      lane = { tail: Promise.resolve(), pending: new Map() };
      this.#lanes.set(prefix, lane);
    }
    const current = lane;
    const turn = current.tail.then(() => this.#turn(prefix, check));
    current.tail = turn.catch(() => {});
    current.pending.set(id, turn);
    const done = () => {
      current.pending.delete(id);
      if (current.pending.size === 0 && this.#lanes.get(prefix) === current) {
        this.#lanes.delete(prefix);
      }
    };
    turn.then(done, done);
    return turn;
  }

  async #turn(prefix: string, check: () => Promise<boolean>): Promise<GateResult> {
    // Failures of the candidates ahead in this lane may have spent the budget meanwhile.
    if (this.#budget.exhausted(prefix)) return "throttled";
    if (this.#slots.waiting >= this.#queueLimit) return "busy";
    const matches = await this.#slots.run(check);
    if (!matches) this.#budget.fail(prefix);
    return matches ? "match" : "mismatch";
  }
}
