import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { VerificationGate } from "./verification_gate.ts";

/** A check that resolves to `result` only when released, counting runs in flight. */
function controlled() {
  let inFlight = 0;
  let maxInFlight = 0;
  let runs = 0;
  const releases: Array<() => void> = [];
  const make = (result: boolean) => () => {
    runs++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    return new Promise<boolean>((resolve) =>
      releases.push(() => {
        inFlight--;
        resolve(result);
      })
    );
  };
  /** Releases every run, including those that start because an earlier one finished. */
  const releaseAll = async () => {
    for (let idle = 0; idle < 3;) {
      await new Promise((r) => setTimeout(r, 0));
      if (releases.length === 0) {
        idle++;
        continue;
      }
      idle = 0;
      releases.shift()!();
    }
  };
  return {
    make,
    releaseAll,
    get runs() {
      return runs;
    },
    get maxInFlight() {
      return maxInFlight;
    },
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("one scrypt per prefix in flight; the same key shares its result", async () => {
  const gate = new VerificationGate({ concurrency: 4, queueLimit: 8, failureLimit: 10 });
  const c = controlled();
  const same = [
    gate.verify("p", "s", "k1", c.make(true)),
    gate.verify("p", "s", "k1", c.make(true)),
  ];
  const other = gate.verify("p", "s", "k2", c.make(false));
  await tick();
  strictEqual(c.runs, 1, "k2 waits for k1's run; the second k1 shares it");
  await c.releaseAll();
  deepStrictEqual(await Promise.all(same), ["match", "match"]);
  strictEqual(await other, "mismatch");
  strictEqual(c.runs, 2);
  strictEqual(c.maxInFlight, 1);
});

Deno.test("the failure budget stops scrypt for a prefix from that source, not for others", async () => {
  const gate = new VerificationGate({ concurrency: 4, queueLimit: 8, failureLimit: 3 });
  const c = controlled();
  const attempts = Array.from(
    { length: 3 },
    (_, i) => gate.verify("p", "s", `bad${i}`, c.make(false)),
  );
  await c.releaseAll();
  deepStrictEqual(await Promise.all(attempts), ["mismatch", "mismatch", "mismatch"]);
  const runs = c.runs;
  strictEqual(await gate.verify("p", "s", "bad9", c.make(false)), "throttled");
  strictEqual(await gate.verify("p", "s", "good", c.make(true)), "throttled", "from that source");
  strictEqual(c.runs, runs, "no scrypt once the budget is spent");
  const owner = gate.verify("p", "elsewhere", "good", c.make(true));
  await c.releaseAll();
  strictEqual(await owner, "match", "the owner from another source is verified");
  const fresh = gate.verify("q", "s", "good", c.make(true));
  await c.releaseAll();
  strictEqual(await fresh, "match");
});

Deno.test("a candidate waiting in a lane is throttled when the budget runs out meanwhile", async () => {
  const gate = new VerificationGate({ concurrency: 4, queueLimit: 8, failureLimit: 2 });
  const c = controlled();
  const first = gate.verify("p", "s", "a", c.make(false));
  await c.releaseAll();
  strictEqual(await first, "mismatch");
  // One failure left: b runs and fails, c waited behind it and is then refused without scrypt.
  const b = gate.verify("p", "s", "b", c.make(false));
  const cc = gate.verify("p", "s", "c", c.make(false));
  // The lane now holds two distinct candidates = the failure limit: a third is crowded out at once.
  strictEqual(await gate.verify("p", "s", "d", c.make(false)), "crowded");
  await c.releaseAll();
  strictEqual(await b, "mismatch");
  strictEqual(await cc, "throttled");
  strictEqual(c.runs, 2);
});

Deno.test("a full verification queue answers busy at once; one prefix holds one place", async () => {
  const gate = new VerificationGate({ concurrency: 1, queueLimit: 2, failureLimit: 10 });
  const c = controlled();
  const running = gate.verify("a", "s", "x", c.make(true));
  await tick();
  // Many candidates for one prefix wait in its lane, not in the global queue.
  const sameLane = Array.from(
    { length: 5 },
    (_, i) => gate.verify("a", "s", `y${i}`, c.make(false)),
  );
  const b = gate.verify("b", "s", "x", c.make(true));
  const d = gate.verify("d", "s", "x", c.make(true));
  await tick();
  strictEqual(gate.queued, 2, "b and d wait for the one slot; a's lane is not in the queue");
  strictEqual(await gate.verify("e", "s", "x", c.make(true)), "busy");
  await c.releaseAll();
  strictEqual(await running, "match");
  strictEqual(await b, "match");
  strictEqual(await d, "match");
  strictEqual((await Promise.all(sameLane)).filter((r) => r === "mismatch").length, 5);
  strictEqual(c.maxInFlight, 1);
});

Deno.test("a check that rejects rejects its callers and frees the lane", async () => {
  const gate = new VerificationGate({ concurrency: 1, queueLimit: 2, failureLimit: 10 });
  await rejects(
    gate.verify("p", "s", "k", () => Promise.reject(new Error("scrypt broke"))),
    /broke/,
  );
  strictEqual(await gate.verify("p", "s", "k", () => Promise.resolve(true)), "match");
});

Deno.test("a prefix under attack from many sources is paced; the owner's known source is not", async () => {
  const gate = new VerificationGate({ concurrency: 4, queueLimit: 8, failureLimit: 2 });
  const c = controlled();
  const home = gate.verify("p", "home", "good", c.make(true));
  await c.releaseAll();
  strictEqual(await home, "match");
  for (const source of ["a", "b"]) {
    const guess = gate.verify("p", source, `bad-${source}`, c.make(false));
    await c.releaseAll();
    strictEqual(await guess, "mismatch");
  }
  // Under attack: two verifications a minute for sources that never verified the prefix.
  for (const source of ["c", "d"]) {
    const guess = gate.verify("p", source, `bad-${source}`, c.make(false));
    await c.releaseAll();
    strictEqual(await guess, "mismatch");
  }
  const runs = c.runs;
  strictEqual(await gate.verify("p", "e", "good2", c.make(true)), "paced");
  strictEqual(c.runs, runs, "no scrypt when paced");
  const again = gate.verify("p", "home", "good3", c.make(true));
  await c.releaseAll();
  strictEqual(await again, "match", "the source that verified the prefix is not paced");
});
