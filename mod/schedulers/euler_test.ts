import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { EulerScheduler } from "./euler.ts";
import {
  assertClose,
  pattern,
  runLoop,
  SD15_CONFIG,
  sigma64,
  sigmaOracle,
} from "./testdata/reference.ts";

const config = parseSchedulerConfig(SD15_CONFIG);

Deno.test("euler: linspace timesteps are fractional; σ and init_noise_sigma follow", () => {
  const s = new EulerScheduler(config);
  s.setTimesteps(20);
  const ts = s.timesteps;
  strictEqual(ts[0], 999);
  strictEqual(ts[1], Math.fround((999 * 18) / 19));
  strictEqual(ts[19], 0);
  // σ(t) interpolated linearly between training timesteps, then a final 0
  // ᾱ near 1 is float32, so 1 − ᾱ (and σ_min) carries ~1e-5 relative error
  assertClose(s.sigmas, [...ts.map((t) => sigma64(t)), 0], 0, "sigmas", 3e-5);
  ok(Math.abs(s.initNoiseSigma - 14.6146) < 1e-4, `init_noise_sigma ${s.initNoiseSigma}`);
  // leading spacing: init_noise_sigma = sqrt(σ_max² + 1)
  const lead = new EulerScheduler(config, { timestepSpacing: "leading" });
  lead.setTimesteps(20);
  deepStrictEqual(lead.timesteps.slice(0, 3), [951, 901, 851]);
  const sMax = sigma64(951);
  assertClose([lead.initNoiseSigma], [Math.sqrt(sMax * sMax + 1)], 0, "leading init", 3e-6);
});

Deno.test("euler: scaleModelInput and one step match the Euler update", () => {
  const n = 64;
  const s = new EulerScheduler(config);
  s.setTimesteps(20);
  const [t0, t1] = s.timesteps;
  const s0 = sigma64(t0), s1 = sigma64(t1);
  const x = pattern(n, 0.8).map((v) => v * 14), eps = pattern(n, 1.9);
  assertClose(
    s.scaleModelInput(x, t0),
    Array.from(x, (v) => v / Math.sqrt(s0 * s0 + 1)),
    1e-6,
    "scaled",
    1e-5,
  );
  const out = s.step(eps, t0, x);
  // x0 = x − σ ε; d = (x − x0)/σ = ε; x_next = x + ε (σ1 − σ0)
  assertClose(out.predOriginalSample!, Array.from(x, (v, i) => v - s0 * eps[i]), 1e-4, "x0", 1e-5);
  assertClose(out.prevSample, Array.from(x, (v, i) => v + eps[i] * (s1 - s0)), 1e-4, "prev", 1e-5);
});

Deno.test("euler: v_prediction x0 = v·(−σ/√(σ²+1)) + x/(σ²+1)", () => {
  const s = new EulerScheduler(
    parseSchedulerConfig({ ...SD15_CONFIG, prediction_type: "v_prediction" }),
  );
  s.setTimesteps(10);
  const t0 = s.timesteps[0], sg = sigma64(t0);
  const x = pattern(16, 0.1), v = pattern(16, 0.6);
  const x0 = Array.from(x, (xv, i) => v[i] * (-sg / Math.sqrt(sg * sg + 1)) + xv / (sg * sg + 1));
  assertClose(s.step(v, t0, x).predOriginalSample!, x0, 1e-5, "v x0", 1e-5);
});

Deno.test("euler: full loops (linspace, leading, karras) end at x0", () => {
  const n = 256;
  const x0 = pattern(n, 2.5).map((v) => v * 0.9);
  const noise = new TorchGenerator(3).randn(n);
  for (const options of [{}, { timestepSpacing: "leading" as const }, { karras: true }]) {
    const s = new EulerScheduler(config, options);
    s.setTimesteps(25);
    const { final } = runLoop(s, noise, sigmaOracle(x0, s.sigmas));
    assertClose(final, x0, 1e-4, `final ${JSON.stringify(options)}`);
    // setTimesteps resets the step index: a second run gives the same result
    s.setTimesteps(25);
    deepStrictEqual(runLoop(s, noise, sigmaOracle(x0, s.sigmas)).final, final);
  }
});

Deno.test("euler: karras sigmas span the schedule's ends with ρ = 7", () => {
  const s = new EulerScheduler(config, { karras: true });
  s.setTimesteps(20);
  const sig = s.sigmas;
  const hi = sigma64(999), lo = sigma64(0);
  const expected = Array.from({ length: 20 }, (_, i) => {
    const r = i / 19;
    return (hi ** (1 / 7) + r * (lo ** (1 / 7) - hi ** (1 / 7))) ** 7;
  });
  assertClose(sig.slice(0, 20), expected, 0, "karras σ", 3e-5);
  strictEqual(sig[20], 0);
  // published (DPM++ Karras, same ends): 14.615, 11.725, 9.340, …
  deepStrictEqual(sig.slice(0, 3).map((v) => v.toFixed(3)), ["14.615", "11.725", "9.340"]);
});

Deno.test("euler: addNoise is x0 + σ(t)·ε; unknown timesteps are rejected", () => {
  const s = new EulerScheduler(config);
  s.setTimesteps(20);
  const t = s.timesteps[5];
  const x0 = pattern(16, 1), noise = pattern(16, 2);
  assertClose(
    s.addNoise(x0, noise, t),
    Array.from(x0, (v, i) => v + noise[i] * sigma64(t)),
    1e-5,
    "addNoise",
    1e-5,
  );
  throws(() => s.addNoise(x0, noise, 500), /timestep 500 is not in this scheduler's timesteps/);
});
