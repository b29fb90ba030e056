import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { LcmScheduler } from "./lcm.ts";
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

/** c_skip, c_out of the LCM boundary condition with σ_data = 0.5 (timestep scaling 10 by default). */
function scalings(t: number, scaling = 10): { cSkip: number; cOut: number } {
  const st = scaling * t;
  return { cSkip: 0.25 / (st * st + 0.25), cOut: st / Math.sqrt(st * st + 0.25) };
}

Deno.test("lcm: timesteps from the 50-step grid (published)", () => {
  const s = new LcmScheduler(config);
  s.setTimesteps(4);
  deepStrictEqual(s.timesteps, [999, 759, 499, 259]);
  s.setTimesteps(8);
  deepStrictEqual(s.timesteps, [999, 879, 759, 639, 499, 379, 259, 139]);
  s.setTimesteps(2);
  deepStrictEqual(s.timesteps, [999, 499]);
  strictEqual(s.initNoiseSigma, 1);
  throws(() => s.setTimesteps(51), /cannot exceed original_inference_steps \(50\)/);
});

Deno.test("lcm: a middle step re-noises the consistency output; the last returns it", () => {
  const n = 64;
  const s = new LcmScheduler(config);
  s.setTimesteps(4);
  const x = pattern(n, 0.7), eps = pattern(n, 1.7);
  const out = s.step(eps, 999, x, new TorchGenerator(31));
  const a = ac[999], aPrev = ac[759];
  const { cSkip, cOut } = scalings(999);
  const x0 = Array.from(x, (v, i) => (v - Math.sqrt(1 - a) * eps[i]) / Math.sqrt(a));
  const denoised = x0.map((v, i) => cOut * v + cSkip * x[i]);
  assertClose(out.predOriginalSample!, denoised, 1e-5, "denoised", 1e-5);
  const noise = new TorchGenerator(31).randn(n);
  const prev = denoised.map((d, i) => Math.sqrt(aPrev) * d + Math.sqrt(1 - aPrev) * noise[i]);
  assertClose(out.prevSample, prev, 1e-5, "prev", 1e-5);

  const last = new LcmScheduler(config);
  last.setTimesteps(4);
  // start at the last timestep (step index found from t)
  const end = last.step(eps, 259, x, new TorchGenerator(1));
  const e = scalings(259);
  const a259 = ac[259];
  const want = Array.from(
    x,
    (v, i) => e.cOut * ((v - Math.sqrt(1 - a259) * eps[i]) / Math.sqrt(a259)) + e.cSkip * v,
  );
  assertClose(end.prevSample, want, 1e-5, "last prev", 1e-5);
  deepStrictEqual(end.prevSample, end.predOriginalSample);
  throws(() => last.step(eps, 999, x), /lcm\.step draws noise and needs a TorchGenerator/);
});

Deno.test("lcm: the boundary condition mixes x0 and the sample by c_out, c_skip", () => {
  // timestep_scaling 0.001 makes c_skip(999) ≈ 0.2, so both terms are visible.
  const s = new LcmScheduler(parseSchedulerConfig({ ...SD15_CONFIG, timestep_scaling: 0.001 }));
  s.setTimesteps(4);
  const x = pattern(32, 0.2), eps = pattern(32, 0.9);
  const { cSkip, cOut } = scalings(999, 0.001);
  const a = ac[999];
  const want = Array.from(
    x,
    (v, i) => cOut * ((v - Math.sqrt(1 - a) * eps[i]) / Math.sqrt(a)) + cSkip * v,
  );
  assertClose(
    s.step(eps, 999, x, new TorchGenerator(0)).predOriginalSample!,
    want,
    1e-5,
    "denoised",
    1e-5,
  );
});

Deno.test("lcm: full loop ends near x0, finite and seed-reproducible", () => {
  const n = 256;
  const x0 = pattern(n, 2.1).map((v) => v * 0.8);
  const noise = new TorchGenerator(9).randn(n);
  const s = new LcmScheduler(config);
  const run = (seed: number) => {
    s.setTimesteps(4);
    return runLoop(s, noise, alphaOracle(x0), new TorchGenerator(seed));
  };
  const a = run(123), b = run(123), c = run(124);
  deepStrictEqual(a.final, b.final);
  ok(a.final.every(Number.isFinite) && c.final.every(Number.isFinite));
  // the exact ε gives x0 exactly; c_skip(259) ≈ 4e-8 keeps the sample's share negligible
  assertClose(a.final, x0, 1e-4, "final");
  assertClose(a.lastPred!, x0, 1e-4, "denoised");
  // the re-noised intermediate latents depend on the seed
  s.setTimesteps(4);
  const g1 = new TorchGenerator(1), g2 = new TorchGenerator(2);
  const o = alphaOracle(x0);
  const step1 = s.step(o(noise, 999, 0), 999, noise, g1).prevSample;
  s.setTimesteps(4);
  notDeepStrictEqual(s.step(o(noise, 999, 0), 999, noise, g2).prevSample, step1);
});

Deno.test("lcm: class defaults (set_alpha_to_one, scaled_linear) and addNoise", () => {
  // An empty config uses LCMScheduler's own defaults: scaled_linear 0.00085..0.012.
  const s = new LcmScheduler(parseSchedulerConfig({}));
  const x0 = pattern(16, 1), noise = pattern(16, 2);
  const want = Array.from(x0, (v, i) => Math.sqrt(ac[759]) * v + Math.sqrt(1 - ac[759]) * noise[i]);
  assertClose(s.addNoise(x0, noise, 759), want, 1e-5, "addNoise", 1e-5);
});
