/**
 * A bounded database probe for `/healthz`: it answers within its timeout
 * whatever state the database is in (down, or stalled: a stopped server, a
 * frozen disk or VM, a network path that stopped forwarding), so health
 * never waits on a fault.
 *
 * @module
 */

import type { Queryable } from "./database.ts";

/** What `/healthz` reports for the database. */
export type DatabaseHealth = "ok" | "unavailable";

/** The outcome of {@link probeDatabase}. */
export type DatabaseProbe =
  | { database: "ok" }
  /** `timedOut`: no answer within the bound (a stall); else the database refused or went away. */
  | { database: "unavailable"; timedOut: boolean };

/**
 * Runs `SELECT 1` with a `timeoutMs` bound; `unavailable` on any failure or
 * timeout. The bound holds even when every pooled connection is stuck behind
 * a stalled server: the wait races a timer, it does not queue behind them.
 */
export async function probeDatabase(db: Queryable, timeoutMs: number): Promise<DatabaseProbe> {
  try {
    await db.query("SELECT 1 AS ok", [], { timeoutMs, prepare: true });
    return { database: "ok" };
  } catch (error) {
    return {
      database: "unavailable",
      timedOut: (error as { code?: unknown } | null)?.code === "TIMEOUT",
    };
  }
}
