import { deepStrictEqual, strictEqual } from "node:assert";
import { eulerInitNoiseSigma, scaleBySigma } from "./sigma_schedule.ts";

Deno.test("sigma_schedule: Euler init_noise_sigma is max σ, or sqrt(max²+1) for leading", () => {
  strictEqual(eulerInitNoiseSigma([], "linspace"), 1);
  strictEqual(eulerInitNoiseSigma([3, 1, 0], "linspace"), 3);
  strictEqual(eulerInitNoiseSigma([3, 1, 0], "trailing"), 3);
  // sqrt(3² + 1) = sqrt(10), rounded to float32.
  strictEqual(eulerInitNoiseSigma([3, 1, 0], "leading"), Math.fround(Math.sqrt(10)));
});

Deno.test("sigma_schedule: Euler scale_model_input divides by sqrt(σ²+1)", () => {
  // σ = 0.75: sqrt(0.5625 + 1) = 1.25, exact in float32.
  deepStrictEqual(Array.from(scaleBySigma(new Float32Array([2.5, -1.25, 0]), 0.75)), [2, -1, 0]);
  deepStrictEqual(Array.from(scaleBySigma(new Float32Array([4]), 0)), [4]);
});
