import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { FailureBudget } from "./failure_budget.ts";

Deno.test("a source's budget for a prefix is spent after `limit` failures and refills as they age", () => {
  let now = 0;
  const budget = new FailureBudget({ limit: 3, windowMs: 60_000, now: () => now });
  const kind = (prefix: string, source: string) => budget.verdict(prefix, source).kind;
  for (let i = 0; i < 3; i++) {
    strictEqual(kind("p", "attacker"), "ok", `before failure ${i + 1}`);
    budget.fail("p", "attacker");
    now += 10_000;
  }
  strictEqual(kind("p", "attacker"), "spent");
  strictEqual(kind("p", "owner"), "ok", "the owner's budget for the prefix is its own");
  strictEqual(kind("other", "attacker"), "ok", "per prefix");
  now = 60_000; // the first failure (t=0) leaves the window
  strictEqual(kind("p", "attacker"), "ok");
  budget.fail("p", "attacker");
  strictEqual(kind("p", "attacker"), "spent");
  now = 200_000;
  strictEqual(kind("p", "attacker"), "ok");
  strictEqual(budget.size, 0, "a prefix with nothing recent is forgotten");
});

Deno.test("a prefix under attack from many sources is paced; sources that verified it are not", () => {
  let now = 0;
  const budget = new FailureBudget({ limit: 3, windowMs: 60_000, now: () => now });
  budget.succeed("p", "owner-home");
  // Three sources fail once each: the prefix is under attack.
  for (const source of ["a", "b", "c"]) {
    strictEqual(budget.admit("p", source).kind, "ok");
    budget.fail("p", source);
  }
  // New sources share an allowance of 3 verifications a minute.
  now = 1_000;
  deepStrictEqual(["d", "e", "f"].map((s) => budget.admit("p", s).kind), ["ok", "ok", "ok"]);
  const paced = budget.admit("p", "owner-office");
  strictEqual(paced.kind, "paced");
  strictEqual(paced.kind === "paced" && paced.retryAfterMs, 60_000);
  strictEqual(budget.admit("p", "owner-home").kind, "ok", "a source that verified it passes");
  strictEqual(budget.verdict("q", "owner-office").kind, "ok", "other prefixes are not paced");
  now = 61_001; // the attackers' failures and the allowance leave the window
  strictEqual(budget.admit("p", "owner-office").kind, "ok");
});

Deno.test("tracked prefixes are bounded", () => {
  const budget = new FailureBudget({ limit: 1, maxPrefixes: 2 });
  budget.fail("a", "s");
  budget.fail("b", "s");
  budget.fail("c", "s");
  strictEqual(budget.size, 2);
  strictEqual(budget.verdict("a", "s").kind, "ok", "the oldest was dropped");
  strictEqual(budget.verdict("c", "s").kind, "spent");
});

Deno.test("the limit must be a positive integer", () => {
  throws(() => new FailureBudget({ limit: 0 }), /failure limit must be a positive integer, got 0/);
});
