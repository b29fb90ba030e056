import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { DdimScheduler } from "./ddim.ts";
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

/** DDIM formulas (12) and (16) in float64 for one step t → tPrev. */
function ddimStep(
  x: Float32Array,
  eps: Float32Array,
  t: number,
  tPrev: number,
  eta: number,
  noise?: Float32Array,
): { prev: number[]; x0: number[] } {
  const aT = ac[t], aP = tPrev >= 0 ? ac[tPrev] : ac[0];
  const x0 = Array.from(x, (v, i) => (v - Math.sqrt(1 - aT) * eps[i]) / Math.sqrt(aT));
  const std = eta * Math.sqrt(((1 - aP) / (1 - aT)) * (1 - aT / aP));
  const prev = x0.map((v, i) =>
    Math.sqrt(aP) * v + Math.sqrt(1 - aP - std * std) * eps[i] + (noise ? std * noise[i] : 0)
  );
  return { prev, x0 };
}

Deno.test("ddim: SD config → leading timesteps 951 … 1", () => {
  const s = new DdimScheduler(config);
  s.setTimesteps(20);
  deepStrictEqual(s.timesteps, Array.from({ length: 20 }, (_, i) => 951 - 50 * i));
  strictEqual(s.initNoiseSigma, 1);
});

Deno.test("ddim: one deterministic step matches formula (12) with η = 0", () => {
  const n = 64;
  const s = new DdimScheduler(config);
  s.setTimesteps(20);
  const x = pattern(n, 0.2), eps = pattern(n, 1.1);
  const out = s.step(eps, 951, x);
  const want = ddimStep(x, eps, 951, 901, 0);
  assertClose(out.prevSample, want.prev, 1e-5, "prev", 1e-5);
  assertClose(out.predOriginalSample!, want.x0, 1e-5, "x0", 1e-5);
  // the last step goes to ᾱ_0 (set_alpha_to_one=false in the SD config)
  const last = s.step(eps, 1, x);
  assertClose(last.prevSample, ddimStep(x, eps, 1, -49, 0).prev, 1e-5, "last", 1e-5);
});

Deno.test("ddim: η > 0 adds σ_t·randn drawn from the generator", () => {
  const n = 32;
  const s = new DdimScheduler(config, { eta: 0.7 });
  s.setTimesteps(20);
  const x = pattern(n, 0.4), eps = pattern(n, 2.2);
  const out = s.step(eps, 501, x, new TorchGenerator(99));
  const noise = new TorchGenerator(99).randn(n);
  assertClose(out.prevSample, ddimStep(x, eps, 501, 451, 0.7, noise).prev, 1e-5, "prev", 1e-5);
  throws(() => s.step(eps, 501, x), /needs a TorchGenerator/);
  throws(() => new DdimScheduler(config, { eta: 1.5 }), /eta must be in 0\.\.1, got 1\.5/);
});

Deno.test("ddim: class defaults clip x0 to ±1 when the config has no clip_sample", () => {
  const s = new DdimScheduler(parseSchedulerConfig({ beta_schedule: "scaled_linear" }));
  s.setTimesteps(10);
  const big = new Float32Array(8).fill(3);
  const out = s.step(new Float32Array(8), s.timesteps[0], big);
  ok(out.predOriginalSample!.every((v) => v === 1), `x0 ${out.predOriginalSample}`);
});

Deno.test("ddim: full loops end at the exact DDIM endpoint; η > 0 is seed-reproducible", () => {
  const n = 256;
  const x0 = pattern(n, 0.9).map((v) => v * 0.7);
  const noise = new TorchGenerator(5).randn(n);
  const s = new DdimScheduler(config);
  s.setTimesteps(20);
  const { final, lastPred } = runLoop(s, noise, alphaOracle(x0));
  const a1 = ac[951];
  const expected = Array.from(x0, (v, i) => {
    const eps = (noise[i] - Math.sqrt(a1) * v) / Math.sqrt(1 - a1);
    return Math.sqrt(ac[0]) * v + Math.sqrt(1 - ac[0]) * eps;
  });
  assertClose(final, expected, 2e-4, "final");
  assertClose(lastPred!, x0, 2e-4, "last x0 prediction");

  const stochastic = new DdimScheduler(config, { eta: 1 });
  stochastic.setTimesteps(20);
  const a = runLoop(stochastic, noise, alphaOracle(x0), new TorchGenerator(1)).final;
  stochastic.setTimesteps(20);
  const b = runLoop(stochastic, noise, alphaOracle(x0), new TorchGenerator(1)).final;
  stochastic.setTimesteps(20);
  const c = runLoop(stochastic, noise, alphaOracle(x0), new TorchGenerator(2)).final;
  deepStrictEqual(a, b);
  notDeepStrictEqual(a, c);
  ok(a.every(Number.isFinite));
  assertClose(a, x0, 0.2, "η=1 final near x0");
});

Deno.test("ddim: addNoise is √ᾱ x0 + √(1−ᾱ) ε", () => {
  const s = new DdimScheduler(config);
  const x0 = pattern(16, 1), noise = pattern(16, 2);
  const want = Array.from(x0, (v, i) => Math.sqrt(ac[251]) * v + Math.sqrt(1 - ac[251]) * noise[i]);
  assertClose(s.addNoise(x0, noise, 251), want, 1e-5, "addNoise", 1e-5);
  throws(() => s.addNoise(x0, noise.subarray(1), 251), /noise has 15 values but original has 16/);
});

Deno.test("ddim: v_prediction gives x0 = √ᾱ x − √(1−ᾱ) v and ε = √ᾱ v + √(1−ᾱ) x", () => {
  const s = new DdimScheduler(
    parseSchedulerConfig({ ...SD15_CONFIG, prediction_type: "v_prediction" }),
  );
  s.setTimesteps(20);
  const x = pattern(16, 0.4), v = pattern(16, 1.3);
  const a = ac[951], aP = ac[901];
  const x0 = Array.from(x, (xv, i) => Math.sqrt(a) * xv - Math.sqrt(1 - a) * v[i]);
  const eps = Array.from(x, (xv, i) => Math.sqrt(a) * v[i] + Math.sqrt(1 - a) * xv);
  const out = s.step(v, 951, x);
  assertClose(out.predOriginalSample!, x0, 1e-5, "x0", 1e-5);
  assertClose(
    out.prevSample,
    x0.map((p, i) => Math.sqrt(aP) * p + Math.sqrt(1 - aP) * eps[i]),
    1e-5,
    "prev",
    1e-5,
  );
});
