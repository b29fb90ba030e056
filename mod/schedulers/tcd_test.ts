/**
 * The TCD scheduler held against diffusers v0.27.2's own `TCDScheduler`
 * (`testdata/tcd_reference.json`, written by `testdata/make_tcd_reference.py`):
 * every schedule (config variants, `original_inference_steps`, strength,
 * N, and the errors), whole sampling loops with the generator's draws in
 * diffusers' order (η 0, 0.3, 1; ε and v prediction; 1, 2 and 4 steps), and
 * image-to-image starts (`set_timesteps(N, strength)`, `add_noise`).
 * Within float32 rounding, not to the bit: the recording machine's torch
 * builds `alphas_cumprod` with its vectorised `linspace`, one ulp off the
 * portable kernel's at most timesteps (see the script).
 */

import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "../random/mod.ts";
import { createScheduler } from "./factory.ts";
import { parseSchedulerConfig } from "./scheduler_config.ts";
import { TcdScheduler } from "./tcd.ts";
import { alphasCumprod64, assertClose, pattern, SD15_CONFIG } from "./testdata/reference.ts";

interface Step {
  t: number;
  prev: string;
  noised: string;
}
interface Loop {
  timesteps: number[];
  start: string;
  per_step: Step[];
  final: string;
  eta: number;
  seed: number;
  steps: number;
}

const fixture = JSON.parse(
  await Deno.readTextFile(new URL("./testdata/tcd_reference.json", import.meta.url)),
) as {
  diffusers_version: string;
  config: Record<string, unknown>;
  latent: number[];
  image_latents: string;
  schedules: Array<{
    config: Record<string, unknown>;
    original_inference_steps: number | null;
    strength: number;
    steps: number;
    timesteps?: number[];
    error?: string;
  }>;
  loops: Array<Loop & { prediction_type: "epsilon" | "v_prediction" }>;
  img2img: Array<Loop & { strength: number }>;
};

const f32 = (b64: string) => new Float32Array(Uint8Array.fromBase64(b64).buffer);
const make = (extra: Record<string, unknown> = {}, eta?: number) =>
  new TcdScheduler(parseSchedulerConfig({ ...fixture.config, ...extra }), { eta });

/** The pipeline's stub UNet: `0.1 · sample + 0.001 · t` in float32, as the Python one. */
const unet = (sample: Float32Array, t: number) =>
  sample.map((v) => Math.fround(Math.fround(v * Math.fround(0.1)) + Math.fround(0.001 * t)));

/** Runs the recorded loop from its start; every step within float32 rounding of diffusers'. */
function replay(s: TcdScheduler, loop: Loop, generator: TorchGenerator, what: string): void {
  let latents: Float32Array = f32(loop.start);
  deepStrictEqual(s.timesteps, loop.timesteps, `${what}: timesteps`);
  loop.per_step.forEach((want, i) => {
    const out = s.step(unet(latents, want.t), want.t, latents, generator);
    assertClose(out.prevSample, f32(want.prev), 1e-6, `${what} step ${i} prev`, 1e-6);
    latents = out.prevSample;
  });
  assertClose(latents, f32(loop.final), 1e-6, `${what} final`, 1e-6);
}

Deno.test("tcd: every recorded schedule and error of diffusers' set_timesteps", () => {
  strictEqual(fixture.diffusers_version, "0.27.2");
  ok(fixture.schedules.length >= 600);
  let errors = 0;
  for (const c of fixture.schedules) {
    const s = make(c.config);
    const what = JSON.stringify({ ...c, timesteps: undefined });
    const run = () => s.setTimesteps(c.steps, c.strength, c.original_inference_steps ?? undefined);
    if (c.error) {
      errors++;
      throws(run, RangeError, what);
    } else {
      run();
      deepStrictEqual(s.timesteps, c.timesteps, what);
    }
  }
  ok(errors > 20 && errors < fixture.schedules.length - 300, `${errors} error cases`);
});

Deno.test("tcd: the published grid; timestep_spacing and steps_offset change nothing", () => {
  const s = make();
  s.setTimesteps(1);
  deepStrictEqual(s.timesteps, [999]);
  s.setTimesteps(2);
  deepStrictEqual(s.timesteps, [999, 499]);
  s.setTimesteps(4);
  deepStrictEqual(s.timesteps, [999, 759, 499, 259]);
  for (const spacing of ["trailing", "linspace", "leading"]) {
    const other = make({ timestep_spacing: spacing, steps_offset: 0 });
    other.setTimesteps(4);
    deepStrictEqual(other.timesteps, s.timesteps, spacing);
  }
  // Image-to-image: strength 0.3 keeps int(50 · 0.3) = 15 grid steps, so one step starts at 299.
  s.setTimesteps(1, 0.3);
  deepStrictEqual(s.timesteps, [299]);
  strictEqual(s.initNoiseSigma, 1);
  strictEqual(s.scaleModelInput(pattern(4, 1), 299)[2], pattern(4, 1)[2]);
});

Deno.test("tcd: recorded sampling loops (eta 0, 0.3, 1; epsilon and v-prediction), generator draws in diffusers' order", () => {
  strictEqual(fixture.loops.length, 18);
  for (const loop of fixture.loops) {
    const what = `${loop.prediction_type}, ${loop.steps} steps, eta ${loop.eta}`;
    const generator = new TorchGenerator(loop.seed);
    // The pipeline's first draw is the initial latents.
    deepStrictEqual(generator.randn(f32(loop.start).length), f32(loop.start), `${what}: start`);
    const s = make({ prediction_type: loop.prediction_type }, loop.eta);
    s.setTimesteps(loop.steps);
    replay(s, loop, generator, what);
  }
});

Deno.test("tcd: recorded image-to-image starts (set_timesteps with strength, add_noise, the loop)", () => {
  const image = f32(fixture.image_latents);
  for (const run of fixture.img2img) {
    const what = `${run.steps} steps at strength ${run.strength}, eta ${run.eta}`;
    const s = make({}, run.eta);
    s.setTimesteps(run.steps, run.strength);
    const generator = new TorchGenerator(run.seed);
    const noise = generator.randn(image.length);
    assertClose(
      s.addNoise(image, noise, s.timesteps[0]),
      f32(run.start),
      1e-6,
      `${what}: start`,
      1e-6,
    );
    replay(s, run, generator, what);
  }
});

Deno.test("tcd: one step gives x0 noised to timestep 0's level, whatever eta; no generator needed", () => {
  const ac = alphasCumprod64();
  const x = pattern(64, 0.4), eps = pattern(64, 1.1);
  for (const eta of [0, 0.3, 1]) {
    const s = make({}, eta);
    s.setTimesteps(1);
    const out = s.step(eps, 999, x);
    const x0 = Array.from(x, (v, i) => (v - Math.sqrt(1 - ac[999]) * eps[i]) / Math.sqrt(ac[999]));
    assertClose(out.predOriginalSample!, x0, 1e-4, `x0, eta ${eta}`, 1e-5);
    const want = x0.map((v, i) => Math.sqrt(ac[0]) * v + Math.sqrt(1 - ac[0]) * eps[i]);
    assertClose(out.prevSample, want, 1e-4, `prev, eta ${eta}`, 1e-5);
  }
});

Deno.test("tcd: a middle step with eta > 0 needs the generator; stepping past the end fails", () => {
  const s = make({}, 1);
  s.setTimesteps(2);
  const x = pattern(32, 0.2), eps = pattern(32, 0.9);
  throws(() => s.step(eps, 999, x), /tcd \(eta > 0\)\.step draws noise and needs a TorchGenerator/);
  const det = make({}, 0);
  det.setTimesteps(2);
  det.step(eps, 999, x);
  det.step(eps, 499, x);
  throws(() => det.step(eps, 499, x), /called after the last of 2 steps/);
  throws(() => make().step(eps, 999, x), /call setTimesteps/);
  throws(() => make({}, 1.5), /tcd eta \(gamma\) must be in 0\.\.1, got 1\.5/);
  throws(() => make().setTimesteps(0), /positive integer/);
  throws(() => make().setTimesteps(1, 0), /strength must be in \(0, 1\]/);
});

Deno.test("tcd: the factory builds it with eta; spacing overrides are ignored as diffusers ignores them", () => {
  const s = createScheduler("tcd", SD15_CONFIG, { eta: 1, timestepSpacing: "trailing" });
  ok(s instanceof TcdScheduler);
  strictEqual((s as TcdScheduler).eta, 1);
  s.setTimesteps(4);
  deepStrictEqual(s.timesteps, [999, 759, 499, 259]);
  strictEqual((createScheduler("tcd", SD15_CONFIG) as TcdScheduler).eta, 0.3);
  throws(() => createScheduler("tcd", SD15_CONFIG, { karras: true }), /Karras/);
});
