/**
 * Who may run scrypt, and when: one tenant hammering a prefix
 * with wrong secrets must not starve everyone else's verifications.
 *
 * - Per prefix, at most one scrypt is in flight; other candidates for that
 *   prefix wait their turn, and requests presenting the very same key share
 *   the in-flight result instead of queueing again.
 * - Per prefix and source, a {@link FailureBudget}: once a source's budget
 *   is spent, its answer is `throttled` without scrypt; while the prefix is
 *   under attack from many sources and its allowance is used up, `paced`
 *   (both checked when a request arrives and again when its turn comes).
 * - At most `failureLimit` distinct candidates wait per prefix: more could
 *   not all be tried before the budget stops them, so they are `crowded` at
 *   once; a source that verified the prefix's right secret recently still
 *   queues (there are few such sources).
 * - Globally, `concurrency` scrypt runs at once and at most `queueLimit`
 *   prefixes waiting for a run; beyond that the answer is `busy` at once
 *   (the caller answers 503 with `Retry-After`), never a long wait. Since a
 *   prefix holds at most one place in that queue, one prefix cannot fill it.
 *
 * @module
 */

import { ConcurrencyLimit } from "../queue/mod.ts";
import { type BudgetVerdict, FailureBudget } from "./failure_budget.ts";

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
 * not tried because the source spent its failure budget for the prefix
 * (`throttled`), the prefix is under attack and its allowance is used up
 * (`paced`: {@link VerificationGate.budget} says until when), the
 * global verification queue is full (`busy`), or too many distinct keys for
 * this prefix are already waiting (`crowded`).
 */
export type GateResult = "match" | "mismatch" | "throttled" | "paced" | "busy" | "crowded";

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

  /** Whether `source` may try a secret for `prefix` now (see {@link FailureBudget.verdict}). */
  budget(prefix: string, source: string): BudgetVerdict {
    return this.#budget.verdict(prefix, source);
  }

  /** Whether `source` verified the right secret of `prefix` recently. */
  isGood(prefix: string, source: string): boolean {
    return this.#budget.isGood(prefix, source);
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
   * hash) for `prefix`, presented by `source`, with `check`, which runs
   * scrypt and resolves true on a match. Rejects only when `check` rejects.
   */
  verify(
    prefix: string,
    source: string,
    id: string,
    check: () => Promise<boolean>,
  ): Promise<GateResult> {
    let lane = this.#lanes.get(prefix);
    const shared = lane?.pending.get(id);
    if (shared) return shared;
    const verdict = this.#budget.verdict(prefix, source);
    if (verdict.kind === "spent") return Promise.resolve("throttled");
    if (verdict.kind === "paced") return Promise.resolve("paced");
    if (this.#slots.waiting >= this.#queueLimit) return Promise.resolve("busy");
    if (
      lane && lane.pending.size >= this.#failureLimit && !this.isGood(prefix, source)
    ) {
      return Promise.resolve("crowded");
    }
    if (!lane) {
      lane = { tail: Promise.resolve(), pending: new Map() };
      this.#lanes.set(prefix, lane);
    }
    const current = lane;
    const turn = current.tail.then(() => this.#turn(prefix, source, check));
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

  async #turn(
    prefix: string,
    source: string,
    check: () => Promise<boolean>,
  ): Promise<GateResult> {
    // Failures of the candidates ahead in this lane may have spent the budget meanwhile.
    if (this.#slots.waiting >= this.#queueLimit) return "busy";
    const verdict = this.#budget.admit(prefix, source);
    if (verdict.kind === "spent") return "throttled";
    if (verdict.kind === "paced") return "paced";
    const matches = await this.#slots.run(check);
    if (matches) this.#budget.succeed(prefix, source);
    else this.#budget.fail(prefix, source);
    return matches ? "match" : "mismatch";
  }
}
