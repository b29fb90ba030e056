import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { PndmScheduler } from "./pndm.ts";
import {
  alphaOracle,
  alphasCumprod64,
  assertClose,
  pattern,
  runLoop,
  SD15_CONFIG,
} from "./testdata/reference.ts";

const config = parseSchedulerConfig(SD15_CONFIG);
const ac = alphasCumprod64();

/** PNDM formula (9) in float64: the DDIM transition from t to tPrev. */
function transition(x: Float32Array, eps: ArrayLike<number>, t: number, tPrev: number): number[] {
  const aT = ac[t];
  const aP = tPrev >= 0 ? ac[tPrev] : ac[0];
  const coeff = Math.sqrt(aP / aT);
  const denom = aT * Math.sqrt(1 - aP) + Math.sqrt(aT * (1 - aT) * aP);
  return Array.from(x, (v, i) => coeff * v - ((aP - aT) * eps[i]) / denom);
}

Deno.test("pndm: N=50 gives 51 UNet calls [981, 961, 961, 941, …, 21, 1]", () => {
  const s = new PndmScheduler(config);
  s.setTimesteps(50);
  const expected = [981, 961, 961];
  for (let t = 941; t >= 1; t -= 20) expected.push(t);
  deepStrictEqual(s.timesteps, expected);
  strictEqual(s.timesteps.length, 51);
  s.setTimesteps(20);
  deepStrictEqual(s.timesteps.slice(0, 4), [951, 901, 901, 851]);
  deepStrictEqual(s.timesteps.slice(-2), [51, 1]);
  strictEqual(s.initNoiseSigma, 1);
});

Deno.test("pndm: first five PLMS steps match formula (9) with the PLMS combinations", () => {
  const n = 64;
  const s = new PndmScheduler(config);
  s.setTimesteps(50);
  const x = pattern(n, 0.3);
  const e = [1, 2, 3, 4, 5].map((k) => pattern(n, k));
  // call 0 (t=981): Euler step 981 → 961 with e0
  const p0 = s.step(e[0], 981, x).prevSample;
  assertClose(p0, transition(x, e[0], 981, 961), 1e-5, "call 0", 1e-5);
  // call 1 (t=961): redo 981 → 961 from the original sample with (e0 + e1)/2
  const p1 = s.step(e[1], 961, p0).prevSample;
  const mean = Array.from(e[0], (v, i) => (v + e[1][i]) / 2);
  assertClose(p1, transition(x, mean, 981, 961), 1e-5, "call 1", 1e-5);
  // call 2 (t=961): ets = [e0, e2] → (3 e2 − e0)/2, 961 → 941
  const p2 = s.step(e[2], 961, p1).prevSample;
  const c2 = Array.from(e[0], (v, i) => (3 * e[2][i] - v) / 2);
  assertClose(p2, transition(p1, c2, 961, 941), 1e-5, "call 2", 1e-5);
  // call 3 (t=941): (23 e3 − 16 e2 + 5 e0)/12, 941 → 921
  const p3 = s.step(e[3], 941, p2).prevSample;
  const c3 = Array.from(e[0], (v, i) => (23 * e[3][i] - 16 * e[2][i] + 5 * v) / 12);
  assertClose(p3, transition(p2, c3, 941, 921), 1e-5, "call 3", 1e-5);
  // call 4 (t=921): (55 e4 − 59 e3 + 37 e2 − 9 e0)/24, 921 → 901
  const p4 = s.step(e[4], 921, p3).prevSample;
  const c4 = Array.from(
    e[0],
    (v, i) => (55 * e[4][i] - 59 * e[3][i] + 37 * e[2][i] - 9 * v) / 24,
  );
  assertClose(p4, transition(p3, c4, 921, 901), 1e-5, "call 4", 1e-5);
});

Deno.test("pndm: a full loop with the exact-epsilon model lands on ᾱ_0's mix of x0 and ε", () => {
  const n = 256;
  const x0 = pattern(n, 1.7).map((v) => v * 0.8);
  const noise = new TorchGenerator(11).randn(n);
  const s = new PndmScheduler(config);
  for (const steps of [50, 20]) {
    s.setTimesteps(steps);
    const { final } = runLoop(s, noise, alphaOracle(x0));
    // Every step is the exact DDIM transition, so ε stays (noise − √ᾱ x0)/√(1−ᾱ) at the
    // first timestep and the last step goes to ᾱ_0 (set_alpha_to_one = false).
    const a1 = ac[s.timesteps[0]];
    const eps = Array.from(noise, (v, i) => (v - Math.sqrt(a1) * x0[i]) / Math.sqrt(1 - a1));
    const expected = Array.from(x0, (v, i) => Math.sqrt(ac[0]) * v + Math.sqrt(1 - ac[0]) * eps[i]);
    assertClose(final, expected, 2e-4, `final (N=${steps})`);
    assertClose(final, x0, 0.12, `near x0 (N=${steps})`);
  }
});

Deno.test("pndm: v_prediction, addNoise, and the unsupported PRK mode", () => {
  const n = 16;
  const v = new PndmScheduler(
    parseSchedulerConfig({ ...SD15_CONFIG, prediction_type: "v_prediction" }),
  );
  v.setTimesteps(50);
  const x = pattern(n, 0.5), out = pattern(n, 2);
  const a = ac[981];
  const eps = Array.from(out, (o, i) => Math.sqrt(a) * o + Math.sqrt(1 - a) * x[i]);
  assertClose(v.step(out, 981, x).prevSample, transition(x, eps, 981, 961), 1e-5, "v", 1e-5);

  const s = new PndmScheduler(config);
  const x0 = pattern(n, 3), noise = pattern(n, 4);
  const expected = Array.from(
    x0,
    (v, i) => Math.sqrt(ac[500]) * v + Math.sqrt(1 - ac[500]) * noise[i],
  );
  assertClose(s.addNoise(x0, noise, 500), expected, 1e-5, "addNoise", 1e-5);
  throws(() => s.addNoise(x0, noise, 1000), /integer in 0\.\.999, got 1000/);
  throws(() => s.step(noise, 981, x0), /call setTimesteps/);
  throws(
    () => new PndmScheduler(parseSchedulerConfig({ ...SD15_CONFIG, skip_prk_steps: false })),
    /skip_prk_steps=false/,
  );
});
