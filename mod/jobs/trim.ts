/**
 * Which finished results to drop when stored results pass their caps, for
 * both stores. Two caps: each owner keeps at most `[jobs]
 * max_result_mib_per_key` (its own oldest go first), and all owners together
 * at most `[jobs] max_result_mib`. Past the global cap the owner holding the
 * most loses its oldest first (water-filling): an owner is trimmed only
 * while it holds more than the others, so a tenant that fills the store
 * pushes out its own results, never those of one that holds less.
 *
 * Water-filling in one sort: give each result the bytes its owner holds in
 * it and every newer result of that owner ("need"). Keeping everything up to
 * a level L keeps exactly each owner's newest results whose need is ≤ L, so
 * results kept in ascending order of need, while they fit, are the fair
 * choice; the rest are dropped.
 *
 * @module
 */

/** A finished result, as the trim sees it. */
export interface StoredResult {
  /** The job id. */
  id: string;
  /** Its owner. */
  owner: string;
  /** Bytes of result content it holds. */
  resultBytes: number;
  /** When it ended. */
  finishedAt: Date | null;
  /** Creation order (breaks ties of `finishedAt`). */
  seq: number;
}

/** The caps {@link trimOrder} applies. */
export interface TrimCaps {
  /** Most bytes one owner keeps (Infinity: no per-owner cap). */
  perOwnerBytes: number;
  /** Most bytes all finished results may take (the global cap less unfinished jobs' bytes). */
  budgetBytes: number;
}

/**
 * The ids of the finished results to drop. The newest result of each owner
 * survives its owner's cap, and the newest of all survives the global one,
 * even alone over it: its caller is waiting for it.
 */
export function trimOrder(finished: readonly StoredResult[], caps: TrimCaps): string[] {
  const newestFirst = [...finished].sort((a, b) =>
    (b.finishedAt?.getTime() ?? 0) - (a.finishedAt?.getTime() ?? 0) || b.seq - a.seq
  );
  const drop = new Set<string>();
  const need = new Map<string, number>();
  const held = new Map<string, number>();
  for (const r of newestFirst) {
    const before = held.get(r.owner);
    const total = (before ?? 0) + r.resultBytes;
    // An owner's newest is kept however large; older ones only within its cap.
    if (before !== undefined && total > caps.perOwnerBytes) {
      drop.add(r.id);
      continue;
    }
    held.set(r.owner, total);
    need.set(r.id, total);
  }
  const [newest, ...older] = newestFirst.filter((r) => !drop.has(r.id));
  const fair = older.map((r, order) => ({ r, order, need: need.get(r.id)! }))
    .sort((a, b) => a.need - b.need || a.order - b.order);
  // The level stops at the first result that does not fit: everything of a higher need goes,
  // so no owner keeps an older result while a newer one of its own is dropped.
  let total = newest?.resultBytes ?? 0;
  let full = false;
  for (const { r } of fair) {
    full ||= total + r.resultBytes > caps.budgetBytes;
    if (full) drop.add(r.id);
    else total += r.resultBytes;
  }
  return [...drop];
}
