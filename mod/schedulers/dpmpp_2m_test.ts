import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { DpmSolverMultistepScheduler } from "./dpmpp_2m.ts";
import {
  assertClose,
  pattern,
  runLoop,
  SD15_CONFIG,
  sigma64,
  sigmaOracle,
} from "./testdata/reference.ts";

const config = parseSchedulerConfig(SD15_CONFIG);

/** α_t = 1/√(σ²+1), σ_t = σ α_t, λ = log α_t − log σ_t (DPM-Solver++ §3). */
function vp(sigma: number) {
  const alpha = 1 / Math.sqrt(sigma * sigma + 1);
  const s = sigma * alpha;
  return { alpha, sigma: s, lambda: Math.log(alpha) - Math.log(s) };
}

Deno.test("dpmpp_2m: linspace timesteps 999, 949, …, 50 (N+1 points)", () => {
  const s = new DpmSolverMultistepScheduler(config);
  s.setTimesteps(20);
  const ts = s.timesteps;
  deepStrictEqual([ts[0], ts[1], ts[2], ts[18], ts[19]], [999, 949, 899, 100, 50]);
  strictEqual(s.initNoiseSigma, 1);
  strictEqual(s.sigmas[20], 0);
});

Deno.test("dpmpp_2m: Karras N=20 sigmas and timesteps (published)", () => {
  const s = new DpmSolverMultistepScheduler(config, { karras: true });
  s.setTimesteps(20);
  // diffusers' DPMSolverMultistepScheduler with Karras sigmas, N = 20: sigmas 14.615, 11.725, 9.340, …, 0.0485, 0.0292;
  // timesteps 999, 962, 921, 876, 827, 772, …, 15, 6, 2, 0
  const sig = s.sigmas;
  deepStrictEqual(sig.slice(0, 3).map((v) => v.toFixed(3)), ["14.615", "11.725", "9.340"]);
  deepStrictEqual(sig.slice(18, 20).map((v) => v.toFixed(4)), ["0.0485", "0.0292"]);
  strictEqual(sig[20], 0);
  const ts = s.timesteps;
  deepStrictEqual(ts.slice(0, 6), [999, 962, 921, 876, 827, 772]);
  deepStrictEqual(ts.slice(-4), [15, 6, 2, 0]);
});

Deno.test("dpmpp_2m: first step is first order, second uses the midpoint 2M update", () => {
  const n = 64;
  const s = new DpmSolverMultistepScheduler(config);
  s.setTimesteps(20);
  const [t0, t1, t2] = s.timesteps;
  const p0 = vp(sigma64(t0)), p1 = vp(sigma64(t1)), p2 = vp(sigma64(t2));
  const x = pattern(n, 0.5), e0 = pattern(n, 1.5), e1 = pattern(n, 2.5);

  const out0 = s.step(e0, t0, x);
  const m0 = Array.from(x, (v, i) => (v - p0.sigma * e0[i]) / p0.alpha);
  assertClose(out0.predOriginalSample!, m0, 1e-5, "x0 (step 0)", 1e-4);
  const h0 = p1.lambda - p0.lambda;
  const first = Array.from(
    x,
    (v, i) => (p1.sigma / p0.sigma) * v - p1.alpha * (Math.exp(-h0) - 1) * m0[i],
  );
  assertClose(out0.prevSample, first, 1e-5, "prev (step 0)", 1e-4);

  const x1 = out0.prevSample;
  const out1 = s.step(e1, t1, x1);
  const m1 = Array.from(x1, (v, i) => (v - p1.sigma * e1[i]) / p1.alpha);
  const h = p2.lambda - p1.lambda;
  const r0 = h0 / h;
  const second = Array.from(x1, (v, i) => {
    const d1 = (m1[i] - m0[i]) / r0;
    return (p2.sigma / p1.sigma) * v - p2.alpha * (Math.exp(-h) - 1) * m1[i] -
      0.5 * p2.alpha * (Math.exp(-h) - 1) * d1;
  });
  assertClose(out1.prevSample, second, 1e-5, "prev (step 1)", 1e-4);
});

Deno.test("dpmpp_2m: full loops (linspace, karras, trailing) end at x0 and reset cleanly", () => {
  const n = 256;
  const x0 = pattern(n, 1.2).map((v) => v * 0.9);
  const noise = new TorchGenerator(4).randn(n);
  for (const options of [{}, { karras: true }, { timestepSpacing: "trailing" as const }]) {
    const s = new DpmSolverMultistepScheduler(config, options);
    for (const steps of [20, 8]) {
      s.setTimesteps(steps);
      const { final } = runLoop(s, noise, sigmaOracle(x0, s.sigmas));
      assertClose(final, x0, 1e-4, `final ${JSON.stringify(options)} N=${steps}`);
      s.setTimesteps(steps);
      deepStrictEqual(runLoop(s, noise, sigmaOracle(x0, s.sigmas)).final, final);
    }
  }
});

Deno.test("dpmpp_2m: addNoise is α_t x0 + σ_t ε; other DPM variants are refused", () => {
  const s = new DpmSolverMultistepScheduler(config);
  s.setTimesteps(20);
  const t = s.timesteps[4];
  const p = vp(sigma64(t));
  const x0 = pattern(16, 1), noise = pattern(16, 2);
  const want = Array.from(x0, (v, i) => p.alpha * v + p.sigma * noise[i]);
  assertClose(s.addNoise(x0, noise, t), want, 1e-5, "addNoise", 1e-4);
  throws(
    () => new DpmSolverMultistepScheduler(parseSchedulerConfig({ solver_order: 3 })),
    /solver_order=2, but the scheduler config sets 3/,
  );
  throws(
    () =>
      new DpmSolverMultistepScheduler(parseSchedulerConfig({ algorithm_type: "sde-dpmsolver++" })),
    /algorithm_type="dpmsolver\+\+"/,
  );
});

Deno.test("dpmpp_2m: v_prediction data prediction x0 = α_t x − σ_t v", () => {
  const s = new DpmSolverMultistepScheduler(
    parseSchedulerConfig({ ...SD15_CONFIG, prediction_type: "v_prediction" }),
  );
  s.setTimesteps(10);
  const t0 = s.timesteps[0];
  const p = vp(sigma64(t0));
  const x = pattern(16, 0.3), v = pattern(16, 0.8);
  const out = s.step(v, t0, x);
  assertClose(
    out.predOriginalSample!,
    Array.from(x, (xv, i) => p.alpha * xv - p.sigma * v[i]),
    1e-5,
    "x0",
    1e-4,
  );
});
