import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { interpAtIndex, npArange, npLinspace, roundHalfEven } from "./numeric.ts";
import {
  checkStepCount,
  ddimTimesteps,
  dpmTimesteps,
  eulerTimesteps,
  pndmBaseTimesteps,
} from "./spacing.ts";

/** [start, start - step, …] with n entries. */
function countdown(start: number, step: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => start - i * step);
}

Deno.test("numeric: numpy round-half-even, arange, linspace, interp", () => {
  deepStrictEqual(
    [0.5, 1.5, 2.5, 3.5, -1.5, 2.4, 2.6, 7].map(roundHalfEven),
    [0, 2, 2, 4, -2, 2, 3, 7],
  );
  strictEqual(Object.is(roundHalfEven(-0.5), -0) || roundHalfEven(-0.5) === 0, true);
  deepStrictEqual(npArange(1000, 0, -250), [1000, 750, 500, 250]);
  deepStrictEqual(npArange(0, 1, 0.25), [0, 0.25, 0.5, 0.75]);
  deepStrictEqual(npLinspace(0, 1, 5), [0, 0.25, 0.5, 0.75, 1]);
  deepStrictEqual(npLinspace(2, 9, 1), [2]);
  const table = [10, 20, 40];
  deepStrictEqual([-1, 0, 0.5, 1, 1.25, 2, 3].map((x) => interpAtIndex(x, table)), [
    10,
    10,
    15,
    20,
    25,
    40,
    40,
  ]);
});

Deno.test("spacing: leading N=20, steps_offset 1 (DDIM/PNDM) → 951, 901, …, 51, 1", () => {
  deepStrictEqual(ddimTimesteps("leading", 1000, 20, 1), countdown(951, 50, 20));
  deepStrictEqual(pndmBaseTimesteps("leading", 1000, 20, 1), countdown(951, 50, 20).reverse());
  // N=3: step ratio 1000 // 3 = 333
  deepStrictEqual(ddimTimesteps("leading", 1000, 3, 1), [667, 334, 1]);
});

Deno.test("spacing: trailing N=20 → 999, 949, …, 49; uneven N rounds", () => {
  deepStrictEqual(ddimTimesteps("trailing", 1000, 20, 1), countdown(999, 50, 20));
  deepStrictEqual(dpmTimesteps("trailing", 1000, 20, 0), countdown(999, 50, 20));
  deepStrictEqual(eulerTimesteps("trailing", 1000, 20, 0), countdown(999, 50, 20));
  deepStrictEqual(pndmBaseTimesteps("trailing", 1000, 20, 0), countdown(999, 50, 20).reverse());
  // arange(1000, 0, -333.33…) = [1000, 666.67, 333.33] → round − 1
  deepStrictEqual(ddimTimesteps("trailing", 1000, 3, 0), [999, 666, 332]);
});

Deno.test("spacing: linspace rounds half to even (DDIM/PNDM integers)", () => {
  // linspace(0, 999, 5) = 0, 249.75, 499.5, 749.25, 999
  deepStrictEqual(ddimTimesteps("linspace", 1000, 5, 1), [999, 749, 500, 250, 0]);
  deepStrictEqual(pndmBaseTimesteps("linspace", 1000, 5, 1), [0, 250, 500, 749, 999]);
});

Deno.test("spacing: Euler linspace keeps float32 fractions; leading adds the offset", () => {
  const ts = eulerTimesteps("linspace", 1000, 20, 1);
  strictEqual(ts.length, 20);
  for (let i = 0; i < 20; i++) {
    const exact = (999 * (19 - i)) / 19;
    strictEqual(ts[i], Math.fround(exact), `t[${i}]`);
  }
  // published: 999, 946.42, …, 52.58, 0
  deepStrictEqual([ts[0], ts[1].toFixed(2), ts[18].toFixed(2), ts[19]], [
    999,
    "946.42",
    "52.58",
    0,
  ]);
  deepStrictEqual(eulerTimesteps("leading", 1000, 20, 1), countdown(951, 50, 20));
});

Deno.test("spacing: DPM-Solver linspace uses N+1 points → 999, 949, …, 50", () => {
  // round(49.95 i) for i = 20…1, half to even at 499.5
  deepStrictEqual(dpmTimesteps("linspace", 1000, 20, 1), [
    999,
    949,
    899,
    849,
    799,
    749,
    699,
    649,
    599,
    549,
    500,
    450,
    400,
    350,
    300,
    250,
    200,
    150,
    100,
    50,
  ]);
  // leading: ratio 1000 // 21 = 47; arange(21)·47 reversed without 0, + offset
  deepStrictEqual(dpmTimesteps("leading", 1000, 20, 1), countdown(941, 47, 20));
});

Deno.test("spacing: step counts are validated", () => {
  throws(() => checkStepCount(0, 1000), /positive integer, got 0/);
  throws(() => checkStepCount(2.5, 1000), /got 2\.5/);
  throws(() => checkStepCount(1001, 1000), /cannot exceed num_train_timesteps \(1000\)/);
  ok(checkStepCount(1000, 1000) === undefined);
});
