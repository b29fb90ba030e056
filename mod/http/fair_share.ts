/**
 * Who gives way when one of the connection guard's global budgets is full
 * (`max_pending_heads`, `max_connections`): the client address that holds
 * the most of it, never one within a small share while another holds more.
 *
 * Before, a full budget closed the oldest waiting head, whoever sent it: a
 * single address flooding from 1,000 concurrent connections (with the
 * per-client caps raised, as behind a proxy that merges addresses) held
 * nearly all of the 128 heads, and a second client's rare connection was
 * as likely to be the oldest as any of the flood's, so it read 503 on most
 * of its calls.
 *
 * **The share.** With `budget` slots and `n` addresses holding at least one
 * of them (counting the newcomer's address), an address's share is
 * `max(FAIR_SHARE_FLOOR, floor(budget / n))`, at most `budget`: an equal
 * split, but never below {@link FAIR_SHARE_FLOOR}, so that a client with a
 * few connections at once is within its share however many addresses the
 * flood comes from.
 *
 * **The rule**, for a new connection of address `a` holding `x` slots when
 * the budget is full ({@link FairShare.decide}):
 *
 * 1. When an address holds more than its share and at least two more than
 *    `a` (so that after the swap it still holds at least as many as `a`),
 *    one of its slots is taken (the largest such holder; ties: the one
 *    whose oldest connection is oldest; within it the oldest connection of
 *    the lowest `rank`, e.g. still sending its head before one being
 *    served) and the newcomer is let in.
 * 2. Else, when `a` holds its share or more, the newcomer is refused, at
 *    once and cheaply (its head is not read): it is the flood.
 * 3. Else every address is within its share (a flood from many addresses,
 *    each with a few connections): as `evictWithinShare` says, the oldest
 *    connection of the largest holders is taken (the pending-head budget,
 *    so that connections that send nothing cannot keep a new client out:
 *    its head arrives long before it is the oldest), or the newcomer is
 *    refused (the connection budget: a connection in progress is not cut
 *    for an equal).
 *
 * So an address within its share loses a slot only in case 3, when no
 * address holds more than its share; and the holdings drift towards equal
 * shares, since a slot only ever moves from an address holding more to one
 * holding fewer.
 *
 * @module
 */

/** The smallest share of a budget an address is always allowed (connections). */
export const FAIR_SHARE_FLOOR = 4;

/**
 * An address's share of `budget` slots when `addresses` addresses hold
 * some: `max(FAIR_SHARE_FLOOR, floor(budget / addresses))`, at most `budget`.
 */
export function fairShare(budget: number, addresses: number): number {
  const equal = Math.floor(budget / Math.max(1, addresses));
  return Math.min(budget, Math.max(FAIR_SHARE_FLOOR, equal));
}

/** What {@link FairShare.decide} says to do with a newcomer when the budget is full. */
export type FairDecision<T> =
  | {
    /** Take `item` (the connection closed for the newcomer), then admit the newcomer. */
    kind: "evict";
    item: T;
    /** The address that held it. */
    holder: string;
    /** How many that address held, `item` included. */
    held: number;
  }
  | {
    /**
     * Refuse the newcomer: `over-share` when its address already holds its
     * share (case 2), `full` when every address is within its share and the
     * budget does not take from equals (case 3).
     */
    kind: "refuse";
    reason: "over-share" | "full";
    /** How many the newcomer's address holds. */
    held: number;
    /** Its share now. */
    share: number;
    /** Addresses counted in the share, the newcomer's included. */
    addresses: number;
  };

/** Options of {@link FairShare}. */
export interface FairShareOptions<T> {
  /** The slots of the budget (e.g. `max_pending_heads`). */
  budget: number;
  /** Whether case 3 takes a slot from the largest holders (else it refuses the newcomer). */
  evictWithinShare: boolean;
  /** Which of a holder's items goes first: the lowest rank, then the oldest (default: all 0). */
  rank?: (item: T) => number;
}

/** One budget's slots by address, each address's oldest first; see the module documentation. */
export class FairShare<T> {
  readonly #o: FairShareOptions<T>;
  readonly #by = new Map<string, Set<T>>();
  /** When each item was added (a counter), to break ties by age across addresses. */
  readonly #age = new Map<T, number>();
  #next = 0;

  /** An empty budget. */
  constructor(options: FairShareOptions<T>) {
    this.#o = options;
  }

  /** Slots held in all. */
  get size(): number {
    return this.#age.size;
  }

  /** Whether every slot is held. */
  get full(): boolean {
    return this.#age.size >= this.#o.budget;
  }

  /** Addresses holding at least one slot. */
  get addresses(): number {
    return this.#by.size;
  }

  /** Slots `holder` holds. */
  held(holder: string): number {
    return this.#by.get(holder)?.size ?? 0;
  }

  /** `holder` takes a slot for `item` (once). */
  add(holder: string, item: T): void {
    if (this.#age.has(item)) return;
    let items = this.#by.get(holder);
    if (!items) this.#by.set(holder, items = new Set());
    items.add(item);
    this.#age.set(item, this.#next++);
  }

  /** Frees `item`'s slot; returns whether it held one. */
  delete(holder: string, item: T): boolean {
    const items = this.#by.get(holder);
    if (!items?.delete(item)) return false;
    if (items.size === 0) this.#by.delete(holder);
    this.#age.delete(item);
    return true;
  }

  /** `item`'s slot now counts for `to` (a proxy's connection, once its head names the client). */
  move(from: string, to: string, item: T): void {
    if (from === to) return;
    const age = this.#age.get(item);
    if (age === undefined || !this.delete(from, item)) return;
    this.add(to, item);
    this.#age.set(item, age);
  }

  /** `holder`'s share now, were it to hold a slot (the module documentation's formula). */
  shareOf(holder: string): number {
    return fairShare(this.#o.budget, this.#by.size + (this.#by.has(holder) ? 0 : 1));
  }

  /** The item of `items` that goes first: lowest rank, then oldest. */
  #pick(items: Set<T>): T | undefined {
    const rank = this.#o.rank;
    if (!rank) return items.values().next().value;
    let best: T | undefined;
    let bestRank = Infinity;
    for (const item of items) {
      const r = rank(item);
      if (r < bestRank) {
        best = item;
        bestRank = r;
        if (r <= 0) break;
      }
    }
    return best;
  }

  /**
   * What to do for a new connection of `holder` while the budget is full
   * (rules 1–3 of the module documentation). Changes nothing: the caller
   * frees the evicted item's slot and adds the newcomer's.
   */
  decide(holder: string): FairDecision<T> {
    const held = this.held(holder);
    const addresses = this.#by.size + (held === 0 ? 1 : 0);
    const share = fairShare(this.#o.budget, addresses);
    // The largest holders; among equals, the one whose oldest item is oldest.
    let most = 0;
    let largest: Set<T> | undefined;
    let largestKey = "";
    for (const [key, items] of this.#by) {
      const count = items.size;
      if (
        count > most ||
        (count === most && largest &&
          this.#age.get(items.values().next().value!)! <
            this.#age.get(largest.values().next().value!)!)
      ) {
        most = count;
        largest = items;
        largestKey = key;
      }
    }
    const refuse = (reason: "over-share" | "full"): FairDecision<T> => ({
      kind: "refuse",
      reason,
      held,
      share,
      addresses,
    });
    if (largest && most > share && most > held + 1) {
      const item = this.#pick(largest);
      if (item !== undefined) return { kind: "evict", item, holder: largestKey, held: most };
    }
    if (held >= share) return refuse("over-share");
    if (!this.#o.evictWithinShare || !largest) return refuse("full");
    const item = this.#pick(largest);
    return item === undefined
      ? refuse("full")
      : { kind: "evict", item, holder: largestKey, held: most };
  }
}
