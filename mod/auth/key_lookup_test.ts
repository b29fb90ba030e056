import { deepStrictEqual, ok, strictEqual } from "node:assert";
import type { ApiKeyRecord } from "./key_store.ts";
import { KeyLookup, type LookupResult } from "./key_lookup.ts";

const row = (prefix: string): ApiKeyRecord => ({
  keyPrefix: prefix,
  keyHash: "aa".repeat(64),
  salt: "bb".repeat(16),
  projectId: null,
  userId: null,
  permission: "read",
  revoked: false,
  expired: false,
});

/** A `find` whose queries finish only when released; records the order they started in. */
function controlledFind(known: Set<string>) {
  const started: string[] = [];
  const pending: Array<() => void> = [];
  const find = (prefix: string) => {
    started.push(prefix);
    return new Promise<ApiKeyRecord | null>((resolve) =>
      pending.push(() => resolve(known.has(prefix) ? row(prefix) : null))
    );
  };
  const release = async (n = Infinity) => {
    for (let i = 0; i < n && pending.length > 0; i++) {
      pending.shift()!();
      await new Promise((r) => setTimeout(r, 0));
    }
  };
  return { find, started, release, pending };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("concurrent lookups of one prefix share one query", async () => {
  const db = controlledFind(new Set(["p"]));
  const lookup = new KeyLookup({ find: db.find, timeoutMs: 5_000, unknownTtlMs: 0 });
  const all = Array.from({ length: 50 }, () => lookup.lookup("p", false));
  await tick();
  strictEqual(db.started.length, 1);
  await db.release();
  const results = await Promise.all(all);
  ok(results.every((r) => r.kind === "row" && r.row.keyPrefix === "p"));
  // A finished query is not reused: the next request reads the row again (revocation).
  const again = lookup.lookup("p", false);
  await tick();
  strictEqual(db.started.length, 2);
  await db.release();
  strictEqual((await again).kind, "row");
});

Deno.test("an unknown prefix is remembered for unknownTtlMs, then read again", async () => {
  let now = 0;
  const db = controlledFind(new Set());
  const lookup = new KeyLookup({
    find: db.find,
    timeoutMs: 5_000,
    unknownTtlMs: 1_000,
    now: () => now,
  });
  const first = lookup.lookup("nope", false);
  await db.release();
  deepStrictEqual(await first, { kind: "unknown", cached: false });
  deepStrictEqual(await lookup.lookup("nope", false), { kind: "unknown", cached: true });
  strictEqual(db.started.length, 1);
  now = 1_000;
  const later = lookup.lookup("nope", false);
  await db.release();
  deepStrictEqual(await later, { kind: "unknown", cached: false });
  strictEqual(db.started.length, 2);
});

Deno.test("lookups beyond the concurrency queue instead of being refused; priority goes first", async () => {
  const known = new Set(["active"]);
  const db = controlledFind(known);
  const lookup = new KeyLookup({
    find: db.find,
    timeoutMs: 5_000,
    unknownTtlMs: 0,
    concurrency: 2,
  });
  // A flood of 300 distinct unknown prefixes: far more than the old fixed budget of 128.
  const flood = Array.from({ length: 300 }, (_, i) => lookup.lookup(`rnd${i}`, false));
  await tick();
  strictEqual(db.started.length, 2);
  deepStrictEqual(lookup.stats.queued, 298);
  const active = lookup.lookup("active", true);
  await db.release(1);
  strictEqual(db.started[2], "active", "the recently verified prefix jumps the flood");
  await db.release();
  strictEqual((await active).kind, "row");
  const results = await Promise.all(flood);
  ok(results.every((r) => r.kind === "unknown"), "every flooded lookup was answered, none refused");
});

Deno.test("a queued lookup gives up after timeoutMs in all, without running its query", async () => {
  const db = controlledFind(new Set(["p1", "p2"]));
  const lookup = new KeyLookup({ find: db.find, timeoutMs: 100, unknownTtlMs: 0, concurrency: 1 });
  const blocking = lookup.lookup("slow", false);
  const first = lookup.lookup("p1", false);
  const second = lookup.lookup("p2", false);
  // The query never answers until released below: a result at all is the deadline firing.
  deepStrictEqual(await second, { kind: "timeout" });
  deepStrictEqual(await first, { kind: "timeout" });
  deepStrictEqual(await blocking, { kind: "timeout" });
  // "slow" gave its slot up after 100 ms; p1 may have got it just in time, but p2's turn
  // could only come after another 100 ms, past its deadline: it is skipped, not queried.
  await new Promise((r) => setTimeout(r, 250));
  strictEqual(lookup.stats.queued, 0);
  ok(lookup.stats.abandoned >= 1);
  await db.release();
  strictEqual(lookup.stats.abandoned, 0);
  strictEqual(db.started[0], "slow");
  ok(!db.started.includes("p2"), `queried: ${db.started.join(", ")}`);
});

Deno.test("while 4 × concurrency queries are stuck, new lookups are refused at once", async () => {
  const db = controlledFind(new Set(["p"]));
  const lookup = new KeyLookup({ find: db.find, timeoutMs: 50, unknownTtlMs: 0, concurrency: 1 });
  const stuck: Promise<LookupResult>[] = [];
  for (let i = 0; i < 4; i++) {
    stuck.push(lookup.lookup(`s${i}`, false));
    await stuck[i];
  }
  strictEqual(lookup.stats.abandoned, 4);
  const refused = await lookup.lookup("p", true);
  strictEqual(refused.kind, "overloaded");
  await db.release();
  const recovered = lookup.lookup("p", true);
  await tick();
  await db.release();
  strictEqual((await recovered).kind, "row");
});

Deno.test("a failing query is an error for its waiters, and the next lookup tries again", async () => {
  let calls = 0;
  const lookup = new KeyLookup({
    find: (prefix) =>
      ++calls === 1 ? Promise.reject(new Error("connection reset")) : Promise.resolve(row(prefix)),
    timeoutMs: 1_000,
    unknownTtlMs: 1_000,
  });
  const failed = await lookup.lookup("p", false);
  strictEqual(failed.kind, "error");
  strictEqual((await lookup.lookup("p", false)).kind, "row");
});

Deno.test("an ordinary queued lookup joined by a known key is promoted once", async () => {
  const db = controlledFind(new Set(["p", "q"]));
  const lookup = new KeyLookup({
    find: db.find,
    timeoutMs: 5_000,
    unknownTtlMs: 0,
    concurrency: 1,
  });
  const blocking = lookup.lookup("blocker", false);
  const flood = Array.from({ length: 20 }, (_, i) => lookup.lookup(`rnd${i}`, false));
  const ordinary = lookup.lookup("p", false);
  const joined = Array.from({ length: 50 }, () => lookup.lookup("p", true));
  strictEqual(
    lookup.stats.queued,
    22,
    "20 + p in the ordinary lane, p once more in the priority lane",
  );
  await db.release(1);
  strictEqual(db.started[1], "p", "p ran right after the blocker, ahead of the flood");
  await db.release();
  ok([await ordinary, ...(await Promise.all(joined))].every((r) => r.kind === "row"));
  await Promise.all([blocking, ...flood]);
  strictEqual(db.started.filter((prefix) => prefix === "p").length, 1);
});
