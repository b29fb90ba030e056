import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { EulerAncestralScheduler } from "./euler_ancestral.ts";
import {
  assertClose,
  pattern,
  runLoop,
  SD15_CONFIG,
  sigma64,
  sigmaOracle,
} from "./testdata/reference.ts";

const config = parseSchedulerConfig(SD15_CONFIG);

Deno.test("euler_a: SD config → linspace, init_noise_sigma ≈ 14.6146", () => {
  const s = new EulerAncestralScheduler(config);
  s.setTimesteps(20);
  ok(Math.abs(s.initNoiseSigma - 14.6146) < 1e-4, `init_noise_sigma ${s.initNoiseSigma}`);
  strictEqual(s.timesteps.length, 20);
  strictEqual(s.timesteps[19], 0);
  strictEqual(s.sigmas[20], 0);
});

Deno.test("euler_a: one step = Euler to σ_down plus σ_up·randn", () => {
  const n = 64;
  const s = new EulerAncestralScheduler(config);
  s.setTimesteps(20);
  const [t0, t1] = s.timesteps;
  const from = sigma64(t0), to = sigma64(t1);
  const up = Math.sqrt((to * to * (from * from - to * to)) / (from * from));
  const down = Math.sqrt(to * to - up * up);
  const x = pattern(n, 0.3).map((v) => v * 14), eps = pattern(n, 1.4);
  const scaled = s.scaleModelInput(x, t0);
  assertClose(scaled, Array.from(x, (v) => v / Math.sqrt(from * from + 1)), 1e-6, "scaled", 1e-5);
  const out = s.step(eps, t0, x, new TorchGenerator(21));
  const noise = new TorchGenerator(21).randn(n);
  const want = Array.from(x, (v, i) => v + eps[i] * (down - from) + noise[i] * up);
  assertClose(out.prevSample, want, 1e-4, "prev", 1e-5);
  throws(
    () => s.step(eps, t1, out.prevSample),
    /euler_a\.step draws noise and needs a TorchGenerator/,
  );
});

Deno.test("euler_a: full loop ends at x0, finite and seed-reproducible", () => {
  const n = 256;
  const x0 = pattern(n, 0.6).map((v) => v * 0.8);
  const noise = new TorchGenerator(8).randn(n);
  const s = new EulerAncestralScheduler(config);
  const run = (seed: number) => {
    s.setTimesteps(20);
    return runLoop(s, noise, sigmaOracle(x0, s.sigmas), new TorchGenerator(seed)).final;
  };
  const a = run(1), b = run(1), c = run(2);
  deepStrictEqual(a, b);
  ok(a.every(Number.isFinite) && c.every(Number.isFinite));
  // With the exact ε the last step (σ_to = 0, σ_up = 0) lands on x0 whatever the noise.
  assertClose(a, x0, 1e-4, "final");
  assertClose(c, x0, 1e-4, "final, other seed");
});

Deno.test("euler_a: the noise stream is one randn(n) per step, in step order", () => {
  // Intermediate latents depend on the seed; step k consumes the k-th randn(n) of the stream.
  const n = 32;
  const s = new EulerAncestralScheduler(config);
  s.setTimesteps(5);
  const x = pattern(n, 1), eps = pattern(n, 2);
  const gen = new TorchGenerator(77);
  s.step(eps, s.timesteps[0], x, gen);
  const second = s.step(eps, s.timesteps[1], x, gen).prevSample;
  const ref = new TorchGenerator(77);
  ref.randn(n);
  const noise = ref.randn(n);
  const [from, to] = [sigma64(s.timesteps[1]), sigma64(s.timesteps[2])];
  const up = Math.sqrt((to * to * (from * from - to * to)) / (from * from));
  const down = Math.sqrt(to * to - up * up);
  assertClose(
    second,
    Array.from(x, (v, i) => v + eps[i] * (down - from) + noise[i] * up),
    1e-4,
    "2nd",
    1e-5,
  );
  const other = new EulerAncestralScheduler(config);
  other.setTimesteps(5);
  notDeepStrictEqual(
    other.step(eps, other.timesteps[0], x, new TorchGenerator(78)).prevSample,
    second,
  );
});

Deno.test("euler_a: addNoise is x0 + σ(t)·ε", () => {
  const s = new EulerAncestralScheduler(config);
  s.setTimesteps(10);
  const t = s.timesteps[3];
  const x0 = pattern(16, 1), noise = pattern(16, 2);
  assertClose(
    s.addNoise(x0, noise, t),
    Array.from(x0, (v, i) => v + noise[i] * sigma64(t)),
    1e-5,
    "addNoise",
    1e-5,
  );
});
