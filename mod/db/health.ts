/**
 * A bounded database probe for `/healthz`: it answers within its timeout
 * whatever state the database is in, so health never waits on a fault.
 *
 * @module
 */

import type { Queryable } from "./database.ts";

/** What `/healthz` reports for the database. */
export type DatabaseHealth = "ok" | "unavailable";

/** Runs `SELECT 1` with a `timeoutMs` bound; `unavailable` on any failure or timeout. */
export async function probeDatabase(db: Queryable, timeoutMs = 1_000): Promise<DatabaseHealth> {
  try {
    await db.query("SELECT 1 AS ok", [], { timeoutMs, prepare: true });
    return "ok";
  } catch {
    return "unavailable";
  }
}
