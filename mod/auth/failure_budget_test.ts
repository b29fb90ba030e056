import { strictEqual, throws } from "node:assert";
import { FailureBudget } from "./failure_budget.ts";

Deno.test("the budget is spent after `limit` failures in the window and refills as they age", () => {
  let now = 0;
  const budget = new FailureBudget({ limit: 3, windowMs: 60_000, now: () => now });
  for (let i = 0; i < 3; i++) {
    strictEqual(budget.exhausted("p"), false, `before failure ${i + 1}`);
    budget.fail("p");
    now += 10_000;
  }
  strictEqual(budget.exhausted("p"), true);
  strictEqual(budget.exhausted("other"), false, "per prefix");
  now = 60_000; // the first failure (t=0) leaves the window
  strictEqual(budget.exhausted("p"), false);
  budget.fail("p");
  strictEqual(budget.exhausted("p"), true);
  now = 200_000;
  strictEqual(budget.exhausted("p"), false);
  strictEqual(budget.size, 0, "a prefix with no recent failure is forgotten");
});

Deno.test("tracked prefixes are bounded", () => {
  const budget = new FailureBudget({ limit: 1, maxPrefixes: 2 });
  budget.fail("a");
  budget.fail("b");
  budget.fail("c");
  strictEqual(budget.size, 2);
  strictEqual(budget.exhausted("a"), false, "the oldest was dropped");
  strictEqual(budget.exhausted("c"), true);
});

Deno.test("the limit must be a positive integer", () => {
  throws(() => new FailureBudget({ limit: 0 }), /failure limit must be a positive integer, got 0/);
});
